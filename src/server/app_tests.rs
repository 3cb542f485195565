//! The HTTP service with a pure-Rust [`ThreadApp`] on both backends, over
//! loopback: what only real sockets show (flow control against a real
//! client, a client that leaves mid-answer).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::app::conduit::BODY_HIGH_WATER;
use crate::app::testing::{answer, read_body_with, send, ThreadApp};
use crate::app::{ResponseEvent, ServerAddr};
use crate::backend::testing::{Harness, Setup, CLIENT_TIMEOUT};
use crate::backend::CoreContext;
use crate::routes::Router;

use super::session::{HttpService, Shared};

type Run = fn(CoreContext, HttpService) -> io::Result<()>;

/// Every backend this platform has.
fn backends() -> Vec<(&'static str, Run)> {
    vec![
        ("portable", crate::backend::portable::run::<HttpService>),
        #[cfg(target_os = "linux")]
        ("uring", crate::backend::uring::run::<HttpService>),
    ]
}

fn serve(run: Run, app: Arc<ThreadApp>) -> Harness {
    let shared = Arc::new(Shared {
        servers: vec![Arc::new(ServerAddr::Tcp {
            host: "127.0.0.1".into(),
            port: 0,
        })],
        keep_alive_timeout: Duration::from_secs(10),
        ..Shared::for_tests(Router::default(), Some(app))
    });
    Setup::default().spawn_service(run, move |_, _| HttpService::new(shared.clone()))
}

/// One response read off `r`: status and body (Content-Length or chunked).
fn read_response(r: &mut impl BufRead) -> (u16, Vec<u8>) {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status = line.split(' ').nth(1).expect("a status").parse().unwrap();
    let (mut length, mut chunked) = (None, false);
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
        let (name, value) = line.trim_end().split_once(": ").expect("a header");
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(value.parse::<usize>().unwrap());
        }
        chunked |= name.eq_ignore_ascii_case("transfer-encoding");
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            let size = usize::from_str_radix(line.trim_end(), 16).unwrap();
            let mut chunk = vec![0; size + 2];
            r.read_exact(&mut chunk).unwrap();
            if size == 0 {
                return (status, body);
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    body.resize(length.expect("a framed body"), 0);
    r.read_exact(&mut body).unwrap();
    (status, body)
}

/// Wait (bounded) until `f` holds.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < CLIENT_TIMEOUT, "{what}: never happened");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn pipelined_requests_to_the_app_are_answered_in_order() {
    for (name, run) in backends() {
        let app = Arc::new(ThreadApp::new(|req, ex| {
            let i: u64 = req.head.path()[1..].parse().unwrap();
            // Later requests answer faster: out-of-order answers would show.
            std::thread::sleep(Duration::from_millis(10 - i));
            answer(&ex, 200, req.head.path().as_bytes()).unwrap();
        }));
        let h = serve(run, app.clone());
        let mut c = h.connect();
        let requests: String = (0..10)
            .map(|i| format!("GET /{i} HTTP/1.1\r\nHost: x\r\n\r\n"))
            .collect();
        c.write_all(requests.as_bytes()).unwrap();
        let mut r = BufReader::new(c);
        for i in 0..10 {
            let (status, body) = read_response(&mut r);
            assert_eq!(
                (status, body),
                (200, format!("/{i}").into_bytes()),
                "{name}"
            );
        }
        assert_eq!(app.calls.load(Ordering::SeqCst), 10, "{name}");
        h.shutdown(Duration::from_secs(1));
    }
}

