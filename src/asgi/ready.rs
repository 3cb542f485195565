//! Awaitables for a `receive()` or `send()` that completed at once.
//!
//! Most calls find their message queued or room for their answer, so they
//! return a [`Ready`] instead of a coroutine: awaiting it yields nothing and
//! gives the result straight back, without a frame or a trip through the
//! loop. Only a call that must wait returns a coroutine (`m0serve._asgi`).
//!
//! It also has a coroutine's `send`/`throw`/`close`, which makes it a
//! `collections.abc.Coroutine`, so that what an app may do with a coroutine
//! (`asyncio.create_task(receive())`) works with it too.

use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// Awaits to its value at once: a `receive()`'s message, or None for a
/// `send()` that was queued (one such instance is shared).
#[pyclass(module = "m0serve", name = "AsgiReady", frozen)]
pub(super) struct Ready {
    value: Option<Py<PyAny>>,
}

impl Ready {
    pub(super) fn new(value: Option<Py<PyAny>>) -> Ready {
        Ready { value }
    }

    /// The coroutine's return: StopIteration carrying the value.
    fn stop(&self, py: Python<'_>) -> PyErr {
        match &self.value {
            Some(value) => PyStopIteration::new_err((value.clone_ref(py),)),
            None => PyStopIteration::new_err(()),
        }
    }
}

#[pymethods]
impl Ready {
    fn __await__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The iteration ends at once with the value (None: without raising).
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<()>> {
        match self.value {
            Some(_) => Err(self.stop(py)),
            None => Ok(None),
        }
    }

    /// A coroutine's step returns by raising StopIteration (a plain None
    /// would read as a bare `yield`, and a task would step it again).
    fn send(&self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(self.stop(value.py()))
    }

    /// `throw(value)` or `throw(type[, value[, traceback]])`: raise it.
    #[pyo3(signature = (kind, value=None, _traceback=None))]
    fn throw(
        &self,
        kind: &Bound<'_, PyAny>,
        value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        Err(match value {
            Some(value) if !value.is_none() => PyErr::from_value(value.clone()),
            _ => match kind.cast::<PyType>() {
                Ok(kind) => PyErr::from_type(kind.clone(), ()),
                Err(_) => PyErr::from_value(kind.clone()),
            },
        })
    }

    fn close(&self) {}
}
