//! An HTTP/1.1 connection as a backend [`Session`]: the sans-IO protocol
//! ([`ServerConn`]) glued to the routes and the application, with the read
//! timeouts and an output queue that keeps pipelined answers (file bodies
//! included) in order.
//!
//! Slow clients are bounded both ways. A body whose next bytes take longer
//! than the body read timeout gets a 408 and a close (streamed or buffered,
//! WSGI or ASGI: the clock runs only while the session wants the body, so an
//! app that has not taken what it was given is not the client's fault).
//! Output the client takes none of for the send timeout closes the
//! connection, and the app's exchange with it: a view waiting for room in
//! [`Exchange::wait_room`](crate::app::Exchange::wait_room) wakes to a failed
//! write. The clock is since the last progress, not the whole answer, so a
//! slow but steady download is never cut.
//!
//! A request no Rust-native route answers goes to the [`App`] (404 when there
//! is none); [`dispatch`] carries it there and its answer back. A WebSocket
//! the app accepts turns the session over to [`websocket`] for the rest of
//! the connection.

mod dispatch;
mod meter;
#[cfg(test)]
mod meter_tests;
#[cfg(test)]
mod slow_client_tests;
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

use bytes::Bytes;

use crate::app::piece::WHOLE_PIECE;
use crate::app::{App, BufferConfig, ResponseEvent, ServerAddr};
use crate::backend::{Linger, Notifier, Output, Peer, Service, Session};
use crate::http::proxy_protocol::Preamble;
use crate::http::{Defaults, Event, Framing, HttpError, Limits, RequestHead, ServerConn};
use crate::metrics::counters::{Cause, Shard};
use crate::reply::{Body, Reply};
use crate::routes::Router;
use crate::tls::{Secured, TlsInfo};

use super::access_log;
use dispatch::AppCall;
use meter::Meter;
use websocket::WsSession;

/// Queued output past which a connection stops reading (and parsing pipelined
/// requests) until the client has taken some: a client that pipelines without
/// reading cannot make the server buffer without bound.
const OUTPUT_HIGH_WATER: usize = 1 << 20;

/// How long a drain waits for the first request of a connection accepted
/// just before it (then the connection closes as an idle one would).
const FRESH_GRACE: Duration = Duration::from_secs(1);

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
    /// The access log's format (None: no access log).
    pub access_log: Option<Arc<access_log::Format>>,
    /// Serve WebSocket upgrades (to an app that takes them).
    pub ws: bool,
    /// The largest WebSocket message accepted, in bytes.
    pub ws_max_message: usize,
    /// What every response gets unless it sets it: our `Server` field, the
    /// `--header` fields (None: the standard, `Server` only).
    pub response_defaults: Option<Arc<Defaults>>,
    /// Pings for quiet WebSockets, and how long an answer may take (None: none).
    pub ws_keepalive: Option<crate::ws::Keepalive>,
    /// Negotiate permessage-deflate with clients that offer it.
    pub ws_deflate: bool,
    /// How the bodies of apps with blocking reads are buffered before the
    /// call (None: `--request-buffering off`, streamed).
    pub body_buffer: Option<Arc<BufferConfig>>,
    /// How long a request body's next bytes may take (408 beyond).
    pub body_read_timeout: Duration,
    /// How long queued output may wait for the client to take any (closed beyond).
    pub send_timeout: Duration,
    /// Proxy headers and the PROXY protocol.
    pub proxy: super::proxy::ProxyConfig,
}

impl Shared {
    /// What the connections of a server with `config` share: its HTTP
    /// settings (its listener, CPUs and TLS are the server's), `app`, and
    /// the address the app is told.
    pub fn new(
        config: super::Config,
        app: Option<Arc<dyn App>>,
        server: Arc<ServerAddr>,
    ) -> Shared {
        Shared {
            router: config.router,
            app,
            server,
            limits: config.limits,
            header_read_timeout: config.header_read_timeout,
            keep_alive_timeout: config.keep_alive_timeout,
            access_log: config.access_log.map(Arc::new),
            ws: config.ws,
            ws_max_message: config.ws_max_message,
            response_defaults: (config.response_defaults != crate::http::defaults::STANDARD)
                .then(|| Arc::new(config.response_defaults)),
            ws_keepalive: config.ws_keepalive,
            ws_deflate: config.ws_deflate,
            body_buffer: config.body_buffer.map(Arc::new),
            body_read_timeout: config.body_read_timeout,
            send_timeout: config.send_timeout,
            proxy: config.proxy,
        }
    }

