//! The inbound half of a [`Conduit`]: what the client sends the app (the
//! request body, streamed or buffered whole by the core with its spill
//! file, or WebSocket messages), held to [`BODY_HIGH_WATER`], and the
//! client's `100 Continue` and departure.

use std::collections::VecDeque;
use std::fs::File;
use std::sync::MutexGuard;

use super::{Conduit, Gone, State};
use crate::app::body_buffer::BufferedBody;

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
    /// Nothing buffered yet (non-blocking read only): wait with [`Conduit::wait_body`].
    Empty,
    /// The body is complete.
    Eof,
}

/// Request body (or WebSocket messages) buffered for the app past which the
/// core stops reading.
pub const BODY_HIGH_WATER: usize = 256 * 1024;

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

/// The inbound half of the shared state.
#[derive(Debug)]
pub(super) struct Inbound {
    /// Body chunks not read yet; `body[0][body_pos..]` is next.
    body: VecDeque<Vec<u8>>,
    body_pos: usize,
    /// The part of a buffered body past its memory, read after `body`.
    spill: Option<File>,
    /// The bytes in `spill` when it was handed over.
    spill_len: u64,
    /// The body was handed over whole, buffered by the core ([`Conduit::push_complete`]).
    whole: bool,
    /// WebSocket messages not received yet.
    ws_in: VecDeque<WsMessage>,
    /// Bytes in `body` not read yet, plus the weight of `ws_in`.
    buffered: usize,
    body_end: bool,
    /// The core was told to stop reading (push_body returned false).
    core_stopped: bool,
    expect: Continue,
    /// The client ended its side of the connection after the request: an
    /// async app's `receive()` hears that it left, while the answer is still
    /// written (a half-close may still read it).
    hung_up: bool,
}

impl Inbound {
    /// `expect_continue`: the client waits for `100 Continue` before its body.
    pub(super) fn new(expect_continue: bool) -> Inbound {
        Inbound {
            body: VecDeque::new(),
            body_pos: 0,
            spill: None,
            spill_len: 0,
            whole: false,
            ws_in: VecDeque::new(),
            buffered: 0,
            body_end: false,
            core_stopped: false,
            expect: if expect_continue {
                Continue::Expected
            } else {
                Continue::No
            },
            hung_up: false,
        }
    }

    /// The connection is gone: what the app has not read is dropped
    /// (WebSocket messages stay: the app still receives its Disconnect).
    pub(super) fn clear_body(&mut self) {
        self.body.clear();
        self.spill = None;
        self.buffered = 0;
    }

    /// The app wants the body: a client waiting for `100 Continue` gets it.
    /// Returns whether the core must be notified.
    fn want_body(&mut self) -> bool {
        if self.expect == Continue::Expected {
            self.expect = Continue::Wanted;
            return true;
        }
        false
    }

    /// `n` inbound bytes were taken by the app. Returns whether the core,
    /// told to stop reading, must now be notified that room freed.
    fn taken(&mut self, n: usize) -> bool {
        self.buffered -= n;
        if self.core_stopped && self.buffered < BODY_HIGH_WATER {
            self.core_stopped = false;
            return true;
        }
        false
    }
}

impl Conduit {
    /// Up to `max` bytes of the body, without blocking. The first read of a
    /// request that expects `100 Continue` asks the core to send it.
    pub fn try_read_body(&self, max: usize) -> Result<BodyRead, Gone> {
        self.read_body(max).map(|(read, _)| read)
    }

