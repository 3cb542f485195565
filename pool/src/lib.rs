//! The pool: `--blocking-threads N` Python threads that run the views.
//!
//! Each thread keeps one Python thread state for its whole life (no thread
//! state is created per job). The job queue is bounded (`--backpressure`):
//! [`Pool::try_submit`] refuses when it is full, and the pool calls its
//! `on_room` callback once room frees, so a refused submitter can retry. A
//! submit wakes a pool thread only if one is parked: the common path makes no
//! syscall, and a submitter never touches the GIL. In a worker confined to
//! its cores' CPUs (or with `M0_POOL_DEFER_WAKE=1`) a core thread submits
//! quietly ([`Pool::try_submit_quiet`]) and wakes one thread at the end of
//! its pass ([`PoolWaker`]), which wakes the next as it takes a job, so a
//! pool thread sharing the core's CPU does not preempt it at every job.
//!
//! - `queue`: the bounded job queue, its parking and its `on_room` debt.
//! - `thread`: a pool thread's loop and its kept thread state.
//! - `turn`: the GIL turn (hand-off barrier, slice, keep rule).
//! - `stats`: counters, and the histograms of `M0_POOL_DEBUG=1`.
//! - `sched`: Python threads scheduled so that waking them never preempts a core thread.

mod queue;
mod sched;
mod stats;
mod thread;
mod turn;

use std::any::Any;
use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;

use pyo3::prelude::*;

use queue::JobQueue;
pub use sched::{behind_cores, core_behind_app};
pub use stats::{Counters, BUCKETS as REATTACH_BUCKETS};
pub use thread::keep_thread_state;
use turn::Turn;
pub use turn::{TurnConfig, SLICE};

/// A view to run on a pool thread, with the GIL held: any
/// `FnOnce(Python)`, or a type of the caller's own that a refused submit
/// hands back whole (so the caller can take its request out of it again).
pub trait Job: Send + 'static {
    fn run(self: Box<Self>, py: Python<'_>);
}

impl<F> Job for F
where
    F: for<'py> FnOnce(Python<'py>) + Send + 'static,
{
    fn run(self: Box<Self>, py: Python<'_>) {
        (*self)(py)
    }
}

/// A job as the queue holds it: boxed once, and recoverable as its own type
/// when the queue refuses it.
pub(crate) trait Queued: Send {
    fn run(self: Box<Self>, py: Python<'_>);
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
}

impl<J: Job> Queued for J {
    fn run(self: Box<Self>, py: Python<'_>) {
        Job::run(self, py)
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

pub(crate) type Boxed = Box<dyn Queued>;

/// The job a refused push handed back, as the type it was submitted as.
fn unboxed<J: Job>(refused: Boxed) -> J {
    *refused
        .into_any()
        .downcast::<J>()
        .unwrap_or_else(|_| unreachable!("a refused push hands back the job it was given"))
}

#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Pool threads (at least 1).
    pub threads: usize,
    /// Jobs that may wait in the queue before submits are refused (at least 1).
    pub backpressure: usize,
}

/// Whether the interpreter runs with a GIL: false only on a free-threaded
/// build (3.14t and later) whose GIL stayed off (no module asked for it,
/// no `PYTHON_GIL=1`), where attaching takes no lock and the GIL turn has
/// nothing to hand around.
pub fn gil_enabled(py: Python<'_>) -> bool {
    let enabled = || -> PyResult<bool> {
        let sys = py.import("sys")?;
        match sys.getattr("_is_gil_enabled") {
            Ok(check) => check.call0()?.extract::<bool>(),
            // Before 3.13 there is always a GIL.
            Err(_) => Ok(true),
        }
    };
    enabled().unwrap_or(true)
}

/// Pool threads `m0-pool-0` … `m0-pool-{N-1}` and their job queue.
pub struct Pool {
    queue: Arc<JobQueue<Boxed>>,
    turn: Arc<Turn>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    /// Start the threads. `on_room` is called (from a pool thread, without the
    /// GIL) when a job is taken from a queue that had refused a submit; it may
    /// be called once more than needed, so it should be a cheap, idempotent
    /// wake that neither blocks nor runs Python.
    ///
    /// Does not wait for the threads to attach: the caller may hold the GIL.
    /// The GIL turn's switches are the defaults ([`TurnConfig::default`]).
    pub fn start(config: Config, on_room: Arc<dyn Fn() + Send + Sync>) -> io::Result<Pool> {
        Pool::start_with(config, TurnConfig::default(), on_room)
    }

    /// [`Pool::start_with`] for the interpreter `py` belongs to: where it runs
    /// without a GIL ([`gil_enabled`]) there is no turn, and the threads run
    /// their views in parallel.
    pub fn start_for(
        py: Python<'_>,
        config: Config,
        turn: TurnConfig,
        on_room: Arc<dyn Fn() + Send + Sync>,
    ) -> io::Result<Pool> {
        let turn = if gil_enabled(py) {
            turn
        } else {
            turn.without_gil()
        };
        Pool::start_with(config, turn, on_room)
    }

