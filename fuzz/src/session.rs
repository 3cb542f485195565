//! A connection driven the way `src/server/session/` drives one, minus the
//! sockets and the app: every request is answered with a small response so
//! that pipelined requests proceed, a valid WebSocket handshake is accepted
//! and the connection carries on as a [`WsConn`] that echoes, and what
//! happened is written down as a [`Transcript`] to compare between feeds.

use m0serve_proto::http::forwarded;
use m0serve_proto::http::trusted::Trusted;
use m0serve_proto::http::{BodyKind, Event, Limits, RequestHead, ServerConn};
use m0serve_proto::ws::{handshake, WsConn, WsEvent};

/// Small limits, so that 413, 414 and 431 are within a fuzzer's reach.
pub const LIMITS: Limits = Limits {
    max_head: 2048,
    max_body: 4096,
};
/// The largest WebSocket message, small for the same reason (1009 beyond).
pub const MAX_MESSAGE: usize = 1024;

/// One thing the connection reported.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// A request head (its `Debug` form: heads are not `PartialEq`).
    Head(String),
    /// The body data of one request, however many `Data` events carried it.
    Body(Vec<u8>),
    End,
    Error(u16),
    /// A WebSocket event, after an upgrade.
    Ws(String),
    /// The PROXY protocol preamble, and (behind it) what each head's
    /// forwarding headers say, as `Debug` text.
    Proxy(String),
}

/// Everything a feed produced: what must not depend on how it was split.
#[derive(Debug, PartialEq, Eq)]
pub struct Transcript {
    pub steps: Vec<Step>,
    /// The bytes written back, `Date` lines removed (the clock may tick
    /// between feeds) and `100 Continue` too: it is left out when body bytes
    /// came with the head (RFC 9110 §10.1.1), so whether it is sent depends
    /// on how the bytes arrived, by design.
    pub output: Vec<u8>,
    pub must_close: bool,
}

pub struct Session {
    conn: ServerConn,
    ws: Option<WsConn>,
    out: Vec<u8>,
    steps: Vec<Step>,
    /// The current request's body so far.
    body: Vec<u8>,
    /// The request read and not answered yet.
    pending: Option<RequestHead>,
    /// Behind a proxy: a preamble first, and the heads' forwarding headers read.
    proxied: bool,
}

impl Session {
    /// Feeds `pieces` one `recv` each, then the end of input.
    pub fn run(pieces: &[&[u8]]) -> Transcript {
        Session::run_with(pieces, false)
    }

    /// [`Session::run`]; `proxied`: as from a trusted proxy, the connection
    /// opening with a PROXY protocol preamble and each head's forwarding
    /// headers resolved.
    pub fn run_with(pieces: &[&[u8]], proxied: bool) -> Transcript {
        let mut conn = ServerConn::new(LIMITS);
        if proxied {
            conn.expect_preamble();
        }
        let mut s = Session {
            conn,
            ws: None,
            out: Vec::new(),
            steps: Vec::new(),
            body: Vec::new(),
            pending: None,
            proxied,
        };
        for piece in pieces {
            s.recv(piece);
        }
        if s.ws.is_none() {
            s.conn.recv_eof();
            s.drain();
        }
        if !s.body.is_empty() {
            // A body cut short by the end of input: the data events stand.
            let body = std::mem::take(&mut s.body);
            s.steps.push(Step::Body(body));
        }
        let must_close = match &s.ws {
            Some(ws) => ws.must_close(),
            None => s.conn.must_close(),
        };
        Transcript {
            steps: s.steps,
            output: without(CONTINUE, &without_date(&s.out)),
            must_close,
        }
    }

    fn recv(&mut self, piece: &[u8]) {
        match &mut self.ws {
            Some(ws) => {
                ws.recv(piece);
                self.drain_ws();
            }
            None => {
                self.conn.recv(piece);
                self.drain();
            }
        }
    }

