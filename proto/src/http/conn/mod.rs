//! One connection's HTTP/1.1 state machine (RFC 9112), sans IO.
//!
//! Reading and writing are two halves that meet at the *exchange* (one
//! request and its response). The read half parses a head only while no
//! exchange is outstanding, so pipelined requests wait in the buffer and are
//! answered in order. After [`ServerConn::finish_response`] the exchange ends;
//! if its body was not read to the end, the rest is read and dropped before
//! the next head (unless a `100 Continue` was owed and never sent: the client
//! may be holding the body back, so the connection closes instead).
//!
//! End of input ([`ServerConn::recv_eof`]):
//! - between requests, or with only part of a head buffered: [`ServerConn::must_close`]
//!   turns true; no event, no response;
//! - in the middle of a body: the same (the body can never complete); the
//!   events already produced stand, no `End` follows;
//! - with a complete request read: its response is still written, then the
//!   connection closes; complete heads already buffered behind it (a client
//!   that pipelined and half-closed) are still answered first.
//!
//! PROXY protocol ([`ServerConn::expect_preamble`]): the connection's first
//! bytes must be a preamble ([`crate::http::proxy_protocol`]), reported as
//! [`Event::Preamble`] before any head. A missing or malformed one closes the
//! connection without an answer (nothing that sent it speaks HTTP to us for
//! sure); end of input before it is complete closes it the same way. Until it
//! is complete the connection counts as in a partial head, so the
//! header-read timeout bounds it.
//!
//! A body error found while dropping an unread body (after its response
//! ended) closes the connection without an event: there is no request left to
//! answer it for.

mod read;
#[cfg(test)]
mod tests;
mod write;

use std::sync::Arc;

use super::chunked::ChunkedDecoder;
use super::head::HeadScanner;
use super::response::BodyWriter;
use super::{Defaults, HttpError, RequestHead, Version};

/// Limits a connection enforces.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest request head, request line included (431 beyond). Default 64 KiB.
    /// Also bounds a chunked body's extensions and trailers together (400 beyond).
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
    /// The PROXY protocol preamble (only after [`ServerConn::expect_preamble`]).
    Preamble(crate::http::proxy_protocol::Preamble),
    Head(RequestHead),
    /// A piece of the current request's body (chunk framing removed).
    Data(Vec<u8>),
    /// The current request's body is complete (also sent, right after `Head`,
    /// for a request without a body).
    End,
    /// The input is bad: answer with [`ServerConn::write_error`] and close.
    Error(HttpError),
}

/// Where the read half is.
#[derive(Debug)]
enum Read {
    /// Waiting for the PROXY protocol preamble: the connection's first bytes.
    Preamble,
    /// Waiting for the next head. Only between exchanges: parsing a head
    /// starts one, and only its end (`finish_response`) comes back here.
    Head,
    /// A Content-Length body with this many bytes left.
    Length(u64),
    Chunked(ChunkedDecoder),
    /// The body is complete; `End` is still to be reported.
    End,
    /// The body is complete and reported.
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Continue {
    NotExpected,
    Expected,
    Sent,
}

#[derive(Debug)]
enum Response {
    NotStarted,
    Started {
        body: BodyWriter,
        /// The head left the connection open (no `Connection: close`).
        keep_alive: bool,
        /// A 101: the connection leaves HTTP after this response.
        upgrade: bool,
        status: u16,
    },
}

/// One request and its response.
#[derive(Debug)]
struct Exchange {
    version: Version,
    head_request: bool,
    /// The request allows reusing the connection.
    keep_alive: bool,
    expect: Continue,
    /// Some of the body has been received (a `100 Continue` is then left out).
    body_seen: bool,
    response: Response,
}

impl Exchange {
    fn new(head: &RequestHead) -> Self {
        Exchange {
            version: head.version,
            head_request: head.is_head(),
            keep_alive: head.keep_alive,
            expect: if head.expect_continue {
                Continue::Expected
            } else {
                Continue::NotExpected
            },
            body_seen: false,
            response: Response::NotStarted,
        }
    }

