//! The lingering close: a connection whose peer may still be sending is
//! half-closed, and its input read and dropped, before it is closed.
//!
//! Closing a socket with unread input, or input still arriving, makes the
//! kernel answer with a reset. The peer's kernel then fails its next write,
//! and most clients give up there without reading what was already sent to
//! them: the 413 of an upload refused at its head, the answer before a
//! `Connection: close` that a pipelining client sent more after (RFC 9112
//! §9.6), the Close carrying 1009 or 1002 of a WebSocket failed while its
//! client was still sending a message (RFC 6455 §7.1.1 wants the server to
//! close the TCP connection only once the client has had its say). So, when
//! a finished session says its peer may still be sending
//! ([`super::Session::linger`]), the backend shuts down its sending side
//! (the peer reads our last bytes, then the end of input), then reads and
//! drops whatever comes until the peer's own end of input (a client that
//! read the answer and closed, or a WebSocket client that answered the
//! Close and closed), an error, or the linger time, whichever is first, as
//! nginx's `lingering_close` does. The session is told nothing more.
//!
//! The cost is bounded: one connection slot and no buffer of its own for at
//! most the linger time, a recv's worth of reading at a time.

use std::os::fd::AsFd;
use std::time::Duration;

use socket2::SockRef;

/// How long a lingering connection is read at most, unless the environment
/// says otherwise ([`from_env`]): as long as a WebSocket client has to answer
/// our Close, and nginx's `lingering_timeout`.
pub const DEFAULT_MS: u64 = 5000;

/// The linger time, `M0_LINGER_MS` (default [`DEFAULT_MS`]); `0` turns the
/// lingering close off (the negative arm: a finished connection is closed at
/// once, and a peer still sending gets a reset).
pub fn from_env() -> Option<Duration> {
    let ms = std::env::var("M0_LINGER_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_MS);
    (ms > 0).then(|| Duration::from_millis(ms))
}

/// Shut down the sending side of `fd`: the peer reads what was written, then
/// its end of input. A socket already gone has nothing left to tell.
pub fn half_close(fd: impl AsFd) {
    let _ = SockRef::from(&fd).shutdown(std::net::Shutdown::Write);
}
