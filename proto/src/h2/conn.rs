//! One HTTP/2 connection for a server, sans-IO: the `h2` crate's server
//! driven over a [`Pipe`] with a no-op waker. Nothing here waits: the
//! caller feeds what it read ([`H2Conn::recv`]), calls [`H2Conn::drive`],
//! takes [`Event`]s and the bytes to write ([`H2Conn::take_output`]), and
//! answers streams by their id. Every poll is repeated after every change,
//! so h2's wake-ups are not needed.
//!
//! The body of a request is read only while its consumer asks for it
//! ([`H2Conn::want_body`]); what is read is released to the client's flow
//! control at once, so the client is held to the stream window beyond what
//! the consumer took. An answer's bytes are queued here and handed to h2 only
//! as the stream's and the connection's send windows open, so what h2
//! buffers is bounded by the windows, and [`H2Conn::take_written`] tells the
//! producer what left (its credit, as the socket's is on HTTP/1.1).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use h2::server::{Connection, Handshake, SendResponse};
use h2::{Ping, PingPong, Reason, RecvStream, SendStream};
use http::{HeaderMap, Request};

use super::flood::FloodMeter;
use super::head::{request_head, response_head, Refused};
use super::pipe::Pipe;
use crate::http::{Defaults, RequestHead};

/// The most bytes one stream is given capacity for at a time: a big answer
/// goes in slices, so streams of one connection share its window.
const SLICE: usize = 64 * 1024;

/// Rounds of polling one [`H2Conn::drive`] makes at most before returning
/// (each round can only follow progress: this bounds a pathological one).
const ROUNDS: usize = 64;

/// The connection's limits: SETTINGS it sends and budgets it keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub max_concurrent_streams: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE, the decoded size: h2 answers 431 beyond.
    pub max_header_list_size: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: what a stream's body may send ahead.
    pub initial_stream_window: u32,
    /// The connection's receive window, all streams together.
    pub initial_connection_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE.
    pub max_frame_size: u32,
    /// Streams the client may reset before the server accepted them, and
    /// resets it may provoke: beyond either, GOAWAY ENHANCE_YOUR_CALM (the
    /// rapid reset attack, CVE-2023-44487, and its "made you reset" kin).
    pub max_pending_reset_streams: usize,
    pub max_local_error_resets: usize,
    /// Quiet for this long, the connection is sent a PING (None: never);
    /// unanswered for `keep_alive_timeout`, it is closed. The session keeps
    /// the clocks ([`H2Conn::ping`] sends).
    pub keep_alive_interval: Option<std::time::Duration>,
    pub keep_alive_timeout: std::time::Duration,
    /// Bytes of frames that carry nothing (over 8) a connection may send
    /// beyond the useful ones before it ends with GOAWAY ENHANCE_YOUR_CALM
    /// ([`FloodMeter`]); None: unmetered.
    pub flood_budget: Option<u64>,
    /// Largest request body: 413 by its Content-Length, or as it comes
    /// (a reset if the answer has begun).
    pub max_body: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_concurrent_streams: 100,
            max_header_list_size: 16 * 1024,
            initial_stream_window: 1024 * 1024,
            initial_connection_window: 1024 * 1024,
            max_frame_size: 16 * 1024,
            max_pending_reset_streams: 20,
            max_local_error_resets: 1024,
            keep_alive_interval: None,
            keep_alive_timeout: std::time::Duration::from_secs(20),
            // nginx's figure for its own flood check.
            flood_budget: Some(1024 * 1024),
            max_body: crate::http::Limits::default().max_body,
        }
    }
}

/// What the connection has for its user.
#[derive(Debug)]
pub enum Event {
    /// A stream opened with a request: answer it by `id`.
    Request { id: u32, head: RequestHead },
    /// Body bytes of stream `id` (only while [`H2Conn::want_body`] says so).
    Data { id: u32, data: Bytes },
    /// Stream `id`'s body is complete.
    End { id: u32 },
    /// Stream `id` is gone: the client reset it, or its body broke the
    /// protocol. Its answer is no longer wanted.
    Reset { id: u32 },
}

/// How the connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Cleanly: both sides are done (GOAWAY exchanged, or the client left
    /// with nothing open).
    Done,
    /// A connection error, sent as a GOAWAY with this code (ours) or
    /// received (theirs); `text` for the log.
    Error {
        reason: Option<Reason>,
        ours: bool,
        text: String,
    },
}

