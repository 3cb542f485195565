//! One request's channel, as the app sees it: its `receive` and `send`
//! callables, over the request's [`Conduit`].
//!
//! Each call first tries at once. When it finds its message or room for its
//! answer it returns a ready awaitable ([`super::ready`]); when it does not,
//! the failed try armed the conduit's app waker (under the conduit's lock,
//! so no wake is lost) and the call returns a coroutine (`m0serve._asgi`)
//! that awaits a future of this channel's, resolved by [`Channel::wake`] when
//! the executor drains the request's id, and then tries again. Messages are
//! parsed here, in Rust:
//!
//! - receive: `http.request` with the body as it arrives (`more_body` false on
//!   the last piece), then `http.disconnect` once the client has gone (or the
//!   answer is complete);
//! - send: `http.response.start`, `http.response.body` (`more_body`; chunked
//!   by the protocol when there is no Content-Length), `http.response.pathsend`
//!   (sent from the file by the core). A send after the client left raises
//!   `OSError` (spec 2.4); a message out of order raises `RuntimeError`.
//!
//! A WebSocket request speaks the WebSocket messages instead ([`websocket`]).
//!
//! The app failing ([`Channel::abort`]) or returning without completing its
//! answer ([`Channel::finish`]) aborts it: a 500 before the head, else the
//! connection closes. An answer that ends short of its Content-Length is aborted
//! too, so the client sees the close rather than a truncated body.

mod websocket;

use std::fs::File;
use std::sync::Arc;

use pyo3::exceptions::{PyConnectionError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::app::conduit::BODY_HIGH_WATER;
use crate::app::piece;
use crate::app::{BodyRead, Conduit, Fields, RequestKind, ResponseEvent, Sent};
use crate::http::response::parse_length;
use crate::http::{BodyKind, RequestHead};

use super::gate::Permit;
use super::live::Live;
use super::ready::Ready;

/// `METHOD target`, formatted only when a log line needs it.
pub(super) struct What(Arc<RequestHead>);

impl What {
    /// The request's head, shared with the session: no copy per request.
    /// The session holds it until the answer is written anyway; a task that
    /// runs on after its answer (a background task) keeps it until it ends,
    /// which the executor's `--backpressure` bounds like the task itself.
    pub(super) fn shared(head: Arc<RequestHead>) -> What {
        What(head)
    }

    /// Only the method and target of `head`, for a request that lives as
    /// long as its connection (a WebSocket): it keeps none of the headers,
    /// which a client may have made as large as the limit allows.
    pub(super) fn trimmed(head: &RequestHead) -> What {
        What(Arc::new(RequestHead {
            method: head.method.clone(),
            target: head.target.clone(),
            version: head.version,
            headers: Fields::default(),
            body: BodyKind::Empty,
            keep_alive: head.keep_alive,
            expect_continue: false,
        }))
    }
}

impl std::fmt::Display for What {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.0.method, self.0.target)
    }
}

/// Where the answer stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    NotStarted,
    Started,
    /// The body is complete; the trailers the start announced are awaited.
    Trailers,
    Ended,
}

/// The request's side of the executor (the loop thread only).
#[pyclass(module = "m0serve", name = "AsgiChannel")]
pub(super) struct Channel {
    conduit: Arc<Conduit>,
    /// The request's id in the executor's wake queue and its [`Live`] map.
    id: u64,
    live: Arc<Live>,
    /// The futures that waiting `receive`/`send` calls await.
    waiters: Vec<Py<PyAny>>,
    /// The request's task, while it runs (see [`Live`]).
    task: Option<Py<PyAny>>,
    /// The request's method and target, for logs.
    what: What,
    is_head: bool,
    /// The last `http.request` (more_body false) was delivered.
    body_done: bool,
    answer: Answer,
    /// The answer's Content-Length, and the body bytes sent so far.
    length: Option<u64>,
    sent: u64,
    status_allows_body: bool,
    /// `trailers: True` in the start: the answer ends with `http.response.trailers`.
    trailers: Option<Fields>,
    /// A WebSocket request's state (None: HTTP).
    ws: Option<websocket::WsState>,
    /// The request's place on the loop: returned when its task ends.
    permit: Option<Permit>,
}

