//! A session's HTTP/2 mode: the connection's streams, each answered as an
//! HTTP/1.1 request is (a route, the 404, or an [`AppCall`]), many at a
//! time. The protocol is [`crate::h2::H2Conn`]; here is what the server
//! does around it:
//!
//! - a stream's body is read while its call takes input (the conduit's room,
//!   a buffered body's file), else it waits in the client's stream window;
//! - an answer's events are handed to the protocol as they come, a file's
//!   bytes read a slice ahead of the window; the app is credited as the
//!   protocol takes them, so a stream whose window stays shut holds its app
//!   only until `--send-timeout` resets it;
//! - nothing more is handed over while the session's output is full;
//! - the connection idle (no stream open) for `--keep-alive-timeout` ends
//!   with GOAWAY; a drain sends the two GOAWAYs of RFC 9113 §6.8.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::app::ResponseEvent;
use crate::h2::{Ended, Event, H2Conn, Reason, Settings};
use crate::http::RequestHead;
use crate::metrics::counters::Cause;
use crate::reply::{Body, Reply};

use super::app_call::AppCall;
use super::mode::Mode;
use super::{access_log, HttpSession};

/// How far ahead of the window a file body is read (one protocol slice).
const FILE_AHEAD: usize = 64 * 1024;

/// The connection's HTTP/2 state.
pub(super) struct Http2 {
    conn: H2Conn,
    streams: HashMap<u32, Stream>,
    /// In a drain: when a client that has not answered the GOAWAY's PING,
    /// with no stream open, is closed on.
    drain_by: Option<Instant>,
    /// Keep-alive (`--http2-keep-alive-*`): when a quiet connection is sent
    /// a PING, and when one unanswered closes it.
    ping_at: Option<Instant>,
    pong_by: Option<Instant>,
}

/// One stream being answered.
struct Stream {
    head: Arc<RequestHead>,
    started: Instant,
    /// The app answering it (None: a route's answer).
    call: Option<AppCall>,
    /// A route's answer, given once the body is read.
    route: Option<Reply>,
    /// The request's body is read whole.
    body_done: bool,
    /// The app's events behind a file still being read.
    held: VecDeque<ResponseEvent>,
    file: Option<FileBody>,
    /// The answer's head is out; `bodiless`: nothing may follow it (HEAD, 204, 304).
    status: Option<u16>,
    bodiless: bool,
    /// Since when answer bytes wait for a window that stays shut.
    stalled_since: Option<Instant>,
    /// The app's trailers, sent with the end.
    trailers: Option<crate::http::Fields>,
}

struct FileBody {
    file: File,
    offset: u64,
    remaining: u64,
}

impl Http2 {
    pub(super) fn new(settings: Settings, defaults: Option<Arc<crate::http::Defaults>>) -> Http2 {
        let mut conn = H2Conn::new(settings);
        if let Some(d) = defaults {
            conn.set_defaults(d);
        }
        Http2 {
            conn,
            streams: HashMap::new(),
            drain_by: None,
            ping_at: None,
            pong_by: None,
        }
    }

    /// The client was heard from: the keep-alive clock starts again (its
    /// PING's answer is seen once the protocol has read it: [`Self::pong_seen`]).
    fn heard(&mut self, now: Instant, interval: Option<std::time::Duration>) {
        self.ping_at = interval.map(|i| now + i);
    }

    fn pong_seen(&mut self) {
        if self.pong_by.is_some() && !self.conn.awaiting_pong() {
            self.pong_by = None;
        }
    }

    /// When the keep-alive clock next needs the session.
    pub(super) fn keep_alive_deadline(&self) -> Option<Instant> {
        self.pong_by.or(self.ping_at)
    }

    /// No stream open, and a request came before.
    pub(super) fn idle(&self) -> bool {
        self.streams.is_empty() && self.conn.open_streams() == 0 && !self.conn.is_fresh()
    }

    pub(super) fn is_fresh(&self) -> bool {
        self.conn.is_fresh()
    }

    /// The protocol is over (its last bytes are in the session's output).
    pub(super) fn ended(&self) -> bool {
        self.conn.ended().is_some()
    }

    pub(super) fn streams(&self) -> usize {
        self.streams.len()
    }

