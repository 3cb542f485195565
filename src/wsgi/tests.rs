//! The WSGI layer driven the way a core drives it: a real [`Conduit`], the
//! real pool (or the inline shape), applications written in Python; the test
//! plays the core (pushes the body, takes the events, credits what it "wrote").

use std::ffi::CString;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use pyo3::conversion::FromPyObjectOwned;
use pyo3::prelude::*;

use super::{WsgiApp, WsgiConfig};
use crate::app::conduit::RESPONSE_HIGH_WATER;
use crate::app::{App, AppRequest, Conduit, Refused, ResponseEvent, ServerAddr};
use crate::backend::share::Board;
use crate::backend::slab::Key;
use crate::backend::{Notifier, Peer};
use crate::http::{BodyKind, Version};

const WAIT: Duration = Duration::from_secs(10);

/// The application `app` defined by `src`, served with `threads` pool threads.
fn load(src: &str, threads: usize, root_path: &str) -> (Arc<WsgiApp>, Py<PyModule>) {
    static MODULES: AtomicUsize = AtomicUsize::new(0);
    Python::initialize();
    Python::attach(|py| {
        let n = MODULES.fetch_add(1, Ordering::Relaxed);
        let code = CString::new(src).unwrap();
        let name = CString::new(format!("wsgi_test_app_{n}")).unwrap();
        let module = PyModule::from_code(py, &code, c"wsgi_test_app.py", &name).unwrap();
        let config = WsgiConfig {
            threads,
            backpressure: 1,
            root_path: root_path.to_owned(),
            turn: Default::default(),
        };
        let app = WsgiApp::new(py, module.getattr("app").unwrap().unbind(), config).unwrap();
        (app, module.unbind())
    })
}

/// A module-level variable of the app's module.
fn var<T: for<'py> FromPyObjectOwned<'py>>(module: &Py<PyModule>, name: &str) -> T {
    Python::attach(|py| {
        let value = module.bind(py).getattr(name).unwrap();
        let extracted: Option<T> = value.extract().ok();
        extracted.unwrap_or_else(|| panic!("{name} = {value} is not of the type asked"))
    })
}

fn request(method: &str, target: &str, headers: &[(&str, &str)]) -> AppRequest {
    AppRequest {
        head: Arc::new(crate::routes::testing::request(method, target, headers)),
        peer: Peer::Tcp("10.1.2.3:5555".parse().unwrap()),
        forwarded: Default::default(),
        server: Arc::new(ServerAddr::Tcp {
            host: "127.0.0.1".to_owned(),
            port: 8000,
        }),
        kind: crate::app::RequestKind::Http,
        tls: None,
    }
}

fn get(target: &str) -> AppRequest {
    request("GET", target, &[("Host", "example")])
}

/// A conduit whose notifications land on its own board.
fn conduit(inline: bool) -> (Arc<Conduit>, Arc<Board>) {
    let board = Board::new(1);
    let notifier = Notifier::new(board.clone(), 0, Key::new(1, 1));
    (Arc::new(Conduit::new(notifier, inline, false)), board)
}

/// Call the app with `req` (no body) and collect its whole answer.
fn serve(app: &WsgiApp, req: AppRequest) -> Vec<ResponseEvent> {
    let (ex, _board) = conduit(app.inline());
    ex.end_body();
    app.call(req, ex.clone()).ok().expect("refused");
    answer(&ex, true)
}

/// The events up to End or Abort; `credit`: tell the conduit each was written.
fn answer(ex: &Conduit, credit: bool) -> Vec<ResponseEvent> {
    let deadline = Instant::now() + WAIT;
    let (mut events, mut batch) = (Vec::new(), Vec::new());
    loop {
        ex.take_events(&mut batch);
        for event in batch.drain(..) {
            if credit {
                ex.written(event_len(&event));
            }
            let done = matches!(event, ResponseEvent::End | ResponseEvent::Abort);
            events.push(event);
            if done {
                return events;
            }
        }
        assert!(Instant::now() < deadline, "no end after {events:?}");
        thread::sleep(Duration::from_millis(1));
    }
}