    fn drain(&mut self) {
        while let Some(event) = self.conn.next_event() {
            match event {
                Event::Head(head) => {
                    assert!(
                        self.pending.is_none(),
                        "a head before the last request ended"
                    );
                    self.steps.push(Step::Head(format!("{head:?}")));
                    if self.proxied {
                        for list in ["*", "127.0.0.1,10.0.0.0/8,2001:db8::/32"] {
                            let trusted = Trusted::parse(list).expect("a valid list");
                            let f = forwarded::resolve(&head.headers, &trusted);
                            self.steps.push(Step::Proxy(format!("{f:?}")));
                        }
                    }
                    // A response before the body is read: the rest of it is dropped.
                    if head.target.contains("early") {
                        self.respond(&head);
                    } else {
                        self.conn.write_continue(&mut self.out);
                        self.pending = Some(head);
                    }
                }
                Event::Preamble(p) => {
                    assert!(self.proxied, "a preamble nobody expected");
                    self.steps.push(Step::Proxy(format!("{p:?}")));
                }
                Event::Data(data) => {
                    assert!(!data.is_empty(), "an empty Data event");
                    self.body.extend_from_slice(&data);
                }
                Event::End => {
                    let head = self.pending.take().expect("End without a head");
                    if let BodyKind::Length(n) = head.body {
                        assert_eq!(
                            self.body.len() as u64,
                            n,
                            "a body not of its Content-Length"
                        );
                    }
                    let body = std::mem::take(&mut self.body);
                    self.steps.push(Step::Body(body));
                    self.steps.push(Step::End);
                    self.respond(&head);
                }
                Event::Error(e) => {
                    // The data decoded in the same read as a bad chunk is dropped
                    // with it (conn.rs), so how much came before an error depends
                    // on the split: it is not compared.
                    self.body.clear();
                    self.steps.push(Step::Error(e.status()));
                    self.conn.write_error(&e, &mut self.out);
                }
            }
        }
        if self.conn.is_upgraded() && self.ws.is_none() {
            let mut ws = WsConn::new(MAX_MESSAGE);
            ws.recv(&self.conn.take_buffered());
            self.ws = Some(ws);
            self.drain_ws();
        }
    }

    fn respond(&mut self, head: &RequestHead) {
        if handshake::is_websocket_request(head) {
            if let Ok(upgrade) = handshake::validate(head) {
                self.conn
                    .start_response(101, &upgrade.response_headers(None, []), &mut self.out);
                self.conn.finish_response(&mut self.out);
                return;
            }
        }
        self.conn
            .start_response(200, &[("Content-Length", b"2")], &mut self.out);
        self.conn.write_body(b"ok", &mut self.out);
        self.conn.finish_response(&mut self.out);
    }

    fn drain_ws(&mut self) {
        let ws = self.ws.as_mut().expect("upgraded");
        while let Some(event) = ws.next_event() {
            echo(ws, &event, &mut self.out);
            self.steps.push(Step::Ws(format!("{event:?}")));
        }
    }
}

/// Answers a WebSocket event as an echo app would: messages sent back, pings
/// ponged, a Close answered, an error closed with its code.
pub fn echo(ws: &mut WsConn, event: &WsEvent, out: &mut Vec<u8>) {
    match event {
        WsEvent::Text(text) => ws.write_text(text, out),
        WsEvent::Binary(data) => ws.write_binary(data, out),
        WsEvent::Ping(payload) => ws.write_pong(payload, out),
        WsEvent::Pong => {}
        WsEvent::Close { .. } => ws.write_close_reply(out),
        WsEvent::Error(e) => ws.write_close(e.close_code, e.reason, out),
    }
}

/// `out` without its `Date: ...` lines.
/// The interim answer to `Expect: 100-continue`.
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// `out` without any occurrence of `cut`.
fn without(cut: &[u8], out: &[u8]) -> Vec<u8> {
    let mut kept = Vec::with_capacity(out.len());
    let mut rest = out;
    while let Some(at) = rest.windows(cut.len()).position(|w| w == cut) {
        kept.extend_from_slice(&rest[..at]);
        rest = &rest[at + cut.len()..];
    }
    kept.extend_from_slice(rest);
    kept
}

fn without_date(out: &[u8]) -> Vec<u8> {
    const DATE: &[u8] = b"\r\nDate: ";
    let mut kept = Vec::with_capacity(out.len());
    let mut rest = out;
    while let Some(at) = rest.windows(DATE.len()).position(|w| w == DATE) {
        kept.extend_from_slice(&rest[..at]);
        let line = &rest[at + 2..];
        let end = line
            .windows(2)
            .position(|w| w == b"\r\n")
            .unwrap_or(line.len());
        rest = &line[end..];
    }
    kept.extend_from_slice(rest);
    kept
}