    /// Settings for tests: `router` and `app`, a Unix-socket server name,
    /// and otherwise the defaults, but for no WebSocket pings and no body
    /// buffering (the tests that want them say so).
    #[cfg(test)]
    pub(crate) fn for_tests(router: Router, app: Option<Arc<dyn App>>) -> Shared {
        let config = super::Config {
            router,
            ws_keepalive: None,
            body_buffer: None,
            ..super::Config::default()
        };
        Shared::new(config, app, Arc::new(ServerAddr::Unix("/test".into())))
    }
}

/// Opens an [`HttpSession`] per connection; one per core thread.
pub struct HttpService {
    shared: Arc<Shared>,
    /// This core thread's metrics, when they are served.
    shard: Option<&'static Shard>,
}

impl HttpService {
    pub fn new(shared: Arc<Shared>) -> Self {
        HttpService {
            shared,
            shard: None,
        }
    }

    /// Count this core's connections and requests in `shard`.
    pub fn counting(mut self, shard: Option<&'static Shard>) -> Self {
        self.shard = shard;
        self
    }
}

impl Service for HttpService {
    type Session = HttpSession;

    fn open(&mut self, peer: &Peer, notifier: Notifier) -> HttpSession {
        let now = Instant::now();
        let mut conn = ServerConn::new(self.shared.limits);
        if let Some(defaults) = &self.shared.response_defaults {
            conn.set_defaults(defaults.clone());
        }
        // A PROXY protocol preamble and the first head are held to the head's
        // timeout together, from the connection's start.
        let preamble = self.shared.proxy.expects_preamble(peer);
        if preamble {
            conn.expect_preamble();
        }
        let meter = self.shard.map(|shard| Meter::open(shard, &mut conn));
        HttpSession {
            conn,
            meter,
            // A connection that never sends a head is held to the head's timeout.
            deadline: Some(now + self.shared.header_read_timeout),
            head_started: preamble.then_some(now),
            request_started: now,
            log: access_log::Backlog::default(),
            body_clock: None,
            send_since: None,
            queue: VecDeque::new(),
            pending: None,
            app: None,
            events: Vec::new(),
            ws: None,
            queued: 0,
            closed: false,
            given_up: false,
            eof: false,
            shutting: false,
            peer: peer.clone(),
            tls: None,
            notifier,
            shared: self.shared.clone(),
        }
    }
}

/// A piece of queued output.
enum Chunk {
    /// Bytes written here (heads, framing, small bodies, replies, WebSocket
    /// frames), gathered while the last one is short.
    Bytes { buf: Vec<u8>, pos: usize },
    /// A body piece of [`WHOLE_PIECE`] or more, queued as it came (the
    /// application's own bytes, [`crate::app::piece`]), never grown.
    Piece { buf: Bytes, pos: usize },
    /// A piece whose buffer is lent to the backend for a write in flight (a
    /// `Piece`, or `Bytes` of [`WHOLE_PIECE`] or more, which comes back a `Piece`).
    Lent { pos: usize },
    File {
        file: File,
        offset: u64,
        remaining: u64,
    },
}

pub struct HttpSession {
    conn: ServerConn,
    /// What this connection counts, when metrics are served.
    meter: Option<Meter>,
    shared: Arc<Shared>,
    /// When the session gives up waiting for input.
    deadline: Option<Instant>,
    /// When the first byte of the head being read arrived.
    head_started: Option<Instant>,
    /// When the first byte of the request being answered arrived.
    request_started: Instant,
    /// Answered requests whose lines wait for their last byte to be sent.
    log: access_log::Backlog,
    /// While a body is wanted: since when its next bytes are awaited.
    body_clock: Option<Instant>,
    /// While output is queued: since when the client took none of it.
    send_since: Option<Instant>,
    queue: VecDeque<Chunk>,
    /// A route's answer, sent once the request's body is read.
    pending: Option<(RequestHead, Reply)>,
    /// The request the application is answering.
    app: Option<AppCall>,
    /// The vector the app's events come in, empty between takes: lent to
    /// each request's exchange and swapped back with its events, so that a
    /// keep-alive connection's answers allocate none (and free none on the
    /// core that the app thread allocated).
    events: Vec<ResponseEvent>,
    /// The WebSocket the application accepted: the connection is no longer HTTP.
    ws: Option<WsSession>,
    /// Bytes queued (file bodies counted too).
    queued: u64,
    /// Closed by a timeout or a failed answer: done regardless of the protocol's state.
    closed: bool,
    /// Closed because the client took nothing (see `give_up_on_client`).
    given_up: bool,
    eof: bool,
    /// Graceful shutdown began: done as soon as idle.
    shutting: bool,
    peer: Peer,
    /// The TLS facts, once a [`crate::tls::TlsSession`] around this one
    /// finished its handshake.
    tls: Option<Arc<TlsInfo>>,
    /// Wakes this session from the application's threads.
    notifier: Notifier,
}

