//! The panic boundary around each connection's [`Session`].
//!
//! A core thread serves thousands of connections; a bug that one input
//! reaches (a panic in the protocol, a route, the glue) must cost that one
//! connection, never the core and every connection on it. Both backends hold
//! their sessions as [`Guarded`], which runs every callback under
//! `catch_unwind`: after a panic the session is dropped (itself under
//! `catch_unwind`), logged, and reports itself done with nothing to write,
//! so the backend closes the socket as it closes any finished connection.
//!
//! Unwinding out of a session is sound to stop here: the session is never
//! touched again, and what it shared with other threads (an app's conduit)
//! is released by its drop, as for a connection that closed.

use std::any::Any;
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::time::Instant;

use bytes::Bytes;

use super::{Output, Session};

/// A [`Session`] whose panics close its connection instead of unwinding
/// into the backend's loop.
pub struct Guarded<S> {
    /// None once dropped after a panic.
    inner: Option<S>,
    /// A callback panicked (set from `&self` callbacks too).
    panicked: Cell<bool>,
}

impl<S: Session> Guarded<S> {
    /// Guards the session `open` makes; a panic while making it gives a
    /// session that is done at once.
    pub fn open(open: impl FnOnce() -> S) -> Self {
        match panic::catch_unwind(AssertUnwindSafe(open)) {
            Ok(session) => Guarded {
                inner: Some(session),
                panicked: Cell::new(false),
            },
            Err(payload) => {
                report(&*payload, "opening");
                Guarded {
                    inner: None,
                    panicked: Cell::new(true),
                }
            }
        }
    }

    /// Runs a mutating callback; after a panic (this one or an earlier one,
    /// maybe from a `&self` callback), drops the session.
    fn call(&mut self, what: &str, f: impl FnOnce(&mut S)) {
        if let (Some(session), false) = (self.inner.as_mut(), self.panicked.get()) {
            if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| f(session))) {
                report(&*payload, what);
                self.panicked.set(true);
            }
        }
        if self.panicked.get() {
            self.drop_inner();
        }
    }

    /// Runs a `&self` query; `dead` is the answer once the session panicked.
    fn ask<R>(&self, what: &str, dead: R, f: impl FnOnce(&S) -> R) -> R {
        let Some(session) = self.inner.as_ref().filter(|_| !self.panicked.get()) else {
            return dead;
        };
        match panic::catch_unwind(AssertUnwindSafe(|| f(session))) {
            Ok(answer) => answer,
            Err(payload) => {
                report(&*payload, what);
                self.panicked.set(true);
                dead
            }
        }
    }
}

impl<S> Guarded<S> {
    fn drop_inner(&mut self) {
        if let Some(session) = self.inner.take() {
            if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| drop(session))) {
                report(&*payload, "dropping");
            }
        }
    }
}