fn event_len(event: &ResponseEvent) -> usize {
    match event {
        ResponseEvent::Body(data) => data.len(),
        ResponseEvent::File { len, .. } => *len as usize,
        _ => 0,
    }
}

/// Status, headers (values as text) and the Body bytes of a complete answer.
fn parts(events: &[ResponseEvent]) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let ResponseEvent::Start { status, headers } = &events[0] else {
        panic!("no head first: {events:?}");
    };
    assert!(
        matches!(events.last(), Some(ResponseEvent::End)),
        "{events:?}"
    );
    let headers = headers
        .iter()
        .map(|(n, v)| (n.to_owned(), String::from_utf8_lossy(v).into_owned()))
        .collect();
    let body = events
        .iter()
        .filter_map(|e| match e {
            ResponseEvent::Body(data) => Some(&data[..]),
            _ => None,
        })
        .collect::<Vec<_>>()
        .concat();
    (*status, headers, body)
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Poll `done` until it holds (or fail after [`WAIT`]).
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

const ENVIRON_APP: &str = r#"
KEYS = ["REQUEST_METHOD", "SCRIPT_NAME", "PATH_INFO", "QUERY_STRING", "CONTENT_TYPE",
        "CONTENT_LENGTH", "SERVER_NAME", "SERVER_PORT", "SERVER_PROTOCOL", "REMOTE_ADDR",
        "REMOTE_PORT", "HTTP_HOST", "HTTP_X_DUP", "HTTP_COOKIE", "wsgi.url_scheme"]

def app(environ, start_response):
    lines = ["%s=%r" % (k, environ.get(k)) for k in KEYS]
    lines.append("spoofed=%r" % ("HTTP_X_SPOOF" in environ))
    lines.append("http_content=%r" % [k for k in environ if k.startswith("HTTP_CONTENT")])
    lines.append("version=%r" % (environ["wsgi.version"],))
    lines.append("flags=%r" % ((environ["wsgi.multithread"], environ["wsgi.multiprocess"],
                                environ["wsgi.run_once"], environ["wsgi.input_terminated"]),))
    start_response("200 OK", [("Content-Type", "text/plain")])
    return ["\n".join(lines).encode()]
"#;

#[test]
fn the_environ_follows_pep_3333() {
    let (app, _) = load(ENVIRON_APP, 0, "/root/");
    let req = request(
        "GET",
        "/root/caf%C3%A9%2Fx?q=%20&r",
        &[
            ("Host", "example"),
            ("X-Dup", "a"),
            ("Cookie", "c=1"),
            ("x-dup", "b"),
            ("Cookie", "d=2"),
            ("X_Spoof", "1"),
            ("Content-Type", "text/x"),
        ],
    );
    let (status, _, body) = parts(&serve(&app, req));
    assert_eq!(status, 200);
    let expected = "REQUEST_METHOD='GET'\n\
         SCRIPT_NAME='/root'\n\
         PATH_INFO='/caf\u{c3}\u{a9}/x'\n\
         QUERY_STRING='q=%20&r'\n\
         CONTENT_TYPE='text/x'\n\
         CONTENT_LENGTH=None\n\
         SERVER_NAME='127.0.0.1'\n\
         SERVER_PORT='8000'\n\
         SERVER_PROTOCOL='HTTP/1.1'\n\
         REMOTE_ADDR='10.1.2.3'\n\
         REMOTE_PORT='5555'\n\
         HTTP_HOST='example'\n\
         HTTP_X_DUP='a,b'\n\
         HTTP_COOKIE='c=1; d=2'\n\
         wsgi.url_scheme='http'\n\
         spoofed=False\n\
         http_content=[]\n\
         version=(1, 0)\n\
         flags=(False, False, False, True)";
    assert_eq!(String::from_utf8(body).unwrap(), expected);
}

