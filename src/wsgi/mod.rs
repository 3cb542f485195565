//! WSGI (PEP 3333) applications, run on the pool or inline on the core thread.
//!
//! Built only with the `python` feature. A request becomes a pool [`Job`]: on
//! a pool thread (GIL held) [`response::run`] builds the environ, calls the
//! application and streams its answer back through the request's [`Conduit`].
//! When the pool's queue is full the request is handed back ([`Refused`]) and
//! its conduit waits in a queue the pool drains when room frees, notifying
//! each refused session so that it calls again. With `threads == 0` (the
//! loop-only shape) the view runs on the calling core thread itself.
//!
//! Files: [`environ`] (the environ dict), [`input`] (`wsgi.input`),
//! [`errors`] (`wsgi.errors` and traceback logging), [`start_response`] (the
//! callable and `write()`), [`file_wrapper`] (`wsgi.file_wrapper`), [`response`]
//! (calling the app, iterating its result, `close()`).

pub(crate) mod environ;
mod errors;
mod file_wrapper;
mod input;
mod response;
mod start_response;
mod stuck;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use m0serve_pool::{Job, Pool, PoolWaker};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;

use crate::app::beat_thread::BeatSlot;
use crate::app::waiters::Waiters;
use crate::app::wakes;
use crate::app::{App, AppRequest, Conduit, Refused, ResponseEvent};

/// How the WSGI layer serves.
#[derive(Clone, Debug)]
pub struct WsgiConfig {
    /// Pool threads; 0 is the loop-only shape (the view runs on the core thread).
    pub threads: usize,
    /// Requests that may wait for a pool thread before cores stop reading.
    pub backpressure: usize,
    /// SCRIPT_NAME: the prefix the app is mounted at (`--root-path`).
    pub root_path: String,
    /// The pool's GIL turn and scheduling.
    pub turn: m0serve_pool::TurnConfig,
}

/// What every request of one application shares (read-only once built).
struct Shared {
    app: Py<PyAny>,
    environ: environ::Constants,
    /// The loop-only shape: views run on the core thread.
    inline: bool,
    /// Core threads go behind the pool's ([`m0serve_pool::TurnConfig::core_batch`]).
    core_batch: bool,
    /// Pool threads stuck past `--request-timeout`.
    stuck: stuck::Stuck,
}

/// A WSGI callable served through the pool.
pub struct WsgiApp {
    shared: Arc<Shared>,
    /// `None` in the loop-only shape, and after [`WsgiApp::shutdown`].
    pool: RwLock<Option<Pool>>,
    waiters: Arc<Waiters>,
    /// The pool's wake, deferred to the end of a core thread's pass (see
    /// [`wakes`]) where [`m0serve_pool::TurnConfig::defer_wake`] says so;
    /// `None` otherwise (a wake per job).
    wake: Option<Arc<dyn wakes::Wake>>,
    /// Stamps the heartbeat with the GIL held (`--worker-timeout`).
    beat: BeatSlot,
    /// The threads logging where a timed-out call is stuck, joined at
    /// shutdown (none may attach once the interpreter finalizes).
    reporters: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

/// A pool's wake, owed by a core thread until its pass ends.
impl wakes::Wake for PoolWaker {
    fn wake(&self, jobs: usize) {
        PoolWaker::wake(self, jobs);
    }
}

impl WsgiApp {
    /// Wrap the application object (already loaded) and start the pool.
    pub fn new(py: Python<'_>, app: Py<PyAny>, config: WsgiConfig) -> PyResult<Arc<WsgiApp>> {
        let shared = Arc::new(Shared {
            app,
            environ: environ::Constants::new(py, &config)?,
            inline: config.threads == 0,
            core_batch: config.turn.core_batch,
            stuck: stuck::Stuck::new(config.threads),
        });
        let waiters = Arc::new(Waiters::default());
        let pool = if config.threads == 0 {
            None
        } else {
            let on_room = {
                let waiters = Arc::clone(&waiters);
                Arc::new(move || waiters.wake_all()) as Arc<dyn Fn() + Send + Sync>
            };
            let pool_config = m0serve_pool::Config {
                threads: config.threads,
                backpressure: config.backpressure.max(1),
            };
            let pool = Pool::start_for(py, pool_config, config.turn, on_room)
                .map_err(|e| PyOSError::new_err(format!("cannot start the WSGI pool: {e}")))?;
            Some(pool)
        };
        let wake = pool
            .as_ref()
            .and_then(Pool::waker)
            .map(|waker| Arc::new(waker) as Arc<dyn wakes::Wake>);
        Ok(Arc::new(WsgiApp {
            shared,
            pool: RwLock::new(pool),
            waiters,
            wake,
            beat: BeatSlot::default(),
            reporters: Mutex::new(Vec::new()),
        }))
    }

