//! Answering one HTTP/2 stream: its app call made when due, the app's
//! events (a file's bytes read a slice ahead of the window) handed to the
//! protocol, a route's reply, and the end that logs and counts it.

use std::time::Instant;

use bytes::Bytes;

use crate::app::ResponseEvent;
use crate::h2::Reason;
use crate::reply::{Body, Reply};

use super::super::{access_log, HttpSession};
use super::{FileBody, Http2, FILE_AHEAD};

impl HttpSession {
    /// Move stream `id`'s answer on: the call made when due, its events
    /// handed to the protocol, a file read ahead. True if anything moved.
    pub(super) fn h2_answer(&mut self, h2: &mut Http2, id: u32, now: Instant) -> bool {
        let Some(s) = h2.streams.get_mut(&id) else {
            return false;
        };
        let mut moved = false;
        if s.body_done && s.route.is_some() {
            let reply = s.route.take().expect("checked");
            self.h2_reply(h2, id, reply);
            return true;
        }
        if let Some(call) = &mut s.call {
            if call.due() && !call.call() {
                return false;
            }
            if call.take_continue() {
                h2.conn.send_continue(id);
            }
            let wanted = h2.conn.want_body(id, !s.body_done && call.takes_input());
            let mut events = Vec::new();
            call.conduit.take_events(&mut events);
            s.held.extend(events);
            moved |= wanted;
        }
        moved |= self.h2_file(h2, id);
        loop {
            let Some(s) = h2.streams.get_mut(&id) else {
                return true;
            };
            if s.file.is_some() || s.call.is_none() {
                break;
            }
            let Some(event) = s.held.pop_front() else {
                break;
            };
            moved = true;
            if self.h2_event_out(h2, id, event, now) {
                self.h2_done(h2, id);
                break;
            }
        }
        moved
    }

    /// Hand one of the app's events to the protocol; true once the answer is over.
    pub(super) fn h2_event_out(
        &mut self,
        h2: &mut Http2,
        id: u32,
        event: ResponseEvent,
        _now: Instant,
    ) -> bool {
        let s = h2.streams.get_mut(&id).expect("present");
        let call = s.call.as_mut().expect("an app's stream");
        match event {
            ResponseEvent::Start { status, headers } if s.status.is_none() => {
                let list: Vec<(&str, &[u8])> = headers.iter().collect();
                s.bodiless = s.head.is_head() || !crate::http::response::status_allows_body(status);
                h2.conn.respond(id, status, &list, s.bodiless);
                s.status = Some(status);
                call.status = Some(status);
                if let Some(format) = &self.shared.access_log {
                    call.logged_headers = access_log::kept_headers(format, list);
                }
                false
            }
            ResponseEvent::Body(data) if s.status.is_some() => {
                call.sent += data.len() as u64;
                if s.bodiless {
                    call.written(data.len());
                } else {
                    h2.conn.send(id, data);
                }
                false
            }
            ResponseEvent::File { file, offset, len } if s.status.is_some() => {
                call.sent += len;
                if s.bodiless {
                    call.written(len as usize);
                } else {
                    s.file = Some(FileBody {
                        file,
                        offset,
                        remaining: len,
                    });
                }
                false
            }
            ResponseEvent::Trailers(fields) if s.status.is_some() => {
                s.trailers = Some(fields);
                false
            }
            ResponseEvent::End if s.status.is_some() => {
                if !s.bodiless {
                    let list = s.trailers.take().map(|t| {
                        let list: Vec<(&str, &[u8])> = t.iter().collect();
                        crate::h2::head::trailers(&list)
                    });
                    h2.conn.finish(id, list);
                }
                true
            }
            event => {
                let started = s.status.is_some();
                if !matches!(event, ResponseEvent::Abort) {
                    tracing::warn!(?event, "the application answered out of order");
                }
                if started {
                    // Part of the answer is out: only a reset tells the client it failed.
                    h2.conn.reset(id, Reason::INTERNAL_ERROR);
                } else {
                    let reply = Reply::text(500, "Internal Server Error");
                    call.status = Some(500);
                    self.h2_reply(h2, id, reply);
                }
                true
            }
        }
    }

