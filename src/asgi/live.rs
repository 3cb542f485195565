//! The requests whose tasks are running on the loop, and the loop's handles
//! their channels need (the loop thread only).
//!
//! A channel is registered before its task is made and leaves when the task
//! ends (its `finish`/`abort`), so a wake for its id finds it while it may
//! wait, and a task that ends eagerly, inside its own creation, leaves nothing
//! behind. The map holds the channel, the channel its task: the task lives as
//! long as the request, and shutdown can cancel what is still running.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use pyo3::prelude::*;

use super::channel::Channel;
use super::ready::Ready;

/// What `bind` gives the executor: the loop and the slow paths' coroutines.
pub(super) struct Live {
    pub(super) event_loop: Py<PyAny>,
    /// `m0serve._asgi.wait_send(channel, message, future)`.
    pub(super) wait_send: Py<PyAny>,
    /// `m0serve._asgi.wait_receive(channel, future)`.
    pub(super) wait_receive: Py<PyAny>,
    /// The shared result of every `send()` that was queued at once.
    pub(super) done: Py<Ready>,
    /// Never held while Python code runs (a channel's calls may re-enter).
    channels: Mutex<HashMap<u64, Py<Channel>>>,
}

impl Live {
    pub(super) fn new(
        py: Python<'_>,
        event_loop: Py<PyAny>,
        wait_send: Py<PyAny>,
        wait_receive: Py<PyAny>,
    ) -> PyResult<Live> {
        Ok(Live {
            event_loop,
            wait_send,
            wait_receive,
            done: Py::new(py, Ready::new(None))?,
            channels: Mutex::new(HashMap::new()),
        })
    }

    fn channels(&self) -> MutexGuard<'_, HashMap<u64, Py<Channel>>> {
        self.channels.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Tasks running now (a lock the loop thread holds only briefly).
    pub(super) fn len(&self) -> usize {
        self.channels().len()
    }

    pub(super) fn insert(&self, id: u64, channel: Py<Channel>) {
        self.channels().insert(id, channel);
    }

    /// The request's task ended.
    pub(super) fn remove(&self, id: u64) -> Option<Py<Channel>> {
        self.channels().remove(&id)
    }

    pub(super) fn get(&self, py: Python<'_>, id: u64) -> Option<Py<Channel>> {
        self.channels().get(&id).map(|c| c.clone_ref(py))
    }

    /// Every channel still running (for shutdown).
    pub(super) fn all(&self, py: Python<'_>) -> Vec<Py<Channel>> {
        self.channels().values().map(|c| c.clone_ref(py)).collect()
    }
}
