//! `wsgi.file_wrapper(filelike, blksize=8192)` (PEP 3333 "Optional
//! Platform-Specific File Handling").
//!
//! When the application returns a wrapper around a regular file (one whose
//! `fileno()` works), the response is sent from the file descriptor by the core
//! thread (zero-copy where the backend can) and no Python runs per block: the
//! fd is `dup()`ed, so the app may close its file as soon as the view returns.
//! It is sent from the file's current position (`tell()`) to its end, or for
//! Content-Length bytes when the app set one. Anything else (a BytesIO, a
//! socket, a pipe) is iterated a block at a time like any other iterable.

use std::fs::File;
use std::os::fd::{BorrowedFd, RawFd};

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The `wsgi.file_wrapper` type.
#[pyclass(frozen, module = "m0serve", name = "FileWrapper")]
pub(super) struct FileWrapper {
    filelike: Py<PyAny>,
    blksize: usize,
}

#[pymethods]
impl FileWrapper {
    #[new]
    #[pyo3(signature = (filelike, blksize = 8192))]
    fn new(filelike: Py<PyAny>, blksize: usize) -> FileWrapper {
        FileWrapper {
            filelike,
            blksize: blksize.max(1),
        }
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let block = self
            .filelike
            .bind(py)
            .call_method1(intern!(py, "read"), (self.blksize,))?;
        let block = block.cast_into::<PyBytes>().map_err(|e| {
            PyTypeError::new_err(format!(
                "wsgi.file_wrapper: read() must return bytes: {}",
                e.into_inner()
            ))
        })?;
        Ok((!block.as_bytes().is_empty()).then_some(block))
    }

    /// Closes the file, if it can be closed (PEP 3333).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let filelike = self.filelike.bind(py);
        if filelike.hasattr(intern!(py, "close"))? {
            filelike.call_method0(intern!(py, "close"))?;
        }
        Ok(())
    }
}

/// A regular file to send from: the descriptor (a dup), where the file's
/// position is, and its size.
pub(super) struct RegularFile {
    pub file: File,
    pub offset: u64,
    pub size: u64,
}

impl FileWrapper {
    /// The wrapped object as a regular file, if it is one.
    pub(super) fn regular_file(&self, py: Python<'_>) -> Option<RegularFile> {
        let filelike = self.filelike.bind(py);
        let fd: RawFd = filelike
            .call_method0(intern!(py, "fileno"))
            .ok()?
            .extract()
            .ok()?;
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` was just returned by `fileno()` of an object we hold,
        // with the GIL held, so nothing can close it before the dup below
        // returns; the borrow does not outlive this statement.
        let file = File::from(
            unsafe { BorrowedFd::borrow_raw(fd) }
                .try_clone_to_owned()
                .ok()?,
        );
        let meta = file.metadata().ok()?;
        if !meta.is_file() {
            return None;
        }
        // tell(), not the fd's offset: a buffered reader may have read ahead.
        let offset: u64 = filelike
            .call_method0(intern!(py, "tell"))
            .ok()?
            .extract()
            .ok()?;
        Some(RegularFile {
            file,
            offset,
            size: meta.len(),
        })
    }
}
