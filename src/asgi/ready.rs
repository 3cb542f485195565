//! Awaitables for a `receive()` or `send()` that completed at once.
//!
//! Most calls find their message queued or room for their answer, so they
//! return one of these instead of a coroutine: awaiting it yields nothing
//! and gives the result straight back, without a frame or a trip through the
//! loop. Only a call that must wait returns a coroutine (`m0serve._asgi`).

use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;

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
}