    /// A drain began: GOAWAY (RFC 9113 §6.8), the open streams finish;
    /// with none open, the connection waits for the PING's answer until `by`.
    pub(super) fn drain(&mut self, by: Instant) {
        self.conn.graceful_shutdown();
        self.drain_by = Some(by);
    }

    /// The earliest moment a stalled stream runs out of `send_timeout`.
    pub(super) fn stall_deadline(&self, send_timeout: std::time::Duration) -> Option<Instant> {
        self.streams
            .values()
            .filter_map(|s| s.stalled_since)
            .min()
            .map(|t| t + send_timeout)
    }

    /// The earliest moment a stream's app call runs past `--request-timeout`.
    pub(super) fn call_deadline(&self, timeout: Option<std::time::Duration>) -> Option<Instant> {
        let timeout = timeout?;
        self.streams
            .values()
            .filter_map(|s| s.call.as_ref()?.called_at)
            .min()
            .map(|t| t + timeout)
    }

    /// The drain's `--stream-drain-timeout` came: an answer still streaming
    /// is told its client has gone (ASGI's `http.disconnect`), as on HTTP/1.1.
    pub(super) fn tell_streams(&self) {
        for s in self.streams.values().filter(|s| s.status.is_some()) {
            if let Some(call) = &s.call {
                call.hang_up();
            }
        }
    }

    /// The connection is gone: every app still answering is told.
    pub(super) fn end(&mut self) {
        for (_, s) in self.streams.drain() {
            if let Some(call) = s.call {
                call.abandon();
            }
        }
    }
}

