//! The environ dict (PEP 3333 "environ Variables").
//!
//! Speed: every constant entry (wsgi.*, SCRIPT_NAME, SERVER_NAME/PORT) lives
//! in a template dict built once per listening address; a request's environ is
//! one `dict.copy()` of it (a table copy in CPython) plus the per-request
//! entries, whose keys are interned strings, as are the common HTTP_* keys.
//!
//! Choices where PEP 3333 / CGI leave room:
//! - PATH_INFO is the percent-decoded path as a latin-1 `str` (one char per
//!   byte, as PEP 3333 wants for bytes that came off the wire); SCRIPT_NAME is
//!   the configured root path, stripped from the front of PATH_INFO when the
//!   path is under it (at a `/` boundary), else PATH_INFO is the whole path.
//! - Header names containing `_` are dropped (as nginx and gunicorn do):
//!   `X_Forwarded_For` would otherwise become the same HTTP_X_FORWARDED_FOR
//!   key as `X-Forwarded-For`, letting a client spoof a proxy's header.
//! - Repeated headers are joined with `","` (RFC 9110 §5.3 allows a comma
//!   with or without a space; the comma alone is what wsgiref, Werkzeug,
//!   gunicorn and Granian give an app), `Cookie` with `"; "` (RFC 6265
//!   §5.4). Content-Type/Length become CONTENT_TYPE/LENGTH only (never
//!   HTTP_CONTENT_*); the protocol refuses either on two lines. A chunked
//!   body the app is given whole (buffered by the core, the default, or in
//!   the loop-only shape) gets CONTENT_LENGTH too, its length once
//!   de-chunked (RFC 3875 §4.1.2, as waitress does): apps that read
//!   CONTENT_LENGTH bytes (Django) would otherwise see an empty body. One
//!   streamed to the app (`--request-buffering off`) has none, even where it
//!   happens to have arrived whole.
//! - On a Unix socket, SERVER_NAME is the socket path and SERVER_PORT is "80"
//!   (the http scheme's port, as gunicorn does), so URL reconstruction that
//!   falls back to them omits the port; REMOTE_ADDR is "" and REMOTE_PORT is
//!   absent for Unix peers (they have no address).

use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyString, PyTuple, PyType};

use super::errors::Errors;
use super::file_wrapper::FileWrapper;
use super::input::Input;
use super::WsgiConfig;
use crate::app::python::method;
use crate::app::{decoded_path, AppRequest, PeerText, ServerAddr};
use crate::backend::Peer;
use crate::http::{Fields, Version};

/// Headers common enough to deserve an interned HTTP_* key.
const COMMON_HEADERS: &[&str] = &[
    "Host",
    "User-Agent",
    "Accept",
    "Accept-Encoding",
    "Accept-Language",
    "Connection",
    "Cookie",
    "Referer",
    "Origin",
    "Authorization",
    "Cache-Control",
    "Pragma",
    "If-None-Match",
    "If-Modified-Since",
    "Upgrade-Insecure-Requests",
    "X-Forwarded-For",
    "X-Forwarded-Proto",
    "X-Forwarded-Host",
    "X-Real-Ip",
    "X-Requested-With",
    "Sec-Fetch-Site",
    "Sec-Fetch-Mode",
    "Sec-Fetch-Dest",
    "Sec-Fetch-User",
];

/// What every environ of one application shares.
pub(super) struct Constants {
    /// The wsgi.* entries and SCRIPT_NAME.
    base: Py<PyDict>,
    /// `base` plus SERVER_NAME/PORT, per listening address.
    templates: Mutex<Vec<(Arc<ServerAddr>, Py<PyDict>)>>,
    /// Interned HTTP_* keys of [`COMMON_HEADERS`].
    common: Vec<(&'static str, Py<PyString>)>,
    /// The root path, without a trailing `/` ("" when mounted at the root).
    root_path: Vec<u8>,
}

impl Constants {
    pub(super) fn new(py: Python<'_>, config: &WsgiConfig) -> PyResult<Constants> {
        let root_path = config.root_path.trim_end_matches('/');
        let base = PyDict::new(py);
        base.set_item("SCRIPT_NAME", root_path)?;
        base.set_item("wsgi.version", PyTuple::new(py, [1, 0])?)?;
        base.set_item("wsgi.url_scheme", "http")?;
        base.set_item("wsgi.errors", Bound::new(py, Errors::default())?)?;
        base.set_item("wsgi.multithread", PyBool::new(py, config.threads > 1))?;
        base.set_item("wsgi.multiprocess", false)?;
        base.set_item("wsgi.run_once", false)?;
        // The convention of mod_wsgi and gunicorn: wsgi.input ends at the body's
        // end, so werkzeug reads a chunked body (no Content-Length) instead of
        // taking it as empty.
        base.set_item("wsgi.input_terminated", true)?;
        base.set_item(
            "SERVER_SOFTWARE",
            concat!("m0serve/", env!("CARGO_PKG_VERSION")),
        )?;
        base.set_item("wsgi.file_wrapper", PyType::new::<FileWrapper>(py))?;
        let common = COMMON_HEADERS
            .iter()
            .map(|&name| (name, PyString::intern(py, &http_key(name)).unbind()))
            .collect();
        Ok(Constants {
            base: base.unbind(),
            templates: Mutex::new(Vec::new()),
            common,
            root_path: root_path.as_bytes().to_vec(),
        })
    }