impl Secured for HttpSession {
    fn secured(&mut self, info: Arc<TlsInfo>) {
        self.tls = Some(info);
    }

    fn awaits_preamble(&self) -> bool {
        self.conn.awaits_preamble()
    }
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
                Some(Event::Preamble(preamble)) => {
                    if let Preamble::Proxied(client) = preamble {
                        self.peer = Peer::Tcp(client);
                    }
                }
                Some(Event::Head(head)) => {
                    // Not set when the whole head came in this read.
                    let start = self.head_started.take().unwrap_or(now);
                    self.request_started = start;
                    if let Some(meter) = &mut self.meter {
                        meter.head(&head.method, start);
                    }
                    self.on_head(head, &mut out);
                }
                Some(Event::Data(data)) => self.app_body(data, &mut out),
                Some(Event::End) => {
                    if let Some((head, reply)) = self.pending.take() {
                        self.respond(&head, reply, &mut out);
                    } else if self.app.is_some() {
                        self.app_body_end(&mut out);
                    }
                }
                Some(Event::Error(err)) => {
                    self.head_started = None;
                    self.meter_cause(Cause::BadRequest);
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
        self.meter_answers(now);
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
        super::request_budget::count();
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
        if let Some(format) = &self.shared.access_log {
            let headers = headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes()));
            let answer = access_log::Answered {
                head: Arc::new(head.clone()),
                status,
                bytes: sent,
                response_headers: access_log::kept_headers(format, headers),
                started: self.request_started,
                peer: None,
            };
            let queued = self.queued + out.len() as u64;
            self.log
                .push(queued, answer, Instant::now(), &self.peer, format);
        }
    }

    /// Queue `len` bytes of `file` from `offset` as body of the response
    /// being written, after what `out` holds (framed for the response's
    /// framing). Returns how many body bytes were queued.
    fn queue_file(&mut self, file: File, offset: u64, len: u64, out: &mut Vec<u8>) -> u64 {
        self.queue_whole(len, out, |len| Chunk::File {
            file,
            offset,
            remaining: len,
        })
    }

    /// Queue a body piece of [`WHOLE_PIECE`] or more as it is, after what
    /// `out` holds (framed, and cut to a declared length). Returns how many
    /// of its bytes were queued.
    fn queue_piece(&mut self, mut piece: Bytes, out: &mut Vec<u8>) -> u64 {
        self.queue_whole(piece.len() as u64, out, |len| {
            piece.truncate(len as usize);
            Chunk::Piece { buf: piece, pos: 0 }
        })
    }

    /// Frame `len` body bytes that are queued as their own chunk, not
    /// written into `out`: what `out` holds goes first, the frame's tail
    /// (a chunk's CRLF) is left in `out` after them.
    fn queue_whole(
        &mut self,
        len: u64,
        out: &mut Vec<u8>,
        chunk: impl FnOnce(u64) -> Chunk,
    ) -> u64 {
        let (len, tail) = self.conn.external_body(len, out);
        if len > 0 {
            self.push_bytes(std::mem::take(out));
            self.queued += len;
            self.queue.push_back(chunk(len));
        }
        out.extend_from_slice(tail);
        len
    }

    /// Queue `bytes`, gathered into the last chunk while that is short (one
    /// write for a small answer; a lent chunk, or one of [`WHOLE_PIECE`] or
    /// more, is never grown).
    fn push_bytes(&mut self, bytes: Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        self.queued += bytes.len() as u64;
        match self.queue.back_mut() {
            Some(Chunk::Bytes { buf, .. }) if buf.len() < WHOLE_PIECE => {
                buf.extend_from_slice(&bytes)
            }
            _ => self.queue.push_back(Chunk::Bytes { buf: bytes, pos: 0 }),
        }
    }

    /// Hand the metrics the answers the protocol finished (all of their
    /// bytes are queued by now).
    fn meter_answers(&mut self, now: Instant) {
        if let Some(meter) = &mut self.meter {
            meter.answers(&mut self.conn, self.queued, now);
        }
    }

    fn meter_cause(&mut self, cause: Cause) {
        if let Some(meter) = &mut self.meter {
            meter.cause(cause);
        }
    }

    /// Nothing queued, no app call, and the protocol between requests.
    fn between_requests(&self) -> bool {
        self.queue.is_empty() && self.app.is_none() && self.conn.is_idle()
    }

    /// Set the read deadline that fits the state: the head's timeout while a
    /// head is arriving, the body's while a body is wanted, the keep-alive
    /// timeout while idle, none otherwise.
    fn rearm(&mut self, now: Instant) {
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
            Some(now + self.shared.keep_alive_timeout)
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
        self.ws.is_none()
            && self.app.as_ref().is_none_or(|call| !call.continue_owed)
            && self.wants_read()
            && !self.conn.is_idle()
            && !self.conn.has_partial_head()
    }

    /// Start or stop the send clock as output is queued or drained.
    fn arm_send(&mut self, now: Instant) {
        if self.queue.is_empty() {
            self.send_since = None;
        } else {
            self.send_since.get_or_insert(now);
        }
    }

    fn send_deadline(&self) -> Option<Instant> {
        self.send_since
            .map(|since| since + self.shared.send_timeout)
    }

    /// [`close_now`](Self::close_now) a client that stopped taking what is
    /// sent to it: the write in flight is cut too ([`Session::aborted`]).
    fn give_up_on_client(&mut self) {
        self.given_up = true;
        self.close_now();
    }

    /// Closed for good: nothing more is read or written, and an app still
    /// answering is told (its reads end, its writes fail).
    fn close_now(&mut self) {
        self.closed = true;
        self.deadline = None;
        self.body_clock = None;
        self.send_since = None;
        self.queue.clear();
        self.queued = 0;
        if let Some(call) = self.app.take() {
            call.abandon();
        }
        if let Some(ws) = self.ws.take() {
            ws.end();
        }
    }
}

