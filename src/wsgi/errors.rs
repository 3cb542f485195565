//! `wsgi.errors`, and the logging of an application's exceptions.
//!
//! Both go through `tracing`, so that the server's log (and its subscriber's
//! format and filter) is the one place to look. `wsgi.errors` is a text
//! stream: what an app writes is logged a line at a time (target
//! `wsgi.errors`), a partial line waiting for its newline or a `flush()`. One
//! stream is shared by every request (it is part of the environ template), so
//! partial lines written by concurrent requests may interleave, as they would
//! on a shared stderr.

use std::sync::{Mutex, PoisonError};

use pyo3::prelude::*;

/// The `wsgi.errors` stream.
#[pyclass(frozen, module = "m0serve", name = "ErrorStream")]
#[derive(Default)]
pub(super) struct Errors {
    partial: Mutex<String>,
}

#[pymethods]
impl Errors {
    fn write(&self, text: &str) -> usize {
        let mut partial = self.partial.lock().unwrap_or_else(PoisonError::into_inner);
        partial.push_str(text);
        if let Some(end) = partial.rfind('\n') {
            for line in partial[..end].split('\n') {
                emit(line);
            }
            partial.drain(..=end);
        }
        text.chars().count()
    }

    fn writelines(&self, lines: &Bound<'_, PyAny>) -> PyResult<()> {
        for line in lines.try_iter()? {
            let line: String = line?.extract()?;
            self.write(&line);
        }
        Ok(())
    }

    fn flush(&self) {
        let mut partial = self.partial.lock().unwrap_or_else(PoisonError::into_inner);
        if !partial.is_empty() {
            emit(&partial);
            partial.clear();
        }
    }

    fn writable(&self) -> bool {
        true
    }
}

fn emit(line: &str) {
    tracing::error!(target: "wsgi.errors", "{line}");
}

/// Log `err`, raised while serving `what`, with its Python traceback.
pub(super) fn log_exception(py: Python<'_>, err: &PyErr, what: &str) {
    let text = format_exception(py, err).unwrap_or_else(|_| err.to_string());
    tracing::error!(target: "m0serve::wsgi", "{what}\n{}", text.trim_end());
}

/// The traceback as Python's `traceback` module prints it.
fn format_exception(py: Python<'_>, err: &PyErr) -> PyResult<String> {
    let lines = py.import("traceback")?.call_method1(
        "format_exception",
        (err.get_type(py), err.value(py), err.traceback(py)),
    )?;
    Ok(lines.extract::<Vec<String>>()?.concat())
}

/// Log where the thread `thread` (Python's ident) is now: the call it runs
/// ran past `--request-timeout`.
pub(super) fn log_stuck(py: Python<'_>, thread: u64) {
    let stack = (|| -> PyResult<Option<String>> {
        let frames = py.import("sys")?.call_method0("_current_frames")?;
        let Some(frame) = frames
            .call_method1("get", (thread,))?
            .extract::<Option<Bound<'_, PyAny>>>()?
        else {
            return Ok(None);
        };
        let lines = py
            .import("traceback")?
            .call_method1("format_stack", (frame,))?;
        Ok(Some(lines.extract::<Vec<String>>()?.concat()))
    })();
    let text = match stack {
        Ok(Some(stack)) => format!("Traceback (most recent call last):\n{}", stack.trim_end()),
        Ok(None) => "(its thread has moved on)".into(),
        Err(e) => format!("(its stack could not be had: {e})"),
    };
    tracing::warn!(
        target: "m0serve::wsgi",
        "the call that ran past --request-timeout goes on in its thread (its answer will be dropped); it is at:\n{text}"
    );
}
