//! ASGI 3.0 applications (HTTP, WebSocket and lifespan), run on one executor thread.
//!
//! Built only with the `python` feature. One Python thread runs an asyncio
//! loop (uvloop when installed and `--loop auto`); its Python side is
//! `m0serve/_asgi.py`. Core threads never take the GIL: [`AsgiApp::call`]
//! queues the request in the executor's [`Inbox`] and signals its wake fd only
//! when no wake is pending; each conduit gets an app waker that queues the
//! request's id the same way whenever the core made progress the app was
//! waiting for (body data or a WebSocket message, room for the answer, the
//! client's departure). The loop's reader callback, [`Executor`]'s
//! `on_wake`, drains both queues: new requests become tasks ([`scope`],
//! [`channel::Channel`], [`live`]; eager on Python 3.12+), woken ids resolve
//! their futures. The app's `receive`/`send` complete at once when they can
//! ([`ready`]); the answers of one drain wake each core once (held wakes).
//!
//! At most `--backpressure` HTTP requests are in flight on the loop
//! ([`gate`]): past that the call is refused and the core stops reading the
//! connection until a request ends. WebSockets pass the gate: they live as
//! long as their connection, and their messages are flow-controlled anyway.
//!
//! Lifespan runs on the same loop, before the server accepts and after it has
//! drained. An app call may outlive its connection (work after the answer,
//! as Starlette's background tasks): request tasks still running once the
//! server has drained get what is left of the graceful timeout to finish,
//! then are cancelled.

mod beat;
mod channel;
mod gate;
mod live;
mod ready;
mod scope;
mod timed_out;
mod wake;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use pyo3::exceptions::PyRuntimeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::app::beat_thread::BeatSlot;
use crate::app::spec::{EventLoop, Lifespan};
use crate::app::wakes;
use crate::app::{App, AppRequest, Conduit, Refused, RequestKind, ResponseEvent};
use channel::Channel;
use gate::{Gate, Permit};
use live::Live;
pub use wake::Inbox;

/// How the ASGI layer serves.
#[derive(Clone, Debug)]
pub struct AsgiConfig {
    /// The ASGI version the application speaks.
    pub version: AsgiVersion,
    /// `root_path` in every scope (`--root-path`).
    pub root_path: String,
    pub event_loop: EventLoop,
    pub lifespan: Lifespan,
    /// Requests in flight on the loop before calls are refused (`--backpressure`).
    pub backpressure: usize,
    /// The scheduling of the loop thread (`batch`) and of the core threads
    /// beside it (`core_batch`), as the pool's would be.
    pub turn: m0serve_pool::TurnConfig,
}

/// The ASGI version an application speaks: 3 (a coroutine called with
/// `(scope, receive, send)`), or 2 (called with the scope, the result
/// awaited with `(receive, send)`), which `m0serve._asgi` adapts to 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsgiVersion {
    Three,
    Two,
}

impl AsgiVersion {
    /// `scope["asgi"]["version"]`.
    pub fn as_str(self) -> &'static str {
        match self {
            AsgiVersion::Three => "3.0",
            AsgiVersion::Two => "2.0",
        }
    }
}

/// A request waiting for the loop to pick it up.
struct Pending {
    request: AppRequest,
    conduit: Arc<Conduit>,
    id: u64,
    /// Its place on the loop, until its task ends (None: a WebSocket).
    permit: Option<Permit>,
}

/// What the Python side of the executor sees: the wake fd, the lifespan
/// state, the logger, and `on_wake`, which serves what is queued.
#[pyclass(module = "m0serve", name = "AsgiExecutor", frozen)]
struct Executor {
    inbox: Arc<Inbox<Pending>>,
    scope: scope::Constants,
    /// Set by `bind`, before the loop runs.
    bound: OnceLock<LoopSide>,
    /// The loop thread is scheduled behind the cores ([`AsgiConfig::turn`]).
    behind_cores: bool,
}

/// What the executor works with on the loop thread: its handles, the app, the glue.
struct LoopSide {
    live: Arc<Live>,
    app: Py<PyAny>,
    /// `m0serve._asgi.serve(app, scope, receive, send, channel)`: runs the
    /// app and ends the channel, whatever the app does.
    serve: Py<PyAny>,
    /// `asyncio.Task(coro, loop=..., eager_start=True)` where Python has
    /// eager tasks (3.12+); else tasks come from `loop.create_task`.
    eager_task: Option<Py<PyAny>>,
    /// This executor's `release_wakes`, queued on the loop by each `on_wake`.
    release_wakes: Py<PyAny>,
}

#[pymethods]
impl Executor {
    /// The descriptor to watch for reading (`loop.add_reader`).
    fn fd(&self) -> i32 {
        self.inbox.fd()
    }

