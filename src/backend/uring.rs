//! The io_uring backend: one [`Ring`] per core thread, driving [`Session`]s.
//!
//! A pass: reap completions (accepts only fill the pending queue and announce
//! the listener door; recv/send/file reads feed their sessions), fire expired
//! deadlines, then take at most one batch per door ([`super::accept`]), steer
//! the multishot accept (armed below the connection limit, cancelled at it),
//! arm the timer for the next deadline, and submit: waiting for a completion
//! unless a batch is owed or a hand-off arrived ([`super::share::Board::park`]).
//!
//! Every core arms a multishot accept on the one shared listener, and the
//! kernel completes each accept on the ring whose accept was armed first:
//! accept sharing is what spreads connections (that core hands them to idle
//! siblings). The cost, left as it is: while that core is stuck in a long pass
//! (a view in the loop-only shape), what the kernel accepted on its ring waits
//! for it. The portable backend wakes every core's registration instead, and
//! whichever accepts first serves.
//!
//! Where worker processes share the listener no board spans them: each core
//! arms a single-shot accept instead, re-armed after each completion, which
//! the kernel queues behind the other rings' and so rotates connections among
//! the workers ([`CoreContext::rotate_accepts`]).
//!
//! Reads land in the ring's pool of receive buffers ([`Ring::recv`]), which
//! the kernel takes from only when bytes arrive: a connection waiting for
//! its next request holds no read buffer, and the one a completion lends is
//! given back as soon as the session has taken its bytes. A recv is armed
//! only while the session wants input, one at a time (no multishot): a
//! multishot recv keeps pulling bytes out of the socket while an app holds
//! the request, which would make this side hold a pipelining client's bytes
//! (up to the kernel's 32 retries' worth of buffers per wake-up) where today
//! the socket's receive window holds them, bounded by the kernel.
//!
//! The ring owns a buffer while the kernel sends from it. A large piece of
//! output (a body piece the session queued as it came) is lent by the
//! session for that long ([`Session::lend_output`]) and sent straight from
//! it, whole: a 256 KiB answer is then one send and no copy in user space,
//! where copying it 16 KiB at a time cost a copy, a send and a pass per
//! 16 KiB (half of the portable backend's throughput). Other writes copy
//! the session's bytes into a write buffer, taken from the core's spares
//! for each response and returned once the output is drained, so an idle
//! connection holds none.
//! [`Output::File`] goes out by `sendfile(2)`, made on the core thread
//! outside the ring as the portable backend makes it: the page cache's
//! bytes go to the socket with no copy through user space and no buffer
//! held. When the socket is full, a writable poll
//! ([`Ring::watch_writable`]) stands in for the write in flight. A read
//! through the ring into a 16 KiB buffer and a send of it, as before, served
//! a 1 MiB file at half the portable backend's rate (two copies and a pass
//! per 16 KiB). Like the portable backend, a file not in the page cache
//! makes the core wait for the disk; static files are small and hot, and
//! splice through the ring would need a pipe per connection and two linked
//! operations per chunk.
//!
//! A connection with no recv armed (its session does not want input: an app
//! holds its request) would not see its client leave until it wrote. While
//! it is open and not reading, a hang-up poll ([`Ring::watch_hangup`]) stands
//! in for the recv, with the portable backend's rule: a reset (`POLLERR`,
//! `POLLHUP`) closes the connection at once, so the session (and an app
//! holding its request) learns the client is gone; a FIN alone (`POLLRDHUP`)
//! is a half-close that still wants its answer, and unread requests may come
//! before it, so the session reads it in order, when it reads again, and is
//! only told of it at once ([`Session::on_hangup`]). The
//! poll stays armed once the session reads again (re-arming per request would
//! cost two operations a request) and is not armed again after a FIN.
//!
//! A connection closes by `shutdown(SHUT_RDWR)`, which ends its in-flight
//! recv; its slot and fd are freed once no operation of it is in flight, so a
//! completion never names a reused fd. One whose peer may still be sending
//! lingers first ([`super::linger`]): half-closed, with one recv at a time
//! armed whose bytes go straight back to the pool, until the peer's end of
//! input or a quiet spell.

use std::collections::VecDeque;
use std::io;
use std::net::Shutdown;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Instant;

use m0serve_uring::{
    recv_now, AcceptState, Completion, Config, Hangup, Op, Received, Ring, Token, Waker,
};
use socket2::SockRef;

use super::accept::{self, Door, Step, RETRY_BLOCKED};
use super::admit;
use super::guard::Guarded;
use super::linger::Lingering;
use super::slab::{Key, Slab};
use super::timers::{Armed, Timers};
use super::{sendfile, Accepted, CoreContext, Output, Service, Session, Wake};

/// The most one recv (or the admission's eager read) takes.
const READ_BUF: usize = 16 * 1024;
/// The most one send of copied bytes moves.
const WRITE_BUF: usize = 16 * 1024;

