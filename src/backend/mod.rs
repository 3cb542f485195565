//! The I/O backends: one event loop per core thread, driving [`Session`]s.
//!
//! A backend owns sockets, buffers, readiness or completions, and timers. It
//! knows nothing of HTTP (nor of Python): each connection is a [`Session`] that
//! is handed the bytes read and asked for the bytes to write. Both backends
//! share the accept batch ([`accept`]) and accept sharing ([`share`]) rules.
//!
//! - [`uring`]: io_uring through the `m0serve-uring` crate (Linux only).
//! - [`portable`]: mio (epoll on Linux, kqueue on macOS).

pub mod accept;
pub mod admit;
pub mod guard;
pub mod held;
pub mod ktls;
pub mod linger;
pub mod pass_end;
pub mod portable;
pub mod select;
pub mod sendfile;
pub mod share;
pub mod slab;
#[cfg(test)]
pub mod testing;
pub mod timers;
#[cfg(target_os = "linux")]
pub mod uring;

use std::net::SocketAddr;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::ipc::tally;

pub use linger::Linger;
pub use select::{select, Choice, Kind};

/// What a session wants written next.
pub enum Output<'a> {
    /// Nothing to write now.
    None,
    /// These bytes (the backend reports how many it wrote with [`Session::on_sent`]).
    Bytes(&'a [u8]),
    /// `len` bytes of the open file `fd` from `offset` (zero-copy where the backend can).
    File { fd: RawFd, offset: u64, len: usize },
}

/// One connection's protocol state, as the backend sees it.
///
/// The backend calls `on_read`/`on_eof` with input, then drains [`Session::output`]
/// until it is [`Output::None`], reporting progress with `on_sent`. It reads
/// more only while [`Session::wants_read`], closes once [`Session::done`] and the
/// output is drained, and calls [`Session::on_deadline`] when
/// [`Session::deadline`] has passed.
pub trait Session {
    /// Bytes arrived from the peer.
    fn on_read(&mut self, data: &[u8], now: Instant);
    /// The peer closed its sending side (a read returned 0).
    fn on_eof(&mut self, now: Instant);
    /// The peer closed its sending side while the session was not reading
    /// (a FIN seen by the hang-up watch). Bytes sent before it may still be
    /// unread: they, then `on_eof`, come when the session reads again. A
    /// session may take it as its client gone for what it is waiting on.
    fn on_hangup(&mut self, _now: Instant) {}
    /// The next bytes to write.
    fn output(&mut self) -> Output<'_>;
    /// `n` bytes of the last [`Session::output`] were written.
    fn on_sent(&mut self, n: usize, now: Instant);
    /// The next bytes to write as the buffer that holds them, lent whole to
    /// a backend that must own what it writes until the write completes
    /// (io_uring), so that it sends them without a copy in user space: `(buf, from)`,
    /// the bytes being `buf[from..]`. `None` where the session has no buffer
    /// worth lending; the backend then copies from [`Session::output`]. Until
    /// the buffer comes back with [`Session::on_sent_lent`], `output` is
    /// [`Output::None`] and nothing more is lent.
    fn lend_output(&mut self) -> Option<(Bytes, usize)> {
        None
    }
    /// A lent buffer is back: `n` of its bytes were written (as `on_sent`).
    fn on_sent_lent(&mut self, buf: Bytes, n: usize, now: Instant) {
        drop(buf);
        self.on_sent(n, now);
    }
    /// Whether the session wants more input now (false while a response is
    /// being produced, so pipelined requests wait in the kernel's buffer).
    fn wants_read(&self) -> bool;
    /// The connection is finished: close it once the output is drained.
    fn done(&self) -> bool;
    /// The session gave up on its client and dropped the output it had
    /// queued (nothing taken for the send timeout, a WebSocket Close never
    /// answered, a TLS abort): close now, cutting a write still in flight,
    /// which would otherwise wait for as long as the client reads nothing.
    /// Not for a session that is merely done: its last write is finished.
    fn aborted(&self) -> bool {
        false
    }
    /// When the session wants [`Session::on_deadline`] called (a read timeout).
    fn deadline(&self) -> Option<Instant>;
    /// The deadline passed.
    fn on_deadline(&mut self, now: Instant);
    /// Between requests with nothing pending: safe to close at shutdown.
    fn idle(&self) -> bool;
    /// Graceful shutdown began: finish the request in flight, then be done.
    fn on_shutdown(&mut self);
    /// The session's [`Notifier`] fired (another thread has something for
    /// it). The backend then drives the session as after `on_read`: output,
    /// reads if it wants input again, `done`, the deadline.
    fn on_notify(&mut self, now: Instant);
    /// Asked when the backend is about to close the connection (the
    /// session is [`Session::done`], or idle in a drain) and its output is
    /// written: whether the peer may still be sending (a body or messages the
    /// session will not read, or requests pipelined behind its last answer),
    /// so the connection is closed lingering ([`linger`]): half-closed, and
    /// read and dropped until the peer's end of input or a quiet spell,
    /// instead of closed under bytes that would reset it.
    fn linger(&self) -> Linger {
        Linger::IfUnread
    }
    /// Asked when nothing of the connection is in flight (no read, no
    /// write, its output drained) and it is not closing: the keys to hand
    /// its records to the kernel ([`ktls`]), once, when a TLS session is
    /// ready for it. From then on the session is a plain one; the backend
    /// installs the keys, or closes the connection if the kernel refuses them.
    fn kernel_tls(&mut self) -> Option<ktls::Keys> {
        None
    }
}