    /// Like [`Conduit::try_read_body`], and also whether the body is complete
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
        let mut notify = s.inbound.want_body();
        let read = if !s.inbound.body.is_empty() && max > 0 {
            let mut data = Vec::with_capacity(max.min(s.inbound.buffered));
            while data.len() < max {
                let pos = s.inbound.body_pos;
                let Some(front) = s.inbound.body.front_mut() else {
                    break;
                };
                let n = (front.len() - pos).min(max - data.len());
                if pos == 0 && n == front.len() && data.is_empty() {
                    // A whole chunk: hand it over without a copy.
                    data = s.inbound.body.pop_front().expect("a front chunk");
                } else {
                    data.extend_from_slice(&front[pos..pos + n]);
                    if pos + n == front.len() {
                        s.inbound.body.pop_front();
                        s.inbound.body_pos = 0;
                    } else {
                        s.inbound.body_pos += n;
                    }
                }
            }
            notify |= s.inbound.taken(data.len());
            BodyRead::Data(data)
        } else if let Some(file) = s.inbound.spill.as_mut().filter(|_| max > 0) {
            match BufferedBody::read_spill(file, max.min(SPILL_READ)) {
                Ok(data) if !data.is_empty() => BodyRead::Data(data),
                Ok(_) => {
                    s.inbound.spill = None;
                    BodyRead::Eof
                }
                Err(e) => {
                    tracing::warn!("reading a buffered request body back: {e}");
                    return Err(Gone);
                }
            }
        } else if s.inbound.body_end && s.inbound.body.is_empty() && s.inbound.spill.is_none() {
            BodyRead::Eof
        } else {
            s.armed = true;
            BodyRead::Empty
        };
        let complete = s.inbound.body_end && s.inbound.body.is_empty() && s.inbound.spill.is_none();
        drop(s);
        if notify {
            self.notifier.notify();
        }
        Ok((read, complete))
    }

    /// Whether the client has gone or ended its side ([`Conduit::hang_up`]);
    /// if not, arm the app waker so that its departure (or any other change)
    /// wakes the app.
    pub fn watch_gone(&self) -> bool {
        let mut s = self.lock();
        let left = s.gone || s.inbound.hung_up;
        if !left {
            s.armed = true;
        }
        left
    }

    /// Block until body data, its end, or the client's departure.
    pub fn wait_body(&self) {
        let mut s = self.lock();
        if s.inbound.want_body() {
            self.notifier.notify();
        }
        self.wait_while(s, |s| s.inbound.body.is_empty() && !s.inbound.body_end);
    }

    /// The next WebSocket message, without blocking (`None`: wait with
    /// [`Conduit::wait_ws`]). Messages queued before the connection ended
    /// are still delivered, the final [`WsMessage::Disconnect`] included;
    /// `Gone` comes after them. `None` arms the app waker.
    pub fn try_receive_ws(&self) -> Result<Option<WsMessage>, Gone> {
        let mut s = self.lock();
        let Some(message) = s.inbound.ws_in.pop_front() else {
            if s.gone {
                return Err(Gone);
            }
            s.armed = true;
            return Ok(None);
        };
        let notify = !s.gone && s.inbound.taken(message.weight());
        drop(s);
        if notify {
            self.notifier.notify();
        }
        Ok(Some(message))
    }

    /// Block until a WebSocket message or the client's departure.
    pub fn wait_ws(&self) {
        let s = self.lock();
        self.wait_while(s, |s| s.inbound.ws_in.is_empty());
    }

    /// Body bytes read from the client. Returns false when the app has enough
    /// buffered: stop reading until notified.
    pub fn push_body(&self, data: Vec<u8>) -> bool {
        let mut s = self.lock();
        if s.gone || data.is_empty() {
            return true;
        }
        s.inbound.buffered += data.len();
        s.inbound.body.push_back(data);
        self.room_after_push(s)
    }

    /// A WebSocket message from the client. Returns false when the app has
    /// enough buffered: stop reading until notified. A [`WsMessage::Disconnect`]
    /// is queued even after [`Conduit::close`] (it is the app's last word).
    pub fn push_ws(&self, message: WsMessage) -> bool {
        let mut s = self.lock();
        if s.gone && !matches!(message, WsMessage::Disconnect { .. }) {
            return true;
        }
        s.inbound.buffered += message.weight();
        s.inbound.ws_in.push_back(message);
        self.room_after_push(s)
    }

    /// Wake the app for what was just pushed; whether the core may read on.
    fn room_after_push(&self, mut s: MutexGuard<'_, State>) -> bool {
        let armed = self.wake_app(&mut s);
        let room = self.inline || s.inbound.buffered < BODY_HIGH_WATER;
        s.inbound.core_stopped = !room;
        drop(s);
        self.call_app_waker(armed);
        room
    }

    /// The whole body, buffered by the core, and its end (before the app is
    /// called: nothing waits for it, so nobody is woken).
    pub fn push_complete(&self, body: BufferedBody) {
        let mut s = self.lock();
        for chunk in body.memory.into_iter().filter(|c| !c.is_empty()) {
            s.inbound.buffered += chunk.len();
            s.inbound.body.push_back(chunk);
        }
        s.inbound.spill = body.spill;
        s.inbound.spill_len = body.spilled;
        s.inbound.whole = true;
        s.inbound.body_end = true;
    }

    /// The whole body's length, where the app is given the body whole (the
    /// core buffered it, or an inline app runs once it has arrived); None
    /// where it streams, even if it happens to have arrived already, so the
    /// answer does not hang on timing. Only before the app has read any of it
    /// (when its environ is built): reads take from what this counts.
    pub fn complete_body_len(&self) -> Option<u64> {
        let s = self.lock();
        (s.inbound.body_end && (s.inbound.whole || self.inline))
            .then(|| s.inbound.buffered as u64 + s.inbound.spill_len)
    }

    /// The request body is complete.
    pub fn end_body(&self) {
        let mut s = self.lock();
        s.inbound.body_end = true;
        let armed = self.wake_app(&mut s);
        drop(s);
        self.call_app_waker(armed);
    }

    /// Whether the app has taken enough of the body for the core to read more.
    pub fn body_room(&self) -> bool {
        self.inline || self.lock().inbound.buffered < BODY_HIGH_WATER
    }

    /// Whether the app asked for the body of a request expecting `100 Continue`
    /// (answered once: the flag is cleared).
    pub fn take_continue(&self) -> bool {
        let mut s = self.lock();
        if s.inbound.expect == Continue::Wanted {
            s.inbound.expect = Continue::No;
            return true;
        }
        false
    }

    /// The client ended its sending side after the request: an app watching
    /// for its departure ([`Conduit::watch_gone`]) is woken; sends still go out.
    pub fn hang_up(&self) {
        let mut s = self.lock();
        if !s.inbound.hung_up {
            s.inbound.hung_up = true;
            let armed = self.wake_app(&mut s);
            drop(s);
            self.call_app_waker(armed);
        }
    }
}