/// File bytes one connection may `sendfile` in one write before the pass
/// moves on to other connections (its writable poll brings it back).
const FILE_TURN: usize = 1 << 20;
/// Accepted connections waiting for admission beyond this stop the multishot:
/// the rest wait in the kernel's backlog rather than in our memory.
const PENDING_CAP: usize = 1024;
/// How soon a core held back by a sibling worker's fewer connections looks again.
const RETRY_HELD_BACK: std::time::Duration = std::time::Duration::from_millis(1);
/// Freed buffers kept for the next connections.
const SPARE_BUFS: usize = 64;

/// Serve on this core until shutdown completes (or its deadline passes).
pub fn run<S: Service>(ctx: CoreContext, service: S) -> io::Result<()> {
    // This thread pays the wakes it defers before each wait.
    super::pass_end::enter_core();
    let ring = Ring::new(Config {
        recv_buf_size: READ_BUF,
        ..Config::default()
    })?;
    ctx.board
        .set_waker(ctx.index, Box::new(RingWake(ring.waker())));
    let mut core = Core {
        service,
        ring,
        conns: Slab::default(),
        timers: Timers::default(),
        pending: VecDeque::new(),
        listen_door: Door::default(),
        handoff_door: Door::default(),
        accept_paused_until: None,
        keep_armed: ctx.rotate_accepts && accept::keep_armed(),
        recheck_at: ctx.recheck.map(|every| Instant::now() + every),
        accepted_lately: false,
        draining: false,
        completions: Vec::new(),
        deferred: Vec::new(),
        spare: Vec::new(),
        scratch: vec![0; READ_BUF],
        ctx,
    };
    let served = core.serve();
    core.close_all();
    served
}

/// Siblings wake this core through the ring's eventfd.
struct RingWake(Waker);

impl Wake for RingWake {
    fn wake(&self) {
        self.0.wake();
    }
}

/// One connection this core owns.
struct Conn<T> {
    fd: OwnedFd,
    session: T,
    /// A recv is in flight.
    reading: bool,
    /// The write buffer; `None` while a send holds it or a writable poll
    /// stands in for a write, empty (no allocation) between writes.
    wbuf: Option<Vec<u8>>,
    /// The send in flight is from a buffer the session lent
    /// ([`Session::lend_output`]): it goes back to the session.
    lent: bool,
    /// The peer closed its side: never read again (a recv would return 0 at once).
    eof: bool,
    /// The hang-up poll watching for the peer leaving while no recv is armed.
    watch: Watch,
    /// Shut down; the slot is freed once nothing is in flight.
    closing: bool,
    /// Lingering: half-closed, its input dropped ([`super::linger`]).
    linger: Option<Lingering>,
    /// Its entry in the deadline heap.
    armed: Armed,
}

/// Where a connection's hang-up poll stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Watch {
    /// None armed: one is armed while the connection is not reading.
    Idle,
    Armed,
    /// The FIN came (or the poll failed): the poll would fire at once, so none is armed again.
    Done,
}

impl<T> Conn<T> {
    fn in_flight(&self) -> bool {
        self.reading || self.wbuf.is_none() || self.watch == Watch::Armed
    }
}

struct Core<S: Service> {
    ctx: CoreContext,
    service: S,
    ring: Ring,
    conns: Slab<Conn<Guarded<S::Session>>>,
    /// Session deadlines by slot (lazy deletion: see [`Timers`]).
    timers: Timers,
    /// Accepted by the multishot, not yet admitted (not reserved either).
    pending: VecDeque<OwnedFd>,
    listen_door: Door,
    handoff_door: Door,
    /// An accept error (EMFILE...) pauses the multishot until then.
    accept_paused_until: Option<Instant>,
    /// A single-shot accept (shared listener) is never cancelled but by the
    /// drain, whose cancel is made up for ([`Core::take_absorbed`]).
    keep_armed: bool,
    /// Where the listener is shared, when this core next looks at it itself
    /// ([`Core::recheck`]), and whether its accept took a connection since
    /// it last looked.
    recheck_at: Option<Instant>,
    accepted_lately: bool,
    /// Graceful shutdown began.
    draining: bool,
    completions: Vec<Completion>,
    /// Completions reaped mid-batch by [`Core::refill`], handled first next pass.
    deferred: Vec<Completion>,
    /// Write buffers not in use, for the next responses.
    spare: Vec<Vec<u8>>,
    /// The admission's eager read lands here.
    scratch: Vec<u8>,
}

