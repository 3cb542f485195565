use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use m0serve_proto::http::{Event, RequestHead, ServerConn, Version};
use m0serve_proto::ws::handshake::{is_websocket_request, validate};

use crate::session::LIMITS;

/// RFC 6455 §1.3's GUID, for computing the accept value independently.
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The opening handshake on a request the fuzzer wrote: no panic; a refusal
/// is 400 or 426 (the latter naming version 13); an accepted one is a GET
/// over HTTP/1.1 with version 13 and one key of 16 base64-encoded bytes, its
/// `Sec-WebSocket-Accept` is base64(SHA-1(key + GUID)), the 101 written with
/// it (and the first offered subprotocol) parses back with those headers, and
/// after it the connection is upgraded with exactly the bytes after the head
/// handed over.
pub fn ws_handshake(data: &[u8]) {
    let mut conn = ServerConn::new(LIMITS);
    conn.recv(data);
    let Some(Event::Head(head)) = conn.next_event() else {
        return;
    };
    if !is_websocket_request(&head) {
        return;
    }
    let upgrade = match validate(&head) {
        Ok(upgrade) => upgrade,
        Err(e) => {
            match e.status() {
                400 => assert!(e.headers().is_empty()),
                426 => assert_eq!(e.headers(), &[("Sec-WebSocket-Version", &b"13"[..])]),
                other => panic!("status {other} for {e:?}"),
            }
            return;
        }
    };
    assert_eq!(head.method, "GET");
    assert_eq!(head.version, Version::Http11);
    assert_eq!(
        values(&head, "sec-websocket-version").first(),
        Some(&&b"13"[..])
    );
    let keys = values(&head, "sec-websocket-key");
    let [key] = keys[..] else {
        panic!("accepted with keys {keys:?}");
    };
    let nonce = STANDARD.decode(key).expect("a base64 key");
    assert_eq!(nonce.len(), 16, "the key's nonce");
    let mut sha1 = sha1_smol::Sha1::new();
    sha1.update(key);
    sha1.update(GUID.as_bytes());
    let accept = STANDARD.encode(sha1.digest().bytes());
    assert_eq!(upgrade.accept(), accept.as_bytes(), "Sec-WebSocket-Accept");

    if let Some(Event::End) = conn.next_event() {
        let chosen = upgrade.subprotocols.first().map(String::as_str);
        let mut out = Vec::new();
        conn.start_response(101, &upgrade.response_headers(chosen, []), &mut out);
        conn.finish_response(&mut out);
        let mut fields = [httparse::EMPTY_HEADER; 16];
        let mut resp = httparse::Response::new(&mut fields);
        assert!(resp.parse(&out).is_ok_and(|s| s.is_complete()), "{out:?}");
        assert_eq!(resp.code, Some(101));
        let field = |name: &str| {
            resp.headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| h.value)
        };
        assert_eq!(field("upgrade"), Some(&b"websocket"[..]));
        assert_eq!(field("connection"), Some(&b"Upgrade"[..]));
        assert_eq!(field("sec-websocket-accept"), Some(accept.as_bytes()));
        assert_eq!(field("sec-websocket-protocol"), chosen.map(str::as_bytes));
        assert!(conn.is_upgraded(), "not upgraded after the 101");
        let head_end = head_end(data);
        assert_eq!(
            conn.take_buffered(),
            &data[head_end..],
            "the bytes after the head"
        );
    }
}

/// The trimmed values of every `name` line.
fn values<'a>(head: &'a RequestHead, name: &str) -> Vec<&'a [u8]> {
    head.headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim_ascii())
        .collect()
}

/// Where the first head in `data` ends (after any empty lines before it).
fn head_end(data: &[u8]) -> usize {
    let mut start = 0;
    while data[start..].starts_with(b"\r\n") {
        start += 2;
    }
    start
        + data[start..]
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a whole head")
        + 4
}
