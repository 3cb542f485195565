//! `--request-timeout`, sans-IO: an app call past it is abandoned with a
//! 504 when nothing was sent, the connection closed under an answer that
//! had begun, and no clock without the flag.

use super::tests::{app_session_with, drain, run_until};
use super::*;
use crate::app::testing::{send, ThreadApp};
use crate::app::Conduit;

/// An app that answers nothing (after the head, when `head` is set) until
/// its client is gone, then tells whether it saw that.
fn stalls(head: bool, gone: Arc<std::sync::atomic::AtomicBool>) -> ThreadApp {
    ThreadApp::new(move |_req, ex: Arc<Conduit>| {
        if head {
            let start = ResponseEvent::Start {
                status: 200,
                headers: vec![("Content-Length", b"10".to_vec())].into(),
            };
            send(&ex, start).unwrap();
        }
        let start = Instant::now();
        while !ex.is_gone() && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        gone.store(ex.is_gone(), std::sync::atomic::Ordering::SeqCst);
    })
}

fn limited(shared: &mut Shared) {
    shared.request_timeout = Some(Duration::from_secs(2));
}

fn wait_for(flag: &std::sync::atomic::AtomicBool) {
    let start = Instant::now();
    while !flag.load(std::sync::atomic::Ordering::SeqCst) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the app never saw its client gone"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_call_past_the_limit_gets_a_504_and_the_app_its_client_gone() {
    let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let before = Instant::now();
    let (mut s, _app, _board) = app_session_with(stalls(false, gone.clone()), limited);
    s.on_read(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n", before);
    let after = Instant::now();
    let due = s.deadline().expect("the call's clock runs");
    assert!(due >= before + Duration::from_secs(2) && due <= after + Duration::from_secs(2));
    s.on_deadline(due - Duration::from_millis(1));
    assert!(drain(&mut s).is_empty(), "not before the limit");
    s.on_deadline(due);
    let out = String::from_utf8(drain(&mut s)).unwrap();
    assert!(out.starts_with("HTTP/1.1 504 Gateway Timeout\r\n"), "{out}");
    assert!(
        out.to_ascii_lowercase().contains("connection: close"),
        "{out}"
    );
    assert!(s.done(), "the connection closes after it");
    wait_for(&gone);
}

#[test]
fn a_call_whose_answer_began_is_cut_without_a_504() {
    let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (mut s, _app, board) = app_session_with(stalls(true, gone.clone()), limited);
    s.on_read(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n", Instant::now());
    let head = run_until(&mut s, &board, |_, o| o.contains("\r\n\r\n"));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let due = s.deadline().expect("the call's clock runs");
    s.on_deadline(due);
    assert!(drain(&mut s).is_empty(), "no second answer");
    assert!(s.done());
    wait_for(&gone);
}

#[test]
fn without_the_flag_a_call_has_no_clock() {
    let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (mut s, _app, _board) = app_session_with(stalls(false, gone), |_| {});
    s.on_read(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n", Instant::now());
    assert_eq!(s.deadline(), None);
}
