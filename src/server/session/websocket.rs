//! A session's WebSocket mode: after the app accepted an upgrade, the
//! connection's bytes go through a [`WsConn`] instead of the HTTP parser.
//!
//! The handshake is HTTP: a GET that asks for a WebSocket, with WebSockets on
//! and an app that takes them ([`App::websocket`]), is checked by
//! [`handshake::validate`] (a refusal is answered 400/426 without the app) and
//! handed to the app as [`RequestKind::WebSocket`]. The app's
//! [`ResponseEvent::WsAccept`] becomes the `101` (see `dispatch`), and the
//! session switches here; a plain HTTP answer or a `WsClose` (403) before it
//! denies the request and the connection stays HTTP.
//!
//! In WebSocket mode the core thread answers pings itself and ignores pongs;
//! text and binary messages go to the app through the conduit, under its
//! high water (the socket is not read while the app has enough buffered).
//! The app's messages are framed as they come and credited as written.
//! Closing: a Close from the client is answered and reported to the app as
//! [`WsMessage::Disconnect`] with its code; a protocol error is answered
//! with a Close carrying its code, and the app is told the same. Once both
//! Closes passed (or after an error) the connection closes when its output
//! is written; a client that never answers our Close is dropped after
//! [`CLOSE_TIMEOUT`]. A quiet client is pinged ([`crate::ws::keepalive`]),
//! and dropped (the app told 1006) if nothing comes back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::app::{App, Conduit, ResponseEvent, WsMessage};
use crate::backend::{Linger, Session};
use crate::http::RequestHead;
use crate::metrics::counters::Cause;
use crate::reply::Reply;
use crate::ws::close::{ABNORMAL, GOING_AWAY, INTERNAL_ERROR, NORMAL};
use crate::ws::keepalive::{Clock, Due};
use crate::ws::{handshake, Upgrade, WsConn, WsEvent};

use super::deadlines::StreamTell;
use super::mode::Mode;
use super::output::OUTPUT_HIGH_WATER;
use super::HttpSession;

/// How long the client has to answer our Close before the connection is dropped.
pub(super) const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// An accepted WebSocket: the protocol and the app's conduit.
pub(super) struct WsSession {
    conn: WsConn,
    conduit: Arc<Conduit>,
    /// The app was sent its [`WsMessage::Disconnect`]: nothing more goes to it.
    disconnected: bool,
    /// When the client must have answered our Close by.
    close_deadline: Option<Instant>,
    /// When the client was last heard from, and pinged.
    clock: Clock,
    /// Dropped for an unanswered ping: nothing is coming from the client.
    pinged_out: bool,
}

impl WsSession {
    /// Whether the socket may be read: the app has room and the client has
    /// more to say.
    pub(super) fn takes_input(&self) -> bool {
        !self.disconnected && !self.conn.close_received() && self.conduit.body_room()
    }

    /// Both Closes passed, or the connection failed: close once written.
    pub(super) fn done(&self) -> bool {
        self.conn.must_close()
    }

    /// We failed the connection (a protocol error, a message over the
    /// limit) and the client has not closed: it may be sending still, and
    /// should read our Close before the connection ends. Not after an
    /// unanswered ping: that client was judged gone.
    pub(super) fn linger(&self) -> Linger {
        if self.pinged_out {
            Linger::No
        } else if self.conn.must_close() && !self.conn.close_received() {
            Linger::Yes
        } else {
            Linger::IfUnread
        }
    }

    /// Open both ways: the keepalive runs (a closing handshake has its own clock).
    fn open(&self) -> bool {
        !self.disconnected && !self.conn.close_sent() && !self.conn.close_received()
    }

    /// `n` bytes of output were written: credit for the app.
    pub(super) fn written(&self, n: usize) {
        self.conduit.written(n);
    }

    /// Tell the app the connection ended with `code` and `reason` (once).
    fn disconnect(&mut self, code: u16, reason: String) {
        if !self.disconnected {
            self.disconnected = true;
            self.conduit.push_ws(WsMessage::Disconnect { code, reason });
        }
    }

    /// The connection is gone: the app gets its Disconnect (1006 unless it
    /// had one), then its sends fail.
    pub(super) fn end(mut self) {
        self.disconnect(ABNORMAL, String::new());
        self.conduit.close();
    }
}

