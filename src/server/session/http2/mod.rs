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

use crate::app::ResponseEvent;
use crate::h2::{H2Conn, Settings};
use crate::http::RequestHead;
use crate::reply::Reply;

use super::app_call::AppCall;

mod answer;
mod clocks;
mod pump;

/// How far ahead of the window a file body is read (one protocol slice).
const FILE_AHEAD: usize = 64 * 1024;

/// The connection's HTTP/2 state.
pub(super) struct Http2 {
    conn: H2Conn,
    streams: HashMap<u32, Stream>,
    /// Room for the streams' ids while each is answered (`h2_pump`).
    ids: Vec<u32>,
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
            ids: Vec::new(),
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
