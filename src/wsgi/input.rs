//! `wsgi.input`: the request body, streamed from the connection.
//!
//! Reads take what the core has pushed into the conduit, holding the GIL;
//! only when nothing is there yet is the GIL released, around the blocking
//! wait, so other Python threads run meanwhile. Nothing is read before the app
//! asks (the first read is also what sends `100 Continue`), and only what a
//! call needs is buffered here: a 1 GB upload read in pieces never sits in
//! memory. `wsgi.input_terminated` is true: a read at the body's end returns
//! b"", whatever CONTENT_LENGTH says.

use std::sync::Arc;

use pyo3::exceptions::PyConnectionError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::app::{BodyRead, Conduit};

/// How much one read asks the conduit for when the caller set no bound.
const CHUNK: usize = 64 * 1024;

/// The `wsgi.input` stream of one request.
#[pyclass(module = "m0serve", name = "InputStream")]
pub(super) struct Input {
    conduit: Arc<Conduit>,
    /// Body bytes taken from the conduit and not yet returned: `buf[pos..]`.
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
    /// Loop-only shape: the whole body is in the conduit before the view
    /// runs, and waiting would block the core thread that fills it.
    inline: bool,
}

impl Input {
    pub(super) fn new(conduit: Arc<Conduit>, inline: bool) -> Input {
        Input {
            conduit,
            buf: Vec::new(),
            pos: 0,
            eof: false,
            inline,
        }
    }

    fn buffered(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// Take up to `max` more bytes into the buffer, waiting (GIL released)
    /// while none have arrived. False at the end of the body.
    fn fill(&mut self, py: Python<'_>, max: usize) -> PyResult<bool> {
        while !self.eof {
            match self.conduit.try_read_body(max.max(1)) {
                Ok(BodyRead::Data(data)) if data.is_empty() => {}
                Ok(BodyRead::Data(data)) => {
                    if self.pos == self.buf.len() {
                        self.buf = data; // all returned: take the chunk as is, no copy
                    } else {
                        self.buf.drain(..self.pos);
                        self.buf.extend_from_slice(&data);
                    }
                    self.pos = 0;
                    return Ok(true);
                }
                Ok(BodyRead::Empty) if self.inline => self.eof = true,
                Ok(BodyRead::Empty) => {
                    let conduit = &*self.conduit;
                    py.detach(|| conduit.wait_body());
                }
                Ok(BodyRead::Eof) => self.eof = true,
                Err(_gone) => {
                    return Err(PyConnectionError::new_err(
                        "the client disconnected while the request body was read",
                    ))
                }
            }
        }
        Ok(false)
    }

    /// Return the next `n` buffered bytes.
    fn take<'py>(&mut self, py: Python<'py>, n: usize) -> Bound<'py, PyBytes> {
        let bytes = PyBytes::new(py, &self.buf[self.pos..self.pos + n]);
        self.pos += n;
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        bytes
    }

    /// One line (with its `\n`), at most `limit` bytes; b"" at the end.
    fn line<'py>(
        &mut self,
        py: Python<'py>,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let limit = limit.unwrap_or(usize::MAX);
        let mut scanned = 0; // bytes of the buffer known to hold no newline
        loop {
            let buffered = self.buffered();
            if let Some(at) = buffered[scanned..].iter().position(|&b| b == b'\n') {
                let n = (scanned + at + 1).min(limit);
                return Ok(self.take(py, n));
            }
            if buffered.len() >= limit {
                return Ok(self.take(py, limit));
            }
            scanned = buffered.len();
            let want = (limit - scanned).min(CHUNK);
            if !self.fill(py, want)? {
                let n = self.buffered().len();
                return Ok(self.take(py, n));
            }
        }
    }
}

/// A size argument: None or negative means "no bound".
fn bound(size: Option<isize>) -> Option<usize> {
    size.and_then(|n| usize::try_from(n).ok())
}

#[pymethods]
impl Input {
    /// `read()`, `read(-1)`, `read(None)`: the rest of the body; `read(n)`: up
    /// to `n` bytes (fewer only at the end of the body).
    #[pyo3(signature = (size = None))]
    fn read<'py>(&mut self, py: Python<'py>, size: Option<isize>) -> PyResult<Bound<'py, PyBytes>> {
        match bound(size) {
            None => while self.fill(py, CHUNK)? {},
            Some(n) => {
                while self.buffered().len() < n && self.fill(py, n - self.buffered().len())? {}
            }
        }
        let n = bound(size)
            .map_or(usize::MAX, |n| n)
            .min(self.buffered().len());
        Ok(self.take(py, n))
    }

    #[pyo3(signature = (size = None))]
    fn readline<'py>(
        &mut self,
        py: Python<'py>,
        size: Option<isize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.line(py, bound(size))
    }

    /// Lines until the end, or until their total reaches `hint` (when positive).
    #[pyo3(signature = (hint = None))]
    fn readlines<'py>(
        &mut self,
        py: Python<'py>,
        hint: Option<isize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let hint = bound(hint).filter(|&h| h > 0).unwrap_or(usize::MAX);
        let lines = PyList::empty(py);
        let mut total = 0;
        while total < hint {
            let line = self.line(py, None)?;
            if line.as_bytes().is_empty() {
                break;
            }
            total += line.as_bytes().len();
            lines.append(line)?;
        }
        Ok(lines)
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let line = self.line(py, None)?;
        Ok((!line.as_bytes().is_empty()).then_some(line))
    }

    fn readable(&self) -> bool {
        true
    }
}
