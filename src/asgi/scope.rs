//! The connection scopes (ASGI 3.0): HTTP and WebSocket, spec 2.4.
//!
//! Speed, as for the WSGI environ: the constant entries (type, asgi, scheme,
//! root_path, server, extensions) live in a template dict per listening
//! address and scope type; a request's scope is one `dict.copy()` of it plus the
//! per-request entries under interned keys. Common header names are cached
//! as `bytes` objects (immutable, so shared by every request).
//!
//! Choices where the spec leaves room (as uvicorn makes them):
//! - `path` is the whole percent-decoded path, root path included (the spec's
//!   2.x reading: `root_path` names the mount point inside `path`), decoded
//!   as UTF-8 with invalid sequences replaced; `raw_path` is the path as sent.
//! - `state` is a shallow copy of the lifespan state, per request.
//! - `http.response.pathsend` is offered: the core sends such files zero-copy.
//! - A WebSocket scope has no `method`, `scheme` "ws", the client's offered
//!   `subprotocols`, and offers `websocket.http.response` (denial responses).

use std::sync::{Arc, Mutex, PoisonError};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::app::python::method;
use crate::app::{decoded_path, origin_path, AppRequest, PeerText, RequestKind, ServerAddr};
use crate::backend::Peer;
use crate::http::Version;
use crate::tls::TlsInfo;

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

/// The constant part of one scope type, per listening address.
struct Templates {
    /// type, asgi, scheme, root_path, extensions.
    base: Py<PyDict>,
    /// `base` plus `server`, per listening address.
    by_server: Vec<(Arc<ServerAddr>, Py<PyDict>)>,
}

/// What every scope of one application shares.
pub(super) struct Constants {
    /// The HTTP scopes' and the WebSocket scopes'.
    templates: Mutex<[Templates; 2]>,
    /// The lifespan state, copied into each request's scope.
    pub(super) state: Py<PyDict>,
    common: Vec<(&'static str, Py<PyBytes>)>,
}

impl Constants {
    pub(super) fn new(
        py: Python<'_>,
        root_path: &str,
        version: super::AsgiVersion,
    ) -> PyResult<Constants> {
        let base = |kind: &str, scheme: &str, advertised: &[&str]| -> PyResult<Templates> {
            let base = PyDict::new(py);
            base.set_item("type", kind)?;
            let asgi = PyDict::new(py);
            asgi.set_item("version", version.as_str())?;
            asgi.set_item("spec_version", "2.4")?;
            base.set_item("asgi", asgi)?;
            base.set_item("scheme", scheme)?;
            base.set_item("root_path", root_path.trim_end_matches('/'))?;
            let extensions = PyDict::new(py);
            for extension in advertised {
                extensions.set_item(extension, PyDict::new(py))?;
            }
            base.set_item("extensions", extensions)?;
            Ok(Templates {
                base: base.unbind(),
                by_server: Vec::new(),
            })
        };
        let templates = [
            base(
                "http",
                "http",
                &["http.response.pathsend", "http.response.trailers"],
            )?,
            base("websocket", "ws", &["websocket.http.response"])?,
        ];
        let common = COMMON_HEADERS
            .iter()
            .map(|&name| (name, PyBytes::new(py, name.as_bytes()).unbind()))
            .collect();
        Ok(Constants {
            templates: Mutex::new(templates),
            state: PyDict::new(py).unbind(),
            common,
        })
    }

