//! `start_response(status, headers, exc_info=None)` and the `write()` callable
//! it returns (PEP 3333), and the sending of the response head and body.
//!
//! The status and headers are checked when given, and held until the first
//! non-empty piece of body (or the end of the response): until then a later
//! `start_response` with `exc_info` may still replace them (an error page
//! after a failure); once sent, such a call re-raises the original exception.
//!
//! What is refused (each raises in the app, which then gets a 500 if nothing
//! was sent): a status that is not three digits, a space and a reason, or
//! outside 200..=599 (interim responses are the server's business); headers
//! that are not a list of `(str, str)` tuples, names that are not tokens,
//! values with control characters or chars beyond latin-1; hop-by-hop headers
//! (PEP 3333 lets a server treat them as fatal: framing is the server's); a
//! Content-Length that is not a number, or repeated with different values.
//!
//! Content-Length is honoured: bytes beyond it are dropped (logged once), and
//! an answer that ends short of it is aborted, so the client sees the
//! connection close rather than a response of the wrong length.

use std::borrow::Cow;
use std::sync::Arc;

use pyo3::exceptions::{PyConnectionError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use crate::app::piece;
use crate::app::{Conduit, Fields, Gone, ResponseEvent, Sent};
use crate::http::is_tchar;
use crate::http::response::{self, status_allows_body};

/// Headers an application must not send (RFC 9110 §7.6.1, PEP 3333).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
];

/// Whether the response can still reach the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flow {
    Open,
    Gone,
}

/// A response head given to start_response and not yet sent.
struct Head {
    status: u16,
    headers: Fields,
    content_length: Option<u64>,
}

/// The `start_response` callable of one request, and its response's state.
#[pyclass(module = "m0serve", name = "StartResponse")]
pub(super) struct StartResponse {
    conduit: Arc<Conduit>,
    is_head: bool,
    head: Option<Head>,
    /// The Start event has gone to the core: the head is fixed.
    sent: bool,
    /// Once sent: false when the response has no body (HEAD, 204, 304), whose
    /// bytes are then dropped.
    body_allowed: bool,
    /// Once sent, with a Content-Length: the body bytes it still allows.
    remaining: Option<u64>,
    truncated: bool,
}

#[pymethods]
impl StartResponse {
    #[pyo3(signature = (status, headers, exc_info = None))]
    fn __call__<'py>(
        slf: &Bound<'py, Self>,
        status: &Bound<'py, PyAny>,
        headers: &Bound<'py, PyAny>,
        exc_info: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        {
            let mut this = slf.borrow_mut();
            match exc_info.filter(|e| !e.is_none()) {
                Some(exc_info) if this.sent => return Err(reraise(exc_info)),
                Some(_) => {}
                None if this.sent || this.head.is_some() => {
                    return Err(PyRuntimeError::new_err(
                        "start_response() called a second time without exc_info",
                    ))
                }
                None => {}
            }
            this.head = Some(parse_head(status, headers)?);
        }
        slf.getattr(intern!(py, "write"))
    }

    /// The legacy `write(data)`: sends `data` now (after the head, if not sent).
    fn write(&mut self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let data = data.cast::<PyBytes>().map_err(|_| {
            PyTypeError::new_err(format!("write() takes bytes, not {}", type_name(data)))
        })?;
        match self.send_body(py, data)? {
            Flow::Open => Ok(()),
            Flow::Gone => Err(PyConnectionError::new_err("the client disconnected")),
        }
    }
}

impl StartResponse {
    pub(super) fn new(conduit: Arc<Conduit>, is_head: bool) -> StartResponse {
        StartResponse {
            conduit,
            is_head,
            head: None,
            sent: false,
            body_allowed: true,
            remaining: None,
            truncated: false,
        }
    }

    pub(super) fn is_sent(&self) -> bool {
        self.sent
    }

    /// The Content-Length the app set (before the head is sent).
    pub(super) fn content_length(&self) -> Option<u64> {
        self.head.as_ref().and_then(|h| h.content_length)
    }

    /// Whether the pending head may carry a body (not for HEAD, 204, 304).
    pub(super) fn allows_body(&self) -> bool {
        !self.is_head
            && self
                .head
                .as_ref()
                .is_some_and(|h| status_allows_body(h.status))
    }

    /// Add `Content-Length: len` to a pending head that has none and may
    /// carry a body: a body known in full is then sent unchunked.
    pub(super) fn set_length(&mut self, len: u64) {
        if let Some(head) = self.head.as_mut().filter(|h| h.content_length.is_none()) {
            if status_allows_body(head.status) {
                head.headers
                    .push("Content-Length", len.to_string().as_bytes());
                head.content_length = Some(len);
            }
        }
    }

    /// Send the head if it has not gone yet.
    pub(super) fn start(&mut self, py: Python<'_>) -> PyResult<Flow> {
        if self.sent {
            return Ok(Flow::Open);
        }
        let Head {
            status,
            headers,
            content_length,
        } = self.head.take().ok_or_else(|| {
            PyRuntimeError::new_err(
                "the application did not call start_response() before its body or its end",
            )
        })?;
        self.sent = true;
        self.body_allowed = !self.is_head && status_allows_body(status);
        self.remaining = content_length;
        Ok(send(
            py,
            &self.conduit,
            ResponseEvent::Start { status, headers },
        ))
    }

