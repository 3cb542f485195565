//! The HTTP connection scope (ASGI 3.0, HTTP spec 2.4).
//!
//! Speed, as for the WSGI environ: the constant entries (type, asgi, scheme,
//! root_path, server, extensions) live in a template dict per listening
//! address; a request's scope is one `dict.copy()` of it plus the
//! per-request entries under interned keys. Common header names are cached
//! as `bytes` objects (immutable, so shared by every request).
//!
//! Choices where the spec leaves room (as uvicorn makes them):
//! - `path` is the whole percent-decoded path, root path included (the spec's
//!   2.x reading: `root_path` names the mount point inside `path`), decoded
//!   as UTF-8 with invalid sequences replaced; `raw_path` is the path as sent.
//! - `state` is a shallow copy of the lifespan state, per request.
//! - `http.response.pathsend` is offered: the core sends such files zero-copy.

use std::sync::{Arc, Mutex, PoisonError};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::app::{decoded_path, origin_path, AppRequest, ServerAddr};
use crate::backend::Peer;
use crate::http::Version;
use crate::wsgi::environ::method;

/// Header names common enough to keep as ready-made `bytes`.
const COMMON_HEADERS: &[&str] = &[
    "host",
    "user-agent",
    "accept",
    "accept-encoding",
    "accept-language",
    "connection",
    "content-type",
    "content-length",
    "cookie",
    "referer",
    "origin",
    "authorization",
    "cache-control",
    "pragma",
    "if-none-match",
    "if-modified-since",
    "upgrade",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
    "x-real-ip",
    "x-requested-with",
];

/// What every scope of one application shares.
pub(super) struct Constants {
    /// type, asgi, scheme, root_path, extensions.
    base: Py<PyDict>,
    /// `base` plus `server`, per listening address.
    templates: Mutex<Vec<(Arc<ServerAddr>, Py<PyDict>)>>,
    /// The lifespan state, copied into each request's scope.
    pub(super) state: Py<PyDict>,
    common: Vec<(&'static str, Py<PyBytes>)>,
}

impl Constants {
    pub(super) fn new(py: Python<'_>, root_path: &str) -> PyResult<Constants> {
        let base = PyDict::new(py);
        base.set_item("type", "http")?;
        let asgi = PyDict::new(py);
        asgi.set_item("version", "3.0")?;
        asgi.set_item("spec_version", "2.4")?;
        base.set_item("asgi", asgi)?;
        base.set_item("scheme", "http")?;
        base.set_item("root_path", root_path.trim_end_matches('/'))?;
        let extensions = PyDict::new(py);
        extensions.set_item("http.response.pathsend", PyDict::new(py))?;
        base.set_item("extensions", extensions)?;
        let common = COMMON_HEADERS
            .iter()
            .map(|&name| (name, PyBytes::new(py, name.as_bytes()).unbind()))
            .collect();
        Ok(Constants {
            base: base.unbind(),
            templates: Mutex::new(Vec::new()),
            state: PyDict::new(py).unbind(),
            common,
        })
    }

    /// The template for requests that came to `server`, made on first use
    /// (only the loop thread builds scopes: the lock is never contended).
    fn template<'py>(
        &self,
        py: Python<'py>,
        server: &Arc<ServerAddr>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut templates = self
            .templates
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((_, t)) = templates.iter().find(|(s, _)| Arc::ptr_eq(s, server)) {
            return Ok(t.bind(py).clone());
        }
        let t = self.base.bind(py).copy()?;
        let address = match &**server {
            ServerAddr::Tcp { host, port } => PyTuple::new(
                py,
                [
                    host.into_pyobject(py)?.into_any(),
                    port.into_pyobject(py)?.into_any(),
                ],
            )?,
            ServerAddr::Unix(path) => PyTuple::new(
                py,
                [
                    path.display().to_string().into_pyobject(py)?.into_any(),
                    py.None().into_bound(py),
                ],
            )?,
        };
        t.set_item("server", address)?;
        // The Arc is kept, so its address cannot be reused by another server.
        templates.push((Arc::clone(server), t.clone().unbind()));
        Ok(t)
    }

    /// Header name `name` lowercased, as `bytes`.
    fn header_name<'py>(&self, py: Python<'py>, name: &str) -> Bound<'py, PyBytes> {
        if let Some((_, b)) = self
            .common
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            return b.bind(py).clone();
        }
        PyBytes::new(py, name.to_ascii_lowercase().as_bytes())
    }
}

/// The scope for `request`.
pub(super) fn build<'py>(
    py: Python<'py>,
    constants: &Constants,
    request: &AppRequest,
) -> PyResult<Bound<'py, PyDict>> {
    let head = &request.head;
    let scope = constants.template(py, &request.server)?.copy()?;
    let version = match head.version {
        Version::Http10 => intern!(py, "1.0"),
        Version::Http11 => intern!(py, "1.1"),
    };
    scope.set_item(intern!(py, "http_version"), version)?;
    scope.set_item(intern!(py, "method"), method(py, &head.method))?;
    let path = decoded_path(head.path());
    scope.set_item(
        intern!(py, "path"),
        PyString::new(py, &String::from_utf8_lossy(&path)),
    )?;
    scope.set_item(
        intern!(py, "raw_path"),
        PyBytes::new(py, origin_path(head.path()).as_bytes()),
    )?;
    scope.set_item(
        intern!(py, "query_string"),
        PyBytes::new(py, head.query().as_bytes()),
    )?;
    let headers = PyList::empty(py);
    for (name, value) in &head.headers {
        let pair = PyTuple::new(
            py,
            [
                constants.header_name(py, name).into_any(),
                PyBytes::new(py, value).into_any(),
            ],
        )?;
        headers.append(pair)?;
    }
    scope.set_item(intern!(py, "headers"), headers)?;
    match &request.peer {
        Peer::Tcp(addr) => {
            let client = (addr.ip().to_string(), addr.port()).into_pyobject(py)?;
            scope.set_item(intern!(py, "client"), client)?;
        }
        Peer::Unix => scope.set_item(intern!(py, "client"), py.None())?,
    }
    scope.set_item(intern!(py, "state"), constants.state.bind(py).copy()?)?;
    Ok(scope)
}
