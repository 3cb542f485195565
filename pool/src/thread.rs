//! A pool thread: its kept Python thread state and its loop.
//!
//! A thread that calls `Python::attach` with no thread state of its own gets
//! a new one from `PyGILState_Ensure` and loses it again at the matching
//! release: a thread state created and destroyed per job, and with it the
//! thread's `threading.local` data. So each pool thread takes one
//! `PyGILState_Ensure` at its start and releases it only as it ends; every
//! attach in between finds that thread state and only takes the GIL.

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};

use pyo3::{ffi, PyErr, Python};

use crate::queue::JobQueue;
use crate::turn::{Run, Turn};
use crate::Boxed;

/// The calling thread's own Python thread state, kept from [`keep`] to drop,
/// detached (the GIL free) in between.
///
/// [`keep`]: KeptThreadState::keep
pub(crate) struct KeptThreadState {
    gstate: ffi::PyGILState_STATE,
    tstate: *mut ffi::PyThreadState,
}

impl KeptThreadState {
    /// Create (or find) the thread's state and hold one reference on it.
    /// Blocks until the GIL is free. Panics if the thread is attached: the
    /// detach that ends this would pull the GIL from under that attach.
    pub(crate) fn keep() -> KeptThreadState {
        // A no-op when Python runs (the extension module); it initializes the
        // interpreter when a Rust program (a test) uses the pool first.
        Python::initialize();
        assert!(
            !attached(),
            "keep_thread_state must be called without the GIL held"
        );
        // SAFETY: the interpreter is initialized (above) and this thread is not
        // attached (asserted), so the ensure creates or finds this thread's
        // state and attaches it. It stays unreleased until drop; `gstate` is
        // what that release needs.
        let gstate = unsafe { ffi::PyGILState_Ensure() };
        // SAFETY: the thread was attached just above. Detaching keeps the
        // thread state registered for this thread, so later `PyGILState_Ensure`
        // calls (inside `Python::attach`) find it instead of making one.
        let tstate = unsafe { ffi::PyEval_SaveThread() };
        KeptThreadState { gstate, tstate }
    }
}

impl Drop for KeptThreadState {
    fn drop(&mut self) {
        // Attaching during interpreter finalization hangs or ends the thread;
        // pyo3's `try_attach` declines then (where CPython can tell), and a
        // finalized interpreter has freed the thread state already.
        if Python::try_attach(|_py| ()).is_none() {
            return;
        }
        // SAFETY: `tstate` is this thread's state, saved by `keep` and detached
        // since (every attach in between was matched by its release); the
        // interpreter is alive (checked above). The release matches `keep`'s
        // ensure: it clears and deletes the state if no other reference holds
        // it, and detaches either way.
        unsafe {
            ffi::PyEval_RestoreThread(self.tstate);
            ffi::PyGILState_Release(self.gstate);
        }
    }
}

/// Whether the calling thread holds the GIL.
pub(crate) fn attached() -> bool {
    // SAFETY: `Py_IsInitialized` may be called at any time; `PyGILState_Check`
    // reads the thread's current state and is called only once initialized.
    unsafe { ffi::Py_IsInitialized() != 0 && ffi::PyGILState_Check() == 1 }
}

std::thread_local! {
    /// The state [`keep_thread_state`] keeps; dropped as the thread exits.
    static KEPT: RefCell<Option<KeptThreadState>> = const { RefCell::new(None) };
}

/// Keep a Python thread state on the calling thread for its whole life, so
/// that later attaches (`Python::attach`) reuse it instead of creating one per
/// attach. For core threads in the loop-only shape.
///
/// Call it without the GIL held (it panics otherwise); a second call on the
/// same thread does nothing. The state is released when the thread exits,
/// which must happen before the interpreter finalizes.
pub fn keep_thread_state() {
    KEPT.with(|kept| {
        let mut kept = kept.borrow_mut();
        if kept.is_none() {
            *kept = Some(KeptThreadState::keep());
        }
    });
}

/// A pool thread's life: keep a thread state, serve jobs until the queue is
/// closed and drained, release the state.
///
/// With the keep rule on, a thread takes its jobs only while it holds the GIL
/// ([`Turn::takes_attached`]): it waits for a job to be queued, attaches, and
/// then pops. Otherwise it pops first and attaches to run what it popped.
pub(crate) fn run(queue: &JobQueue<Boxed>, turn: &Turn) {
    if turn.batch {
        crate::sched::behind_cores();
    }
    let _kept = KeptThreadState::keep();
    let mut run = Run::default();
    loop {
        // Both waits may park: they are called detached, so a parked thread
        // holds no GIL.
        let asked = turn.stats.queue_wait_start();
        let first = if turn.takes_attached() {
            if !queue.wait_for_job() {
                break;
            }
            None
        } else {
            let Some(job) = queue.next_job() else { break };
            Some(job)
        };
        turn.stats.queue_wait(asked);
        serve(first, queue, turn, &mut run);
        turn.dropped(&mut run);
    }
}

/// One attach, the only place a pool thread takes the GIL: the job (`first`,
/// or the next queued one), then the jobs already queued behind it while the
/// slice lasts (the keep rule). A job another thread took meanwhile leaves
/// nothing to do.
fn serve(first: Option<Boxed>, queue: &JobQueue<Boxed>, turn: &Turn, run: &mut Run) {
    let asked = turn.enter_attach();
    Python::attach(|py| {
        turn.attached(asked, run);
        let Some(job) = first.or_else(|| queue.try_next_job_beside(|| turn.standing_by())) else {
            return;
        };
        run_job(py, job);
        run.jobs += 1;
        while turn.may_keep(run) {
            let Some(job) = queue.try_next_job_beside(|| turn.standing_by()) else {
                break;
            };
            turn.stats.kept();
            run_job(py, job);
            run.jobs += 1;
        }
    });
}

/// Run one job; a panic ends the job, not the thread.
fn run_job(py: Python<'_>, job: Boxed) {
    if let Err(panic) = panic::catch_unwind(AssertUnwindSafe(|| job.run(py))) {
        // A job that unwound mid-call may leave a Python error set on this
        // thread state, which the next job would trip over as its own.
        if PyErr::occurred(py) {
            // SAFETY: attached (we hold `py`); clearing the indicator is all
            // this does.
            unsafe { ffi::PyErr_Clear() };
        }
        eprintln!(
            "m0serve: a job panicked on {} ({}); the thread goes on",
            std::thread::current().name().unwrap_or("a pool thread"),
            panic_message(&*panic)
        );
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s
    } else {
        "a non-string payload"
    }
}