#[test]
fn a_large_upload_is_streamed_to_the_app_within_the_high_water() {
    const TOTAL: usize = 4 << 20;
    for (name, run) in backends() {
        let largest = Arc::new(AtomicUsize::new(0));
        let seen = largest.clone();
        let app = Arc::new(ThreadApp::new(move |_req, ex| {
            // Takes everything buffered at each read, slowly: each read shows
            // how much the core had let pile up.
            let body = read_body_with(&ex, usize::MAX, |piece| {
                seen.fetch_max(piece.len(), Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(2));
            })
            .unwrap();
            let intact = body.len() == TOTAL && body.iter().enumerate().all(|(i, &b)| b == i as u8);
            answer(&ex, 200, if intact { b"intact" } else { b"garbled" }).unwrap();
        }));
        let h = serve(run, app);
        let c = h.connect();
        let mut writer = c.try_clone().unwrap();
        let upload = std::thread::spawn(move || {
            let head = format!("PUT /up HTTP/1.1\r\nHost: x\r\nContent-Length: {TOTAL}\r\n\r\n");
            writer.write_all(head.as_bytes()).unwrap();
            let body: Vec<u8> = (0..TOTAL).map(|i| i as u8).collect();
            writer.write_all(&body).unwrap();
        });
        let (status, body) = read_response(&mut BufReader::new(c));
        upload.join().unwrap();
        assert_eq!((status, body.as_slice()), (200, &b"intact"[..]), "{name}");
        let largest = largest.load(Ordering::SeqCst);
        // The high water plus what one read of the socket may add past it.
        assert!(
            largest <= BODY_HIGH_WATER + 64 * 1024,
            "{name}: the app found {largest} bytes buffered"
        );
        assert!(
            largest >= BODY_HIGH_WATER / 4,
            "{name}: only {largest} bytes ever buffered: the test did not fill the buffer"
        );
        h.shutdown(Duration::from_secs(1));
    }
}

#[test]
fn a_slow_client_makes_the_app_wait_for_room() {
    const TOTAL: usize = 8 << 20;
    for (name, run) in backends() {
        let waits = Arc::new(AtomicUsize::new(0));
        let counted = waits.clone();
        let app = Arc::new(ThreadApp::new(move |_req, ex| {
            let length = TOTAL.to_string().into_bytes();
            let start = ResponseEvent::Start {
                status: 200,
                headers: vec![("Content-Length", length)].into(),
            };
            send(&ex, start).unwrap();
            for piece in 0..TOTAL / 65536 {
                let data = (0..65536).map(|i| (piece * 7 + i) as u8).collect();
                counted.fetch_add(
                    send(&ex, ResponseEvent::Body(data)).unwrap(),
                    Ordering::SeqCst,
                );
            }
            send(&ex, ResponseEvent::End).unwrap();
        }));
        let h = serve(run, app);
        // A window that autotuning cannot grow: loopback's buffers could
        // otherwise take in most of the answer, and the app never wait.
        let mut c = h.connect_narrow();
        c.write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        // The client reads nothing for a while: the answer piles up.
        std::thread::sleep(Duration::from_millis(300));
        let (status, body) = read_response(&mut BufReader::new(c));
        assert_eq!(status, 200, "{name}");
        assert_eq!(body.len(), TOTAL, "{name}");
        let intact = body.chunks(65536).enumerate().all(|(p, chunk)| {
            chunk
                .iter()
                .enumerate()
                .all(|(i, &b)| b == (p * 7 + i) as u8)
        });
        assert!(intact, "{name}: the answer arrived altered");
        assert!(
            waits.load(Ordering::SeqCst) > 0,
            "{name}: the app never had to wait"
        );
        h.shutdown(Duration::from_secs(1));
    }
}

#[test]
fn a_client_gone_mid_answer_fails_the_apps_next_send() {
    for (name, run) in backends() {
        let gone = Arc::new(AtomicBool::new(false));
        let seen = gone.clone();
        let app = Arc::new(ThreadApp::new(move |_req, ex| {
            let start = ResponseEvent::Start {
                status: 200,
                headers: Default::default(),
            };
            send(&ex, start).unwrap();
            // An endless stream: only the client's departure ends it.
            while send(&ex, ResponseEvent::Body(vec![b'x'; 16384].into())).is_ok() {}
            seen.store(true, Ordering::SeqCst);
        }));
        let h = serve(run, app);
        let mut c = h.connect();
        c.write_all(b"GET /endless HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut first = [0; 4096];
        c.read_exact(&mut first).unwrap();
        assert!(first.starts_with(b"HTTP/1.1 200"), "{name}");
        drop(c);
        eventually(&format!("{name}: the app told its client is gone"), || {
            gone.load(Ordering::SeqCst)
        });
        h.shutdown(Duration::from_secs(1));
    }
}

/// A WebSocket client's view of one frame off `r`: `(opcode, payload)`.
fn read_frame(r: &mut impl Read) -> (u8, Vec<u8>) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        if let Some((fin, op, payload, used)) = crate::ws::frame::parse_server_frame(&buf) {
            assert!(fin && used == buf.len());
            return (op, payload);
        }
        // A byte at a time: nothing past this frame is taken from the stream.
        r.read_exact(&mut byte).unwrap();
        buf.push(byte[0]);
    }
}