    /// The lifespan state dict; each request's scope gets a shallow copy.
    #[getter]
    fn state(&self, py: Python<'_>) -> Py<PyDict> {
        self.scope.state.clone_ref(py)
    }

    /// Give the executor its loop (before the loop runs). `glue` is
    /// `m0serve._asgi`: its `serve`, `wait_send` and `wait_receive`;
    /// `eager_task` makes an eager task from a coroutine, where Python can.
    fn bind(
        slf: &Bound<'_, Self>,
        event_loop: &Bound<'_, PyAny>,
        app: Py<PyAny>,
        eager_task: Option<Py<PyAny>>,
        glue: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let py = glue.py();
        let live = Live::new(
            py,
            event_loop.clone().unbind(),
            glue.getattr("wait_send")?.unbind(),
            glue.getattr("wait_receive")?.unbind(),
        )?;
        slf.get()
            .bound
            .set(LoopSide {
                live: Arc::new(live),
                app,
                serve: glue.getattr("serve")?.unbind(),
                eager_task,
                release_wakes: slf.getattr("release_wakes")?.unbind(),
            })
            .map_err(|_| PyRuntimeError::new_err("the ASGI executor is bound already"))
    }

    /// The loop's reader callback: resolve the futures of the woken requests,
    /// then start a task for each new one.
    ///
    /// The cores' wakes are held ([`wakes::hold`]) from here until `release_wakes`,
    /// queued behind the steps of the tasks this wake started or resumed:
    /// the answers of the whole batch then wake each core once.
    fn on_wake(&self, py: Python<'_>) -> PyResult<()> {
        let bound = self
            .bound
            .get()
            .ok_or_else(|| PyRuntimeError::new_err("the ASGI executor is not bound"))?;
        wakes::hold();
        self.serve_queued(py, bound);
        let queued = bound.live.event_loop.call_method1(
            py,
            intern!(py, "call_soon"),
            (&bound.release_wakes,),
        );
        if queued.is_err() {
            wakes::release();
        }
        queued.map(drop)
    }

    /// Called first on the loop's own thread: woken by the cores, it waits
    /// for their pass rather than preempting it ([`m0serve_pool::behind_cores`],
    /// where the turn's `batch` says so, as for the pool).
    fn enter_loop_thread(&self) {
        if self.behind_cores {
            m0serve_pool::behind_cores();
        }
    }

    /// Make the cores' wakes held since the last `on_wake`.
    fn release_wakes(&self) {
        wakes::release();
    }

    /// The tasks of the requests still running (for shutdown).
    fn running_tasks(&self, py: Python<'_>) -> Vec<Py<PyAny>> {
        let Some(bound) = self.bound.get() else {
            return Vec::new();
        };
        bound
            .live
            .all(py)
            .iter()
            .filter_map(|c| c.bind(py).borrow().task(py))
            .collect()
    }

    /// End every request still live with `why` (shutdown, after cancelling
    /// their tasks: a task cancelled before its first step never ran the
    /// wrapper that would have ended its request).
    fn abort_running(&self, py: Python<'_>, why: &str) {
        if let Some(bound) = self.bound.get() {
            for channel in bound.live.all(py) {
                channel.bind(py).borrow_mut().abort(why);
            }
        }
    }

    /// Log `message` at `level` ("error", "warning", "info", "debug").
    fn log(&self, level: &str, message: &str) {
        let message = message.trim_end();
        match level {
            "error" => tracing::error!(target: "m0serve::asgi", "{message}"),
            "warning" => tracing::warn!(target: "m0serve::asgi", "{message}"),
            "info" => tracing::info!(target: "m0serve::asgi", "{message}"),
            _ => tracing::debug!(target: "m0serve::asgi", "{message}"),
        }
    }
}

impl Executor {
    /// Resolve the woken requests' futures, start the new requests' tasks.
    ///
    /// Only what was queued when the drain began: a push after it has
    /// signalled the fd again, and the loop gets its turn (timers, resumed
    /// tasks, shutdown) before the next batch. A failure is logged and the
    /// batch goes on: the fd was cleared, nothing would come back for the rest.
    fn serve_queued(&self, py: Python<'_>, bound: &LoopSide) {
        self.inbox.begin_drain();
        for _ in 0..self.inbox.timed_out.len() {
            let Some(id) = self.inbox.timed_out.pop() else {
                break;
            };
            // Ended since: nothing to cancel.
            if let Some(channel) = bound.live.get(py, id) {
                let task = channel.bind(py).borrow().task(py);
                if let Some(task) = task {
                    timed_out::cancel(task.bind(py));
                }
            }
        }
        for _ in 0..self.inbox.woken.len() {
            let Some(id) = self.inbox.woken.pop() else {
                break;
            };
            // A request whose task has ended since needs nothing.
            if let Some(channel) = bound.live.get(py, id) {
                channel.bind(py).borrow_mut().wake(py);
            }
        }
        for _ in 0..self.inbox.new.len() {
            let Some(pending) = self.inbox.new.pop() else {
                break;
            };
            if let Err(e) = self.start(py, bound, pending) {
                tracing::error!(target: "m0serve::asgi", "starting an ASGI request failed: {e}");
            }
            // An eager step that ran long must not hold back the answers
            // finished before it.
            wakes::refresh();
        }
    }

