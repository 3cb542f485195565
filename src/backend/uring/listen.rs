//! The listening side of an io_uring core: accepts, the doors that admit
//! them in batches, hand-offs from siblings, and the drain.
//!
//! Every core arms a multishot accept on each shared listener (most servers
//! have one; the ring keeps an accept per listener, and what they accept
//! waits in one queue behind one door), and the kernel completes each
//! accept on the ring whose accept was armed first:
//! accept sharing is what spreads connections (that core hands them to idle
//! siblings). The cost, left as it is: while that core is stuck in a long pass
//! (a view in the loop-only shape), what the kernel accepted on its ring waits
//! for it. The portable backend wakes every core's registration instead, and
//! whichever accepts first serves.
//!
//! Where worker processes share the listener no board spans them: each core
//! arms a single-shot accept instead, re-armed after each completion, which
//! the kernel queues behind the other rings' and so rotates connections among
//! the workers ([`CoreContext::rotate_accepts`](crate::backend::CoreContext::rotate_accepts)).

use std::io;
use std::os::fd::AsFd;
use std::time::Instant;

use m0serve_uring::{recv_now, AcceptState, Completion};

use super::{Conn, Core, Watch, PENDING_CAP, RETRY_HELD_BACK};
use crate::backend::accept::Step;
use crate::backend::guard::Guarded;
use crate::backend::timers::Armed;
use crate::backend::{admit, Accepted, Service, Session};

impl<S: Service> Core<S> {
    /// One batch per door, after the pass's other events.
    pub(super) fn run_doors(&mut self, now: Instant) {
        if self.listen_door.due() {
            let mut door = std::mem::take(&mut self.listen_door);
            door.run(self.ctx.batch, || self.listen_step(now));
            self.listen_door = door;
        }
        if self.ctx.board.has_handoffs(self.ctx.index) {
            self.handoff_door.announce();
        }
        if self.handoff_door.due() {
            let mut door = std::mem::take(&mut self.handoff_door);
            door.run(self.ctx.batch, || {
                match self.ctx.board.take_handoff(self.ctx.index) {
                    // A hand-off carries the sibling's reservation.
                    Some(conn) => {
                        self.admit(conn, true, now);
                        Step::Admitted
                    }
                    None => Step::Empty,
                }
            });
            self.handoff_door = door;
        }
    }

    /// Admit the next pending connection: reserve it, then hand it to a
    /// sibling or serve it here.
    fn listen_step(&mut self, now: Instant) -> Step {
        if self.pending.is_empty() {
            self.refill(now);
        }
        let Some(conn) = self.pending.pop_front() else {
            return Step::Empty;
        };
        if !self.ctx.control.try_reserve() {
            self.pending.push_front(conn);
            return Step::Blocked;
        }
        if let Some(conn) = admit::place(&self.ctx, conn) {
            self.admit(conn, false, now);
        }
        Step::Admitted
    }

    /// The pending queue ran dry inside a batch: take the accepts the kernel
    /// completed since the pass began, as an accept on a readiness backend
    /// would until EAGAIN. Without this a batch ends where the pass's reaping
    /// did, and draining (`M0_ACCEPT_BATCH=0`) would not drain: the batch rule
    /// would hold whatever the knob said. The other completions reaped here
    /// wait for the next pass, so the batch still runs after the events this
    /// pass already saw.
    ///
    /// A single-shot accept ([`CoreContext::rotate_accepts`](crate::backend::CoreContext::rotate_accepts)) ended with the
    /// completion that filled the queue: it is armed again here, and one that
    /// finds the backlog non-empty completes inside the submit.
    fn refill(&mut self, now: Instant) {
        if self.ctx.rotate_accepts
            && self.any_accept(|state| state == AcceptState::Idle)
            && (!self.wants_accept(now) || self.arm_idle_accepts().is_err())
        {
            return;
        }
        if !self.any_accept(|state| state == AcceptState::Armed) || self.ring.submit().is_err() {
            return;
        }
        let mut reaped = std::mem::take(&mut self.completions);
        self.ring.complete(&mut reaped);
        for c in reaped.drain(..) {
            match c {
                Completion::Accepted { .. } => self.on_completion(c, now),
                other => self.deferred.push(other),
            }
        }
        self.completions = reaped;
    }

