//! One connection's HTTP/1.1 state machine (SKELETON: to be implemented).

use super::{Framing, HttpError, RequestHead};

/// Limits a connection enforces.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest request head, request line included (431 beyond). Default 64 KiB.
    pub max_head: usize,
    /// Largest request body (413 beyond).
    pub max_body: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head: 64 * 1024,
            max_body: 1024 * 1024 * 1024,
        }
    }
}

/// What the connection parsed.
#[derive(Debug)]
pub enum Event {
    Head(RequestHead),
    /// A piece of the current request's body (chunk framing removed).
    Data(Vec<u8>),
    /// The current request's body is complete.
    End,
    /// The input is bad: answer with [`ServerConn::write_error`] and close.
    Error(HttpError),
}

pub struct ServerConn {
    _limits: Limits,
}

impl ServerConn {
    pub fn new(limits: Limits) -> Self {
        ServerConn { _limits: limits }
    }
    pub fn recv(&mut self, _data: &[u8]) {
        todo!()
    }
    pub fn recv_eof(&mut self) {
        todo!()
    }
    pub fn next_event(&mut self) -> Option<Event> {
        todo!()
    }
    pub fn wants_read(&self) -> bool {
        todo!()
    }
    pub fn is_idle(&self) -> bool {
        todo!()
    }
    pub fn has_partial_head(&self) -> bool {
        todo!()
    }
    pub fn write_continue(&mut self, _out: &mut Vec<u8>) {
        todo!()
    }
    pub fn start_response(
        &mut self,
        _status: u16,
        _headers: &[(&str, &[u8])],
        _out: &mut Vec<u8>,
    ) -> Framing {
        todo!()
    }
    pub fn write_body(&mut self, _data: &[u8], _out: &mut Vec<u8>) {
        todo!()
    }
    pub fn body_sent(&mut self, _len: u64) {
        todo!()
    }
    pub fn finish_response(&mut self, _out: &mut Vec<u8>) {
        todo!()
    }
    pub fn write_error(&mut self, _err: &HttpError, _out: &mut Vec<u8>) {
        todo!()
    }
    pub fn must_close(&self) -> bool {
        todo!()
    }
    pub fn close_after_response(&mut self) {
        todo!()
    }
}
