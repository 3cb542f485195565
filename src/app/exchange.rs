//! One request's channel between its core thread and the application thread.
//!
//! Nothing here knows Python. Blocking waits ([`Exchange::wait_body`],
//! [`Exchange::wait_room`]) are separate from the non-blocking calls so that a
//! caller holding the GIL can try first and release the GIL only to wait.
//! Flow control both ways: the core stops reading the socket while the app has
//! not taken enough of the body ([`Exchange::push_body`] says so), and the app
//! waits while the core has not written enough of the answer
//! ([`Exchange::try_send`] says so) — a slow client makes the app wait instead
//! of the server buffering without bound. An inline exchange (loop-only shape)
//! has no limits: its app runs on the core thread, which cannot wait for itself.
//!
//! A WebSocket uses the same paths once accepted: the client's messages come
//! in as [`WsMessage`]s ([`Exchange::push_ws`], [`Exchange::try_receive_ws`]),
//! under the same high water as the body, and the app's leave as
//! [`ResponseEvent`]s, counted like body bytes (each message with its frame's
//! header, so even empty ones are held back).
//!
//! State lives under one mutex; a thread-per-request app blocks only in the
//! two waits (a condvar signalled only while someone waits). An async app
//! (ASGI) never blocks: it registers an app waker ([`Exchange::set_app_waker`])
//! and is woken through it — on the core thread, without the GIL — only after
//! one of its non-blocking calls found nothing to do (armed under the lock,
//! so no wake is lost) and the core then made progress for it. The core is notified only
//! on transitions it acts on: its event queue went from empty to non-empty
//! (the end of the answer included), the app wants `100 Continue` sent, or
//! body room freed after the core was told to stop reading. Limits:
//! [`BODY_HIGH_WATER`] of request body buffered, [`RESPONSE_HIGH_WATER`] of
//! answer queued or unwritten (body and file bytes, WebSocket frames; a head,
//! a close or an end is never refused).
//!
//! A body the core buffered in full ([`Exchange::push_complete`]) arrives at
//! once: its memory part as body chunks, the rest as a file the app's reads
//! go on with ([`BufferedBody`]), so no read waits on the client. The file is
//! read on the app thread under the lock: a page-cache read of one chunk,
//! while the core only takes the lock to hand over events and credit.

use std::collections::VecDeque;
use std::fs::File;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

use bytes::Bytes;

use super::body_buffer::BufferedBody;
use crate::backend::Notifier;
use crate::http::Fields;

/// The answer, piece by piece, as the application produces it.
#[derive(Debug)]
pub enum ResponseEvent {
    Start {
        status: u16,
        headers: Fields,
    },
    /// Body bytes ([`crate::app::piece`]: a big piece is sent as it came).
    Body(Bytes),
    /// `len` bytes of `file` from `offset`, sent by the core thread (zero-copy where it can).
    File {
        file: File,
        offset: u64,
        len: u64,
    },
    /// The answer is complete.
    End,
    /// The application failed: a 500 if nothing was started, else the connection is closed.
    Abort,
    /// Accept a WebSocket request: the core writes the `101` (the handshake's
    /// headers, then `headers`). `subprotocol` must be one the client offered.
    WsAccept {
        subprotocol: Option<String>,
        headers: Fields,
    },
    /// A WebSocket message to the client (after `WsAccept`).
    WsText(String),
    /// A binary one: a [`crate::app::piece`], as a body is, so a big `bytes`
    /// from the app is framed from its own buffer, not copied on its thread first.
    WsBinary(Bytes),
    /// Close the WebSocket (the closing handshake, §7); before `WsAccept`:
    /// deny the request with a 403.
    WsClose {
        code: u16,
        reason: String,
    },
}

impl ResponseEvent {
    /// The answer bytes it carries, as the app's sends are held to them
    /// (`RESPONSE_HIGH_WATER`): a body, a file's length, a message's frame.
    /// A message counts its frame's header too, as the wire will take it:
    /// an empty message is two bytes the core must buffer for a client that
    /// does not read, so an app sending them in a loop must wait like any other.
    pub fn counted(&self) -> usize {
        let framed = |len: usize| len + crate::ws::frame::header_len(len);
        match self {
            ResponseEvent::Body(data) => data.len(),
            ResponseEvent::WsBinary(data) => framed(data.len()),
            ResponseEvent::WsText(text) => framed(text.len()),
            ResponseEvent::File { len, .. } => usize::try_from(*len).unwrap_or(usize::MAX),
            _ => 0,
        }
    }
}

