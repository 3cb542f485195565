//! Response heads and body framing (SKELETON).

/// How a response body is framed on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body is sent (HEAD, 1xx, 204, 304).
    NoBody,
    Length(u64),
    Chunked,
    /// Delimited by closing the connection (an HTTP/1.0 client, no length).
    Close,
}
