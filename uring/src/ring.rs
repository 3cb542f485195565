//! One io_uring per core thread, with typed operations.
//!
//! Memory safety rests on one rule: whatever the kernel may read or write for
//! an operation (a data buffer, a timespec, an eventfd counter) is moved into
//! the ring's `in_flight` table under the operation's user_data before the
//! entry is queued, and leaves it only with the operation's final completion.
//! Buffers travel by value: the caller gives a `Vec<u8>` and gets it back in
//! the [`Completion`], so no caller can touch or free memory the kernel is
//! writing into. A lent send ([`Ring::send_lent`]) takes a shared `Bytes`
//! instead, whose other holders may keep it: the kernel only reads it, and
//! the reference held keeps the memory alive and, `Bytes` being immutable,
//! unchanged. Receive buffers are the exception: they belong to the ring's
//! pool ([`crate::bufs`]), which the kernel selects from, and the caller only
//! reads one lent by a completion until it gives it back. If the ring is
//! dropped with operations still in flight it cancels them and waits; what
//! never completes is leaked rather than freed (the pool with it).
//!
//! File descriptors are named by number. The kernel takes its own reference to
//! the file when an operation starts, so closing an fd with operations in
//! flight cannot be unsound; it is still a logic error (those operations may
//! never finish), which is why callers shut a socket down and wait for its
//! operations before closing it.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use io_uring::{cqueue, opcode, squeue, types, IoUring};

use crate::bufs::{self, Pool, Received};
use crate::sys;
use crate::token::{decode, encode, Kind, Token};

/// The sizes of a ring.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Submission queue entries (a power of two).
    pub sq_entries: u32,
    /// Completion queue entries: a multishot accept posts one completion per
    /// connection for a single submission, so the CQ is far larger than the SQ.
    pub cq_entries: u32,
    /// The size of each receive buffer ([`crate::bufs`]).
    pub recv_buf_size: usize,
    /// The most receive buffers the ring may make (a power of two): as many
    /// recvs can complete before the caller gives their buffers back.
    pub recv_bufs_max: u16,
    /// The receive buffers made at the start; the pool doubles when it runs dry.
    pub recv_bufs_initial: u16,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            sq_entries: 256,
            cq_entries: 8192,
            recv_buf_size: 16 * 1024,
            recv_bufs_max: 1024,
            recv_bufs_initial: 16,
        }
    }
}

/// The connection operations that [`Ring::cancel`] can target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Recv,
    Send,
    /// A [`Ring::watch_hangup`] poll.
    Poll,
    /// A [`Ring::watch_writable`] poll.
    Writable,
}

impl Op {
    fn kind(self) -> Kind {
        match self {
            Op::Recv => Kind::Recv,
            Op::Send => Kind::Send,
            Op::Poll => Kind::Poll,
            Op::Writable => Kind::Writable,
        }
    }
}

/// Where a listener's accept stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcceptState {
    /// None in flight: [`Ring::arm_accept`] starts one.
    Idle,
    /// In flight, posting a completion per connection.
    Armed,
    /// A cancel was sent; its last completion has not arrived yet.
    Cancelling,
}

/// A finished operation.
#[derive(Debug)]
pub enum Completion {
    /// One result of the accept on listener `listener` (the caller's index,
    /// as armed). `more` false: the multishot ended (cancelled, an error, or
    /// CQ overflow) and must be re-armed to accept again.
    Accepted {
        listener: usize,
        result: io::Result<OwnedFd>,
        more: bool,
    },
    /// A recv finished: [`Ring::bytes`] reads what arrived (none: end of
    /// stream), and [`Ring::give_back`] returns its buffer. `ENOBUFS`: every
    /// receive buffer was out (the pool has grown since); arm it again.
    Received {
        token: Token,
        result: io::Result<Received>,
    },
    /// A send finished: `n` bytes of `buf` went out.
    Sent {
        token: Token,
        buf: Vec<u8>,
        result: io::Result<usize>,
    },
    /// A [`Ring::send_lent`] finished: `n` bytes from its offset went out.
    SentLent {
        token: Token,
        buf: Bytes,
        result: io::Result<usize>,
    },
    /// A [`Ring::watch_hangup`] poll fired (or was cancelled: `ECANCELED`).
    Hangup {
        token: Token,
        result: io::Result<Hangup>,
    },
    /// A [`Ring::watch_writable`] poll fired: the socket takes bytes again
    /// (or failed, or was hung up: the next write says which), or was
    /// cancelled (`ECANCELED`).
    Writable {
        token: Token,
        result: io::Result<()>,
    },
    /// The timer set with [`Ring::set_timer`] expired.
    Timer,
    /// A [`Waker`] woke the ring (wakes coalesce: one completion may stand for several).
    Woken,
}