/// The message a panic was raised with, when it has one (`panic!` with a
/// literal or a formatted string).
pub fn panic_message(payload: &(dyn Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

/// One log line for a caught panic (the panic hook has already printed where).
fn report(payload: &(dyn Any + Send), what: &str) {
    let message = panic_message(payload).unwrap_or("(no message)");
    tracing::error!(
        "a connection's session panicked while {what}: {message}; closing that connection"
    );
}

impl<S: Session> Session for Guarded<S> {
    fn on_read(&mut self, data: &[u8], now: Instant) {
        self.call("reading", |s| s.on_read(data, now));
    }

    fn on_eof(&mut self, now: Instant) {
        self.call("reading", |s| s.on_eof(now));
    }

    fn on_hangup(&mut self, now: Instant) {
        self.call("reading", |s| s.on_hangup(now));
    }

    fn output(&mut self) -> Output<'_> {
        if self.panicked.get() {
            self.drop_inner();
            return Output::None;
        }
        let Some(session) = self.inner.as_mut() else {
            return Output::None;
        };
        // The borrow of `inner` is returned; only the Cell is touched on a panic.
        match panic::catch_unwind(AssertUnwindSafe(move || {
            let session = session; // moved in: the closure is FnOnce, its borrow returned
            session.output()
        })) {
            Ok(output) => output,
            Err(payload) => {
                report(&*payload, "writing");
                self.panicked.set(true);
                Output::None
            }
        }
    }

    fn on_sent(&mut self, n: usize, now: Instant) {
        self.call("writing", |s| s.on_sent(n, now));
    }

    fn kernel_tls(&mut self) -> Option<super::ktls::Keys> {
        let mut keys = None;
        self.call("writing", |s| keys = s.kernel_tls());
        keys
    }

    fn lend_output(&mut self) -> Option<(Bytes, usize)> {
        let mut lent = None;
        self.call("writing", |s| lent = s.lend_output());
        lent
    }

    fn on_sent_lent(&mut self, buf: Bytes, n: usize, now: Instant) {
        self.call("writing", |s| s.on_sent_lent(buf, n, now));
    }

    fn wants_read(&self) -> bool {
        self.ask("reading", false, |s| s.wants_read())
    }

    fn done(&self) -> bool {
        self.ask("closing", true, |s| s.done())
    }

    fn aborted(&self) -> bool {
        self.ask("closing", true, |s| s.aborted())
    }

    fn deadline(&self) -> Option<Instant> {
        self.ask("timing", None, |s| s.deadline())
    }

    fn on_deadline(&mut self, now: Instant) {
        self.call("timing out", |s| s.on_deadline(now));
    }

    fn idle(&self) -> bool {
        self.ask("closing", true, |s| s.idle())
    }

    fn on_shutdown(&mut self) {
        self.call("shutting down", |s| s.on_shutdown());
    }

    fn on_notify(&mut self, now: Instant) {
        self.call("notified", |s| s.on_notify(now));
    }

    fn linger(&self) -> super::Linger {
        self.ask("closing", super::Linger::No, |s| s.linger())
    }
}

impl<S> Drop for Guarded<S> {
    fn drop(&mut self) {
        self.drop_inner();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Panics in whichever callback `at` names.
    struct Bomb {
        at: &'static str,
        dropped: std::rc::Rc<Cell<bool>>,
    }

    impl Drop for Bomb {
        fn drop(&mut self) {
            self.dropped.set(true);
        }
    }

    impl Session for Bomb {
        fn on_read(&mut self, _: &[u8], _: Instant) {
            assert_ne!(self.at, "read", "boom");
        }
        fn on_eof(&mut self, _: Instant) {}
        fn output(&mut self) -> Output<'_> {
            assert_ne!(self.at, "output", "boom");
            Output::Bytes(b"x")
        }
        fn on_sent(&mut self, _: usize, _: Instant) {}
        fn wants_read(&self) -> bool {
            assert_ne!(self.at, "wants_read", "boom");
            true
        }
        fn done(&self) -> bool {
            false
        }
        fn deadline(&self) -> Option<Instant> {
            None
        }
        fn on_deadline(&mut self, _: Instant) {}
        fn idle(&self) -> bool {
            false
        }
        fn on_shutdown(&mut self) {}
        fn on_notify(&mut self, _: Instant) {}
    }

    fn bomb(at: &'static str) -> (Guarded<Bomb>, std::rc::Rc<Cell<bool>>) {
        let dropped = std::rc::Rc::new(Cell::new(false));
        let d = dropped.clone();
        (Guarded::open(move || Bomb { at, dropped: d }), dropped)
    }

    #[test]
    fn a_quiet_session_is_passed_through() {
        let (mut g, dropped) = bomb("never");
        g.on_read(b"hi", Instant::now());
        assert!(matches!(g.output(), Output::Bytes(b"x")));
        assert!(g.wants_read() && !g.done() && !g.idle());
        drop(g);
        assert!(dropped.get());
    }

    #[test]
    fn a_panic_in_any_callback_leaves_a_dropped_done_session() {
        for at in ["read", "output", "wants_read"] {
            let (mut g, dropped) = bomb(at);
            g.on_read(b"hi", Instant::now());
            let _ = g.output();
            let _ = g.wants_read();
            // Whatever panicked, the session is finished and says so.
            assert!(g.done(), "{at}");
            assert!(!g.wants_read(), "{at}");
            assert!(matches!(g.output(), Output::None), "{at}");
            assert!(g.idle() && g.deadline().is_none(), "{at}");
            // Dropped at the first mutating call after the panic, not at the end.
            assert!(dropped.get(), "{at}");
        }
    }

    #[test]
    fn a_panic_while_opening_is_a_done_session() {
        let g: Guarded<Bomb> = Guarded::open(|| panic!("no session"));
        assert!(g.done() && !g.wants_read());
    }
}