    /// Keep the multishot accept armed while connections can be taken, and
    /// cancelled (connections wait in the kernel backlog) while they cannot.
    /// A single-shot accept on a shared listener is only not armed again:
    /// the one connection it may still take waits in `pending`.
    pub(super) fn steer_accept(&mut self, now: Instant) -> io::Result<()> {
        let wanted = self.wants_accept(now);
        for i in 0..self.ctx.listeners.len() {
            match (wanted, self.ring.accept_state(i)) {
                // Also the re-arm after a completion without F_MORE (every
                // completion of a single-shot accept).
                (true, AcceptState::Idle) => {
                    self.arm_accept(i)?;
                }
                // A single-shot accept is left to complete: cancelling it can lose
                // a wake-up meant for a sibling worker ([`Core::take_absorbed`]);
                // what it takes waits in `pending`, and it is not armed again.
                (false, AcceptState::Armed) if !self.ctx.rotate_accepts => {
                    self.ring.cancel_accept(i)?
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Whether any listener's accept stands as `is` asks.
    pub(super) fn any_accept(&self, is: impl Fn(AcceptState) -> bool) -> bool {
        (0..self.ctx.listeners.len()).any(|i| is(self.ring.accept_state(i)))
    }

    /// Take a connection stranded in a shared listener's queue, once per
    /// [`CoreContext::recheck`](crate::backend::CoreContext::recheck) period in which this core's armed accept took
    /// nothing: a sibling's ring that will never run its accept (its worker
    /// was killed) keeps the kernel's one wake-up for a connection, so no
    /// live accept is woken for it ([`accept::RECHECK`](crate::backend::accept::RECHECK)). Under load the
    /// accept completes and nothing is looked at; an idle core pays one
    /// non-blocking accept per period. One a sibling was also woken for
    /// costs that sibling an accept that finds nothing.
    pub(super) fn recheck(&mut self, now: Instant) {
        let (Some(every), Some(at)) = (self.ctx.recheck, self.recheck_at) else {
            return;
        };
        if now < at {
            return;
        }
        self.recheck_at = Some(now + every);
        if std::mem::take(&mut self.accepted_lately) || !self.wants_accept(now) {
            return;
        }
        for i in 0..self.ctx.listeners.len() {
            if self.ring.accept_state(i) != AcceptState::Armed {
                continue;
            }
            if let Some(conn) = self.accept_now(i, "on recheck") {
                tracing::debug!(core = self.ctx.index, "took a stranded connection");
                self.pending.push_back(conn);
                self.listen_door.announce();
            }
        }
    }

    /// One non-blocking accept on listener `i`, outside the ring: a
    /// connection queued there, if any (an error is only logged, `when`).
    fn accept_now(&self, i: usize, when: &str) -> Option<Accepted> {
        match admit::accept(self.ctx.listeners[i].as_fd()) {
            Ok(fd) => Some(Accepted { fd, listener: i }),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
            Err(e) => {
                tracing::debug!(core = self.ctx.index, "accept {when}: {e}");
                None
            }
        }
    }

    /// Whether an accept should be armed: the door is not blocked at the
    /// connection limit, no accept error is being waited out, a slot is free
    /// and no sibling worker holds fewer connections (looked at again after
    /// [`RETRY_HELD_BACK`], see [`crate::ipc::tally`]), and the pending queue has room.
    fn wants_accept(&mut self, now: Instant) -> bool {
        if self.accept_paused_until.is_some_and(|t| now >= t) {
            self.accept_paused_until = None;
        }
        if self.accept_paused_until.is_none() && !self.ctx.control.may_accept() {
            self.accept_paused_until = Some(now + RETRY_HELD_BACK);
        }
        !self.listen_door.blocked()
            && self.accept_paused_until.is_none()
            && self.pending.len() < PENDING_CAP
    }

    fn arm_accept(&mut self, i: usize) -> io::Result<bool> {
        let listener = self.ctx.listeners[i].as_fd();
        if self.ctx.rotate_accepts {
            self.ring.arm_accept_once(i, listener)
        } else {
            self.ring.arm_accept(i, listener)
        }
    }

    /// Arm the accept of every listener that has none in flight.
    fn arm_idle_accepts(&mut self) -> io::Result<()> {
        for i in 0..self.ctx.listeners.len() {
            if self.ring.accept_state(i) == AcceptState::Idle {
                self.arm_accept(i)?;
            }
        }
        Ok(())
    }

    /// Serve `conn` on this core: open its session and read eagerly.
    pub(super) fn admit(&mut self, conn: Accepted, handed: bool, now: Instant) {
        let Accepted { fd, listener } = conn;
        let Some(peer) = admit::begin(&self.ctx, fd.as_fd(), handed) else {
            return;
        };
        let (service, ctx, draining) = (&mut self.service, &self.ctx, self.draining);
        let key = self.conns.insert_with(|key| {
            let mut session = Guarded::open(|| service.open(&peer, listener, ctx.notifier(key)));
            if draining {
                session.on_shutdown();
            }
            Conn {
                fd,
                session,
                reading: false,
                wbuf: Some(Vec::new()),
                eof: false,
                watch: Watch::Idle,
                closing: false,
                linger: None,
                ktls: false,
                armed: Armed::default(),
            }
        });
        // The eager read: a request that came with the connection is served
        // now, inside this batch (which is why the batch is bounded).
        let conn = self.conns.get_mut(key).expect("just inserted");
        let mut read = false;
        if conn.session.wants_read() {
            let buf = &mut self.scratch;
            match recv_now(conn.fd.as_fd(), buf) {
                Ok(0) => {
                    conn.eof = true;
                    conn.session.on_eof(now);
                }
                Ok(n) => {
                    conn.session.on_read(&buf[..n], now);
                    read = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => self.close(key),
            }
        }
        self.drive(key);
        if read {
            // Put the answer on the wire now, not after the rest of the batch.
            let _ = self.ring.submit();
        }
    }

    /// Shutdown began: stop accepting, keep the promise to connections handed
    /// over, answer the ones accepted but not admitted yet (once, with
    /// `Connection: close`: with workers the queue they came from is shared,
    /// and a sibling would have served them), and let every session finish.
    pub(super) fn begin_drain(&mut self, now: Instant) {
        self.draining = true;
        for i in 0..self.ctx.listeners.len() {
            if let Err(e) = self.ring.cancel_accept(i) {
                tracing::warn!(core = self.ctx.index, "cancelling an accept failed: {e}");
            }
        }
        for key in self.conns.keys() {
            if let Some(conn) = self.conns.get_mut(key) {
                // A lingering one's session is done; its linger time bounds it.
                if !conn.closing && conn.linger.is_none() {
                    conn.session.on_shutdown();
                }
            }
            self.drive(key);
        }
        // Handed over with a reservation: admitted (admit calls on_shutdown).
        while let Some(conn) = self.ctx.board.take_handoff(self.ctx.index) {
            self.admit(conn, true, now);
        }
        // Accepted but not yet admitted: answered once, like those above.
        while let Some(conn) = self.pending.pop_front() {
            self.admit_draining(conn, now);
        }
        self.listen_door.clear();
        self.handoff_door.clear();
    }

    /// The drain cancelled a single-shot accept on listener `i`, shared with
    /// sibling workers: take one queued connection, if any, in place of the
    /// wake-up the accept may have absorbed.
    ///
    /// Accept waits on a listener are exclusive: the kernel wakes one waiter
    /// per new connection. When the cancel lands after that wake-up but
    /// before the accept ran (which, with DEFER_TASKRUN, waits for this
    /// core's next wait), the accept ends cancelled, the connection stays
    /// queued, and no sibling is woken for it: it would wait for the next
    /// client to arrive. One wake-up is at stake, so one connection is taken;
    /// one a sibling was also woken for costs that sibling an empty accept.
    pub(super) fn take_absorbed(&mut self, i: usize, now: Instant) {
        if let Some(conn) = self.accept_now(i, "after the drain's cancel") {
            self.admit_draining(conn, now);
        }
    }

    /// Admit a connection accepted after the drain began (its session is told
    /// of the shutdown at once); at the connection limit it is closed.
    pub(super) fn admit_draining(&mut self, conn: Accepted, now: Instant) {
        if self.ctx.control.try_reserve() {
            self.admit(conn, false, now);
        }
    }
}
