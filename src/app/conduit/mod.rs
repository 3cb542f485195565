//! One request's channel between its core thread and the application
//! thread, in two halves as rustls splits its connection: `receive`, what
//! comes in from the client (the body, a buffered body's file, WebSocket
//! messages), and `send`, what goes out to it (the answer's events, the
//! room for them). Here: the lock they share, and the wakes of each side.
//!
//! Nothing here knows Python. Blocking waits ([`Conduit::wait_body`],
//! [`Conduit::wait_room`]) are separate from the non-blocking calls so that a
//! caller holding the GIL can try first and release the GIL only to wait.
//! Flow control both ways: the core stops reading the socket while the app has
//! not taken enough of the body ([`Conduit::push_body`] says so), and the app
//! waits while the core has not written enough of the answer
//! ([`Conduit::try_send`] says so) — a slow client makes the app wait instead
//! of the server buffering without bound. An inline conduit (loop-only shape)
//! has no limits: its app runs on the core thread, which cannot wait for itself.
//!
//! A WebSocket uses the same paths once accepted: the client's messages come
//! in as [`WsMessage`]s ([`Conduit::push_ws`], [`Conduit::try_receive_ws`]),
//! under the same high water as the body, and the app's leave as
//! [`ResponseEvent`]s, counted like body bytes (each message with its frame's
//! header, so even empty ones are held back).
//!
//! State lives under one mutex; a thread-per-request app blocks only in the
//! two waits (a condvar signalled only while someone waits). An async app
//! (ASGI) never blocks: it registers an app waker ([`Conduit::set_app_waker`])
//! and is woken through it — on the core thread, without the GIL — only after
//! one of its non-blocking calls found nothing to do (armed under the lock,
//! so no wake is lost) and the core then made progress for it. The core is
//! notified only on transitions it acts on: its event queue went from empty to non-empty
//! (the end of the answer included), the app wants `100 Continue` sent, or
//! body room freed after the core was told to stop reading. Limits:
//! [`BODY_HIGH_WATER`] of request body buffered, [`RESPONSE_HIGH_WATER`] of
//! answer queued or unwritten (body and file bytes, WebSocket frames; a head,
//! a close or an end is never refused).
//!
//! A body the core buffered in full ([`Conduit::push_complete`]) arrives at
//! once: its memory part as body chunks, the rest as a file the app's reads
//! go on with ([`BufferedBody`](crate::app::BufferedBody)), so no read waits on the client. The file is
//! read on the app thread under the lock: a page-cache read of one chunk,
//! while the core only takes the lock to hand over events and credit.

mod receive;
mod send;
#[cfg(test)]
mod tests;

pub use receive::{BodyRead, WsMessage, BODY_HIGH_WATER};
pub use send::{ResponseEvent, Sent, RESPONSE_HIGH_WATER};

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

use crate::backend::Notifier;
use receive::Inbound;
use send::Outbound;

/// What both sides share, under one lock: a request's two directions and
/// who waits for a change.
#[derive(Debug)]
struct State {
    inbound: Inbound,
    outbound: Outbound,
    gone: bool,
    /// App threads blocked in `wait_body` / `wait_room`: the condvar is
    /// signalled only when someone waits (a signal costs a syscall).
    waiters: usize,
    /// An async app found nothing to do: call the app waker on the next change.
    armed: bool,
}

/// The client has gone (or the connection was closed): nobody will read the answer.
#[derive(Debug, PartialEq, Eq)]
pub struct Gone;

/// Wakes an async application's side of a conduit (called on the core thread).
pub type AppWaker = Arc<dyn Fn() + Send + Sync>;

/// One request's channel between its core and its application thread.
pub struct Conduit {
    notifier: Notifier,
    /// No limits: the app runs on the core thread, which cannot wait for itself.
    inline: bool,
    state: Mutex<State>,
    changed: Condvar,
    app_waker: OnceLock<AppWaker>,
    /// The app's own mark on the call, for [`crate::app::App::timed_out`]
    /// (0: none): the thread that runs it (WSGI), its id (ASGI).
    tag: AtomicU64,
}

impl std::fmt::Debug for Conduit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conduit")
            .field("inline", &self.inline)
            .field("state", &self.state)
            .finish()
    }
}

impl Conduit {
    /// A new conduit whose core side is woken through `notifier`;
    /// `expect_continue`: the client waits for `100 Continue` before its body.
    pub fn new(notifier: Notifier, inline: bool, expect_continue: bool) -> Self {
        Conduit {
            notifier,
            inline,
            state: Mutex::new(State {
                inbound: Inbound::new(expect_continue),
                outbound: Outbound::default(),
                gone: false,
                waiters: 0,
                armed: false,
            }),
            changed: Condvar::new(),
            app_waker: OnceLock::new(),
            tag: AtomicU64::new(0),
        }
    }

    /// Mark the call as the app's `tag` (not 0).
    pub fn set_tag(&self, tag: u64) {
        self.tag.store(tag, std::sync::atomic::Ordering::Relaxed);
    }

    /// The app's mark on the call, if it made one.
    pub fn tag(&self) -> Option<u64> {
        Some(self.tag.load(std::sync::atomic::Ordering::Relaxed)).filter(|&t| t != 0)
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

    /// Block (on the app's side) while `blocked` holds and the client is here.
    fn wait_while(&self, mut s: MutexGuard<'_, State>, blocked: impl Fn(&State) -> bool) {
        s.waiters += 1;
        while !s.gone && blocked(&s) {
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.waiters -= 1;
    }

    pub fn is_gone(&self) -> bool {
        self.lock().gone
    }

    /// Wake the core side (e.g. an app whose queue refused this request has room now).
    pub fn notify(&self) {
        self.notifier.notify();
    }

    /// The connection is gone: the app's reads end and its sends fail.
    pub fn close(&self) {
        let mut s = self.lock();
        if !s.gone {
            s.gone = true;
            s.inbound.clear_body();
            s.outbound.events.clear();
            let armed = self.wake_app(&mut s);
            drop(s);
            self.call_app_waker(armed);
        }
    }
}