#[test]
fn forwarded_facts_reach_the_environ() {
    let (app, _) = load(ENVIRON_APP, 0, "");
    let mut req = get("/");
    req.forwarded = crate::http::forwarded::Forwarded {
        client: None,
        secure: Some(true),
        host: Some("example.com".into()),
        port: None,
    };
    let (_, _, body) = parts(&serve(&app, req));
    let body = String::from_utf8(body).unwrap();
    for line in [
        "SERVER_NAME='example.com'",
        "SERVER_PORT='443'",
        "HTTP_HOST='example.com'",
        "wsgi.url_scheme='https'",
        "REMOTE_ADDR='10.1.2.3'",
    ] {
        assert!(body.lines().any(|l| l == line), "{line} not in\n{body}");
    }
    // A port alone keeps the Host header's name and the server's.
    let mut req = get("/");
    req.forwarded.port = Some(8443);
    let (_, _, body) = parts(&serve(&app, req));
    let body = String::from_utf8(body).unwrap();
    for line in [
        "SERVER_NAME='127.0.0.1'",
        "SERVER_PORT='8443'",
        "HTTP_HOST='example:8443'",
        "wsgi.url_scheme='http'",
    ] {
        assert!(body.lines().any(|l| l == line), "{line} not in\n{body}");
    }
}

#[test]
fn unix_sockets_name_the_server_by_its_path() {
    let (app, _) = load(ENVIRON_APP, 2, "");
    let mut req = request("POST", "/x", &[("Content-Length", "0")]);
    Arc::make_mut(&mut req.head).version = Version::Http10;
    req.peer = Peer::Unix;
    req.server = Arc::new(ServerAddr::Unix("/run/app.sock".into()));
    let (_, _, body) = parts(&serve(&app, req));
    let body = String::from_utf8(body).unwrap();
    for line in [
        "SCRIPT_NAME=''",
        "PATH_INFO='/x'",
        "CONTENT_LENGTH='0'",
        "SERVER_NAME='/run/app.sock'",
        "SERVER_PORT='80'",
        "SERVER_PROTOCOL='HTTP/1.0'",
        "REMOTE_ADDR=''",
        "REMOTE_PORT=None",
        "flags=(True, False, False, True)",
    ] {
        assert!(body.lines().any(|l| l == line), "no {line} in\n{body}");
    }
}

const BODIES_APP: &str = r#"
import sys
closed = 0

class Counted:
    def __init__(self, items):
        self.items = items
    def __iter__(self):
        return iter(self.items)
    def close(self):
        global closed
        closed += 1

BIG = b"x" * 40000

def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/big":
        start_response("200 OK", [])
        return [BIG]
    if path == "/list":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"hello", b" world"]
    if path == "/empty":
        start_response("200 OK", [])
        return Counted([])
    if path == "/stream":
        start_response("200 OK", [])
        return Counted([b"a", b"", b"b"])
    if path == "/lazy":
        def gen():
            start_response("201 Created", [("X-Late", "1")])
            yield b""
            yield b"x"
        return gen()
    if path == "/write":
        write = start_response("200 OK", [])
        write(b"w1")
        return [b"r1"]
    if path == "/exc-info":
        start_response("200 OK", [])
        try:
            1 / 0
        except ZeroDivisionError:
            start_response("500 Oops", [("X-Error", "1")], sys.exc_info())
        return [b"error page"]
    if path == "/long":
        start_response("200 OK", [("Content-Length", "3")])
        return Counted([b"12", b"345"])
"#;

