//! The portable backend on mio: epoll on Linux, kqueue on macOS.
//!
//! One [`Core`] per core thread. A pass is: wait (zero timeout while anything
//! is owed), then serve the connections the wait reported, then those a read
//! budget left readable last pass, then at most one accept batch per door
//! ([`super::accept`]; each listener is a door of its own), then the deadlines that passed, then shutdown.
//!
//! mio is edge-triggered: a socket is reported once per change, not while it
//! stays ready. Each connection therefore remembers "readable" and "writable"
//! until a read or write says `WouldBlock`, so a session that stopped wanting
//! input (its response is being written) is read again when it resumes,
//! without a new edge. Interest is read-only at first and gains write the
//! first time a write would block, then keeps it: a new connection whose
//! answer fits the socket buffer (most) costs no writable event, and no
//! connection costs more than one re-registration.
//!
//! A finished connection whose peer may still be sending lingers before it
//! closes ([`linger`]): half-closed, read into the core's buffer and dropped,
//! until the peer's end of input or a quiet spell.
//!
//! On macOS the same code runs on kqueue as mio drives it: its filters are
//! added with `EV_CLEAR`, so they report edges as epoll's `EPOLLET` does and
//! the rule above holds; a peer's close comes as `EV_EOF`, which mio reports
//! as read-closed (epoll's `EPOLLRDHUP`); wakes from other threads are an
//! `EVFILT_USER` event (an eventfd on Linux). A listener shared by several
//! workers wakes every worker's kqueue (as it wakes every epoll: mio
//! registers neither exclusively), and the workers that lose the race to
//! accept find `WouldBlock`, an empty door.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use mio::event::Event;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use socket2::Socket;

use super::accept::{Door, Step, RETRY_BLOCKED};
use super::guard::Guarded;
use super::ktls::{self, Record};
use super::linger::Lingering;
use super::sendfile::send_file;
use super::slab::{Key, Slab};
use super::timers::{Armed, Timers};
use super::{admit, Accepted, CoreContext, Output, Service, Session, Wake};

const WAKER: Token = Token(usize::MAX);
/// Listener `i`'s token is this less `i` (a connection's is its slot: small).
const FIRST_LISTENER: usize = usize::MAX - 1;

/// One read buffer per core: sessions copy what they keep.
const READ_BUF: usize = 64 * 1024;

/// Reads one connection gets per pass. A peer that sends as fast as we read
/// (a pipelining client whose answers are immediate) would otherwise hold
/// the core until it stopped; past the budget it waits for the next pass.
const READS_PER_PASS: usize = 16;

/// Run core `ctx.index` until shutdown completes.
pub fn run<S: Service>(ctx: CoreContext, service: S) -> io::Result<()> {
    // This thread pays the wakes it defers before each wait.
    super::pass_end::enter_core();
    let poll = Poll::new()?;
    let waker = Waker::new(poll.registry(), WAKER)?;
    ctx.board.set_waker(ctx.index, Box::new(MioWake(waker)));
    for (i, listener) in ctx.listeners.iter().enumerate() {
        poll.registry().register(
            &mut SourceFd(&listener.as_raw_fd()),
            Token(FIRST_LISTENER - i),
            Interest::READABLE,
        )?;
    }
    Core {
        listen: ctx.listeners.iter().map(|_| Door::default()).collect(),
        ctx,
        service,
        poll,
        conns: Slab::default(),
        timers: Timers::default(),
        buf: vec![0; READ_BUF],
        handoffs: Door::default(),
        listening: true,
        draining: false,
        revisit: Vec::new(),
        due: Vec::new(),
    }
    .run()
}

/// How siblings (and shutdown) wake a core blocked in `poll`.
struct MioWake(Waker);

impl Wake for MioWake {
    fn wake(&self) {
        if let Err(e) = self.0.wake() {
            tracing::warn!("waking a core failed: {e}");
        }
    }
}

/// One connection.
struct Conn<T> {
    sock: Socket,
    session: T,
    /// The last read did not say `WouldBlock` (or an edge said readable since).
    readable: bool,
    /// The last write did not say `WouldBlock` (or an edge said writable since).
    writable: bool,
    /// The peer closed its side: never read again.
    eof: bool,
    /// In [`Core::revisit`] already.
    queued: bool,
    /// Registered for writable events (since a write first would block).
    write_interest: bool,
    /// Lingering: half-closed, its input dropped ([`super::linger`]).
    linger: Option<Lingering>,
    /// The kernel encrypts and decrypts its records ([`super::ktls`]).
    ktls: bool,
    armed: Armed,
}

