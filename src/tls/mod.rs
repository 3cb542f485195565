//! TLS: a sans-IO layer between a backend and the HTTP protocol.
//!
//! A backend hands a [`TlsSession`] ciphertext and sends what it asks; the
//! session runs rustls over it and hands the plaintext to the session it
//! wraps (HTTP, WebSocket after an upgrade), which does not know TLS is
//! there except through [`Secured`]. Certificates and keys are loaded once
//! per process ([`config`]): a worker started by a SIGHUP roll reads the
//! files anew, so a roll is how certificates are reloaded.

pub mod config;
pub mod info;
mod session;

pub use config::{ClientAuth, Files, LoadError, MinVersion, Settings};
pub use info::TlsInfo;
pub use session::{TlsService, TlsSession, TlsShared};

/// A session that can be told its connection is secured, once the
/// handshake is over and before any request is handed to it.
pub trait Secured {
    fn secured(&mut self, info: std::sync::Arc<TlsInfo>);
}