    /// Stop the pool once the server has drained (call without the GIL).
    pub fn shutdown(&self) {
        self.beat.stop();
        let reporters = std::mem::take(
            &mut *self
                .reporters
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for reporter in reporters {
            let _ = reporter.join();
        }
        let pool = self
            .pool
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(pool) = pool {
            pool.shutdown();
        }
        // Nobody will make room any more: let refused sessions find that out.
        self.waiters.wake_all();
    }

    /// Hand the request to a pool thread, or back to the caller when the queue is full.
    fn submit(
        &self,
        pool: &Pool,
        request: AppRequest,
        conduit: Arc<Conduit>,
    ) -> Result<(), Box<Refused>> {
        let job = View {
            shared: Arc::clone(&self.shared),
            request,
            conduit,
        };
        let Err(job) = self.push(pool, job) else {
            return Ok(());
        };
        // Register, then try once more (see [`Waiters`]).
        self.waiters.push(&job.conduit);
        let Err(View {
            request, conduit, ..
        }) = self.push(pool, job)
        else {
            return Ok(());
        };
        Err(Box::new(Refused { request, conduit }))
    }

    /// Queue `job`: on a core thread its wake waits for the end of the pass.
    // The job comes back whole only when the queue is full; boxed, it would
    // cost a second allocation on every request.
    #[allow(clippy::result_large_err)]
    fn push(&self, pool: &Pool, job: View) -> Result<(), View> {
        match &self.wake {
            Some(wake) if wakes::on_core_thread() => {
                pool.try_submit_quiet(job)?;
                wakes::defer(wake);
                Ok(())
            }
            _ => pool.try_submit(job),
        }
    }
}

/// A request on its way to a pool thread: the job's one allocation, handed
/// back whole when the queue refuses it.
struct View {
    shared: Arc<Shared>,
    request: AppRequest,
    conduit: Arc<Conduit>,
}

impl Job for View {
    fn run(self: Box<Self>, py: Python<'_>) {
        let View {
            shared,
            request,
            conduit,
        } = *self;
        response::run(py, &shared, request, conduit);
        shared.stuck.done_here();
    }
}

// The pool's buckets are the metrics' buckets.
const _: () = assert!(m0serve_pool::REATTACH_BUCKETS == crate::metrics::counters::REATTACH_BUCKETS);

impl App for WsgiApp {
    fn call(&self, request: AppRequest, conduit: Arc<Conduit>) -> Result<(), Box<Refused>> {
        if self.shared.inline {
            // Once per core thread (later calls return at once): attaches
            // then reuse one thread state instead of making one per request.
            m0serve_pool::keep_thread_state();
            Python::attach(|py| response::run(py, &self.shared, request, conduit));
            return Ok(());
        }
        let pool = self.pool.read().unwrap_or_else(PoisonError::into_inner);
        match pool.as_ref() {
            Some(pool) => self.submit(pool, request, conduit),
            None => {
                // Shut down: nothing will run the view any more.
                tracing::warn!(target: "m0serve::wsgi", "request after the pool was shut down");
                let _ = conduit.try_send(ResponseEvent::Abort);
                Ok(())
            }
        }
    }

    fn inline(&self) -> bool {
        self.shared.inline
    }

    fn blocking_reads(&self) -> bool {
        true
    }

    /// Behind the pool's threads where they share the core's CPUs (the
    /// loop-only shape has none).
    fn on_core_thread(&self) {
        if !self.shared.inline && self.shared.core_batch {
            m0serve_pool::core_behind_app();
        }
    }

    /// Its thread cannot be stopped: where it is stuck is logged (from a
    /// thread of its own, which takes the GIL the view may hold for long),
    /// and its answer goes nowhere, the conduit being closed.
    fn timed_out(&self, conduit: &Arc<Conduit>) {
        let Some(thread) = conduit.tag() else {
            return;
        };
        self.shared.stuck.mark(thread);
        let spawned = std::thread::Builder::new()
            .name("m0-timed-out".into())
            .spawn(move || Python::attach(|py| errors::log_stuck(py, thread)));
        match spawned {
            Ok(reporter) => {
                let mut reporters = self
                    .reporters
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                reporters.retain(|r| !r.is_finished());
                reporters.push(reporter);
            }
            Err(e) => tracing::warn!(target: "m0serve::wsgi", "logging a timed-out call: {e}"),
        }
    }

    fn when_stuck(&self, ask: Arc<dyn Fn() + Send + Sync>) {
        self.shared.stuck.asks_with(ask);
    }

    /// Stamped whenever the GIL can be had: a view that holds it without
    /// end stops every view of this worker, which the cores cannot see.
    fn keep_heartbeat(&self, heartbeat: &crate::ipc::heartbeat::Heartbeat) {
        let Some(beat) = heartbeat.claim() else {
            return;
        };
        self.beat.start(beat.period(), move |_py| beat.stamp());
    }

    /// The pool's queue and its GIL turn's figures (none in the loop-only shape).
    fn figures(&self) -> crate::metrics::counters::AppFigures {
        let pool = self.pool.read().unwrap_or_else(PoisonError::into_inner);
        let Some(pool) = pool.as_ref() else {
            return Default::default();
        };
        let counters = pool.counters();
        let (reattach, sum) = pool.reattach_waits();
        crate::metrics::counters::AppFigures {
            kind: crate::metrics::counters::POOL,
            pool_queued: pool.queued() as u64,
            pool_kept: counters.kept,
            pool_handoffs: counters.yields,
            pool_handoff_timeouts: counters.yield_timeouts,
            reattach: reattach.to_vec(),
            reattach_sum_ns: sum,
            ..Default::default()
        }
    }
}