enum State {
    Handshaking(Handshake<Pipe, Bytes>),
    Open(Connection<Pipe, Bytes>),
    Closed,
}

struct Stream {
    body: Option<RecvStream>,
    wants_body: bool,
    respond: Option<SendResponse<Bytes>>,
    send: Option<SendStream<Bytes>>,
    queue: VecDeque<Bytes>,
    queued: usize,
    /// End the stream once the queue is sent (with these trailers, if any).
    finish: Option<Option<HeaderMap>>,
    /// Bytes handed to h2 since the last [`H2Conn::take_written`].
    written: usize,
    /// Body bytes read so far (held to `max_body`).
    received: u64,
}

impl Stream {
    fn answered(&self) -> bool {
        self.respond.is_none() && self.send.is_none()
    }
}

/// One HTTP/2 connection: see the module's text.
pub struct H2Conn {
    state: State,
    pipe: Pipe,
    streams: HashMap<u32, Stream>,
    events: VecDeque<Event>,
    defaults: Option<std::sync::Arc<Defaults>>,
    ping: Option<PingPong>,
    ping_out: bool,
    ended: Option<Ended>,
    /// Streams opened so far (for the caller's budget and logs).
    opened: u64,
    /// Answer bytes stay queued here (the caller's output is full).
    paused: bool,
    flood: FloodMeter,
    /// The flood that ended the connection, for the log.
    flood_text: Option<String>,
    max_body: u64,
}

impl H2Conn {
    /// A connection that begins with the client's preface, under `settings`.
    pub fn new(settings: Settings) -> H2Conn {
        let pipe = Pipe::default();
        let handshake = h2::server::Builder::new()
            .max_concurrent_streams(settings.max_concurrent_streams)
            .max_header_list_size(settings.max_header_list_size)
            .initial_window_size(settings.initial_stream_window)
            .initial_connection_window_size(settings.initial_connection_window)
            .max_frame_size(settings.max_frame_size)
            .max_pending_accept_reset_streams(settings.max_pending_reset_streams)
            .max_local_error_reset_streams(Some(settings.max_local_error_resets))
            .max_send_buffer_size(SLICE)
            .handshake(pipe.clone());
        H2Conn {
            state: State::Handshaking(handshake),
            pipe,
            streams: HashMap::new(),
            events: VecDeque::new(),
            defaults: None,
            ping: None,
            ping_out: false,
            ended: None,
            opened: 0,
            paused: false,
            flood: FloodMeter::new(settings.flood_budget),
            flood_text: None,
            max_body: settings.max_body,
        }
    }

    /// Answer with these fields unless the app sets them (else the standard).
    pub fn set_defaults(&mut self, defaults: std::sync::Arc<Defaults>) {
        self.defaults = Some(defaults);
    }

    /// Bytes the client sent. A flood ([`FloodMeter`]) is not read on:
    /// the connection ends with GOAWAY ENHANCE_YOUR_CALM.
    pub fn recv(&mut self, data: &[u8]) {
        if self.flood.flooded() {
            return;
        }
        if self.flood.feed(data) {
            let (total, useful) = self.flood.counts();
            // Before the shutdown: a connection still handshaking ends in it.
            self.flood_text = Some(format!(
                "a flood of frames that carry nothing ({total} bytes of frames for {useful} of payload)"
            ));
            self.abrupt_shutdown(Reason::ENHANCE_YOUR_CALM);
            return;
        }
        self.pipe.push(data);
    }

    /// The client ended its side.
    pub fn recv_eof(&mut self) {
        self.pipe.push_eof();
    }

    /// The next event, after a [`H2Conn::drive`].
    pub fn next_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// What to write to the client.
    pub fn take_output(&mut self) -> Vec<u8> {
        self.pipe.take_output()
    }

    pub fn has_output(&self) -> bool {
        self.pipe.has_output()
    }

    /// Bytes to write that are still to take.
    pub fn output_len(&self) -> usize {
        self.pipe.output_len()
    }

    /// How the connection ended, once it has (its last output may still be
    /// to write).
    pub fn ended(&self) -> Option<&Ended> {
        self.ended.as_ref()
    }

    /// Streams open, answered or not.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Whether no request arrived yet.
    pub fn is_fresh(&self) -> bool {
        self.opened == 0
    }