impl Session for HttpSession {
    fn on_read(&mut self, data: &[u8], now: Instant) {
        if let Some(meter) = &self.meter {
            meter.read(data.len());
        }
        if self.ws.is_some() {
            return self.ws_read(data, now);
        }
        if self.body_clock.is_some() {
            self.body_clock = Some(now); // the body's bytes are coming
        }
        self.conn.recv(data);
        self.pump(now);
        // After the pump: one read may complete a head and bring part of the next.
        if self.head_started.is_none() && self.conn.has_partial_head() {
            self.head_started = Some(now);
            self.rearm(now);
        }
        self.arm_send(now);
    }

    fn on_eof(&mut self, now: Instant) {
        self.eof = true;
        if self.ws.is_some() {
            return self.ws_eof();
        }
        self.conn.recv_eof();
        self.pump(now);
        self.on_hangup(now);
        self.arm_send(now);
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
            // The lent buffer's write is in flight: nothing more meanwhile.
            None | Some(Chunk::Lent { .. }) => Output::None,
            Some(Chunk::Bytes { buf, pos }) => Output::Bytes(&buf[*pos..]),
            Some(Chunk::Piece { buf, pos }) => Output::Bytes(&buf[*pos..]),
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

    fn lend_output(&mut self) -> Option<(Bytes, usize)> {
        // The rest of one too: a partial send leaves it lent as it was.
        let (buf, pos) = match self.queue.front_mut() {
            Some(Chunk::Piece { buf, pos }) => (std::mem::take(buf), *pos),
            // Written here but as big (a WebSocket frame, a reply, gathered
            // output): lent the same way, the Vec handed over, not copied.
            Some(Chunk::Bytes { buf, pos }) if buf.len() >= WHOLE_PIECE => {
                (Bytes::from(std::mem::take(buf)), *pos)
            }
            _ => return None,
        };
        self.queue[0] = Chunk::Lent { pos };
        Some((buf, pos))
    }

    fn on_sent_lent(&mut self, buf: Bytes, n: usize, now: Instant) {
        // Not lent any more only if `close_now` dropped the queue meanwhile.
        if let Some(&Chunk::Lent { pos }) = self.queue.front() {
            self.queue[0] = Chunk::Piece { buf, pos };
            self.on_sent(n, now);
        }
    }

    fn on_sent(&mut self, n: usize, now: Instant) {
        self.queued -= n as u64;
        if let Some(meter) = &mut self.meter {
            meter.sent(n, now);
        }
        if let Some(format) = self.shared.access_log.as_deref() {
            self.log.sent(n, now, &self.peer, format);
        }
        if n > 0 {
            self.send_since = Some(now); // the client is reading
        }
        if let Some(call) = &self.app {
            call.written(n);
        }
        if let Some(ws) = &self.ws {
            ws.written(n);
        }
        let finished = match self.queue.front_mut() {
            None | Some(Chunk::Lent { .. }) => false,
            Some(Chunk::Bytes { buf, pos }) => {
                *pos += n;
                *pos >= buf.len()
            }
            Some(Chunk::Piece { buf, pos }) => {
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
        self.arm_send(now);
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

    fn aborted(&self) -> bool {
        self.given_up
    }

    fn done(&self) -> bool {
        let finished = match &self.ws {
            Some(ws) => ws.done(),
            None => self.conn.must_close(),
        };
        self.closed || finished || (self.shutting && self.idle())
    }

    fn deadline(&self) -> Option<Instant> {
        match (self.deadline, self.send_deadline()) {
            (Some(read), Some(send)) => Some(read.min(send)),
            (read, send) => read.or(send),
        }
    }

    fn on_deadline(&mut self, now: Instant) {
        if self.send_deadline().is_some_and(|d| d <= now) {
            tracing::debug!("the client took no output for the send timeout: closing");
            self.meter_cause(Cause::SendTimeout);
            self.give_up_on_client();
        } else if self.ws.is_some() && self.deadline.is_some_and(|d| d <= now) {
            self.ws_deadline(now);
        } else if self.deadline.is_some_and(|d| d <= now) {
            // A body still owed to a route or an app: the client is told why
            // (if no answer has started), then the connection closes. One
            // read only to be dropped after a complete answer just closes.
            let owed = self.app.is_some() || self.pending.is_some();
            if self.body_clock.is_some() && self.head_started.is_none() && owed {
                let mut out = Vec::new();
                if let Some(call) = self.app.take() {
                    call.abandon();
                }
                self.pending = None;
                self.conn.write_error(&HttpError::RequestTimeout, &mut out);
                self.push_bytes(out);
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

    /// Between requests, and not a fresh connection whose first request is
    /// still to come (a drain answers that one rather than close under it).
    fn idle(&self) -> bool {
        self.between_requests() && !self.conn.is_fresh()
    }

    fn on_shutdown(&mut self) {
        self.conn.close_after_response();
        self.shutting = true;
        if self.conn.is_fresh() {
            // Its request is on the way; one that is not closes soon.
            let grace = Instant::now() + FRESH_GRACE;
            self.deadline = Some(self.deadline.map_or(grace, |d| d.min(grace)));
        }
        if self.ws.is_some() {
            self.ws_shutdown(Instant::now());
        }
    }

    /// A request, body or message we will not read may still be coming.
    /// Never after a timeout or a failed answer (`closed`): the client is
    /// slow or gone, or already knows the answer failed.
    fn linger(&self) -> Linger {
        if self.closed {
            return Linger::No;
        }
        match &self.ws {
            Some(ws) => ws.linger(),
            None if self.conn.peer_may_send() => Linger::Yes,
            None => Linger::IfUnread,
        }
    }

    fn on_notify(&mut self, now: Instant) {
        let mut out = Vec::new();
        self.app_progress(&mut out);
        self.ws_progress(&mut out);
        self.push_bytes(out);
        self.meter_answers(now);
        // Body room came back, or the answer ended: read on.
        self.pump(now);
        self.arm_send(now);
    }
}

impl Drop for HttpSession {
    /// The connection is gone: an application still answering is told.
    fn drop(&mut self) {
        if self.meter.is_some() {
            let otherwise = if self.shutting {
                Cause::Shutdown
            } else if self.eof {
                Cause::ClientClosed
            } else if self.done() {
                Cause::ServerClosed
            } else {
                Cause::Reset
            };
            let now = Instant::now();
            // Answers the protocol finished since the last look count too.
            self.meter_answers(now);
            if let Some(meter) = &mut self.meter {
                meter.close(otherwise, now);
            }
        }
        if let Some(format) = self.shared.access_log.as_deref() {
            self.log.flush(Instant::now(), &self.peer, format);
        }
        if let Some(call) = self.app.take() {
            call.abandon();
        }
        if let Some(ws) = self.ws.take() {
            ws.end();
        }
    }
}