/// A WebSocket upgrade request (the RFC 6455 sample key).
const WS_UPGRADE: &[u8] =
    b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
    Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

/// An app that accepts the WebSocket and echoes it; once its loop ends, what
/// `echo_messages` returned (the disconnect's code) is in the second half.
#[allow(clippy::type_complexity)]
fn ws_echo_app() -> (ThreadApp, Arc<std::sync::Mutex<Option<Option<u16>>>>) {
    let last = Arc::new(std::sync::Mutex::new(None));
    let seen = last.clone();
    let app = ThreadApp::new(move |_req, ex| {
        let accept = ResponseEvent::WsAccept {
            subprotocol: None,
            headers: Default::default(),
        };
        send(&ex, accept).unwrap();
        *seen.lock().unwrap() = Some(crate::app::testing::echo_messages(&ex));
    })
    .websocket();
    (app, last)
}

#[test]
fn a_websocket_echo_over_loopback_with_the_close_seen_by_both_sides() {
    use crate::ws::frame::client_frame;
    const MASK: [u8; 4] = [9, 8, 7, 6];
    for (name, run) in backends() {
        let (app, last) = ws_echo_app();
        let h = serve(run, Arc::new(app));
        let mut c = h.connect();
        c.write_all(WS_UPGRADE).unwrap();
        let mut r = BufReader::new(c.try_clone().unwrap());
        let mut head = String::new();
        while !head.ends_with("\r\n\r\n") {
            r.read_line(&mut head).unwrap();
        }
        assert!(head.starts_with("HTTP/1.1 101 "), "{name}: {head}");
        assert!(head.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
        c.write_all(&client_frame(true, 1, b"hello", MASK)).unwrap();
        assert_eq!(read_frame(&mut r), (1, b"hello".to_vec()), "{name}");
        let big: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
        let frame = client_frame(true, 2, &big, MASK);
        let mut writer = c.try_clone().unwrap();
        let upload = std::thread::spawn(move || writer.write_all(&frame).unwrap());
        assert_eq!(read_frame(&mut r), (2, big), "{name}");
        upload.join().unwrap();
        c.write_all(&client_frame(true, 9, b"ping", MASK)).unwrap();
        assert_eq!(read_frame(&mut r), (10, b"ping".to_vec()), "{name}");
        let close = [&4000u16.to_be_bytes()[..], b"done"].concat();
        c.write_all(&client_frame(true, 8, &close, MASK)).unwrap();
        let (op, body) = read_frame(&mut r);
        assert_eq!((op, &body[..]), (8, &4000u16.to_be_bytes()[..]), "{name}");
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "{name}: the server closed the connection");
        eventually(&format!("{name}: the app saw the close"), || {
            last.lock().unwrap().is_some()
        });
        assert_eq!(*last.lock().unwrap(), Some(Some(4000)), "{name}");
        h.shutdown(Duration::from_secs(1));
    }
}

#[test]
fn a_websocket_client_that_vanishes_is_a_1006_disconnect_to_the_app() {
    for (name, run) in backends() {
        let (app, last) = ws_echo_app();
        let h = serve(run, Arc::new(app));
        let mut c = h.connect();
        c.write_all(WS_UPGRADE).unwrap();
        let mut head = [0u8; 12];
        c.read_exact(&mut head).unwrap();
        assert_eq!(&head, b"HTTP/1.1 101", "{name}");
        drop(c);
        eventually(&format!("{name}: the app told"), || {
            last.lock().unwrap().is_some()
        });
        assert_eq!(*last.lock().unwrap(), Some(Some(1006)), "{name}");
        h.shutdown(Duration::from_secs(1));
    }
}
