//! A request task that ran past `--request-timeout` (its conduit already
//! closed by the core, so its answer goes nowhere): where it awaits is
//! logged, then it is cancelled.

use pyo3::intern;
use pyo3::prelude::*;

/// On the loop thread: log `task`'s stack, then cancel it.
pub(super) fn cancel(task: &Bound<'_, PyAny>) {
    let py = task.py();
    let stack = (|| -> PyResult<String> {
        let buffer = py.import("io")?.getattr("StringIO")?.call0()?;
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("file", &buffer)?;
        task.call_method(intern!(py, "print_stack"), (), Some(&kwargs))?;
        buffer.call_method0("getvalue")?.extract()
    })()
    .unwrap_or_else(|e| format!("(its stack could not be had: {e})"));
    tracing::warn!(
        target: "m0serve::asgi",
        "cancelling the call that ran past --request-timeout; {}",
        stack.trim_end()
    );
    if let Err(e) = task.call_method0(intern!(py, "cancel")) {
        tracing::error!(target: "m0serve::asgi", "cancelling a timed-out call: {e}");
    }
}