impl Channel {
    pub(super) fn new(
        conduit: Arc<Conduit>,
        id: u64,
        live: Arc<Live>,
        what: What,
        is_head: bool,
        kind: RequestKind,
        permit: Option<Permit>,
    ) -> Channel {
        let ws = match kind {
            RequestKind::Http => None,
            RequestKind::WebSocket { subprotocols } => Some(websocket::WsState::new(subprotocols)),
        };
        Channel {
            conduit,
            id,
            live,
            waiters: Vec::new(),
            task: None,
            what,
            is_head,
            body_done: false,
            answer: Answer::NotStarted,
            length: None,
            sent: 0,
            permit,
            status_allows_body: true,
            trailers: None,
            ws,
        }
    }

    /// The task running the request: kept until it ends.
    pub(super) fn set_task(&mut self, task: Py<PyAny>) {
        self.task = Some(task);
    }

    pub(super) fn task(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.task.as_ref().map(|t| t.clone_ref(py))
    }

    /// The conduit may let a waiting call make progress: resolve its
    /// futures. One that fails is logged; the others are still resolved.
    pub(super) fn wake(&mut self, py: Python<'_>) {
        for future in self.waiters.drain(..) {
            if let Err(e) = resolve(future.bind(py)) {
                tracing::error!(target: "m0serve::asgi", "{}: waking a wait failed: {e}", self.what);
            }
        }
    }

    /// A future for a call that must wait, resolved by the next [`Self::wake`].
    /// Futures left by waits that were cancelled are dropped here, so that a
    /// request that polls with timeouts does not gather them.
    fn waiter(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.waiters
            .retain(|f| !is_done(f.bind(py)).unwrap_or(true));
        let future = self
            .live
            .event_loop
            .call_method0(py, intern!(py, "create_future"))?;
        self.waiters.push(future.clone_ref(py));
        Ok(future)
    }

    /// The task ended: leave the live requests, return the permit.
    fn ended(&mut self) {
        self.live.remove(self.id);
        self.task = None;
        self.waiters.clear();
        self.permit = None;
    }

    /// Queue `event`; false when the answer is full (retry after a wake).
    fn send_event(&self, event: ResponseEvent) -> PyResult<bool> {
        match self.conduit.try_send(event) {
            Ok(Sent::Queued) => Ok(true),
            Ok(Sent::Full(_)) => Ok(false),
            Err(_) => Err(PyConnectionError::new_err("the client has gone")),
        }
    }

    /// End the answer: `End`, or `Abort` when it is short of its Content-Length.
    fn end(&mut self) -> PyResult<()> {
        self.answer = Answer::Ended;
        let short =
            !self.is_head && self.status_allows_body && self.length.is_some_and(|n| self.sent < n);
        if short {
            tracing::error!(
                target: "m0serve::asgi",
                "{}: the answer ended after {} of its {} byte(s) (Content-Length): closing the connection",
                self.what, self.sent, self.length.unwrap_or(0)
            );
            self.send_event(ResponseEvent::Abort)?;
        } else {
            self.send_event(ResponseEvent::End)?;
        }
        Ok(())
    }

    fn start(&mut self, message: &Bound<'_, PyDict>) -> PyResult<bool> {
        let py = message.py();
        if self.answer != Answer::NotStarted {
            return Err(PyRuntimeError::new_err(
                "http.response.start sent twice (the answer has started)",
            ));
        }
        let status: u16 = match message.get_item(intern!(py, "status"))? {
            Some(s) => s.extract()?,
            None => {
                return Err(PyValueError::new_err(
                    "http.response.start without a status",
                ))
            }
        };
        if !(200..=599).contains(&status) {
            return Err(PyValueError::new_err(format!(
                "status {status} is not a final status (200 to 599)"
            )));
        }
        let mut headers = Fields::default();
        if let Some(list) = message.get_item(intern!(py, "headers"))? {
            headers = fields(&list, |name, value| {
                if name.eq_ignore_ascii_case(b"content-length") {
                    self.length = self.length.or(parse_length(value));
                }
            })?;
        }
        self.status_allows_body = !matches!(status, 204 | 304);
        if let Some(t) = message.get_item(intern!(py, "trailers"))? {
            self.trailers = t.is_truthy()?.then(Fields::default);
        }
        self.answer = Answer::Started;
        self.send_event(ResponseEvent::Start { status, headers })
    }

