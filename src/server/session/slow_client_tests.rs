//! Slow clients, sans-IO: bodies buffered before an app with blocking reads
//! is called, the body read timeout (408), and the send timeout.

use super::tests::{app_session_with, drain, run_until};
use super::*;
use crate::app::testing::{answer, read_body, send, ThreadApp};
use crate::app::{Gone, ResponseEvent};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// A fresh spill directory for one test.
fn spill_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("m0-spill-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    dir
}

/// Buffering on, `memory` bytes in memory, files in `dir`.
fn buffering(memory: usize, dir: &std::path::Path) -> impl FnOnce(&mut Shared) {
    let config = BufferConfig {
        memory,
        spill_dir: dir.to_path_buf(),
    };
    move |shared| shared.body_buffer = Some(Arc::new(config))
}

/// An app with blocking reads that echoes the body it read.
fn echo() -> ThreadApp {
    ThreadApp::new(|_req, ex| {
        let body = read_body(&ex).unwrap();
        answer(&ex, 200, &body).unwrap();
    })
    .blocking_reads()
}

#[test]
fn a_buffered_body_reaches_the_app_only_once_complete_spilling_past_memory() {
    let dir = spill_dir("complete");
    let (mut s, app, board) = app_session_with(echo(), buffering(4, &dir));
    let now = Instant::now();
    s.on_read(
        b"POST /u HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 12\r\n\r\n",
        now,
    );
    assert_eq!(
        String::from_utf8(drain(&mut s)).unwrap(),
        "HTTP/1.1 100 Continue\r\n\r\n",
        "the core reads the body itself, so it asks for it at once"
    );
    s.on_read(b"abc", now);
    s.on_read(b"defgh", now);
    assert_eq!(app.calls.load(Ordering::SeqCst), 0, "not before the end");
    assert!(s.wants_read(), "the buffer takes the whole body");
    s.on_read(b"ijkl", now);
    assert_eq!(app.calls.load(Ordering::SeqCst), 1);
    let out = run_until(&mut s, &board, |_, o| o.ends_with("abcdefghijkl"));
    assert!(out.contains("HTTP/1.1 200 OK"), "{out}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "nothing left");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn with_buffering_off_the_app_is_called_at_the_head() {
    let (mut s, app, board) = app_session_with(echo(), |_| {});
    s.on_read(
        b"POST /u HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nabc",
        Instant::now(),
    );
    assert_eq!(
        app.calls.load(Ordering::SeqCst),
        1,
        "streamed: called at once"
    );
    s.on_read(b"def", Instant::now());
    run_until(&mut s, &board, |_, o| o.ends_with("abcdef"));
}

#[test]
fn an_app_without_blocking_reads_keeps_its_body_streamed() {
    let dir = spill_dir("async");
    let app = ThreadApp::new(|_req, ex| {
        let body = read_body(&ex).unwrap();
        answer(&ex, 200, &body).unwrap();
    });
    let (mut s, app, board) = app_session_with(app, buffering(4, &dir));
    s.on_read(
        b"POST /u HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nabc",
        Instant::now(),
    );
    assert_eq!(app.calls.load(Ordering::SeqCst), 1);
    s.on_read(b"def", Instant::now());
    run_until(&mut s, &board, |_, o| o.ends_with("abcdef"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_stalled_body_gets_a_408_after_the_body_read_timeout_since_its_last_bytes() {
    for buffered in [true, false] {
        let dir = spill_dir("stall");
        let (mut s, app, _board) = app_session_with(echo(), |shared| {
            shared.body_read_timeout = Duration::from_secs(2);
            if buffered {
                buffering(1024, &dir)(shared);
            }
        });
        let t0 = Instant::now();
        s.on_read(
            b"POST /u HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab",
            t0,
        );
        assert_eq!(s.deadline(), Some(t0 + Duration::from_secs(2)));
        let t1 = t0 + Duration::from_secs(1);
        s.on_read(b"cd", t1);
        assert_eq!(
            s.deadline(),
            Some(t1 + Duration::from_secs(2)),
            "each arrival restarts the clock"
        );
        s.on_deadline(t1 + Duration::from_secs(1));
        assert!(!s.done(), "not before the deadline");
        s.on_deadline(t1 + Duration::from_secs(2));
        let out = String::from_utf8(drain(&mut s)).unwrap();
        assert!(
            out.starts_with("HTTP/1.1 408 "),
            "buffered={buffered}: {out}"
        );
        assert!(out.contains("Connection: close"), "{out}");
        assert!(s.done());
        let calls = app.calls.load(Ordering::SeqCst);
        assert_eq!(calls, usize::from(!buffered), "buffered: the app never ran");
        std::fs::remove_dir_all(dir).unwrap();
    }
}

#[test]
fn a_body_owed_to_a_route_is_timed_too() {
    let (mut s, _app, _board) = app_session_with(echo(), |shared| {
        shared.body_read_timeout = Duration::from_secs(1);
    });
    let t0 = Instant::now();
    s.on_read(
        b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nab",
        t0,
    );
    s.on_deadline(t0 + Duration::from_secs(1));
    let out = String::from_utf8(drain(&mut s)).unwrap();
    assert!(out.starts_with("HTTP/1.1 408 "), "{out}");
    assert!(s.done());
}

#[test]
fn the_body_clock_waits_for_an_app_that_has_not_asked_for_its_100_continue() {
    let asked = Arc::new(AtomicBool::new(false));
    let ask = asked.clone();
    let app = ThreadApp::new(move |_req, ex| {
        while !ask.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let body = read_body(&ex).unwrap();
        answer(&ex, 200, &body).unwrap();
    });
    let (mut s, _app, board) = app_session_with(app, |shared| {
        shared.body_read_timeout = Duration::from_secs(1);
    });
    s.on_read(
        b"POST /u HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
        Instant::now(),
    );
    assert_eq!(s.deadline(), None, "the client waits for the app, not late");
    asked.store(true, Ordering::SeqCst);
    run_until(&mut s, &board, |_, o| o.contains("100 Continue"));
    assert!(s.deadline().is_some(), "asked for: now the body is owed");
}

/// An app that sends `chunks` of 64 KiB and records how its sending ended.
fn big_answer(chunks: usize, failed: Arc<Mutex<Option<Instant>>>) -> ThreadApp {
    ThreadApp::new(move |_req, ex| {
        let start = ResponseEvent::Start {
            status: 200,
            headers: Default::default(),
        };
        let mut sent: Result<usize, Gone> = send(&ex, start);
        for _ in 0..chunks {
            if sent.is_err() {
                break;
            }
            sent = send(&ex, ResponseEvent::Body(vec![b'x'; 64 * 1024].into()));
        }
        if sent.is_err() {
            *failed.lock().unwrap() = Some(Instant::now());
        }
    })
}

#[test]
fn a_client_that_reads_nothing_for_the_send_timeout_is_closed_and_the_apps_write_fails() {
    let failed = Arc::new(Mutex::new(None));
    let (mut s, _app, board) = app_session_with(big_answer(64, failed.clone()), |shared| {
        shared.send_timeout = Duration::from_secs(3);
    });
    s.on_read(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n", Instant::now());
    // Let the app fill its window; the client reads nothing.
    let start = Instant::now();
    while s.output.queued() < RESPONSE_FILL as u64 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the app never filled"
        );
        if board.take_ready(0).count() > 0 {
            s.on_notify(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let armed = s.deadline().expect("the send clock runs");
    // Some progress moves the clock on.
    let later = Instant::now() + Duration::from_secs(1);
    s.on_sent(10, later);
    assert_eq!(s.deadline(), Some(later + Duration::from_secs(3)));
    assert!(armed < later + Duration::from_secs(3));
    s.on_deadline(later + Duration::from_secs(2));
    assert!(!s.done(), "not before the deadline");
    assert!(!s.aborted(), "a write in flight is still to finish");
    s.on_deadline(later + Duration::from_secs(3));
    assert!(s.done(), "closed");
    assert!(s.aborted(), "a write in flight is cut, not waited for");
    assert!(
        matches!(s.output(), Output::None),
        "what was queued is dropped"
    );
    let start = Instant::now();
    while failed.lock().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the app's write never failed"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Queued output at which the app is surely waiting for room.
const RESPONSE_FILL: usize = crate::app::conduit::RESPONSE_HIGH_WATER;

#[test]
fn a_slow_but_steady_reader_is_never_cut() {
    let failed = Arc::new(Mutex::new(None));
    let (mut s, _app, board) = app_session_with(big_answer(16, failed.clone()), |shared| {
        shared.send_timeout = Duration::from_secs(1);
    });
    let reads = AtomicUsize::new(0);
    let mut clock = Instant::now();
    s.on_read(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n", clock);
    // 4 KiB every 0.9 s of session time: far longer than the timeout in all.
    let mut taken = 0;
    while taken < 16 * 64 * 1024 {
        if board.take_ready(0).count() > 0 {
            s.on_notify(clock);
        }
        if let Output::Bytes(b) = s.output() {
            let n = b.len().min(4096);
            clock += Duration::from_millis(900);
            s.on_deadline(clock);
            assert!(!s.done(), "cut after {taken} bytes");
            s.on_sent(n, clock);
            taken += n;
            reads.fetch_add(1, Ordering::SeqCst);
        } else {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    assert!(failed.lock().unwrap().is_none());
    assert!(reads.load(Ordering::SeqCst) > 100);
}
