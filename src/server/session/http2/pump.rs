//! Reading an HTTP/2 connection: the clear-text sniff, the client's bytes
//! into the protocol, and the protocol's events (requests, their bodies,
//! resets) into streams and app calls; [`HttpSession::h2_pump`] drives
//! every stream's answer until nothing moves.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use crate::h2::{Ended, Event};
use crate::http::RequestHead;
use crate::metrics::counters::Cause;
use crate::reply::Reply;

use super::super::app_call::AppCall;
use super::super::mode::Mode;
use super::super::HttpSession;
use super::{Http2, Stream};

/// Output the pump hands on before it is done (the output queue's
/// high-water mark holds the protocol back only once it has it).
const HAND_ON: usize = 64 * 1024;

impl HttpSession {
    /// The first bytes of a clear-text connection: the HTTP/2 preface
    /// (or, under `--http 2`, anything) turns it HTTP/2; else HTTP/1.1.
    pub(in crate::server::session) fn sniff_read(&mut self, data: &[u8], now: Instant) {
        self.sniffed.extend_from_slice(data);
        let verdict = crate::h2::sniff(&self.sniffed);
        if verdict == crate::h2::Sniffed::Undecided {
            return;
        }
        self.sniffing = false;
        let first = std::mem::take(&mut self.sniffed);
        let only_h2 = self.shared.http == crate::server::HttpVersion::Two;
        if verdict == crate::h2::Sniffed::Http2 || only_h2 {
            self.start_http2(&first, now);
        } else {
            self.http_read(&first, now);
        }
    }

    /// Turn this fresh connection into an HTTP/2 one; `first`: what it read
    /// so far (the preface onwards).
    pub(in crate::server::session) fn start_http2(&mut self, first: &[u8], now: Instant) {
        let defaults = self.shared.response_defaults.clone();
        let mut h2 = Http2::new(self.shared.http2, defaults);
        h2.heard(now, self.shared.http2.keep_alive_interval);
        h2.conn.recv(first);
        self.mode = Mode::Http2(Box::new(h2));
        self.h2_pump(now);
    }

    pub(in crate::server::session) fn h2_read(&mut self, data: &[u8], now: Instant) {
        if let Mode::Http2(h2) = &mut self.mode {
            h2.conn.recv(data);
            h2.heard(now, self.shared.http2.keep_alive_interval);
        }
        self.h2_pump(now);
    }

    pub(in crate::server::session) fn h2_eof(&mut self, now: Instant) {
        if let Mode::Http2(h2) = &mut self.mode {
            h2.conn.recv_eof();
        }
        self.h2_pump(now);
    }

    /// Drive the protocol, serve its events and the apps' answers, until
    /// nothing moves; then set the clocks.
    pub(in crate::server::session) fn h2_pump(&mut self, now: Instant) {
        let Mode::Http2(mut h2) = std::mem::replace(&mut self.mode, Mode::Http1) else {
            return;
        };
        // The protocol's output is handed on once the pump is done, or on
        // the way where it grows large: one write (one TLS record) rather
        // than one per round.
        let mut out_len = h2.conn.output_len();
        for _ in 0..64 {
            h2.conn.pause_sends(self.output.full());
            h2.conn.drive();
            let mut moved = false;
            while let Some(event) = h2.conn.next_event() {
                moved = true;
                self.h2_event(&mut h2, event, now);
            }
            // The ids in a vector kept for it: answering may end streams.
            let mut ids = std::mem::take(&mut h2.ids);
            ids.clear();
            ids.extend(h2.streams.keys().copied());
            for &id in &ids {
                moved |= self.h2_answer(&mut h2, id, now);
            }
            h2.ids = ids;
            let Http2 { conn, streams, .. } = &mut *h2;
            conn.take_written(|id, n| {
                if let Some(s) = streams.get_mut(&id) {
                    s.stalled_since = None;
                    if let Some(call) = &s.call {
                        call.written(n);
                    }
                }
            });
            for (&id, s) in streams.iter_mut() {
                if conn.queued(id) > 0 {
                    s.stalled_since.get_or_insert(now);
                }
            }
            moved |= h2.conn.output_len() != out_len;
            if h2.conn.output_len() >= HAND_ON {
                self.output.push_bytes(h2.conn.take_output());
            }
            out_len = h2.conn.output_len();
            if !moved {
                break;
            }
        }
        if h2.conn.has_output() {
            self.output.push_bytes(h2.conn.take_output());
        }
        if let Some(ended) = h2.conn.ended() {
            if let Ended::Error { ours, text, .. } = ended {
                if *ours {
                    tracing::info!("HTTP/2 connection ended: {text}");
                    self.meter_cause(Cause::BadRequest);
                } else {
                    tracing::debug!("HTTP/2 connection ended by the client: {text}");
                }
            }
            h2.end();
        }
        h2.pong_seen();
        let idle = h2.idle() || (h2.is_fresh() && h2.streams() == 0);
        let drain_by = h2.drain_by;
        self.mode = Mode::Http2(h2);
        self.deadline = match (idle, self.deadline) {
            // Fresh: the head's timeout set at the open still runs.
            (true, Some(d)) if self.h2_fresh() => Some(d),
            (true, _) => Some(now + self.shared.keep_alive_timeout),
            (false, _) => None,
        };
        if idle {
            self.deadline = self.deadline.min(drain_by).or(drain_by).or(self.deadline);
        }
        self.arm_send(now);
    }

