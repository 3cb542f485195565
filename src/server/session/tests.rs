//! Sans-IO session tests: the session driven by hand, the application on threads.

use super::*;
use crate::backend::Service;
use std::io::Write;

/// A notifier nobody drains (these sessions are driven by hand).
pub(super) fn notifier() -> Notifier {
    let key = crate::backend::slab::Key::new(0, 0);
    Notifier::new(crate::backend::share::Board::new(1), 0, key)
}

pub(super) fn service(router: Router) -> HttpService {
    HttpService::new(Arc::new(Shared::for_tests(router, None)))
}

/// Everything the session wants written, files read in place.
pub(super) fn drain(s: &mut HttpSession) -> Vec<u8> {
    let mut all = Vec::new();
    loop {
        let n = match s.output() {
            Output::None => return all,
            Output::Bytes(b) => {
                all.extend_from_slice(b);
                b.len()
            }
            Output::File { fd, offset, len } => {
                let mut buf = vec![0u8; len];
                // SAFETY: `fd` is the session's open file, `buf` holds `len` bytes.
                let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), len, offset as i64) };
                all.extend_from_slice(&buf[..n as usize]);
                n as usize
            }
        };
        s.on_sent(n, Instant::now());
    }
}

#[test]
fn pipelined_answers_keep_their_order_around_a_file_body() {
    let dir = std::env::temp_dir().join(format!("m0-session-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::File::create(dir.join("a.txt"))
        .unwrap()
        .write_all(b"FILEBODY")
        .unwrap();
    let router = Router::new(Some("/healthz".into()), vec![("/s".into(), dir.clone())]).unwrap();
    let mut s = service(router).open(&Peer::Unix, 0, notifier());
    let now = Instant::now();
    s.on_read(
        b"GET /s/a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
        now,
    );
    let out = String::from_utf8(drain(&mut s)).unwrap();
    let file = out.find("FILEBODY").expect("file body sent");
    let second = out.rfind("HTTP/1.1 200").unwrap();
    assert!(
        file < second,
        "the second answer waited for the file body: {out}"
    );
    assert!(!s.done() && s.idle());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_head_that_starts_after_a_complete_one_is_timed() {
    let mut s = service(Router::default()).open(&Peer::Unix, 0, notifier());
    let now = Instant::now();
    s.on_read(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HT", now);
    drain(&mut s);
    assert_eq!(s.deadline(), Some(now + Duration::from_secs(10)));
    s.on_deadline(now + Duration::from_secs(11));
    assert!(s.done());
    assert!(
        s.linger() == Linger::No,
        "a head too slow is closed, not waited for longer"
    );
}

#[test]
fn a_refused_upload_lingers_for_the_rest_of_its_body() {
    let mut s = service(Router::default()).open(&Peer::Unix, 0, notifier());
    s.on_read(
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\nabc",
        Instant::now(),
    );
    assert!(String::from_utf8(drain(&mut s))
        .unwrap()
        .starts_with("HTTP/1.1 413"));
    assert!(s.done());
    assert_eq!(s.linger(), Linger::Yes);
}

#[test]
fn an_idle_connection_gets_the_keep_alive_deadline() {
    let mut s = service(Router::default()).open(&Peer::Unix, 0, notifier());
    let now = Instant::now();
    s.on_read(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", now);
    assert!(String::from_utf8(drain(&mut s))
        .unwrap()
        .starts_with("HTTP/1.1 404"));
    let later = Instant::now();
    let d = s.deadline().expect("keep-alive deadline");
    assert!(d >= now + Duration::from_secs(5) && d <= later + Duration::from_secs(5));
    s.on_deadline(d - Duration::from_millis(1));
    assert!(!s.done(), "not before the deadline");
    s.on_deadline(d);
    assert!(s.done());
    // Under TLS the answer's last records may still be on their way: an
    // idle close must not cut them as a client that took nothing is cut.
    assert!(!s.aborted(), "an idle close is not a client given up on");
}

/// A service whose drain keeps an idle keep-alive connection for `grace`
/// after its last answer (None: closes it at once).
fn draining_service(grace: Option<Duration>) -> HttpService {
    let mut shared = Shared::for_tests(Router::default(), None);
    shared.drain_idle = grace;
    HttpService::new(Arc::new(shared))
}

#[test]
fn a_drain_answers_a_request_sent_just_after_the_last_answer_and_closes_a_long_idle_connection() {
    let get = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut just = draining_service(Some(Duration::from_secs(1))).open(&Peer::Unix, 0, notifier());
    just.on_read(get, Instant::now());
    drain(&mut just);
    just.on_shutdown();
    assert!(
        !just.done() && !just.idle(),
        "closed under a request on its way"
    );
    let held = just.deadline().expect("held until the grace ends");
    assert!(held <= Instant::now() + Duration::from_secs(1));
    just.on_read(get, Instant::now());
    assert!(String::from_utf8(drain(&mut just))
        .unwrap()
        .contains("Connection: close"));
    assert!(just.done());
    // An answer encoded for a kept-alive connection but still queued as
    // the drain begins: its client will send again once it reads it.
    let mut queued =
        draining_service(Some(Duration::from_secs(1))).open(&Peer::Unix, 0, notifier());
    queued.on_read(get, Instant::now());
    queued.on_shutdown();
    assert!(String::from_utf8(drain(&mut queued))
        .unwrap()
        .starts_with("HTTP/1.1 404"));
    assert!(
        !queued.done(),
        "closed under the request its answer invites"
    );
    queued.on_read(get, Instant::now());
    assert!(String::from_utf8(drain(&mut queued))
        .unwrap()
        .contains("Connection: close"));
    assert!(queued.done());
    // Nothing came: closed once the grace since the last answer is over.
    let mut quiet = draining_service(Some(Duration::from_secs(1))).open(&Peer::Unix, 0, notifier());
    quiet.on_read(get, Instant::now());
    drain(&mut quiet);
    quiet.on_shutdown();
    let held = quiet.deadline().unwrap();
    quiet.on_deadline(held);
    assert!(quiet.done());
    // Idle longer than the grace already: a client sending back to back
    // would have sent; closed at once.
    let mut long =
        draining_service(Some(Duration::from_millis(1))).open(&Peer::Unix, 0, notifier());
    long.on_read(get, Instant::now());
    drain(&mut long);
    std::thread::sleep(Duration::from_millis(5));
    long.on_shutdown();
    assert!(long.done() && long.idle());
    // The negative arm (M0_DRAIN_IDLE_MS=0): closed at once, the old rule.
    let mut at_once = draining_service(None).open(&Peer::Unix, 0, notifier());
    at_once.on_read(get, Instant::now());
    drain(&mut at_once);
    at_once.on_shutdown();
    assert!(at_once.done());
}

#[test]
fn shutdown_closes_idle_sessions_and_lets_a_busy_one_finish() {
    let mut idle = draining_service(None).open(&Peer::Unix, 0, notifier());
    idle.on_read(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", Instant::now());
    drain(&mut idle);
    idle.on_shutdown();
    assert!(idle.done());
    // A connection accepted just before the drain gets its first request
    // answered (with `Connection: close`), or closes within the grace.
    let mut fresh = service(Router::default()).open(&Peer::Unix, 0, notifier());
    let now = Instant::now();
    fresh.on_shutdown();
    assert!(!fresh.done() && !fresh.idle());
    let grace = fresh.deadline().expect("a grace deadline");
    assert!(grace <= now + Duration::from_secs(2), "{:?}", grace - now);
    fresh.on_read(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", Instant::now());
    assert!(String::from_utf8(drain(&mut fresh))
        .unwrap()
        .contains("Connection: close"));
    assert!(fresh.done());
    let mut silent = service(Router::default()).open(&Peer::Unix, 0, notifier());
    silent.on_shutdown();
    let grace = silent.deadline().unwrap();
    silent.on_deadline(grace);
    assert!(silent.done());
    // Without the drain's hold (M0_DRAIN_IDLE_MS=0): an answer queued but
    // not sent as the drain begins is the connection's last.
    let mut busy = draining_service(None).open(&Peer::Unix, 0, notifier());
    busy.on_read(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", Instant::now());
    busy.on_shutdown();
    // Done, but the backend closes only once the queued answer is written.
    assert!(String::from_utf8(drain(&mut busy))
        .unwrap()
        .starts_with("HTTP/1.1 404"));
    assert!(busy.done());
    let mut fresh = service(Router::default()).open(&Peer::Unix, 0, notifier());
    fresh.on_read(b"GET / HTTP/1.1\r\nHost: x\r\n", Instant::now());
    fresh.on_shutdown();
    assert!(!fresh.done(), "a request on its way is answered");
    fresh.on_read(b"\r\n", Instant::now());
    assert!(String::from_utf8(drain(&mut fresh))
        .unwrap()
        .contains("onnection: close"));
    assert!(fresh.done());
}

#[test]
fn a_request_with_a_body_is_answered_after_its_body() {
    let router = Router::new(Some("/healthz".into()), vec![]).unwrap();
    let mut s = service(router).open(&Peer::Unix, 0, notifier());
    let now = Instant::now();
    s.on_read(
        b"POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
        now,
    );
    assert!(
        drain(&mut s).is_empty(),
        "no answer before the body is read"
    );
    s.on_read(b"lo\r\nzz\r\n", now);
    let out = String::from_utf8(drain(&mut s)).unwrap();
    assert!(
        out.starts_with("HTTP/1.1 400"),
        "a malformed body gets its 400: {out}"
    );
    assert!(s.done());
}

// ---- requests answered by an application --------------------------------

use crate::app::conduit::BODY_HIGH_WATER;
use crate::app::testing::{answer, read_body, read_body_with, send, ThreadApp};
use crate::app::{AppRequest, BodyRead, Conduit, Fields, ResponseEvent};
use crate::backend::share::Board;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// A session whose unrouted requests go to `app`, and the board its
/// notifications land on.
pub(super) fn app_session(app: ThreadApp) -> (HttpSession, Arc<ThreadApp>, Arc<Board>) {
    app_session_with(app, |_| {})
}

/// [`app_session`] with the shared settings changed by `configure`.
pub(super) fn app_session_with(
    app: ThreadApp,
    configure: impl FnOnce(&mut Shared),
) -> (HttpSession, Arc<ThreadApp>, Arc<Board>) {
    let app = Arc::new(app);
    let mut svc = service(Router::new(Some("/healthz".into()), vec![]).unwrap());
    let shared = Arc::get_mut(&mut svc.shared).unwrap();
    shared.app = Some(app.clone());
    configure(shared);
    let board = Board::new(1);
    let key = crate::backend::slab::Key::new(0, 0);
    let s = svc.open(&Peer::Unix, 0, Notifier::new(board.clone(), 0, key));
    (s, app, board)
}

/// Drive `s` as a backend would (a client that takes everything at once):
/// write its output and deliver its notifications until `until` holds of
/// what was written.
pub(super) fn run_until(
    s: &mut HttpSession,
    board: &Board,
    until: impl Fn(&HttpSession, &str) -> bool,
) -> String {
    let start = Instant::now();
    let mut all = Vec::new();
    loop {
        all.extend(drain(s));
        let text = String::from_utf8_lossy(&all).into_owned();
        if until(s, &text) {
            return text;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "gave up waiting; written so far: {text:?}"
        );
        if board.take_ready(0).count() > 0 {
            s.on_notify(Instant::now());
        } else {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[test]
fn the_app_echoes_a_body_and_the_connection_is_kept() {
    // The app answers only once the test has looked at the session while it
    // answers: an answer already in by then would start the send clock.
    let (go, gate) = std::sync::mpsc::channel::<()>();
    let gate = Mutex::new(gate);
    let (mut s, _app, board) = app_session(ThreadApp::new(move |_req, ex| {
        let body = read_body(&ex).unwrap();
        let _ = gate.lock().unwrap().recv_timeout(Duration::from_secs(5));
        answer(&ex, 200, &body).unwrap();
    }));
    let now = Instant::now();
    s.on_read(
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world",
        now,
    );
    assert_eq!(
        s.deadline(),
        None,
        "no keep-alive clock while the app answers"
    );
    assert!(!s.idle(), "a request in the app is not idle");
    go.send(()).unwrap();
    let out = run_until(&mut s, &board, |_, o| o.ends_with("hello world"));
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    assert!(out.contains("Content-Length: 11\r\n"), "{out}");
    assert!(s.idle() && !s.done());
    assert!(
        s.deadline().is_some(),
        "idle again: the keep-alive clock runs"
    );
}

#[test]
fn pipelined_requests_reach_the_app_one_at_a_time_and_are_answered_in_order() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let seen = log.clone();
    let (mut s, app, board) = app_session(ThreadApp::new(move |req, ex| {
        let path = req.head.path().to_string();
        seen.lock().unwrap().push(format!("call {path}"));
        // The first is the slow one: an answer out of order would show.
        std::thread::sleep(Duration::from_millis(if path == "/a" { 100 } else { 0 }));
        seen.lock().unwrap().push(format!("end {path}"));
        answer(&ex, 200, path.as_bytes()).unwrap();
    }));
    s.on_read(
        b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
        Instant::now(),
    );
    let out = run_until(&mut s, &board, |_, o| o.ends_with("/b"));
    let a = out.find("\r\n\r\n/a").expect("the first answer");
    let health = out.find("\r\n\r\nOK").expect("the route's answer");
    assert!(a < health, "answers out of order: {out}");
    assert_eq!(app.calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        *log.lock().unwrap(),
        ["call /a", "end /a", "call /b", "end /b"],
        "the second request reached the app only after the first was answered"
    );
}

/// The body of a chunked response, decoded.
fn dechunk(mut body: &str) -> String {
    let mut data = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").expect("a chunk-size line");
        let size = usize::from_str_radix(size, 16).unwrap();
        if size == 0 {
            assert_eq!(rest, "\r\n", "the body ends after the last chunk");
            return data;
        }
        data.push_str(&rest[..size]);
        body = rest[size..].strip_prefix("\r\n").expect("a chunk's CRLF");
    }
}

#[test]
fn a_streamed_answer_without_a_length_is_chunked() {
    let (mut s, _app, board) = app_session(ThreadApp::new(|_req, ex| {
        let start = ResponseEvent::Start {
            status: 200,
            headers: vec![("X-Stream", b"yes")].into(),
        };
        send(&ex, start).unwrap();
        for i in 0..5 {
            send(
                &ex,
                ResponseEvent::Body(format!("chunk{i};").into_bytes().into()),
            )
            .unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
        send(&ex, ResponseEvent::End).unwrap();
    }));
    s.on_read(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n", Instant::now());
    let out = run_until(&mut s, &board, |_, o| o.ends_with("0\r\n\r\n"));
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    assert!(head.contains("Transfer-Encoding: chunked") && head.contains("X-Stream: yes"));
    assert_eq!(dechunk(body), "chunk0;chunk1;chunk2;chunk3;chunk4;");
}

#[test]
fn an_app_failing_before_its_answer_starts_gets_a_500() {
    let (mut s, _app, board) = app_session(ThreadApp::new(|_req, ex| {
        send(&ex, ResponseEvent::Abort).unwrap();
    }));
    s.on_read(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n", Instant::now());
    let out = run_until(&mut s, &board, |_, o| o.contains("Internal Server Error"));
    assert!(out.starts_with("HTTP/1.1 500"), "{out}");
    assert!(!s.done(), "a complete 500 keeps the connection");
}

#[test]
fn an_app_failing_mid_answer_closes_the_connection() {
    let (mut s, _app, board) = app_session(ThreadApp::new(|_req, ex| {
        let start = ResponseEvent::Start {
            status: 200,
            headers: Default::default(),
        };
        send(&ex, start).unwrap();
        send(&ex, ResponseEvent::Body(b"partial".to_vec().into())).unwrap();
        send(&ex, ResponseEvent::Abort).unwrap();
    }));
    s.on_read(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n", Instant::now());
    let out = run_until(&mut s, &board, |s, o| s.done() && o.contains("partial"));
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(
        !out.ends_with("0\r\n\r\n"),
        "no last chunk: the client sees the failure"
    );
}

#[test]
fn a_refused_call_stops_reading_and_is_retried_when_notified() {
    let (mut s, app, board) = app_session(
        ThreadApp::new(|_req, ex| {
            let body = read_body(&ex).unwrap();
            answer(&ex, 201, &body).unwrap();
        })
        .refusing(1),
    );
    s.on_read(
        b"POST /r HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nab",
        Instant::now(),
    );
    assert_eq!(app.calls.load(Ordering::SeqCst), 1);
    assert!(
        !s.wants_read(),
        "a refused call holds the connection's input"
    );
    let out = run_until(&mut s, &board, |s, _| s.wants_read());
    assert!(out.is_empty());
    assert_eq!(app.calls.load(Ordering::SeqCst), 2, "retried once notified");
    s.on_read(b"cdef", Instant::now());
    let out = run_until(&mut s, &board, |_, o| o.ends_with("abcdef"));
    assert!(out.starts_with("HTTP/1.1 201"), "{out}");
}

#[test]
fn a_slow_reading_app_stops_the_body_at_the_high_water() {
    const TOTAL: usize = 2 << 20;
    let taken = Arc::new(AtomicUsize::new(0));
    let app_taken = taken.clone();
    let (mut s, _app, board) = app_session(ThreadApp::new(move |_req, ex| {
        let body = read_body_with(&ex, 16 * 1024, |piece| {
            app_taken.fetch_add(piece.len(), Ordering::SeqCst);
            std::thread::sleep(Duration::from_micros(300));
        })
        .unwrap();
        let ok = body.len() == TOTAL && body.iter().enumerate().all(|(i, &b)| b == i as u8);
        answer(&ex, 200, if ok { b"intact" } else { b"garbled" }).unwrap();
    }));
    let head = format!("PUT /up HTTP/1.1\r\nHost: x\r\nContent-Length: {TOTAL}\r\n\r\n");
    s.on_read(head.as_bytes(), Instant::now());
    let body: Vec<u8> = (0..TOTAL).map(|i| i as u8).collect();
    let (mut fed, mut stops) = (0, 0);
    let start = Instant::now();
    while fed < TOTAL {
        assert!(start.elapsed() < Duration::from_secs(10), "upload stalled");
        if s.wants_read() {
            let n = (TOTAL - fed).min(64 * 1024);
            s.on_read(&body[fed..fed + n], Instant::now());
            fed += n;
            let buffered = fed - taken.load(Ordering::SeqCst);
            assert!(
                buffered <= BODY_HIGH_WATER + 64 * 1024,
                "{buffered} bytes buffered for the app"
            );
        } else {
            stops += 1;
            run_until(&mut s, &board, |s, _| s.wants_read());
        }
    }
    assert!(stops > 0, "the session never stopped reading");
    let out = run_until(&mut s, &board, |_, o| {
        o.contains("intact") || o.contains("garbled")
    });
    assert!(out.ends_with("intact"), "{out}");
}

/// Start a 200 answer, declaring `length` as its Content-Length when the
/// request is for `/sized` (else it goes chunked).
fn start_sized(req: &AppRequest, ex: &Conduit, length: &[u8]) {
    let mut headers = Fields::default();
    if req.head.path() == "/sized" {
        headers.push("Content-Length", length);
    }
    let start = ResponseEvent::Start {
        status: 200,
        headers,
    };
    send(ex, start).unwrap();
}

#[test]
fn a_file_event_is_sent_from_the_file_in_any_framing() {
    let path = std::env::temp_dir().join(format!("m0-app-file-{}", std::process::id()));
    std::fs::write(&path, b"0123456789FILEDATA").unwrap();
    let file_path = path.clone();
    let (mut s, _app, board) = app_session(ThreadApp::new(move |req, ex| {
        start_sized(&req, &ex, b"8");
        let file = std::fs::File::open(&file_path).unwrap();
        send(
            &ex,
            ResponseEvent::File {
                file,
                offset: 10,
                len: 8,
            },
        )
        .unwrap();
        send(&ex, ResponseEvent::End).unwrap();
    }));
    s.on_read(b"GET /sized HTTP/1.1\r\nHost: x\r\n\r\n", Instant::now());
    let out = run_until(&mut s, &board, |s, _| s.idle());
    assert!(
        out.contains("Content-Length: 8\r\n") && out.ends_with("\r\n\r\nFILEDATA"),
        "{out}"
    );
    s.on_read(b"GET /chunked HTTP/1.1\r\nHost: x\r\n\r\n", Instant::now());
    let out = run_until(&mut s, &board, |s, _| s.idle());
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    assert!(head.contains("Transfer-Encoding: chunked"), "{head}");
    assert_eq!(dechunk(body), "FILEDATA");
    std::fs::remove_file(path).unwrap();
}

/// What the session writes, driven as io_uring drives it: a buffer it lends
/// is sent from (at most `most` bytes a write, so a lent buffer goes out in
/// several), the rest copied from `output`. Returns the bytes and how many
/// long the lent buffer was at each write from one.
fn drain_lending(s: &mut HttpSession, most: usize) -> (Vec<u8>, Vec<usize>) {
    let (mut all, mut lent) = (Vec::new(), Vec::new());
    loop {
        if let Some((buf, from)) = s.lend_output() {
            assert!(matches!(s.output(), Output::None), "output while lent");
            assert!(s.lend_output().is_none(), "lent twice");
            let n = (buf.len() - from).min(most);
            all.extend_from_slice(&buf[from..from + n]);
            lent.push(buf.len());
            s.on_sent_lent(buf, n, Instant::now());
            continue;
        }
        let n = match s.output() {
            Output::None => return (all, lent),
            Output::Bytes(b) => {
                let n = b.len().min(most);
                all.extend_from_slice(&b[..n]);
                n
            }
            Output::File { .. } => unreachable!("no files here"),
        };
        s.on_sent(n, Instant::now());
    }
}

#[test]
fn a_big_body_piece_is_lent_whole_in_every_framing() {
    let piece: Vec<u8> = (0..40_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let sent = piece.clone();
    let (mut s, _app, board) = app_session(ThreadApp::new(move |req, ex| {
        start_sized(&req, &ex, b"30000");
        send(&ex, ResponseEvent::Body(sent.clone().into())).unwrap();
        send(&ex, ResponseEvent::Body(b"tail".to_vec().into())).unwrap();
        send(&ex, ResponseEvent::End).unwrap();
    }));
    let serve = |s: &mut HttpSession, request: &[u8]| {
        s.on_read(request, Instant::now());
        let start = Instant::now();
        let (mut out, mut lent) = (Vec::new(), Vec::new());
        loop {
            let (bytes, lends) = drain_lending(s, 7000);
            out.extend(bytes);
            lent.extend(lends);
            if s.idle() {
                return (String::from_utf8(out).unwrap(), lent);
            }
            assert!(start.elapsed() < Duration::from_secs(5), "no answer");
            if board.take_ready(0).count() > 0 {
                s.on_notify(Instant::now());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let text = String::from_utf8(piece).unwrap();
    let (out, lent) = serve(&mut s, b"GET /chunked HTTP/1.1\r\nHost: x\r\n\r\n");
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    assert!(head.contains("Transfer-Encoding: chunked"), "{head}");
    assert_eq!(dechunk(body), format!("{text}tail"));
    assert_eq!(
        lent, [40_000; 6],
        "the app's own 40,000 bytes lent, and sent 7,000 at a time"
    );
    let (out, lent) = serve(&mut s, b"GET /sized HTTP/1.1\r\nHost: x\r\n\r\n");
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    assert!(head.contains("Content-Length: 30000\r\n"), "{head}");
    assert_eq!(body, &text[..30000], "cut to the declared length");
    assert_eq!(lent, [30_000; 5], "the piece, cut to the length, lent");
    let (out, lent) = serve(&mut s, b"HEAD /chunked HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(
        out.ends_with("\r\n\r\n") && lent.is_empty(),
        "a body to HEAD: {out}"
    );
}

#[test]
fn continue_is_sent_when_the_app_first_reads_the_body() {
    let (mut s, _app, board) = app_session(ThreadApp::new(|_req, ex| {
        std::thread::sleep(Duration::from_millis(50));
        let body = read_body(&ex).unwrap();
        answer(&ex, 200, &body).unwrap();
    }));
    s.on_read(
        b"POST /c HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n",
        Instant::now(),
    );
    assert!(drain(&mut s).is_empty(), "no 100 before the app asks");
    let out = run_until(&mut s, &board, |_, o| !o.is_empty());
    assert_eq!(out, "HTTP/1.1 100 Continue\r\n\r\n");
    s.on_read(b"body", Instant::now());
    let out = run_until(&mut s, &board, |_, o| o.ends_with("body"));
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
}

#[test]
fn a_dropped_session_tells_the_app_its_client_is_gone() {
    let gone = Arc::new(Mutex::new(None));
    let seen = gone.clone();
    let (mut s, _app, _board) = app_session(ThreadApp::new(move |_req, ex| {
        *seen.lock().unwrap() = Some(read_body(&ex).is_err());
    }));
    s.on_read(
        b"POST /g HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\npart",
        Instant::now(),
    );
    std::thread::sleep(Duration::from_millis(50));
    assert!(gone.lock().unwrap().is_none(), "the app waits for the body");
    drop(s);
    let start = Instant::now();
    while gone.lock().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the app never woke"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(*gone.lock().unwrap(), Some(true), "its read ended in Gone");
}

#[test]
fn an_inline_app_runs_on_the_core_once_the_body_is_complete() {
    let (mut s, app, board) = app_session(
        ThreadApp::new(|_req, ex| {
            // Everything is there already: an inline app cannot wait.
            let mut body = Vec::new();
            while let Ok(BodyRead::Data(d)) = ex.try_read_body(3) {
                body.extend_from_slice(&d);
            }
            assert_eq!(ex.try_read_body(3), Ok(BodyRead::Eof));
            answer(&ex, 200, &body).unwrap();
        })
        .inline(),
    );
    s.on_read(
        b"POST /i HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 6\r\n\r\n",
        Instant::now(),
    );
    assert_eq!(
        String::from_utf8(drain(&mut s)).unwrap(),
        "HTTP/1.1 100 Continue\r\n\r\n",
        "the core reads the body itself: the client is told to send it"
    );
    s.on_read(b"inl", Instant::now());
    assert_eq!(
        app.calls.load(Ordering::SeqCst),
        0,
        "not before the body is complete"
    );
    s.on_read(b"ine", Instant::now());
    assert_eq!(
        app.threads.lock().unwrap().as_slice(),
        [std::thread::current().id()]
    );
    // Answered within the read, no notification needed.
    let out = String::from_utf8(drain(&mut s)).unwrap();
    assert!(out.ends_with("inline"), "{out}");
    assert!(s.idle());
    let _ = board;
}

#[test]
fn shutdown_lets_an_answer_in_progress_finish_then_closes() {
    let (mut s, _app, board) = app_session(ThreadApp::new(|_req, ex| {
        std::thread::sleep(Duration::from_millis(50));
        answer(&ex, 200, b"finished").unwrap();
    }));
    s.on_read(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n", Instant::now());
    s.on_shutdown();
    assert!(!s.idle() && !s.done(), "a request in the app is not idle");
    let out = run_until(&mut s, &board, |_, o| o.ends_with("finished"));
    assert!(out.contains("Connection: close\r\n"), "{out}");
    assert!(s.done());
}

/// The drain begins after the app's head went out saying the connection
/// stays, before its body ends: the client will send its next request once
/// it has the answer, so the connection is held for it (answered with
/// `Connection: close`). Without the hold (`M0_DRAIN_IDLE_MS=0`, `None`) it
/// closes after the answer whose head said otherwise.
#[test]
fn a_drain_begun_mid_answer_holds_the_connection_its_head_kept_open() {
    for grace in [Some(Duration::from_secs(1)), None] {
        let (go, gate) = std::sync::mpsc::channel::<()>();
        let gate = Mutex::new(gate);
        let app = ThreadApp::new(move |_req, ex| {
            let start = ResponseEvent::Start {
                status: 200,
                headers: vec![("Content-Length", b"4")].into(),
            };
            send(&ex, start).unwrap();
            let _ = gate.lock().unwrap().recv_timeout(Duration::from_secs(5));
            send(&ex, ResponseEvent::Body(b"done".to_vec().into())).unwrap();
            send(&ex, ResponseEvent::End).unwrap();
        });
        let (mut s, _app, board) = app_session_with(app, |shared| shared.drain_idle = grace);
        let get = b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n";
        s.on_read(get, Instant::now());
        let head = run_until(&mut s, &board, |_, o| o.contains("\r\n\r\n"));
        assert!(!head.contains("Connection: close"), "{head}");
        s.on_shutdown();
        go.send(()).unwrap();
        run_until(&mut s, &board, |_, o| o.ends_with("done"));
        if grace.is_none() {
            assert!(s.done(), "without the hold, the answer is the last");
            continue;
        }
        assert!(
            !s.done() && !s.idle(),
            "closed under the request it invited"
        );
        let held = s.deadline().expect("held for the grace");
        assert!(held <= Instant::now() + Duration::from_secs(1));
        s.on_read(get, Instant::now());
        go.send(()).unwrap();
        let out = run_until(&mut s, &board, |_, o| o.ends_with("done"));
        assert!(out.contains("Connection: close\r\n"), "{out}");
        assert!(s.done());
    }
}

/// The drain tells an answer still streaming that its client has gone (as
/// ASGI's `http.disconnect`), at `--stream-drain-timeout` and not before;
/// what the app sends then still goes out, so the stream ends cleanly.
#[test]
fn the_drain_tells_a_stream_to_end_at_the_stream_drain_timeout() {
    let streaming = || {
        ThreadApp::new(|_req, ex| {
            let start = ResponseEvent::Start {
                status: 200,
                headers: Default::default(),
            };
            send(&ex, start).unwrap();
            let give_up = Instant::now() + Duration::from_secs(20);
            while !ex.watch_gone() && Instant::now() < give_up {
                send(&ex, ResponseEvent::Body(b"tick;".to_vec().into())).unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
            send(&ex, ResponseEvent::Body(b"bye".to_vec().into())).unwrap();
            send(&ex, ResponseEvent::End).unwrap();
        })
    };
    let get = b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n";
    for after in [Duration::ZERO, Duration::from_secs(29)] {
        let (mut s, _app, board) =
            app_session_with(streaming(), |shared| shared.stream_drain = after);
        s.on_read(get, Instant::now());
        run_until(&mut s, &board, |_, o| o.contains("tick;"));
        s.on_shutdown();
        if !after.is_zero() {
            let tell = s.deadline().expect("the stream drain's deadline");
            let out = run_until(&mut s, &board, |_, o| o.matches("tick;").count() > 20);
            assert!(!out.contains("bye"), "told before its time");
            s.on_deadline(tell);
        }
        let out = run_until(&mut s, &board, |_, o| o.ends_with("0\r\n\r\n"));
        assert!(out.ends_with("3\r\nbye\r\n0\r\n\r\n"), "{out}");
    }
}