/// The peer of an accepted connection.
#[derive(Clone, Debug)]
pub enum Peer {
    Tcp(SocketAddr),
    /// A Unix domain socket peer (unnamed, as clients usually are).
    Unix,
}

/// Makes a [`Session`] for each admitted connection; one per core thread.
pub trait Service {
    type Session: Session;
    /// A session for a new connection from `peer`, accepted on listener
    /// `listener` (its index in [`CoreContext::listeners`]); `notifier`
    /// wakes it from other threads.
    fn open(&mut self, peer: &Peer, listener: usize, notifier: Notifier) -> Self::Session;
}

/// Wakes one session from another thread: the session's key goes to its
/// core's ready queue, the core is woken only if parked, and the backend calls
/// the session's [`Session::on_notify`] in its next pass. A notification for a
/// session that has closed since finds a newer generation in its slot (or
/// none) and is dropped.
#[derive(Clone)]
pub struct Notifier {
    board: Arc<share::Board>,
    core: usize,
    key: slab::Key,
}

impl Notifier {
    /// The notifier of the session `key` on core `core`.
    pub fn new(board: Arc<share::Board>, core: usize, key: slab::Key) -> Notifier {
        Notifier { board, core, key }
    }

    /// Queue the session for its core's next pass (any thread, lock-free),
    /// waking the core if it is parked, unless this thread [`held`] its wakes.
    pub fn notify(&self) {
        self.board.queue(self.core, self.key.to_bits());
        held::wake(&self.board, self.core);
    }
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("core", &self.core)
            .field("key", &self.key)
            .finish()
    }
}

/// An accepted connection not yet admitted by a core (it may cross cores).
pub struct Accepted {
    pub fd: OwnedFd,
    /// The listener it came from (its index in [`CoreContext::listeners`]).
    pub listener: usize,
}

/// Wakes a core thread parked in its wait. Must be cheap when called often:
/// callers only wake a core whose [`Parked`] flag is set.
pub trait Wake: Send + Sync {
    fn wake(&self);
}

/// Set while a core is (about to be) blocked in its wait, so that others wake
/// it only then: the common path makes no syscall. Of the threads that
/// notify a parked core, only the first wakes it ([`Parked::claim_wake`]):
/// the rest find their notifications taken in the pass that wake starts.
#[derive(Default)]
pub struct Parked(AtomicU8);

const RUNNING: u8 = 0;
const PARKED: u8 = 1;
/// Parked, and a wake already sent: the core has not begun its pass yet.
const WOKEN: u8 = 2;

impl Parked {
    /// The core is about to wait (`true`), or has begun a pass (`false`).
    pub fn set(&self, parked: bool) {
        self.0
            .store(if parked { PARKED } else { RUNNING }, Ordering::SeqCst);
    }

    /// Whether the core is in (or about to enter) its wait, woken or not.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::SeqCst) != RUNNING
    }

    /// Whether the caller is the one to wake the parked core: true once per
    /// wait. Woken per notification instead, a core that a pool thread
    /// answers to in a burst got an eventfd write per answer before it ran
    /// (bench/results/core-wake-once.md).
    pub fn claim_wake(&self) -> bool {
        self.0.load(Ordering::SeqCst) == PARKED
            && self
                .0
                .compare_exchange(PARKED, WOKEN, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
    }
}