    /// Read stream `id`'s body (true) or leave it to the window (false).
    /// True if it was not wanted and now is (a [`H2Conn::drive`] reads it).
    pub fn want_body(&mut self, id: u32, want: bool) -> bool {
        let Some(s) = self.streams.get_mut(&id) else {
            return false;
        };
        let newly = want && !s.wants_body && s.body.is_some();
        s.wants_body = want;
        newly
    }

    /// Answer stream `id` with a head; `end`: no body follows.
    pub fn respond(&mut self, id: u32, status: u16, headers: &[(&str, &[u8])], end: bool) {
        let defaults = self
            .defaults
            .as_deref()
            .unwrap_or(&crate::http::defaults::STANDARD);
        let head = response_head(status, headers, defaults);
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        let Some(mut respond) = s.respond.take() else {
            return;
        };
        match respond.send_response(head, end) {
            Ok(send) if !end => s.send = Some(send),
            Ok(_) => {}
            Err(e) => tracing::debug!("HTTP/2 stream {id}: answer not sent: {e}"),
        }
        self.forget_if_done(id);
    }

    /// Send `100 Continue` on stream `id`, whose client waits for it.
    pub fn send_continue(&mut self, id: u32) {
        if let Some(respond) = self.streams.get_mut(&id).and_then(|s| s.respond.as_mut()) {
            let mut head = http::Response::new(());
            *head.status_mut() = http::StatusCode::CONTINUE;
            let _ = respond.send_informational(head);
        }
    }

    /// Body bytes of stream `id`'s answer, sent as its windows allow.
    pub fn send(&mut self, id: u32, data: Bytes) {
        if let Some(s) = self.streams.get_mut(&id).filter(|s| s.send.is_some()) {
            if !data.is_empty() {
                s.queued += data.len();
                s.queue.push_back(data);
            }
        }
    }

    /// Hold answer bytes here (true) while the caller's output is full, so a
    /// client that advertises huge windows and reads nothing is held to the
    /// caller's bound, not h2's.
    pub fn pause_sends(&mut self, paused: bool) {
        self.paused = paused;
    }

    /// Bytes of stream `id`'s answer queued here, not yet handed to h2.
    pub fn queued(&self, id: u32) -> usize {
        self.streams.get(&id).map_or(0, |s| s.queued)
    }

    /// End stream `id`'s answer after what is queued, with `trailers`.
    pub fn finish(&mut self, id: u32, trailers: Option<HeaderMap>) {
        if let Some(s) = self.streams.get_mut(&id) {
            s.finish = Some(trailers);
        }
    }

    /// Give up on stream `id` (RST_STREAM with `reason`).
    pub fn reset(&mut self, id: u32, reason: Reason) {
        if let Some(mut s) = self.streams.remove(&id) {
            if let Some(send) = &mut s.send {
                send.send_reset(reason);
            } else if let Some(respond) = &mut s.respond {
                respond.send_reset(reason);
            }
        }
    }

    /// The answer bytes of each stream handed to h2 since the last call.
    pub fn take_written(&mut self, mut f: impl FnMut(u32, usize)) {
        for (&id, s) in &mut self.streams {
            if s.written > 0 {
                self.flood.sent(s.written);
                f(id, std::mem::take(&mut s.written));
            }
        }
    }

    /// Begin a graceful close (RFC 9113 §6.8): GOAWAY with the last stream
    /// id possible, a PING, then GOAWAY with the last stream processed; the
    /// streams open finish.
    pub fn graceful_shutdown(&mut self) {
        if let State::Open(conn) = &mut self.state {
            conn.graceful_shutdown();
        }
    }

    /// Close now with GOAWAY `reason` (the streams open are not answered).
    pub fn abrupt_shutdown(&mut self, reason: Reason) {
        match &mut self.state {
            State::Open(conn) => conn.abrupt_shutdown(reason),
            State::Handshaking(_) => self.close(Ended::Done),
            State::Closed => {}
        }
    }

    /// Send a keep-alive PING unless one is unanswered; false if one is.
    pub fn ping(&mut self) -> bool {
        if self.ping_out {
            return false;
        }
        if let Some(ping) = &mut self.ping {
            self.ping_out = ping.send_ping(Ping::opaque()).is_ok();
        }
        true
    }

    /// Whether a keep-alive PING is still unanswered.
    pub fn awaiting_pong(&self) -> bool {
        self.ping_out
    }

