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
    /// A short plain-text answer, e.g. for 404.
    pub fn text(status: u16, text: &str) -> Reply {
        Reply {
            status,
            headers: vec![("Content-Type".into(), "text/plain; charset=utf-8".into())],
            body: Body::Bytes(text.as_bytes().to_vec()),
        }
    }
}