impl HttpSession {
    /// The first bytes of a clear-text connection: the HTTP/2 preface
    /// (or, under `--http 2`, anything) turns it HTTP/2; else HTTP/1.1.
    pub(super) fn sniff_read(&mut self, data: &[u8], now: Instant) {
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
    pub(super) fn start_http2(&mut self, first: &[u8], now: Instant) {
        let defaults = self.shared.response_defaults.clone();
        let mut h2 = Http2::new(self.shared.http2, defaults);
        h2.heard(now, self.shared.http2.keep_alive_interval);
        h2.conn.recv(first);
        self.mode = Mode::Http2(Box::new(h2));
        self.h2_pump(now);
    }

    pub(super) fn h2_read(&mut self, data: &[u8], now: Instant) {
        if let Mode::Http2(h2) = &mut self.mode {
            h2.conn.recv(data);
            h2.heard(now, self.shared.http2.keep_alive_interval);
        }
        self.h2_pump(now);
    }

    /// The keep-alive clock ran out: a PING to a quiet connection, or, its
    /// PING unanswered for `--http2-keep-alive-timeout`, the connection closed.
    pub(super) fn h2_keep_alive(&mut self, now: Instant) {
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

    pub(super) fn h2_eof(&mut self, now: Instant) {
        if let Mode::Http2(h2) = &mut self.mode {
            h2.conn.recv_eof();
        }
        self.h2_pump(now);
    }

    /// Drive the protocol, serve its events and the apps' answers, until
    /// nothing moves; then set the clocks.
    pub(super) fn h2_pump(&mut self, now: Instant) {
        let Mode::Http2(mut h2) = std::mem::replace(&mut self.mode, Mode::Http1) else {
            return;
        };
        for _ in 0..64 {
            h2.conn.pause_sends(self.output.full());
            h2.conn.drive();
            let mut moved = false;
            while let Some(event) = h2.conn.next_event() {
                moved = true;
                self.h2_event(&mut h2, event, now);
            }
            let ids: Vec<u32> = h2.streams.keys().copied().collect();
            for id in ids {
                moved |= self.h2_answer(&mut h2, id, now);
            }
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
            let out = h2.conn.take_output();
            if !out.is_empty() {
                moved = true;
                self.output.push_bytes(out);
            }
            if !moved {
                break;
            }
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

    fn h2_fresh(&self) -> bool {
        matches!(&self.mode, Mode::Http2(h2) if h2.is_fresh())
    }

    /// One event of the protocol.
    fn h2_event(&mut self, h2: &mut Http2, event: Event, now: Instant) {
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
    fn h2_request(&mut self, h2: &mut Http2, id: u32, head: RequestHead, now: Instant) {
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
    fn h2_buffer_failed(&mut self, h2: &mut Http2, id: u32, e: &std::io::Error) {
        tracing::error!("buffering a request body: {e}");
        if let Some(s) = h2.streams.get_mut(&id) {
            if let Some(call) = s.call.take() {
                call.abandon();
            }
            s.route = Some(Reply::text(500, "Internal Server Error"));
            s.body_done = true;
        }
    }

    /// Move stream `id`'s answer on: the call made when due, its events
    /// handed to the protocol, a file read ahead. True if anything moved.
    fn h2_answer(&mut self, h2: &mut Http2, id: u32, now: Instant) -> bool {
        let Some(s) = h2.streams.get_mut(&id) else {
            return false;
        };
        let mut moved = false;
        if s.body_done && s.route.is_some() {
            let reply = s.route.take().expect("checked");
            self.h2_reply(h2, id, reply);
            return true;
        }
        if let Some(call) = &mut s.call {
            if call.due() && !call.call() {
                return false;
            }
            if call.take_continue() {
                h2.conn.send_continue(id);
            }
            let wanted = h2.conn.want_body(id, !s.body_done && call.takes_input());
            let mut events = Vec::new();
            call.conduit.take_events(&mut events);
            s.held.extend(events);
            moved |= wanted;
        }
        moved |= self.h2_file(h2, id);
        loop {
            let Some(s) = h2.streams.get_mut(&id) else {
                return true;
            };
            if s.file.is_some() || s.call.is_none() {
                break;
            }
            let Some(event) = s.held.pop_front() else {
                break;
            };
            moved = true;
            if self.h2_event_out(h2, id, event, now) {
                self.h2_done(h2, id);
                break;
            }
        }
        moved
    }

    /// Hand one of the app's events to the protocol; true once the answer is over.
    fn h2_event_out(
        &mut self,
        h2: &mut Http2,
        id: u32,
        event: ResponseEvent,
        _now: Instant,
    ) -> bool {
        let s = h2.streams.get_mut(&id).expect("present");
        let call = s.call.as_mut().expect("an app's stream");
        match event {
            ResponseEvent::Start { status, headers } if s.status.is_none() => {
                let list: Vec<(&str, &[u8])> = headers.iter().collect();
                s.bodiless = s.head.is_head() || !crate::http::response::status_allows_body(status);
                h2.conn.respond(id, status, &list, s.bodiless);
                s.status = Some(status);
                call.status = Some(status);
                if let Some(format) = &self.shared.access_log {
                    call.logged_headers = access_log::kept_headers(format, list);
                }
                false
            }
            ResponseEvent::Body(data) if s.status.is_some() => {
                call.sent += data.len() as u64;
                if s.bodiless {
                    call.written(data.len());
                } else {
                    h2.conn.send(id, data);
                }
                false
            }
            ResponseEvent::File { file, offset, len } if s.status.is_some() => {
                call.sent += len;
                if s.bodiless {
                    call.written(len as usize);
                } else {
                    s.file = Some(FileBody {
                        file,
                        offset,
                        remaining: len,
                    });
                }
                false
            }
            ResponseEvent::Trailers(fields) if s.status.is_some() => {
                s.trailers = Some(fields);
                false
            }
            ResponseEvent::End if s.status.is_some() => {
                if !s.bodiless {
                    let list = s.trailers.take().map(|t| {
                        let list: Vec<(&str, &[u8])> = t.iter().collect();
                        crate::h2::head::trailers(&list)
                    });
                    h2.conn.finish(id, list);
                }
                true
            }
            event => {
                let started = s.status.is_some();
                if !matches!(event, ResponseEvent::Abort) {
                    tracing::warn!(?event, "the application answered out of order");
                }
                if started {
                    // Part of the answer is out: only a reset tells the client it failed.
                    h2.conn.reset(id, Reason::INTERNAL_ERROR);
                } else {
                    let reply = Reply::text(500, "Internal Server Error");
                    call.status = Some(500);
                    self.h2_reply(h2, id, reply);
                }
                true
            }
        }
    }

    /// Read the file body of stream `id` a slice ahead of its window; its
    /// held events go on once it is whole. True if anything was read.
    fn h2_file(&mut self, h2: &mut Http2, id: u32) -> bool {
        use std::os::unix::fs::FileExt;
        let Some(s) = h2.streams.get_mut(&id) else {
            return false;
        };
        let Some(body) = &mut s.file else {
            return false;
        };
        let mut moved = false;
        while body.remaining > 0 && h2.conn.queued(id) < FILE_AHEAD {
            let n = (body.remaining as usize).min(FILE_AHEAD);
            let mut buf = vec![0; n];
            match body.file.read_at(&mut buf, body.offset) {
                Ok(0) | Err(_) => {
                    // The file shrank or failed under us: the answer cannot be whole.
                    tracing::warn!("HTTP/2 stream {id}: a file body could not be read whole");
                    h2.conn.reset(id, Reason::INTERNAL_ERROR);
                    body.remaining = 0;
                    s.held.clear();
                    s.held.push_back(ResponseEvent::Abort);
                    break;
                }
                Ok(got) => {
                    buf.truncate(got);
                    body.offset += got as u64;
                    body.remaining -= got as u64;
                    h2.conn.send(id, Bytes::from(buf));
                    moved = true;
                }
            }
        }
        if body.remaining == 0 {
            s.file = None;
            if s.call.is_none() {
                // A route's file: its answer ends with it.
                h2.conn.finish(id, None);
                self.h2_done(h2, id);
            }
        }
        moved
    }

    /// Answer stream `id` with a route's reply (or the server's own).
    fn h2_reply(&mut self, h2: &mut Http2, id: u32, reply: Reply) {
        let Reply {
            status,
            headers,
            body,
        } = reply;
        let s = h2.streams.get_mut(&id).expect("present");
        let len = body.len().to_string();
        let mut list: Vec<(&str, &[u8])> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_bytes()))
            .collect();
        if !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        {
            list.push(("content-length", len.as_bytes()));
        }
        s.bodiless = s.head.is_head()
            || !crate::http::response::status_allows_body(status)
            || body.is_empty();
        s.status = Some(status);
        h2.conn.respond(id, status, &list, s.bodiless);
        let bytes = if s.bodiless { 0 } else { body.len() };
        let routed = s.call.is_none();
        if let Some(format) = self.shared.access_log.as_deref().filter(|_| routed) {
            let kept = headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes()));
            let answer = access_log::Answered {
                head: s.head.clone(),
                status,
                bytes,
                response_headers: access_log::kept_headers(format, kept),
                started: s.started,
                peer: None,
            };
            let at = self.output.queued();
            self.log
                .push(at, answer, Instant::now(), &self.peer, format);
        }
        if let Some(meter) = self.meter.as_mut().filter(|_| routed) {
            meter.answered(&s.head.method, status, s.started, self.output.queued());
        }
        if s.bodiless {
            if routed {
                h2.streams.remove(&id);
            }
            return;
        }
        match body {
            Body::Empty => {}
            Body::Bytes(b) => {
                h2.conn.send(id, Bytes::from(b));
                h2.conn.finish(id, None);
                if routed {
                    h2.streams.remove(&id);
                }
            }
            Body::File { file, offset, len } => {
                s.file = Some(FileBody {
                    file,
                    offset,
                    remaining: len,
                });
                self.h2_file(h2, id);
            }
        }
    }

    /// Stream `id`'s answer is over: logged, counted, forgotten.
    fn h2_done(&mut self, h2: &mut Http2, id: u32) {
        let Some(mut s) = h2.streams.remove(&id) else {
            return;
        };
        let at = self.output.queued();
        if let Some(mut call) = s.call.take() {
            let status = call.status.unwrap_or(500);
            self.log_call(&mut call, at);
            if let Some(meter) = &mut self.meter {
                meter.answered(&s.head.method, status, s.started, at);
            }
            call.conduit.close();
        }
    }

    /// A stream's answer waited for a shut window for `--send-timeout`:
    /// it is reset, and its app told.
    pub(super) fn h2_stalled(&mut self, now: Instant) {
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
    pub(super) fn h2_calls_timed_out(&mut self, now: Instant) {
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
    pub(super) fn h2_idle_timeout(&mut self, now: Instant) {
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
