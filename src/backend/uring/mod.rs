//! The io_uring backend: one [`Ring`] per core thread, driving [`Session`]s.
//!
//! A pass: reap completions (accepts only fill the pending queue and announce
//! the listener door; recvs, sends and writable polls feed their sessions), fire expired
//! deadlines, then take at most one batch per door ([`super::accept`]), steer
//! the multishot accept (armed below the connection limit, cancelled at it),
//! arm the timer for the next deadline, and submit: waiting for a completion
//! unless a batch is owed or a hand-off arrived ([`super::share::Board::park`]).
//!
//! Where connections come from is in `listen.rs`; how output leaves, in `write.rs`.
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

use m0serve_uring::{AcceptState, Completion, Config, Hangup, Op, Received, Ring, Token, Waker};
use socket2::SockRef;

use super::accept::{Door, RETRY_BLOCKED};
use super::guard::Guarded;
use super::ktls::{self, Record};
use super::linger::Lingering;
use super::slab::{Key, Slab};
use super::timers::{Armed, Timers};
use super::{Accepted, CoreContext, Service, Session, Wake};
use write::{recycle, start_write, SentBuf};

/// The most one recv (or the admission's eager read) takes.
const READ_BUF: usize = 16 * 1024;

/// Accepted connections waiting for admission beyond this stop the multishot:
/// the rest wait in the kernel's backlog rather than in our memory.
const PENDING_CAP: usize = 1024;
/// How soon a core held back by a sibling worker's fewer connections looks again.
const RETRY_HELD_BACK: std::time::Duration = std::time::Duration::from_millis(1);

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
    /// The peer closed its side: never read again (a recv would return 0 at once).
    eof: bool,
    /// The hang-up poll watching for the peer leaving while no recv is armed.
    watch: Watch,
    /// Shut down; the slot is freed once nothing is in flight.
    closing: bool,
    /// Lingering: half-closed, its input dropped ([`super::linger`]).
    linger: Option<Lingering>,
    /// The kernel encrypts and decrypts its records ([`super::ktls`]).
    ktls: bool,
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
    /// Accepted on any listener, not yet admitted (not reserved either):
    /// one queue, so the listeners share the one door that admits from it.
    pending: VecDeque<Accepted>,
    listen_door: Door,
    handoff_door: Door,
    /// An accept error (EMFILE...) pauses the multishot until then.
    accept_paused_until: Option<Instant>,
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
                while let Some(conn) = self.ctx.board.take_handoff(index) {
                    self.admit(conn, true, now);
                }
                let expired = self.ctx.control.deadline().is_some_and(|d| now >= d);
                // Not before the accept's cancel has landed: a connection it
                // completed meanwhile is still to be answered.
                let accepting = self.any_accept(|state| state != AcceptState::Idle);
                if (self.conns.is_empty() && !accepting) || expired {
                    return Ok(());
                }
            } else {
                self.recheck(now);
                self.run_doors(now);
                self.steer_accept(now)?;
            }

            let beat = self.ctx.beat(now);
            self.arm_timer(now, beat)?;
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
            Completion::Accepted {
                listener, result, ..
            } => match result {
                Ok(fd) if !self.draining => {
                    self.accepted_lately = true;
                    self.pending.push_back(Accepted { fd, listener });
                    self.listen_door.announce();
                }
                // The multishot accept took it before its cancel landed: the
                // kernel queue it came from is shared with sibling workers
                // (or was refused to new clients), so it is this core's to
                // answer, once, with `Connection: close`.
                Ok(fd) => self.admit_draining(Accepted { fd, listener }, now),
                Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => {
                    // A single-shot accept (shared listener) is never cancelled but
                    // by the drain, whose cancel is made up for here.
                    if self.draining && self.ctx.rotate_accepts {
                        self.take_absorbed(listener, now);
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
            Completion::Sent { token, buf, result } => {
                self.on_sent(key(token), SentBuf::Own(buf), result, now)
            }
            Completion::SentLent { token, buf, result } => {
                self.on_sent(key(token), SentBuf::Lent(buf), result, now)
            }
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
            // Kernel TLS: a record other than application data is next.
            Err(e) if conn.ktls && e.raw_os_error() == Some(libc::EIO) => {
                match ktls::read_record(conn.fd.as_fd(), &mut self.scratch) {
                    Ok(Record::Data(n)) => conn.session.on_read(&self.scratch[..n], now),
                    Ok(Record::End) => {
                        conn.eof = true;
                        conn.session.on_eof(now);
                    }
                    Err(e) => {
                        tracing::debug!(core = self.ctx.index, "kernel TLS read failed: {e}");
                        self.close(key);
                    }
                }
            }
            Err(e) => {
                tracing::debug!(core = self.ctx.index, "recv failed: {e}");
                self.close(key);
            }
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

    /// Arm the ring's timer for the earliest thing this core waits on (the
    /// heartbeat's next stamp among them).
    fn arm_timer(&mut self, now: Instant, beat: Option<Instant>) -> io::Result<()> {
        let retry = (self.listen_door.blocked() || self.accept_paused_until.is_some())
            .then(|| self.accept_paused_until.unwrap_or(now + RETRY_BLOCKED));
        let shutdown = if self.draining {
            self.ctx.control.deadline()
        } else {
            None
        };
        let session = self.timers.next();
        let recheck = self.recheck_at.filter(|_| !self.draining);
        match [retry, shutdown, session, recheck, beat]
            .into_iter()
            .flatten()
            .min()
        {
            Some(at) => self.ring.set_timer(at),
            None => Ok(()),
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
            // Nothing in flight: the moment a TLS session may hand its
            // records to the kernel.
            if drained && !conn.reading && !conn.ktls {
                if let Some(keys) = conn.session.kernel_tls() {
                    if let Err(e) = ktls::install(conn.fd.as_fd(), &keys) {
                        tracing::warn!(
                            core = self.ctx.index,
                            "kernel TLS refused a connection: {e}"
                        );
                        self.close(key);
                        return self.drive(key);
                    }
                    conn.ktls = true;
                    return self.drive(key);
                }
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
        if conn.ktls {
            // Best effort: a full window gets the close without it.
            let _ = ktls::close_notify(conn.fd.as_fd());
        }
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
        while let Some(conn) = self.ctx.board.take_handoff(self.ctx.index) {
            drop(conn);
            self.ctx.control.release();
        }
        self.pending.clear();
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

mod listen;
#[cfg(test)]
mod tests;
mod write;
