//! Protocol errors, each with the status it is answered with.

/// A request the server refuses; the connection is closed after the answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpError {
    /// 400: malformed request line or header, smuggling-prone framing, bad chunk.
    BadRequest(&'static str),
    /// 408: the body's next bytes took longer than the body read timeout.
    RequestTimeout,
    /// 413: the body exceeds the limit.
    PayloadTooLarge,
    /// 414: the request line alone exceeds the head's limit, so its target
    /// is longer than the server parses (RFC 9112 §3 says 414, MUST).
    UriTooLong,
    /// 417: an `Expect` member other than `100-continue`, which no server
    /// here can meet.
    ExpectationFailed,
    /// 431: the head exceeds the limit.
    HeadTooLarge,
    /// 501: a transfer coding other than chunked.
    NotImplemented(&'static str),
    /// 505: HTTP/2 or later on an HTTP/1 connection.
    VersionNotSupported,
}

impl HttpError {
    pub fn status(&self) -> u16 {
        match self {
            HttpError::BadRequest(_) => 400,
            HttpError::RequestTimeout => 408,
            HttpError::PayloadTooLarge => 413,
            HttpError::UriTooLong => 414,
            HttpError::ExpectationFailed => 417,
            HttpError::HeadTooLarge => 431,
            HttpError::NotImplemented(_) => 501,
            HttpError::VersionNotSupported => 505,
        }
    }

    /// A short explanation, sent as the answer's body.
    pub fn reason(&self) -> &'static str {
        match self {
            HttpError::BadRequest(why) => why,
            HttpError::RequestTimeout => "request body timed out",
            HttpError::PayloadTooLarge => "request body too large",
            HttpError::UriTooLong => "request target too long",
            HttpError::ExpectationFailed => "only the 100-continue expectation is met",
            HttpError::HeadTooLarge => "request head too large",
            HttpError::NotImplemented(why) => why,
            HttpError::VersionNotSupported => "HTTP version not supported",
        }
    }
}
