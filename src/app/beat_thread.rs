//! The Python side's slot of the worker's heartbeat (`--worker-timeout`,
//! [`crate::ipc::heartbeat`]): a thread of its own that, every period,
//! takes the GIL as a view would and stamps it (WSGI), or asks the event
//! loop to (ASGI). A view that holds the GIL without end (a spin in C) or a
//! loop that never gets back to its scheduler then silences it, which the
//! cores' slots cannot show: they never take the GIL.

use std::io;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use pyo3::Python;

pub struct BeatThread {
    stop: Sender<()>,
    thread: JoinHandle<()>,
}

impl BeatThread {
    /// Run `each` with the GIL held every `period`, until [`BeatThread::stop`].
    pub fn start(
        period: Duration,
        mut each: impl FnMut(Python<'_>) + Send + 'static,
    ) -> io::Result<BeatThread> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("m0-heartbeat".into())
            .spawn(move || loop {
                match stopped.recv_timeout(period) {
                    Err(RecvTimeoutError::Timeout) => Python::attach(&mut each),
                    _ => return,
                }
            })?;
        Ok(BeatThread { stop, thread })
    }

    /// End the thread and wait for it: without the GIL, which it may be
    /// waiting for, and before the interpreter finalizes, which a thread
    /// attaching then would not survive.
    pub fn stop(self) {
        drop(self.stop);
        let _ = self.thread.join();
    }
}

/// Where an application interface keeps its [`BeatThread`]: started once
/// the worker is watched, stopped at shutdown.
#[derive(Default)]
pub struct BeatSlot(Mutex<Option<BeatThread>>);

impl BeatSlot {
    /// Start the thread (see [`BeatThread::start`]); a failure is logged
    /// and leaves the worker unstamped from this side.
    pub fn start(&self, period: Duration, each: impl FnMut(Python<'_>) + Send + 'static) {
        match BeatThread::start(period, each) {
            Ok(thread) => *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(thread),
            Err(e) => tracing::warn!("starting the heartbeat's Python thread: {e}"),
        }
    }

    /// Stop the thread, if one was started (see [`BeatThread::stop`]).
    pub fn stop(&self) {
        let thread = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(thread) = thread {
            thread.stop();
        }
    }
}
