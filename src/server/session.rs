//! An HTTP/1.1 connection as a backend [`Session`]: the sans-IO protocol
//! ([`ServerConn`]) glued to the routes and the application, with the read
//! timeouts and an output queue that keeps pipelined answers (file bodies
//! included) in order.
//!
//! A request no Rust-native route answers goes to the [`App`] (404 when there
//! is none); [`dispatch`] carries it there and its answer back. A WebSocket
//! the app accepts turns the session over to [`websocket`] for the rest of
//! the connection.

mod dispatch;
#[cfg(test)]
mod tests;
mod websocket;
#[cfg(test)]
mod ws_tests;

use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::app::{App, ServerAddr};
use crate::backend::{Notifier, Output, Peer, Service, Session};
use crate::http::{Event, Framing, Limits, RequestHead, ServerConn};
use crate::reply::{Body, Reply};
use crate::routes::Router;

use super::access_log;
use dispatch::AppCall;
use websocket::WsSession;

/// Queued output past which a connection stops reading (and parsing pipelined
/// requests) until the client has taken some: a client that pipelines without
/// reading cannot make the server buffer without bound.
const OUTPUT_HIGH_WATER: usize = 1 << 20;

/// What every connection of the server shares.
pub struct Shared {
    pub router: Router,
    /// Where requests no route answers go (None: 404).
    pub app: Option<Arc<dyn App>>,
    /// Where the server listens, as the app is told.
    pub server: Arc<ServerAddr>,
    pub limits: Limits,
    pub header_read_timeout: Duration,
    pub keep_alive_timeout: Duration,
    pub access_log: bool,
    /// Serve WebSocket upgrades (to an app that takes them).
    pub ws: bool,
    /// The largest WebSocket message accepted, in bytes.
    pub ws_max_message: usize,
}

/// Opens an [`HttpSession`] per connection; one per core thread.
pub struct HttpService {
    shared: Arc<Shared>,
}

impl HttpService {
    pub fn new(shared: Arc<Shared>) -> Self {
        HttpService { shared }
    }
}

impl Service for HttpService {
    type Session = HttpSession;

    fn open(&mut self, peer: &Peer, notifier: Notifier) -> HttpSession {
        HttpSession {
            conn: ServerConn::new(self.shared.limits),
            // A connection that never sends a head is held to the head's timeout.
            deadline: Some(Instant::now() + self.shared.header_read_timeout),
            head_started: None,
            queue: VecDeque::new(),
            pending: None,
            app: None,
            ws: None,
            queued: 0,
            closed: false,
            eof: false,
            shutting: false,
            peer: peer.clone(),
            notifier,
            shared: self.shared.clone(),
        }
    }
}

/// A piece of queued output.
enum Chunk {
    Bytes {
        buf: Vec<u8>,
        pos: usize,
    },
    File {
        file: File,
        offset: u64,
        remaining: u64,
    },
}

pub struct HttpSession {
    conn: ServerConn,
    shared: Arc<Shared>,
    /// When the session gives up waiting for input.
    deadline: Option<Instant>,
    /// When the first byte of the head being read arrived.
    head_started: Option<Instant>,
    queue: VecDeque<Chunk>,
    /// A route's answer, sent once the request's body is read.
    pending: Option<(RequestHead, Reply)>,
    /// The request the application is answering.
    app: Option<AppCall>,
    /// The WebSocket the application accepted: the connection is no longer HTTP.
    ws: Option<WsSession>,
    /// Bytes queued (file bodies counted too).
    queued: u64,
    /// Closed by a timeout or a failed answer: done regardless of the protocol's state.
    closed: bool,
    eof: bool,
    /// Graceful shutdown began: done as soon as idle.
    shutting: bool,
    peer: Peer,
    /// Wakes this session from the application's threads.
    notifier: Notifier,
}

