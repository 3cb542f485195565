//! The write half of [`ServerConn`]: `100 Continue`, the response head and
//! body framed for the request, error answers, and the end of an exchange.

use super::{Continue, Exchange, Read, Response, ServerConn};
use crate::http::defaults::STANDARD;
use crate::http::response::{self, BodyWriter, RequestSide};
use crate::http::{Framing, HttpError};

const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

impl ServerConn {
    /// Writes `100 Continue` if the request expects it and nothing else was
    /// written for it yet; at most once per request.
    ///
    /// Left out where the client did not wait for it: some of the body has
    /// arrived already (buffered or read), or there is none to send (RFC 9110
    /// §10.1.1: a server MAY omit it then). A client that sent everything at
    /// once does not expect an interim answer, and one that reads the first
    /// status line it gets as the answer would take the 100 for it.
    pub fn write_continue(&mut self, out: &mut Vec<u8>) {
        let arrived = self.buffered() > 0 || matches!(self.read, Read::End | Read::Done);
        if let Some(ex) = &mut self.exchange {
            if ex.expect == Continue::Expected && matches!(ex.response, Response::NotStarted) {
                if !(arrived || ex.body_seen) {
                    out.extend_from_slice(CONTINUE);
                }
                ex.expect = Continue::Sent;
            }
        }
    }

    /// Writes the response head to `out` and returns how the body is framed
    /// (see [`response`] for what happens to the app's headers). Adds `Date`,
    /// `Server`, `Connection` and the framing header. Without a request, or
    /// for a second call, writes nothing and returns [`Framing::NoBody`].
    pub fn start_response(
        &mut self,
        status: u16,
        headers: &[(&str, &[u8])],
        out: &mut Vec<u8>,
    ) -> Framing {
        let body_read = matches!(self.read, Read::End | Read::Done);
        let Some(ex) = self
            .exchange
            .as_mut()
            .filter(|ex| matches!(ex.response, Response::NotStarted))
        else {
            return Framing::NoBody;
        };
        // A client still waiting for a 100 will never send the body: once this
        // response starts no 100 can follow, so the connection cannot be reused.
        let owed_continue = ex.expect == Continue::Expected && !body_read;
        let req = RequestSide {
            version: ex.version,
            head_request: ex.head_request,
            keep_alive: ex.keep_alive && !self.close_after && !owed_continue,
        };
        let defaults = self.defaults.as_deref().unwrap_or(&STANDARD);
        let written = response::write_head(status, headers, req, defaults, out);
        ex.response = Response::Started {
            body: BodyWriter::new(written.framing),
            keep_alive: written.keep_alive,
            upgrade: status == 101,
            status,
        };
        written.framing
    }

    /// Appends body bytes, framed (chunks for `Chunked`; bytes beyond a declared
    /// length, or any for `NoBody`, are dropped). Nothing before `start_response`.
    pub fn write_body(&mut self, data: &[u8], out: &mut Vec<u8>) {
        if let Some(Exchange {
            response: Response::Started { body, .. },
            ..
        }) = &mut self.exchange
        {
            body.write(data, out);
        }
    }

    /// `len` body bytes were written by the caller itself (a file), for
    /// `Length` framing; ignored for other framings.
    pub fn body_sent(&mut self, len: u64) {
        if let Some(Exchange {
            response: Response::Started { body, .. },
            ..
        }) = &mut self.exchange
        {
            body.sent(len);
        }
    }

    /// Frames `len` body bytes the caller writes itself (a file, or a buffer
    /// queued whole) after `out`, for any framing: returns how many of them
    /// to write and what to append after them (see `BodyWriter::external`).
    /// Nothing before `start_response`.
    pub fn external_body(&mut self, len: u64, out: &mut Vec<u8>) -> (u64, &'static [u8]) {
        match &mut self.exchange {
            Some(Exchange {
                response: Response::Started { body, .. },
                ..
            }) => body.external(len, out),
            _ => (0, b""),
        }
    }

    /// Ends the response (the last chunk if chunked) and the exchange; the next
    /// pipelined request can then be parsed. The connection must close after
    /// it if the head said so, a declared length was not met, the body was
    /// close-delimited, or shutdown began. Nothing before `start_response`.
    pub fn finish_response(&mut self, out: &mut Vec<u8>) {
        let Some(ex) = self
            .exchange
            .take_if(|ex| matches!(ex.response, Response::Started { .. }))
        else {
            return;
        };
        let Response::Started {
            mut body,
            keep_alive,
            upgrade,
            status,
        } = ex.response
        else {
            unreachable!("taken only when started");
        };
        let complete = body.finish(out);
        if let Some(answered) = &mut self.answered {
            answered.push(status);
        }
        if upgrade {
            self.upgraded = true;
            return;
        }
        if !keep_alive || !complete || self.close_after || body.framing() == Framing::Close {
            self.closed = true;
            return;
        }
        match self.read {
            Read::End | Read::Done => self.read = Read::Head,
            // keep_alive rules out an owed 100 here: the client is sending the body.
            _ => self.discard = true,
        }
        if self.eof && self.buffered() == 0 {
            self.closed = true;
        }
    }

    /// Writes a complete answer to `err` (its status, a short text body,
    /// `Connection: close`); the connection must close after it. Writes
    /// nothing if a response was already started: closing is all that is left.
    pub fn write_error(&mut self, err: &HttpError, out: &mut Vec<u8>) {
        self.closed = true;
        let ex = self.exchange.get_or_insert_with(Exchange::for_error);
        if !matches!(ex.response, Response::NotStarted) {
            return;
        }
        ex.keep_alive = false;
        let text = err.reason().as_bytes();
        let mut length = Vec::with_capacity(20);
        response::push_int(&mut length, text.len() as u64, 10);
        let headers: [(&str, &[u8]); 2] = [
            ("Content-Type", b"text/plain; charset=utf-8"),
            ("Content-Length", &length),
        ];
        self.start_response(err.status(), &headers, out);
        self.write_body(text, out);
        self.finish_response(out);
    }
}