    /// Send a piece of body (the head first). Empty pieces send nothing.
    pub(super) fn send_body(
        &mut self,
        py: Python<'_>,
        data: &Bound<'_, PyBytes>,
    ) -> PyResult<Flow> {
        let len = data.as_bytes().len();
        if len == 0 {
            return Ok(Flow::Open);
        }
        if self.start(py)? == Flow::Gone {
            return Ok(Flow::Gone);
        }
        let n = self.allow(len as u64) as usize;
        if n == 0 {
            return Ok(Flow::Open);
        }
        let piece = piece::from_py_bytes(data, n);
        Ok(send(py, &self.conduit, ResponseEvent::Body(piece)))
    }

    /// Send `len` bytes of `file` from `offset` (the head first), served by the core.
    pub(super) fn send_file(
        &mut self,
        py: Python<'_>,
        file: std::fs::File,
        offset: u64,
        len: u64,
    ) -> PyResult<Flow> {
        if self.start(py)? == Flow::Gone {
            return Ok(Flow::Gone);
        }
        let len = self.allow(len);
        if len == 0 {
            return Ok(Flow::Open);
        }
        Ok(send(
            py,
            &self.conduit,
            ResponseEvent::File { file, offset, len },
        ))
    }

    /// How many of `len` body bytes may be sent (after the head was sent).
    fn allow(&mut self, len: u64) -> u64 {
        if !self.body_allowed {
            return 0;
        }
        let Some(remaining) = self.remaining.as_mut() else {
            return len;
        };
        let n = len.min(*remaining);
        *remaining -= n;
        if n < len && !std::mem::replace(&mut self.truncated, true) {
            tracing::warn!(
                target: "m0serve::wsgi",
                "the application sent more than its Content-Length: the excess is dropped"
            );
        }
        n
    }

    /// The response is complete: send the head if still pending, then the end.
    pub(super) fn end(&mut self, py: Python<'_>) -> PyResult<Flow> {
        if !self.sent && !self.is_head {
            self.set_length(0); // no body came: say so rather than chunk nothing
        }
        if self.start(py)? == Flow::Gone {
            return Ok(Flow::Gone);
        }
        if let Some(missing) = self.remaining.filter(|&r| r > 0 && self.body_allowed) {
            return Err(PyRuntimeError::new_err(format!(
                "the response ended {missing} bytes short of its Content-Length"
            )));
        }
        Ok(send(py, &self.conduit, ResponseEvent::End))
    }
}

/// Queue `event` for the core; while the client is slow to take the answer,
/// wait for room with the GIL released, then send again.
pub(super) fn send(py: Python<'_>, conduit: &Conduit, mut event: ResponseEvent) -> Flow {
    loop {
        match conduit.try_send(event) {
            Ok(Sent::Queued) => return Flow::Open,
            Ok(Sent::Full(back)) => {
                event = back;
                py.detach(|| conduit.wait_room());
            }
            Err(Gone) => return Flow::Gone,
        }
    }
}

