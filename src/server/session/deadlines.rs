//! A session's clocks: the read deadline that fits its state (a head's, a
//! body's, the keep-alive's), the send clock, the app call's
//! (`--request-timeout`), and what each does once it passed.

use std::time::Instant;

use crate::http::HttpError;
use crate::metrics::counters::Cause;
use crate::reply::Reply;

use super::mode::Mode;
use super::HttpSession;

/// How a drain holds a kept-alive connection for the request that may be on
/// its way ([`HttpSession::drain_hold`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DrainHold {
    /// Its last answer is still being sent: the grace starts when it is.
    AfterSent,
    /// Until then.
    Until(Instant),
}

/// When the drain tells a stream to end (`--stream-drain-timeout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StreamTell {
    At(Instant),
    /// Told; a WebSocket accepted since is told at once.
    Told,
}

impl HttpSession {
    /// Set the read deadline that fits the state: the head's timeout while a
    /// head is arriving, the body's while a body is wanted, the keep-alive
    /// timeout while idle, none otherwise.
    pub(super) fn rearm(&mut self, now: Instant) {
        if self.closed {
            return;
        }
        if self.wants_body() {
            self.body_clock.get_or_insert(now);
        } else {
            self.body_clock = None;
        }
        self.deadline = if let Some(start) = self.head_started {
            Some(start + self.shared.header_read_timeout)
        } else if let Some(since) = self.body_clock {
            Some(since + self.shared.body_read_timeout)
        } else if self.between_requests() {
            let idle = now + self.shared.keep_alive_timeout;
            if let (Some(DrainHold::AfterSent), Some(grace)) =
                (self.held_by_drain, self.shared.drain_idle)
            {
                self.held_by_drain = Some(DrainHold::Until(now + grace));
            }
            match self.held_by_drain {
                Some(DrainHold::Until(until)) => Some(until.min(idle)),
                _ => Some(idle),
            }
        } else {
            None
        };
    }

    /// A request body is being read and the session reads it now (not held
    /// back by the app or the output). The protocol reads a head, a body,
    /// or nothing; of a head, either none of it is here (idle) or part is.
    /// A client waiting for `100 Continue` the app has not asked for yet is
    /// not late.
    fn wants_body(&self) -> bool {
        matches!(self.mode, Mode::Http1)
            && self.app.as_ref().is_none_or(|call| !call.continue_owed)
            && crate::backend::Session::wants_read(self)
            && !self.conn.is_idle()
            && !self.conn.has_partial_head()
    }

    /// A kept-alive connection whose last answer went out (or is going out,
    /// or is being written) without `Connection: close` as the drain begins:
    /// a client that sends back to back may have sent its next request
    /// already, and a close now would reach it unanswered. Held until the
    /// idle grace since that answer's last byte was sent (when its keep-alive
    /// clock started) is over; a request in it is answered with
    /// `Connection: close`. Not held when idle for longer already, or with no
    /// grace (`M0_DRAIN_IDLE_MS=0`): closed once its answer is sent. Whether
    /// held.
    pub(super) fn drain_hold(&mut self, now: Instant) -> bool {
        let Some(grace) = self.shared.drain_idle else {
            return false;
        };
        self.held_by_drain = if self.between_requests() {
            let answered = self
                .deadline
                .and_then(|d| d.checked_sub(self.shared.keep_alive_timeout))
                .unwrap_or(now);
            let until = answered + grace;
            (until > now).then_some(DrainHold::Until(until))
        } else {
            // Its clock starts when the answer is done and sent (`rearm`).
            Some(DrainHold::AfterSent)
        };
        if let Some(DrainHold::Until(until)) = self.held_by_drain {
            self.deadline = Some(self.deadline.map_or(until, |d| d.min(until)));
        }
        self.held_by_drain.is_some()
    }

    /// The drain's `--stream-drain-timeout` came: a WebSocket gets its Close
    /// (1001), and an answer still streaming is told its client has gone
    /// (ASGI's `http.disconnect`) while what it sends still goes out, so an
    /// app that listens ends it cleanly. A WSGI iterator does not listen: it
    /// is closed at the graceful timeout.
    pub(super) fn tell_stream(&mut self, now: Instant) {
        self.stream_tell = Some(StreamTell::Told);
        match &self.mode {
            Mode::WebSocket(_) => self.ws_shutdown(now),
            Mode::Http1 => {
                if let Some(call) = self.app.as_ref().filter(|call| call.status.is_some()) {
                    call.hang_up();
                }
            }
            Mode::Http2(h2) => h2.tell_streams(),
        }
    }

    /// Start or stop the send clock as output is queued or drained.
    pub(super) fn arm_send(&mut self, now: Instant) {
        if self.output.is_empty() {
            self.send_since = None;
        } else {
            self.send_since.get_or_insert(now);
        }
    }

    pub(super) fn send_deadline(&self) -> Option<Instant> {
        self.send_since
            .map(|since| since + self.shared.send_timeout)
    }

    /// When the app's call runs past `--request-timeout`.
    pub(super) fn call_deadline(&self) -> Option<Instant> {
        let timeout = self.shared.request_timeout?;
        Some(self.app.as_ref()?.called_at? + timeout)
    }

    /// The app's call ran past `--request-timeout`: the app is told (it logs
    /// the call's traceback, and cancels it where it can), the call is
    /// abandoned (its later answer dropped), and the client gets a 504 if no
    /// answer had started, else the connection closes under the part sent.
    pub(super) fn call_timed_out(&mut self, now: Instant) {
        let Some(call) = self.app.take() else {
            return;
        };
        let head = call.head.clone();
        tracing::warn!(
            "{} {}: the application's call ran past --request-timeout ({:?}){}",
            head.method,
            head.target,
            self.shared.request_timeout.unwrap_or_default(),
            if call.status.is_some() {
                ": closing the connection under its answer"
            } else {
                ": 504"
            }
        );
        call.app.timed_out(&call.conduit);
        let answered = call.status.is_some();
        call.abandon();
        if answered {
            return self.close_now();
        }
        let mut out = Vec::new();
        self.conn.close_after_response();
        self.respond(&head, Reply::text(504, "Gateway Timeout"), &mut out);
        self.output.push_bytes(out);
        self.meter_answers(now);
        self.closed = true;
        self.deadline = None;
        self.body_clock = None;
        self.arm_send(now);
    }

    /// The HTTP read deadline passed.
    ///
    /// A body still owed to a route or an app: the client is told why (if no
    /// answer has started), then the connection closes. One read only to be
    /// dropped after a complete answer just closes.
    pub(super) fn read_timed_out(&mut self, now: Instant) {
        let owed = self.app.is_some() || self.pending.is_some();
        if self.body_clock.is_some() && self.head_started.is_none() && owed {
            let mut out = Vec::new();
            if let Some(call) = self.app.take() {
                call.abandon();
            }
            self.pending = None;
            self.conn.write_error(&HttpError::RequestTimeout, &mut out);
            self.output.push_bytes(out);
            self.meter_cause(Cause::BodyTimeout);
            self.meter_answers(now);
            self.closed = true;
            self.deadline = None;
            self.body_clock = None;
            self.arm_send(now);
            return;
        }
        // A slow head or an idle keep-alive: close without an answer, as
        // clients expect of an idle close, and drop what was queued.
        self.meter_cause(if self.shutting {
            Cause::Shutdown
        } else if self.between_requests() && !self.conn.is_fresh() {
            Cause::KeepAliveTimeout
        } else {
            Cause::HeaderTimeout
        });
        self.close_now();
    }
}