    /// Build the request's scope and channel and start its task. The channel
    /// is live before the task exists: an eager task may end inside its
    /// creation, and its end removes it.
    fn start(&self, py: Python<'_>, bound: &LoopSide, pending: Pending) -> PyResult<()> {
        let Pending {
            request,
            conduit,
            id,
            permit,
        } = pending;
        let scope = match scope::build(py, &self.scope, &request) {
            Ok(scope) => scope,
            Err(e) => {
                let _ = conduit.try_send(ResponseEvent::Abort);
                return Err(e);
            }
        };
        let is_head = request.head.is_head();
        let what = match request.kind {
            RequestKind::Http => channel::What::shared(request.head),
            RequestKind::WebSocket { .. } => channel::What::trimmed(&request.head),
        };
        let live = Arc::clone(&bound.live);
        let channel = Channel::new(conduit, id, live, what, is_head, request.kind, permit);
        let channel = Bound::new(py, channel)?;
        bound.live.insert(id, channel.clone().unbind());
        let started = (|| {
            let receive = channel.getattr(intern!(py, "receive"))?;
            let send = channel.getattr(intern!(py, "send"))?;
            let coro = bound
                .serve
                .call1(py, (&bound.app, scope, receive, send, &channel))?;
            bound.new_task(py, coro)
        })();
        match started {
            Ok(task) => {
                // Ended eagerly: the channel has left the live map already.
                if bound.live.get(py, id).is_some() {
                    channel.borrow_mut().set_task(task);
                }
                Ok(())
            }
            Err(e) => {
                // Aborting ends it: its permit back, out of the live map.
                channel
                    .borrow_mut()
                    .abort("the ASGI request task could not start");
                Err(e)
            }
        }
    }
}

impl LoopSide {
    /// The request's task: eager where Python has it, unless the app set a
    /// task factory on the loop (tracing, context), which then makes it.
    fn new_task(&self, py: Python<'_>, coro: Py<PyAny>) -> PyResult<Py<PyAny>> {
        let event_loop = self.live.event_loop.bind(py);
        if let Some(eager) = &self.eager_task {
            if event_loop
                .call_method0(intern!(py, "get_task_factory"))?
                .is_none()
            {
                return eager.call1(py, (coro,));
            }
        }
        Ok(event_loop
            .call_method1(intern!(py, "create_task"), (coro,))?
            .unbind())
    }
}

/// An ASGI application served by the executor thread.
pub struct AsgiApp {
    inbox: Arc<Inbox<Pending>>,
    executor: Py<Executor>,
    app: Py<PyAny>,
    config: AsgiConfig,
    next_id: AtomicU64,
    gate: Arc<Gate>,
    /// Set once the executor stopped: later requests are aborted.
    stopped: AtomicBool,
    /// The Python `Runner` (m0serve._asgi), once started.
    runner: Mutex<Option<Py<PyAny>>>,
    /// Queues the heartbeat's stamp on the loop (`--worker-timeout`).
    beat: BeatSlot,
}

impl AsgiApp {
    /// Wrap the application object (already loaded); nothing runs yet.
    pub fn new(py: Python<'_>, app: Py<PyAny>, config: AsgiConfig) -> PyResult<Arc<AsgiApp>> {
        let inbox = Arc::new(Inbox::new()?);
        let executor = Py::new(
            py,
            Executor {
                inbox: Arc::clone(&inbox),
                scope: scope::Constants::new(py, &config.root_path, config.version)?,
                bound: OnceLock::new(),
                behind_cores: config.turn.batch,
            },
        )?;
        Ok(Arc::new(AsgiApp {
            inbox,
            executor,
            app,
            gate: Gate::new(config.backpressure),
            config,
            next_id: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
            runner: Mutex::new(None),
            beat: BeatSlot::default(),
        }))
    }

