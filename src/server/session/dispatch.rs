//! A request served by the [`App`]: its body streamed into a [`Conduit`],
//! its answer's [`ResponseEvent`]s written as they come.
//!
//! The core never waits for the application. It calls [`App::call`] at the
//! head (an inline app, which runs on this thread, once the whole body is in
//! the conduit) and moves on; the app's thread notifies the session when it
//! has something for it, and [`HttpSession::on_notify`] picks it up:
//!
//! - an app whose body reads block a thread (WSGI, [`App::blocking_reads`]),
//!   with request buffering on, is called only once the whole body is in a
//!   [`BodyBuffer`] (memory, then an unlinked file): a trickling upload holds
//!   a connection, never a pool thread. `100 Continue` goes out at the head,
//!   since the core itself reads the body;
//! - a call the app refused (its queue is full) is kept and retried on each
//!   notification; meanwhile the connection is not read;
//! - the body is read only while the conduit has room for it
//!   ([`Conduit::push_body`]), and again once the app took some;
//! - `100 Continue` goes out when the app first reads the body;
//! - answer bytes are credited to the app as the socket takes them
//!   ([`Conduit::written`]), so a slow client makes the app wait;
//! - once the answer ends, the next pipelined request is served;
//! - a WebSocket request's `WsAccept` writes the `101` and hands the
//!   conduit to the session's WebSocket mode; a `WsClose` before it is a 403.

use std::sync::Arc;
use std::time::Instant;

use crate::app::{App, AppRequest, BodyBuffer, Conduit, Fields, RequestKind, ResponseEvent};
use crate::http::RequestHead;
use crate::reply::Reply;
use crate::ws::Upgrade;

use super::app_call::AppCall;
use super::{access_log, HttpSession};
use crate::app::piece::WHOLE_PIECE;

/// Where an answer stands after one of its events.
enum Step {
    More,
    /// The answer ended (or failed): the call is over.
    Over,
    /// The app accepted its WebSocket: the `101` is written (agreeing to
    /// permessage-deflate, or not).
    Upgraded {
        deflate: bool,
    },
}

impl HttpSession {
    /// Route `head` to the application.
    /// `upgrade`: a valid WebSocket handshake, offered to the app as such.
    pub(super) fn start_app(
        &mut self,
        app: Arc<dyn App>,
        head: RequestHead,
        upgrade: Option<Upgrade>,
        out: &mut Vec<u8>,
    ) {
        let events = std::mem::take(&mut self.events);
        let call = self.new_call(app, head, upgrade, events);
        if call.buffered || call.app.inline() {
            // The core reads the whole body before the app runs: a client
            // waiting for `100 Continue` would wait for ever.
            self.conn.write_continue(out);
        }
        self.app = Some(call);
        self.app_progress(out);
    }

    /// The call that hands `head` to `app`, not yet made; `events`: the
    /// vector its conduit lends the answer's events in. Whatever the
    /// protocol, the call is the same: this is the one place it is made.
    pub(super) fn new_call(
        &self,
        app: Arc<dyn App>,
        head: RequestHead,
        upgrade: Option<Upgrade>,
        events: Vec<crate::app::ResponseEvent>,
    ) -> AppCall {
        let inline = app.inline();
        let buffer = match &self.shared.body_buffer {
            Some(config) if app.blocking_reads() && upgrade.is_none() => {
                Some(BodyBuffer::new(config.clone()))
            }
            _ => None,
        };
        let whole_body = inline || buffer.is_some();
        let expect_continue = head.expect_continue && !whole_body;
        let conduit = Conduit::new(self.notifier.clone(), inline, expect_continue).lending(events);
        let (peer, mut forwarded) = self.shared.proxy.forwarded(&self.peer, &head);
        if self.tls.is_some() {
            forwarded.secure.get_or_insert(true);
        }
        let head = Arc::new(head);
        let request = AppRequest {
            head: Arc::clone(&head),
            peer: peer.clone(),
            forwarded,
            server: self.server.clone(),
            tls: self.tls.clone(),
            kind: match &upgrade {
                None => RequestKind::Http,
                Some(up) => RequestKind::WebSocket {
                    subprotocols: up.subprotocols.clone(),
                },
            },
        };
        AppCall {
            app,
            conduit: Arc::new(conduit),
            head,
            peer,
            request: Some(request),
            body_complete: false,
            buffered: buffer.is_some(),
            buffer,
            continue_owed: expect_continue,
            status: None,
            sent: 0,
            started: self.request_started,
            logged_headers: Fields::default(),
            upgrade,
            called_at: None,
        }
    }

