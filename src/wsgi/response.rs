//! Running one request: call the application, send what its result yields,
//! always `close()` the result.
//!
//! The result is iterated as produced: each non-empty item leaves for the core
//! at once (chunked by the protocol when there is no Content-Length), so the
//! first chunk of a generator reaches the client before the generator ends.
//! The head leaves with the first non-empty item, or at the end (PEP 3333).
//! Fast paths: a list or tuple of bytes is a body known in full, so it gets a
//! Content-Length when the app set none (no chunking); a `wsgi.file_wrapper` of
//! a regular file is sent from its descriptor by the core.
//!
//! Failures: an app that raises, returns something that is not an iterable of
//! bytes, or misuses start_response gets its traceback logged and an `Abort`
//! (a 500 if nothing was sent yet, else the connection closes); the thread goes
//! on serving. When the client has gone, iteration stops (a send says so) and
//! `close()` is still called.

use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use super::errors::log_exception;
use super::file_wrapper::FileWrapper;
use super::input::Input;
use super::start_response::{send, Flow, StartResponse};
use super::{environ, Shared};
use crate::app::{AppRequest, Conduit, ResponseEvent};
use crate::http::BodyKind;

/// Serve `request` with the application, answering through `conduit`.
pub(super) fn run(py: Python<'_>, shared: &Shared, request: AppRequest, conduit: Arc<Conduit>) {
    if conduit.is_gone() {
        return; // the client left while the request waited for a thread
    }
    // Which thread runs it, for `--request-timeout`'s traceback.
    conduit.set_tag(super::stuck::thread_ident());
    let head = &request.head;
    let responder = match Bound::new(py, StartResponse::new(Arc::clone(&conduit), head.is_head())) {
        Ok(r) => r,
        Err(err) => return fail(py, &err, &request, &conduit),
    };
    // A chunked body the core buffered whole has a length as well (CGI's
    // CONTENT_LENGTH is the body's length once transfer codings are removed,
    // RFC 3875 §4.1.2; Django reads no body without it).
    let dechunked = match head.body {
        BodyKind::Chunked => conduit.complete_body_len(),
        _ => None,
    };
    let outcome = Bound::new(py, Input::new(Arc::clone(&conduit), shared.inline))
        .and_then(|input| environ::build(py, &shared.environ, &request, input, dechunked))
        .and_then(|environ| shared.app.bind(py).call1((environ, &responder)));
    let result = match outcome {
        Ok(result) => result,
        Err(err) => return fail(py, &err, &request, &conduit),
    };
    let sent = send_result(py, &result, &responder, head.is_head()).and_then(|flow| match flow {
        Flow::Open => responder.borrow_mut().end(py),
        Flow::Gone => Ok(Flow::Gone),
    });
    // close() after the end has left, so the client does not wait for the
    // app's cleanup; a failing close() can then only be logged.
    let closed = close(py, &result);
    if let Err(err) = sent {
        fail(py, &err, &request, &conduit);
    }
    if let Err(err) = closed {
        log_exception(
            py,
            &err,
            &format!("{} {}: close() failed", head.method, head.target),
        );
    }
}

/// Log `err` (quietly when the client has gone: the failure is most likely
/// its departure) and abort the response.
fn fail(py: Python<'_>, err: &PyErr, request: &AppRequest, conduit: &Conduit) {
    let what = format!("{} {}", request.head.method, request.head.target);
    if conduit.is_gone() {
        tracing::debug!(target: "m0serve::wsgi", "{what}: {err} (the client had gone)");
        return;
    }
    log_exception(py, err, &format!("{what}: the WSGI application failed"));
    send(py, conduit, ResponseEvent::Abort);
}

