//! An HTTP/2 connection's clocks: keep-alive PINGs, a stream whose window
//! stays shut past `--send-timeout`, a call past `--request-timeout`, and
//! the idle connection's GOAWAY.

use std::time::Instant;

use crate::h2::Reason;
use crate::metrics::counters::Cause;
use crate::reply::Reply;

use super::super::mode::Mode;
use super::super::HttpSession;

impl HttpSession {
    /// The keep-alive clock ran out: a PING to a quiet connection, or, its
    /// PING unanswered for `--http2-keep-alive-timeout`, the connection closed.
    pub(in crate::server::session) fn h2_keep_alive(&mut self, now: Instant) {
        let settings = self.shared.http2;
        let Mode::Http2(h2) = &mut self.mode else {
            return;
        };
        if h2.pong_by.is_some_and(|by| by <= now) {
            tracing::debug!("HTTP/2: the client did not answer a keep-alive PING in time: closing");
            self.meter_cause(Cause::Http2PingTimeout);
            return self.give_up_on_client();
        }
        if h2.ping_at.is_some_and(|at| at <= now) {
            h2.ping_at = None;
            h2.conn.ping();
            h2.pong_by = Some(now + settings.keep_alive_timeout);
        }
        self.h2_pump(now);
    }

    /// A stream's answer waited for a shut window for `--send-timeout`:
    /// it is reset, and its app told.
    pub(in crate::server::session) fn h2_stalled(&mut self, now: Instant) {
        let timeout = self.shared.send_timeout;
        let Mode::Http2(h2) = &mut self.mode else {
            return;
        };
        let late: Vec<u32> = h2
            .streams
            .iter()
            .filter(|(_, s)| s.stalled_since.is_some_and(|t| t + timeout <= now))
            .map(|(&id, _)| id)
            .collect();
        for id in late {
            tracing::debug!(
                "HTTP/2 stream {id}: the client's window stayed shut for the send timeout"
            );
            h2.conn.reset(id, Reason::CANCEL);
            if let Some(s) = h2.streams.remove(&id) {
                if let Some(meter) = &mut self.meter {
                    meter.dropped();
                }
                if let Some(call) = s.call {
                    call.abandon();
                }
            }
        }
        self.h2_pump(now);
    }

    /// Stream calls ran past `--request-timeout`: as on HTTP/1.1, the app
    /// is told (it logs the traceback, cancels where it can) and the call
    /// abandoned; the stream gets a 504 if no answer had begun, else a reset.
    pub(in crate::server::session) fn h2_calls_timed_out(&mut self, now: Instant) {
        let Some(timeout) = self.shared.request_timeout else {
            return;
        };
        let Mode::Http2(h2) = &mut self.mode else {
            return;
        };
        let late: Vec<u32> = h2
            .streams
            .iter()
            .filter(|(_, s)| {
                s.call
                    .as_ref()
                    .and_then(|c| c.called_at)
                    .is_some_and(|t| t + timeout <= now)
            })
            .map(|(&id, _)| id)
            .collect();
        for id in late {
            let s = h2.streams.get_mut(&id).expect("listed");
            let call = s.call.take().expect("listed");
            let answered = s.status.is_some();
            tracing::warn!(
                "{} {}: the application's call ran past --request-timeout ({timeout:?}): {}",
                s.head.method,
                s.head.target,
                if answered {
                    "resetting its stream"
                } else {
                    "504"
                }
            );
            call.app.timed_out(&call.conduit);
            call.abandon();
            if answered {
                h2.conn.reset(id, Reason::INTERNAL_ERROR);
                h2.streams.remove(&id);
                if let Some(meter) = &mut self.meter {
                    meter.dropped();
                }
            } else {
                s.held.clear();
                s.route = Some(Reply::text(504, "Gateway Timeout"));
                s.body_done = true;
                h2.conn.want_body(id, false);
            }
        }
        self.h2_pump(now);
    }

    /// The connection sat idle for the keep-alive timeout, or a fresh one
    /// sent no request in the head's: GOAWAY, then closed.
    pub(in crate::server::session) fn h2_idle_timeout(&mut self, now: Instant) {
        if let Mode::Http2(h2) = &mut self.mode {
            h2.conn.abrupt_shutdown(Reason::NO_ERROR);
        }
        self.h2_pump(now);
        if !matches!(&self.mode, Mode::Http2(h2) if h2.ended()) {
            // h2 waits for nothing after its GOAWAY with no stream open;
            // should it, the connection is closed all the same.
            self.closed = true;
        }
        self.deadline = None;
    }
}
