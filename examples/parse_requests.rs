//! Runs m0serve's sans-IO request parser ([`ServerConn`]) over many inputs, for
//! the differential test against other HTTP/1.1 parsers
//! (tests/python/test_differential.py). A test tool, not part of the CLI.
//!
//! Reads one base64-encoded input per line on stdin; writes one JSON line per
//! input (flushed, so a crash points at the input that caused it):
//! `{"requests":[...],"outcome":O,"status":N,"reason":R,"split_differs":B}`.
//! Each request is `{"method","target","version","headers":[[name,value]...],
//! "body","keep_alive","complete"}`, byte strings base64-encoded. Every complete
//! request is answered (404, empty body) so the next pipelined one is parsed.
//! `outcome` is `error` (then `status` and `reason`), `closed` (a request
//! ended the connection; the bytes after it are not read), `incomplete`
//! (waiting for more bytes) or `idle` (all input consumed between requests).
//! `split_differs`: feeding the input one byte at a time gave another result.

use std::io::{BufRead, Write};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use m0serve::http::{Event, Fields, Limits, ServerConn, Version};

fn main() {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.expect("stdin");
        let input = STANDARD.decode(line.trim()).expect("a base64 line");
        let whole = parse(&input, input.len().max(1));
        let split = parse(&input, 1);
        let json = format!(
            "{{{},\"split_differs\":{}}}",
            whole.json(),
            whole.json() != split.json()
        );
        writeln!(stdout, "{json}").expect("stdout");
        stdout.flush().expect("stdout");
    }
}

struct Request {
    method: String,
    target: String,
    version: Version,
    headers: Fields,
    body: Vec<u8>,
    keep_alive: bool,
    complete: bool,
}

struct Parsed {
    requests: Vec<Request>,
    outcome: &'static str,
    error: Option<(u16, &'static str)>,
}

/// Feeds `input` to a fresh connection `chunk` bytes at a time, answering each
/// complete request, until it is all fed or the connection must close.
fn parse(input: &[u8], chunk: usize) -> Parsed {
    let mut conn = ServerConn::new(Limits::default());
    let mut requests: Vec<Request> = Vec::new();
    let mut out = Vec::new();
    let mut pieces = input.chunks(chunk);
    loop {
        while let Some(event) = conn.next_event() {
            match event {
                Event::Head(head) => requests.push(Request {
                    method: head.method,
                    target: head.target,
                    version: head.version,
                    headers: head.headers,
                    body: Vec::new(),
                    keep_alive: head.keep_alive,
                    complete: false,
                }),
                Event::Data(data) => requests
                    .last_mut()
                    .expect("Data after a Head")
                    .body
                    .extend(data),
                // No preamble is expected of this connection.
                Event::Preamble(_) => unreachable!("a preamble without expect_preamble"),
                Event::End => {
                    requests.last_mut().expect("End after a Head").complete = true;
                    conn.start_response(404, &[("Content-Length", b"0")], &mut out);
                    conn.finish_response(&mut out);
                }
                Event::Error(e) => {
                    // How much of a refused body was handed out first depends
                    // on how its bytes arrived: not part of the result.
                    if let Some(last) = requests.last_mut().filter(|r| !r.complete) {
                        last.body.clear();
                    }
                    return Parsed {
                        requests,
                        outcome: "error",
                        error: Some((e.status(), e.reason())),
                    };
                }
            }
        }
        if conn.must_close() {
            return Parsed {
                requests,
                outcome: "closed",
                error: None,
            };
        }
        match pieces.next() {
            Some(piece) => conn.recv(piece),
            None => break,
        }
    }
    Parsed {
        requests,
        outcome: if conn.is_idle() { "idle" } else { "incomplete" },
        error: None,
    }
}

impl Parsed {
    /// The JSON object's members, without the braces.
    fn json(&self) -> String {
        let requests: Vec<String> = self.requests.iter().map(Request::json).collect();
        let (status, reason) = match self.error {
            Some((status, reason)) => (status.to_string(), format!("{reason:?}")),
            None => ("null".into(), "null".into()),
        };
        format!(
            "\"requests\":[{}],\"outcome\":\"{}\",\"status\":{status},\"reason\":{reason}",
            requests.join(","),
            self.outcome
        )
    }
}

impl Request {
    fn json(&self) -> String {
        let headers: Vec<String> = self
            .headers
            .iter()
            .map(|(name, value)| format!("[\"{}\",\"{}\"]", b64(name.as_bytes()), b64(value)))
            .collect();
        format!(
            "{{\"method\":\"{}\",\"target\":\"{}\",\"version\":\"{}\",\"headers\":[{}],\
             \"body\":\"{}\",\"keep_alive\":{},\"complete\":{}}}",
            b64(self.method.as_bytes()),
            b64(self.target.as_bytes()),
            match self.version {
                Version::Http10 => "1.0",
                Version::Http11 => "1.1",
                Version::Http2 => "2",
            },
            headers.join(","),
            b64(&self.body),
            self.keep_alive,
            self.complete
        )
    }
}

fn b64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}