impl HttpSession {
    /// Whether `head` is served as a WebSocket request: `Ok(Some)` with the
    /// validated handshake, `Ok(None)` for plain HTTP (not an upgrade, or
    /// WebSockets are off, or the app takes none), `Err` with the 400/426
    /// answer for an upgrade that breaks RFC 6455 §4.2.1.
    pub(super) fn ws_handshake(
        &self,
        app: &dyn App,
        head: &RequestHead,
    ) -> Result<Option<Upgrade>, Reply> {
        if !self.shared.ws || !app.websocket() || app.inline() {
            return Ok(None);
        }
        if !handshake::is_websocket_request(head) {
            return Ok(None);
        }
        let deflate = self.shared.ws_deflate;
        let validated = handshake::validate(head).map(|mut upgrade| {
            if !deflate {
                upgrade.refuse_deflate();
            }
            Some(upgrade)
        });
        validated.map_err(|err| {
            let mut reply = Reply::text(err.status(), err.reason());
            for (name, value) in err.headers() {
                let value = String::from_utf8_lossy(value).into_owned();
                reply.headers.push((name.to_string(), value));
            }
            reply
        })
    }

    /// The `101` was written: from now on the connection speaks WebSocket.
    /// What the HTTP parser had buffered past the request is the first input.
    /// `deflate`: permessage-deflate was agreed in the `101`.
    pub(super) fn start_ws(&mut self, conduit: Arc<Conduit>, deflate: bool) {
        let mut conn = WsConn::new(self.shared.ws_max_message);
        if deflate {
            conn = conn.with_deflate();
        }
        conn.recv(&self.conn.take_buffered());
        self.head_started = None;
        if let Some(meter) = &mut self.meter {
            meter.ws_opened();
        }
        self.mode = Mode::WebSocket(WsSession {
            conn,
            conduit,
            disconnected: false,
            close_deadline: None,
            clock: Clock::new(Instant::now()),
            pinged_out: false,
        });
        if self.stream_tell == Some(StreamTell::Told) {
            // Accepted after the drain told streams to end: told next turn,
            // once the 101 that opens it is out ahead of the Close.
            self.stream_tell = Some(StreamTell::At(Instant::now()));
        }
    }

    /// Bytes read from the client.
    pub(super) fn ws_read(&mut self, data: &[u8], now: Instant) {
        if let Mode::WebSocket(ws) = &mut self.mode {
            ws.conn.recv(data);
            ws.clock.heard(now);
        }
        self.ws_pump(now);
    }

    /// The client closed its side without a Close: the app is told (1006)
    /// and the connection ends.
    pub(super) fn ws_eof(&mut self) {
        if let Mode::WebSocket(ws) = &mut self.mode {
            ws.disconnect(ABNORMAL, String::new());
        }
        self.closed = true;
        self.deadline = None;
    }

    /// Shutdown: a Close with 1001 (going away); the client's answer, or the
    /// close timeout, ends the connection.
    pub(super) fn ws_shutdown(&mut self, now: Instant) {
        let mut out = Vec::new();
        if let Mode::WebSocket(ws) = &mut self.mode {
            ws.conn
                .write_close(GOING_AWAY, "server shutting down", &mut out);
        }
        self.output.push_bytes(out);
        self.ws_pump(now);
    }

    /// The WebSocket's deadline passed: our Close went unanswered (the
    /// connection closes), or a keepalive step is due.
    pub(super) fn ws_deadline(&mut self, now: Instant) {
        // A Ping would queue behind output a slow reader has yet to take.
        let listening = self.wants_read() && self.output.is_empty();
        let keepalive = self.shared.ws_keepalive;
        let Mode::WebSocket(ws) = &mut self.mode else {
            return;
        };
        if ws.close_deadline.is_some_and(|d| d <= now) {
            tracing::debug!("the client did not answer our WebSocket Close: closing");
            self.meter_cause(if self.shutting {
                Cause::Shutdown
            } else {
                Cause::ServerClosed
            });
            return self.give_up_on_client();
        }
        let mut out = Vec::new();
        if let Some(k) = keepalive.filter(|_| ws.open()) {
            match ws.clock.due(&k, now, listening) {
                Due::Nothing => {}
                Due::Ping => ws.conn.write_ping(b"", &mut out),
                Due::Gone => {
                    // As uvicorn: a client that is there after all learns why.
                    tracing::debug!("a WebSocket ping went unanswered: closing");
                    ws.conn
                        .fail_with(INTERNAL_ERROR, "keepalive ping timeout", &mut out);
                    ws.disconnect(ABNORMAL, String::new());
                    ws.pinged_out = true;
                    self.meter_cause(Cause::PingTimeout);
                }
            }
        }
        self.output.push_bytes(out);
        self.arm_send(now);
        self.ws_pump(now);
    }

