//! Answer body pieces (and binary WebSocket messages) as the core sends
//! them: [`bytes::Bytes`], shared between the application side that made
//! them and the core thread that writes them.
//!
//! A piece of [`WHOLE_PIECE`] bytes or more is queued as it came, never
//! copied into the connection's output, and lent to a backend that sends
//! from it (io_uring): a large answer crosses user space once, from the
//! application's buffer to the kernel. An application's own `bytes` object
//! becomes such a piece without a copy ([`from_py_bytes`]); shorter bodies
//! are copied, and gathered with the head a small answer goes in one write.
//! A binary WebSocket message is framed into the output by the core thread
//! (its one copy), so a big one costs the app's thread no copy at all.

/// A body piece at least this long is queued and sent as the buffer it came
/// in; shorter ones are gathered into the output.
pub const WHOLE_PIECE: usize = 16 * 1024;

#[cfg(feature = "python")]
pub use python::from_py_bytes;

// A piece is dropped on core threads, which never attach to Python: without
// PyO3's deferred reference pool that drop would abort the process.
#[cfg(pyo3_disable_reference_pool)]
compile_error!(
    "app::piece releases Python objects without the GIL: PyO3's reference pool is required"
);

#[cfg(feature = "python")]
mod python {
    use bytes::Bytes;
    use pyo3::prelude::*;
    use pyo3::types::PyBytes;

    use super::WHOLE_PIECE;

    /// The first `len` bytes of a Python `bytes` object (at most its length):
    /// a piece of [`WHOLE_PIECE`] or more holds the object itself and reads
    /// its buffer in place; a shorter one is copied, and so is a subclass's
    /// (whose `__del__` would run wherever the reference is released).
    pub fn from_py_bytes(bytes: &Bound<'_, PyBytes>, len: usize) -> Bytes {
        let data = bytes.as_bytes();
        let data = &data[..len.min(data.len())];
        if data.len() < WHOLE_PIECE || !bytes.is_exact_instance_of::<PyBytes>() {
            return Bytes::copy_from_slice(data);
        }
        Bytes::from_owner(PyBuffer {
            ptr: data.as_ptr(),
            len: data.len(),
            _object: bytes.clone().unbind(),
        })
    }

    /// A `bytes` object's buffer, read without the GIL.
    ///
    /// Dropped on a core thread, the object's reference is released the next
    /// time a thread enters Python through PyO3 (its deferred reference
    /// pool): the loop or a pool thread, with the next request.
    struct PyBuffer {
        ptr: *const u8,
        len: usize,
        _object: Py<PyBytes>,
    }

    // SAFETY: a `bytes` object is immutable once handed out (CPython resizes
    // one in place only while it holds the sole reference, and C code does
    // not change one it shared), and its buffer lives inside the object,
    // which `_object` keeps alive: reading it needs no GIL, from any thread.
    unsafe impl Send for PyBuffer {}

    impl AsRef<[u8]> for PyBuffer {
        fn as_ref(&self) -> &[u8] {
            // SAFETY: `ptr..ptr+len` is within the object's buffer (taken from
            // `as_bytes` with the GIL held), which neither moves nor changes
            // while `_object` holds the object.
            unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
        }
    }
}

#[cfg(all(test, feature = "python"))]
mod tests {
    use pyo3::prelude::*;
    use pyo3::types::PyBytes;

    use super::*;

    #[test]
    fn a_big_piece_is_the_objects_own_buffer_and_a_small_one_a_copy() {
        Python::initialize();
        Python::attach(|py| {
            let big = PyBytes::new(py, &vec![7u8; 40_000]);
            let piece = from_py_bytes(&big, 30_000);
            assert_eq!(piece.len(), 30_000, "cut to the length asked");
            assert_eq!(piece.as_ptr(), big.as_bytes().as_ptr(), "not copied");
            assert_eq!(
                from_py_bytes(&big, 50_000).len(),
                40_000,
                "at most the object"
            );

            let small = PyBytes::new(py, &[1u8; WHOLE_PIECE - 1]);
            let copied = from_py_bytes(&small, WHOLE_PIECE - 1);
            assert_ne!(copied.as_ptr(), small.as_bytes().as_ptr(), "copied");
            assert_eq!(&copied[..], small.as_bytes());

            let module = PyModule::from_code(
                py,
                c"class Sub(bytes): pass\nSUB = Sub(40000)",
                c"piece_sub.py",
                c"piece_sub",
            )
            .unwrap();
            let sub = module.getattr("SUB").unwrap();
            let sub = sub.cast::<PyBytes>().unwrap();
            let piece = from_py_bytes(sub, 40_000);
            assert_ne!(
                piece.as_ptr(),
                sub.as_bytes().as_ptr(),
                "a subclass is copied"
            );
        });
    }

    #[test]
    fn a_piece_dropped_without_the_gil_releases_the_object_later() {
        Python::initialize();
        let (object, piece) = Python::attach(|py| {
            let big = PyBytes::new(py, &vec![1u8; 2 * WHOLE_PIECE]);
            let piece = from_py_bytes(&big, usize::MAX);
            (big.unbind(), piece)
        });
        // SAFETY: reads the reference count of an object kept alive by `object`.
        let count = || Python::attach(|_| unsafe { pyo3::ffi::Py_REFCNT(object.as_ptr()) });
        let held = count();
        // A core thread: never attached to the interpreter.
        std::thread::spawn(move || drop(piece)).join().unwrap();
        // Entering Python (as the next request's call does) releases it.
        let after = count();
        assert_eq!(after, held - 1, "the piece's reference is gone");
    }
}