/// A WebSocket message from the client, or the end of the connection.
#[derive(Debug, PartialEq, Eq)]
pub enum WsMessage {
    Text(String),
    Binary(Vec<u8>),
    /// The connection ended: `code` from the client's Close (1005 for one
    /// without a code), 1006 when it ended without a Close, or the code the
    /// server closed with for a protocol error. Always the last message.
    /// `reason`: the client's Close reason (empty when it gave none).
    Disconnect {
        code: u16,
        reason: String,
    },
}

impl WsMessage {
    /// What it counts for against the high water: its bytes, plus a little
    /// so a flood of empty messages is bounded too.
    fn weight(&self) -> usize {
        const OVERHEAD: usize = 64;
        OVERHEAD
            + match self {
                WsMessage::Text(t) => t.len(),
                WsMessage::Binary(b) => b.len(),
                WsMessage::Disconnect { reason, .. } => reason.len(),
            }
    }
}

/// What a body read found.
#[derive(Debug, PartialEq, Eq)]
pub enum BodyRead {
    Data(Vec<u8>),
    /// Nothing buffered yet (non-blocking read only): wait with [`Exchange::wait_body`].
    Empty,
    /// The body is complete.
    Eof,
}

/// The client has gone (or the connection was closed): nobody will read the answer.
#[derive(Debug, PartialEq, Eq)]
pub struct Gone;

/// What [`Exchange::try_send`] did with an event.
#[derive(Debug)]
pub enum Sent {
    Queued,
    /// Too much of the answer is waiting for the client: wait with
    /// [`Exchange::wait_room`], then send this event again.
    Full(ResponseEvent),
}

/// Request body (or WebSocket messages) buffered for the app past which the
/// core stops reading.
pub const BODY_HIGH_WATER: usize = 256 * 1024;
/// Answer bytes queued or unwritten past which the app's sends are refused.
pub const RESPONSE_HIGH_WATER: usize = 512 * 1024;
/// The most one read takes from a buffered body's file.
const SPILL_READ: usize = 256 * 1024;

/// Where `100 Continue` stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Continue {
    /// Not expected, or already answered.
    No,
    /// Expected; the app has not asked for the body yet.
    Expected,
    /// The app asked: the core is to send it.
    Wanted,
}

#[derive(Debug)]
struct State {
    /// Body chunks not read yet; `body[0][body_pos..]` is next.
    body: VecDeque<Vec<u8>>,
    body_pos: usize,
    /// The part of a buffered body past its memory, read after `body`.
    spill: Option<File>,
    /// The bytes in `spill` when it was handed over.
    spill_len: u64,
    /// The body was handed over whole, buffered by the core ([`Exchange::push_complete`]).
    whole: bool,
    /// WebSocket messages not received yet.
    ws_in: VecDeque<WsMessage>,
    /// Bytes in `body` not read yet, plus the weight of `ws_in`.
    inbound: usize,
    body_end: bool,
    /// The core was told to stop reading (push_body returned false).
    core_stopped: bool,
    expect: Continue,
    events: Vec<ResponseEvent>,
    /// Answer bytes sent by the app and not yet written by the core.
    unwritten: usize,
    gone: bool,
    /// The client ended its side of the connection after the request: an
    /// async app's `receive()` hears that it left, while the answer is still
    /// written (a half-close may still read it).
    hung_up: bool,
    /// App threads blocked in `wait_body` / `wait_room`: the condvar is
    /// signalled only when someone waits (a signal costs a syscall).
    waiters: usize,
    /// An async app found nothing to do: call the app waker on the next change.
    armed: bool,
}

/// Wakes an async application's side of an exchange (called on the core thread).
pub type AppWaker = Arc<dyn Fn() + Send + Sync>;

/// One request's channel between its core and its application thread.
pub struct Exchange {
    notifier: Notifier,
    /// No limits: the app runs on the core thread, which cannot wait for itself.
    inline: bool,
    state: Mutex<State>,
    changed: Condvar,
    app_waker: OnceLock<AppWaker>,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("inline", &self.inline)
            .field("state", &self.state)
            .finish()
    }
}

impl Exchange {
    /// A new exchange whose core side is woken through `notifier`;
    /// `expect_continue`: the client waits for `100 Continue` before its body.
    pub fn new(notifier: Notifier, inline: bool, expect_continue: bool) -> Self {
        Exchange {
            notifier,
            inline,
            state: Mutex::new(State {
                body: VecDeque::new(),
                body_pos: 0,
                spill: None,
                spill_len: 0,
                whole: false,
                ws_in: VecDeque::new(),
                inbound: 0,
                body_end: false,
                core_stopped: false,
                expect: if expect_continue {
                    Continue::Expected
                } else {
                    Continue::No
                },
                events: Vec::new(),
                unwritten: 0,
                gone: false,
                hung_up: false,
                waiters: 0,
                armed: false,
            }),
            changed: Condvar::new(),
            app_waker: OnceLock::new(),
        }
    }