    /// Handle every event the received bytes hold, as far as the app's
    /// buffer and the output queue allow, then set the close and keepalive
    /// deadlines.
    pub(super) fn ws_pump(&mut self, now: Instant) {
        let mut out = Vec::new();
        let keepalive = self.shared.ws_keepalive;
        let queued = self.output.queued();
        let meter = &self.meter;
        let Mode::WebSocket(ws) = &mut self.mode else {
            return;
        };
        while queued + (out.len() as u64) < OUTPUT_HIGH_WATER as u64 && ws.takes_input() {
            let Some(event) = ws.conn.next_event() else {
                break;
            };
            if let (Some(meter), WsEvent::Text(_) | WsEvent::Binary(_)) = (meter, &event) {
                meter.ws_message(true);
            }
            match event {
                WsEvent::Text(text) => {
                    ws.conduit.push_ws(WsMessage::Text(text));
                }
                WsEvent::Binary(data) => {
                    ws.conduit.push_ws(WsMessage::Binary(data));
                }
                // Answered here: the app never sees pings or pongs.
                WsEvent::Ping(payload) => ws.conn.write_pong(&payload, &mut out),
                WsEvent::Pong => {}
                WsEvent::Close { code, reason } => {
                    ws.conn.write_close_reply(&mut out);
                    ws.disconnect(code, reason);
                }
                WsEvent::Error(err) => {
                    tracing::debug!(reason = err.reason, "WebSocket protocol error");
                    ws.conn.write_close(err.close_code, err.reason, &mut out);
                    ws.disconnect(err.close_code, err.reason.to_string());
                }
            }
        }
        // Our Close is out and the client's is not in: it has a while to answer.
        if ws.conn.close_sent() && !ws.conn.close_received() && ws.close_deadline.is_none() {
            ws.close_deadline = Some(now + CLOSE_TIMEOUT);
        }
        let ping = keepalive
            .filter(|_| ws.open())
            .map(|k| ws.clock.deadline(&k));
        self.deadline = [ws.close_deadline, ping].into_iter().flatten().min();
        self.output.push_bytes(out);
    }

    /// Write what the app has sent.
    pub(super) fn ws_progress(&mut self, out: &mut Vec<u8>) {
        let Mode::WebSocket(ws) = &self.mode else {
            return;
        };
        let mut events = Vec::new();
        ws.conduit.take_events(&mut events);
        self.ws_events(events, out);
    }

    /// Write the app's `events` (those after its `WsAccept`).
    pub(super) fn ws_events(&mut self, events: Vec<ResponseEvent>, out: &mut Vec<u8>) {
        let Mode::WebSocket(ws) = &mut self.mode else {
            return;
        };
        for event in events {
            if let (Some(meter), ResponseEvent::WsText(_) | ResponseEvent::WsBinary(_)) =
                (&self.meter, &event)
            {
                meter.ws_message(false);
            }
            let (before, size) = (out.len(), event.counted());
            match event {
                ResponseEvent::WsText(text) => ws.conn.write_text(&text, out),
                ResponseEvent::WsBinary(data) => ws.conn.write_binary(&data, out),
                ResponseEvent::WsClose { code, reason } => ws.conn.write_close(code, &reason, out),
                // The app finished without closing: close normally for it.
                ResponseEvent::End => ws.conn.write_close(NORMAL, "", out),
                ResponseEvent::Abort => ws.conn.write_close(INTERNAL_ERROR, "", out),
                event => {
                    tracing::warn!(?event, "the application sent HTTP on an accepted WebSocket");
                    ws.conn.write_close(INTERNAL_ERROR, "", out);
                }
            }
            // The app's sends are held to their frames' bytes still unwritten
            // (`counted`: payload and header), credited as the wire takes the
            // frame: a compressed frame is smaller, so what compression saved
            // is credited now.
            let framed = out.len() - before;
            if framed < size {
                ws.conduit.written(size - framed);
            }
        }
    }
}