impl<S: Service> Core<S> {
    fn serve(&mut self) -> io::Result<()> {
        let index = self.ctx.index;
        loop {
            self.ctx.board.begin_pass(index);
            let mut completions = std::mem::take(&mut self.completions);
            completions.append(&mut self.deferred);
            self.ring.complete(&mut completions);
            let now = Instant::now();
            for c in completions.drain(..) {
                self.on_completion(c, now);
            }
            self.completions = completions;
            self.expire_deadlines(now);
            self.notified(now);

            if self.ctx.control.shutting_down() {
                if !self.draining {
                    self.begin_drain(now);
                }
                // A sibling may hand over a connection it admitted just before it saw the shutdown.
                while let Some(Accepted { fd }) = self.ctx.board.take_handoff(index) {
                    self.admit(fd, true, now);
                }
                let expired = self.ctx.control.deadline().is_some_and(|d| now >= d);
                // Not before the accept's cancel has landed: a connection it
                // completed meanwhile is still to be answered.
                let accepting = self.ring.accept_state() != AcceptState::Idle;
                if (self.conns.is_empty() && !accepting) || expired {
                    return Ok(());
                }
            } else {
                self.recheck(now);
                self.run_doors(now);
                self.steer_accept(now)?;
            }

            self.arm_timer(now)?;
            super::pass_end::pay();
            let owed =
                self.listen_door.owed() || self.handoff_door.owed() || !self.deferred.is_empty();
            if !owed && self.ctx.board.park(index) {
                self.ring.submit_and_wait()?;
            } else {
                self.ring.submit()?;
            }
        }
    }

    fn on_completion(&mut self, c: Completion, now: Instant) {
        match c {
            Completion::Accepted { result, .. } => match result {
                Ok(fd) if !self.draining => {
                    self.accepted_lately = true;
                    self.pending.push_back(fd);
                    self.listen_door.announce();
                }
                // The multishot accept took it before its cancel landed: the
                // kernel queue it came from is shared with sibling workers
                // (or was refused to new clients), so it is this core's to
                // answer, once, with `Connection: close`.
                Ok(fd) => self.admit_draining(fd, now),
                Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => {
                    if self.draining && self.keep_armed {
                        self.take_absorbed(now);
                    }
                }
                // The listener was shut at the drain's start.
                Err(_) if self.ctx.control.shutting_down() => {}
                Err(e) => {
                    // EMFILE and the like: trying harder will not cure it.
                    tracing::warn!(core = self.ctx.index, "accept failed: {e}");
                    self.accept_paused_until = Some(now + RETRY_BLOCKED);
                }
            },
            Completion::Received { token, result } => self.on_received(key(token), result, now),
            Completion::Sent { token, buf, result } => self.on_sent(key(token), buf, result, now),
            Completion::Writable { token, result } => self.on_writable(key(token), result),
            Completion::Hangup { token, result } => self.on_hangup(key(token), result),
            // Their work (deadlines, hand-offs, shutdown) is looked at every pass.
            Completion::Timer | Completion::Woken => {}
        }
    }

    fn on_received(&mut self, key: Key, result: io::Result<Received>, now: Instant) {
        let Some(conn) = self.conns.get_mut(key) else {
            if let Ok(received) = result {
                self.ring.give_back(received);
            }
            return;
        };
        conn.reading = false;
        match result {
            Ok(received) if conn.closing => self.ring.give_back(received),
            // Lingering: the bytes are dropped; the end of input closes it.
            Ok(received) if conn.linger.is_some() => {
                if received.is_empty() {
                    conn.eof = true;
                    self.close(key);
                } else if let Some(l) = &mut conn.linger {
                    l.heard(now);
                }
                self.ring.give_back(received);
            }
            Ok(received) => {
                if received.is_empty() {
                    conn.eof = true;
                    conn.session.on_eof(now);
                } else {
                    conn.session.on_read(self.ring.bytes(&received), now);
                }
                self.ring.give_back(received);
            }
            // Every receive buffer was out when the bytes came (the pool has
            // grown since): they wait in the socket for the recv armed again.
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
            Err(_) if conn.closing => {}
            Err(e) => {
                tracing::debug!(core = self.ctx.index, "recv failed: {e}");
                self.close(key);
            }
        }
        self.drive(key);
    }

    fn on_sent(&mut self, key: Key, buf: Vec<u8>, result: io::Result<usize>, now: Instant) {
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        let lent = if std::mem::take(&mut conn.lent) {
            conn.wbuf = Some(Vec::new());
            Some(buf)
        } else {
            conn.wbuf = Some(buf);
            None
        };
        if !conn.closing {
            match result {
                Ok(n) if n > 0 => match lent {
                    Some(buf) => conn.session.on_sent_lent(buf, n, now),
                    None => conn.session.on_sent(n, now),
                },
                // A send of a non-empty buffer that moves nothing would repeat forever.
                Ok(_) => self.close(key),
                Err(e) => {
                    tracing::debug!(core = self.ctx.index, "send failed: {e}");
                    self.close(key);
                }
            }
        }
        self.drive(key);
    }

    /// The socket a file's `sendfile` found full has room again (a failed
    /// poll closes the connection).
    fn on_writable(&mut self, key: Key, result: io::Result<()>) {
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        conn.wbuf = Some(Vec::new());
        if result.is_err() && !conn.closing {
            tracing::debug!(core = self.ctx.index, "writable poll failed");
            self.close(key);
        }
        self.drive(key);
    }

