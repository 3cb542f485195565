//! Flags of the protocol: request limits, timeouts, body buffering, WebSocket.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::FalseyValueParser;
use clap::{ArgAction, Args, ValueEnum};

use super::values::{parse_positive_seconds, parse_seconds, parse_size};
use crate::app::BufferConfig;
use crate::http::defaults::parse_field;
use crate::http::{Defaults, Limits};
use crate::ws::Keepalive;

#[derive(Args, Debug)]
pub(super) struct HttpArgs {
    /// Largest request body, in bytes or with a K, M, G or T suffix (powers of 1024).
    #[arg(long, env = "M0SERVE_MAX_BODY_SIZE", value_name = "SIZE", default_value = "1G", value_parser = parse_size)]
    max_body_size: u64,

    /// Seconds a client has to send a complete request head.
    #[arg(long, env = "M0SERVE_HEADER_READ_TIMEOUT", value_name = "SECONDS", default_value = "10", value_parser = parse_seconds)]
    pub(super) header_read_timeout: Duration,

    /// Seconds an idle keep-alive connection is kept open.
    #[arg(long, env = "M0SERVE_KEEP_ALIVE_TIMEOUT", value_name = "SECONDS", default_value = "5", value_parser = parse_seconds)]
    pub(super) keep_alive_timeout: Duration,

    /// WSGI: read a request's whole body (memory, then a temporary file)
    /// before a Python thread sees it; off streams it to wsgi.input.
    #[arg(long, env = "M0SERVE_REQUEST_BUFFERING", value_enum, default_value_t = Switch::On)]
    request_buffering: Switch,

    /// Request body bytes held in memory before the rest goes to a temporary file.
    #[arg(long, env = "M0SERVE_BODY_BUFFER_SIZE", value_name = "SIZE", default_value = "1M", value_parser = parse_size)]
    body_buffer_size: u64,

    /// Directory of the (unlinked) temporary files of buffered bodies [default: the system's temp dir].
    #[arg(long, env = "M0SERVE_BODY_SPILL_DIR", value_name = "DIR")]
    body_spill_dir: Option<PathBuf>,

    /// Seconds a request body's next bytes may take; then 408 and a close.
    #[arg(long, env = "M0SERVE_BODY_READ_TIMEOUT", value_name = "SECONDS", default_value = "30", value_parser = parse_seconds)]
    pub(super) body_read_timeout: Duration,

    /// Seconds a response may wait for the client to read any of it; then the
    /// connection closes and the app's next write fails.
    #[arg(long, env = "M0SERVE_SEND_TIMEOUT", value_name = "SECONDS", default_value = "30", value_parser = parse_seconds)]
    pub(super) send_timeout: Duration,

    /// Seconds an app call may run: past it its traceback is logged, the client gets 504 if nothing was sent (else a close), and the call is abandoned (ASGI: cancelled; WSGI: its answer dropped) [default: off].
    #[arg(long, env = "M0SERVE_REQUEST_TIMEOUT", value_name = "SECS", value_parser = parse_positive_seconds)]
    pub(super) request_timeout: Option<Duration>,

