//! A session's HTTP/1.1 mode: requests parsed by the [`ServerConn`], each
//! answered by a route (or the 404) here, or handed to the app
//! ([`super::dispatch`]); answers queued in order, pipelined ones included.

use std::fs::File;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::backend::Peer;
use crate::http::proxy_protocol::Preamble;
use crate::http::{Event, Framing, RequestHead};
use crate::metrics::counters::Cause;
use crate::reply::{Body, Reply};

use super::app_call::AppCall;
use super::mode::Mode;
use super::output::Chunk;
use super::HttpSession;

impl HttpSession {
    /// Bytes read from the client.
    pub(super) fn http_read(&mut self, data: &[u8], now: Instant) {
        if self.body_clock.is_some() {
            self.body_clock = Some(now); // the body's bytes are coming
        }
        self.conn.recv(data);
        self.pump(now);
        // After the pump: one read may complete a head and bring part of the next.
        if self.head_started.is_none() && self.conn.has_partial_head() {
            self.head_started = Some(now);
            self.rearm(now);
        }
        self.arm_send(now);
    }

    /// The client ended its side.
    pub(super) fn http_eof(&mut self, now: Instant) {
        self.conn.recv_eof();
        self.pump(now);
        crate::backend::Session::on_hangup(self, now);
        self.arm_send(now);
    }

    /// Serve every complete request the protocol has buffered, as far as the
    /// output queue and the application's body buffer allow.
    pub(super) fn http_pump(&mut self, now: Instant) {
        let mut out = Vec::new();
        while !self.output.full() && self.app.as_ref().is_none_or(AppCall::takes_input) {
            match self.conn.next_event() {
                None => break,
                Some(Event::Preamble(preamble)) => {
                    if let Preamble::Proxied(client) = preamble {
                        self.peer = Peer::Tcp(client);
                    }
                    if self.shared.http.h2() && self.tls.is_none() {
                        // The preface, if any, comes after the preamble:
                        // sniffed as on a bare connection.
                        self.sniffing = true;
                        let rest = self.conn.take_buffered();
                        return self.sniff_read(&rest, now);
                    }
                }
                Some(Event::Head(head)) => {
                    // Not set when the whole head came in this read.
                    let start = self.head_started.take().unwrap_or(now);
                    self.request_started = start;
                    if let Some(meter) = &mut self.meter {
                        meter.head(&head.method, start);
                    }
                    self.on_head(head, &mut out);
                }
                Some(Event::Data(data)) => self.app_body(data, &mut out),
                Some(Event::End) => {
                    if let Some((head, reply)) = self.pending.take() {
                        self.respond(&head, reply, &mut out);
                    } else if self.app.is_some() {
                        self.app_body_end(&mut out);
                    }
                }
                Some(Event::Error(err)) => {
                    self.head_started = None;
                    self.meter_cause(Cause::BadRequest);
                    self.pending = None;
                    if let Some(call) = self.app.take() {
                        call.abandon();
                    }
                    self.conn.write_error(&err, &mut out);
                    break;
                }
            }
        }
        self.output.push_bytes(out);
        self.meter_answers(now);
        match self.mode {
            Mode::Http1 => self.rearm(now),
            // Accepted while serving the head: the rest is WebSocket input.
            Mode::WebSocket(_) => self.ws_pump(now),
            Mode::Http2(_) => {}
        }
    }

    /// A request head: a route answers it, else the application, else 404.
    ///
    /// A route (or the 404) answers from the head alone, but only once the
    /// body has been read (and dropped): a body that turns out malformed then
    /// gets its 400 rather than a success followed by a silent close. Under
    /// `Expect: 100-continue` the answer goes at once and the client never
    /// sends the body.
    fn on_head(&mut self, head: RequestHead, out: &mut Vec<u8>) {
        crate::server::request_budget::count();
        if self.held_by_drain.take().is_some() {
            // The request the drain held the connection for: its answer
            // is the last (`Connection: close`).
            self.conn.close_after_response();
        }
        let reply = match (self.shared.router.route(&head), &self.shared.app) {
            (Some(reply), _) => reply,
            (None, Some(app)) => match self.ws_handshake(app.as_ref(), &head) {
                Ok(upgrade) => return self.start_app(app.clone(), head, upgrade, out),
                Err(refusal) => refusal,
            },
            (None, None) => Reply::text(404, "Not Found"),
        };
        if head.expect_continue {
            self.respond(&head, reply, out);
        } else {
            self.pending = Some((head, reply));
        }
    }

    /// Write `reply` as the answer to `head`.
    pub(super) fn respond(&mut self, head: &RequestHead, reply: Reply, out: &mut Vec<u8>) {
        let reply = reply.sized();
        let framing = self.conn.start_response(reply.status, &reply.fields(), out);
        let Reply {
            status,
            headers,
            body,
        } = reply;
        let sent = match (framing, body) {
            (Framing::NoBody, _) | (_, Body::Empty) => 0,
            (_, Body::Bytes(bytes)) => {
                self.conn.write_body(&bytes, out);
                bytes.len() as u64
            }
            (_, Body::File { file, offset, len }) => self.queue_file(file, offset, len, out),
        };
        self.conn.finish_response(out);
        let at = self.output.queued() + out.len() as u64;
        let head = Arc::new(head.clone());
        self.log_reply(head, status, &headers, sent, self.request_started, at);
    }

    /// Queue `len` bytes of `file` from `offset` as body of the response
    /// being written, after what `out` holds (framed for the response's
    /// framing). Returns how many body bytes were queued.
    pub(super) fn queue_file(
        &mut self,
        file: File,
        offset: u64,
        len: u64,
        out: &mut Vec<u8>,
    ) -> u64 {
        self.queue_whole(len, out, |len| Chunk::File {
            file,
            offset,
            remaining: len,
        })
    }

    /// Queue a body piece of [`crate::app::piece::WHOLE_PIECE`] or more as
    /// it is, after what `out` holds (framed, and cut to a declared length).
    /// Returns how many of its bytes were queued.
    pub(super) fn queue_piece(&mut self, mut piece: Bytes, out: &mut Vec<u8>) -> u64 {
        self.queue_whole(piece.len() as u64, out, |len| {
            piece.truncate(len as usize);
            Chunk::Piece { buf: piece, pos: 0 }
        })
    }

    /// Frame `len` body bytes that are queued as their own chunk, not
    /// written into `out`: what `out` holds goes first, the frame's tail
    /// (a chunk's CRLF) is left in `out` after them.
    fn queue_whole(
        &mut self,
        len: u64,
        out: &mut Vec<u8>,
        chunk: impl FnOnce(u64) -> Chunk,
    ) -> u64 {
        let (len, tail) = self.conn.external_body(len, out);
        if len > 0 {
            self.output.push_bytes(std::mem::take(out));
            self.output.push_whole(len, chunk(len));
        }
        out.extend_from_slice(tail);
        len
    }
}
