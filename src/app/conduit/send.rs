//! The outbound half of a [`Conduit`]: the answer's events from the app to
//! the core, and the room the app's sends are held to
//! ([`RESPONSE_HIGH_WATER`]), credited as the core writes.

use std::fs::File;

use bytes::Bytes;

use super::{Conduit, Gone};
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
    /// Trailer fields after the body (ASGI's `http.response.trailers`);
    /// `End` follows. HTTP/2 sends them; HTTP/1.1 drops them.
    Trailers(Fields),
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

/// What [`Conduit::try_send`] did with an event.
#[derive(Debug)]
pub enum Sent {
    Queued,
    /// Too much of the answer is waiting for the client: wait with
    /// [`Conduit::wait_room`], then send this event again.
    Full(ResponseEvent),
}

/// Answer bytes queued or unwritten past which the app's sends are refused.
pub const RESPONSE_HIGH_WATER: usize = 512 * 1024;

/// The outbound half of the shared state.
#[derive(Debug, Default)]
pub(super) struct Outbound {
    pub(super) events: Vec<ResponseEvent>,
    /// Answer bytes sent by the app and not yet written by the core.
    unwritten: usize,
}

impl Conduit {
    /// Give the conduit an empty vector (with room) for the app's events:
    /// the session's own, which [`Conduit::take_events`] swaps back.
    pub fn lending(mut self, events: Vec<ResponseEvent>) -> Self {
        debug_assert!(events.is_empty(), "lent a vector with events in it");
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        state.outbound.events = events;
        self
    }

    /// Queue an event for the core (waking it only if it had nothing queued).
    pub fn try_send(&self, event: ResponseEvent) -> Result<Sent, Gone> {
        let mut s = self.lock();
        if s.gone {
            return Err(Gone);
        }
        let size = event.counted();
        // Only what carries bytes waits: a head or the end is never refused.
        if !self.inline && size > 0 && s.outbound.unwritten >= RESPONSE_HIGH_WATER {
            s.armed = true;
            return Ok(Sent::Full(event));
        }
        s.outbound.unwritten = s.outbound.unwritten.saturating_add(size);
        let first = s.outbound.events.is_empty();
        s.outbound.events.push(event);
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
        self.wait_while(s, |s| s.outbound.unwritten >= RESPONSE_HIGH_WATER);
    }

    /// Take every event the app has queued, in order.
    pub fn take_events(&self, into: &mut Vec<ResponseEvent>) {
        let mut s = self.lock();
        if into.is_empty() {
            // The app's vector itself, and `into`'s room for the app's next
            // events: no allocation and no copy on either side.
            std::mem::swap(into, &mut s.outbound.events);
        } else {
            into.append(&mut s.outbound.events);
        }
    }

    /// The core wrote `n` bytes of the answer: credit for the app.
    pub fn written(&self, n: usize) {
        let mut s = self.lock();
        let was_full = s.outbound.unwritten >= RESPONSE_HIGH_WATER;
        s.outbound.unwritten = s.outbound.unwritten.saturating_sub(n);
        if was_full && s.outbound.unwritten < RESPONSE_HIGH_WATER {
            let armed = self.wake_app(&mut s);
            drop(s);
            self.call_app_waker(armed);
        }
    }
}