    /// The exchange an error answer belongs to when no request could be parsed.
    fn for_error() -> Self {
        Exchange {
            version: Version::Http11,
            head_request: false,
            keep_alive: false,
            expect: Continue::NotExpected,
            body_seen: false,
            response: Response::NotStarted,
        }
    }
}

/// One connection's protocol state: bytes in with [`ServerConn::recv`], events
/// out of [`ServerConn::next_event`], response bytes appended to the caller's
/// output buffer by the `write_*` methods.
#[derive(Debug)]
pub struct ServerConn {
    limits: Limits,
    /// Received bytes; `buf[pos..]` are not consumed yet. Reused for the
    /// connection's life and compacted on each `recv`.
    buf: Vec<u8>,
    pos: usize,
    scanner: HeadScanner,
    read: Read,
    exchange: Option<Exchange>,
    /// The exchange ended before its body was read: drop the rest of it.
    discard: bool,
    /// Graceful shutdown: the next response says `Connection: close`.
    close_after: bool,
    eof: bool,
    /// Some bytes have arrived (see [`ServerConn::is_fresh`]).
    received: bool,
    /// No further requests: close once the output is written.
    closed: bool,
    /// Bad input was reported ([`Event::Error`]); what followed it is unread.
    failed: bool,
    upgraded: bool,
    /// The statuses of the answers finished since the last
    /// [`ServerConn::take_answered`], kept only once
    /// [`ServerConn::record_answers`] asked (the metrics count them).
    answered: Option<Vec<u16>>,
    /// What each response head gets unless it sets it (None: the standard,
    /// our `Server` field).
    defaults: Option<Arc<Defaults>>,
}

impl ServerConn {
    pub fn new(limits: Limits) -> Self {
        ServerConn {
            limits,
            buf: Vec::new(),
            pos: 0,
            scanner: HeadScanner::default(),
            read: Read::Head,
            exchange: None,
            discard: false,
            close_after: false,
            eof: false,
            received: false,
            closed: false,
            failed: false,
            upgraded: false,
            answered: None,
            defaults: None,
        }
    }

    /// Responses get `defaults` instead of the standard (`--header`,
    /// `--no-server-header`).
    pub fn set_defaults(&mut self, defaults: Arc<Defaults>) {
        self.defaults = Some(defaults);
    }

    /// Keep the status of every answer finished, for [`ServerConn::take_answered`].
    pub fn record_answers(&mut self) {
        self.answered.get_or_insert_with(Vec::new);
    }

    /// The oldest answer finished and not yet taken: its status.
    pub fn take_answered(&mut self) -> Option<u16> {
        let answered = self.answered.as_mut()?;
        (!answered.is_empty()).then(|| answered.remove(0))
    }

    /// The connection's first bytes must be a PROXY protocol preamble. Call
    /// before any bytes are received.
    pub fn expect_preamble(&mut self) {
        debug_assert!(!self.received);
        self.read = Read::Preamble;
    }

    /// Still waiting for the PROXY protocol preamble it was told to expect.
    pub fn awaits_preamble(&self) -> bool {
        matches!(self.read, Read::Preamble) && !self.closed
    }

    /// Bytes read from the peer. Call [`ServerConn::next_event`] until it
    /// returns `None` afterwards. Ignored once the connection must close.
    pub fn recv(&mut self, data: &[u8]) {
        if self.closed {
            return;
        }
        self.received |= !data.is_empty();
        append_unread(&mut self.buf, &mut self.pos, data);
    }

    /// The peer closed its sending side (see the module docs for what follows).
    /// Call [`ServerConn::next_event`] afterwards: buffered requests still count.
    pub fn recv_eof(&mut self) {
        self.eof = true;
        if self.buffered() == 0 && !matches!(self.read, Read::End | Read::Done) && !self.upgraded {
            // Waiting for bytes that can no longer come.
            self.closed = true;
        }
    }