    fn body(&mut self, message: &Bound<'_, PyDict>) -> PyResult<bool> {
        let py = message.py();
        self.check_started("http.response.body")?;
        let more = match message.get_item(intern!(py, "more_body"))? {
            Some(m) => m.is_truthy()?,
            None => false,
        };
        if let Some(body) = message.get_item(intern!(py, "body"))? {
            let body = body
                .cast_into::<PyBytes>()
                .map_err(|_| PyValueError::new_err("http.response.body: body must be bytes"))?;
            let len = body.as_bytes().len();
            if len > 0 {
                let piece = piece::from_py_bytes(&body, len);
                if !self.send_event(ResponseEvent::Body(piece))? {
                    return Ok(false);
                }
                self.sent += len as u64;
            }
        }
        if !more {
            if self.trailers.is_some() {
                self.answer = Answer::Trailers;
            } else {
                self.end()?;
            }
        }
        Ok(true)
    }

    /// `http.response.trailers` (ASGI's trailers extension): sent after the
    /// body when the start said `trailers: True`; HTTP/2 sends them, HTTP/1.1
    /// drops them (they are optional metadata, RFC 9110 §6.5).
    fn trailers(&mut self, message: &Bound<'_, PyDict>) -> PyResult<bool> {
        let py = message.py();
        if self.answer != Answer::Trailers {
            let why = match (self.answer, self.trailers.is_some()) {
                (Answer::Started, true) => "before the body was complete",
                (Answer::Ended, _) => "after the answer was complete",
                _ => "without trailers: True in http.response.start",
            };
            return Err(PyRuntimeError::new_err(format!(
                "http.response.trailers {why}"
            )));
        }
        let more = match message.get_item(intern!(py, "more_trailers"))? {
            Some(m) => m.is_truthy()?,
            None => false,
        };
        if let Some(list) = message.get_item(intern!(py, "headers"))? {
            let got = fields(&list, |_, _| {})?;
            let all = self.trailers.get_or_insert_with(Fields::default);
            for (name, value) in got.iter() {
                all.push(name, value);
            }
        }
        if !more {
            let trailers = self.trailers.take().unwrap_or_default();
            if !trailers.is_empty() {
                // Never refused (it carries no body bytes), as the end is not.
                self.send_event(ResponseEvent::Trailers(trailers))?;
            }
            self.end()?;
        }
        Ok(true)
    }

    fn pathsend(&mut self, message: &Bound<'_, PyDict>) -> PyResult<bool> {
        let py = message.py();
        self.check_started("http.response.pathsend")?;
        let path: std::path::PathBuf = match message.get_item(intern!(py, "path"))? {
            Some(p) => p.extract()?,
            None => {
                return Err(PyValueError::new_err(
                    "http.response.pathsend without a path",
                ))
            }
        };
        let file = File::open(&path)?;
        let len = file.metadata()?.len();
        if !self.send_event(ResponseEvent::File {
            file,
            offset: 0,
            len,
        })? {
            return Ok(false);
        }
        self.sent += len;
        self.end()?;
        Ok(true)
    }

    fn check_started(&self, what: &str) -> PyResult<()> {
        match self.answer {
            Answer::Started => Ok(()),
            Answer::NotStarted => Err(PyRuntimeError::new_err(format!(
                "{what} before http.response.start"
            ))),
            Answer::Ended => Err(PyRuntimeError::new_err(format!(
                "{what} after the answer was complete"
            ))),
            Answer::Trailers => Err(PyRuntimeError::new_err(format!(
                "{what} after the body was complete (trailers are awaited)"
            ))),
        }
    }

    /// Abort the answer unless it has ended; `why` is logged (not when the
    /// client has gone: the failure is most likely its departure).
    fn abort_with(&mut self, why: &str) {
        if self.answer == Answer::Ended {
            return;
        }
        self.answer = Answer::Ended;
        if self.conduit.is_gone() {
            tracing::debug!(target: "m0serve::asgi", "{}: {why} (the client had gone)", self.what);
            return;
        }
        tracing::error!(target: "m0serve::asgi", "{}: {why}", self.what);
        let _ = self.conduit.try_send(ResponseEvent::Abort);
    }
}

