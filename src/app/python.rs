//! Python values of a request's fields that both Python interfaces make
//! alike: WSGI's environ and ASGI's scope.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyString;

/// The request method as a `str`, interned for the usual methods
/// (REQUEST_METHOD, `scope["method"]`).
pub fn method<'py>(py: Python<'py>, method: &str) -> Bound<'py, PyString> {
    let interned = match method {
        "GET" => intern!(py, "GET"),
        "POST" => intern!(py, "POST"),
        "HEAD" => intern!(py, "HEAD"),
        "PUT" => intern!(py, "PUT"),
        "DELETE" => intern!(py, "DELETE"),
        "PATCH" => intern!(py, "PATCH"),
        "OPTIONS" => intern!(py, "OPTIONS"),
        other => return PyString::new(py, other),
    };
    interned.clone()
}
