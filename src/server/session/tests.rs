//! Sans-IO session tests: the session driven by hand, the application on threads.

use super::*;
use std::io::Write;

/// A notifier nobody drains (these sessions are driven by hand).
fn notifier() -> Notifier {
    let key = crate::backend::slab::Key::new(0, 0);
    Notifier::new(crate::backend::share::Board::new(1), 0, key)
}

fn service(router: Router) -> HttpService {
    HttpService::new(Arc::new(Shared {
        router,
        app: None,
        server: Arc::new(crate::app::ServerAddr::Unix("/test".into())),
        limits: Limits::default(),
        header_read_timeout: Duration::from_secs(10),
        keep_alive_timeout: Duration::from_secs(5),
        access_log: false,
    }))
}

/// Everything the session wants written, files read in place.
fn drain(s: &mut HttpSession) -> Vec<u8> {
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
    let mut s = service(router).open(&Peer::Unix, notifier());
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
    let mut s = service(Router::default()).open(&Peer::Unix, notifier());
    let now = Instant::now();
    s.on_read(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HT", now);
    drain(&mut s);
    assert_eq!(s.deadline(), Some(now + Duration::from_secs(10)));
    s.on_deadline(now + Duration::from_secs(11));
    assert!(s.done());
}

#[test]
fn an_idle_connection_gets_the_keep_alive_deadline() {
    let mut s = service(Router::default()).open(&Peer::Unix, notifier());
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
}

#[test]
fn shutdown_closes_idle_sessions_and_lets_a_busy_one_finish() {
    let mut idle = service(Router::default()).open(&Peer::Unix, notifier());
    idle.on_shutdown();
    assert!(idle.done());
    let mut busy = service(Router::default()).open(&Peer::Unix, notifier());
    busy.on_read(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", Instant::now());
    busy.on_shutdown();
    // Done, but the backend closes only once the queued answer is written.
    assert!(String::from_utf8(drain(&mut busy))
        .unwrap()
        .starts_with("HTTP/1.1 404"));
    assert!(busy.done());
    let mut fresh = service(Router::default()).open(&Peer::Unix, notifier());
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
    let mut s = service(router).open(&Peer::Unix, notifier());
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