/// How the peer hung up, as a [`Ring::watch_hangup`] poll saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hangup {
    /// `POLLERR` or `POLLHUP`: the connection is gone both ways (a reset, or
    /// both sides shut down); nothing written will be read.
    pub gone: bool,
    /// `POLLRDHUP`: the peer will send nothing more (a FIN). It may still
    /// read: a client that half-closes after its request wants the answer.
    pub read_closed: bool,
}

/// What the kernel may still touch for an in-flight operation.
#[allow(dead_code)] // the fields are held, never read: they keep memory alive
enum Held {
    /// A data buffer: the SQE points into its heap block, which moving the
    /// `Vec` does not move.
    Buf(Vec<u8>),
    /// A lent buffer: its heap block stays put while this reference holds it.
    Lent(Bytes),
    /// A timeout's relative time.
    Timespec(Box<types::Timespec>),
    /// The 8 bytes an eventfd read lands in.
    Counter(Box<u64>),
    /// No memory of its own (the multishot accept, a poll, a recv, whose
    /// buffer the pool holds): held so teardown waits for them (accepted fds
    /// are not left installed unseen, the pool is not freed under a recv).
    Nothing,
}

/// A handle that wakes a [`Ring`] from another thread.
#[derive(Clone, Debug)]
pub struct Waker(Arc<OwnedFd>);

impl Waker {
    /// Make the ring's blocked wait return with [`Completion::Woken`].
    pub fn wake(&self) {
        // Can fail only if the counter would overflow, which leaves it readable anyway.
        let _ = sys::eventfd_add(self.0.as_fd());
    }
}

