//! A client connection as a backend [`Session`]: the sans-IO protocol
//! ([`ServerConn`]) glued to the routes and the application, one concern a
//! file, as hyper's `proto/h1` is:
//!
//! - `mode`: which protocol the connection speaks now; `http1` serves
//!   requests (a route's answer, or the 404, written there), `websocket`
//!   takes over once the app accepts an upgrade;
//! - `dispatch`: a request no Rust-native route answers goes to the
//!   [`App`] as an `app_call`, and its answer's events come back;
//! - `output`: the queue that keeps pipelined answers (file bodies
//!   included) in order;
//! - `deadlines`: the read and send clocks, and the app call's
//!   (`--request-timeout`);
//! - `meter`: what the connection counts for the metrics;
//! - `service`: the [`Service`](crate::backend::Service) that opens a
//!   session per connection.
//!
//! Slow clients are bounded both ways. A body whose next bytes take longer
//! than the body read timeout gets a 408 and a close (streamed or buffered,
//! WSGI or ASGI: the clock runs only while the session wants the body, so an
//! app that has not taken what it was given is not the client's fault).
//! Output the client takes none of for the send timeout closes the
//! connection, and the app's conduit with it: a view waiting for room in
//! [`Conduit::wait_room`](crate::app::Conduit::wait_room) wakes to a failed
//! write. The clock is since the last progress, not the whole answer, so a
//! slow but steady download is never cut.

mod app_call;
mod deadlines;
mod dispatch;
mod http1;
mod http2;
mod meter;
#[cfg(test)]
mod meter_tests;
mod mode;
mod output;
#[cfg(test)]
mod request_timeout_tests;
mod service;
#[cfg(test)]
mod slow_client_tests;
#[cfg(test)]
mod tests;
mod websocket;
#[cfg(test)]
mod ws_tests;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::app::{App, BufferConfig, ResponseEvent, ServerAddr};
use crate::backend::{Linger, Notifier, Output, Peer, Session};
use crate::http::{Defaults, Limits, RequestHead, ServerConn};
use crate::metrics::counters::Cause;
use crate::reply::Reply;
use crate::routes::Router;
use crate::tls::{Secured, TlsInfo};
use crate::tuning::Tuning;

use super::access_log;
use app_call::AppCall;
use deadlines::StreamTell;
use meter::Meter;
use mode::Mode;
use output::OutputQueue;
pub use service::HttpService;

/// How long a drain waits for the first request of a connection accepted
/// just before it (then the connection closes as an idle one would).
const FRESH_GRACE: Duration = Duration::from_secs(1);

/// What every connection of the server shares.
pub struct Shared {
    pub router: Router,
    /// Where requests no route answers go (None: 404).
    pub app: Option<Arc<dyn App>>,
    /// Where the server listens, as the app is told: one address per
    /// listener, by the backend's listener index.
    pub servers: Vec<Arc<ServerAddr>>,
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
    /// How long an app call may run (None: for ever).
    pub request_timeout: Option<Duration>,
    /// Proxy headers and the PROXY protocol.
    pub proxy: super::proxy::ProxyConfig,
    /// How long after its last answer a keep-alive connection idle at the
    /// drain's start is kept (None: closed at once; [`Tuning::drain_idle`]).
    pub drain_idle: Option<Duration>,
    /// How far into the drain streams are told to end (`--stream-drain-timeout`).
    pub stream_drain: Duration,
    /// Which HTTP versions connections may speak.
    pub http: super::config::HttpVersion,
    /// HTTP/2's limits.
    pub http2: crate::h2::Settings,
}

