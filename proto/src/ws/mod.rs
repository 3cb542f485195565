//! Sans-IO WebSockets (RFC 6455), server side: bytes in, events out. Nothing
//! here touches a socket; every rule is unit-tested on bytes.
//!
//! The HTTP side comes first: a request that [`handshake::is_websocket_request`]
//! is checked by [`handshake::validate`], which gives the `101` headers (or
//! the 400/426 to answer with). Once [`crate::http::ServerConn::is_upgraded`],
//! a [`WsConn`] takes over, fed first with
//! [`crate::http::ServerConn::take_buffered`]: [`WsConn::recv`] the bytes
//! read, [`WsConn::next_event`] the messages, and the `write_*` methods append
//! frames to the output.
//!
//! The concepts, one per module: the opening handshake ([`handshake`]),
//! frame headers and masking ([`frame`]), close codes and Close bodies
//! ([`close`]), incremental UTF-8 checking of text ([`utf8`]), and the
//! connection's state machine: messages, fragments and the closing
//! handshake ([`conn`]), the keepalive pings' clock ([`keepalive`]), and
//! permessage-deflate, the one extension negotiated ([`deflate`]).

pub mod close;
pub mod conn;
pub mod deflate;
pub mod frame;
pub mod handshake;
pub mod keepalive;
pub mod utf8;

pub use close::ProtocolError;
pub use conn::{WsConn, WsEvent};
pub use handshake::{HandshakeError, Upgrade};
pub use keepalive::Keepalive;