#[test]
fn a_list_is_sent_with_a_length_and_an_iterable_item_by_item() {
    let (app, module) = load(BODIES_APP, 1, "");
    let (status, headers, body) = parts(&serve(&app, get("/list")));
    assert_eq!((status, body.as_slice()), (200, &b"hello world"[..]));
    assert_eq!(header(&headers, "content-length"), Some("11"));

    let events = serve(&app, get("/stream"));
    let (_, headers, _) = parts(&events);
    assert_eq!(
        header(&headers, "content-length"),
        None,
        "a stream's length is unknown"
    );
    let bodies: Vec<&[u8]> = events
        .iter()
        .filter_map(|e| match e {
            ResponseEvent::Body(d) => Some(&d[..]),
            _ => None,
        })
        .collect();
    assert_eq!(bodies, [&b"a"[..], b"b"], "each non-empty item as it came");

    // A big item goes to the core as the app's own buffer, not a copy (app::piece).
    let events = serve(&app, get("/big"));
    let sent: Vec<*const u8> = events
        .iter()
        .filter_map(|e| match e {
            ResponseEvent::Body(d) => Some(d.as_ptr()),
            _ => None,
        })
        .collect();
    let own = Python::attach(|py| {
        let big = module.bind(py).getattr("BIG").unwrap();
        big.cast::<pyo3::types::PyBytes>()
            .unwrap()
            .as_bytes()
            .as_ptr()
    });
    assert_eq!(sent, [own], "the item's own bytes");

    let (_, headers, body) = parts(&serve(&app, get("/empty")));
    assert_eq!(
        (header(&headers, "content-length"), body.len()),
        (Some("0"), 0)
    );
    assert_eq!(var::<i64>(&module, "closed"), 2);

    let (_, headers, body) = parts(&serve(&app, get("/long")));
    assert_eq!(
        (header(&headers, "content-length"), &body[..]),
        (Some("3"), &b"123"[..])
    );
    assert_eq!(var::<i64>(&module, "closed"), 3);
}

#[test]
fn the_head_waits_for_the_first_byte_and_may_be_replaced_until_then() {
    let (app, _) = load(BODIES_APP, 1, "");
    let (status, headers, body) = parts(&serve(&app, get("/lazy")));
    assert_eq!((status, &body[..]), (201, &b"x"[..]));
    assert_eq!(header(&headers, "x-late"), Some("1"));

    let (status, headers, body) = parts(&serve(&app, get("/exc-info")));
    assert_eq!((status, &body[..]), (500, &b"error page"[..]));
    assert_eq!(header(&headers, "x-error"), Some("1"));

    let (status, _, body) = parts(&serve(&app, get("/write")));
    assert_eq!((status, &body[..]), (200, &b"w1r1"[..]));

    let mut head = get("/list");
    Arc::make_mut(&mut head.head).method = "HEAD".to_owned();
    let (_, headers, body) = parts(&serve(&app, head));
    assert_eq!(body, b"", "no body for HEAD");
    assert_eq!(
        header(&headers, "content-length"),
        None,
        "HEAD bodies prove no length"
    );
}

const BAD_APP: &str = r#"
import sys
closed = 0

class Counted:
    def __init__(self, items, fail=False):
        self.items, self.fail = items, fail
    def __iter__(self):
        for item in self.items:
            yield item
        if self.fail:
            raise RuntimeError("failed mid-stream")
    def close(self):
        global closed
        closed += 1

def app(environ, start_response):
    path = environ["PATH_INFO"]
    ok = lambda: start_response("200 OK", [("Content-Type", "text/plain")])
    if path == "/raise":
        raise RuntimeError("on purpose")
    if path == "/str":
        ok()
        return "text"
    if path == "/none":
        ok()
        return None
    if path == "/twice":
        ok()
        ok()
        return []
    if path == "/no-start":
        return [b"x"]
    if path == "/yield-str":
        ok()
        return Counted(["text"])
    if path == "/status":
        start_response("200", [])
        return []
    if path == "/hop":
        start_response("200 OK", [("Transfer-Encoding", "chunked")])
        return []
    if path == "/header":
        start_response("200 OK", [("X-Bad", "\u20ac")])
        return []
    if path == "/short":
        start_response("200 OK", [("Content-Length", "10")])
        return Counted([b"12345"])
    if path == "/mid-stream":
        ok()
        return Counted([b"first"], fail=True)
    if path == "/exc-info-late":
        def gen():
            ok()
            yield b"first"
            try:
                1 / 0
            except ZeroDivisionError:
                start_response("500 Oops", [], sys.exc_info())
            yield b"never"
        return gen()
    ok()
    return [b"fine"]
"#;