/// One io_uring and the operations in flight on it. Not `Send`: it belongs to
/// its core thread (wake it from others with a [`Waker`]).
pub struct Ring {
    ring: IoUring,
    /// Resources of in-flight operations, by user_data.
    in_flight: HashMap<u64, Held>,
    /// Each listener's accept and its sequence number, by the caller's index.
    accepts: Vec<(AcceptState, u32)>,
    /// The armed timer's instant and sequence number.
    timer: Option<(Instant, u32)>,
    timer_seq: u32,
    wake: Arc<OwnedFd>,
    /// Set in Drop: stop re-arming the wake read.
    closing: bool,
    /// Scratch for draining the CQ before handling entries.
    cqes: Vec<(u64, i32, u32)>,
    /// The buffers recvs receive into (after `ring`: dropped after its fd closes).
    pool: Pool,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Ring {
    /// Build a ring and arm its wake read.
    pub fn new(config: Config) -> io::Result<Ring> {
        let ring = build(&config)?;
        let pool = Pool::register(
            &ring,
            config.recv_bufs_max,
            config.recv_bufs_initial,
            config.recv_buf_size,
        )?;
        let mut ring = Ring {
            ring,
            in_flight: HashMap::new(),
            accepts: Vec::new(),
            timer: None,
            timer_seq: 0,
            wake: Arc::new(sys::eventfd()?),
            closing: false,
            cqes: Vec::new(),
            pool,
            _not_send: std::marker::PhantomData,
        };
        ring.arm_wake()?;
        Ok(ring)
    }

    /// The opcodes this kernel supports (IORING_REGISTER_PROBE).
    pub(crate) fn probe_opcodes(&self) -> io::Result<io_uring::Probe> {
        let mut probe = io_uring::Probe::new();
        self.ring.submitter().register_probe(&mut probe)?;
        Ok(probe)
    }

    /// A handle other threads wake this ring with.
    pub fn waker(&self) -> Waker {
        Waker(self.wake.clone())
    }

    /// Operations started and not yet finished (the wake read included).
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Start a multishot accept on `listener` (the caller's index `index`,
    /// which its completions carry) unless one is in flight there (returns
    /// whether it started). Accepted fds are non-blocking and close-on-exec.
    pub fn arm_accept(&mut self, index: usize, listener: BorrowedFd<'_>) -> io::Result<bool> {
        self.arm_accept_as(index, listener, true)
    }

    /// Start a single-shot accept on `listener` unless one is in flight: it
    /// completes once (`more` false), and is armed again for the next.
    ///
    /// Where several rings (processes) share a listener this is what spreads
    /// connections: the kernel queues each ring's accept on the listener as an
    /// exclusive waiter and wakes the one at the head. A multishot stays
    /// there, so the ring armed first takes every connection; a single-shot
    /// leaves on its wake-up and is queued again at the tail when re-armed.
    pub fn arm_accept_once(&mut self, index: usize, listener: BorrowedFd<'_>) -> io::Result<bool> {
        self.arm_accept_as(index, listener, false)
    }

    fn arm_accept_as(
        &mut self,
        index: usize,
        listener: BorrowedFd<'_>,
        multishot: bool,
    ) -> io::Result<bool> {
        if index >= self.accepts.len() {
            self.accepts.resize(index + 1, (AcceptState::Idle, 0));
        }
        let (state, seq) = self.accepts[index];
        if state != AcceptState::Idle {
            return Ok(false);
        }
        let seq = Token::next_generation(seq);
        let fd = types::Fd(listener.as_raw_fd());
        let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        let entry = if multishot {
            opcode::AcceptMulti::new(fd).flags(flags).build()
        } else {
            opcode::Accept::new(fd, std::ptr::null_mut(), std::ptr::null_mut())
                .flags(flags)
                .build()
        };
        self.start(
            encode(Kind::Accept, Token::new(index as u32, seq)),
            entry,
            Held::Nothing,
        )?;
        self.accepts[index] = (AcceptState::Armed, seq);
        Ok(true)
    }

    /// Cancel listener `index`'s accept, if armed: connections then wait in
    /// the listen backlog. Its last completion ([`Completion::Accepted`] with
    /// `more` false) returns the state to [`AcceptState::Idle`].
    pub fn cancel_accept(&mut self, index: usize) -> io::Result<()> {
        if let Some(&(AcceptState::Armed, seq)) = self.accepts.get(index) {
            self.cancel_user_data(encode(Kind::Accept, Token::new(index as u32, seq)))?;
            self.accepts[index].0 = AcceptState::Cancelling;
        }
        Ok(())
    }

    /// Where listener `index`'s accept stands (Idle: never armed).
    pub fn accept_state(&self, index: usize) -> AcceptState {
        self.accepts
            .get(index)
            .map_or(AcceptState::Idle, |&(state, _)| state)
    }

    /// Receive into one of the ring's buffers, taken only when bytes arrive
    /// ([`crate::bufs`]); ends with [`Completion::Received`].
    pub fn recv(&mut self, token: Token, fd: BorrowedFd<'_>) -> io::Result<()> {
        let len = op_len_of(self.pool.size());
        let entry = opcode::Recv::new(types::Fd(fd.as_raw_fd()), std::ptr::null_mut(), len)
            .buf_group(bufs::GROUP)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT);
        self.start(encode(Kind::Recv, token), entry, Held::Nothing)
    }

    /// The bytes a [`Completion::Received`] brought.
    pub fn bytes(&self, received: &Received) -> &[u8] {
        self.pool.bytes(received)
    }

    /// Return a received buffer to the pool once its bytes are consumed.
    pub fn give_back(&mut self, received: Received) {
        if let Some(bid) = received.bid {
            self.pool.give_back(bid);
        }
    }

    /// Receive buffers made so far (the pool grows when recvs find it empty).
    pub fn recv_buffers(&self) -> usize {
        self.pool.len()
    }

    /// Send `buf[..buf.len()]` (MSG_NOSIGNAL: a closed peer is an EPIPE, not a
    /// signal); the buffer comes back in [`Completion::Sent`].
    pub fn send(&mut self, token: Token, fd: BorrowedFd<'_>, buf: Vec<u8>) -> io::Result<()> {
        let entry = send_entry(fd, &buf);
        self.start(encode(Kind::Send, token), entry, Held::Buf(buf))
    }

    /// Send `buf[from..]`, as [`Ring::send`], from a buffer shared with its
    /// owner; it comes back whole in [`Completion::SentLent`], so a caller can
    /// send the rest from where this one stopped. Panics if `from` is past the end.
    pub fn send_lent(
        &mut self,
        token: Token,
        fd: BorrowedFd<'_>,
        buf: Bytes,
        from: usize,
    ) -> io::Result<()> {
        let entry = send_entry(fd, &buf[from..]);
        self.start(encode(Kind::Send, token), entry, Held::Lent(buf))
    }

    /// Complete once socket `fd` has room to write (`POLLOUT`; an error or
    /// a hang-up completes it too), for a write made outside the ring (a
    /// `sendfile`) that found the socket full. One-shot; at most one per
    /// token. Ends with [`Completion::Writable`].
    pub fn watch_writable(&mut self, token: Token, fd: BorrowedFd<'_>) -> io::Result<()> {
        let entry = opcode::PollAdd::new(types::Fd(fd.as_raw_fd()), libc::POLLOUT as u32).build();
        self.start(encode(Kind::Writable, token), entry, Held::Nothing)
    }

    /// Complete once the peer of socket `fd` hangs up: `POLLRDHUP` (its FIN),
    /// `POLLHUP` or `POLLERR`. `POLLIN` is not asked for, so data the peer
    /// sends (a pipelined request) does not fire it. On a socket whose FIN
    /// has arrived it fires at once (whatever the mask: seen on Linux 6.18),
    /// so do not arm it again after a `read_closed`. One-shot; at most one per
    /// token. Ends with [`Completion::Hangup`].
    pub fn watch_hangup(&mut self, token: Token, fd: BorrowedFd<'_>) -> io::Result<()> {
        let events = libc::POLLRDHUP | libc::POLLERR | libc::POLLHUP;
        let entry = opcode::PollAdd::new(types::Fd(fd.as_raw_fd()), events as u32).build();
        self.start(encode(Kind::Poll, token), entry, Held::Nothing)
    }

    /// Ask the kernel to cancel `token`'s `op`. The operation still completes
    /// (usually with ECANCELED), which is when its buffer comes back.
    pub fn cancel(&mut self, op: Op, token: Token) -> io::Result<()> {
        let target = encode(op.kind(), token);
        if self.in_flight.contains_key(&target) {
            self.cancel_user_data(target)?;
        }
        Ok(())
    }

    /// Make sure a [`Completion::Timer`] arrives by `at` (the caller's next
    /// deadline). An armed timer that fires no later is kept; a later one is
    /// replaced. A timer that fires early only costs the caller a pass.
    pub fn set_timer(&mut self, at: Instant) -> io::Result<()> {
        if let Some((armed, seq)) = self.timer {
            if armed <= at {
                return Ok(());
            }
            let entry = opcode::TimeoutRemove::new(encode(Kind::Timer, Token::new(0, seq)))
                .build()
                .user_data(encode(Kind::Cancel, Token::new(0, seq)));
            self.push(&entry)?;
            self.timer = None;
        }
        let seq = Token::next_generation(self.timer_seq);
        let ts = Box::new(types::Timespec::from(
            at.saturating_duration_since(Instant::now()),
        ));
        let entry = opcode::Timeout::new(&*ts).build();
        self.start(
            encode(Kind::Timer, Token::new(0, seq)),
            entry,
            Held::Timespec(ts),
        )?;
        self.timer_seq = seq;
        self.timer = Some((at, seq));
        Ok(())
    }

    /// When the armed timer fires, if one is armed.
    pub fn timer(&self) -> Option<Instant> {
        self.timer.map(|(at, _)| at)
    }

    /// Hand queued operations to the kernel without waiting, and have it post
    /// the completions that are ready (with deferred task work they are posted
    /// only when asked for: GETEVENTS with no minimum).
    pub fn submit(&mut self) -> io::Result<()> {
        let pending = self.ring.submission().len();
        // SAFETY: no argument is passed; the entries submitted were pushed with
        // their buffers held in `in_flight` (see `start`).
        settle(unsafe {
            self.ring.submitter().enter::<libc::sigset_t>(
                pending as u32,
                0,
                IORING_ENTER_GETEVENTS,
                None,
            )
        })
    }

    /// Hand queued operations to the kernel and wait until at least one
    /// completion is ready (at once if one already is).
    pub fn submit_and_wait(&mut self) -> io::Result<()> {
        settle(self.ring.submit_and_wait(1))
    }

    /// Move every ready completion into `out`.
    pub fn complete(&mut self, out: &mut Vec<Completion>) {
        let mut cqes = std::mem::take(&mut self.cqes);
        cqes.extend(
            self.ring
                .completion()
                .map(|c| (c.user_data(), c.result(), c.flags())),
        );
        for &(user_data, result, flags) in &cqes {
            if let Some(c) = self.translate(user_data, result, flags) {
                out.push(c);
            }
        }
        cqes.clear();
        self.cqes = cqes;
    }

    fn translate(&mut self, user_data: u64, res: i32, flags: u32) -> Option<Completion> {
        let (kind, token) = decode(user_data)?;
        let result = if res >= 0 {
            Ok(res as usize)
        } else {
            Err(io::Error::from_raw_os_error(-res))
        };
        match kind {
            Kind::Accept => {
                let more = cqueue::more(flags);
                let index = token.slot() as usize;
                if !more {
                    self.in_flight.remove(&user_data);
                    if let Some(accept) = self
                        .accepts
                        .get_mut(index)
                        .filter(|(_, seq)| *seq == token.generation())
                    {
                        accept.0 = AcceptState::Idle;
                    }
                }
                let result = result.map(|fd| {
                    // SAFETY: a successful accept result is a new descriptor the
                    // kernel installed for this process; nothing else owns it.
                    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
                });
                Some(Completion::Accepted {
                    listener: index,
                    result,
                    more,
                })
            }
            Kind::Recv => {
                self.in_flight.remove(&user_data)?;
                let bid = cqueue::buffer_select(flags);
                let result = match result {
                    Ok(len) => Ok(Received { bid, len }),
                    Err(e) => {
                        if let Some(bid) = bid {
                            self.pool.give_back(bid);
                        }
                        if e.raw_os_error() == Some(libc::ENOBUFS) {
                            self.pool.grow();
                        }
                        Err(e)
                    }
                };
                Some(Completion::Received { token, result })
            }
            Kind::Send => match self.in_flight.remove(&user_data)? {
                Held::Buf(buf) => Some(Completion::Sent { token, buf, result }),
                Held::Lent(buf) => Some(Completion::SentLent { token, buf, result }),
                _ => None,
            },
            Kind::Poll => {
                self.in_flight.remove(&user_data)?;
                let result = result.map(|revents| {
                    let revents = revents as i16;
                    Hangup {
                        gone: revents & (libc::POLLERR | libc::POLLHUP) != 0,
                        read_closed: revents & libc::POLLRDHUP != 0,
                    }
                });
                Some(Completion::Hangup { token, result })
            }
            Kind::Writable => {
                self.in_flight.remove(&user_data)?;
                Some(Completion::Writable {
                    token,
                    result: result.map(drop),
                })
            }
            Kind::Timer => {
                self.in_flight.remove(&user_data);
                let current = matches!(self.timer, Some((_, seq)) if seq == token.generation());
                if current {
                    self.timer = None;
                }
                // ETIME: it expired. ECANCELED: an earlier timer replaced it.
                (current && res == -libc::ETIME).then_some(Completion::Timer)
            }
            Kind::Wake => {
                self.in_flight.remove(&user_data);
                if res < 0 || self.closing {
                    return None;
                }
                // Re-arming can fail only if the kernel refuses submissions,
                // which the caller's next submit reports.
                let _ = self.arm_wake();
                Some(Completion::Woken)
            }
            Kind::Cancel => None,
        }
    }

    fn arm_wake(&mut self) -> io::Result<()> {
        let mut counter = Box::new(0u64);
        let entry = opcode::Read::new(
            types::Fd(self.wake.as_raw_fd()),
            (&mut *counter as *mut u64).cast(),
            8,
        )
        .build();
        self.start(
            encode(Kind::Wake, Token::new(0, 0)),
            entry,
            Held::Counter(counter),
        )
    }

    fn cancel_user_data(&mut self, target: u64) -> io::Result<()> {
        let entry = opcode::AsyncCancel::new(target)
            .build()
            .user_data(encode(Kind::Cancel, Token::new(0, 0)));
        self.push(&entry)
    }

    /// Record `held` under `user_data`, then queue `entry` with it.
    fn start(&mut self, user_data: u64, entry: squeue::Entry, held: Held) -> io::Result<()> {
        if self.in_flight.contains_key(&user_data) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "this operation is already in flight for this token",
            ));
        }
        self.in_flight.insert(user_data, held);
        if let Err(e) = self.push(&entry.user_data(user_data)) {
            // Never queued: the kernel never saw the resources.
            self.in_flight.remove(&user_data);
            return Err(e);
        }
        Ok(())
    }

    fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every pointer an entry carries points into memory that
            // `start` moved into `self.in_flight` under the entry's user_data
            // (a heap block, which moving its owner does not move), or is
            // absent (accept, cancels). That memory leaves the table only when
            // the operation's final completion is reaped, or is leaked by Drop
            // if it never is, so the kernel never touches freed memory.
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                return Ok(());
            }
            // The SQ is full: hand what it holds to the kernel to make room.
            self.ring.submit()?;
        }
    }
}

