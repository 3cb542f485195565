//! Sans-IO HTTP/2 (RFC 9113) for a server: the `h2` crate (HPACK, framing,
//! stream states, flow control, and its defences against the known floods)
//! driven over an in-memory transport, bytes in and events out, as
//! [`crate::http`] is for HTTP/1.1.
//!
//! - [`conn`]: one connection, [`H2Conn`]: feed it bytes, drive it, take
//!   [`Event`]s and output, answer streams by id;
//! - [`head`]: requests as the [`crate::http::RequestHead`] an HTTP/1.1 app
//!   expects, and responses without HTTP/1.1's connection-specific fields;
//! - `pipe`: the transport h2 reads and writes.
//!
//! Why h2 and not a protocol of our own: its HPACK and state machine are
//! what hyper, tonic and reqwest run, fixed for each HTTP/2 CVE of the last
//! years (rapid reset, CONTINUATION floods, "made you reset"); driving it
//! without a runtime costs a no-op waker and a buffer copy each way.

pub mod conn;
pub mod flood;
pub mod head;
mod pipe;

pub use ::h2::Reason;
pub use conn::{Ended, Event, H2Conn, Settings};

/// The client connection preface (RFC 9113 §3.4): a connection in clear
/// text that opens with it is HTTP/2 by prior knowledge (§3.3).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What the first bytes of a clear-text connection say of its protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    /// The preface, whole: HTTP/2.
    Http2,
    /// Anything else: HTTP/1.1 (its parser judges them).
    Http1,
    /// A proper prefix of the preface so far: wait for more.
    Undecided,
}

/// Judge `first`, the bytes a connection opened with.
pub fn sniff(first: &[u8]) -> Sniffed {
    let n = first.len().min(PREFACE.len());
    if first[..n] != PREFACE[..n] {
        Sniffed::Http1
    } else if n == PREFACE.len() {
        Sniffed::Http2
    } else {
        Sniffed::Undecided
    }
}

#[cfg(test)]
mod tests;