/// `raise exc_info[1].with_traceback(exc_info[2])`.
fn reraise(exc_info: &Bound<'_, PyAny>) -> PyErr {
    let rebuilt = (|| -> PyResult<PyErr> {
        let exc_info = exc_info.cast::<PyTuple>()?;
        let value = exc_info.get_item(1)?;
        let value = value.call_method1(
            intern!(value.py(), "with_traceback"),
            (exc_info.get_item(2)?,),
        )?;
        Ok(PyErr::from_value(value))
    })();
    rebuilt.unwrap_or_else(|e| {
        PyTypeError::new_err(format!(
            "start_response(): exc_info must be sys.exc_info(): {e}"
        ))
    })
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

fn parse_head(status: &Bound<'_, PyAny>, headers: &Bound<'_, PyAny>) -> PyResult<Head> {
    let status = status.cast::<PyString>().map_err(|_| {
        PyTypeError::new_err(format!(
            "start_response(): status must be str, not {}",
            type_name(status)
        ))
    })?;
    let status = parse_status(status.to_str()?).map_err(PyValueError::new_err)?;
    let items = if let Ok(list) = headers.cast::<PyList>() {
        list.as_sequence().clone()
    } else if let Ok(tuple) = headers.cast::<PyTuple>() {
        tuple.as_sequence().clone()
    } else {
        return Err(PyTypeError::new_err(format!(
            "start_response(): headers must be a list of (name, value) tuples, not {}",
            type_name(headers)
        )));
    };
    let count = items.len()?;
    let mut parsed = Fields::for_fields(count);
    let mut content_length = None;
    for item in items.try_iter()? {
        let item = item?;
        let pair = item
            .cast::<PyTuple>()
            .ok()
            .filter(|t| t.len() == 2)
            .ok_or_else(|| {
                PyTypeError::new_err(format!(
                    "start_response(): each header must be a (name, value) tuple, not {}",
                    item.repr()
                        .map_or_else(|_| "?".to_owned(), |r| r.to_string())
                ))
            })?;
        let (name, value) = (pair.get_item(0)?, pair.get_item(1)?);
        let (Ok(name), Ok(value)) = (name.cast::<PyString>(), value.cast::<PyString>()) else {
            return Err(PyTypeError::new_err(format!(
                "start_response(): header names and values must be str: {}",
                pair.repr()?
            )));
        };
        let (name, value) = (name.to_str()?, value.to_str()?);
        let bytes = parse_header(name, value).map_err(PyValueError::new_err)?;
        if name.eq_ignore_ascii_case("content-length") {
            let len = parse_length(&bytes).map_err(PyValueError::new_err)?;
            if content_length.is_some_and(|l| l != len) {
                return Err(PyValueError::new_err(
                    "start_response(): differing Content-Length headers",
                ));
            }
            content_length = Some(len);
        }
        parsed.push(name, &bytes);
    }
    Ok(Head {
        status,
        headers: parsed,
        content_length,
    })
}

/// The status code of a WSGI status line (`"200 OK"`).
fn parse_status(status: &str) -> Result<u16, String> {
    let b = status.as_bytes();
    let well_formed = b.len() >= 4 && b[3] == b' ' && b[..3].iter().all(u8::is_ascii_digit);
    if !well_formed || b.iter().any(|c| c.is_ascii_control()) {
        return Err(format!(
            "start_response(): status {status:?} is not a 3-digit code, a space and a reason (\"200 OK\")"
        ));
    }
    let code = b[..3]
        .iter()
        .fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    if !(200..=599).contains(&code) {
        return Err(format!(
            "start_response(): status code {code} is not a final status (200-599)"
        ));
    }
    Ok(code)
}

/// A header checked and its value encoded as latin-1.
fn parse_header<'v>(name: &str, value: &'v str) -> Result<Cow<'v, [u8]>, String> {
    if name.is_empty() || !name.bytes().all(is_tchar) {
        return Err(format!(
            "start_response(): {name:?} is not a valid header name"
        ));
    }
    if HOP_BY_HOP.iter().any(|h| h.eq_ignore_ascii_case(name)) {
        return Err(format!(
            "start_response(): {name} is a hop-by-hop header, which the server manages (PEP 3333)"
        ));
    }
    let allowed = |c: char| c == '\t' || (c >= ' ' && c != '\x7f');
    let refused = |c: char| {
        format!(
            "start_response(): the value of {name} has {c:?}: control characters and \
             chars beyond latin-1 are not allowed"
        )
    };
    if value.is_ascii() {
        // Its bytes are its latin-1 bytes: nothing to convert.
        return match value.chars().find(|&c| !allowed(c)) {
            Some(c) => Err(refused(c)),
            None => Ok(Cow::Borrowed(value.as_bytes())),
        };
    }
    let mut bytes = Vec::with_capacity(value.len());
    for c in value.chars() {
        match u8::try_from(u32::from(c)) {
            Ok(b) if allowed(c) => bytes.push(b),
            _ => return Err(refused(c)),
        }
    }
    Ok(Cow::Owned(bytes))
}

/// The app's Content-Length, held to the protocol's strict reading.
fn parse_length(value: &[u8]) -> Result<u64, String> {
    response::parse_length(value)
        .ok_or_else(|| "start_response(): Content-Length is not a number".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        assert_eq!(parse_status("200 OK"), Ok(200));
        assert_eq!(parse_status("404 "), Ok(404));
        assert_eq!(parse_status("599 Custom reason"), Ok(599));
        for bad in [
            "200",
            "200OK",
            "20 OK",
            "2000 OK",
            "abc OK",
            "101 Switching",
            "600 X",
            "200 O\nK",
            "",
        ] {
            assert!(parse_status(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn headers() {
        assert_eq!(
            parse_header("Content-Type", "text/plain").as_deref(),
            Ok(&b"text/plain"[..])
        );
        assert_eq!(
            parse_header("X-Name", "caf\u{e9}\tx").as_deref(),
            Ok(&b"caf\xe9\tx"[..])
        );
        for (name, value) in [
            ("Bad Name", "v"),
            ("", "v"),
            ("X:Y", "v"),
            ("X-Inject", "a\r\nSet-Cookie: x"),
            ("X-Nul", "a\0"),
            ("X-Del", "a\x7f"),
            ("X-Wide-Del", "\u{e9}\x7f"),
            ("X-Wide", "\u{20ac}"),
            ("Connection", "close"),
            ("transfer-encoding", "chunked"),
        ] {
            assert!(
                parse_header(name, value).is_err(),
                "{name}: {value:?} accepted"
            );
        }
    }

    #[test]
    fn lengths() {
        assert_eq!(parse_length(b"12"), Ok(12));
        for bad in [
            &b""[..],
            b"-1",
            b"1 2",
            b"+3",
            b"0x10",
            b"99999999999999999999999",
        ] {
            assert!(parse_length(bad).is_err());
        }
    }
}