    /// Read the file body of stream `id` a slice ahead of its window; its
    /// held events go on once it is whole. True if anything was read.
    pub(super) fn h2_file(&mut self, h2: &mut Http2, id: u32) -> bool {
        use std::os::unix::fs::FileExt;
        let Some(s) = h2.streams.get_mut(&id) else {
            return false;
        };
        let Some(body) = &mut s.file else {
            return false;
        };
        let mut moved = false;
        while body.remaining > 0 && h2.conn.queued(id) < FILE_AHEAD {
            let n = (body.remaining as usize).min(FILE_AHEAD);
            let mut buf = vec![0; n];
            match body.file.read_at(&mut buf, body.offset) {
                Ok(0) | Err(_) => {
                    // The file shrank or failed under us: the answer cannot be whole.
                    tracing::warn!("HTTP/2 stream {id}: a file body could not be read whole");
                    h2.conn.reset(id, Reason::INTERNAL_ERROR);
                    body.remaining = 0;
                    s.held.clear();
                    s.held.push_back(ResponseEvent::Abort);
                    break;
                }
                Ok(got) => {
                    buf.truncate(got);
                    body.offset += got as u64;
                    body.remaining -= got as u64;
                    h2.conn.send(id, Bytes::from(buf));
                    moved = true;
                }
            }
        }
        if body.remaining == 0 {
            s.file = None;
            if s.call.is_none() {
                // A route's file: its answer ends with it.
                h2.conn.finish(id, None);
                self.h2_done(h2, id);
            }
        }
        moved
    }

    /// Answer stream `id` with a route's reply (or the server's own).
    pub(super) fn h2_reply(&mut self, h2: &mut Http2, id: u32, reply: Reply) {
        let reply = reply.sized();
        let s = h2.streams.get_mut(&id).expect("present");
        s.bodiless = s.head.is_head()
            || !crate::http::response::status_allows_body(reply.status)
            || reply.body.is_empty();
        s.status = Some(reply.status);
        h2.conn
            .respond(id, reply.status, &reply.fields(), s.bodiless);
        let Reply {
            status,
            headers,
            body,
        } = reply;
        let bytes = if s.bodiless { 0 } else { body.len() };
        let routed = s.call.is_none();
        if routed {
            let (head, started, at) = (s.head.clone(), s.started, self.output.queued());
            self.log_reply(head, status, &headers, bytes, started, at);
            if let Some(meter) = &mut self.meter {
                meter.answered(&s.head.method, status, started, at);
            }
        }
        if s.bodiless {
            if routed {
                h2.streams.remove(&id);
            }
            return;
        }
        match body {
            Body::Empty => {}
            Body::Bytes(b) => {
                h2.conn.send(id, Bytes::from(b));
                h2.conn.finish(id, None);
                if routed {
                    h2.streams.remove(&id);
                }
            }
            Body::File { file, offset, len } => {
                s.file = Some(FileBody {
                    file,
                    offset,
                    remaining: len,
                });
                self.h2_file(h2, id);
            }
        }
    }

    /// Stream `id`'s answer is over: logged, counted, forgotten.
    pub(super) fn h2_done(&mut self, h2: &mut Http2, id: u32) {
        let Some(mut s) = h2.streams.remove(&id) else {
            return;
        };
        let at = self.output.queued();
        if let Some(mut call) = s.call.take() {
            let status = call.status.unwrap_or(500);
            self.log_call(&mut call, at);
            if let Some(meter) = &mut self.meter {
                meter.answered(&s.head.method, status, s.started, at);
            }
            call.conduit.close();
        }
    }
}