impl Shared {
    /// What the connections of a server with `config` share: its HTTP
    /// settings (its listener, CPUs and TLS are the server's), `app`, and
    /// the address of each listener the app is told.
    pub fn new(
        config: super::Config,
        tuning: &Tuning,
        app: Option<Arc<dyn App>>,
        servers: Vec<Arc<ServerAddr>>,
    ) -> Shared {
        Shared {
            router: config.router,
            app,
            servers,
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
            request_timeout: config.request_timeout,
            proxy: config.proxy,
            drain_idle: tuning.drain_idle,
            stream_drain: config.stream_drain_timeout,
            http: config.http,
            http2: crate::h2::Settings {
                flood_budget: config.http2.flood_budget.filter(|_| tuning.h2_flood_guard),
                max_pending_reset_streams: match tuning.h2_reset_guard {
                    true => config.http2.max_pending_reset_streams,
                    false => usize::MAX,
                },
                max_local_error_resets: match tuning.h2_reset_guard {
                    true => config.http2.max_local_error_resets,
                    false => usize::MAX,
                },
                max_body: config.limits.max_body,
                ..config.http2
            },
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
        let server = Arc::new(ServerAddr::Unix("/test".into()));
        Shared::new(config, &Tuning::default(), app, vec![server])
    }
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
    output: OutputQueue,
    /// A route's answer, sent once the request's body is read.
    pending: Option<(RequestHead, Reply)>,
    /// The request the application is answering.
    app: Option<AppCall>,
    /// The vector the app's events come in, empty between takes: lent to
    /// each request's conduit and swapped back with its events, so that a
    /// keep-alive connection's answers allocate none (and free none on the
    /// core that the app thread allocated).
    events: Vec<ResponseEvent>,
    /// The protocol the connection speaks now.
    mode: Mode,
    /// Closed by a timeout or a failed answer: done regardless of the protocol's state.
    closed: bool,
    /// Closed because the client took nothing (see `give_up_on_client`).
    given_up: bool,
    eof: bool,
    /// Graceful shutdown began: done as soon as idle.
    shutting: bool,
    /// Held by the drain until then for a request that may be on its way
    /// ([`HttpSession::drain_hold`]).
    held_by_drain: Option<deadlines::DrainHold>,
    /// When the drain tells a stream still open to end, or that it has
    /// ([`HttpSession::tell_stream`]).
    stream_tell: Option<deadlines::StreamTell>,
    peer: Peer,
    /// Where its connection came in, as the app is told.
    server: Arc<ServerAddr>,
    /// The TLS facts, once a [`crate::tls::TlsSession`] around this one
    /// finished its handshake.
    tls: Option<Arc<TlsInfo>>,
    /// Wakes this session from the application's threads.
    notifier: Notifier,
    /// A clear-text connection's first bytes, while they may still be the
    /// HTTP/2 preface (`--http auto`): nothing is parsed until they decide.
    sniffing: bool,
    sniffed: Vec<u8>,
}

impl Secured for HttpSession {
    /// ALPN decides the protocol: `h2`, or no ALPN under `--http 2`, is HTTP/2.
    fn secured(&mut self, info: Arc<TlsInfo>) {
        self.sniffing = false;
        let h2 = match info.alpn.as_deref() {
            Some(protocol) => protocol == crate::tls::config::ALPN_H2,
            None => self.shared.http == super::HttpVersion::Two,
        };
        self.tls = Some(info);
        if h2 {
            self.start_http2(&[], Instant::now());
        }
    }

    fn awaits_preamble(&self) -> bool {
        self.conn.awaits_preamble()
    }
}

impl HttpSession {
    /// Serve what the client sent, as far as the output queue and the
    /// application's buffers allow.
    fn pump(&mut self, now: Instant) {
        match self.mode {
            Mode::Http1 => self.http_pump(now),
            Mode::WebSocket(_) => self.ws_pump(now),
            Mode::Http2(_) => self.h2_pump(now),
        }
    }

    /// Hand the metrics the answers the protocol finished (all of their
    /// bytes are queued by now).
    fn meter_answers(&mut self, now: Instant) {
        if let Some(meter) = &mut self.meter {
            meter.answers(&mut self.conn, self.output.queued(), now);
        }
    }

    fn meter_cause(&mut self, cause: Cause) {
        if let Some(meter) = &mut self.meter {
            meter.cause(cause);
        }
    }

