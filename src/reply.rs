//! What an application layer answers a request with.

use std::fs::File;

/// A complete answer: status, headers, body. The protocol adds framing
/// (Content-Length or chunked), Date, Server and Connection itself.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

#[derive(Debug)]
pub enum Body {
    Empty,
    Bytes(Vec<u8>),
    /// `len` bytes of `file` from `offset`, written by the core thread without copying
    /// through the application.
    File {
        file: File,
        offset: u64,
        len: u64,
    },
}

impl Body {
    pub fn len(&self) -> u64 {
        match self {
            Body::Empty => 0,
            Body::Bytes(b) => b.len() as u64,
            Body::File { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Reply {
    /// With a Content-Length of its body where it names none and its status
    /// has a body: HTTP/1.1 frames by it, HTTP/2 announces the size with it.
    pub fn sized(mut self) -> Reply {
        let named = self
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-length"));
        if !named && !matches!(self.status, 100..=199 | 204 | 304) {
            let len = self.body.len().to_string();
            self.headers.push(("Content-Length".into(), len));
        }
        self
    }

    /// Its header fields, as the protocols take them.
    pub fn fields(&self) -> Vec<(&str, &[u8])> {
        self.headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_bytes()))
            .collect()
    }

    /// A short plain-text answer, e.g. for 404.
    pub fn text(status: u16, text: &str) -> Reply {
        Reply {
            status,
            headers: vec![("Content-Type".into(), "text/plain; charset=utf-8".into())],
            body: Body::Bytes(text.as_bytes().to_vec()),
        }
    }
}