    /// The template for requests (WebSocket ones if `websocket`) that came
    /// to `server`, made on first use (only the loop thread builds scopes:
    /// the lock is never contended).
    fn template<'py>(
        &self,
        py: Python<'py>,
        server: &Arc<ServerAddr>,
        websocket: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut all = self
            .templates
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let templates = &mut all[usize::from(websocket)];
        if let Some((_, t)) = templates
            .by_server
            .iter()
            .find(|(s, _)| Arc::ptr_eq(s, server))
        {
            return Ok(t.bind(py).clone());
        }
        let t = templates.base.bind(py).copy()?;
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
        templates
            .by_server
            .push((Arc::clone(server), t.clone().unbind()));
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

/// What a trusted proxy forwarded (`--proxy-headers`): `scheme` and `server`
/// (`client` is the peer already). The headers stay as sent.
fn set_forwarded(
    py: Python<'_>,
    scope: &Bound<'_, PyDict>,
    request: &AppRequest,
    websocket: bool,
) -> PyResult<()> {
    let f = &request.forwarded;
    if let Some(secure) = f.secure {
        let scheme = match (websocket, secure) {
            (false, false) => intern!(py, "http"),
            (false, true) => intern!(py, "https"),
            (true, false) => intern!(py, "ws"),
            (true, true) => intern!(py, "wss"),
        };
        scope.set_item(intern!(py, "scheme"), scheme)?;
    }
    if let Some(origin) = f.origin(request.head.header("host")) {
        let name = origin.name.unwrap_or_else(|| match &*request.server {
            ServerAddr::Tcp { host, .. } => host.clone(),
            ServerAddr::Unix(path) => path.display().to_string(),
        });
        scope.set_item(
            intern!(py, "server"),
            (name, origin.port).into_pyobject(py)?,
        )?;
    }
    Ok(())
}

/// The scope for `request` (an HTTP or a WebSocket one, by its kind).
pub(super) fn build<'py>(
    py: Python<'py>,
    constants: &Constants,
    request: &AppRequest,
) -> PyResult<Bound<'py, PyDict>> {
    let head = &request.head;
    let websocket = matches!(request.kind, RequestKind::WebSocket { .. });
    let scope = constants.template(py, &request.server, websocket)?.copy()?;
    let version = match head.version {
        Version::Http10 => intern!(py, "1.0"),
        Version::Http11 => intern!(py, "1.1"),
        Version::Http2 => intern!(py, "2"),
    };
    scope.set_item(intern!(py, "http_version"), version)?;
    match &request.kind {
        RequestKind::Http => scope.set_item(intern!(py, "method"), method(py, &head.method))?,
        RequestKind::WebSocket { subprotocols } => {
            let offered = PyList::new(py, subprotocols)?;
            scope.set_item(intern!(py, "subprotocols"), offered)?;
        }
    }
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
            let client = (PeerText::ip(addr.ip()).as_str(), addr.port()).into_pyobject(py)?;
            scope.set_item(intern!(py, "client"), client)?;
        }
        Peer::Unix => scope.set_item(intern!(py, "client"), py.None())?,
    }
    if !request.forwarded.is_empty() {
        set_forwarded(py, &scope, request, websocket)?;
    }
    if let Some(tls) = &request.tls {
        set_tls(py, &scope, tls)?;
    }
    scope.set_item(intern!(py, "state"), constants.state.bind(py).copy()?)?;
    Ok(scope)
}

/// The `tls` extension (ASGI's TLS extension, spec 0.2): the template's
/// `extensions` dict is shared by every scope, so a TLS scope gets a copy.
fn set_tls(py: Python<'_>, scope: &Bound<'_, PyDict>, tls: &TlsInfo) -> PyResult<()> {
    let extensions = match scope.get_item(intern!(py, "extensions"))? {
        Some(shared) => shared.cast_into::<PyDict>()?.copy()?,
        None => PyDict::new(py),
    };
    let info = PyDict::new(py);
    info.set_item("server_cert", &*tls.server_cert)?;
    info.set_item("client_cert_chain", PyList::new(py, &tls.client_chain)?)?;
    info.set_item("client_cert_name", tls.client_name.as_deref())?;
    info.set_item("client_cert_error", py.None())?;
    info.set_item("tls_version", tls.version)?;
    info.set_item("cipher_suite", tls.cipher)?;
    extensions.set_item("tls", info)?;
    scope.set_item(intern!(py, "extensions"), extensions)
}