    /// The template for requests that came to `server`, made on first use.
    fn template<'py>(
        &self,
        py: Python<'py>,
        server: &Arc<ServerAddr>,
    ) -> PyResult<Bound<'py, PyDict>> {
        if let Some(t) = self.find_template(py, server) {
            return Ok(t);
        }
        // Built without the lock: Python may run other threads meanwhile (a
        // collection's finalizers), and one of them may want the lock.
        let t = self.base.bind(py).copy()?;
        let (name, port) = match &**server {
            ServerAddr::Tcp { host, port } => (host.clone(), port.to_string()),
            ServerAddr::Unix(path) => (path.display().to_string(), "80".to_owned()),
        };
        t.set_item("SERVER_NAME", name)?;
        t.set_item("SERVER_PORT", port)?;
        let mut templates = self
            .templates
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !templates.iter().any(|(s, _)| Arc::ptr_eq(s, server)) {
            // The Arc is kept, so its address cannot be reused by another server.
            templates.push((Arc::clone(server), t.clone().unbind()));
        }
        Ok(t)
    }

    fn find_template<'py>(
        &self,
        py: Python<'py>,
        server: &Arc<ServerAddr>,
    ) -> Option<Bound<'py, PyDict>> {
        let templates = self
            .templates
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (_, t) = templates.iter().find(|(s, _)| Arc::ptr_eq(s, server))?;
        Some(t.bind(py).clone())
    }

    /// The HTTP_* key for header `name`.
    fn header_key<'py>(&self, py: Python<'py>, name: &str) -> Bound<'py, PyString> {
        match self
            .common
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            Some((_, key)) => key.bind(py).clone(),
            None => PyString::new(py, &http_key(name)),
        }
    }
}

/// The environ for `request`, reading its body through `input`;
/// `dechunked`: the length of a chunked body received whole, for
/// CONTENT_LENGTH.
pub(super) fn build<'py>(
    py: Python<'py>,
    constants: &Constants,
    request: &AppRequest,
    input: Bound<'py, Input>,
    dechunked: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let head = &request.head;
    let environ = constants.template(py, &request.server)?.copy()?;
    environ.set_item(intern!(py, "REQUEST_METHOD"), method(py, &head.method))?;
    let path = decoded_path(head.path());
    let path_info = strip_root(&path, &constants.root_path);
    environ.set_item(intern!(py, "PATH_INFO"), latin1(py, path_info))?;
    let query = head.query();
    let query = if query.is_empty() {
        intern!(py, "").clone()
    } else {
        latin1(py, query.as_bytes())
    };
    environ.set_item(intern!(py, "QUERY_STRING"), query)?;
    let protocol = match head.version {
        Version::Http10 => intern!(py, "HTTP/1.0"),
        Version::Http11 => intern!(py, "HTTP/1.1"),
        Version::Http2 => intern!(py, "HTTP/2"),
    };
    environ.set_item(intern!(py, "SERVER_PROTOCOL"), protocol)?;
    match &request.peer {
        Peer::Tcp(addr) => {
            let host = PeerText::ip(addr.ip());
            environ.set_item(intern!(py, "REMOTE_ADDR"), host.as_str())?;
            let port = PeerText::port(addr.port());
            environ.set_item(intern!(py, "REMOTE_PORT"), port.as_str())?;
        }
        Peer::Unix => environ.set_item(intern!(py, "REMOTE_ADDR"), intern!(py, ""))?,
    }
    set_headers(py, constants, &environ, &head.headers)?;
    if let Some(len) = dechunked {
        environ.set_item(intern!(py, "CONTENT_LENGTH"), len.to_string())?;
    }
    if !request.forwarded.is_empty() {
        set_forwarded(py, &environ, request)?;
    }
    environ.set_item(intern!(py, "wsgi.input"), input)?;
    Ok(environ)
}

/// What a trusted proxy forwarded (`--proxy-headers`): the scheme, and
/// SERVER_NAME/SERVER_PORT/HTTP_HOST (the client's address is the peer's).
fn set_forwarded(
    py: Python<'_>,
    environ: &Bound<'_, PyDict>,
    request: &AppRequest,
) -> PyResult<()> {
    let f = &request.forwarded;
    match f.secure {
        Some(true) => environ.set_item(intern!(py, "wsgi.url_scheme"), intern!(py, "https"))?,
        Some(false) => environ.set_item(intern!(py, "wsgi.url_scheme"), intern!(py, "http"))?,
        None => {}
    }
    if let Some(origin) = f.origin(request.head.header("host")) {
        if let Some(name) = origin.name {
            environ.set_item(intern!(py, "SERVER_NAME"), name)?;
        }
        environ.set_item(intern!(py, "SERVER_PORT"), origin.port.to_string())?;
        if let Some(host) = origin.http_host {
            environ.set_item(intern!(py, "HTTP_HOST"), host)?;
        }
    }
    Ok(())
}