/// The `headers` of a start or accept message, as one [`Fields`] buffer.
/// The spec's type is `Iterable[[byte string, byte string]]`: each pair any
/// iterable of two byte strings (a tuple or a list, as the spec writes it;
/// `bytes` or `bytearray`); `seen` is shown each as given.
fn fields(list: &Bound<'_, PyAny>, mut seen: impl FnMut(&[u8], &[u8])) -> PyResult<Fields> {
    // Sized from the list where it has a length (a generator has none).
    let mut fields = Fields::for_fields(list.len().unwrap_or(0));
    for pair in list.try_iter()? {
        let pair = pair?;
        // The common shapes, borrowed; anything else copied (or refused).
        let borrowed = two_items(&pair).and_then(|(name, value)| {
            Some((
                name.cast_into::<PyBytes>().ok()?,
                value.cast_into::<PyBytes>().ok()?,
            ))
        });
        let owned;
        let (name, value) = match &borrowed {
            Some((name, value)) => (name.as_bytes(), value.as_bytes()),
            None => {
                owned = owned_pair(&pair)?;
                (&owned.0[..], &owned.1[..])
            }
        };
        seen(name, value);
        // A name that is not UTF-8 is not a token: the protocol drops it.
        fields.push(&String::from_utf8_lossy(name), value);
    }
    Ok(fields)
}

/// The two items of a header pair given as a tuple or a list of two.
fn two_items<'py>(pair: &Bound<'py, PyAny>) -> Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let (name, value) = if let Ok(t) = pair.cast::<PyTuple>() {
        if t.len() != 2 {
            return None;
        }
        (t.get_item(0), t.get_item(1))
    } else {
        let l = pair.cast::<PyList>().ok()?;
        if l.len() != 2 {
            return None;
        }
        (l.get_item(0), l.get_item(1))
    };
    Some((name.ok()?, value.ok()?))
}

/// A header pair in any other shape: an iterable of exactly two byte
/// strings (`bytes`, `bytearray`), copied. A `str` is refused, not encoded.
fn owned_pair(pair: &Bound<'_, PyAny>) -> PyResult<(Vec<u8>, Vec<u8>)> {
    let refuse = || {
        let kind = pair.get_type().name().map(|n| n.to_string());
        PyTypeError::new_err(format!(
            "a header must be a pair [name, value] of byte strings, not {}",
            kind.as_deref().unwrap_or("this")
        ))
    };
    // Iterated, `bytes` would give its ints and a `str` its characters.
    if pair.is_instance_of::<PyBytes>() || pair.is_instance_of::<PyString>() {
        return Err(refuse());
    }
    let items: Vec<Bound<'_, PyAny>> = match pair.try_iter() {
        Ok(items) => items.take(3).collect::<PyResult<_>>()?,
        Err(_) => return Err(refuse()),
    };
    let [name, value] = &items[..] else {
        return Err(refuse());
    };
    let bytes = |item: &Bound<'_, PyAny>| {
        if item.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(
                "a header's name and value must be byte strings, not str",
            ));
        }
        item.extract::<Vec<u8>>()
    };
    Ok((bytes(name)?, bytes(value)?))
}

fn is_done(future: &Bound<'_, PyAny>) -> PyResult<bool> {
    future
        .call_method0(intern!(future.py(), "done"))?
        .is_truthy()
}

/// Resolve a waiting call's future (a cancelled wait left it done already).
fn resolve(future: &Bound<'_, PyAny>) -> PyResult<()> {
    if !is_done(future)? {
        let py = future.py();
        future.call_method1(intern!(py, "set_result"), (py.None(),))?;
    }
    Ok(())
}

#[pymethods]
impl Channel {
    /// The app's `receive()`: ready at once, or a coroutine that waits.
    fn receive(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let (message, future) = Self::receive_or_wait(&mut slf.borrow_mut(), py)?;
        match future {
            None => Ok(Py::new(py, Ready::new(Some(message)))?.into_any()),
            Some(future) => {
                let live = Arc::clone(&slf.borrow().live);
                live.wait_receive.call1(py, (slf, future))
            }
        }
    }

    /// `(message, None)`, or `(None, future)` to await before trying again.
    fn receive_or_wait(&mut self, py: Python<'_>) -> PyResult<(Py<PyAny>, Option<Py<PyAny>>)> {
        match self.try_receive(py)? {
            Some(message) => Ok((message.into_any().unbind(), None)),
            None => Ok((py.None(), Some(self.waiter(py)?))),
        }
    }