    /// The request's body is complete (an inline app runs now).
    pub(super) fn app_body_end(&mut self, out: &mut Vec<u8>) {
        if let Some(call) = &mut self.app {
            if let Err(e) = call.end_body() {
                return self.app_buffer_failed(&e, out);
            }
        }
        self.app_progress(out);
    }

    /// Body bytes for the application.
    pub(super) fn app_body(&mut self, data: Vec<u8>, out: &mut Vec<u8>) {
        if let Some(call) = &mut self.app {
            if let Err(e) = call.push_body(data) {
                self.app_buffer_failed(&e, out);
            }
        }
    }

    /// The body's file could not be written (or rewound): the app is never
    /// called, the client gets a 500 and the connection closes.
    fn app_buffer_failed(&mut self, e: &std::io::Error, out: &mut Vec<u8>) {
        tracing::error!("buffering a request body: {e}");
        if let Some(call) = self.app.take() {
            let head = call.head.clone();
            call.abandon();
            self.conn.close_after_response();
            self.respond(&head, Reply::text(500, "Internal Server Error"), out);
        }
    }

    /// Make the call if it is due, then write what the app has sent.
    pub(super) fn app_progress(&mut self, out: &mut Vec<u8>) {
        let Some(mut call) = self.app.take() else {
            return;
        };
        if call.due() && !call.call() {
            self.app = Some(call);
            return;
        }
        if call.take_continue() {
            self.conn.write_continue(out);
        }
        let mut events = std::mem::take(&mut self.events);
        call.conduit.take_events(&mut events);
        let mut taken = events.drain(..);
        while let Some(event) = taken.next() {
            match self.app_event(&mut call, event, out) {
                Step::More => {}
                Step::Over => {
                    drop(taken);
                    self.events = kept(events);
                    call.conduit.close();
                    return;
                }
                Step::Upgraded { deflate } => {
                    // What followed the accept is the WebSocket's already.
                    let rest = taken.collect();
                    self.start_ws(call.conduit, deflate);
                    return self.ws_events(rest, out);
                }
            }
        }
        drop(taken);
        self.events = kept(events);
        self.app = Some(call);
    }

