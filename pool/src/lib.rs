//! The pool: `--blocking-threads N` Python threads that run the views
//! (SKELETON: to be implemented).
//!
//! Each thread keeps one Python thread state for its whole life (no thread
//! state is created per job). The job queue is bounded (`--backpressure`):
//! [`Pool::try_submit`] refuses when it is full, and the pool calls its
//! `on_room` callback once room frees, so a refused submitter can retry. A
//! submit wakes a pool thread only if one is parked: the common path makes no
//! syscall.

use std::sync::Arc;

use pyo3::Python;

/// A view to run on a pool thread, with the GIL held.
pub type Job = Box<dyn for<'py> FnOnce(Python<'py>) + Send + 'static>;

#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Pool threads (at least 1).
    pub threads: usize,
    /// Jobs that may wait in the queue before submits are refused.
    pub backpressure: usize,
}

pub struct Pool {
    _config: Config,
}

impl Pool {
    /// Start the threads. `on_room` is called (from a pool thread, without the
    /// GIL) when a job is taken from a queue that had refused a submit.
    pub fn start(config: Config, on_room: Arc<dyn Fn() + Send + Sync>) -> std::io::Result<Pool> {
        let _ = on_room;
        Ok(Pool { _config: config })
    }

    /// Queue `job`; hands it back when the queue is full.
    pub fn try_submit(&self, job: Job) -> Result<(), Job> {
        let _ = job;
        todo!()
    }

    /// Stop taking jobs, let the threads finish the queued ones, and join
    /// them. Must be called without the GIL held.
    pub fn shutdown(self) {
        todo!()
    }
}

/// Keep a Python thread state on the calling thread for its whole life, so
/// that later attaches (`Python::attach`) reuse it instead of creating one per
/// attach. For core threads in the loop-only shape.
pub fn keep_thread_state() {
    todo!()
}
