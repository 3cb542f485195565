//! TLS: a sans-IO layer between a backend and the HTTP protocol.
//!
//! A backend hands a [`TlsSession`] ciphertext and sends what it asks; the
//! session runs rustls over it and hands the plaintext to the session it
//! wraps (HTTP, WebSocket after an upgrade), which does not know TLS is
//! there except through [`Secured`]. A PROXY protocol preamble, sent in the
//! clear before the handshake, is passed through to that session as it is.
//! Only TCP peers get TLS: a Unix socket's are served plain ([`tcp_only`]).
//! Certificates and keys are loaded once
//! per process ([`config`]): a worker started by a SIGHUP roll reads the
//! files anew, so a roll is how certificates are reloaded.

pub mod config;
pub mod info;
pub mod kernel;
mod session;
mod tcp_only;
pub mod tickets;

pub use config::{ClientAuth, Files, LoadError, MinVersion, Settings};
pub use info::TlsInfo;
pub use session::{TlsService, TlsSession, TlsShared};
pub use tcp_only::Either;

/// A session that can be told its connection is secured, once the
/// handshake is over and before any request is handed to it.
pub trait Secured {
    fn secured(&mut self, info: std::sync::Arc<TlsInfo>);

    /// Whether the connection opens with a PROXY protocol preamble, which
    /// comes in the clear before the handshake. The TLS layer hands the
    /// preamble's bytes to this session as they are, and only the rest
    /// to rustls.
    fn awaits_preamble(&self) -> bool {
        false
    }
}