/// A submit's result: EINTR (a signal) and EBUSY (completions must be reaped
/// before more can be posted) are not failures; the caller reaps and goes on.
/// `IORING_ENTER_GETEVENTS` (linux/io_uring.h), which the io-uring crate keeps private.
const IORING_ENTER_GETEVENTS: u32 = 1;

/// A ring for one core thread. Task work is deferred to the thread's own
/// io_uring_enter (DEFER_TASKRUN, one issuer): a completion then costs no
/// interrupt of the thread while it runs a pass, which at 100k requests a
/// second was a tenth of the core in reschedule IPIs and task-work lock
/// contention. Kernels before 6.1 refuse the flags (EINVAL): they get a plain ring.
fn build(config: &Config) -> io::Result<IoUring> {
    let deferred = IoUring::builder()
        .setup_cqsize(config.cq_entries)
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(config.sq_entries);
    match deferred {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => IoUring::builder()
            .setup_cqsize(config.cq_entries)
            .build(config.sq_entries),
        other => other,
    }
}

fn settle(r: io::Result<usize>) -> io::Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EINTR | libc::EBUSY | libc::EAGAIN)
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// A send of `bytes` (MSG_NOSIGNAL); the caller holds their memory until it completes.
fn send_entry(fd: BorrowedFd<'_>, bytes: &[u8]) -> squeue::Entry {
    opcode::Send::new(types::Fd(fd.as_raw_fd()), bytes.as_ptr(), op_len(bytes))
        .flags(libc::MSG_NOSIGNAL)
        .build()
}

