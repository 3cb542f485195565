//! m0serve's protocols, sans-IO: bytes in, events and bytes out. Nothing here
//! touches a socket, a thread or Python; every rule is unit-tested on bytes,
//! and the fuzz targets (`fuzz/`) drive these types alone.
//!
//! - [`http`]: HTTP/1.1 (RFC 9112) for a server: one connection's state
//!   machine, request validation, response framing, PROXY preambles and
//!   forwarding headers;
//! - [`ws`]: its WebSocket (RFC 6455) sibling, entered after an HTTP upgrade;
//! - [`h2`]: HTTP/2 (RFC 9113), the `h2` crate driven without a runtime.
//!
//! The server crate (`m0serve`) re-exports both as `m0serve::http` and
//! `m0serve::ws`, and drives them from its backends' sessions.

pub mod h2;
pub mod http;
pub mod ws;