/// Everything a core thread's loop needs besides its [`Service`].
pub struct CoreContext {
    /// This core's index among the server's cores.
    pub index: usize,
    /// The listening sockets, shared by every core (non-blocking), in the
    /// order the server was given them: most servers have one.
    pub listeners: Vec<Arc<OwnedFd>>,
    /// The cores' shared board: hand-off doors, pass clocks, wakes.
    pub board: Arc<share::Board>,
    /// Shutdown and connection limits shared by all cores.
    pub control: Arc<Control>,
    /// How many admissions a door takes per pass (`M0_ACCEPT_BATCH`).
    pub batch: accept::Batch,
    /// Other processes accept from the same listener: io_uring arms one
    /// accept at a time so the kernel rotates connections among them
    /// (the `M0_ACCEPT_ROTATE` knob turns it off, the negative arm).
    pub rotate_accepts: bool,
    /// Other processes accept from the same listener: how often an io_uring
    /// core whose accept saw nothing looks at it itself ([`accept::RECHECK`]).
    pub recheck: Option<std::time::Duration>,
    /// How long a finished connection whose peer may still be sending is
    /// read and dropped before it closes (None: closed at once; [`linger`]).
    pub linger: Option<linger::Settings>,
    /// This core's slot of the worker's heartbeat, stamped as the loop
    /// passes: the loop wakes for it even with nothing else to do (None:
    /// nobody watches).
    pub heartbeat: Option<crate::ipc::heartbeat::Pulse>,
}

impl CoreContext {
    /// Stamp the heartbeat if due; when the loop must next wake for it.
    pub fn beat(&mut self, now: Instant) -> Option<Instant> {
        self.heartbeat.as_mut().map(|pulse| pulse.tick(now))
    }

    /// Record that this core admitted a connection (`handed`: a sibling passed it
    /// over). Both backends call this, so the debug log line that tests count
    /// connections per core by is the same on each.
    pub fn admitted(&self, handed: bool) {
        self.board.count(self.index, 1);
        tracing::debug!(core = self.index, handed, "admitted connection");
    }

    /// The notifier of session `key` on this core.
    pub fn notifier(&self, key: slab::Key) -> Notifier {
        Notifier::new(self.board.clone(), self.index, key)
    }

    /// Record that a connection this core owned was closed.
    pub fn closed(&self) {
        self.board.count(self.index, -1);
        self.control.release();
    }
}

/// Process-wide state every core reads: the shutdown signal and the connection limit.
pub struct Control {
    shutdown: AtomicBool,
    /// When set, past this instant every connection is closed and the loops exit.
    deadline: std::sync::Mutex<Option<Instant>>,
    /// Live connections across all cores, against `max_connections`.
    pub connections: std::sync::atomic::AtomicUsize,
    pub max_connections: usize,
    /// The connections sibling worker processes hold, where a supervisor
    /// shares them ([`tally`]).
    tally: Option<tally::Tally>,
}

impl Control {
    pub fn new(max_connections: usize) -> Self {
        Control {
            shutdown: AtomicBool::new(false),
            deadline: std::sync::Mutex::new(None),
            connections: Default::default(),
            max_connections,
            tally: None,
        }
    }

    /// Keep count in `tally` of the connections this process holds, from
    /// [`Control::join_tally`] to the start of its drain.
    pub fn with_tally(mut self, tally: Option<tally::Tally>) -> Self {
        self.tally = tally;
        self
    }

    /// Take a slot in the tally: this process is ready, and from now on a
    /// sibling holding more connections holds back for it.
    pub fn join_tally(&self) {
        if let Some(tally) = &self.tally {
            tally.join(self.connections.load(Ordering::Acquire));
        }
    }

    /// Whether to accept now: below the connection limit, and no sibling
    /// worker holds fewer connections than this process by more than
    /// [`tally::SLACK`]. Not accepting leaves the connection in the shared
    /// listener's queue for a sibling (an io_uring accept armed at the limit
    /// would take one and hold it unserved, so it is not armed again; one
    /// already armed is left to take its one, see the uring backend's
    /// `Core::take_absorbed`); a door so held back is retried as at the
    /// connection limit.
    pub fn may_accept(&self) -> bool {
        self.connections.load(Ordering::Acquire) < self.max_connections
            && self.tally.as_ref().is_none_or(tally::Tally::may_accept)
    }
    /// Begin graceful shutdown; connections still open at `deadline` are closed.
    pub fn shut_down(&self, deadline: Instant) {
        *self.deadline.lock().unwrap() = Some(deadline);
        self.shutdown.store(true, Ordering::SeqCst);
        if let Some(tally) = &self.tally {
            tally.leave();
        }
    }
    pub fn shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }
    pub fn deadline(&self) -> Option<Instant> {
        *self.deadline.lock().unwrap()
    }
    /// Reserve a connection slot; false at the limit (the connection waits in the backlog).
    pub fn try_reserve(&self) -> bool {
        let reserved = self
            .connections
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_connections).then_some(n + 1)
            })
            .is_ok();
        if reserved {
            self.tallied(true);
        }
        reserved
    }
    pub fn release(&self) {
        self.connections.fetch_sub(1, Ordering::AcqRel);
        self.tallied(false);
    }
    fn tallied(&self, more: bool) {
        if let Some(tally) = &self.tally {
            tally.count(more);
        }
    }
}
