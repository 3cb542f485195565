//! The connection against h2's own client, bytes shuttled between them in
//! memory; and raw frames where a client would not send them.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use h2::client::{self, ResponseFuture, SendRequest};
use http::{Method, Request};

use super::pipe::Pipe;
use super::*;
use crate::http::BodyKind;

struct Client {
    conn: Pin<Box<client::Connection<Pipe, Bytes>>>,
    send: SendRequest<Bytes>,
    pipe: Pipe,
}

fn poll<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(Waker::noop()))
}

/// Move bytes both ways and poll both ends until nothing moves.
fn shuttle(
    server: &mut H2Conn,
    client_pipe: &Pipe,
    client: Option<&mut Pin<Box<client::Connection<Pipe, Bytes>>>>,
) {
    let mut client = client;
    for _ in 0..100 {
        if let Some(c) = client.as_mut() {
            let _ = c.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        }
        let up = client_pipe.take_output();
        server.recv(&up);
        server.drive();
        let down = server.take_output();
        if up.is_empty() && down.is_empty() {
            break;
        }
        client_pipe.push(&down);
    }
}

fn connect(settings: Settings) -> (H2Conn, Client) {
    let mut server = H2Conn::new(settings);
    let pipe = Pipe::default();
    let mut handshake = Box::pin(client::handshake(pipe.clone()));
    let (send, conn) = loop {
        if let Poll::Ready(r) = handshake
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            break r.expect("client handshake");
        }
        shuttle(&mut server, &pipe, None);
    };
    let mut c = Client {
        conn: Box::pin(conn),
        send,
        pipe,
    };
    c.exchange(&mut server);
    (server, c)
}

impl Client {
    fn exchange(&mut self, server: &mut H2Conn) {
        shuttle(server, &self.pipe, Some(&mut self.conn));
    }

    fn get(&mut self, path: &str, end: bool) -> (ResponseFuture, h2::SendStream<Bytes>) {
        let req = Request::builder()
            .method(Method::GET)
            .uri(format!("https://example.com{path}"))
            .header("cookie", "a=1")
            .header("cookie", "b=2")
            .body(())
            .unwrap();
        self.send.send_request(req, end).expect("request sent")
    }
}

fn events(server: &mut H2Conn) -> Vec<Event> {
    std::iter::from_fn(|| server.next_event()).collect()
}