    /// Serve WebSocket upgrades (to an app that takes them; --no-ws: they
    /// reach the app as plain HTTP) [default: on].
    #[arg(long, env = "M0SERVE_WS", value_parser = FalseyValueParser::new(), action = ArgAction::Set,
          num_args = 0..=1, default_value = "true", default_missing_value = "true",
          overrides_with = "no_ws")]
    ws: bool,

    /// Turn WebSocket support off (see --ws).
    #[arg(long, overrides_with = "ws")]
    no_ws: bool,

    /// Send `Server: m0serve` on responses whose app set none (--no-server-header: never) [default: on].
    #[arg(long, env = "M0SERVE_SERVER_HEADER", value_parser = FalseyValueParser::new(), action = ArgAction::Set,
          num_args = 0..=1, default_value = "true", default_missing_value = "true",
          overrides_with = "no_server_header")]
    server_header: bool,

    /// Send no Server field of our own (see --server-header).
    #[arg(long, overrides_with = "server_header")]
    no_server_header: bool,

    /// A field every response gets unless it sets one of that name, as
    /// NAME:VALUE (repeatable; the variable holds one). `Server:...` stands in
    /// for ours.
    #[arg(long = "header", env = "M0SERVE_HEADER", value_name = "NAME:VALUE", value_parser = parse_field)]
    headers: Vec<(String, Vec<u8>)>,

    /// Largest WebSocket message, in bytes or with a K, M, G or T suffix (powers of 1024).
    #[arg(long, env = "M0SERVE_WS_MAX_MESSAGE_SIZE", value_name = "SIZE", default_value = "16M", value_parser = parse_size)]
    ws_max_message_size: u64,

    /// Negotiate permessage-deflate (RFC 7692) with WebSocket clients that
    /// offer it (--no-ws-per-message-deflate: never) [default: on].
    #[arg(long, env = "M0SERVE_WS_PER_MESSAGE_DEFLATE", value_parser = FalseyValueParser::new(),
          action = ArgAction::Set, num_args = 0..=1, default_value = "true",
          default_missing_value = "true", overrides_with = "no_ws_per_message_deflate")]
    ws_per_message_deflate: bool,

    /// Never compress WebSocket messages (see --ws-per-message-deflate).
    #[arg(long, overrides_with = "ws_per_message_deflate")]
    no_ws_per_message_deflate: bool,

    /// Seconds a WebSocket may be quiet before the server pings it; 0: no pings.
    #[arg(long, env = "M0SERVE_WS_PING_INTERVAL", value_name = "SECONDS", default_value = "20", value_parser = parse_seconds)]
    ws_ping_interval: Duration,

    /// Seconds a ping may go unanswered (nothing at all heard) before the connection is dropped.
    #[arg(long, env = "M0SERVE_WS_PING_TIMEOUT", value_name = "SECONDS", default_value = "20", value_parser = parse_positive_seconds)]
    ws_ping_timeout: Duration,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Switch {
    On,
    Off,
}

impl HttpArgs {
    /// How bodies are buffered (None: `--request-buffering off`).
    pub(super) fn body_buffer(&self) -> Option<BufferConfig> {
        (self.request_buffering == Switch::On).then(|| BufferConfig {
            memory: usize::try_from(self.body_buffer_size).unwrap_or(usize::MAX),
            spill_dir: self
                .body_spill_dir
                .clone()
                .unwrap_or_else(std::env::temp_dir),
        })
    }

    pub(super) fn limits(&self) -> Limits {
        Limits {
            max_body: self.max_body_size,
            ..Limits::default()
        }
    }

    /// What every response gets unless it sets it: our `Server` field
    /// (`--no-server-header` wins when last) and the `--header` fields.
    pub(super) fn response_defaults(&self) -> Defaults {
        Defaults::new(
            self.server_header && !self.no_server_header,
            self.headers.clone(),
        )
    }

    /// Whether WebSocket upgrades are served (`--no-ws` wins when last).
    pub(super) fn ws(&self) -> bool {
        self.ws && !self.no_ws
    }

    /// Whether permessage-deflate is negotiated (`--no-ws-per-message-deflate` wins when last).
    pub(super) fn ws_deflate(&self) -> bool {
        self.ws_per_message_deflate && !self.no_ws_per_message_deflate
    }

    pub(super) fn ws_max_message(&self) -> usize {
        usize::try_from(self.ws_max_message_size).unwrap_or(usize::MAX)
    }

    /// The WebSocket keepalive (None: `--ws-ping-interval 0`).
    pub(super) fn ws_keepalive(&self) -> Option<Keepalive> {
        (!self.ws_ping_interval.is_zero()).then_some(Keepalive {
            interval: self.ws_ping_interval,
            timeout: self.ws_ping_timeout,
        })
    }
}