impl HttpSession {
    /// Serve every complete request the protocol has buffered, as far as the
    /// output queue and the application's body buffer allow.
    fn pump(&mut self, now: Instant) {
        if self.ws.is_some() {
            return self.ws_pump(now);
        }
        let mut out = Vec::new();
        while self.queued < OUTPUT_HIGH_WATER as u64
            && self.app.as_ref().is_none_or(AppCall::takes_input)
        {
            match self.conn.next_event() {
                None => break,
                Some(Event::Head(head)) => {
                    self.head_started = None;
                    self.on_head(head, &mut out);
                }
                Some(Event::Data(data)) => {
                    if let Some(call) = &mut self.app {
                        call.push_body(data);
                    }
                }
                Some(Event::End) => {
                    if let Some((head, reply)) = self.pending.take() {
                        self.respond(&head, reply, &mut out);
                    } else if self.app.is_some() {
                        self.app_body_end(&mut out);
                    }
                }
                Some(Event::Error(err)) => {
                    self.head_started = None;
                    self.pending = None;
                    if let Some(call) = self.app.take() {
                        call.abandon();
                    }
                    self.conn.write_error(&err, &mut out);
                    break;
                }
            }
        }
        self.push_bytes(out);
        if self.ws.is_some() {
            // Accepted while serving the head: the rest is WebSocket input.
            return self.ws_pump(now);
        }
        self.rearm(now);
    }

    /// A request head: a route answers it, else the application, else 404.
    ///
    /// A route (or the 404) answers from the head alone, but only once the
    /// body has been read (and dropped): a body that turns out malformed then
    /// gets its 400 rather than a success followed by a silent close. Under
    /// `Expect: 100-continue` the answer goes at once and the client never
    /// sends the body.
    fn on_head(&mut self, head: RequestHead, out: &mut Vec<u8>) {
        let reply = match (self.shared.router.route(&head), &self.shared.app) {
            (Some(reply), _) => reply,
            (None, Some(app)) => match self.ws_handshake(app.as_ref(), &head) {
                Ok(upgrade) => return self.start_app(app.clone(), head, upgrade, out),
                Err(refusal) => refusal,
            },
            (None, None) => Reply::text(404, "Not Found"),
        };
        if head.expect_continue {
            self.respond(&head, reply, out);
        } else {
            self.pending = Some((head, reply));
        }
    }

    /// Write `reply` as the answer to `head`.
    fn respond(&mut self, head: &RequestHead, reply: Reply, out: &mut Vec<u8>) {
        let Reply {
            status,
            headers,
            body,
        } = reply;
        let len = body.len().to_string();
        let mut list: Vec<(&str, &[u8])> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_bytes()))
            .collect();
        let has_length = headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-length"));
        if !has_length && !matches!(status, 100..=199 | 204 | 304) {
            list.push(("Content-Length", len.as_bytes()));
        }
        let framing = self.conn.start_response(status, &list, out);
        let sent = match (framing, body) {
            (Framing::NoBody, _) | (_, Body::Empty) => 0,
            (_, Body::Bytes(bytes)) => {
                self.conn.write_body(&bytes, out);
                bytes.len() as u64
            }
            (_, Body::File { file, offset, len }) => self.queue_file(file, offset, len, out),
        };
        self.conn.finish_response(out);
        if self.shared.access_log {
            access_log::record(&self.peer, head, status, sent);
        }
    }

    /// Queue `len` bytes of `file` from `offset` as body of the response
    /// being written, after what `out` holds (framed for the response's
    /// framing). Returns how many body bytes were queued.
    fn queue_file(&mut self, file: File, offset: u64, len: u64, out: &mut Vec<u8>) -> u64 {
        let (len, tail) = self.conn.file_body(len, out);
        if len > 0 {
            self.push_bytes(std::mem::take(out));
            self.queued += len;
            self.queue.push_back(Chunk::File {
                file,
                offset,
                remaining: len,
            });
        }
        out.extend_from_slice(tail);
        len
    }

    fn push_bytes(&mut self, bytes: Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        self.queued += bytes.len() as u64;
        if let Some(Chunk::Bytes { buf, .. }) = self.queue.back_mut() {
            buf.extend_from_slice(&bytes);
        } else {
            self.queue.push_back(Chunk::Bytes { buf: bytes, pos: 0 });
        }
    }

    /// Set the read deadline that fits the state: the head's timeout while a
    /// head is arriving, the keep-alive timeout while idle, none otherwise.
    fn rearm(&mut self, now: Instant) {
        if self.closed {
            return;
        }
        self.deadline = if let Some(start) = self.head_started {
            Some(start + self.shared.header_read_timeout)
        } else if self.idle() {
            Some(now + self.shared.keep_alive_timeout)
        } else {
            None
        };
    }
}

