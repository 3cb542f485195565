use m0serve_proto::http::chunked::{ChunkedDecoder, Decoded};
use m0serve_proto::http::response::reason_phrase;
use m0serve_proto::http::{Event, Framing, ServerConn};

use crate::head::{is_token, trim_ows};
use crate::session::LIMITS;

/// The requests a response can answer: the version, HEAD, and what the
/// request said about the connection change what the response must say.
const REQUESTS: &[&[u8]] = &[
    b"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
    b"GET / HTTP/1.0\r\n\r\n",
    b"HEAD / HTTP/1.1\r\nHost: h\r\n\r\n",
    b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    b"HEAD / HTTP/1.0\r\n\r\n",
];

/// A response written by [`ServerConn::start_response`] (`write_head`), with
/// the fuzzer's status, headers and body, read back as a client reads it
/// (httparse, then the body by the framing the head announces, RFC 9112
/// §6.3): the head parses and ends where the body starts; the status is the
/// one given (500 for one that is not three digits) with its reason; the app's
/// headers that are not dropped come first, in order, with their values; what
/// follows is only framing, `Connection`, `Date` and `Server`; the body read
/// back is the one written (cut to a declared length, none where none is
/// allowed); and `Connection: close` is there exactly when the connection closes.
///
/// Input layout: byte 0 picks the request, bytes 1-2 the status (big endian),
/// byte 3 the number of headers (low nibble), each header a length byte and
/// a name, a length byte and a value; the rest is the body.
pub fn response_roundtrip(data: &[u8]) {
    let [pick, hi, lo, count, ref rest @ ..] = *data else {
        return;
    };
    let request = REQUESTS[usize::from(pick) % REQUESTS.len()];
    let status = u16::from_be_bytes([hi, lo]);
    let mut input = Input(rest);
    let mut fields = Vec::new();
    for _ in 0..count & 0x0F {
        let (Some(name), Some(value)) = (input.take(), input.take()) else {
            break;
        };
        fields.push((String::from_utf8_lossy(name).into_owned(), value));
    }
    let body = input.0;
    let headers: Vec<(&str, &[u8])> = fields.iter().map(|(n, v)| (n.as_str(), *v)).collect();

    let mut conn = ServerConn::new(LIMITS);
    conn.recv(request);
    assert!(matches!(conn.next_event(), Some(Event::Head(_))));
    assert!(matches!(conn.next_event(), Some(Event::End)));
    let mut out = Vec::new();
    let framing = conn.start_response(status, &headers, &mut out);
    let head_len = out.len();
    conn.write_body(body, &mut out);
    conn.finish_response(&mut out);

    let mut parsed = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut parsed);
    let n = match resp.parse(&out) {
        Ok(httparse::Status::Complete(n)) => n,
        other => panic!("{other:?} for {:?}", String::from_utf8_lossy(&out)),
    };
    assert_eq!(n, head_len, "the head's end");
    let code = if (100..=999).contains(&status) {
        status
    } else {
        500
    };
    assert_eq!(resp.code, Some(code));
    assert_eq!(resp.reason, Some(reason_phrase(code)));

    let upgrade = code == 101;
    let kept: Vec<(&str, &[u8])> = headers
        .iter()
        .copied()
        .filter(|&(name, value)| {
            safe(name, value)
                && !["content-length", "transfer-encoding"]
                    .iter()
                    .any(|h| name.eq_ignore_ascii_case(h))
                && (upgrade || !name.eq_ignore_ascii_case("connection"))
        })
        .collect();
    let got = resp.headers.iter().map(|h| (h.name, h.value));
    for (i, ((name, value), (got_name, got_value))) in kept.iter().zip(got).enumerate() {
        assert_eq!(*name, got_name, "header {i}'s name");
        assert_eq!(trim_ows(value), trim_ows(got_value), "{name}'s value");
    }
    let added = &resp.headers[kept.len().min(resp.headers.len())..];
    assert_eq!(
        resp.headers.len(),
        kept.len() + added.len(),
        "app headers kept"
    );
    let value = |name: &str| {
        added
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    };
    for h in added {
        assert!(
            [
                "content-length",
                "transfer-encoding",
                "connection",
                "date",
                "server"
            ]
            .iter()
            .any(|n| h.name.eq_ignore_ascii_case(n)),
            "added {}",
            h.name
        );
    }
    let app_has = |name: &str| kept.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    assert_eq!(value("date").is_some(), !app_has("date"), "Date");
    assert_eq!(value("server").is_some(), !app_has("server"), "Server");

    // The body as a client finds it (RFC 9112 §6.3).
    let wire = &out[n..];
    let head_request = request.starts_with(b"HEAD");
    let app_length = headers
        .iter()
        .filter(|&&(name, v)| safe(name, v) && name.eq_ignore_ascii_case("content-length"))
        .find_map(|(_, v)| strict_length(v));
    let closes;
    if head_request || code < 200 || code == 204 || code == 304 {
        assert_eq!(framing, Framing::NoBody);
        assert!(wire.is_empty(), "a body where none is allowed");
        closes = false;
    } else if let Some(te) = value("transfer-encoding") {
        assert_eq!(te, b"chunked");
        assert_eq!(framing, Framing::Chunked);
        assert_eq!(value("content-length"), None, "Content-Length with chunked");
        let mut decoder = ChunkedDecoder::new(u64::MAX, usize::MAX);
        let (mut read, mut pos) = (Vec::new(), 0);
        loop {
            match decoder
                .decode(&wire[pos..])
                .expect("the chunked body decodes")
            {
                (k, Decoded::Data(run)) => {
                    read.extend_from_slice(run);
                    pos += k;
                }
                (k, Decoded::Done) => {
                    pos += k;
                    break;
                }
                (_, Decoded::NeedMore) => panic!("the chunked body is cut short"),
            }
        }
        assert_eq!(pos, wire.len(), "bytes after the last chunk");
        assert_eq!(read, body);
        closes = false;
    } else if let Some(length) = value("content-length") {
        let length = strict_length(length).expect("a valid Content-Length");
        assert_eq!(Some(length), app_length, "the app's Content-Length");
        assert_eq!(framing, Framing::Length(length));
        let sent = body.len().min(length as usize);
        assert_eq!(wire, &body[..sent]);
        closes = (sent as u64) < length;
    } else {
        assert_eq!(framing, Framing::Close);
        assert_eq!(wire, body);
        closes = true;
    }
    if upgrade {
        assert!(conn.is_upgraded(), "a 101 upgrades");
    } else {
        let says_close = value("connection").is_some_and(|v| v.eq_ignore_ascii_case(b"close"));
        assert_eq!(
            conn.must_close(),
            says_close || closes,
            "must_close vs Connection"
        );
    }
}

/// The fuzzer's bytes, read as length-prefixed fields.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn take(&mut self) -> Option<&'a [u8]> {
        let (&len, rest) = self.0.split_first()?;
        let len = usize::from(len).min(rest.len());
        let (field, rest) = rest.split_at(len);
        self.0 = rest;
        Some(field)
    }
}

/// What may go on the wire (RFC 9110 §5.5): a token name, no control
/// character but HTAB in the value.
fn safe(name: &str, value: &[u8]) -> bool {
    is_token(name.as_bytes()) && !value.iter().any(|&b| (b < b' ' && b != b'\t') || b == 0x7F)
}

/// Digits only, fitting in 64 bits (what a valid Content-Length is).
fn strict_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}