#[test]
fn bad_apps_are_aborted_and_the_thread_serves_on() {
    let (app, module) = load(BAD_APP, 1, "");
    for path in [
        "/raise",
        "/str",
        "/none",
        "/twice",
        "/no-start",
        "/yield-str",
        "/status",
        "/hop",
        "/header",
    ] {
        let events = serve(&app, get(path));
        assert!(
            matches!(events[..], [ResponseEvent::Abort]),
            "{path}: {events:?}"
        );
    }
    for path in ["/mid-stream", "/exc-info-late", "/short"] {
        let events = serve(&app, get(path));
        assert!(
            matches!(
                events[..],
                [
                    ResponseEvent::Start { .. },
                    ResponseEvent::Body(_),
                    ResponseEvent::Abort
                ]
            ),
            "{path}: {events:?}"
        );
    }
    assert_eq!(
        var::<i64>(&module, "closed"),
        3,
        "close() after each failure"
    );
    let (_, _, body) = parts(&serve(&app, get("/fine")));
    assert_eq!(body, b"fine");
}

const INPUT_APP: &str = r#"
def app(environ, start_response):
    stream = environ["wsgi.input"]
    parts = [stream.read(3), stream.readline(), stream.readline(2)]
    parts += list(stream)
    parts.append(stream.read())
    parts.append(stream.read(5))
    start_response("200 OK", [])
    return [repr(parts).encode()]
"#;

#[test]
fn the_body_is_read_as_the_client_sends_it() {
    let (app, _) = load(INPUT_APP, 1, "");
    let (ex, _board) = conduit(false);
    let mut req = request("POST", "/", &[("Transfer-Encoding", "chunked")]);
    Arc::make_mut(&mut req.head).body = BodyKind::Chunked;
    app.call(req, ex.clone()).ok().expect("refused");
    // The app is waiting for the body: it arrives in pieces, lines split across them.
    for piece in ["ab", "c\nde", "f\ngh", "ij\nk\n", "rest"] {
        thread::sleep(Duration::from_millis(20));
        assert!(ex.push_body(piece.as_bytes().to_vec()));
    }
    ex.end_body();
    let (_, _, body) = parts(&answer(&ex, true));
    assert_eq!(
        String::from_utf8(body).unwrap(),
        r"[b'abc', b'\n', b'de', b'f\n', b'ghij\n', b'k\n', b'rest', b'', b'']"
    );
}

#[test]
fn inline_bodies_are_read_whole() {
    let (app, _) = load(INPUT_APP, 0, "");
    let (ex, _board) = conduit(true);
    ex.push_body(b"abc\n\nxyz".to_vec());
    ex.end_body();
    app.call(request("POST", "/", &[("Content-Length", "8")]), ex.clone())
        .ok()
        .expect("refused");
    let (_, _, body) = parts(&answer(&ex, true));
    assert_eq!(
        String::from_utf8(body).unwrap(),
        r"[b'abc', b'\n', b'\n', b'xyz', b'', b'']"
    );
}

const STREAM_APP: &str = r#"
import time
sent = 0
closed = False

class Stream:
    def __init__(self, chunks, delay):
        self.chunks, self.delay = chunks, delay
    def __iter__(self):
        global sent
        for _ in range(self.chunks):
            if self.delay:
                time.sleep(self.delay)
            sent += 1
            yield b"x" * 65536
    def close(self):
        global closed
        closed = True

def app(environ, start_response):
    start_response("200 OK", [])
    if environ["PATH_INFO"] == "/forever":
        return Stream(10**9, 0.005)
    return Stream(64, 0)
"#;

#[test]
fn a_slow_client_makes_the_app_wait() {
    let (app, module) = load(STREAM_APP, 1, "");
    let (ex, _board) = conduit(false);
    ex.end_body();
    app.call(get("/"), ex.clone()).ok().expect("refused");
    // Nothing is written: the app must stop near the high water.
    thread::sleep(Duration::from_millis(300));
    let mut taken = Vec::new();
    ex.take_events(&mut taken);
    let queued: usize = taken.iter().map(event_len).sum();
    assert!(
        queued <= RESPONSE_HIGH_WATER + 65536,
        "{queued} bytes queued for a client that reads nothing"
    );
    assert!(var::<i64>(&module, "sent") < 64, "the app never waited");
    // The client reads: the rest flows.
    ex.written(queued);
    let rest = answer(&ex, true);
    let total = queued + rest.iter().map(event_len).sum::<usize>();
    assert_eq!(total, 64 * 65536);
    assert!(var::<bool>(&module, "closed"));
}