    /// Give the exchange an empty vector (with room) for the app's events:
    /// the session's own, which [`Exchange::take_events`] swaps back.
    pub fn lending(mut self, events: Vec<ResponseEvent>) -> Self {
        debug_assert!(events.is_empty(), "lent a vector with events in it");
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        state.events = events;
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking app thread must not take the core down with it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wake the app threads blocked in a wait, if any. Returns whether the
    /// app waker is to be called (after the lock is dropped: it may make a syscall).
    #[must_use]
    fn wake_app(&self, state: &mut State) -> bool {
        if state.waiters > 0 {
            self.changed.notify_all();
        }
        std::mem::take(&mut state.armed)
    }

    /// Call the app waker, if `armed` says the app waits for it.
    fn call_app_waker(&self, armed: bool) {
        if armed {
            if let Some(waker) = self.app_waker.get() {
                waker();
            }
        }
    }

    /// Wake an async app through `waker` whenever it may make progress after
    /// one of its calls found nothing to do (set once, before the app runs).
    pub fn set_app_waker(&self, waker: AppWaker) {
        let _ = self.app_waker.set(waker);
    }

    /// The app wants the body: a client waiting for `100 Continue` gets it.
    /// Returns whether the core must be notified.
    fn want_body(state: &mut State) -> bool {
        if state.expect == Continue::Expected {
            state.expect = Continue::Wanted;
            return true;
        }
        false
    }

    // ---- the application's side (any thread but the core's, unless inline)

    /// Up to `max` bytes of the body, without blocking. The first read of a
    /// request that expects `100 Continue` asks the core to send it.
    pub fn try_read_body(&self, max: usize) -> Result<BodyRead, Gone> {
        self.read_body(max).map(|(read, _)| read)
    }

    /// Like [`Exchange::try_read_body`], and also whether the body is complete
    /// once this read is taken (so the last chunk can say so, as ASGI's
    /// `more_body` does). An `Empty` read arms the app waker.
    pub fn try_read_chunk(&self, max: usize) -> Result<(BodyRead, bool), Gone> {
        self.read_body(max)
    }

    fn read_body(&self, max: usize) -> Result<(BodyRead, bool), Gone> {
        let mut s = self.lock();
        if s.gone {
            return Err(Gone);
        }
        let mut notify = Self::want_body(&mut s);
        let read = if !s.body.is_empty() && max > 0 {
            let mut data = Vec::with_capacity(max.min(s.inbound));
            while data.len() < max {
                let pos = s.body_pos;
                let Some(front) = s.body.front_mut() else {
                    break;
                };
                let n = (front.len() - pos).min(max - data.len());
                if pos == 0 && n == front.len() && data.is_empty() {
                    // A whole chunk: hand it over without a copy.
                    data = s.body.pop_front().expect("a front chunk");
                } else {
                    data.extend_from_slice(&front[pos..pos + n]);
                    if pos + n == front.len() {
                        s.body.pop_front();
                        s.body_pos = 0;
                    } else {
                        s.body_pos += n;
                    }
                }
            }
            notify |= Self::taken(&mut s, data.len());
            BodyRead::Data(data)
        } else if let Some(file) = s.spill.as_mut().filter(|_| max > 0) {
            match BufferedBody::read_spill(file, max.min(SPILL_READ)) {
                Ok(data) if !data.is_empty() => BodyRead::Data(data),
                Ok(_) => {
                    s.spill = None;
                    BodyRead::Eof
                }
                Err(e) => {
                    tracing::warn!("reading a buffered request body back: {e}");
                    return Err(Gone);
                }
            }
        } else if s.body_end && s.body.is_empty() && s.spill.is_none() {
            BodyRead::Eof
        } else {
            s.armed = true;
            BodyRead::Empty
        };
        let complete = s.body_end && s.body.is_empty() && s.spill.is_none();
        drop(s);
        if notify {
            self.notifier.notify();
        }
        Ok((read, complete))
    }

    /// Whether the client has gone or ended its side ([`Exchange::hang_up`]);
    /// if not, arm the app waker so that its departure (or any other change)
    /// wakes the app.
    pub fn watch_gone(&self) -> bool {
        let mut s = self.lock();
        let left = s.gone || s.hung_up;
        if !left {
            s.armed = true;
        }
        left
    }

    /// `n` inbound bytes were taken by the app. Returns whether the core,
    /// told to stop reading, must now be notified that room freed.
    fn taken(s: &mut State, n: usize) -> bool {
        s.inbound -= n;
        if s.core_stopped && s.inbound < BODY_HIGH_WATER {
            s.core_stopped = false;
            return true;
        }
        false
    }

    /// Block (on the app's side) while `blocked` holds and the client is here.
    fn wait_while(&self, mut s: MutexGuard<'_, State>, blocked: impl Fn(&State) -> bool) {
        s.waiters += 1;
        while !s.gone && blocked(&s) {
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.waiters -= 1;
    }

    /// Block until body data, its end, or the client's departure.
    pub fn wait_body(&self) {
        let mut s = self.lock();
        if Self::want_body(&mut s) {
            self.notifier.notify();
        }
        self.wait_while(s, |s| s.body.is_empty() && !s.body_end);
    }

    /// The next WebSocket message, without blocking (`None`: wait with
    /// [`Exchange::wait_ws`]). Messages queued before the connection ended
    /// are still delivered, the final [`WsMessage::Disconnect`] included;
    /// `Gone` comes after them. `None` arms the app waker.
    pub fn try_receive_ws(&self) -> Result<Option<WsMessage>, Gone> {
        let mut s = self.lock();
        let Some(message) = s.ws_in.pop_front() else {
            if s.gone {
                return Err(Gone);
            }
            s.armed = true;
            return Ok(None);
        };
        let notify = !s.gone && Self::taken(&mut s, message.weight());
        drop(s);
        if notify {
            self.notifier.notify();
        }
        Ok(Some(message))
    }

    /// Block until a WebSocket message or the client's departure.
    pub fn wait_ws(&self) {
        let s = self.lock();
        self.wait_while(s, |s| s.ws_in.is_empty());
    }

    /// Queue an event for the core (waking it only if it had nothing queued).
    pub fn try_send(&self, event: ResponseEvent) -> Result<Sent, Gone> {
        let mut s = self.lock();
        if s.gone {
            return Err(Gone);
        }
        let size = event.counted();
        // Only what carries bytes waits: a head or the end is never refused.
        if !self.inline && size > 0 && s.unwritten >= RESPONSE_HIGH_WATER {
            s.armed = true;
            return Ok(Sent::Full(event));
        }
        s.unwritten = s.unwritten.saturating_add(size);
        let first = s.events.is_empty();
        s.events.push(event);
        drop(s);
        // A core with events already queued was notified and has not taken them.
        if first {
            self.notifier.notify();
        }
        Ok(Sent::Queued)
    }

    /// Block until the core has written enough to take more, or the client left.
    pub fn wait_room(&self) {
        let s = self.lock();
        self.wait_while(s, |s| s.unwritten >= RESPONSE_HIGH_WATER);
    }

    pub fn is_gone(&self) -> bool {
        self.lock().gone
    }

    /// Wake the core side (e.g. an app whose queue refused this request has room now).
    pub fn notify(&self) {
        self.notifier.notify();
    }

    // ---- the core's side

    /// Body bytes read from the client. Returns false when the app has enough
    /// buffered: stop reading until notified.
    pub fn push_body(&self, data: Vec<u8>) -> bool {
        let mut s = self.lock();
        if s.gone || data.is_empty() {
            return true;
        }
        s.inbound += data.len();
        s.body.push_back(data);
        self.room_after_push(s)
    }

    /// A WebSocket message from the client. Returns false when the app has
    /// enough buffered: stop reading until notified. A [`WsMessage::Disconnect`]
    /// is queued even after [`Exchange::close`] (it is the app's last word).
    pub fn push_ws(&self, message: WsMessage) -> bool {
        let mut s = self.lock();
        if s.gone && !matches!(message, WsMessage::Disconnect { .. }) {
            return true;
        }
        s.inbound += message.weight();
        s.ws_in.push_back(message);
        self.room_after_push(s)
    }

    /// Wake the app for what was just pushed; whether the core may read on.
    fn room_after_push(&self, mut s: MutexGuard<'_, State>) -> bool {
        let armed = self.wake_app(&mut s);
        let room = self.inline || s.inbound < BODY_HIGH_WATER;
        s.core_stopped = !room;
        drop(s);
        self.call_app_waker(armed);
        room
    }

    /// The whole body, buffered by the core, and its end (before the app is
    /// called: nothing waits for it, so nobody is woken).
    pub fn push_complete(&self, body: BufferedBody) {
        let mut s = self.lock();
        for chunk in body.memory.into_iter().filter(|c| !c.is_empty()) {
            s.inbound += chunk.len();
            s.body.push_back(chunk);
        }
        s.spill = body.spill;
        s.spill_len = body.spilled;
        s.whole = true;
        s.body_end = true;
    }

    /// The whole body's length, where the app is given the body whole (the
    /// core buffered it, or an inline app runs once it has arrived); None
    /// where it streams, even if it happens to have arrived already, so the
    /// answer does not hang on timing. Only before the app has read any of it
    /// (when its environ is built): reads take from what this counts.
    pub fn complete_body_len(&self) -> Option<u64> {
        let s = self.lock();
        (s.body_end && (s.whole || self.inline)).then(|| s.inbound as u64 + s.spill_len)
    }

    /// The request body is complete.
    pub fn end_body(&self) {
        let mut s = self.lock();
        s.body_end = true;
        let armed = self.wake_app(&mut s);
        drop(s);
        self.call_app_waker(armed);
    }

    /// Whether the app has taken enough of the body for the core to read more.
    pub fn body_room(&self) -> bool {
        self.inline || self.lock().inbound < BODY_HIGH_WATER
    }

    /// Take every event the app has queued, in order.
    pub fn take_events(&self, into: &mut Vec<ResponseEvent>) {
        let mut s = self.lock();
        if into.is_empty() {
            // The app's vector itself, and `into`'s room for the app's next
            // events: no allocation and no copy on either side.
            std::mem::swap(into, &mut s.events);
        } else {
            into.append(&mut s.events);
        }
    }

    /// The core wrote `n` bytes of the answer: credit for the app.
    pub fn written(&self, n: usize) {
        let mut s = self.lock();
        let was_full = s.unwritten >= RESPONSE_HIGH_WATER;
        s.unwritten = s.unwritten.saturating_sub(n);
        if was_full && s.unwritten < RESPONSE_HIGH_WATER {
            let armed = self.wake_app(&mut s);
            drop(s);
            self.call_app_waker(armed);
        }
    }

    /// Whether the app asked for the body of a request expecting `100 Continue`
    /// (answered once: the flag is cleared).
    pub fn take_continue(&self) -> bool {
        let mut s = self.lock();
        if s.expect == Continue::Wanted {
            s.expect = Continue::No;
            return true;
        }
        false
    }

    /// The client ended its sending side after the request: an app watching
    /// for its departure ([`Exchange::watch_gone`]) is woken; sends still go out.
    pub fn hang_up(&self) {
        let mut s = self.lock();
        if !s.hung_up {
            s.hung_up = true;
            let armed = self.wake_app(&mut s);
            drop(s);
            self.call_app_waker(armed);
        }
    }

    /// The connection is gone: the app's reads end and its sends fail.
    pub fn close(&self) {
        let mut s = self.lock();
        if !s.gone {
            s.gone = true;
            // WebSocket messages stay: the app still receives its Disconnect.
            s.body.clear();
            s.spill = None;
            s.inbound = 0;
            s.events.clear();
            let armed = self.wake_app(&mut s);
            drop(s);
            self.call_app_waker(armed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::share::Board;
    use crate::backend::slab::Key;
    use std::sync::Arc;
    use std::thread;
    use std::time::{Duration, Instant};

    /// An exchange and the board its notifications land on.
    fn exchange(inline: bool, expect_continue: bool) -> (Arc<Exchange>, Arc<Board>) {
        let board = Board::new(1);
        let notifier = Notifier::new(board.clone(), 0, Key::new(3, 1));
        let ex = Exchange::new(notifier, inline, expect_continue);
        (Arc::new(ex), board)
    }

    fn notified(board: &Board) -> usize {
        board.take_ready(0).count()
    }

    /// Run `f` on a thread; assert it is still blocked after a while, then
    /// run `release` and assert `f` returns soon after.
    fn blocks_until(f: impl FnOnce() + Send + 'static, release: impl FnOnce()) {
        let t = thread::spawn(f);
        thread::sleep(Duration::from_millis(100));
        assert!(!t.is_finished(), "returned without waiting");
        release();
        let start = Instant::now();
        while !t.is_finished() {
            assert!(start.elapsed() < Duration::from_secs(5), "never woke");
            thread::sleep(Duration::from_millis(2));
        }
        t.join().unwrap();
    }

    fn data(ex: &Exchange, max: usize) -> Vec<u8> {
        match ex.try_read_body(max) {
            Ok(BodyRead::Data(d)) => d,
            other => panic!("expected data, got {other:?}"),
        }
    }

    #[test]
    fn a_body_handed_over_whole_has_a_length_a_streamed_one_none() {
        // Streamed: none, even once it has all arrived (timing must not decide).
        let (ex, _board) = exchange(false, false);
        ex.push_body(b"hello".to_vec());
        ex.end_body();
        assert_eq!(ex.complete_body_len(), None);
        // Buffered by the core: memory and file together.
        let (ex, _board) = exchange(false, false);
        let dir = std::env::temp_dir();
        let mut buffer = crate::app::body_buffer::BodyBuffer::new(Arc::new(
            crate::app::body_buffer::BufferConfig {
                memory: 4,
                spill_dir: dir,
            },
        ));
        buffer.push(b"hello world".to_vec()).unwrap();
        assert_eq!(ex.complete_body_len(), None, "not handed over yet");
        ex.push_complete(buffer.finish().unwrap());
        assert_eq!(ex.complete_body_len(), Some(11));
        // An inline app runs once the body has arrived: it is whole.
        let (ex, _board) = exchange(true, false);
        ex.push_body(b"abc".to_vec());
        assert_eq!(ex.complete_body_len(), None, "not ended yet");
        ex.end_body();
        assert_eq!(ex.complete_body_len(), Some(3));
    }

    #[test]
    fn the_body_is_read_in_order_in_pieces_then_eof() {
        let (ex, board) = exchange(false, false);
        assert_eq!(ex.try_read_body(10), Ok(BodyRead::Empty));
        assert!(ex.push_body(b"hello ".to_vec()));
        assert!(ex.push_body(b"world".to_vec()));
        assert_eq!(data(&ex, 4), b"hell");
        assert_eq!(data(&ex, 100), b"o world");
        assert_eq!(ex.try_read_body(10), Ok(BodyRead::Empty));
        ex.end_body();
        assert_eq!(ex.try_read_body(10), Ok(BodyRead::Eof));
        assert_eq!(notified(&board), 0, "nothing the core needed to hear");
    }

    #[test]
    fn the_core_stops_at_the_high_water_and_is_notified_once_room_frees() {
        let (ex, board) = exchange(false, false);
        let chunk = vec![7u8; 64 * 1024];
        let mut pushed = 0;
        while ex.push_body(chunk.clone()) {
            pushed += chunk.len();
            assert!(pushed < 2 * BODY_HIGH_WATER, "never told to stop");
        }
        pushed += chunk.len();
        assert_eq!(pushed, BODY_HIGH_WATER, "stopped at the high water");
        assert!(!ex.body_room());
        assert_eq!(data(&ex, 1000).len(), 1000);
        assert!(ex.body_room());
        assert_eq!(notified(&board), 1, "the core is told room freed");
        data(&ex, 1000);
        assert_eq!(notified(&board), 0, "once, not on every read");
    }

    #[test]
    fn wait_body_blocks_until_data_arrives() {
        let (ex, _board) = exchange(false, false);
        let app = ex.clone();
        blocks_until(
            move || {
                app.wait_body();
                assert_eq!(data(&app, 10), b"late");
            },
            || assert!(ex.push_body(b"late".to_vec())),
        );
        let app = ex.clone();
        blocks_until(move || app.wait_body(), || ex.end_body());
    }

    #[test]
    fn the_first_body_read_asks_for_100_continue_once() {
        let (ex, board) = exchange(false, true);
        assert!(!ex.take_continue(), "not before the app asks");
        assert_eq!(ex.try_read_body(10), Ok(BodyRead::Empty));
        assert_eq!(notified(&board), 1);
        assert!(ex.take_continue());
        assert!(!ex.take_continue(), "answered once");
        ex.try_read_body(10).unwrap();
        assert_eq!(notified(&board), 0);

        let (plain, board) = exchange(false, false);
        plain.try_read_body(10).unwrap();
        assert!(!plain.take_continue());
        assert_eq!(notified(&board), 0);

        // A blocking wait asks too (the client would never send the body).
        let (waiting, board) = exchange(false, true);
        let app = waiting.clone();
        blocks_until(move || app.wait_body(), || waiting.end_body());
        assert_eq!(notified(&board), 1);
        assert!(waiting.take_continue());
    }

    #[test]
    fn a_lent_vector_comes_back_with_the_events_and_the_app_gets_the_takers() {
        let board = Board::new(1);
        let notifier = Notifier::new(board, 0, Key::new(3, 1));
        let lent: Vec<ResponseEvent> = Vec::with_capacity(8);
        let lent_at = lent.as_ptr();
        let ex = Exchange::new(notifier, false, false).lending(lent);
        let _ = ex.try_send(ResponseEvent::Body(b"a".to_vec().into()));
        let _ = ex.try_send(ResponseEvent::End);
        let mut taker: Vec<ResponseEvent> = Vec::with_capacity(4);
        let taker_at = taker.as_ptr();
        ex.take_events(&mut taker);
        assert_eq!(taker.as_ptr(), lent_at, "the events came in another vector");
        assert_eq!(taker.len(), 2);
        // The app's next events go into the taker's room: no allocation.
        let _ = ex.try_send(ResponseEvent::End);
        taker.clear();
        ex.take_events(&mut taker);
        assert_eq!(taker.as_ptr(), taker_at);
    }

    #[test]
    fn events_notify_the_core_only_when_its_queue_was_empty() {
        let (ex, board) = exchange(false, false);
        let send = |e| assert!(matches!(ex.try_send(e), Ok(Sent::Queued)));
        send(ResponseEvent::Start {
            status: 200,
            headers: Default::default(),
        });
        send(ResponseEvent::Body(b"a".to_vec().into()));
        send(ResponseEvent::Body(b"b".to_vec().into()));
        assert_eq!(notified(&board), 1);
        let mut got = Vec::new();
        ex.take_events(&mut got);
        assert!(matches!(
            got.as_slice(),
            [ResponseEvent::Start { status: 200, .. }, ResponseEvent::Body(a), ResponseEvent::Body(b)]
                if a[..] == b"a"[..] && b[..] == b"b"[..]
        ));
        send(ResponseEvent::End);
        assert_eq!(notified(&board), 1, "the queue was emptied: notify again");
    }

    #[test]
    fn a_full_answer_makes_the_app_wait_until_the_core_writes() {
        let (ex, _board) = exchange(false, false);
        let big = ResponseEvent::Body(vec![0; RESPONSE_HIGH_WATER + 4096].into());
        assert!(matches!(ex.try_send(big), Ok(Sent::Queued)));
        match ex.try_send(ResponseEvent::Body(b"more".to_vec().into())) {
            Ok(Sent::Full(ResponseEvent::Body(b))) => assert_eq!(&b[..], b"more", "handed back"),
            other => panic!("expected Full, got {other:?}"),
        }
        assert!(
            matches!(ex.try_send(ResponseEvent::End), Ok(Sent::Queued)),
            "the end is never refused"
        );
        ex.written(4096); // not enough: still at the high water
        let app = ex.clone();
        blocks_until(
            move || {
                app.wait_room();
                let sent = app.try_send(ResponseEvent::Body(b"more".to_vec().into()));
                assert!(matches!(sent, Ok(Sent::Queued)));
            },
            || ex.written(RESPONSE_HIGH_WATER),
        );
    }

    #[test]
    fn close_wakes_waiters_and_fails_the_apps_calls() {
        let (ex, _board) = exchange(false, false);
        assert!(matches!(
            ex.try_send(ResponseEvent::Body(vec![0; RESPONSE_HIGH_WATER].into())),
            Ok(Sent::Queued)
        ));
        let (reader, writer) = (ex.clone(), ex.clone());
        let closer = ex.clone();
        blocks_until(
            move || {
                let r = thread::spawn(move || reader.wait_body());
                writer.wait_room();
                r.join().unwrap();
            },
            move || closer.close(),
        );
        assert!(ex.is_gone());
        assert_eq!(ex.try_read_body(10), Err(Gone));
        assert!(matches!(ex.try_send(ResponseEvent::End), Err(Gone)));
        let mut events = Vec::new();
        ex.take_events(&mut events);
        assert!(events.is_empty(), "nobody will write them");
    }

    /// An exchange whose app waker counts its calls.
    fn counted(ex: &Exchange) -> Arc<std::sync::atomic::AtomicUsize> {
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let c = count.clone();
        ex.set_app_waker(Arc::new(move || {
            c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }));
        count
    }

    #[test]
    fn the_app_waker_fires_once_per_arming_and_only_when_armed() {
        use std::sync::atomic::Ordering::SeqCst;
        let (ex, _board) = exchange(false, false);
        let wakes = counted(&ex);
        assert!(ex.push_body(b"a".to_vec()));
        assert_eq!(wakes.load(SeqCst), 0, "nobody waited: no wake");
        assert_eq!(
            ex.try_read_chunk(10),
            Ok((BodyRead::Data(b"a".to_vec()), false))
        );
        assert_eq!(ex.try_read_chunk(10), Ok((BodyRead::Empty, false)));
        assert!(ex.push_body(b"b".to_vec()));
        assert!(ex.push_body(b"c".to_vec()));
        assert_eq!(wakes.load(SeqCst), 1, "armed by the empty read, fired once");
        assert_eq!(
            ex.try_read_chunk(1),
            Ok((BodyRead::Data(b"b".to_vec()), false))
        );
        ex.end_body();
        assert_eq!(
            ex.try_read_chunk(10),
            Ok((BodyRead::Data(b"c".to_vec()), true)),
            "the last chunk says the body is complete"
        );
        assert_eq!(ex.try_read_chunk(10), Ok((BodyRead::Eof, true)));

        // A full answer arms it; room freed by the core fires it.
        let big = ResponseEvent::Body(vec![0; RESPONSE_HIGH_WATER].into());
        assert!(matches!(ex.try_send(big), Ok(Sent::Queued)));
        assert!(matches!(
            ex.try_send(ResponseEvent::Body(b"x".to_vec().into())),
            Ok(Sent::Full(_))
        ));
        ex.written(10);
        assert_eq!(wakes.load(SeqCst), 2);

        // Watching for the departure: close() fires it, and a gone client is reported.
        assert!(!ex.watch_gone());
        ex.close();
        assert_eq!(wakes.load(SeqCst), 3);
        assert!(ex.watch_gone());
    }

    #[test]
    fn an_empty_websocket_receive_arms_the_app_waker() {
        use std::sync::atomic::Ordering::SeqCst;
        let (ex, _board) = exchange(false, false);
        let wakes = counted(&ex);
        assert!(ex.push_ws(WsMessage::Text("a".into())));
        assert_eq!(wakes.load(SeqCst), 0, "nobody waited: no wake");
        assert_eq!(ex.try_receive_ws(), Ok(Some(WsMessage::Text("a".into()))));
        assert_eq!(ex.try_receive_ws(), Ok(None));
        assert!(ex.push_ws(WsMessage::Binary(b"b".to_vec())));
        assert!(ex.push_ws(WsMessage::Binary(b"c".to_vec())));
        assert_eq!(
            wakes.load(SeqCst),
            1,
            "armed by the empty receive, fired once"
        );
    }

    #[test]
    fn websocket_messages_arrive_in_order_under_the_high_water() {
        let (ex, board) = exchange(false, false);
        assert_eq!(ex.try_receive_ws(), Ok(None));
        let big = vec![1u8; 64 * 1024];
        let mut pushed = 0;
        while ex.push_ws(WsMessage::Binary(big.clone())) {
            pushed += 1;
            assert!(
                pushed * big.len() < 2 * BODY_HIGH_WATER,
                "never told to stop"
            );
        }
        assert!(!ex.body_room());
        assert_eq!(
            ex.try_receive_ws(),
            Ok(Some(WsMessage::Binary(big.clone())))
        );
        assert!(ex.body_room());
        assert_eq!(notified(&board), 1, "the core is told room freed");
        // The app's sends count their bytes like a body.
        let text = ResponseEvent::WsText("x".repeat(RESPONSE_HIGH_WATER));
        assert!(matches!(ex.try_send(text), Ok(Sent::Queued)));
        let more = ex.try_send(ResponseEvent::WsBinary(Bytes::from_static(b"more")));
        assert!(matches!(more, Ok(Sent::Full(ResponseEvent::WsBinary(_)))));
        let close = ResponseEvent::WsClose {
            code: 1000,
            reason: String::new(),
        };
        assert!(
            matches!(ex.try_send(close), Ok(Sent::Queued)),
            "never refused"
        );
    }

    /// An empty message still costs the wire a frame: a loop of them to a
    /// client that reads nothing must stop at the high water like any other.
    #[test]
    fn empty_websocket_messages_wait_at_the_high_water() {
        let (ex, _board) = exchange(false, false);
        let mut queued = 0;
        loop {
            match ex.try_send(ResponseEvent::WsText(String::new())) {
                Ok(Sent::Queued) => queued += 1,
                Ok(Sent::Full(ResponseEvent::WsText(_))) => break,
                other => panic!("{:?}", other.map(|_| ())),
            }
            assert!(queued <= RESPONSE_HIGH_WATER, "never told to wait");
        }
        assert_eq!(
            queued,
            RESPONSE_HIGH_WATER / 2,
            "two bytes each on the wire"
        );
        ex.written(2);
        assert!(matches!(
            ex.try_send(ResponseEvent::WsBinary(Bytes::new())),
            Ok(Sent::Queued)
        ));
    }

    #[test]
    fn the_disconnect_outlives_the_close_then_the_app_is_told_gone() {
        let (ex, _board) = exchange(false, false);
        let app = ex.clone();
        blocks_until(
            move || {
                app.wait_ws();
                assert_eq!(app.try_receive_ws(), Ok(Some(WsMessage::Text("hi".into()))));
            },
            || assert!(ex.push_ws(WsMessage::Text("hi".into()))),
        );
        ex.push_ws(WsMessage::Text("queued".into()));
        ex.close();
        assert!(ex.push_ws(WsMessage::Text("after".into())), "dropped");
        ex.push_ws(WsMessage::Disconnect {
            code: 1006,
            reason: String::new(),
        });
        assert_eq!(
            ex.try_receive_ws(),
            Ok(Some(WsMessage::Text("queued".into())))
        );
        assert_eq!(
            ex.try_receive_ws(),
            Ok(Some(WsMessage::Disconnect {
                code: 1006,
                reason: String::new()
            }))
        );
        assert_eq!(ex.try_receive_ws(), Err(Gone));
    }

    #[test]
    fn an_inline_exchange_has_no_limits() {
        let (ex, _board) = exchange(true, false);
        assert!(ex.push_body(vec![0; 4 * BODY_HIGH_WATER]));
        assert!(ex.body_room());
        for _ in 0..4 {
            let body = ResponseEvent::Body(vec![0; RESPONSE_HIGH_WATER].into());
            assert!(matches!(ex.try_send(body), Ok(Sent::Queued)));
        }
    }
}