    /// Start the executor thread and run lifespan startup. `Err` carries the
    /// one-line reason the server must not start (the executor is stopped).
    /// Returns the name of the event loop in use.
    pub fn start(&self, py: Python<'_>) -> Result<String, String> {
        let runner = py
            .import("m0serve._asgi")
            .and_then(|m| {
                m.getattr("Runner")?.call1((
                    self.app.clone_ref(py),
                    self.executor.clone_ref(py),
                    self.config.event_loop.name(),
                    self.config.lifespan.name(),
                    self.config.version.as_str(),
                ))
            })
            .map_err(|e| format!("starting the ASGI executor: {e}"))?;
        *self.runner.lock().unwrap_or_else(PoisonError::into_inner) = Some(runner.clone().unbind());
        let failed: Option<String> = runner
            .call_method0("start")
            .and_then(|r| r.extract())
            .map_err(|e| format!("starting the ASGI executor: {e}"))?;
        if let Some(message) = failed {
            self.stop(py, Duration::ZERO, Duration::from_secs(5));
            return Err(message);
        }
        runner
            .getattr("loop_name")
            .and_then(|n| n.extract())
            .map_err(|e| e.to_string())
    }

    /// After the server has drained: let the request tasks still running
    /// finish within `left` (what the graceful timeout has left), cancel the
    /// rest, run lifespan shutdown (bounded by `timeout`), stop the loop and
    /// join its thread. Later requests are aborted.
    pub fn stop(&self, py: Python<'_>, left: Duration, timeout: Duration) {
        self.stopped.store(true, Ordering::SeqCst);
        py.detach(|| self.beat.stop());
        let runner = self
            .runner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(runner) = runner {
            let args = (left.as_secs_f64(), timeout.as_secs_f64());
            if let Err(e) = runner.call_method1(py, "stop", args) {
                tracing::error!(target: "m0serve::asgi", "stopping the ASGI executor: {e}");
            }
        }
        // Requests queued after the loop stopped will never be served.
        while let Some(pending) = self.inbox.new.pop() {
            let _ = pending.conduit.try_send(ResponseEvent::Abort);
        }
    }
}

impl App for AsgiApp {
    fn call(&self, request: AppRequest, conduit: Arc<Conduit>) -> Result<(), Box<Refused>> {
        if self.stopped.load(Ordering::Relaxed) {
            tracing::warn!(target: "m0serve::asgi", "request after the executor stopped");
            let _ = conduit.try_send(ResponseEvent::Abort);
            return Ok(());
        }
        let permit = match request.kind {
            RequestKind::WebSocket { .. } => None,
            RequestKind::Http => match self.gate.enter(&conduit) {
                Some(permit) => Some(permit),
                None => return Err(Box::new(Refused { request, conduit })),
            },
        };
        // From 1: a conduit's tag of 0 is none.
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        conduit.set_tag(id);
        let inbox = Arc::clone(&self.inbox);
        conduit.set_app_waker(Arc::new(move || inbox.wake(id)));
        self.inbox.push(Pending {
            request,
            conduit,
            id,
            permit,
        });
        Ok(())
    }

    fn inline(&self) -> bool {
        false
    }

    /// Behind the loop thread where it shares the core's CPUs.
    fn on_core_thread(&self) {
        if self.config.turn.core_batch {
            m0serve_pool::core_behind_app();
        }
    }

    /// WebSocket requests get the `websocket` scope (`--no-ws` keeps the
    /// server from handing any over: the upgrade is then a plain `http` one).
    fn websocket(&self) -> bool {
        true
    }

    /// The loop cancels the call's task, after logging where it awaits.
    fn timed_out(&self, conduit: &Arc<Conduit>) {
        if let Some(id) = conduit.tag() {
            self.inbox.time_out(id);
        }
    }

    /// Stamped by the loop itself: a loop stuck in one step (a blocking
    /// call in a coroutine, a spin holding the GIL) stops every request of
    /// this worker, which the cores cannot see.
    fn keep_heartbeat(&self, heartbeat: &crate::ipc::heartbeat::Heartbeat) {
        let Some(bound) = self.executor.get().bound.get() else {
            return;
        };
        let Some(beat) = heartbeat.claim() else {
            return;
        };
        let period = beat.period();
        // Called on the server's thread, which holds no GIL.
        let made = Python::attach(|py| {
            let event_loop = bound.live.event_loop.clone_ref(py);
            Py::new(py, beat::LoopBeat::new(beat)).map(|stamp| (stamp, event_loop))
        });
        let (stamp, event_loop) = match made {
            Ok(made) => made,
            Err(e) => return tracing::warn!("the heartbeat's loop callback: {e}"),
        };
        let each = move |py: Python<'_>| beat::LoopBeat::queue(stamp.bind(py), event_loop.bind(py));
        self.beat.start(period, each);
    }

    /// Requests waiting for the loop, and the tasks running on it.
    fn figures(&self) -> crate::metrics::counters::AppFigures {
        let executor = self.executor.get();
        crate::metrics::counters::AppFigures {
            kind: crate::metrics::counters::EXECUTOR,
            asgi_queued: self.inbox.new.len() as u64,
            asgi_tasks: executor.bound.get().map_or(0, |b| b.live.len()) as u64,
            ..Default::default()
        }
    }
}