    /// The app's `send(message)`: done at once, or a coroutine that waits
    /// for room and sends it then.
    fn send(slf: &Bound<'_, Self>, message: &Bound<'_, PyDict>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let future = Self::send_or_wait(&mut slf.borrow_mut(), message)?;
        let live = Arc::clone(&slf.borrow().live);
        match future {
            None => Ok(live.done.clone_ref(py).into_any()),
            Some(future) => live.wait_send.call1(py, (slf, message, future)),
        }
    }

    /// None once `message` is queued, or a future to await before trying again.
    fn send_or_wait(&mut self, message: &Bound<'_, PyDict>) -> PyResult<Option<Py<PyAny>>> {
        if self.try_send(message)? {
            Ok(None)
        } else {
            self.waiter(message.py()).map(Some)
        }
    }

    /// The next message for `receive()`, or None when there is none yet.
    fn try_receive<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        if self.ws.is_some() {
            return self.ws_receive(py);
        }
        let read = if self.body_done {
            if !self.conduit.watch_gone() {
                return Ok(None);
            }
            None
        } else {
            self.conduit.try_read_chunk(BODY_HIGH_WATER).ok()
        };
        let message = PyDict::new(py);
        let (data, complete) = match read {
            None => {
                message.set_item(intern!(py, "type"), intern!(py, "http.disconnect"))?;
                return Ok(Some(message));
            }
            Some((BodyRead::Empty, _)) => return Ok(None),
            Some((BodyRead::Eof, _)) => (PyBytes::new(py, b""), true),
            Some((BodyRead::Data(data), complete)) => (PyBytes::new(py, &data), complete),
        };
        self.body_done = complete;
        message.set_item(intern!(py, "type"), intern!(py, "http.request"))?;
        message.set_item(intern!(py, "body"), data)?;
        message.set_item(intern!(py, "more_body"), !complete)?;
        Ok(Some(message))
    }

    /// Send one message; False when the answer is full: await a wake and
    /// send the same message again.
    fn try_send(&mut self, message: &Bound<'_, PyDict>) -> PyResult<bool> {
        let py = message.py();
        let kind = message
            .get_item(intern!(py, "type"))?
            .ok_or_else(|| PyValueError::new_err("an ASGI message without a type"))?;
        let kind = kind.cast_into::<PyString>()?;
        if self.ws.is_some() {
            return self.ws_send(kind.to_str()?, message);
        }
        match kind.to_str()? {
            "http.response.start" => self.start(message),
            "http.response.body" => self.body(message),
            "http.response.pathsend" => self.pathsend(message),
            "http.response.trailers" => self.trailers(message),
            other => Err(PyValueError::new_err(format!(
                "unexpected ASGI message type {other:?} for an HTTP request"
            ))),
        }
    }

    /// The application raised (`traceback` is its text) or was cancelled.
    #[pyo3(signature = (why))]
    pub(super) fn abort(&mut self, why: &str) {
        self.abort_with(why.trim_end());
        self.ended();
    }

    /// The application returned: an answer it did not complete is aborted.
    fn finish(&mut self) {
        if self.ws.is_some() {
            self.ws_finish();
        } else {
            self.abort_with("the ASGI application returned without completing the response");
        }
        self.ended();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Version;

    fn head() -> RequestHead {
        RequestHead {
            method: "GET".into(),
            target: "/chat?room=1".into(),
            version: Version::Http11,
            headers: vec![("Cookie", vec![b'x'; 60_000])].into(),
            body: BodyKind::Empty,
            keep_alive: true,
            expect_continue: false,
        }
    }

    #[test]
    fn a_websocket_keeps_only_its_method_and_target() {
        let what = What::trimmed(&head());
        assert_eq!(what.to_string(), "GET /chat?room=1");
        assert!(
            what.0.headers.is_empty(),
            "a WebSocket kept the request's headers"
        );
    }

    #[test]
    fn an_http_request_shares_the_sessions_head() {
        let head = Arc::new(head());
        let what = What::shared(Arc::clone(&head));
        assert_eq!(what.to_string(), "GET /chat?room=1");
        assert!(Arc::ptr_eq(&what.0, &head), "the head was copied");
    }
}
