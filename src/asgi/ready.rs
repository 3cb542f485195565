//! Awaitables for a `receive()` or `send()` that completed at once.
//!
//! Most calls find their message queued or room for their answer, so they
//! return one of these instead of a coroutine: awaiting it yields nothing
//! and gives the result straight back, without a frame or a trip through the
//! loop. Only a call that must wait returns a coroutine (`m0serve._asgi`).
//!
//! Both also have a coroutine's `send`/`throw`/`close`, which makes them
//! `collections.abc.Coroutine`s, so that what an app may do with a coroutine
//! (`asyncio.create_task(receive())`) works with them too.

use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// A coroutine's `throw(value)` / `throw(type[, value[, traceback]])`: raise it.
fn raise(kind: &Bound<'_, PyAny>, value: Option<&Bound<'_, PyAny>>) -> PyErr {
    match value {
        Some(value) if !value.is_none() => PyErr::from_value(value.clone()),
        _ if kind.is_instance_of::<PyType>() => {
            PyErr::from_type(kind.clone().cast_into::<PyType>().expect("a type"), ())
        }
        _ => PyErr::from_value(kind.clone()),
    }
}

/// Awaits to None at once (a `send()` that was queued). One is shared.
#[pyclass(module = "m0serve", name = "AsgiDone", frozen)]
pub(super) struct Done;

#[pymethods]
impl Done {
    fn __await__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The iteration ends at once: the await's result is None.
    fn __next__(&self) -> Option<()> {
        None
    }

    /// A coroutine's step returns by raising StopIteration (a plain None
    /// would read as a bare `yield`, and the task would step it again).
    fn send(&self, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(PyStopIteration::new_err(()))
    }

    #[pyo3(signature = (kind, value=None, _traceback=None))]
    fn throw(
        &self,
        kind: &Bound<'_, PyAny>,
        value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        Err(raise(kind, value))
    }

    fn close(&self) {}
}

/// Awaits to its value at once (a `receive()` whose message was queued).
#[pyclass(module = "m0serve", name = "AsgiReady", frozen)]
pub(super) struct Ready {
    value: Py<PyAny>,
}

impl Ready {
    pub(super) fn new(value: Py<PyAny>) -> Ready {
        Ready { value }
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

    /// The iteration returns the value (StopIteration carries it).
    fn __next__(&self, py: Python<'_>) -> PyResult<()> {
        Err(PyStopIteration::new_err((self.value.clone_ref(py),)))
    }

    fn send(&self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.__next__(value.py())
    }

    #[pyo3(signature = (kind, value=None, _traceback=None))]
    fn throw(
        &self,
        kind: &Bound<'_, PyAny>,
        value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        Err(raise(kind, value))
    }

    fn close(&self) {}
}
