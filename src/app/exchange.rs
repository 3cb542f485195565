//! One request's channel between its core thread and the application thread
//! (SKELETON: bodies to be implemented).
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

use std::fs::File;

use crate::backend::Notifier;

/// The answer, piece by piece, as the application produces it.
#[derive(Debug)]
pub enum ResponseEvent {
    Start {
        status: u16,
        headers: Vec<(String, Vec<u8>)>,
    },
    Body(Vec<u8>),
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

pub struct Exchange {
    _notifier: Notifier,
}

impl Exchange {
    /// A new exchange whose core side is woken through `notifier`;
    /// `expect_continue`: the client waits for `100 Continue` before its body.
    pub fn new(notifier: Notifier, inline: bool, expect_continue: bool) -> Self {
        let _ = (inline, expect_continue);
        Exchange {
            _notifier: notifier,
        }
    }

    // ---- the application's side (any thread but the core's, unless inline)

    /// Up to `max` bytes of the body, without blocking. The first read of a
    /// request that expects `100 Continue` asks the core to send it.
    pub fn try_read_body(&self, _max: usize) -> Result<BodyRead, Gone> {
        todo!()
    }
    /// Block until body data, its end, or the client's departure.
    pub fn wait_body(&self) {
        todo!()
    }
    /// Queue an event for the core (waking it only if it had nothing queued).
    pub fn try_send(&self, _event: ResponseEvent) -> Result<Sent, Gone> {
        todo!()
    }
    /// Block until the core has written enough to take more, or the client left.
    pub fn wait_room(&self) {
        todo!()
    }
    pub fn is_gone(&self) -> bool {
        todo!()
    }
    /// Wake the core side (e.g. an app whose queue refused this request has room now).
    pub fn notify(&self) {
        todo!()
    }

    // ---- the core's side

    /// Body bytes read from the client. Returns false when the app has enough
    /// buffered: stop reading until notified.
    pub fn push_body(&self, _data: Vec<u8>) -> bool {
        todo!()
    }
    /// The request body is complete.
    pub fn end_body(&self) {
        todo!()
    }
    /// Whether the app has taken enough of the body for the core to read more.
    pub fn body_room(&self) -> bool {
        todo!()
    }
    /// Take every event the app has queued, in order.
    pub fn take_events(&self, _into: &mut Vec<ResponseEvent>) {
        todo!()
    }
    /// The core wrote `n` bytes of the answer: credit for the app.
    pub fn written(&self, _n: usize) {
        todo!()
    }
    /// Whether the app asked for the body of a request expecting `100 Continue`
    /// (answered once: the flag is cleared).
    pub fn take_continue(&self) -> bool {
        todo!()
    }
    /// The connection is gone: the app's reads end and its sends fail.
    pub fn close(&self) {
        todo!()
    }
}
