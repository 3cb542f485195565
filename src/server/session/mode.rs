//! Which protocol a session speaks now. A connection starts in HTTP/1.1 and
//! may turn WebSocket for good once the app accepts an upgrade; each mode's
//! handling is its own file (`http1`, `websocket`), and the session's
//! [`Session`](crate::backend::Session) methods pick one by this enum. A new
//! protocol (HTTP/2) is another
//! variant here and another such file (`http2`).

use super::http2::Http2;
use super::websocket::WsSession;

pub(super) enum Mode {
    /// Requests parsed by the session's `ServerConn`, answered in order.
    Http1,
    /// The app accepted an upgrade: the bytes are WebSocket frames.
    WebSocket(WsSession),
    /// HTTP/2 (ALPN `h2`, or the preface in clear text): many streams.
    Http2(Box<Http2>),
}

impl Mode {
    /// The connection is gone: an accepted WebSocket's app hears it (the
    /// WebSocket is dropped; what is left reads as HTTP, which a closed
    /// session never serves).
    pub(super) fn end(&mut self) {
        match std::mem::replace(self, Mode::Http1) {
            Mode::WebSocket(ws) => ws.end(),
            Mode::Http2(mut h2) => h2.end(),
            Mode::Http1 => {}
        }
    }
}