    /// Write one event of the answer.
    fn app_event(&mut self, call: &mut AppCall, event: ResponseEvent, out: &mut Vec<u8>) -> Step {
        match event {
            ResponseEvent::WsAccept {
                subprotocol,
                headers,
            } if call.status.is_none() && call.upgrade.is_some() => {
                let upgrade = call.upgrade.take().expect("checked by the guard");
                let list = upgrade.response_headers(subprotocol.as_deref(), headers.iter());
                self.conn.start_response(101, &list, out);
                self.conn.finish_response(out);
                call.status = Some(101);
                self.log_app(call, out);
                return Step::Upgraded {
                    deflate: upgrade.deflate(),
                };
            }
            ResponseEvent::WsClose { .. } if call.status.is_none() && call.upgrade.is_some() => {
                // Closed before accepting: the handshake is denied.
                let head = call.head.clone();
                self.respond(&head, Reply::text(403, "Forbidden"), out);
                return Step::Over;
            }
            ResponseEvent::Start { status, headers } if call.status.is_none() => {
                let list: Vec<(&str, &[u8])> = headers.iter().collect();
                self.conn.start_response(status, &list, out);
                call.status = Some(status);
                if let Some(format) = &self.shared.access_log {
                    call.logged_headers = access_log::kept_headers(format, list);
                }
            }
            ResponseEvent::Body(data) if call.status.is_some() => {
                call.sent += data.len() as u64;
                if data.len() >= WHOLE_PIECE {
                    self.queue_piece(data, out);
                } else {
                    self.conn.write_body(&data, out);
                }
            }
            ResponseEvent::File { file, offset, len } if call.status.is_some() => {
                call.sent += self.queue_file(file, offset, len, out);
            }
            // HTTP/1.1 drops an app's trailers: they are optional metadata
            // (RFC 9110 §6.5), and a chunked trailer section is read by few clients.
            ResponseEvent::Trailers(_) if call.status.is_some() => {}
            ResponseEvent::End if call.status.is_some() => {
                self.conn.finish_response(out);
                self.log_app(call, out);
                return Step::Over;
            }
            ResponseEvent::Abort if call.status.is_some() => {
                // Part of the answer is out: only a close tells the client it failed.
                tracing::debug!("the application failed mid-answer: closing the connection");
                self.closed = true;
                self.deadline = None;
                self.log_app(call, out);
                return Step::Over;
            }
            event => {
                // Abort before the head, or an event out of order (a second
                // head, a body before the head): the app failed.
                if !matches!(event, ResponseEvent::Abort) {
                    tracing::warn!(?event, "the application answered out of order");
                }
                if call.status.is_some() {
                    self.closed = true;
                    self.deadline = None;
                    self.log_app(call, out);
                } else {
                    let head = call.head.clone();
                    self.respond(&head, Reply::text(500, "Internal Server Error"), out);
                }
                return Step::Over;
            }
        }
        Step::More
    }

    /// Keep the access-log line of a route's or the server's own answer
    /// until output position `at` is sent.
    pub(super) fn log_reply(
        &mut self,
        head: Arc<RequestHead>,
        status: u16,
        headers: &[(String, String)],
        bytes: u64,
        started: Instant,
        at: u64,
    ) {
        let Some(format) = &self.shared.access_log else {
            return;
        };
        let kept = headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes()));
        let answer = access_log::Answered {
            head,
            status,
            bytes,
            response_headers: access_log::kept_headers(format, kept),
            started,
            peer: None,
        };
        self.log
            .push(at, answer, Instant::now(), &self.peer, format);
    }

    /// Keep `call`'s line until its last byte, the end of `out`, is sent.
    fn log_app(&mut self, call: &mut AppCall, out: &[u8]) {
        let at = self.output.queued() + out.len() as u64;
        self.log_call(call, at);
    }

    /// Keep `call`'s line until output position `at` is sent.
    pub(super) fn log_call(&mut self, call: &mut AppCall, at: u64) {
        if let Some(format) = self.shared.access_log.as_deref() {
            let answer = access_log::Answered {
                head: Arc::clone(&call.head),
                status: call.status.unwrap_or(500),
                bytes: call.sent,
                response_headers: std::mem::take(&mut call.logged_headers),
                started: call.started,
                peer: Some(call.peer.clone()),
            };
            self.log
                .push(at, answer, Instant::now(), &self.peer, format);
        }
    }
}

/// A lent events vector that grew past this many events (a stream the app
/// queued faster than the client read) is not kept for the connection's
/// next answers: it could hold megabytes for as long as the connection lives.
const EVENTS_KEPT: usize = 16;

/// The emptied events vector, to lend to the next conduit, or a new one in
/// place of one that grew large.
fn kept(events: Vec<ResponseEvent>) -> Vec<ResponseEvent> {
    debug_assert!(events.is_empty());
    if events.capacity() > EVENTS_KEPT {
        Vec::new()
    } else {
        events
    }
}

#[cfg(test)]
mod kept_tests {
    use super::*;

    #[test]
    fn a_small_vector_is_kept_and_a_grown_one_let_go() {
        let small: Vec<ResponseEvent> = Vec::with_capacity(4);
        let at = small.as_ptr();
        let small = kept(small);
        assert_eq!(small.as_ptr(), at);
        let grown: Vec<ResponseEvent> = Vec::with_capacity(EVENTS_KEPT * 64);
        assert_eq!(kept(grown).capacity(), 0);
    }
}