fn op_len(buf: &[u8]) -> u32 {
    op_len_of(buf.len())
}

fn op_len_of(len: usize) -> u32 {
    len.min(u32::MAX as usize) as u32
}

impl Ring {
    /// Cancel what is in flight and wait (up to a second) for it to finish.
    /// Returns whether everything did.
    fn quiesce(&mut self) -> bool {
        self.closing = true;
        let targets: Vec<u64> = self.in_flight.keys().copied().collect();
        for target in targets {
            if self.cancel_user_data(target).is_err() {
                break;
            }
        }
        let give_up = Instant::now() + Duration::from_secs(1);
        let mut done = Vec::new();
        while !self.in_flight.is_empty() && Instant::now() < give_up {
            // The wait's own timeout: read by the kernel during the call only.
            let ts = types::Timespec::from(Duration::from_millis(100));
            let args = types::SubmitArgs::new().timespec(&ts);
            match self.ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR)) => {}
                Err(_) => break,
            }
            self.complete(&mut done);
            done.clear(); // closes accepted fds, frees returned buffers
        }
        self.in_flight.is_empty()
    }
}

impl Drop for Ring {
    /// The kernel may write into a buffer until its operation completes, and
    /// a multishot accept may still install fds: cancel and wait. What never
    /// completes is leaked rather than freed under the kernel.
    fn drop(&mut self) {
        if self.quiesce() {
            self.pool.unregister(&self.ring);
        } else {
            std::mem::forget(std::mem::take(&mut self.in_flight));
        }
    }
}

#[cfg(test)]
impl Ring {
    pub(crate) fn quiesce_for_test(&mut self) -> bool {
        self.quiesce()
    }
}