    /// The hang-up poll fired: a reset closes the connection (the session,
    /// and an app holding its request, learn the client is gone); a FIN stops
    /// the watch and is told to the session (see the module doc).
    fn on_hangup(&mut self, key: Key, result: io::Result<Hangup>) {
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        conn.watch = Watch::Done;
        match result {
            // Lingering, both sides shut is the peer's FIN after ours: the
            // recv reads what came before it, then the end.
            Ok(Hangup { gone: true, .. }) if !conn.closing && conn.linger.is_none() => {
                tracing::debug!(core = self.ctx.index, "the peer reset the connection");
                self.close(key);
            }
            Ok(_) if !conn.closing && conn.linger.is_none() => {
                conn.session.on_hangup(Instant::now())
            }
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => {}
            Err(e) => tracing::debug!(core = self.ctx.index, "hang-up poll failed: {e}"),
        }
        self.drive(key);
    }

    /// Call `on_deadline` on every session whose armed deadline has passed.
    fn expire_deadlines(&mut self, now: Instant) {
        // Collected first: a session that keeps a past deadline is looked at
        // again next pass, not in a loop inside this one.
        let expired: Vec<_> = std::iter::from_fn(|| self.timers.pop_due(now)).collect();
        for (slot, at) in expired {
            let Some(key) = self.conns.key_of(slot) else {
                continue;
            };
            let conn = self.conns.get_mut(key).expect("a live slot");
            if !conn.armed.fired(at) {
                continue; // stale: superseded, or a closed connection's
            }
            match &conn.linger {
                _ if conn.closing => {}
                Some(l) if l.deadline() <= now => self.close(key),
                Some(_) => {}
                None if conn.session.deadline().is_some_and(|d| d <= now) => {
                    conn.session.on_deadline(now)
                }
                None => {}
            }
            self.drive(key);
        }
    }

    /// Serve the sessions other threads notified: `on_notify`, then drive
    /// them as after a read (a recv is submitted if the session wants input
    /// again and none is in flight).
    fn notified(&mut self, now: Instant) {
        let board = self.ctx.board.clone();
        for bits in board.take_ready(self.ctx.index) {
            let key = Key::from_bits(bits);
            // Stale (closed, the slot perhaps reused), closing or lingering
            // (its session is done): nothing to tell.
            match self.conns.get_mut(key) {
                Some(conn) if !conn.closing && conn.linger.is_none() => conn.session.on_notify(now),
                _ => continue,
            }
            self.drive(key);
        }
    }