/// Send the body the application returned (not the end).
fn send_result(
    py: Python<'_>,
    result: &Bound<'_, PyAny>,
    responder: &Bound<'_, StartResponse>,
    is_head: bool,
) -> PyResult<Flow> {
    if let Ok(wrapper) = result.cast_exact::<FileWrapper>() {
        if let Some(flow) = send_file(py, wrapper.get(), responder)? {
            return Ok(flow);
        }
    }
    if let Ok(list) = result.cast_exact::<PyList>() {
        if !is_head {
            set_known_length(responder, list.iter());
        }
        return send_items(py, list.iter().map(Ok), responder);
    }
    if let Ok(tuple) = result.cast_exact::<PyTuple>() {
        if !is_head {
            set_known_length(responder, tuple.iter());
        }
        return send_items(py, tuple.iter().map(Ok), responder);
    }
    if result.is_instance_of::<PyString>() || result.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(format!(
            "the WSGI application returned {} instead of an iterable of bytes (wrap it in a list)",
            result.get_type().name()?
        )));
    }
    send_items(py, result.try_iter()?, responder)
}

/// A body whose items are all bytes is known in full: give it a Content-Length.
fn set_known_length<'py>(
    responder: &Bound<'py, StartResponse>,
    items: impl Iterator<Item = Bound<'py, PyAny>>,
) {
    let mut total = 0u64;
    for item in items {
        match item.cast::<PyBytes>() {
            Ok(bytes) => total += bytes.as_bytes().len() as u64,
            Err(_) => return, // the send will report it
        }
    }
    let mut r = responder.borrow_mut();
    if !r.is_sent() {
        r.set_length(total);
    }
}

/// Send each item as it comes; stop early if the client has gone.
fn send_items<'py>(
    py: Python<'py>,
    items: impl Iterator<Item = PyResult<Bound<'py, PyAny>>>,
    responder: &Bound<'py, StartResponse>,
) -> PyResult<Flow> {
    for item in items {
        let item = item?;
        let bytes = item.cast::<PyBytes>().map_err(|_| {
            let kind = item
                .get_type()
                .name()
                .map_or_else(|_| "?".to_owned(), |n| n.to_string());
            PyTypeError::new_err(format!(
                "the WSGI application's iterable yielded {kind}: items must be bytes"
            ))
        })?;
        // No borrow is held while the app's iterator runs (it may call
        // start_response or write()).
        if responder.borrow_mut().send_body(py, bytes)? == Flow::Gone {
            return Ok(Flow::Gone);
        }
    }
    Ok(Flow::Open)
}

/// Send a file wrapper's regular file from its descriptor; `None` when it is
/// not one (or the head already left through write()): iterate it instead.
fn send_file(
    py: Python<'_>,
    wrapper: &FileWrapper,
    responder: &Bound<'_, StartResponse>,
) -> PyResult<Option<Flow>> {
    {
        let r = responder.borrow();
        if r.is_sent() || !r.allows_body() {
            return Ok(None);
        }
    }
    // Not borrowed across fileno() and tell(): a file-like's Python code may
    // call start_response.
    let Some(regular) = wrapper.regular_file(py) else {
        return Ok(None);
    };
    let mut r = responder.borrow_mut();
    if r.is_sent() {
        return Ok(None);
    }
    let available = regular.size.saturating_sub(regular.offset);
    let len = match r.content_length() {
        Some(len) => len.min(available),
        None => {
            r.set_length(available);
            available
        }
    };
    r.send_file(py, regular.file, regular.offset, len).map(Some)
}

/// `result.close()`, if it has one (PEP 3333: always, whatever happened).
fn close(py: Python<'_>, result: &Bound<'_, PyAny>) -> PyResult<()> {
    if result.is_exact_instance_of::<PyList>() || result.is_exact_instance_of::<PyTuple>() {
        return Ok(()); // the common case, without a failing attribute lookup
    }
    match result.getattr(intern!(py, "close")) {
        Ok(close) => close.call0().map(drop),
        Err(err) if err.is_instance_of::<pyo3::exceptions::PyAttributeError>(py) => Ok(()),
        Err(err) => Err(err),
    }
}
