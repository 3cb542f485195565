//! Request heads: parsed with httparse, then held to RFC 9112's framing rules.

/// The protocol version of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
}

/// How the request's body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    /// No body (no Content-Length, no Transfer-Encoding, or Content-Length: 0).
    Empty,
    Length(u64),
    Chunked,
}

/// A parsed, validated request head.
#[derive(Clone, Debug)]
pub struct RequestHead {
    pub method: String,
    /// The request-target exactly as sent (origin-form: path and query).
    pub target: String,
    pub version: Version,
    /// Header names as sent, values as bytes, in order (duplicates kept).
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: BodyKind,
    /// The connection may stay open after this exchange, as far as the request says.
    pub keep_alive: bool,
    /// `Expect: 100-continue` was sent.
    pub expect_continue: bool,
}

impl RequestHead {
    /// The path part of the target (before `?`), still percent-encoded.
    pub fn path(&self) -> &str {
        self.target.split_once('?').map_or(&self.target, |(p, _)| p)
    }

    /// The query part of the target (after `?`), raw; empty if none.
    pub fn query(&self) -> &str {
        self.target.split_once('?').map_or("", |(_, q)| q)
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    pub fn is_head(&self) -> bool {
        self.method == "HEAD"
    }
}