    /// Poll h2 until nothing more moves: the handshake, new streams, their
    /// bodies (where wanted), their answers' bytes (as windows open), resets.
    pub fn drive(&mut self) {
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..ROUNDS {
            let before = (
                self.events.len(),
                self.pipe.unread(),
                self.pipe.has_output(),
            );
            let moved = self.poll_connection(&mut cx) | self.poll_streams(&mut cx);
            let after = (
                self.events.len(),
                self.pipe.unread(),
                self.pipe.has_output(),
            );
            if !moved && before == after {
                break;
            }
        }
    }

    /// The handshake, then the connection: frames read and written, streams
    /// accepted. True if anything moved.
    fn poll_connection(&mut self, cx: &mut Context<'_>) -> bool {
        if let State::Handshaking(handshake) = &mut self.state {
            match std::pin::Pin::new(handshake).poll(cx) {
                Poll::Pending => return false,
                Poll::Ready(Ok(mut conn)) => {
                    self.ping = conn.ping_pong();
                    self.state = State::Open(conn);
                }
                Poll::Ready(Err(e)) => {
                    self.fail(e);
                    return true;
                }
            }
        }
        let mut moved = false;
        loop {
            let State::Open(conn) = &mut self.state else {
                return moved;
            };
            match conn.poll_accept(cx) {
                Poll::Pending => break,
                Poll::Ready(None) => {
                    self.close(Ended::Done);
                    return true;
                }
                Poll::Ready(Some(Err(e))) => {
                    self.fail(e);
                    return true;
                }
                Poll::Ready(Some(Ok((req, respond)))) => {
                    moved = true;
                    self.accept(req, respond);
                }
            }
        }
        if self.ping_out {
            if let Some(ping) = &mut self.ping {
                if let Poll::Ready(result) = ping.poll_pong(cx) {
                    self.ping_out = false;
                    moved |= result.is_ok();
                }
            }
        }
        moved
    }

    fn accept(&mut self, req: Request<RecvStream>, mut respond: SendResponse<Bytes>) {
        let id: u32 = respond.stream_id().into();
        self.opened += 1;
        let ended = req.body().is_end_stream();
        let head = request_head(&req, ended).and_then(|head| match head.body {
            crate::http::BodyKind::Length(n) if n > self.max_body => Err(Refused::TooLarge),
            _ => Ok(head),
        });
        match head {
            Ok(head) => {
                let (_, body) = req.into_parts();
                self.streams.insert(
                    id,
                    Stream {
                        body: (!ended).then_some(body),
                        wants_body: false,
                        respond: Some(respond),
                        send: None,
                        queue: VecDeque::new(),
                        queued: 0,
                        finish: None,
                        written: 0,
                        received: 0,
                    },
                );
                self.events.push_back(Event::Request { id, head });
                if ended {
                    self.events.push_back(Event::End { id });
                }
            }
            Err(refused) => {
                tracing::debug!("HTTP/2 stream {id} refused: {refused:?}");
                self.refuse(&mut respond, refused);
            }
        }
    }

    /// Answer a request no app may be handed, from here.
    fn refuse(&self, respond: &mut SendResponse<Bytes>, refused: Refused) {
        let defaults = self
            .defaults
            .as_deref()
            .unwrap_or(&crate::http::defaults::STANDARD);
        let mut fields: Vec<(&str, &[u8])> = vec![("content-length", b"0")];
        if refused == Refused::Connect {
            fields.push(("allow", b"GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH"));
        }
        let head = response_head(refused.status(), &fields, defaults);
        let _ = respond.send_response(head, true);
    }