    pub(super) fn h2_fresh(&self) -> bool {
        matches!(&self.mode, Mode::Http2(h2) if h2.is_fresh())
    }

    /// One event of the protocol.
    pub(super) fn h2_event(&mut self, h2: &mut Http2, event: Event, now: Instant) {
        match event {
            Event::Request { id, head } => self.h2_request(h2, id, head, now),
            Event::Data { id, data } => {
                let Some(call) = h2.streams.get_mut(&id).and_then(|s| s.call.as_mut()) else {
                    return; // a route's body: read and dropped
                };
                if let Err(e) = call.push_body(data.to_vec()) {
                    self.h2_buffer_failed(h2, id, &e);
                } else {
                    let takes = call.takes_input();
                    h2.conn.want_body(id, takes);
                }
            }
            Event::End { id } => {
                let Some(s) = h2.streams.get_mut(&id) else {
                    return;
                };
                s.body_done = true;
                if let Some(call) = &mut s.call {
                    if let Err(e) = call.end_body() {
                        self.h2_buffer_failed(h2, id, &e);
                    }
                }
            }
            Event::Reset { id } => {
                if let Some(s) = h2.streams.remove(&id) {
                    if let Some(meter) = &mut self.meter {
                        meter.dropped();
                    }
                    if let Some(call) = s.call {
                        call.abandon();
                    }
                }
            }
        }
    }

    /// A request: a route answers it once its body is read, else the app.
    pub(super) fn h2_request(&mut self, h2: &mut Http2, id: u32, head: RequestHead, now: Instant) {
        crate::server::request_budget::count();
        self.request_started = now;
        if let Some(meter) = &mut self.meter {
            meter.started();
        }
        let (call, route) = match (self.shared.router.route(&head), &self.shared.app) {
            (Some(reply), _) => (None, Some(reply)),
            (None, Some(app)) => (
                Some(self.new_call(app.clone(), head.clone(), None, Vec::new())),
                None,
            ),
            (None, None) => (None, Some(Reply::text(404, "Not Found"))),
        };
        let stream = Stream {
            head: call
                .as_ref()
                .map_or_else(|| Arc::new(head), |c| c.head.clone()),
            started: now,
            call,
            route,
            body_done: false,
            held: VecDeque::new(),
            file: None,
            status: None,
            bodiless: false,
            stalled_since: None,
            trailers: None,
        };
        let takes = stream.call.as_ref().is_none_or(AppCall::takes_input);
        h2.streams.insert(id, stream);
        h2.conn.want_body(id, takes);
    }

    /// The body's file failed: the app is never called; a 500.
    pub(super) fn h2_buffer_failed(&mut self, h2: &mut Http2, id: u32, e: &std::io::Error) {
        tracing::error!("buffering a request body: {e}");
        if let Some(s) = h2.streams.get_mut(&id) {
            if let Some(call) = s.call.take() {
                call.abandon();
            }
            s.route = Some(Reply::text(500, "Internal Server Error"));
            s.body_done = true;
        }
    }
}
