//! Flags of HTTP/2 and of which HTTP is served (`--http`), Granian's names.

use clap::Args;

use super::values::{parse_positive_seconds, parse_size};
use crate::h2::Settings;
use crate::server::HttpVersion;

#[derive(Args, Debug)]
pub(super) struct Http2Args {
    /// Which HTTP to serve: auto (HTTP/2 by ALPN `h2` or by its preface in
    /// clear text, else HTTP/1.1), 1 (HTTP/1.1 only) or 2 (HTTP/2 only).
    #[arg(long, env = "M0SERVE_HTTP", value_name = "auto|1|2", default_value = "auto", value_parser = parse_http)]
    pub(super) http: HttpVersion,

    /// Streams one HTTP/2 connection may have open at once.
    #[arg(long, env = "M0SERVE_HTTP2_MAX_CONCURRENT_STREAMS", value_name = "N", default_value = "100",
          value_parser = clap::value_parser!(u32).range(1..))]
    http2_max_concurrent_streams: u32,

    /// Largest decoded HTTP/2 header list (HPACK's output), as the HTTP/1.1
    /// head limit; 431 beyond.
    #[arg(long, env = "M0SERVE_HTTP2_MAX_HEADERS_SIZE", value_name = "SIZE", default_value = "64K", value_parser = parse_window)]
    http2_max_headers_size: u32,

    /// Bytes of a request body an HTTP/2 client may send ahead of the app (per stream).
    #[arg(long, env = "M0SERVE_HTTP2_INITIAL_STREAM_WINDOW_SIZE", value_name = "SIZE", default_value = "1M", value_parser = parse_window)]
    http2_initial_stream_window_size: u32,

    /// Bytes of request bodies an HTTP/2 client may send ahead, all its streams together.
    #[arg(long, env = "M0SERVE_HTTP2_INITIAL_CONNECTION_WINDOW_SIZE", value_name = "SIZE", default_value = "1M", value_parser = parse_window)]
    http2_initial_connection_window_size: u32,

    /// Largest HTTP/2 frame payload the client may send (16K to 16M - 1).
    #[arg(long, env = "M0SERVE_HTTP2_MAX_FRAME_SIZE", value_name = "SIZE", default_value = "16K", value_parser = parse_frame_size)]
    http2_max_frame_size: u32,

    /// Send an HTTP/2 connection a PING once it has been quiet this many
    /// milliseconds (Granian's unit); off by default.
    #[arg(long, env = "M0SERVE_HTTP2_KEEP_ALIVE_INTERVAL", value_name = "MS",
          value_parser = clap::value_parser!(u64).range(1..))]
    http2_keep_alive_interval: Option<u64>,

    /// Close an HTTP/2 connection whose keep-alive PING is unanswered for this long.
    #[arg(long, env = "M0SERVE_HTTP2_KEEP_ALIVE_TIMEOUT", value_name = "SECONDS", default_value = "20",
          value_parser = parse_positive_seconds)]
    http2_keep_alive_timeout: std::time::Duration,
}

impl Http2Args {
    pub(super) fn settings(&self) -> Settings {
        Settings {
            max_concurrent_streams: self.http2_max_concurrent_streams,
            max_header_list_size: self.http2_max_headers_size,
            initial_stream_window: self.http2_initial_stream_window_size,
            initial_connection_window: self.http2_initial_connection_window_size,
            max_frame_size: self.http2_max_frame_size,
            keep_alive_interval: self
                .http2_keep_alive_interval
                .map(std::time::Duration::from_millis),
            keep_alive_timeout: self.http2_keep_alive_timeout,
            ..Settings::default()
        }
    }
}

fn parse_http(s: &str) -> Result<HttpVersion, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "auto" => Ok(HttpVersion::Auto),
        "1" | "1.1" => Ok(HttpVersion::One),
        "2" => Ok(HttpVersion::Two),
        "h11" | "httptools" => Err(format!(
            "{s} is uvicorn's choice of HTTP/1.1 parser; m0serve has one HTTP/1.1 implementation: use auto, 1 or 2"
        )),
        _ => Err("expected auto, 1 or 2".into()),
    }
}

/// A flow-control window or list size: 1 to 2^31 - 1 bytes (RFC 9113 §6.9.1).
fn parse_window(s: &str) -> Result<u32, String> {
    let n = parse_size(s)?;
    match u32::try_from(n) {
        Ok(n) if (1..=0x7fff_ffff).contains(&n) => Ok(n),
        _ => Err("must be between 1 byte and 2G - 1".into()),
    }
}

/// SETTINGS_MAX_FRAME_SIZE's range (RFC 9113 §6.5.2).
fn parse_frame_size(s: &str) -> Result<u32, String> {
    let n = parse_size(s)?;
    match u32::try_from(n) {
        Ok(n) if (16_384..=16_777_215).contains(&n) => Ok(n),
        _ => Err("must be between 16K and 16M - 1 (16777215)".into()),
    }
}