#[test]
fn close_is_called_when_the_client_goes() {
    let (app, module) = load(STREAM_APP, 1, "");
    let (ex, _board) = conduit(false);
    ex.end_body();
    app.call(get("/forever"), ex.clone()).ok().expect("refused");
    eventually("a first chunk", || var::<i64>(&module, "sent") > 0);
    ex.close();
    eventually("close() once the client left", || {
        var::<bool>(&module, "closed")
    });
}

const FILE_APP: &str = r#"
import io, tempfile
DATA = bytes(i % 251 for i in range(10000))

def app(environ, start_response):
    if environ["PATH_INFO"] == "/bytesio":
        start_response("200 OK", [])
        return environ["wsgi.file_wrapper"](io.BytesIO(DATA), 4096)
    f = tempfile.TemporaryFile()
    f.write(DATA)
    f.seek(100)
    headers = []
    if environ["QUERY_STRING"]:
        headers.append(("Content-Length", environ["QUERY_STRING"]))
    start_response("200 OK", headers)
    return environ["wsgi.file_wrapper"](f)
"#;

#[test]
fn file_wrappers_of_regular_files_are_sent_from_their_descriptor() {
    let data: Vec<u8> = (0..10000).map(|i| (i % 251) as u8).collect();
    let (app, _) = load(FILE_APP, 1, "");
    for (target, want_len) in [("/file", 9900u64), ("/file?50", 50)] {
        let events = serve(&app, get(target));
        let [ResponseEvent::Start { headers, .. }, ResponseEvent::File { file, offset, len }, ResponseEvent::End] =
            &events[..]
        else {
            panic!("{target}: {events:?}");
        };
        assert_eq!(
            (*offset, *len),
            (100, want_len),
            "{target}: from the file's position"
        );
        let length = headers.iter().find(|(n, _)| *n == "Content-Length");
        assert_eq!(
            length.map(|(_, v)| v),
            Some(want_len.to_string().as_bytes())
        );
        let mut sent = vec![0; want_len as usize];
        file.read_exact_at(&mut sent, *offset).unwrap();
        assert_eq!(
            sent,
            data[100..100 + want_len as usize],
            "the app closed its file, the dup lives"
        );
    }
    let events = serve(&app, get("/bytesio"));
    assert!(events
        .iter()
        .all(|e| !matches!(e, ResponseEvent::File { .. })));
    assert_eq!(parts(&events).2, data, "a BytesIO is iterated");
}

const GATE_APP: &str = r#"
import threading
gate = threading.Event()
running = 0

def app(environ, start_response):
    global running
    running += 1
    if environ["PATH_INFO"] == "/block":
        gate.wait(10)
    start_response("200 OK", [])
    return [b"done"]
"#;

#[test]
fn refused_requests_are_notified_once_the_pool_has_room() {
    let (app, module) = load(GATE_APP, 1, "");
    let (blocker, _) = conduit(false);
    blocker.end_body();
    app.call(get("/block"), blocker.clone())
        .ok()
        .expect("refused");
    eventually("the blocking view runs", || {
        var::<i64>(&module, "running") == 1
    });
    // Fill the queue until a request is handed back.
    let mut accepted = Vec::new();
    let refused = loop {
        let (ex, board) = conduit(false);
        ex.end_body();
        match app.call(get("/"), ex.clone()) {
            Ok(()) => accepted.push(ex),
            Err(refused) => break (refused, board),
        }
        assert!(accepted.len() < 100, "never refused");
    };
    let (refused, board) = refused;
    assert_eq!(board.take_ready(0).count(), 0, "notified before any room");
    Python::attach(|py| {
        module
            .bind(py)
            .getattr("gate")?
            .call_method0("set")
            .map(drop)
    })
    .unwrap();
    eventually("the refused request's session is notified", || {
        board.take_ready(0).count() > 0
    });
    let Refused { request, conduit } = *refused;
    app.call(request, conduit.clone())
        .ok()
        .expect("refused again with room");
    for ex in accepted.iter().chain([&blocker, &conduit]) {
        assert_eq!(parts(&answer(ex, true)).2, b"done");
    }
    app.shutdown();
}