    /// Nothing queued, no app call, and the protocol between requests.
    fn between_requests(&self) -> bool {
        self.output.is_empty() && self.app.is_none() && self.conn.is_idle()
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
        self.output.clear();
        self.end_app();
    }

    /// An app still answering, or holding a WebSocket, is told the
    /// connection is gone.
    fn end_app(&mut self) {
        if let Some(call) = self.app.take() {
            call.abandon();
        }
        self.mode.end();
    }
}

impl Session for HttpSession {
    fn on_read(&mut self, data: &[u8], now: Instant) {
        if let Some(meter) = &self.meter {
            meter.read(data.len());
        }
        match self.mode {
            Mode::Http1 if self.sniffing => self.sniff_read(data, now),
            Mode::Http1 => self.http_read(data, now),
            Mode::WebSocket(_) => self.ws_read(data, now),
            Mode::Http2(_) => self.h2_read(data, now),
        }
    }

    fn on_eof(&mut self, now: Instant) {
        self.eof = true;
        if self.sniffing {
            // Too short to be the preface: HTTP/1.1 judges what came.
            self.sniffing = false;
            let first = std::mem::take(&mut self.sniffed);
            self.http_read(&first, now);
        }
        match self.mode {
            Mode::Http1 => self.http_eof(now),
            Mode::WebSocket(_) => self.ws_eof(),
            Mode::Http2(_) => self.h2_eof(now),
        }
    }

    /// The client ended its side: an app still answering hears it has gone
    /// (ASGI's `http.disconnect`), while its answer is still written.
    fn on_hangup(&mut self, _now: Instant) {
        if let Some(call) = &self.app {
            call.hang_up();
        }
    }

    fn output(&mut self) -> Output<'_> {
        self.output.next()
    }

    fn lend_output(&mut self) -> Option<(Bytes, usize)> {
        self.output.lend()
    }

    fn on_sent_lent(&mut self, buf: Bytes, n: usize, now: Instant) {
        // Not lent any more only if `close_now` dropped the queue meanwhile.
        if self.output.give_back(buf) {
            self.on_sent(n, now);
        }
    }

    fn on_sent(&mut self, n: usize, now: Instant) {
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
        if let Mode::WebSocket(ws) = &self.mode {
            ws.written(n);
        }
        self.output.sent(n);
        if self.output.is_empty() {
            // Pipelined requests held back by the high-water mark, and the keep-alive clock.
            self.pump(now);
        }
        self.arm_send(now);
    }

    fn wants_read(&self) -> bool {
        !self.closed
            && !self.eof
            && !self.output.full()
            && match &self.mode {
                Mode::WebSocket(ws) => ws.takes_input(),
                Mode::Http2(h2) => !h2.ended(),
                Mode::Http1 => {
                    self.app.as_ref().is_none_or(AppCall::takes_input) && self.conn.wants_read()
                }
            }
    }

    fn aborted(&self) -> bool {
        self.given_up
    }

    fn done(&self) -> bool {
        let finished = match &self.mode {
            Mode::WebSocket(ws) => ws.done(),
            Mode::Http1 => self.conn.must_close(),
            Mode::Http2(h2) => h2.ended(),
        };
        self.closed || finished || (self.shutting && self.idle())
    }