    /// One batch per door, after the pass's other events.
    fn run_doors(&mut self, now: Instant) {
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
                    Some(Accepted { fd }) => {
                        self.admit(fd, true, now);
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
        let Some(fd) = self.pending.pop_front() else {
            return Step::Empty;
        };
        if !self.ctx.control.try_reserve() {
            self.pending.push_front(fd);
            return Step::Blocked;
        }
        if let Some(Accepted { fd }) = admit::place(&self.ctx, Accepted { fd }) {
            self.admit(fd, false, now);
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
    /// A single-shot accept ([`CoreContext::rotate_accepts`]) ended with the
    /// completion that filled the queue: it is armed again here, and one that
    /// finds the backlog non-empty completes inside the submit.
    fn refill(&mut self, now: Instant) {
        if self.ctx.rotate_accepts
            && self.ring.accept_state() == AcceptState::Idle
            && (!self.wants_accept(now) || self.arm_accept().is_err())
        {
            return;
        }
        if self.ring.accept_state() != AcceptState::Armed || self.ring.submit().is_err() {
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
    fn steer_accept(&mut self, now: Instant) -> io::Result<()> {
        match (self.wants_accept(now), self.ring.accept_state()) {
            // Also the re-arm after a completion without F_MORE (every
            // completion of a single-shot accept).
            (true, AcceptState::Idle) => {
                self.arm_accept()?;
            }
            // A single-shot accept is left to complete: cancelling it can lose
            // a wake-up meant for a sibling worker ([`Core::take_absorbed`]);
            // what it takes waits in `pending`, and it is not armed again.
            (false, AcceptState::Armed) if !self.keep_armed => self.ring.cancel_accept()?,
            _ => {}
        }
        Ok(())
    }

    /// Take a connection stranded in a shared listener's queue, once per
    /// [`CoreContext::recheck`] period in which this core's armed accept took
    /// nothing: a sibling's ring that will never run its accept (its worker
    /// was killed) keeps the kernel's one wake-up for a connection, so no
    /// live accept is woken for it ([`accept::recheck`]). Under load the
    /// accept completes and nothing is looked at; an idle core pays one
    /// non-blocking accept per period. One a sibling was also woken for
    /// costs that sibling an accept that finds nothing.
    fn recheck(&mut self, now: Instant) {
        let (Some(every), Some(at)) = (self.ctx.recheck, self.recheck_at) else {
            return;
        };
        if now < at {
            return;
        }
        self.recheck_at = Some(now + every);
        if std::mem::take(&mut self.accepted_lately)
            || self.ring.accept_state() != AcceptState::Armed
            || !self.wants_accept(now)
        {
            return;
        }
        if let Some(fd) = self.accept_now("on recheck") {
            tracing::debug!(core = self.ctx.index, "took a stranded connection");
            self.pending.push_back(fd);
            self.listen_door.announce();
        }
    }

    /// One non-blocking accept on the listener, outside the ring: a
    /// connection queued there, if any (an error is only logged, `when`).
    fn accept_now(&self, when: &str) -> Option<OwnedFd> {
        match admit::accept(self.ctx.listener.as_fd()) {
            Ok(fd) => Some(fd),
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
    /// [`RETRY_HELD_BACK`], see [`super::tally`]), and the pending queue has room.
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

    fn arm_accept(&mut self) -> io::Result<bool> {
        let listener = self.ctx.listener.as_fd();
        if self.ctx.rotate_accepts {
            self.ring.arm_accept_once(listener)
        } else {
            self.ring.arm_accept(listener)
        }
    }

    /// Arm the ring's timer for the earliest thing this core waits on.
    fn arm_timer(&mut self, now: Instant) -> io::Result<()> {
        let retry = (self.listen_door.blocked() || self.accept_paused_until.is_some())
            .then(|| self.accept_paused_until.unwrap_or(now + RETRY_BLOCKED));
        let shutdown = if self.draining {
            self.ctx.control.deadline()
        } else {
            None
        };
        let session = self.timers.next();
        let recheck = self.recheck_at.filter(|_| !self.draining);
        match [retry, shutdown, session, recheck]
            .into_iter()
            .flatten()
            .min()
        {
            Some(at) => self.ring.set_timer(at),
            None => Ok(()),
        }
    }

    /// Serve `fd` on this core: open its session and read eagerly.
    fn admit(&mut self, fd: OwnedFd, handed: bool, now: Instant) {
        let Some(peer) = admit::begin(&self.ctx, fd.as_fd(), handed) else {
            return;
        };
        let (service, ctx, draining) = (&mut self.service, &self.ctx, self.draining);
        let key = self.conns.insert_with(|key| {
            let mut session = Guarded::open(|| service.open(&peer, ctx.notifier(key)));
            if draining {
                session.on_shutdown();
            }
            Conn {
                fd,
                session,
                reading: false,
                wbuf: Some(Vec::new()),
                lent: false,
                eof: false,
                watch: Watch::Idle,
                closing: false,
                linger: None,
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

    /// After any event on a connection: start its next write, close it, or
    /// read more; keep its deadline armed; free it once closed and idle.
    fn drive(&mut self, key: Key) {
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        if let (false, Some(l)) = (conn.closing, &conn.linger) {
            // Lingering: one recv at a time until the end of input or `until`.
            if !conn.reading && !conn.eof {
                if let Err(e) = self.ring.recv(token(key), conn.fd.as_fd()) {
                    tracing::debug!(core = self.ctx.index, "recv failed: {e}");
                    self.close(key);
                    return self.drive(key);
                }
                conn.reading = true;
            }
            let until = l.deadline();
            self.timers
                .arm(key.slot() as usize, &mut conn.armed, Some(until));
        } else if !conn.closing && conn.wbuf.is_none() && conn.session.aborted() {
            // The session dropped what this write was sending; the write
            // itself would wait for as long as the client reads nothing.
            self.close(key);
            self.drive(key)
        } else if !conn.closing {
            if let Err(e) = start_write(&mut self.ring, &mut self.spare, key, conn) {
                tracing::debug!(core = self.ctx.index, "write failed: {e}");
                self.close(key);
                return self.drive(key);
            }
            let drained = conn.wbuf.is_some();
            let finished = conn.session.done() || (self.draining && conn.session.idle());
            if drained && finished {
                self.finish(key);
                return self.drive(key);
            }
            if conn.session.wants_read() && !conn.eof && !conn.reading {
                if let Err(e) = self.ring.recv(token(key), conn.fd.as_fd()) {
                    tracing::debug!(core = self.ctx.index, "recv failed: {e}");
                    self.close(key);
                    return self.drive(key);
                }
                conn.reading = true;
            }
            // Not reading: watch for the peer leaving instead.
            if !conn.reading && !conn.eof && conn.watch == Watch::Idle {
                if let Err(e) = self.ring.watch_hangup(token(key), conn.fd.as_fd()) {
                    tracing::debug!(core = self.ctx.index, "hang-up poll failed: {e}");
                    self.close(key);
                    return self.drive(key);
                }
                conn.watch = Watch::Armed;
            }
            self.timers.arm(
                key.slot() as usize,
                &mut conn.armed,
                conn.session.deadline(),
            );
        } else if !conn.in_flight() {
            let conn = self.conns.remove(key).expect("looked up above");
            recycle(&mut self.spare, conn.wbuf);
            drop(conn.fd);
            self.ctx.closed();
        }
    }

    /// Connection `key` is done and its output written: close it, or let it
    /// linger if its peer may still be sending ([`super::linger`]).
    fn finish(&mut self, key: Key) {
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        let asked = conn.session.linger();
        conn.linger = Lingering::begin(self.ctx.linger, asked, conn.eof, &conn.fd, Instant::now());
        if conn.linger.is_none() {
            self.close(key);
        }
    }

    /// Begin closing: shut the socket down (which ends a pending recv) and
    /// cancel what is in flight; [`Core::drive`] frees it once nothing is.
    fn close(&mut self, key: Key) {
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        if conn.closing {
            return;
        }
        conn.closing = true;
        let _ = SockRef::from(&conn.fd).shutdown(Shutdown::Both);
        if conn.reading {
            let _ = self.ring.cancel(Op::Recv, token(key));
        }
        if conn.wbuf.is_none() {
            let _ = self.ring.cancel(Op::Send, token(key));
            let _ = self.ring.cancel(Op::Writable, token(key));
        }
        if conn.watch == Watch::Armed {
            let _ = self.ring.cancel(Op::Poll, token(key));
        }
    }

    /// Shutdown began: stop accepting, keep the promise to connections handed
    /// over, answer the ones accepted but not admitted yet (once, with
    /// `Connection: close`: with workers the queue they came from is shared,
    /// and a sibling would have served them), and let every session finish.
    fn begin_drain(&mut self, now: Instant) {
        self.draining = true;
        if let Err(e) = self.ring.cancel_accept() {
            tracing::warn!(core = self.ctx.index, "cancelling the accept failed: {e}");
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
        while let Some(Accepted { fd }) = self.ctx.board.take_handoff(self.ctx.index) {
            self.admit(fd, true, now);
        }
        // Accepted but not yet admitted: answered once, like those above.
        while let Some(fd) = self.pending.pop_front() {
            self.admit_draining(fd, now);
        }
        self.listen_door.clear();
        self.handoff_door.clear();
    }

    /// The drain cancelled a single-shot accept on a listener shared with
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
    fn take_absorbed(&mut self, now: Instant) {
        if let Some(fd) = self.accept_now("after the drain's cancel") {
            self.admit_draining(fd, now);
        }
    }

    /// Admit a connection accepted after the drain began (its session is told
    /// of the shutdown at once); at the connection limit it is closed.
    fn admit_draining(&mut self, fd: OwnedFd, now: Instant) {
        if self.ctx.control.try_reserve() {
            self.admit(fd, false, now);
        }
    }

    /// The end: close every connection still open (the ring, dropped after
    /// this, cancels their operations and waits for its buffers).
    fn close_all(&mut self) {
        for key in self.conns.keys() {
            if let Some(conn) = self.conns.remove(key) {
                let _ = SockRef::from(&conn.fd).shutdown(Shutdown::Both);
                drop(conn.fd);
                self.ctx.closed();
            }
        }
        while let Some(Accepted { fd }) = self.ctx.board.take_handoff(self.ctx.index) {
            drop(fd);
            self.ctx.control.release();
        }
        self.pending.clear();
    }
}

/// Keep a write buffer no longer in use for the next response (up to [`SPARE_BUFS`]).
fn recycle(spare: &mut Vec<Vec<u8>>, buf: Option<Vec<u8>>) {
    if let Some(buf) = buf {
        if spare.len() < SPARE_BUFS && buf.capacity() >= WRITE_BUF {
            spare.push(buf);
        }
    }
}

/// The ring's name for connection `key` (the same slot and generation).
fn token(key: Key) -> Token {
    Token::new(key.slot(), key.generation())
}

/// The connection a completion's token names.
fn key(token: Token) -> Key {
    Key::new(token.slot(), token.generation())
}

/// Start the next write of `conn`'s output if none is in flight: a send
/// from the buffer the session lends, or of a copy in a buffer from `spare`;
/// a file is written by `sendfile` until it ends or the socket is full (then
/// a writable poll stands in for the write). With nothing to write, the
/// buffer goes back to `spare`.
fn start_write<T: Session>(
    ring: &mut Ring,
    spare: &mut Vec<Vec<u8>>,
    key: Key,
    conn: &mut Conn<T>,
) -> io::Result<()> {
    let mut from_files = 0;
    loop {
        let Some(held) = conn.wbuf.take() else {
            return Ok(()); // one write at a time
        };
        if let Some((buf, from)) = conn.session.lend_output() {
            // Sent straight from the session's buffer, not copied into ours.
            // Refused, the buffer is lost with the operation; the caller
            // closes the connection, whose session is then dropped lent.
            recycle(spare, Some(held));
            let started = ring.send_from(token(key), conn.fd.as_fd(), buf, from);
            match started {
                Ok(()) => conn.lent = true,
                Err(_) => conn.wbuf = Some(Vec::new()),
            }
            return started;
        }
        let started = match conn.session.output() {
            Output::Bytes(bytes) if !bytes.is_empty() => {
                let mut buf = write_buf(held, spare);
                buf.extend_from_slice(&bytes[..bytes.len().min(WRITE_BUF)]);
                ring.send(token(key), conn.fd.as_fd(), buf)
            }
            Output::File { fd, offset, len } if len > 0 => {
                conn.wbuf = Some(held);
                // A turn's worth written (a fast client on a big file): the
                // poll, which fires at once while there is room, lets the
                // pass serve the other connections first.
                let sent = if from_files < FILE_TURN {
                    sendfile::send_file(conn.fd.as_fd(), fd, offset, len)
                } else {
                    Err(io::ErrorKind::WouldBlock.into())
                };
                match sent {
                    // A file shorter than the length the session promised.
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    // Written: go on with what follows.
                    Ok(n) => {
                        from_files += n;
                        conn.session.on_sent(n, Instant::now());
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        recycle(spare, conn.wbuf.take());
                        let watched = ring.watch_writable(token(key), conn.fd.as_fd());
                        if watched.is_err() {
                            conn.wbuf = Some(Vec::new());
                        }
                        return watched;
                    }
                    Err(e) => return Err(e),
                }
                continue;
            }
            _ => {
                // Drained: an idle connection keeps no write buffer.
                recycle(spare, Some(held));
                conn.wbuf = Some(Vec::new());
                return Ok(());
            }
        };
        if started.is_err() {
            // The buffer went with the refused operation.
            conn.wbuf = Some(Vec::new());
        }
        return started;
    }
}

/// An empty buffer for the next write: the one a response in progress holds,
/// else a spare (or a new one).
fn write_buf(held: Vec<u8>, spare: &mut Vec<Vec<u8>>) -> Vec<u8> {
    let mut buf = if held.capacity() > 0 {
        held
    } else {
        spare.pop().unwrap_or_else(|| Vec::with_capacity(WRITE_BUF))
    };
    buf.clear();
    buf
}

/// The shared conformance bodies, plus what only a completion loop can get
/// wrong: owed batches that nothing completes to announce, and the batch
/// bound's effect on a held connection, with its negative arm.
#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    use crate::backend::accept::Batch;
    use crate::backend::testing::{self, echo, EchoService, Entry, Setup};

    testing::conformance!(super::run::<EchoService>);

    /// The same rules with single-shot accepts, as a worker of several runs
    /// ([`crate::backend::CoreContext::rotate_accepts`]): a batch still drains
    /// past one completion, and the limit still holds the rest in the backlog.
    /// Not the hand-off body: it relies on the multishot sending every accept
    /// to one core, where single-shots give a core busy in a view the one
    /// connection its armed accept takes.
    mod rotating {
        use crate::backend::testing::{self, EchoService};
        use crate::backend::CoreContext;

        fn run(mut ctx: CoreContext, service: EchoService) -> std::io::Result<()> {
            ctx.rotate_accepts = true;
            super::super::run(ctx, service)
        }

        macro_rules! bodies {
            ($($name:ident),* $(,)?) => {$(
                #[test]
                fn $name() {
                    testing::$name(run)
                }
            )*};
        }

        bodies!(
            a_panicking_session_closes_only_its_connection,
            echo_on_many_connections,
            large_write_is_echoed_intact,
            file_output_is_sent_whole,
            accept_batch_serves_held_first_and_all_of_a_burst,
            deadline_fires,
            max_connections_holds_the_rest_in_the_backlog,
            graceful_shutdown_closes_idle_and_finishes_busy,
            shutdown_deadline_closes_busy_connections,
            notified_sessions_answer_and_resume_reading,
            a_session_not_reading_is_closed_when_its_peer_resets,
            a_notification_for_a_closed_session_is_ignored,
        );
    }

    fn spawn(batch: usize) -> testing::Harness {
        spawn_as(batch, false)
    }

    fn spawn_as(batch: usize, rotate_accepts: bool) -> testing::Harness {
        Setup {
            batch: Batch::new(batch),
            rotate_accepts,
            ..Setup::default()
        }
        .spawn(super::run::<EchoService>)
    }

    fn read_line(s: &mut TcpStream, want: &str) {
        let mut got = vec![0; want.len()];
        s.read_exact(&mut got).unwrap();
        assert_eq!(String::from_utf8_lossy(&got), want);
    }

    #[test]
    fn owed_batches_admit_silent_connections_without_any_completion() {
        owed_batches_admit_silent_connections(false);
    }

    /// With single-shot accepts the ten wait in the backlog, not as
    /// completions: the batch's refill takes them, and what it leaves is owed.
    #[test]
    fn owed_batches_admit_silent_connections_with_single_shot_accepts() {
        owed_batches_admit_silent_connections(true);
    }

    fn owed_batches_admit_silent_connections(rotate_accepts: bool) {
        let h = spawn_as(2, rotate_accepts);
        let mut blocker = h.connect();
        echo(&mut blocker, "warm\n");
        // Ten silent connections queue while the core is held in a view: one
        // reap brings all ten accepts, a batch admits two, and the rest are
        // owed. Their eager reads find nothing and no timer is armed, so
        // nothing would complete to end a wait that blocked while owing.
        h.hold(&mut blocker);
        let mut silent: Vec<TcpStream> = (0..10).map(|_| h.connect()).collect();
        h.release();
        read_line(&mut blocker, "hold\n");
        let opened = || h.journal().count(|e| matches!(e, Entry::Opened { .. }));
        let give_up = Instant::now() + Duration::from_secs(2);
        while opened() < 11 {
            assert!(
                Instant::now() < give_up,
                "only {} admitted: owed batches waited",
                opened()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        for (i, c) in silent.iter_mut().enumerate() {
            echo(c, &format!("late {i}\n"));
        }
        h.shutdown(Duration::from_secs(1));
    }

    /// Three connections, one after another, to a core sharing its listener
    /// with a sibling ring whose thread never enters it again (a killed
    /// worker's: see the uring crate's `a_ring_closed_after_its_wake_up_
    /// strands_the_connection`); returns the first that got no answer
    /// within 1 s. Whichever accept was queued first, the second connection
    /// at the latest finds the sibling's at the head and the core's waiting
    /// behind it, and wakes only the sibling.
    fn stranded_behind_a_dead_sibling(recheck: Option<Duration>) -> Option<usize> {
        use m0serve_uring::{Config, Ring};
        use std::os::fd::{AsFd, OwnedFd};
        use std::sync::mpsc;

        let h = Setup {
            rotate_accepts: true,
            recheck,
            ..Setup::default()
        }
        .spawn(super::run::<EchoService>);
        let mut warm = h.connect();
        echo(&mut warm, "warm\n");
        // On a thread of its own that then only blocks: like a killed
        // worker's, its ring is never entered again.
        let (armed, end) = (mpsc::channel(), mpsc::channel::<()>());
        let listener: std::sync::Arc<OwnedFd> = h.listener().clone();
        let sibling = std::thread::spawn(move || {
            let mut ring = Ring::new(Config::default()).unwrap();
            assert!(ring.arm_accept_once(listener.as_fd()).unwrap());
            ring.submit().unwrap();
            armed.0.send(()).unwrap();
            let _ = end.1.recv();
        });
        armed.1.recv().unwrap();
        let mut clients = Vec::new();
        let stranded = (0..3).find(|i| {
            // The core's accept is armed again and waiting: an accept issued
            // after the wake-up would find the connection queued and take it.
            std::thread::sleep(Duration::from_millis(50));
            let mut c = h.connect();
            c.write_all(format!("{i}\n").as_bytes()).unwrap();
            let answered = !testing::silent_for(&mut c, Duration::from_secs(1));
            clients.push(c);
            !answered
        });
        end.0.send(()).unwrap();
        sibling.join().unwrap();
        h.shutdown(Duration::from_millis(100));
        stranded
    }

    #[test]
    fn a_connection_a_dead_sibling_was_woken_for_is_taken_by_the_recheck() {
        assert_eq!(
            stranded_behind_a_dead_sibling(Some(Duration::from_millis(50))),
            None,
            "the recheck took every connection within 1 s"
        );
        // The negative arm: without it the connection waits for the next client.
        assert!(
            stranded_behind_a_dead_sibling(None).is_some(),
            "no connection was stranded without the recheck: the sibling took no wake-up"
        );
    }

    /// A held connection asks once a burst of slow admissions is under way;
    /// returns how many of the burst the core served before it.
    fn burst_served_before_a_held_request(batch: usize) -> usize {
        const BURST: usize = 10;
        let h = spawn(batch);
        let mut held = h.connect();
        let mut blocker = h.connect();
        echo(&mut held, "warm\n");
        echo(&mut blocker, "warm\n");
        h.hold(&mut blocker);
        let mut burst: Vec<TcpStream> = (0..BURST)
            .map(|_| {
                let mut c = h.connect();
                c.write_all(b"sleep 50\n").unwrap();
                c
            })
            .collect();
        h.release();
        read_line(&mut blocker, "hold\n");
        // The first of the burst answered: its batch is being admitted now.
        read_line(&mut burst[0], "sleep 50\n");
        echo(&mut held, "fast\n");
        for c in &mut burst[1..] {
            read_line(c, "sleep 50\n");
        }
        let lines = h.journal().lines();
        h.shutdown(Duration::from_secs(1));
        let fast = lines.iter().position(|l| l == "fast").unwrap();
        lines[..fast].iter().filter(|l| *l == "sleep 50").count()
    }

    #[test]
    fn a_held_connection_waits_one_batch_not_the_whole_burst() {
        let with_batch = burst_served_before_a_held_request(2);
        assert!(
            with_batch <= 4,
            "{with_batch} of 10 served before the held request"
        );
        // The negative arm: a batch that drains everything makes it wait for all.
        let drained = burst_served_before_a_held_request(0);
        assert_eq!(drained, 10, "batch 0 should serve the whole burst first");
    }
}