    /// Each stream's body (while wanted), answer bytes, end, and reset.
    fn poll_streams(&mut self, cx: &mut Context<'_>) -> bool {
        let mut moved = false;
        let mut gone = Vec::new();
        let mut too_large = Vec::new();
        let max_body = self.max_body;
        for (&id, s) in &mut self.streams {
            if let (true, Some(body)) = (s.wants_body, &mut s.body) {
                loop {
                    match body.poll_data(cx) {
                        Poll::Pending => break,
                        Poll::Ready(Some(Ok(data))) => {
                            moved = true;
                            let _ = body.flow_control().release_capacity(data.len());
                            s.received += data.len() as u64;
                            if s.received > max_body {
                                tracing::debug!("HTTP/2 stream {id}: the body is over the limit");
                                too_large.push(id);
                                break;
                            }
                            if !data.is_empty() {
                                self.events.push_back(Event::Data { id, data });
                            }
                        }
                        Poll::Ready(None) => {
                            moved = true;
                            s.body = None;
                            self.events.push_back(Event::End { id });
                            break;
                        }
                        Poll::Ready(Some(Err(e))) => {
                            tracing::debug!("HTTP/2 stream {id}: body failed: {e}");
                            gone.push(id);
                            break;
                        }
                    }
                }
            }
            if let Some(mut send) = s.send.take_if(|_| !self.paused) {
                let (pushed, ended) = push_queue(&mut send, s, cx);
                moved |= pushed;
                if !ended {
                    s.send = Some(send);
                }
            }
            let reset = match (&mut s.respond, &mut s.send) {
                (Some(r), _) => r.poll_reset(cx),
                (None, Some(send)) => send.poll_reset(cx),
                (None, None) => Poll::Pending,
            };
            if reset.is_ready() && !gone.contains(&id) {
                gone.push(id);
            }
        }
        for id in too_large {
            // The answer not begun: 413 from here; else only a reset says it.
            if let Some(mut s) = self.streams.remove(&id) {
                match (s.respond.as_mut(), s.send.as_mut()) {
                    (Some(respond), _) => self.refuse(respond, Refused::TooLarge),
                    (None, Some(send)) => send.send_reset(Reason::CANCEL),
                    (None, None) => {}
                }
            }
            gone.push(id);
        }
        for id in gone {
            moved = true;
            self.streams.remove(&id);
            self.events.push_back(Event::Reset { id });
        }
        let done: Vec<u32> = self
            .streams
            .iter()
            .filter(|(_, s)| s.answered() && s.body.is_none())
            .map(|(&id, _)| id)
            .collect();
        for id in done {
            self.streams.remove(&id);
        }
        moved
    }

    /// A stream whose answer is whole and whose body is read, or whose
    /// body nobody wants any more, is forgotten (h2 resets an unread body
    /// with NO_ERROR, RFC 9113 §8.1).
    fn forget_if_done(&mut self, id: u32) {
        if self.streams.get(&id).is_some_and(Stream::answered) {
            self.streams.remove(&id);
        }
    }

    fn fail(&mut self, e: h2::Error) {
        let ours = e.is_go_away() && !e.is_remote();
        let ended = if e.is_io() && !e.is_go_away() {
            Ended::Done // the client's end of input, or a transport failure
        } else {
            Ended::Error {
                reason: e.reason(),
                ours,
                text: e.to_string(),
            }
        };
        self.close(ended);
    }

    fn close(&mut self, ended: Ended) {
        // h2 ends a connection we shut with a code as if it ended cleanly.
        let ended = match self.flood_text.take() {
            Some(text) => Ended::Error {
                reason: Some(Reason::ENHANCE_YOUR_CALM),
                ours: true,
                text,
            },
            None => ended,
        };
        self.state = State::Closed;
        self.ended = Some(ended);
        for (id, _) in self.streams.drain() {
            self.events.push_back(Event::Reset { id });
        }
    }
}

/// Hand stream `s`'s queued bytes to h2 as far as its capacity allows, then
/// its end: whether anything moved, and whether the stream's answer ended.
fn push_queue(send: &mut SendStream<Bytes>, s: &mut Stream, cx: &mut Context<'_>) -> (bool, bool) {
    let mut moved = false;
    while s.queued > 0 {
        send.reserve_capacity(s.queued.min(SLICE));
        let room = match send.poll_capacity(cx) {
            Poll::Ready(Some(Ok(n))) if n > 0 => n,
            Poll::Ready(Some(Err(_))) | Poll::Ready(None) => return (moved, true),
            _ => break,
        };
        let mut room = room.min(s.queued);
        while room > 0 {
            let Some(front) = s.queue.front_mut() else {
                break;
            };
            let piece = if front.len() <= room {
                s.queue.pop_front().expect("front exists")
            } else {
                front.split_to(room)
            };
            room -= piece.len();
            s.queued -= piece.len();
            s.written += piece.len();
            let last = s.queued == 0 && matches!(s.finish, Some(None));
            if send.send_data(piece, last).is_err() {
                return (moved, true);
            }
            if last {
                s.finish = None;
                return (true, true);
            }
            moved = true;
        }
    }
    if s.queued == 0 {
        match s.finish.take() {
            Some(None) => {
                let _ = send.send_data(Bytes::new(), true);
                return (true, true);
            }
            Some(Some(trailers)) => {
                let _ = send.send_trailers(trailers);
                return (true, true);
            }
            None => send.reserve_capacity(0),
        }
    }
    (moved, false)
}