#[test]
fn a_request_becomes_a_head_and_its_answer_reaches_the_client() {
    let (mut server, mut c) = connect(Settings::default());
    let (mut response, _) = c.get("/hello?x=1", true);
    c.exchange(&mut server);
    let evs = events(&mut server);
    let (id, head) = match &evs[..] {
        [Event::Request { id, head }, Event::End { id: end }] if id == end => (*id, head),
        other => panic!("{other:?}"),
    };
    assert_eq!(head.target, "/hello?x=1");
    assert_eq!(head.header("host"), Some(&b"example.com"[..]));
    assert_eq!(head.header("cookie"), Some(&b"a=1; b=2"[..]));
    server.respond(
        id,
        200,
        &[("content-type", b"text/plain"), ("connection", b"close")],
        false,
    );
    server.send(id, Bytes::from_static(b"hello "));
    server.send(id, Bytes::from_static(b"world"));
    server.finish(id, None);
    server.drive();
    let mut written = 0;
    server.take_written(|i, n| {
        assert_eq!(i, id);
        written += n;
    });
    c.exchange(&mut server);
    let resp = match poll(&mut response) {
        Poll::Ready(r) => r.unwrap(),
        Poll::Pending => panic!("no response"),
    };
    assert_eq!(resp.status(), 200);
    assert!(!resp.headers().contains_key("connection"));
    assert_eq!(resp.headers()["server"], "m0serve");
    let mut body = resp.into_body();
    let mut got = Vec::new();
    while let Poll::Ready(Some(chunk)) =
        Pin::new(&mut body).poll_data(&mut Context::from_waker(Waker::noop()))
    {
        got.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(got, b"hello world");
    assert!(body.is_end_stream());
    assert_eq!(server.open_streams(), 0);
    assert!(written == 11 || written == 0, "credited {written}");
}

#[test]
fn a_body_is_read_only_while_wanted() {
    let (mut server, mut c) = connect(Settings::default());
    let (_response, mut up) = c.get("/upload", false);
    up.send_data(Bytes::from_static(b"abc"), false).unwrap();
    c.exchange(&mut server);
    let id = match &events(&mut server)[..] {
        [Event::Request { id, head }] => {
            assert_eq!(head.body, BodyKind::Chunked);
            *id
        }
        other => panic!("{other:?}"),
    };
    assert!(events(&mut server).is_empty());
    server.want_body(id, true);
    server.drive();
    up.send_data(Bytes::from_static(b"def"), true).unwrap();
    c.exchange(&mut server);
    let mut body = Vec::new();
    let mut ended = false;
    for e in events(&mut server) {
        match e {
            Event::Data { data, .. } => body.extend_from_slice(&data),
            Event::End { .. } => ended = true,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(body, b"abcdef");
    assert!(ended);
}

#[test]
fn a_stream_the_client_resets_is_reported() {
    let (mut server, mut c) = connect(Settings::default());
    let (_response, mut up) = c.get("/slow", false);
    c.exchange(&mut server);
    let id = match &events(&mut server)[..] {
        [Event::Request { id, .. }] => *id,
        other => panic!("{other:?}"),
    };
    up.send_reset(h2::Reason::CANCEL);
    c.exchange(&mut server);
    assert!(matches!(&events(&mut server)[..], [Event::Reset { id: r }] if *r == id));
    assert_eq!(server.open_streams(), 0);
}

#[test]
fn an_answer_waits_for_the_clients_window() {
    let settings = Settings::default();
    let (mut server, mut c) = connect(settings);
    let (mut response, _) = c.get("/big", true);
    c.exchange(&mut server);
    let id = match &events(&mut server)[..] {
        [Event::Request { id, .. }, Event::End { .. }] => *id,
        other => panic!("{other:?}"),
    };
    server.respond(id, 200, &[], false);
    server.send(id, Bytes::from(vec![7u8; 200_000]));
    server.finish(id, None);
    c.exchange(&mut server);
    // The client's default stream window is 65,535 bytes: the rest waits.
    assert_eq!(server.queued(id), 200_000 - 65_535);
    let resp = match poll(&mut response) {
        Poll::Ready(r) => r.unwrap(),
        Poll::Pending => panic!("no response"),
    };
    let mut body = resp.into_body();
    let mut got = 0;
    for _ in 0..50 {
        while let Poll::Ready(Some(chunk)) =
            Pin::new(&mut body).poll_data(&mut Context::from_waker(Waker::noop()))
        {
            let chunk = chunk.unwrap();
            got += chunk.len();
            body.flow_control().release_capacity(chunk.len()).unwrap();
        }
        c.exchange(&mut server);
    }
    assert_eq!(got, 200_000);
    assert_eq!(server.queued(id), 0);
}

#[test]
fn a_graceful_shutdown_lets_the_open_stream_finish_then_ends() {
    let (mut server, mut c) = connect(Settings::default());
    let (mut response, _) = c.get("/a", true);
    c.exchange(&mut server);
    let id = match &events(&mut server)[..] {
        [Event::Request { id, .. }, Event::End { .. }] => *id,
        other => panic!("{other:?}"),
    };
    server.graceful_shutdown();
    c.exchange(&mut server);
    assert!(server.ended().is_none(), "closed under an open stream");
    server.respond(id, 204, &[], true);
    c.exchange(&mut server);
    assert!(matches!(poll(&mut response), Poll::Ready(Ok(r)) if r.status() == 204));
    assert_eq!(server.ended(), Some(&Ended::Done));
}

#[test]
fn a_connection_that_does_not_open_with_the_preface_ends_with_an_error() {
    let mut server = H2Conn::new(Settings::default());
    server.recv(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    server.drive();
    assert!(
        matches!(server.ended(), Some(Ended::Error { .. })),
        "{:?}",
        server.ended()
    );
}

/// A raw frame: length, type, flags, stream id, payload.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[kind, flags]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// `GET /` as a HEADERS frame's HPACK block (static table entries only).
const GET_SLASH: &[u8] = &[0x82, 0x86, 0x84, 0x41, 0x01, b'h'];

fn raw_server() -> H2Conn {
    let mut server = H2Conn::new(Settings::default());
    server.recv(PREFACE);
    server.recv(&frame(0x4, 0, 0, &[])); // SETTINGS
    server.drive();
    server
}

/// The GOAWAY's error code, if the output holds one.
fn goaway_code(out: &[u8]) -> Option<u32> {
    let mut rest = out;
    while rest.len() >= 9 {
        let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
        if rest[3] == 0x7 {
            return Some(u32::from_be_bytes(rest[13..17].try_into().unwrap()));
        }
        rest = &rest[9 + len..];
    }
    None
}

#[test]
fn rapid_reset_ends_the_connection_with_enhance_your_calm() {
    let mut server = raw_server();
    let _ = server.take_output();
    let mut flood = Vec::new();
    for i in 0..200u32 {
        let id = 1 + 2 * i;
        flood.extend(frame(0x1, 0x5, id, GET_SLASH)); // HEADERS, END_STREAM|END_HEADERS
        flood.extend(frame(0x3, 0, id, &8u32.to_be_bytes())); // RST_STREAM CANCEL
    }
    server.recv(&flood);
    server.drive();
    let out = server.take_output();
    assert_eq!(goaway_code(&out), Some(0xb), "ENHANCE_YOUR_CALM");
    assert!(matches!(
        server.ended(),
        Some(Ended::Error { ours: true, .. })
    ));
}

#[test]
fn a_continuation_flood_is_bounded_while_it_accumulates() {
    let settings = Settings {
        max_header_list_size: 4096,
        ..Settings::default()
    };
    let mut server = H2Conn::new(settings);
    server.recv(PREFACE);
    server.recv(&frame(0x4, 0, 0, &[]));
    server.drive();
    let _ = server.take_output();
    // HEADERS without END_HEADERS, then CONTINUATIONs of a literal that grows.
    let mut block = vec![0x82, 0x86, 0x84, 0x41, 0x01, b'h', 0x40, 0x01, b'x', 0x7f];
    block.extend(encode_len_tail(1 << 20));
    server.recv(&frame(0x1, 0x1, 1, &block));
    let mut sent = 0;
    while server.ended().is_none() && sent < 2_000 {
        server.recv(&frame(0x9, 0, 1, &[b'a'; 1024]));
        server.drive();
        sent += 1;
    }
    assert!(
        server.ended().is_some(),
        "still accumulating after {sent} KiB"
    );
    assert!(sent < 64, "bounded only after {sent} KiB");
}

/// The HPACK integer continuation bytes for `n - 127` (a 7-bit prefix full).
fn encode_len_tail(n: usize) -> Vec<u8> {
    let mut v = Vec::new();
    let mut n = n - 127;
    while n >= 128 {
        v.push((n % 128 + 128) as u8);
        n /= 128;
    }
    v.push(n as u8);
    v
}

#[test]
fn a_ping_flood_is_answered_without_growing_without_bound() {
    let mut server = raw_server();
    let _ = server.take_output();
    let mut flood = Vec::new();
    for _ in 0..10_000 {
        flood.extend(frame(0x6, 0, 0, &[0; 8]));
    }
    server.recv(&flood);
    server.drive();
    let out = server.take_output();
    // Each PING's ACK is 17 bytes; h2 answers what it reads, no more.
    assert!(out.len() <= 10_000 * 17 + 64, "{}", out.len());
}

#[test]
fn the_preface_is_sniffed() {
    assert_eq!(sniff(b"PRI * HTTP/2.0\r\n"), Sniffed::Undecided);
    assert_eq!(sniff(PREFACE), Sniffed::Http2);
    assert_eq!(sniff(b"GET / HTTP/1.1\r\n"), Sniffed::Http1);
    assert_eq!(sniff(b"PRI * HTTP/1.1\r\n\r\n"), Sniffed::Http1);
    assert_eq!(sniff(b""), Sniffed::Undecided);
}

/// Frames that carry nothing, `bytes` of them in reads of about 64 KiB:
/// each kind of the 2019 floods.
fn useless_frames(bytes: usize) -> Vec<Vec<u8>> {
    let kinds: [(u8, u8, u32, &[u8]); 5] = [
        (0x4, 0, 0, &[]),               // SETTINGS (empty: nothing changes)
        (0x2, 0, 1, &[0, 0, 0, 3, 16]), // PRIORITY of an idle stream
        (0x8, 0, 0, &[0, 0, 0, 1]),     // WINDOW_UPDATE of 1
        (0x0, 0, 0, &[]),               // an empty DATA (stream 0: refused, but read)
        (0xFA, 0, 0, &[1, 2, 3]),       // an unknown type
    ];
    let mut reads = Vec::new();
    let mut read = Vec::new();
    let mut total = 0;
    let mut i = 0;
    while total < bytes {
        let (kind, flags, stream, payload) = kinds[i % kinds.len()];
        if kind == 0x0 {
            i += 1;
            continue; // DATA on stream 0 is a protocol error: the test's own below
        }
        let f = frame(kind, flags, stream, payload);
        total += f.len();
        read.extend(f);
        if read.len() >= 64 * 1024 {
            reads.push(std::mem::take(&mut read));
        }
        i += 1;
    }
    reads.push(read);
    reads
}

#[test]
fn a_flood_of_frames_that_carry_nothing_ends_with_enhance_your_calm() {
    let mut server = raw_server();
    let _ = server.take_output();
    let mut code = None;
    let mut fed = 0;
    for read in useless_frames(64 * 1024 * 1024) {
        fed += read.len();
        server.recv(&read);
        server.drive();
        // Each output holds whole frames (the ACKs, then the GOAWAY).
        code = goaway_code(&server.take_output());
        if code.is_some() {
            break;
        }
    }
    // 8 x the 1 MiB budget, a read over it at most.
    assert!(
        fed <= 8 * 1024 * 1024 + 128 * 1024,
        "read {fed} bytes of them"
    );
    assert_eq!(code, Some(0xb), "ENHANCE_YOUR_CALM");
    server.drive();
    match server.ended() {
        Some(Ended::Error {
            ours: true, text, ..
        }) => assert!(text.contains("flood"), "{text}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn without_the_flood_budget_such_frames_are_read_on() {
    let mut server = H2Conn::new(Settings {
        flood_budget: None,
        ..Settings::default()
    });
    server.recv(PREFACE);
    server.recv(&frame(0x4, 0, 0, &[]));
    server.drive();
    for read in useless_frames(16 * 1024 * 1024) {
        server.recv(&read);
        server.drive();
        let _ = server.take_output();
    }
    assert!(server.ended().is_none());
}

fn status_of(response: &mut ResponseFuture) -> u16 {
    match poll(response) {
        Poll::Ready(r) => r.expect("a response").status().as_u16(),
        Poll::Pending => panic!("no response"),
    }
}

#[test]
fn a_body_over_the_limit_gets_413_by_its_length_or_as_it_comes() {
    let settings = Settings {
        max_body: 10,
        ..Settings::default()
    };
    let (mut server, mut c) = connect(settings);
    // By its Content-Length: refused before the app hears of it.
    let req = Request::builder()
        .method(Method::POST)
        .uri("https://example.com/upload")
        .header("content-length", "11")
        .body(())
        .unwrap();
    let (mut response, _up) = c.send.send_request(req, false).unwrap();
    c.exchange(&mut server);
    assert!(events(&mut server).is_empty());
    assert_eq!(status_of(&mut response), 413);
    // As it comes: the stream's request is withdrawn, the client told 413.
    let (mut response, mut up) = c.get("/upload", false);
    up.send_data(Bytes::from_static(b"0123456789"), false)
        .unwrap();
    c.exchange(&mut server);
    let id = match &events(&mut server)[..] {
        [Event::Request { id, .. }] => *id,
        other => panic!("{other:?}"),
    };
    server.want_body(id, true);
    server.drive();
    assert!(matches!(&events(&mut server)[..], [Event::Data { .. }]));
    up.send_data(Bytes::from_static(b"!"), false).unwrap();
    c.exchange(&mut server);
    assert!(matches!(&events(&mut server)[..], [Event::Reset { id: r }] if *r == id));
    assert_eq!(status_of(&mut response), 413);
    // The connection goes on.
    let (_next, _up) = c.get("/next", true);
    c.exchange(&mut server);
    let evs = events(&mut server);
    assert!(
        matches!(&evs[..], [Event::Request { .. }, Event::End { .. }]),
        "{evs:?} {:?}",
        server.ended()
    );
}