    /// [`Pool::start`] with the GIL turn's switches given.
    pub fn start_with(
        config: Config,
        turn: TurnConfig,
        on_room: Arc<dyn Fn() + Send + Sync>,
    ) -> io::Result<Pool> {
        if config.threads == 0 || config.backpressure == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a pool needs at least one thread and room for one job (got {config:?})"),
            ));
        }
        let queue = JobQueue::new(config.backpressure, on_room);
        let queue = if turn.defer_wake {
            queue.chained()
        } else {
            queue
        };
        let mut pool = Pool {
            queue: Arc::new(queue),
            turn: Arc::new(Turn::new(turn, config.threads)),
            threads: Vec::with_capacity(config.threads),
        };
        for index in 0..config.threads {
            let queue = pool.queue.clone();
            let turn = pool.turn.clone();
            // On an error, dropping `pool` closes the queue: the threads
            // already started leave by themselves.
            let thread = std::thread::Builder::new()
                .name(format!("m0-pool-{index}"))
                .spawn(move || thread::run(&queue, &turn))?;
            pool.threads.push(thread);
        }
        Ok(pool)
    }

    /// Queue `job`; hands it back when the queue is full.
    pub fn try_submit<J: Job>(&self, job: J) -> Result<(), J> {
        self.queue.push(Box::new(job)).map_err(unboxed)
    }

    /// Queue `job` without waking a pool thread; hands it back when the
    /// queue is full. The caller owes [`PoolWaker::wake`] with the number of
    /// jobs so queued, soon: a core thread pays it at the end of its pass, so
    /// a pool thread sharing its CPU runs the pass's jobs in one go instead of
    /// preempting it at the first one.
    pub fn try_submit_quiet<J: Job>(&self, job: J) -> Result<(), J> {
        self.queue.push_quiet(Box::new(job)).map_err(unboxed)
    }

    /// What wakes the pool's parked threads for jobs queued quietly; `None`
    /// where wakes are not to be deferred ([`TurnConfig::defer_wake`], which
    /// is what chains the queue's wakes).
    pub fn waker(&self) -> Option<PoolWaker> {
        self.queue
            .is_chained()
            .then(|| PoolWaker(self.queue.clone()))
    }

    /// What the threads have done so far (the GIL turn's counters).
    pub fn counters(&self) -> Counters {
        self.turn.stats.counters()
    }

    /// The GIL turn's waits to re-attach: log2 buckets of nanoseconds
    /// (bucket `i` counts `[2^(i-1), 2^i)`; [`REATTACH_BUCKETS`] of them)
    /// and their sum.
    pub fn reattach_waits(&self) -> ([u64; REATTACH_BUCKETS], u64) {
        self.turn.stats.attach_waits()
    }

    /// Jobs waiting in the queue now.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Stop taking jobs, let the threads finish the queued ones, and join
    /// them. Must be called without the GIL held (the threads need it to
    /// finish): it panics otherwise rather than deadlock.
    ///
    /// Taking `self` means no `try_submit` can race it, so every job a submit
    /// accepted runs.
    pub fn shutdown(mut self) {
        assert!(
            !thread::attached(),
            "Pool::shutdown must be called without the GIL held"
        );
        self.queue.close();
        for thread in self.threads.drain(..) {
            // A job's panic is caught in the thread; one that still ends it
            // was printed by the panic hook already.
            let _ = thread.join();
        }
        if let Some(report) = self.turn.stats.report() {
            eprint!("{report}");
        }
    }
}

/// Wakes a pool's parked threads for jobs queued with
/// [`Pool::try_submit_quiet`]; outlives the pool harmlessly.
#[derive(Clone)]
pub struct PoolWaker(Arc<JobQueue<Boxed>>);

impl PoolWaker {
    /// Wake a parked pool thread for `jobs` (> 0) queued quietly (none
    /// parked: no syscall); the threads it takes are woken in a chain
    /// ([`JobQueue::chained`]).
    pub fn wake(&self, jobs: usize) {
        if jobs > 0 {
            self.0.wake();
        }
    }
}

impl Drop for Pool {
    /// A pool dropped without `shutdown` (possibly under the GIL) does not
    /// join: its threads drain the queue and leave on their own.
    fn drop(&mut self) {
        self.queue.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_with_a_gil_reports_it_and_no_gil_means_no_turn() {
        let free_threaded = Python::attach(|py| {
            py.import("sysconfig")
                .and_then(|s| s.call_method1("get_config_var", ("Py_GIL_DISABLED",)))
                .and_then(|v| v.extract::<Option<i64>>())
                .unwrap_or(None)
                .unwrap_or(0)
                == 1
        });
        if !free_threaded {
            assert!(Python::attach(gil_enabled));
        }
        let turn = TurnConfig::default().without_gil();
        assert!(!turn.turn && !turn.keep);
        assert_eq!(turn.batch, TurnConfig::default().batch);
    }
}