/// What driving a connection left it.
enum Driven {
    Open,
    /// Out of read budget while still readable: serve it again next pass.
    Revisit,
    Close,
}

impl<T: Session> Conn<T> {
    /// Write what the session has, then read while it wants input; repeat
    /// until neither can progress. Errors mean the connection is to be closed.
    fn drive(&mut self, buf: &mut [u8], now: Instant) -> io::Result<Driven> {
        if self.linger.is_some() {
            return self.drop_input(buf, now);
        }
        let mut reads = 0;
        loop {
            let drained = self.flush(now)?;
            // Nothing in flight: the moment a TLS session may hand its
            // records to the kernel (an error closes the connection).
            if drained && !self.ktls {
                if let Some(keys) = self.session.kernel_tls() {
                    ktls::install(self.sock.as_fd(), &keys)?;
                    self.ktls = true;
                    continue;
                }
            }
            if self.session.done() {
                return Ok(if drained { Driven::Close } else { Driven::Open });
            }
            if !(self.readable && !self.eof && self.session.wants_read()) {
                return Ok(Driven::Open);
            }
            if reads == READS_PER_PASS {
                return Ok(Driven::Revisit);
            }
            reads += 1;
            match (&self.sock).read(buf) {
                Ok(0) => {
                    self.eof = true;
                    self.session.on_eof(now);
                }
                Ok(n) => self.session.on_read(&buf[..n], now),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.readable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Kernel TLS: a record other than application data is next.
                Err(e) if self.ktls && e.raw_os_error() == Some(libc::EIO) => {
                    match ktls::read_record(self.sock.as_fd(), buf)? {
                        Record::Data(n) => self.session.on_read(&buf[..n], now),
                        Record::End => {
                            self.eof = true;
                            self.session.on_eof(now);
                        }
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Lingering: read and drop what the peer sends; its end of input
    /// closes the connection.
    fn drop_input(&mut self, buf: &mut [u8], now: Instant) -> io::Result<Driven> {
        for _ in 0..READS_PER_PASS {
            if !self.readable {
                return Ok(Driven::Open);
            }
            match (&self.sock).read(buf) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(Driven::Close);
                }
                Ok(_) => {
                    if let Some(l) = &mut self.linger {
                        l.heard(now);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.readable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Driven::Revisit)
    }

    /// Write the session's output until it is drained (true) or the socket is full.
    fn flush(&mut self, now: Instant) -> io::Result<bool> {
        loop {
            let wrote = match self.session.output() {
                Output::None => return Ok(true),
                _ if !self.writable => return Ok(false),
                // socket2 sends with MSG_NOSIGNAL where it exists (SO_NOSIGPIPE is set on macOS).
                Output::Bytes(b) => (&self.sock).write(b),
                Output::File { fd, offset, len } => send_file(self.sock.as_fd(), fd, offset, len),
            };
            match wrote {
                // Nothing written of a non-empty output (or a file shorter than
                // its length) would loop forever: a session bug, so close.
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.session.on_sent(n, now),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.writable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// A core thread's loop state.
struct Core<S: Service> {
    ctx: CoreContext,
    service: S,
    poll: Poll,
    conns: Slab<Conn<Guarded<S::Session>>>,
    timers: Timers,
    buf: Vec<u8>,
    /// Each shared listener's door, by its index.
    listen: Vec<Door>,
    /// The door siblings hand connections through.
    handoffs: Door,
    /// The listeners are registered (until shutdown).
    listening: bool,
    /// Shutdown began: sessions were told, idle ones closed.
    draining: bool,
    /// Connections a read budget left readable, served next pass.
    revisit: Vec<Key>,
    /// Scratch for the deadlines due in a pass.
    due: Vec<(usize, Instant)>,
}

impl<S: Service> Core<S> {
    fn run(mut self) -> io::Result<()> {
        let me = self.ctx.index;
        let mut events = Events::with_capacity(1024);
        self.ctx.board.begin_pass(me);
        loop {
            if self.ctx.control.shutting_down() {
                if !self.draining {
                    self.begin_drain();
                }
                if self.conns.is_empty() && !self.ctx.board.has_handoffs(me) {
                    return Ok(());
                }
                if self
                    .ctx
                    .control
                    .deadline()
                    .is_some_and(|d| Instant::now() >= d)
                {
                    self.close_all();
                    return Ok(());
                }
            }

            super::pass_end::pay();
            let now = Instant::now();
            let beat = self.ctx.beat(now);
            let mut timeout = self.wait_timeout(now, beat);
            if timeout != Some(Duration::ZERO) && !self.ctx.board.park(me) {
                timeout = Some(Duration::ZERO); // a hand-off arrived: do not block
            }
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            self.ctx.board.begin_pass(me);

            let revisit = std::mem::take(&mut self.revisit);
            for event in events.iter() {
                match event.token() {
                    WAKER => {} // what it announces is looked at below
                    Token(t) if FIRST_LISTENER - t < self.listen.len() => {
                        self.listen[FIRST_LISTENER - t].announce()
                    }
                    Token(t) => self.ready(t, event),
                }
            }
            for key in revisit {
                if let Some(c) = self.conns.get_mut(key) {
                    c.queued = false;
                    self.drive(key);
                }
            }
            self.notified();

            // The doors last: connections already held are served first.
            if self.ctx.board.has_handoffs(me) {
                self.handoffs.announce();
            }
            for i in 0..self.listen.len() {
                if self.listening && self.listen[i].due() {
                    let mut door = std::mem::take(&mut self.listen[i]);
                    let blocked_before = door.blocked();
                    door.run(self.ctx.batch, || self.accept_step(i, blocked_before));
                    self.listen[i] = door;
                }
            }
            if self.handoffs.due() {
                let mut door = std::mem::take(&mut self.handoffs);
                door.run(self.ctx.batch, || self.handoff_step());
                self.handoffs = door;
            }

            self.expire(Instant::now());
        }
    }

    /// How long the next wait may block: not at all while anything is owed,
    /// else until the earliest deadline, the heartbeat's next stamp, a
    /// blocked door's retry, or the end of the shutdown grace.
    fn wait_timeout(&self, now: Instant, beat: Option<Instant>) -> Option<Duration> {
        if self.listen.iter().any(Door::owed) || self.handoffs.owed() || !self.revisit.is_empty() {
            return Some(Duration::ZERO);
        }
        let mut until = self.timers.next();
        if let Some(at) = beat {
            until = Some(until.map_or(at, |u| u.min(at)));
        }
        let mut bound = |t: Instant| until = Some(until.map_or(t, |u| u.min(t)));
        if (self.listening && self.listen.iter().any(Door::blocked)) || self.handoffs.blocked() {
            bound(now + RETRY_BLOCKED);
        }
        if self.draining {
            if let Some(d) = self.ctx.control.deadline() {
                bound(d);
            }
        }
        until.map(|t| t.saturating_duration_since(now))
    }

    /// The wait reported the connection in slot `slot`.
    fn ready(&mut self, slot: usize, event: &Event) {
        // A slot closed earlier in this pass (or reused since) is harmless:
        // readiness is only a hint that a read or write may not block.
        let Some(key) = self.conns.key_of(slot) else {
            return;
        };
        let c = self.conns.get_mut(key).expect("a live slot");
        // A reset (or both directions shut): the peer is gone, so close now,
        // even if the session is not reading (an app holding its request
        // learns the client left). A FIN alone is a half-close that may still
        // want its answer: it is read in order, when the session reads again.
        // The io_uring backend's hang-up poll keeps the same rule.
        // Lingering, both directions shut is the peer's FIN after ours: what
        // came before it is read (and dropped) first.
        let gone = event.is_read_closed() && event.is_write_closed() && c.linger.is_none();
        if event.is_error() || gone {
            self.close(key);
            return;
        }
        c.readable |= event.is_readable() || event.is_read_closed();
        c.writable |= event.is_writable() || event.is_write_closed();
        if event.is_read_closed() && c.linger.is_none() && !c.session.wants_read() {
            // The FIN is read in order later; the session may act on it now.
            c.session.on_hangup(Instant::now());
        }
        self.drive(key);
    }

    /// Serve the sessions other threads notified: `on_notify`, then drive
    /// them as after a read (a session that wants input again is read at
    /// once: its socket is remembered readable until a read would block).
    fn notified(&mut self) {
        let now = Instant::now();
        let board = self.ctx.board.clone();
        for bits in board.take_ready(self.ctx.index) {
            let key = Key::from_bits(bits);
            // Stale (the connection closed, its slot perhaps reused) or
            // lingering (its session is done): dropped.
            if let Some(c) = self.conns.get_mut(key).filter(|c| c.linger.is_none()) {
                c.session.on_notify(now);
                self.drive(key);
            }
        }
    }

    /// Serve connection `key` as far as it goes now; close it when it is done
    /// (or failed), else re-arm its deadline.
    fn drive(&mut self, key: Key) {
        let Some(c) = self.conns.get_mut(key) else {
            return;
        };
        match c.drive(&mut self.buf, Instant::now()) {
            Ok(Driven::Close) => self.finish(key),
            Err(e) => {
                tracing::debug!(core = self.ctx.index, "closing a connection: {e}");
                self.close(key);
            }
            Ok(state) => {
                if matches!(state, Driven::Revisit) && !c.queued {
                    c.queued = true;
                    self.revisit.push(key);
                }
                if !c.writable && !c.write_interest {
                    // MOD re-checks readiness, so space freed since the
                    // write blocked is still reported.
                    let fd = c.sock.as_raw_fd();
                    let interest = Interest::READABLE | Interest::WRITABLE;
                    if let Err(e) = self.poll.registry().reregister(
                        &mut SourceFd(&fd),
                        Token(key.slot() as usize),
                        interest,
                    ) {
                        tracing::warn!(core = self.ctx.index, "registering for writes: {e}");
                        self.close(key);
                        return;
                    }
                    c.write_interest = true;
                }
                let deadline = match &c.linger {
                    Some(l) => Some(l.deadline()),
                    None => c.session.deadline(),
                };
                self.timers.arm(key.slot() as usize, &mut c.armed, deadline);
            }
        }
    }

    /// Connection `key` is done and its output written: close it, or let it
    /// linger if its peer may still be sending ([`super::linger`]).
    fn finish(&mut self, key: Key) {
        let Some(c) = self.conns.get_mut(key) else {
            return;
        };
        if c.linger.is_some() {
            return self.close(key); // its lingering is over
        }
        if c.ktls {
            // Best effort: a full window gets the close without it.
            let _ = ktls::close_notify(c.sock.as_fd());
        }
        let asked = c.session.linger();
        c.linger = Lingering::begin(self.ctx.linger, asked, c.eof, &c.sock, Instant::now());
        if c.linger.is_some() {
            self.drive(key);
        } else {
            self.close(key);
        }
    }

    /// One step of listener `i`'s batch. The slot is reserved before the
    /// accept, so at the limit (or while a sibling worker holds fewer, see
    /// [`crate::ipc::tally`]) connections wait in the kernel's backlog.
    fn accept_step(&mut self, i: usize, blocked_before: bool) -> Step {
        if !self.ctx.control.may_accept() || !self.ctx.control.try_reserve() {
            return Step::Blocked;
        }
        let fd = match admit::accept(self.ctx.listeners[i].as_fd()) {
            Ok(fd) => fd,
            Err(e) => {
                self.ctx.control.release();
                return match e.raw_os_error() {
                    Some(libc::EAGAIN) => Step::Empty,
                    // The connection died in the backlog, or a signal: take the next.
                    Some(libc::ECONNABORTED | libc::EINTR | libc::EPROTO) => Step::Admitted,
                    // Out of descriptors or memory: trying harder will not cure it.
                    Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => {
                        if !blocked_before {
                            tracing::warn!(core = self.ctx.index, "accept: {e}; retrying");
                        }
                        Step::Blocked
                    }
                    // The listener was shut at the drain's start.
                    _ if self.ctx.control.shutting_down() => Step::Empty,
                    _ => {
                        tracing::error!(core = self.ctx.index, "accept: {e}");
                        Step::Empty
                    }
                };
            }
        };
        if let Some(conn) = admit::place(&self.ctx, Accepted { fd, listener: i }) {
            self.admit(conn, false);
        }
        Step::Admitted
    }

    /// One step of the hand-off door's batch.
    fn handoff_step(&mut self) -> Step {
        match self.ctx.board.take_handoff(self.ctx.index) {
            Some(conn) => {
                self.admit(conn, true);
                Step::Admitted
            }
            None => Step::Empty,
        }
    }

    /// Admit a connection whose slot is reserved, and read it eagerly: what
    /// the client sent with its connect is served now, not a pass later.
    fn admit(&mut self, conn: Accepted, handed: bool) {
        let Accepted { fd, listener } = conn;
        let Some(peer) = admit::begin(&self.ctx, fd.as_fd(), handed) else {
            return;
        };
        let raw = fd.as_raw_fd();
        let (service, ctx) = (&mut self.service, &self.ctx);
        let key = self.conns.insert_with(|key| Conn {
            sock: Socket::from(fd),
            session: Guarded::open(|| service.open(&peer, listener, ctx.notifier(key))),
            readable: true,
            writable: true,
            eof: false,
            queued: false,
            write_interest: false,
            linger: None,
            ktls: false,
            armed: Armed::default(),
        });
        if let Err(e) = self.poll.registry().register(
            &mut SourceFd(&raw),
            Token(key.slot() as usize),
            Interest::READABLE,
        ) {
            tracing::warn!(core = self.ctx.index, "registering a connection: {e}");
            self.close(key);
            return;
        }
        self.drive(key);
        if self.draining {
            self.shut(key);
        }
    }

    /// Tell connection `key` shutdown began; close it if idle, else serve it on.
    fn shut(&mut self, key: Key) {
        // A lingering one's session is done; its linger time bounds it.
        let Some(c) = self.conns.get_mut(key).filter(|c| c.linger.is_none()) else {
            return;
        };
        c.session.on_shutdown();
        if c.session.idle() {
            self.finish(key);
        } else {
            self.drive(key);
        }
    }

    /// Graceful shutdown: stop accepting, admit what siblings already handed
    /// over (it is answered, not dropped), then tell every session.
    fn begin_drain(&mut self) {
        if self.listening {
            for listener in &self.ctx.listeners {
                let fd = listener.as_raw_fd();
                if let Err(e) = self.poll.registry().deregister(&mut SourceFd(&fd)) {
                    tracing::warn!(core = self.ctx.index, "deregistering a listener: {e}");
                }
            }
            self.listening = false;
        }
        while let Some(conn) = self.ctx.board.take_handoff(self.ctx.index) {
            self.admit(conn, true);
        }
        // No door may be taken from again, nor keep the wait from blocking.
        self.listen.iter_mut().for_each(Door::clear);
        self.handoffs.clear();
        self.draining = true;
        for key in self.conns.keys() {
            self.shut(key);
        }
    }

    /// Call `on_deadline` for sessions whose deadline passed.
    fn expire(&mut self, now: Instant) {
        // Collected first: a session whose deadline stays in the past is
        // re-armed by `drive` and must wait for the next pass, not loop here.
        let mut due = std::mem::take(&mut self.due);
        due.extend(std::iter::from_fn(|| self.timers.pop_due(now)));
        for &(slot, at) in &due {
            let Some(key) = self.conns.key_of(slot) else {
                continue;
            };
            let Some(c) = self.conns.get_mut(key) else {
                continue;
            };
            if !c.armed.fired(at) {
                continue; // stale: superseded, or a closed connection's
            }
            match &c.linger {
                Some(l) if l.deadline() <= now => {
                    self.close(key);
                    continue;
                }
                Some(_) => {}
                None if c.session.deadline().is_some_and(|d| d <= now) => {
                    c.session.on_deadline(now)
                }
                None => {}
            }
            self.drive(key);
        }
        due.clear();
        self.due = due;
    }

    fn close(&mut self, key: Key) {
        if let Some(c) = self.conns.remove(key) {
            let fd = c.sock.as_raw_fd();
            if let Err(e) = self.poll.registry().deregister(&mut SourceFd(&fd)) {
                tracing::debug!(core = self.ctx.index, "deregistering a connection: {e}");
            }
            drop(c);
            self.ctx.closed();
        }
    }

    fn close_all(&mut self) {
        for key in self.conns.keys() {
            self.close(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::testing::{self, EchoService};

    testing::conformance!(super::run::<EchoService>);
}