/// CONTENT_TYPE, CONTENT_LENGTH and the HTTP_* entries.
fn set_headers(
    py: Python<'_>,
    constants: &Constants,
    environ: &Bound<'_, PyDict>,
    headers: &Fields,
) -> PyResult<()> {
    // Walked once: the checks below look back and ahead by index.
    let headers: Vec<(&str, &[u8])> = headers.iter().collect();
    let (mut content_type, mut content_length) = (false, false);
    for (i, &(name, value)) in headers.iter().enumerate() {
        if name.eq_ignore_ascii_case("content-type") {
            if !std::mem::replace(&mut content_type, true) {
                environ.set_item(intern!(py, "CONTENT_TYPE"), latin1(py, value))?;
            }
            continue;
        }
        if name.eq_ignore_ascii_case("content-length") {
            if !std::mem::replace(&mut content_length, true) {
                environ.set_item(intern!(py, "CONTENT_LENGTH"), latin1(py, value))?;
            }
            continue;
        }
        if name.contains('_')
            || headers[..i]
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            continue; // spoofable, or already joined into the first line's entry
        }
        let key = constants.header_key(py, name);
        let separator: &[u8] = if name.eq_ignore_ascii_case("cookie") {
            b"; "
        } else {
            b","
        };
        let value = join_repeated(&headers, i, separator);
        environ.set_item(key, latin1(py, &value))?;
    }
    Ok(())
}

/// The value of header line `i` joined with those of later lines of the same name.
fn join_repeated<'a>(headers: &[(&str, &'a [u8])], i: usize, separator: &[u8]) -> Cow<'a, [u8]> {
    let (name, first) = headers[i];
    let mut same = headers[i + 1..]
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .peekable();
    if same.peek().is_none() {
        return Cow::Borrowed(first);
    }
    let mut joined = first.to_vec();
    for (_, value) in same {
        joined.extend_from_slice(separator);
        joined.extend_from_slice(value);
    }
    Cow::Owned(joined)
}

/// `HTTP_` + the name uppercased, `-` as `_` (CGI, RFC 3875 §4.1.18).
fn http_key(name: &str) -> String {
    let mut key = String::with_capacity(5 + name.len());
    key.push_str("HTTP_");
    key.extend(name.chars().map(|c| match c {
        '-' => '_',
        c => c.to_ascii_uppercase(),
    }));
    key
}

/// PATH_INFO: `path` without the `root` prefix when it is under it.
fn strip_root<'a>(path: &'a [u8], root: &[u8]) -> &'a [u8] {
    match path.strip_prefix(root) {
        Some(rest) if !root.is_empty() && (rest.is_empty() || rest[0] == b'/') => rest,
        _ => path,
    }
}

/// Bytes as a latin-1 `str`: each byte is the char of the same number (PEP 3333).
pub(super) fn latin1<'py>(py: Python<'py>, bytes: &[u8]) -> Bound<'py, PyString> {
    match std::str::from_utf8(bytes) {
        Ok(s) if s.is_ascii() => PyString::new(py, s),
        _ => PyString::new(
            py,
            &bytes.iter().map(|&b| char::from(b)).collect::<String>(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(lines: &[(&str, &str)]) -> Fields {
        lines.iter().copied().collect()
    }

    #[test]
    fn http_keys_follow_cgi() {
        assert_eq!(http_key("X-Forwarded-For"), "HTTP_X_FORWARDED_FOR");
        assert_eq!(http_key("host"), "HTTP_HOST");
        assert_eq!(http_key("dnt"), "HTTP_DNT");
    }

    #[test]
    fn repeated_headers_are_joined_in_order() {
        let h = headers(&[
            ("Accept", "a"),
            ("Host", "h"),
            ("accept", "b"),
            ("ACCEPT", "c"),
        ]);
        let h: Vec<_> = h.iter().collect();
        assert_eq!(&*join_repeated(&h, 0, b", "), b"a, b, c");
        assert_eq!(&*join_repeated(&h, 1, b", "), b"h");
        let c = headers(&[("Cookie", "a=1"), ("Cookie", "b=2")]);
        let c: Vec<_> = c.iter().collect();
        assert_eq!(&*join_repeated(&c, 0, b"; "), b"a=1; b=2");
    }

    #[test]
    fn paths_are_rooted() {
        assert_eq!(strip_root(b"/api/users", b"/api"), b"/users");
        assert_eq!(strip_root(b"/api", b"/api"), b"");
        assert_eq!(strip_root(b"/apix", b"/api"), b"/apix");
        assert_eq!(strip_root(b"/other", b"/api"), b"/other");
        assert_eq!(strip_root(b"/x", b""), b"/x");
    }
}
