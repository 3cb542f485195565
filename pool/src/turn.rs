//! The GIL turn: pool threads share the GIL in slices, and hand it over.
//!
//! Why it exists. CPython hands the GIL over for real only when a waiter has
//! asked for it after its 5 ms switch interval. A pool thread that finishes a
//! job, drops the GIL, pops the next job and re-attaches wins the GIL back
//! before the threads its drop signalled are even scheduled, so a job another
//! thread already took waits out the convoy: hundreds of milliseconds of tail
//! on a 0.3 ms view. Two rules fix that:
//!
//! - **The hand-off barrier.** Two counters: threads parked in the re-attach
//!   ([`Turn::waiters`]) and attaches completed. A thread counts itself a
//!   waiter around its re-attach. A thread whose run of the GIL has lasted the
//!   slice ([`SLICE`]) and that drops the GIL while a waiter is parked yields
//!   (`sched_yield`, at most [`YIELD_BOUND`]) until an attach completes: the
//!   waiter is already inside the acquisition, so the GIL never sits idle
//!   while it wakes; the yield only stops the thread that just ran from
//!   winning the race back. No syscall on the common path, nothing held across
//!   a job, and a view that releases the GIL itself (a database wait) contends
//!   with nobody.
//! - **The keep rule.** Inside its slice a thread takes a job that is already
//!   queued without dropping the GIL (`try_next_job`: one pop, never a spin or
//!   a park). Every drop inside a slice would signal CPython's condition
//!   variable, waking a parked waiter only to find the GIL taken again and
//!   send it to the back of the queue; two threads then alternate while the
//!   others starve. With the rule, a slice's only drops are its last (the
//!   hand-off) and those a view makes itself.
//!   And a thread takes even the first job of a run only once it holds the
//!   GIL: it waits for a job to be queued, attaches, then pops. Popped first,
//!   a job would wait in the hands of a thread parked on the GIL while the
//!   slice's holder served the jobs queued after it; with one such job per
//!   waiter, they set the tail (taken under the GIL, every job is served in
//!   the order it was queued; docs/design/gil-turn.md has the figures).
//!
//! A run (the slice's clock) begins only after the thread waited for the GIL
//! (longer than [`WAITED`]) or yielded it, so an uncontended thread drops
//! between jobs as it always did. A pool of one has no barrier.
//!
//! The switches ([`TurnConfig`]) are the caller's: m0serve reads its
//! pool knobs once at start and hands them here.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::stats::Stats;

/// How long a thread may hold the GIL for queued jobs before it hands off.
/// Per job, the hand-off (a thread switch and a condvar wake) cost a short
/// view much of its throughput; per millisecond it costs a few percent, and
/// no waiter waits more than a slice per thread ahead of it
/// (docs/design/gil-turn.md).
pub const SLICE: Duration = Duration::from_millis(1);

/// The longest a thread yields waiting for a waiter's attach to complete.
pub const YIELD_BOUND: Duration = Duration::from_millis(1);

/// A re-attach that took longer than this met contention: a run begins.
pub const WAITED: Duration = Duration::from_micros(20);

/// The mechanism's switches, from the caller (m0serve's pool knobs)
/// or a test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TurnConfig {
    /// The barrier and the keep rule (default on).
    pub turn: bool,
    /// The keep rule (default on; needs `turn`).
    pub keep: bool,
    /// Collect and print histograms (default off).
    pub debug: bool,
    /// Schedule the pool threads behind the core threads
    /// ([`crate::behind_cores`]; default on but in a process confined to
    /// its cores' CPUs, [`TurnConfig::defaults`]).
    pub batch: bool,
    /// Core threads wake the pool at the end of their pass, and the pool's
    /// threads wake each other in a chain ([`crate::Pool::waker`]; default
    /// on only in a process confined to its cores' CPUs, where its pool
    /// threads share the core's CPU and it cut the CPU per request,
    /// bench/results/pool-chain-workers.md; elsewhere it measured no gain).
    pub defer_wake: bool,
    /// Core threads are scheduled behind the app threads that share their
    /// CPUs ([`crate::core_behind_app`]; default on only in a process
    /// confined to its cores' CPUs whose pool is not batched: never both
    /// sides of the pair).
    pub core_batch: bool,
}

impl Default for TurnConfig {
    /// [`TurnConfig::defaults`] for a process not confined to its cores' CPUs.
    fn default() -> Self {
        TurnConfig::defaults(false)
    }
}

