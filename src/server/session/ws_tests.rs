//! Sans-IO tests of the session's WebSocket mode: a session driven by hand,
//! a Rust app on threads, frames built and parsed on bytes.

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use super::tests::{app_session, app_session_with, drain};
use super::*;
use crate::app::conduit::BODY_HIGH_WATER;
use crate::app::testing::{answer, echo_messages, receive_ws, send, ws_echo, ThreadApp};
use crate::app::{RequestKind, ResponseEvent, WsMessage};
use crate::backend::share::Board;
use crate::backend::{Linger, Service};
use crate::ws::frame::opcode::{BINARY, CLOSE, CONTINUATION as CONT, PING, PONG, TEXT};
use crate::ws::frame::{client_frame, parse_server_frame};
use crate::ws::Keepalive;

const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";
const MASK: [u8; 4] = [0x37, 0xFA, 0x21, 0x3D];

fn upgrade_request(extra: &str) -> String {
    format!(
        "GET /chat HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
}

fn close_frame(code: u16, reason: &str) -> Vec<u8> {
    let body = [&code.to_be_bytes()[..], reason.as_bytes()].concat();
    client_frame(true, CLOSE, &body, MASK)
}

/// A client of a hand-driven session: what it sent, what it got.
struct Client {
    s: HttpSession,
    app: Arc<ThreadApp>,
    board: Arc<Board>,
    got: Vec<u8>,
}

impl Client {
    fn new(app: ThreadApp) -> Self {
        let (s, app, board) = app_session(app);
        Client {
            s,
            app,
            board,
            got: Vec::new(),
        }
    }

    fn with_limit(app: ThreadApp, max: usize) -> Self {
        Client::with(app, max, true, None)
    }

    /// A session of its own service: `ws` on or off, `max` the message
    /// limit, `keepalive` its pings.
    fn with(app: ThreadApp, max: usize, ws: bool, keepalive: Option<Keepalive>) -> Self {
        let app = Arc::new(app);
        let shared = Shared {
            ws,
            ws_max_message: max,
            ws_keepalive: keepalive,
            ..Shared::for_tests(Router::default(), Some(app.clone()))
        };
        let board = Board::new(1);
        let key = crate::backend::slab::Key::new(0, 0);
        let notifier = Notifier::new(board.clone(), 0, key);
        let s = HttpService::new(Arc::new(shared)).open(&Peer::Unix, 0, notifier);
        Client {
            s,
            app,
            board,
            got: Vec::new(),
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.send_at(bytes, Instant::now());
    }

    fn send_at(&mut self, bytes: &[u8], at: Instant) {
        self.s.on_read(bytes, at);
    }

    /// Drive the session (write its output, deliver notifications) until
    /// `take` finds what it wants at the front of the received bytes.
    fn until<T>(&mut self, what: &str, take: impl Fn(&[u8]) -> Option<(T, usize)>) -> T {
        let start = Instant::now();
        loop {
            self.got.extend(drain(&mut self.s));
            if let Some((found, used)) = take(&self.got) {
                self.got.drain(..used);
                return found;
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "no {what}; got {:?}",
                String::from_utf8_lossy(&self.got)
            );
            if self.board.take_ready(0).count() > 0 {
                self.s.on_notify(Instant::now());
            } else {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// The next HTTP response head and its body (by Content-Length).
    fn response(&mut self) -> (String, String) {
        self.until("response", |got| {
            let end = got.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
            let head = String::from_utf8(got[..end].to_vec()).unwrap();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .map_or(0, |n| n.parse().unwrap());
            let body = got.get(end..end + length)?;
            Some(((head, String::from_utf8_lossy(body).into()), end + length))
        })
    }

    /// The next whole server frame: `(opcode, payload)`.
    fn frame(&mut self) -> (u8, Vec<u8>) {
        self.until("frame", |got| {
            let (fin, op, payload, used) = parse_server_frame(got)?;
            assert!(fin, "the server sends whole messages");
            Some(((op, payload), used))
        })
    }

    /// Upgrade, asserting the 101.
    fn open(app: ThreadApp) -> Self {
        let mut c = Client::new(app);
        c.send(upgrade_request("").as_bytes());
        let (head, _) = c.response();
        assert!(
            head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
            "{head}"
        );
        c
    }
}

/// An app that records what it receives (then echoes it) until disconnected.
fn recording() -> (ThreadApp, Arc<Mutex<Vec<WsMessage>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let app = ThreadApp::new(move |_req, ex| {
        send(
            &ex,
            ResponseEvent::WsAccept {
                subprotocol: None,
                headers: Default::default(),
            },
        )
        .unwrap();
        while let Ok(m) = receive_ws(&ex) {
            let echo = match &m {
                WsMessage::Text(t) => Some(ResponseEvent::WsText(t.clone())),
                WsMessage::Binary(b) => Some(ResponseEvent::WsBinary(b.clone().into())),
                WsMessage::Disconnect { .. } => None,
            };
            log.lock().unwrap().push(m);
            if let Some(echo) = echo {
                let _ = send(&ex, echo);
            }
        }
    })
    .websocket();
    (app, seen)
}

/// The app's only message was the Disconnect of a connection gone without a Close.
fn told_1006(seen: &Mutex<Vec<WsMessage>>) {
    eventually("the app told", || !seen.lock().unwrap().is_empty());
    assert_eq!(
        *seen.lock().unwrap(),
        [WsMessage::Disconnect {
            code: 1006,
            reason: String::new()
        }]
    );
}

fn eventually(what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(5), "{what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn the_handshake_answers_101_with_the_accept_key_and_the_chosen_subprotocol() {
    let seen = Arc::new(Mutex::new(None));
    let kind = seen.clone();
    let app = ThreadApp::new(move |req, ex| {
        *kind.lock().unwrap() = Some(req.kind.clone());
        ws_echo(req, ex);
    })
    .websocket();
    let mut c = Client::new(app);
    c.send(upgrade_request("Sec-WebSocket-Protocol: chat, v2\r\n").as_bytes());
    let (head, _) = c.response();
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{head}"
    );
    assert!(head.contains(&format!("\r\nSec-WebSocket-Accept: {ACCEPT}\r\n")));
    assert!(head.contains("\r\nUpgrade: websocket\r\n"));
    assert!(head.contains("\r\nSec-WebSocket-Protocol: chat\r\n"));
    assert_eq!(
        *seen.lock().unwrap(),
        Some(RequestKind::WebSocket {
            subprotocols: vec!["chat".into(), "v2".into()]
        })
    );
    assert!(!c.s.done() && !c.s.idle());
}

#[test]
fn text_and_binary_are_echoed_and_a_frame_sent_with_the_request_is_read() {
    let mut c = Client::new(ThreadApp::new(ws_echo).websocket());
    // The first frame arrives in the same read as the handshake.
    let first = client_frame(true, TEXT, b"early", MASK);
    c.send(&[upgrade_request("").as_bytes(), &first].concat());
    assert!(c.response().0.starts_with("HTTP/1.1 101"));
    assert_eq!(c.frame(), (TEXT, b"early".to_vec()));
    c.send(&client_frame(true, TEXT, "héllo".as_bytes(), MASK));
    assert_eq!(c.frame(), (TEXT, "héllo".as_bytes().to_vec()));
    c.send(&client_frame(true, BINARY, &[0, 255, 7], MASK));
    assert_eq!(c.frame(), (BINARY, vec![0, 255, 7]));
}

#[test]
fn a_one_mebibyte_message_and_a_fragmented_one_arrive_whole() {
    let mut c = Client::open(ThreadApp::new(ws_echo).websocket());
    let big: Vec<u8> = (0..1 << 20).map(|i| (i * 31) as u8).collect();
    let frame = client_frame(true, BINARY, &big, MASK);
    // In pieces, as reads would bring it.
    for piece in frame.chunks(60_000) {
        c.send(piece);
    }
    assert_eq!(c.frame(), (BINARY, big));
    // Three fragments with a ping between them: one message, and the pong.
    c.send(&client_frame(false, TEXT, b"frag", MASK));
    c.send(&client_frame(false, CONT, b"men", MASK));
    c.send(&client_frame(true, PING, b"p", MASK));
    c.send(&client_frame(true, CONT, b"ted", MASK));
    assert_eq!(c.frame(), (PONG, b"p".to_vec()));
    assert_eq!(c.frame(), (TEXT, b"fragmented".to_vec()));
}

#[test]
fn a_ping_is_answered_by_the_core_and_never_reaches_the_app() {
    let (app, seen) = recording();
    let mut c = Client::open(app);
    c.send(&client_frame(true, PING, b"are you there", MASK));
    assert_eq!(c.frame(), (PONG, b"are you there".to_vec()));
    c.send(&client_frame(true, PONG, b"unsolicited", MASK));
    c.send(&client_frame(true, TEXT, b"after", MASK));
    assert_eq!(c.frame(), (TEXT, b"after".to_vec()));
    assert_eq!(*seen.lock().unwrap(), [WsMessage::Text("after".into())]);
}

#[test]
fn a_close_from_the_client_is_answered_and_reported_to_the_app() {
    let (app, seen) = recording();
    let mut c = Client::open(app);
    c.send(&close_frame(4001, "bye"));
    let (op, body) = c.frame();
    assert_eq!((op, &body[..2]), (CLOSE, &4001u16.to_be_bytes()[..]));
    assert!(c.s.done(), "both Closes passed: the connection closes");
    assert_eq!(
        c.s.linger(),
        Linger::IfUnread,
        "the client said all it had to say"
    );
    eventually("the app told", || seen.lock().unwrap().len() == 1);
    assert_eq!(
        *seen.lock().unwrap(),
        [WsMessage::Disconnect {
            code: 4001,
            reason: "bye".into()
        }]
    );
}

#[test]
fn a_close_from_the_app_carries_its_code_and_reason_and_waits_for_the_clients() {
    let code = Arc::new(Mutex::new(None));
    let got = code.clone();
    let app = ThreadApp::new(move |_req, ex| {
        let accept = ResponseEvent::WsAccept {
            subprotocol: None,
            headers: vec![("X-Extra", b"1")].into(),
        };
        send(&ex, accept).unwrap();
        let close = ResponseEvent::WsClose {
            code: 4002,
            reason: "going".into(),
        };
        send(&ex, close).unwrap();
        *got.lock().unwrap() = Some(receive_ws(&ex).unwrap());
    })
    .websocket();
    let mut c = Client::new(app);
    c.send(upgrade_request("").as_bytes());
    assert!(c.response().0.contains("\r\nX-Extra: 1\r\n"));
    let (op, body) = c.frame();
    assert_eq!(op, CLOSE);
    assert_eq!(body, [&4002u16.to_be_bytes()[..], b"going"].concat());
    assert!(!c.s.done(), "waits for the client's Close");
    let deadline = c.s.deadline().expect("a close deadline");
    assert!(deadline <= Instant::now() + websocket::CLOSE_TIMEOUT);
    // Data after our Close is dropped; the client's Close ends it.
    c.send(&client_frame(true, TEXT, b"late", MASK));
    c.send(&close_frame(4002, ""));
    assert!(c.s.done());
    eventually("the app told", || code.lock().unwrap().is_some());
    assert_eq!(
        *code.lock().unwrap(),
        Some(WsMessage::Disconnect {
            code: 4002,
            reason: String::new()
        })
    );
}

#[test]
fn a_client_that_never_answers_our_close_is_dropped_at_the_deadline() {
    let app = ThreadApp::new(|_req, ex| {
        let accept = ResponseEvent::WsAccept {
            subprotocol: None,
            headers: Default::default(),
        };
        send(&ex, accept).unwrap();
        let close = ResponseEvent::WsClose {
            code: 1000,
            reason: String::new(),
        };
        send(&ex, close).unwrap();
    })
    .websocket();
    let mut c = Client::new(app);
    c.send(upgrade_request("").as_bytes());
    c.response();
    assert_eq!(c.frame().0, CLOSE);
    let deadline = c.s.deadline().unwrap();
    c.s.on_deadline(deadline - Duration::from_millis(1));
    assert!(!c.s.done());
    c.s.on_deadline(deadline);
    assert!(c.s.done());
}

/// Upgraded with keepalive pings (20 s, then 10 s to answer); the app records.
fn keepalive_client() -> (Client, Arc<Mutex<Vec<WsMessage>>>) {
    let (app, seen) = recording();
    let k = Keepalive {
        interval: Duration::from_secs(20),
        timeout: Duration::from_secs(10),
    };
    let mut c = Client::with(app, 1 << 20, true, Some(k));
    c.send(upgrade_request("").as_bytes());
    assert!(c.response().0.starts_with("HTTP/1.1 101 "));
    (c, seen)
}

#[test]
fn a_quiet_client_is_pinged_and_dropped_as_1006_when_nothing_comes_back() {
    let opened = Instant::now();
    let (mut c, seen) = keepalive_client();
    let ping_at = c.s.deadline().expect("a keepalive deadline");
    assert!(ping_at >= opened + Duration::from_secs(20));
    assert!(ping_at <= Instant::now() + Duration::from_secs(20));
    c.s.on_deadline(ping_at - Duration::from_millis(1));
    assert!(drain(&mut c.s).is_empty(), "nothing before the interval");
    c.s.on_deadline(ping_at);
    assert_eq!(c.frame(), (PING, Vec::new()));
    let gone_at = c.s.deadline().unwrap();
    assert_eq!(gone_at, ping_at + Duration::from_secs(10));
    c.s.on_deadline(gone_at - Duration::from_millis(1));
    assert!(!c.s.done());
    c.s.on_deadline(gone_at);
    // A Close 1011 for a client that is there after all, then the end.
    let (op, body) = c.frame();
    assert_eq!(op, CLOSE);
    assert_eq!(
        body,
        [&1011u16.to_be_bytes()[..], b"keepalive ping timeout"].concat()
    );
    assert!(c.s.done(), "an unanswered ping drops the connection");
    assert_eq!(c.s.linger(), Linger::No, "judged gone: nothing to wait for");
    told_1006(&seen);
}

#[test]
fn a_client_heard_from_keeps_its_connection() {
    let (mut c, seen) = keepalive_client();
    let ping_at = c.s.deadline().unwrap();
    c.s.on_deadline(ping_at);
    assert_eq!(c.frame().0, PING);
    // The Pong (any frame would do) comes back: the clock starts over.
    let answered = ping_at + Duration::from_secs(5);
    c.send_at(&client_frame(true, PONG, b"", MASK), answered);
    assert_eq!(c.s.deadline(), Some(answered + Duration::from_secs(20)));
    c.s.on_deadline(ping_at + Duration::from_secs(10));
    assert!(!c.s.done(), "answered in time");
    assert!(drain(&mut c.s).is_empty());
    c.send_at(&client_frame(true, TEXT, b"still here", MASK), answered);
    assert_eq!(c.frame(), (TEXT, b"still here".to_vec()));
    assert!(seen
        .lock()
        .unwrap()
        .iter()
        .all(|m| !matches!(m, WsMessage::Disconnect { .. })));
}

#[test]
fn no_ping_queues_behind_output_the_client_has_yet_to_take() {
    let (mut c, seen) = keepalive_client();
    let ping_at = c.s.deadline().unwrap();
    c.send(&client_frame(true, TEXT, b"echo me", MASK));
    // The echo is queued, not written: the client is reading slowly.
    let start = Instant::now();
    while c.s.output.is_empty() {
        assert!(start.elapsed() < Duration::from_secs(5), "no echo queued");
        if c.board.take_ready(0).count() > 0 {
            c.s.on_notify(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    c.s.on_deadline(ping_at + Duration::from_secs(1));
    // (The session's deadline is now the send timeout's.)
    assert_eq!(c.frame(), (TEXT, b"echo me".to_vec()));
    c.got.extend(drain(&mut c.s));
    assert!(c.got.is_empty(), "no Ping behind it: {:?}", c.got);
    assert!(!c.s.done() && seen.lock().unwrap().len() == 1);
}

#[test]
fn without_keepalive_a_quiet_websocket_has_no_deadline() {
    let mut c = Client::open(ThreadApp::new(ws_echo).websocket());
    assert_eq!(c.s.deadline(), None);
    c.send(&client_frame(true, TEXT, b"hi", MASK));
    assert_eq!(c.frame(), (TEXT, b"hi".to_vec()));
    assert_eq!(c.s.deadline(), None);
}

#[test]
fn a_close_before_accept_is_403_and_the_connection_stays_http() {
    let app = ThreadApp::new(|req, ex| match req.kind {
        RequestKind::WebSocket { .. } => {
            let close = ResponseEvent::WsClose {
                code: 1000,
                reason: String::new(),
            };
            send(&ex, close).unwrap();
        }
        RequestKind::Http => answer(&ex, 200, b"plain").unwrap(),
    })
    .websocket();
    let mut c = Client::new(app);
    c.send(upgrade_request("").as_bytes());
    assert!(c.response().0.starts_with("HTTP/1.1 403"));
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c.response().1, "plain");
}

#[test]
fn a_denial_response_is_sent_as_http() {
    let app = ThreadApp::new(|_req, ex| answer(&ex, 401, b"who are you?").unwrap()).websocket();
    let mut c = Client::new(app);
    c.send(upgrade_request("").as_bytes());
    let (head, body) = c.response();
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    assert!(!head.contains("Sec-WebSocket-Accept"));
    assert_eq!(body, "who are you?");
    assert!(!c.s.done());
}

/// RFC 9110 §7.8: a server MUST ignore `Upgrade` in an HTTP/1.0 request; the
/// app gets a plain HTTP request (before, the handshake's check answered 400).
#[test]
fn an_http10_upgrade_is_served_as_plain_http() {
    let app = ThreadApp::new(|req, ex| {
        let body: &[u8] = match req.kind {
            RequestKind::Http => b"http",
            RequestKind::WebSocket { .. } => b"websocket",
        };
        answer(&ex, 200, body).unwrap()
    })
    .websocket();
    let mut c = Client::new(app);
    let old = upgrade_request("Connection: keep-alive\r\n").replace("HTTP/1.1", "HTTP/1.0");
    c.send(old.as_bytes());
    let (head, body) = c.response();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "http");
}

#[test]
fn a_bad_handshake_is_400_or_426_without_the_app() {
    let mut c = Client::new(ThreadApp::new(ws_echo).websocket());
    let no_key = upgrade_request("").replace(&format!("Sec-WebSocket-Key: {KEY}\r\n"), "");
    c.send(no_key.as_bytes());
    assert!(c.response().0.starts_with("HTTP/1.1 400"));
    let old = upgrade_request("").replace("Version: 13", "Version: 8");
    c.send(old.as_bytes());
    let (head, _) = c.response();
    assert!(head.starts_with("HTTP/1.1 426"), "{head}");
    assert!(head.contains("\r\nSec-WebSocket-Version: 13\r\n"));
    assert_eq!(c.app.calls.load(Ordering::SeqCst), 0);
}

#[test]
fn an_invalid_frame_closes_with_1002_and_the_app_is_told() {
    let (app, seen) = recording();
    let mut c = Client::open(app);
    // RSV1 set with no extension negotiated.
    let mut bad = client_frame(true, TEXT, b"x", MASK);
    bad[0] |= 0x40;
    c.send(&bad);
    let (op, body) = c.frame();
    assert_eq!((op, &body[..2]), (CLOSE, &1002u16.to_be_bytes()[..]));
    assert!(c.s.done());
    assert_eq!(
        c.s.linger(),
        Linger::Yes,
        "failed mid-stream: it may be sending"
    );
    eventually("the app told", || !seen.lock().unwrap().is_empty());
    assert_eq!(
        *seen.lock().unwrap(),
        [WsMessage::Disconnect {
            code: 1002,
            reason: "reserved bits set".into()
        }]
    );
}

#[test]
fn the_client_leaving_without_a_close_is_1006_to_the_app() {
    let (app, seen) = recording();
    let mut c = Client::open(app);
    c.s.on_eof(Instant::now());
    assert!(c.s.done());
    told_1006(&seen);
}

#[test]
fn a_message_over_the_limit_is_1009() {
    let mut c = Client::with_limit(ThreadApp::new(ws_echo).websocket(), 10);
    c.send(upgrade_request("").as_bytes());
    assert!(c.response().0.starts_with("HTTP/1.1 101"));
    c.send(&client_frame(true, BINARY, &[0; 10], MASK));
    assert_eq!(c.frame(), (BINARY, vec![0; 10]), "the limit itself passes");
    c.send(&client_frame(true, BINARY, &[0; 11], MASK));
    let (op, body) = c.frame();
    assert_eq!((op, &body[..2]), (CLOSE, &1009u16.to_be_bytes()[..]));
    assert!(c.s.done());
    assert_eq!(
        c.s.linger(),
        Linger::Yes,
        "the rest of the message may come"
    );
}

#[test]
fn an_app_without_websockets_or_ws_off_gets_plain_http() {
    for (app, ws) in [
        (ThreadApp::new(ws_echo), true),
        (ThreadApp::new(ws_echo).websocket(), false),
    ] {
        let mut c = Client::with(app, 1 << 20, ws, None);
        c.send(upgrade_request("").as_bytes());
        let (head, body) = c.response();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(body, "echo", "ws_echo answers a plain request so");
    }
}

#[test]
fn the_socket_is_not_read_while_the_app_has_enough_messages() {
    let release = Arc::new(std::sync::Barrier::new(2));
    let gate = release.clone();
    let app = ThreadApp::new(move |_req, ex| {
        let accept = ResponseEvent::WsAccept {
            subprotocol: None,
            headers: Default::default(),
        };
        send(&ex, accept).unwrap();
        gate.wait();
        echo_messages(&ex);
    })
    .websocket();
    let mut c = Client::new(app);
    c.send(upgrade_request("").as_bytes());
    c.response();
    assert!(c.s.wants_read());
    let message = client_frame(true, BINARY, &[1; 16 * 1024], MASK);
    let mut sent = 0;
    while c.s.wants_read() {
        c.send(&message);
        sent += 1;
        assert!(
            sent * 16 * 1024 <= 2 * BODY_HIGH_WATER,
            "never stopped reading"
        );
    }
    assert!(
        sent * 16 * 1024 >= BODY_HIGH_WATER / 2,
        "stopped after {sent}"
    );
    // The app starts reading: room frees, the session reads on.
    release.wait();
    for _ in 0..sent {
        assert_eq!(c.frame().0, BINARY);
    }
    assert!(c.s.wants_read());
}

/// The drain tells a WebSocket to go away at `--stream-drain-timeout`
/// (the graceful timeout less a second by default), not before: until
/// then its messages flow as ever.
#[test]
fn shutdown_sends_going_away_at_the_stream_drain_timeout() {
    let mut c = Client::open(ThreadApp::new(ws_echo).websocket());
    let before = Instant::now();
    c.s.on_shutdown();
    let tell = c.s.deadline().expect("the stream drain's deadline");
    let after = tell - before;
    assert!(
        after > Duration::from_secs(28) && after < Duration::from_secs(30),
        "{after:?}"
    );
    c.send(&client_frame(true, TEXT, b"still here", MASK));
    assert_eq!(c.frame(), (TEXT, b"still here".to_vec()));
    c.s.on_deadline(tell);
    let (op, body) = c.frame();
    assert_eq!((op, &body[..2]), (CLOSE, &1001u16.to_be_bytes()[..]));
    c.send(&close_frame(1001, ""));
    assert!(c.s.done());
}

/// `--stream-drain-timeout 0`: told as the drain begins.
#[test]
fn shutdown_with_no_stream_drain_timeout_sends_going_away_at_once() {
    let app = ThreadApp::new(ws_echo).websocket();
    let (s, app, board) = app_session_with(app, |shared| shared.stream_drain = Duration::ZERO);
    let mut c = Client {
        s,
        app,
        board,
        got: Vec::new(),
    };
    c.send(upgrade_request("").as_bytes());
    c.response();
    c.s.on_shutdown();
    let (op, body) = c.frame();
    assert_eq!((op, &body[..2]), (CLOSE, &1001u16.to_be_bytes()[..]));
}
