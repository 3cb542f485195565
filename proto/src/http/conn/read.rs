//! The read half of [`ServerConn`]: heads found and parsed, bodies decoded
//! (Content-Length or chunked), unread bodies dropped.

use super::{Exchange, Read, ServerConn};
use crate::http::chunked::{ChunkedDecoder, Decoded};
use crate::http::{head, proxy_protocol, request_line};
use crate::http::{BodyKind, Event, HttpError, RequestHead};

impl ServerConn {
    /// The next thing parsed from the buffered bytes, if any.
    pub fn next_event(&mut self) -> Option<Event> {
        loop {
            if self.closed || self.upgraded {
                return None;
            }
            match &mut self.read {
                Read::Preamble => {
                    return match proxy_protocol::parse(&self.buf[self.pos..]) {
                        Ok(Some((preamble, len))) => {
                            self.pos += len;
                            self.read = Read::Head;
                            Some(Event::Preamble(preamble))
                        }
                        Ok(None) => {
                            self.closed |= self.eof;
                            None
                        }
                        Err(proxy_protocol::Malformed) => {
                            self.closed = true;
                            None
                        }
                    };
                }
                Read::Head => {
                    return match self.parse_head() {
                        Ok(Some(head)) => Some(Event::Head(head)),
                        Ok(None) => {
                            // Nothing more will come (EOF), or nothing is wanted (shutdown).
                            if self.eof
                                || (self.close_after && self.buffered() == 0 && self.received)
                            {
                                self.closed = true;
                            }
                            None
                        }
                        Err(e) => Some(self.fail(e)),
                    };
                }
                Read::Length(left) => {
                    let n = (*left).min((self.buf.len() - self.pos) as u64) as usize;
                    if n == 0 {
                        self.closed |= self.eof;
                        return None;
                    }
                    *left -= n as u64;
                    if *left == 0 {
                        self.read = Read::End;
                    }
                    self.body_seen();
                    let data = &self.buf[self.pos..self.pos + n];
                    self.pos += n;
                    if !self.discard {
                        return Some(Event::Data(data.to_vec()));
                    }
                }
                Read::Chunked(decoder) => {
                    // One event for every chunk the buffer holds, not one per chunk.
                    let mut data = Vec::new();
                    let before = self.pos;
                    let outcome = loop {
                        match decoder.decode(&self.buf[self.pos..]) {
                            Err(e) => break Err(e),
                            Ok((n, decoded)) => {
                                if let Decoded::Data(run) = decoded {
                                    if !self.discard {
                                        data.extend_from_slice(run);
                                    }
                                }
                                self.pos += n;
                                match decoded {
                                    Decoded::Data(_) => {}
                                    Decoded::NeedMore => break Ok(false),
                                    Decoded::Done => break Ok(true),
                                }
                            }
                        }
                    };
                    if self.pos > before {
                        self.body_seen();
                    }
                    match outcome {
                        Err(_) if self.discard => {
                            self.closed = true;
                            return None;
                        }
                        Err(e) => return Some(self.fail(e)),
                        Ok(true) => self.read = Read::End,
                        Ok(false) => self.closed |= self.eof,
                    }
                    if !data.is_empty() {
                        return Some(Event::Data(data));
                    }
                    if !matches!(self.read, Read::End) {
                        return None;
                    }
                }
                Read::End => {
                    if self.discard {
                        // The dropped body is behind us: on to the next head.
                        self.discard = false;
                        self.read = Read::Head;
                    } else {
                        self.read = Read::Done;
                        return Some(Event::End);
                    }
                }
                Read::Done => return None,
            }
        }
    }

    /// Finds, parses and admits the next head; `Ok(None)` until it is complete.
    fn parse_head(&mut self) -> Result<Option<RequestHead>, HttpError> {
        // Empty lines before a request line are ignored (RFC 9112 §2.2), e.g. a
        // CRLF an old client sent after a POST body.
        let skipped = self.buf[self.pos..]
            .chunks_exact(2)
            .take_while(|pair| pair == b"\r\n")
            .count()
            * 2;
        self.pos += skipped;
        self.scanner.consumed(skipped);
        let rest = &self.buf[self.pos..];
        // Bytes that cannot begin a request line (a TLS ClientHello, a binary
        // protocol) are answered at once, not after a CRLF or the head's
        // timeout; a lone CR may be the start of one more empty line.
        if rest != b"\r" && !request_line::can_begin(rest) {
            return Err(HttpError::BadRequest("not an HTTP request"));
        }
        let Some(len) = self
            .scanner
            .scan(&self.buf[self.pos..], self.limits.max_head)?
        else {
            return Ok(None);
        };
        let head = head::parse(&self.buf[self.pos..self.pos + len])?;
        self.pos += len;
        self.read = match head.body {
            BodyKind::Empty => Read::End,
            BodyKind::Length(n) if n > self.limits.max_body => {
                return Err(HttpError::PayloadTooLarge)
            }
            BodyKind::Length(n) => Read::Length(n),
            BodyKind::Chunked => Read::Chunked(ChunkedDecoder::new(
                self.limits.max_body,
                self.limits.max_head,
            )),
        };
        self.exchange = Some(Exchange::new(&head));
        Ok(Some(head))
    }

    /// Body bytes of the current request were received.
    fn body_seen(&mut self) {
        if let Some(ex) = &mut self.exchange {
            ex.body_seen = true;
        }
    }

    /// Bad input: report it; nothing more is read.
    fn fail(&mut self, e: HttpError) -> Event {
        self.closed = true;
        self.failed = true;
        Event::Error(e)
    }
}