impl TurnConfig {
    /// These switches without the turn (barrier and keep rule): for an
    /// interpreter without a GIL, where each thread attaches at once and a
    /// thread between jobs detaches, so a stop-the-world pause (the
    /// collector's) never waits on it.
    pub fn without_gil(self) -> TurnConfig {
        TurnConfig {
            turn: false,
            keep: false,
            ..self
        }
    }

    /// The defaults for a process whose threads are (or not) `confined` to
    /// the CPUs of its core threads (a worker among several): there the
    /// pool threads always share the cores' CPUs, and on CPU-bound views
    /// SCHED_BATCH cost more than it saved (bench/HISTORY.md, "The pool in
    /// a worker"), so
    /// the cores go behind the pool instead.
    pub fn defaults(confined: bool) -> TurnConfig {
        TurnConfig {
            turn: true,
            keep: true,
            debug: false,
            batch: !confined,
            defer_wake: confined,
            core_batch: confined,
        }
    }
}

/// The pool's shared turn state: the barrier's two counters and the stats.
pub(crate) struct Turn {
    /// Barrier on (turn enabled and more than one thread).
    barrier: bool,
    keep: bool,
    /// Threads parked in the re-attach.
    waiters: AtomicUsize,
    /// Attaches completed.
    attaches: AtomicU64,
    /// Pool threads are scheduled behind the cores.
    pub(crate) batch: bool,
    pub(crate) stats: Stats,
}

impl Turn {
    pub(crate) fn new(config: TurnConfig, threads: usize) -> Turn {
        let barrier = config.turn && threads > 1;
        Turn {
            barrier,
            keep: barrier && config.keep,
            waiters: AtomicUsize::new(0),
            attaches: AtomicU64::new(0),
            batch: config.batch,
            stats: Stats::new(config.debug),
        }
    }

    /// Whether threads take their jobs only while holding the GIL (the keep
    /// rule's first half): a job never waits in the hands of a thread parked
    /// on the GIL, while the thread holding it serves later ones.
    pub(crate) fn takes_attached(&self) -> bool {
        self.keep
    }

    /// Whether another thread waits in the re-attach to take queued jobs
    /// (the keep rule's threads pop only once attached).
    pub(crate) fn standing_by(&self) -> bool {
        self.keep && self.waiters.load(Ordering::SeqCst) > 0
    }

    /// Whether a run that began at `start` may take another queued job now.
    pub(crate) fn may_keep(&self, run: &Run) -> bool {
        self.keep && run.start.is_some_and(|s| s.elapsed() < SLICE)
    }

    /// Around a re-attach: count the thread as a waiter while `attach` blocks
    /// for the GIL; `attach` calls [`Turn::attached`] first thing once it holds it.
    pub(crate) fn enter_attach(&self) -> Instant {
        if self.barrier {
            self.waiters.fetch_add(1, Ordering::SeqCst);
        }
        Instant::now()
    }

    /// The GIL is held: the attach asked for at `asked` completed.
    pub(crate) fn attached(&self, asked: Instant, run: &mut Run) {
        let waited = asked.elapsed();
        if self.barrier {
            self.waiters.fetch_sub(1, Ordering::SeqCst);
            self.attaches.fetch_add(1, Ordering::SeqCst);
        }
        self.stats.attach_wait(waited);
        if self.barrier && (waited > WAITED || run.yielded) {
            run.start = Some(Instant::now());
            run.jobs = 0;
        }
        run.yielded = false;
    }

    /// The GIL was just dropped. If the run has lasted its slice and someone
    /// is parked in the re-attach, yield until an attach completes (bounded),
    /// so the waiter takes the GIL rather than us.
    pub(crate) fn dropped(&self, run: &mut Run) {
        if !self.barrier || run.start.is_none_or(|s| s.elapsed() < SLICE) {
            return;
        }
        if self.waiters.load(Ordering::SeqCst) == 0 {
            return;
        }
        let seen = self.attaches.load(Ordering::SeqCst);
        let until = Instant::now() + YIELD_BOUND;
        let mut handed = false;
        while Instant::now() < until {
            if self.attaches.load(Ordering::SeqCst) != seen {
                handed = true;
                break;
            }
            std::thread::yield_now();
        }
        self.stats.hand_off(run, handed);
        run.start = None;
        run.yielded = true;
    }
}

/// One thread's run: when its slice's clock started, and what it did since.
#[derive(Debug, Default)]
pub(crate) struct Run {
    pub(crate) start: Option<Instant>,
    /// Jobs run in this run.
    pub(crate) jobs: u64,
    /// The thread yielded the GIL last time it dropped it.
    yielded: bool,
}