    fn deadline(&self) -> Option<Instant> {
        let tell = match self.stream_tell {
            Some(StreamTell::At(at)) => Some(at),
            _ => None,
        };
        let (stall, keep_alive, calls) = match &self.mode {
            Mode::Http2(h2) => (
                h2.stall_deadline(self.shared.send_timeout),
                h2.keep_alive_deadline(),
                h2.call_deadline(self.shared.request_timeout),
            ),
            _ => (None, None, None),
        };
        [
            self.deadline,
            self.send_deadline(),
            self.call_deadline(),
            tell,
            stall,
            keep_alive,
            calls,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn on_deadline(&mut self, now: Instant) {
        if matches!(self.stream_tell, Some(StreamTell::At(at)) if at <= now) {
            self.tell_stream(now);
        } else if self.call_deadline().is_some_and(|d| d <= now) {
            self.call_timed_out(now);
        } else if let Mode::Http2(h2) = &self.mode {
            match h2.stall_deadline(self.shared.send_timeout) {
                Some(d) if d <= now => self.h2_stalled(now),
                _ if h2
                    .call_deadline(self.shared.request_timeout)
                    .is_some_and(|d| d <= now) =>
                {
                    self.h2_calls_timed_out(now)
                }
                _ if self.send_deadline().is_some_and(|d| d <= now) => {
                    tracing::debug!("the client took no output for the send timeout: closing");
                    self.meter_cause(Cause::SendTimeout);
                    self.give_up_on_client();
                }
                _ if self.deadline.is_some_and(|d| d <= now) => self.h2_idle_timeout(now),
                _ if h2.keep_alive_deadline().is_some_and(|d| d <= now) => self.h2_keep_alive(now),
                _ => {}
            }
        } else if self.send_deadline().is_some_and(|d| d <= now) {
            tracing::debug!("the client took no output for the send timeout: closing");
            self.meter_cause(Cause::SendTimeout);
            self.give_up_on_client();
        } else if self.deadline.is_some_and(|d| d <= now) {
            match self.mode {
                Mode::Http1 => self.read_timed_out(now),
                Mode::WebSocket(_) => self.ws_deadline(now),
                Mode::Http2(_) => self.h2_idle_timeout(now),
            }
        }
    }

    /// Between requests, and neither a fresh connection whose first request
    /// is still to come nor a kept-alive one a drain holds for its next (a
    /// drain answers those rather than close under them).
    fn idle(&self) -> bool {
        if let Mode::Http2(h2) = &self.mode {
            // In a drain, only once the GOAWAYs are exchanged (`done`).
            return self.output.is_empty() && h2.idle() && !self.shutting;
        }
        self.between_requests() && !self.conn.is_fresh() && self.held_by_drain.is_none()
    }

    fn on_shutdown(&mut self) {
        self.shutting = true;
        let now = Instant::now();
        if let Mode::Http2(h2) = &mut self.mode {
            h2.drain(now + FRESH_GRACE);
            return self.h2_pump(now);
        }
        if self.conn.is_fresh() {
            // Its request is on the way; one that is not closes soon.
            let grace = now + FRESH_GRACE;
            self.deadline = Some(self.deadline.map_or(grace, |d| d.min(grace)));
        }
        // An answer's head told the client the connection stays (the answer
        // sent, queued or still being written): held for the next request,
        // which is told to close by its head instead. Told now, the protocol
        // would close under a request that may be on its way.
        let promised = matches!(self.mode, Mode::Http1) && self.conn.keep_alive_promised();
        if !(promised && self.drain_hold(now)) {
            self.conn.close_after_response();
        }
        match self.shared.stream_drain {
            Duration::ZERO => self.tell_stream(now),
            after => self.stream_tell = Some(StreamTell::At(now + after)),
        }
    }

    /// A request, body or message we will not read may still be coming.
    /// Never after a timeout or a failed answer (`closed`): the client is
    /// slow or gone, or already knows the answer failed.
    fn linger(&self) -> Linger {
        if self.closed {
            return Linger::No;
        }
        match &self.mode {
            Mode::WebSocket(ws) => ws.linger(),
            Mode::Http2(_) => Linger::IfUnread,
            Mode::Http1 if self.conn.peer_may_send() => Linger::Yes,
            Mode::Http1 => Linger::IfUnread,
        }
    }

    fn on_notify(&mut self, now: Instant) {
        let mut out = Vec::new();
        // The app's call, then the WebSocket it may have just accepted.
        self.app_progress(&mut out);
        self.ws_progress(&mut out);
        self.output.push_bytes(out);
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
        self.end_app();
    }
}