impl Session for HttpSession {
    fn on_read(&mut self, data: &[u8], now: Instant) {
        if self.ws.is_some() {
            return self.ws_read(data, now);
        }
        self.conn.recv(data);
        self.pump(now);
        // After the pump: one read may complete a head and bring part of the next.
        if self.head_started.is_none() && self.conn.has_partial_head() {
            self.head_started = Some(now);
            self.rearm(now);
        }
    }

    fn on_eof(&mut self, now: Instant) {
        self.eof = true;
        if self.ws.is_some() {
            return self.ws_eof();
        }
        self.conn.recv_eof();
        self.pump(now);
        self.on_hangup(now);
    }

    /// The client ended its side: an app still answering hears it has gone
    /// (ASGI's `http.disconnect`), while its answer is still written.
    fn on_hangup(&mut self, _now: Instant) {
        if let Some(call) = &self.app {
            call.hang_up();
        }
    }

    fn output(&mut self) -> Output<'_> {
        match self.queue.front() {
            None => Output::None,
            Some(Chunk::Bytes { buf, pos }) => Output::Bytes(&buf[*pos..]),
            Some(Chunk::File {
                file,
                offset,
                remaining,
            }) => Output::File {
                fd: file.as_raw_fd(),
                offset: *offset,
                len: (*remaining).min(1 << 30) as usize,
            },
        }
    }

    fn on_sent(&mut self, n: usize, now: Instant) {
        self.queued -= n as u64;
        if let Some(call) = &self.app {
            call.written(n);
        }
        if let Some(ws) = &self.ws {
            ws.written(n);
        }
        let finished = match self.queue.front_mut() {
            None => false,
            Some(Chunk::Bytes { buf, pos }) => {
                *pos += n;
                *pos >= buf.len()
            }
            Some(Chunk::File {
                offset, remaining, ..
            }) => {
                *offset += n as u64;
                *remaining -= n as u64;
                *remaining == 0
            }
        };
        if finished {
            self.queue.pop_front();
        }
        if self.queue.is_empty() {
            // Pipelined requests held back by the high-water mark, and the keep-alive clock.
            self.pump(now);
        }
    }

    fn wants_read(&self) -> bool {
        !self.closed
            && !self.eof
            && self.queued < OUTPUT_HIGH_WATER as u64
            && match &self.ws {
                Some(ws) => ws.takes_input(),
                None => {
                    self.app.as_ref().is_none_or(AppCall::takes_input) && self.conn.wants_read()
                }
            }
    }

    fn done(&self) -> bool {
        let finished = match &self.ws {
            Some(ws) => ws.done(),
            None => self.conn.must_close(),
        };
        self.closed || finished || (self.shutting && self.idle())
    }

    fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    fn on_deadline(&mut self, now: Instant) {
        if self.deadline.is_some_and(|d| d <= now) {
            // A slow head or an idle keep-alive: close without an answer, as
            // clients expect of an idle close, and drop what was queued.
            self.closed = true;
            self.deadline = None;
            self.queue.clear();
            self.queued = 0;
        }
    }

    fn idle(&self) -> bool {
        self.queue.is_empty() && self.app.is_none() && self.conn.is_idle()
    }

    fn on_shutdown(&mut self) {
        self.conn.close_after_response();
        self.shutting = true;
        if self.ws.is_some() {
            self.ws_shutdown(Instant::now());
        }
    }

    fn on_notify(&mut self, now: Instant) {
        let mut out = Vec::new();
        self.app_progress(&mut out);
        self.ws_progress(&mut out);
        self.push_bytes(out);
        // Body room came back, or the answer ended: read on.
        self.pump(now);
    }
}

impl Drop for HttpSession {
    /// The connection is gone: an application still answering is told.
    fn drop(&mut self) {
        if let Some(call) = self.app.take() {
            call.abandon();
        }
        if let Some(ws) = self.ws.take() {
            ws.end();
        }
    }
}