    fn buffered(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The machine needs more bytes to make progress: between requests, in a
    /// partial head, or reading a body (also one being dropped). False while a
    /// complete request awaits its response, and once the connection must close.
    /// (Drain [`ServerConn::next_event`] first: a head may already be buffered.)
    pub fn wants_read(&self) -> bool {
        if self.closed || self.upgraded {
            return false;
        }
        match self.read {
            Read::Preamble | Read::Head | Read::Length(_) | Read::Chunked(_) => true,
            Read::End | Read::Done => false,
        }
    }

    /// Between requests with nothing buffered and no response outstanding:
    /// safe to close at shutdown or on keep-alive timeout.
    pub fn is_idle(&self) -> bool {
        matches!(self.read, Read::Head) && self.buffered() == 0 && !self.upgraded
    }

    /// Part of a next head has arrived, but not all of it (the header-read
    /// timeout runs).
    /// Awaiting a PROXY protocol preamble counts too, from the start.
    pub fn has_partial_head(&self) -> bool {
        !self.closed
            && match self.read {
                Read::Head => self.buffered() > 0,
                Read::Preamble => true,
                _ => false,
            }
    }

    /// The connection is finished: close it once the output is written.
    pub fn must_close(&self) -> bool {
        self.closed
    }

    /// The peer may still be sending what this connection will not read:
    /// the rest of a request refused as bad input, a body cut short by a
    /// closing answer, or requests pipelined behind it. Its close should
    /// linger (RFC 9112 §9.6): a reset could destroy the answer unread. Not
    /// for a refused PROXY preamble, which is answered with nothing.
    pub fn peer_may_send(&self) -> bool {
        !self.eof
            && !self.upgraded
            && (self.failed
                || matches!(self.read, Read::Length(_) | Read::Chunked(_))
                || (self.buffered() > 0 && !matches!(self.read, Read::Preamble)))
    }

    /// Graceful shutdown: the current (or next) response says
    /// `Connection: close` and the connection closes after it. An idle
    /// connection must close at once.
    pub fn close_after_response(&mut self) {
        self.close_after = true;
        if self.is_idle() && !self.is_fresh() {
            self.closed = true;
        }
    }

    /// The client was told by an answer's head, the one being written or the
    /// last one, that the connection stays open, and no next request has
    /// begun: a close now could cross one on its way, unanswered. A graceful
    /// shutdown holds such a connection for that request (whose answer then
    /// says close) rather than close it after this answer.
    pub fn keep_alive_promised(&self) -> bool {
        if self.closed || self.upgraded || self.close_after {
            return false;
        }
        match &self.exchange {
            Some(ex) => matches!(
                ex.response,
                Response::Started {
                    keep_alive: true,
                    ..
                }
            ),
            // Between requests after a kept-alive answer, or dropping the
            // rest of its request's body.
            None => self.received && (self.discard || self.is_idle()),
        }
    }

    /// Nothing has arrived on the connection yet. A fresh connection is not
    /// an idle keep-alive at shutdown: its client connected to send a
    /// request and will, so it is answered (once) rather than closed under it.
    pub fn is_fresh(&self) -> bool {
        !self.received
    }

    /// A 101 response was finished: the connection speaks another protocol now.
    pub fn is_upgraded(&self) -> bool {
        self.upgraded
    }

    /// The received bytes not consumed yet (after an upgrade: the first bytes
    /// of the new protocol). Leaves the buffer empty.
    pub fn take_buffered(&mut self) -> Vec<u8> {
        let rest = self.buf.split_off(self.pos);
        self.buf.clear();
        self.pos = 0;
        rest
    }
}

/// Append `data` to a read buffer whose first `pos` bytes are consumed,
/// compacting first so that the buffer only ever holds unconsumed bytes
/// (`pos` is 0 afterwards). Shared by the HTTP and WebSocket connections.
pub(crate) fn append_unread(buf: &mut Vec<u8>, pos: &mut usize, data: &[u8]) {
    if *pos == buf.len() {
        buf.clear();
    } else if *pos > 0 {
        buf.drain(..*pos);
    }
    *pos = 0;
    buf.extend_from_slice(data);
}
