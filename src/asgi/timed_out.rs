//! A request task that ran past `--request-timeout` (its conduit already
//! closed by the core, so its answer goes nowhere): where it awaits is
//! logged, then it is cancelled.

use pyo3::intern;
use pyo3::prelude::*;

/// On the loop thread: log where `task` awaits, then cancel it.
pub(super) fn cancel(task: &Bound<'_, PyAny>) {
    let py = task.py();
    let stack = py
        .import("m0serve._asgi")
        .and_then(|glue| glue.call_method1(intern!(py, "awaiting_stack"), (task,)))
        .and_then(|stack| stack.extract::<String>())
        .unwrap_or_else(|e| format!("(its stack could not be had: {e})"));
    tracing::warn!(
        target: "m0serve::asgi",
        "cancelling the call that ran past --request-timeout; it awaits at:\n{}",
        stack.trim_end()
    );
    if let Err(e) = task.call_method0(intern!(py, "cancel")) {
        tracing::error!(target: "m0serve::asgi", "cancelling a timed-out call: {e}");
    }
}
