//! Application interfaces: how a request leaves the core thread for an
//! application (WSGI on the pool; ASGI later) and how its answer comes back.
//!
//! The core thread never runs Python (except in the loop-only shape, where
//! [`App::inline`] is true). It hands an [`AppRequest`] and a [`Conduit`] to
//! the [`App`]; the request body flows core → app through the conduit, the
//! answer flows app → core as [`ResponseEvent`]s, each side waking the other
//! only when it has something new.
//!
//! WebSockets ride the same conduit: a request of kind
//! [`RequestKind::WebSocket`] is answered with [`ResponseEvent::WsAccept`]
//! (the core writes the `101`), then messages flow both ways
//! ([`Conduit::try_receive_ws`] in, [`ResponseEvent::WsText`] and friends
//! out). Only an app whose [`App::websocket`] is true is handed such
//! requests; any other app sees the upgrade request as a plain HTTP request
//! (a WSGI app sees a normal GET) and its answer goes out as plain HTTP.

#[cfg(feature = "python")]
pub mod beat_thread;
pub mod body_buffer;
pub mod conduit;
pub mod peer_text;
pub mod piece;
#[cfg(feature = "python")]
pub mod python;
pub mod spec;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod waiters;
pub mod wakes;

pub use crate::http::Fields;
pub use body_buffer::{BodyBuffer, BufferConfig, BufferedBody};
pub use conduit::{AppWaker, BodyRead, Conduit, Gone, ResponseEvent, Sent, WsMessage};
pub use peer_text::PeerText;

use std::borrow::Cow;
use std::sync::Arc;

use crate::backend::Peer;
use crate::http::RequestHead;

/// Where the server listens, as an application sees it (SERVER_NAME/PORT).
#[derive(Clone, Debug)]
pub enum ServerAddr {
    Tcp { host: String, port: u16 },
    Unix(std::path::PathBuf),
}

/// A request handed to an application.
pub struct AppRequest {
    /// Shared with the session, which keeps it for the access log and error
    /// answers: no copy of the head per request, and the thread that parsed
    /// it usually frees it (a free from another thread costs the allocator more).
    pub head: Arc<RequestHead>,
    /// The client: the connection's peer, or the one a trusted proxy named.
    pub peer: Peer,
    /// What a trusted proxy forwarded (`--proxy-headers`; its `client` is
    /// already the `peer`): the scheme, host and port the client used. On a
    /// TLS connection `secure` is set where no proxy said otherwise.
    pub forwarded: crate::http::forwarded::Forwarded,
    pub server: Arc<ServerAddr>,
    pub kind: RequestKind,
    /// The connection's TLS facts (None: plain TCP or a Unix socket).
    pub tls: Option<Arc<crate::tls::TlsInfo>>,
}

/// What the client asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RequestKind {
    /// An HTTP request: answered with `Start`, `Body`..., `End`.
    #[default]
    Http,
    /// A valid WebSocket opening handshake (RFC 6455 §4.2.1): accepted with
    /// [`ResponseEvent::WsAccept`], or denied with an HTTP answer
    /// (`Start`...`End`, ASGI's `websocket.http.response`) or a
    /// [`ResponseEvent::WsClose`] (answered 403).
    WebSocket {
        /// Offered by the client, in its order of preference.
        subprotocols: Vec<String>,
    },
}

/// A request the application could not take now (its queue is full), handed back.
pub struct Refused {
    pub request: AppRequest,
    pub conduit: Arc<Conduit>,
}

/// An application the core threads dispatch unrouted requests to.
pub trait App: Send + Sync + 'static {
    /// Start serving `request`: its body arrives and its answer leaves through
    /// `conduit`. When the application's queue is full it hands both back
    /// ([`Refused`]): the caller stops reading that connection and calls again once
    /// the conduit's notifier fires (the app notifies refused callers when
    /// room frees). Called on a core thread, which pays at the end of its
    /// pass the wakes the app [`wakes::defer`]s; the conduit's notifications
    /// of the core wait while the notifying thread [`wakes::hold`]s them.
    fn call(&self, request: AppRequest, conduit: Arc<Conduit>) -> Result<(), Box<Refused>>;

    /// The loop-only shape: `call` runs the application on the calling core
    /// thread before it returns, so the request body must already be complete
    /// in the conduit when `call` is made.
    fn inline(&self) -> bool;

    /// Whether the app's body reads block a thread while they wait for the
    /// client (WSGI's `wsgi.input`). With request buffering on, such an app is
    /// called only once the core holds the whole body ([`BodyBuffer`]); an app
    /// whose reads only await (ASGI) keeps its body streamed.
    fn blocking_reads(&self) -> bool {
        false
    }

    /// Whether the app takes WebSocket requests ([`RequestKind::WebSocket`]).
    /// If not, an upgrade request reaches it as plain HTTP. An inline app is
    /// never handed one: a WebSocket outlives any one call on the core thread.
    fn websocket(&self) -> bool {
        false
    }

    /// Called on each core thread as it starts, before it serves: how the
    /// app's own threads and the core share a CPU is the app's to say (it
    /// knows whether it has any); nothing by default.
    fn on_core_thread(&self) {}

    /// The call whose answer goes through `conduit` ran past
    /// `--request-timeout` and is abandoned (the conduit is closed right
    /// after): the app logs where it is stuck and stops it where it can.
    /// Called on a core thread, so it only hands the work to the app's own
    /// threads. Nothing by default.
    fn timed_out(&self, _conduit: &Arc<Conduit>) {}

    /// In a worker: `ask` asks the supervisor for a replacement (ready
    /// before this worker drains), for an app that can serve no more: every
    /// thread of its own stuck in a call past `--request-timeout`. Called
    /// once, before the server is ready; nothing by default.
    fn when_stuck(&self, _ask: Arc<dyn Fn() + Send + Sync>) {}

    /// Claim a slot of the worker's heartbeat and keep it stamped while the
    /// app's own side answers (its GIL, its event loop), for the
    /// supervisor's `--worker-timeout`; called once, before the server is
    /// ready. Nothing by default: an app with no thread of its own is
    /// covered by the cores' slots.
    fn keep_heartbeat(&self, _heartbeat: &crate::ipc::heartbeat::Heartbeat) {}

    /// Its pool's or executor's figures now, for the metrics (sampled off
    /// the request path); none by default.
    fn figures(&self) -> crate::metrics::counters::AppFigures {
        Default::default()
    }
}

/// The request path percent-decoded (bytes: it need not be UTF-8); an
/// absolute-form target (`http://host/p`) loses its scheme and authority first.
pub fn decoded_path(path: &str) -> Cow<'_, [u8]> {
    percent_encoding::percent_decode(origin_path(path).as_bytes()).into()
}

/// The path of `path` as sent (still percent-encoded), without the scheme and
/// authority of an absolute-form target.
pub fn origin_path(path: &str) -> &str {
    // The origin form, nearly every request: no search for "://".
    if path.starts_with('/') {
        return path;
    }
    match path.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |at| &rest[at..]),
        None => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_decoded() {
        assert_eq!(&*decoded_path("/a%20b/%2Fc"), b"/a b//c");
        assert_eq!(&*decoded_path("/caf%E9"), b"/caf\xe9");
        assert_eq!(&*decoded_path("http://example.com/x/y"), b"/x/y");
        assert_eq!(&*decoded_path("http://example.com"), b"/");
        assert_eq!(origin_path("http://example.com/a%20b"), "/a%20b");
        assert_eq!(origin_path("/a%20b"), "/a%20b");
    }
}
