//! What the user asked of the server: the command line and the `M0SERVE_*`
//! variables (built by [`crate::cli`]), or [`Config::default`] and a few
//! fields set (tests, examples, embedders). Every default here is the
//! command line's, which `cli`'s tests hold it to.

use std::time::Duration;

use super::access_log;
use super::listener;
use super::proxy::ProxyConfig;
use super::Listen;
use crate::app::BufferConfig;
use crate::backend::Choice;
use crate::http::{defaults, Defaults, Limits};
use crate::routes::{Router, DEFAULT_STATIC_MAX_AGE};
use crate::ws::Keepalive;

/// The server's settings.
#[derive(Debug)]
pub struct Config {
    /// Where to listen: every core serves each (most servers have one).
    pub listen: Vec<Listen>,
    /// The backlog and socket file mode of a listener bound here.
    pub socket: listener::Setup,
    /// Core threads; `None`: one per CPU the process may use (its affinity
    /// mask, or fewer under a cgroup CPU quota: see `cpus`).
    pub cores: Option<usize>,
    pub backend: Choice,
    pub limits: Limits,
    /// A client must send a complete head within this (from its first byte).
    pub header_read_timeout: Duration,
    /// An idle keep-alive connection is closed after this.
    pub keep_alive_timeout: Duration,
    /// Connections beyond this wait in the listen backlog.
    pub max_connections: usize,
    /// How long shutdown waits for requests in flight before it closes them.
    pub graceful_timeout: Duration,
    /// How far into the drain a response still streaming (an ASGI app's
    /// `receive()` then says `http.disconnect`) and a WebSocket (Close 1001)
    /// are told to end: the graceful timeout less a second by default.
    pub stream_drain_timeout: Duration,
    pub router: Router,
    /// Log each request in this format (target `m0serve::access`; None: off).
    pub access_log: Option<access_log::Format>,
    /// Serve WebSocket upgrades to an app that takes them (else they reach
    /// it as plain HTTP).
    pub ws: bool,
    /// The largest WebSocket message accepted, in bytes.
    pub ws_max_message: usize,
    /// What every response gets unless it sets it: `Server: m0serve`
    /// (`--no-server-header`: not), the `--header` fields.
    pub response_defaults: Defaults,
    /// Pings for quiet WebSockets, and how long an answer may take (None: none).
    pub ws_keepalive: Option<Keepalive>,
    /// Negotiate permessage-deflate with clients that offer it.
    pub ws_deflate: bool,
    /// Buffer the bodies of apps whose reads block (WSGI) before calling
    /// them: memory, then a file (None: `--request-buffering off`).
    pub body_buffer: Option<BufferConfig>,
    /// A request body's next bytes may take this long (408 beyond).
    pub body_read_timeout: Duration,
    /// Output the client takes none of for this long closes the connection.
    pub send_timeout: Duration,
    /// An app call running longer is abandoned: 504 if nothing was sent.
    pub request_timeout: Option<Duration>,
    /// Proxy headers and the PROXY protocol, and the peers trusted for them.
    pub proxy: ProxyConfig,
    /// Serve TLS with these certificates (None: plain HTTP).
    pub tls: Option<crate::tls::Settings>,
    /// Which HTTP versions connections may speak (`--http`).
    pub http: HttpVersion,
    /// HTTP/2's limits (`--http2-*`).
    pub http2: crate::h2::Settings,
}

/// Which HTTP versions are served (`--http auto|1|2`, Granian's flag).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HttpVersion {
    /// HTTP/2 by ALPN `h2` over TLS, or by its preface in clear text;
    /// otherwise HTTP/1.1.
    #[default]
    Auto,
    /// HTTP/1.1 only: ALPN offers `http/1.1`; a preface gets HTTP/1.1's 505.
    One,
    /// HTTP/2 only: ALPN offers `h2`; anything else gets a GOAWAY.
    Two,
}

impl HttpVersion {
    pub fn h1(self) -> bool {
        self != HttpVersion::Two
    }

    pub fn h2(self) -> bool {
        self != HttpVersion::One
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            listen: vec![Listen::Tcp {
                host: "127.0.0.1".into(),
                port: 8000,
            }],
            socket: listener::Setup::default(),
            cores: None,
            backend: Choice::Auto,
            limits: Limits::default(),
            header_read_timeout: Duration::from_secs(10),
            keep_alive_timeout: Duration::from_secs(5),
            max_connections: 10_000,
            graceful_timeout: Duration::from_secs(30),
            stream_drain_timeout: Duration::from_secs(29),
            router: Router::default().with_static_max_age(DEFAULT_STATIC_MAX_AGE),
            access_log: None,
            ws: true,
            ws_max_message: 16 << 20,
            response_defaults: defaults::STANDARD.clone(),
            ws_keepalive: Some(Keepalive {
                interval: Duration::from_secs(20),
                timeout: Duration::from_secs(20),
            }),
            ws_deflate: true,
            body_buffer: Some(BufferConfig::default()),
            body_read_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(30),
            request_timeout: None,
            proxy: ProxyConfig::default(),
            tls: None,
            http: HttpVersion::Auto,
            http2: crate::h2::Settings {
                max_header_list_size: Limits::default().max_head as u32,
                ..crate::h2::Settings::default()
            },
        }
    }
}
