use super::*;
use crate::http::{BodyKind, Framing};

fn conn() -> ServerConn {
    ServerConn::new(Limits::default())
}

/// Everything `next_event` yields now.
fn events(c: &mut ServerConn) -> Vec<Event> {
    std::iter::from_fn(|| c.next_event()).collect()
}

fn head(e: &Event) -> &RequestHead {
    match e {
        Event::Head(h) => h,
        other => panic!("expected a head, got {other:?}"),
    }
}

/// The body of the `Data` events, and whether `End` came.
fn body(events: &[Event]) -> (Vec<u8>, bool) {
    let mut data = Vec::new();
    let mut end = false;
    for e in events {
        match e {
            Event::Data(d) => data.extend_from_slice(d),
            Event::End => end = true,
            Event::Head(_) | Event::Preamble(_) => {}
            Event::Error(e) => panic!("unexpected error {e:?}"),
        }
    }
    (data, end)
}

/// Answers the current request with `body` (Content-Length framing).
fn respond(c: &mut ServerConn, status: u16, text: &str) -> String {
    let mut out = Vec::new();
    let len = text.len().to_string();
    let framing = c.start_response(status, &[("Content-Length", len.as_bytes())], &mut out);
    assert_eq!(framing, Framing::Length(text.len() as u64));
    c.write_body(text.as_bytes(), &mut out);
    c.finish_response(&mut out);
    String::from_utf8(out).unwrap()
}

fn error_of(input: &[u8]) -> HttpError {
    let mut c = conn();
    c.recv(input);
    match events(&mut c).pop() {
        Some(Event::Error(e)) => {
            assert!(c.must_close() && !c.wants_read());
            e
        }
        other => panic!(
            "no error for {:?}: {other:?}",
            String::from_utf8_lossy(input)
        ),
    }
}

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n";

#[test]
fn a_simple_exchange() {
    let mut c = conn();
    assert!(c.is_idle() && c.wants_read() && !c.has_partial_head());
    c.recv(GET);
    let ev = events(&mut c);
    assert_eq!(ev.len(), 2);
    assert_eq!(head(&ev[0]).target, "/");
    assert!(matches!(ev[1], Event::End));
    assert!(!c.wants_read() && !c.is_idle() && !c.has_partial_head());
    let out = respond(&mut c, 200, "ok");
    assert!(
        out.starts_with("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nDate: "),
        "{out}"
    );
    assert!(out.ends_with("\r\nServer: m0serve\r\n\r\nok"), "{out}");
    assert!(!out.contains("Connection"));
    assert!(c.is_idle() && c.wants_read() && !c.must_close());
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let mut c = conn();
    c.recv(b"GET /1 HTTP/1.1\r\nHost: h\r\n\r\nPOST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET /3 HTTP/1.1\r\nHost: h\r\n\r\n");
    for (target, expected) in [("/1", ""), ("/2", "abc"), ("/3", "")] {
        let ev = events(&mut c);
        assert_eq!(head(&ev[0]).target, target);
        assert_eq!(body(&ev), (expected.as_bytes().to_vec(), true));
        // Nothing more until this one is answered, though bytes are buffered.
        assert!(c.next_event().is_none() && !c.wants_read());
        respond(&mut c, 200, target);
    }
    assert!(c.is_idle());
    assert!(events(&mut c).is_empty());
}

#[test]
fn a_head_split_byte_by_byte() {
    let mut c = conn();
    let req = b"POST /x?y HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi";
    let head_len = req.len() - 2;
    for (i, byte) in req.iter().enumerate() {
        c.recv(std::slice::from_ref(byte));
        let ev = events(&mut c);
        if i + 1 < head_len {
            assert!(ev.is_empty(), "event at byte {i}");
            assert!(c.has_partial_head() && c.wants_read() && !c.is_idle());
        } else if i + 1 == head_len {
            assert_eq!(head(&ev[0]).target, "/x?y");
            assert!(!c.has_partial_head());
        } else {
            assert!(matches!(ev[0], Event::Data(ref d) if d.len() == 1));
        }
    }
    assert!(!c.wants_read(), "the body is complete");
}

#[test]
fn content_length_body_across_reads() {
    let mut c = conn();
    c.recv(b"PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123");
    let ev = events(&mut c);
    assert_eq!(body(&ev), (b"0123".to_vec(), false));
    assert!(c.wants_read());
    c.recv(b"456789GET");
    let ev = events(&mut c);
    assert_eq!(body(&ev), (b"456789".to_vec(), true));
    // The pipelined bytes after the body stay buffered.
    assert_eq!(c.buffered(), 3);
}

#[test]
fn chunked_body_with_extensions_and_trailers() {
    let mut c = conn();
    c.recv(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6;a;b=\"c\"\r\n world\r\n0\r\nX-Trailer: yes\r\n\r\n");
    c.recv(GET);
    let ev = events(&mut c);
    assert_eq!(head(&ev[0]).body, BodyKind::Chunked);
    // Every chunk in the buffer comes out as one event.
    assert_eq!(ev.len(), 3);
    assert_eq!(body(&ev), (b"hello world".to_vec(), true));
    respond(&mut c, 200, "");
    assert_eq!(head(&events(&mut c)[0]).method, "GET");
}

#[test]
fn chunked_body_byte_by_byte() {
    let mut c = conn();
    c.recv(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
    let mut ev = events(&mut c);
    for byte in b"3\r\nabc\r\n10;x\r\n0123456789abcdef\r\n0\r\nT: 1\r\n\r\n" {
        c.recv(std::slice::from_ref(byte));
        ev.extend(events(&mut c));
    }
    assert_eq!(body(&ev), (b"abc0123456789abcdef".to_vec(), true));
}

#[test]
fn an_unread_body_is_dropped_before_the_next_head() {
    for req in [
        &b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n"[..],
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
    ] {
        let mut c = conn();
        c.recv(req);
        assert!(c.next_event().is_some_and(|e| matches!(e, Event::Head(_))));
        respond(&mut c, 413, "no");
        assert!(
            !c.must_close() && c.wants_read(),
            "reads on to drop the body"
        );
        assert!(!c.is_idle() && !c.has_partial_head());
        let rest: &[u8] = if req.ends_with(b"5\r\n\r\n") {
            b"ab"
        } else {
            b"2\r\nab\r\n"
        };
        c.recv(rest);
        assert!(events(&mut c).is_empty(), "dropped bytes make no events");
        let rest: &[u8] = if req.ends_with(b"5\r\n\r\n") {
            b"cde"
        } else {
            b"0\r\n\r\n"
        };
        c.recv(&[rest, b"GET /next HTTP/1.1\r\nHost: h\r\n\r\n"].concat());
        let ev = events(&mut c);
        assert_eq!(head(&ev[0]).target, "/next");
        assert!(matches!(ev[1], Event::End));
    }
}

#[test]
fn leading_empty_lines_are_ignored() {
    let mut c = conn();
    c.recv(b"\r\n\r");
    assert!(events(&mut c).is_empty());
    c.recv(b"\nGET / HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(head(&events(&mut c)[0]).target, "/");
}

#[test]
fn bad_input_statuses() {
    let cases: &[(&[u8], u16)] = &[
        (b"GET / HTTP/1.1 x\r\nHost: h\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: h\r\nBad Header: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: h\r\n folded: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: h\r\nX: a\nContent-Length: 5\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3x\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, identity\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
        (b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        (b"GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
        (b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nz\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\nab\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n20;invalid=\r\n", 400),
        // The request that once overflowed a core's stack, and its relatives.
        (b"GET /a b HTTP/1.1\r\nHost: h\r\n\r\n", 400),
        (b"GET /a b HTTP/1.2\r\nHost: h\r\n\r\n", 400),
        (b"GET /a\tb HTTP/1.1\r\nHost: h\r\n\r\n", 400),
        (b"GET / HTTP/1.1 HTTP/1.1\r\nHost: h\r\n\r\n", 400),
        (b"GET /#x HTTP/1.1\r\nHost: h\r\n\r\n", 400),
        (b"GET x HTTP/1.1\r\nHost: h\r\n\r\n", 400),
        (b"GET * HTTP/1.1\r\nHost: h\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: h:x\r\n\r\n", 400),
        (b"GET / HTTP/1.0\r\nHost: h\r\nHost: h\r\n\r\n", 400),
        (b"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", 501),
    ];
    for &(input, status) in cases {
        assert_eq!(
            error_of(input).status(),
            status,
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
}

/// Bytes that cannot begin a request line are refused as they arrive, with
/// no CRLF and nothing more: a TLS ClientHello, NUL, a stray byte.
#[test]
fn non_http_bytes_are_refused_at_once() {
    for input in [
        &b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"[..],
        b"\0",
        b"\x80",
        b" GET",
        b"GET\t",
        b"\r\n\r\n\x16",
        b"\rX",
    ] {
        let mut c = conn();
        c.recv(input);
        match c.next_event() {
            Some(Event::Error(e)) => assert_eq!(e.status(), 400, "{input:?}"),
            other => panic!("{input:?}: {other:?}"),
        }
        assert!(c.must_close());
    }
    // What could still become a request waits for more.
    for input in [&b"G"[..], b"GET", b"GET /x", b"\r\n", b"\r\nGE", b"\r"] {
        let mut c = conn();
        c.recv(input);
        assert!(c.next_event().is_none(), "{input:?}");
        assert!(!c.must_close() && c.wants_read(), "{input:?}");
    }
}

/// A request line that is complete and bad is answered before the rest of
/// the head, even when the client then half-closes and sends nothing more.
#[test]
fn a_bad_request_line_is_answered_before_the_head_ends() {
    for eof in [false, true] {
        let mut c = conn();
        c.recv(b"GET /a b HTTP/1.1\r\nHost: h\r\n");
        if eof {
            c.recv_eof();
        }
        match c.next_event() {
            Some(Event::Error(e)) => assert_eq!(e.status(), 400, "eof {eof}"),
            other => panic!("eof {eof}: {other:?}"),
        }
        assert!(c.must_close());
    }
}

#[test]
fn absolute_form_is_served_as_origin_form_with_its_host() {
    let mut c = conn();
    c.recv(b"GET http://example.com:8080/p?q HTTP/1.1\r\nHost: other\r\n\r\n");
    let ev = events(&mut c);
    let h = head(&ev[0]);
    assert_eq!(
        (h.target.as_str(), h.path(), h.query()),
        ("/p?q", "/p", "q")
    );
    assert_eq!(h.header("host"), Some(&b"example.com:8080"[..]));
    assert_eq!(h.headers.len(), 1);
}

#[test]
fn absolute_form_host_keeps_its_place_or_comes_last() {
    let mut c = conn();
    c.recv(b"GET http://a.example/ HTTP/1.1\r\nX-1: a\r\nHost: other\r\nX-2: b\r\n\r\n");
    let ev = events(&mut c);
    let got: Vec<_> = head(&ev[0]).headers.iter().collect();
    assert_eq!(
        got,
        [
            ("X-1", &b"a"[..]),
            ("Host", &b"a.example"[..]),
            ("X-2", &b"b"[..])
        ]
    );
    // HTTP/1.0 may send none: the authority is added as the last field.
    let mut c = conn();
    c.recv(b"GET http://a.example:81/x HTTP/1.0\r\nX-1: a\r\n\r\n");
    let ev = events(&mut c);
    let got: Vec<_> = head(&ev[0]).headers.iter().collect();
    assert_eq!(got, [("X-1", &b"a"[..]), ("Host", &b"a.example:81"[..])]);
}

#[test]
fn write_error_is_a_complete_closing_response() {
    let mut c = conn();
    c.recv(b"GET / HTTP/2.0\r\n\r\n");
    let Some(Event::Error(e)) = c.next_event() else {
        panic!()
    };
    let mut out = Vec::new();
    c.write_error(&e, &mut out);
    let out = String::from_utf8(out).unwrap();
    let reason = "HTTP version not supported";
    assert!(
        out.starts_with("HTTP/1.1 505 HTTP Version Not Supported\r\n"),
        "{out}"
    );
    assert!(out.contains(&format!("Content-Length: {}\r\n", reason.len())));
    assert!(out.contains("Connection: close\r\n") && out.contains("Server: m0serve\r\n"));
    assert!(out.contains("\r\nDate: "));
    assert!(out.ends_with(&format!("\r\n\r\n{reason}")));
    assert!(c.must_close() && !c.wants_read());
    // Input after the error is ignored.
    c.recv(GET);
    assert!(c.next_event().is_none());
}

#[test]
fn head_over_the_limit_is_431() {
    let limits = Limits {
        max_head: 64,
        ..Limits::default()
    };
    // Incomplete and past the limit: refused before the rest arrives.
    let mut c = ServerConn::new(limits);
    c.recv(b"GET / HTTP/1.1\r\nHost: h\r\nX-Long: ");
    assert!(events(&mut c).is_empty());
    c.recv(&[b'a'; 40]);
    assert!(matches!(
        c.next_event(),
        Some(Event::Error(HttpError::HeadTooLarge))
    ));
    // Complete but over the limit.
    let mut c = ServerConn::new(limits);
    c.recv(
        &[
            &b"GET / HTTP/1.1\r\nHost: h\r\nX: "[..],
            &[b'a'; 40],
            b"\r\n\r\n",
        ]
        .concat(),
    );
    assert!(matches!(
        c.next_event(),
        Some(Event::Error(HttpError::HeadTooLarge))
    ));
    // Exactly at the limit is fine.
    let mut c = ServerConn::new(limits);
    let mut req = b"GET / HTTP/1.1\r\nHost: h\r\nX: ".to_vec();
    req.resize(60, b'a');
    req.extend_from_slice(b"\r\n\r\n");
    c.recv(&req);
    assert!(matches!(c.next_event(), Some(Event::Head(_))));
    // Too many header lines.
    let many: String = (0..crate::http::head::MAX_HEADERS)
        .map(|i| format!("X-{i}: v\r\n"))
        .collect();
    let req = format!("GET / HTTP/1.1\r\nHost: h\r\n{many}\r\n");
    assert_eq!(error_of(req.as_bytes()), HttpError::HeadTooLarge);
}

#[test]
fn body_over_the_limit_is_413() {
    let limits = Limits {
        max_body: 10,
        ..Limits::default()
    };
    let mut c = ServerConn::new(limits);
    c.recv(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n");
    assert!(matches!(
        c.next_event(),
        Some(Event::Error(HttpError::PayloadTooLarge))
    ));
    let mut c = ServerConn::new(limits);
    c.recv(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n");
    assert!(matches!(c.next_event(), Some(Event::Head(_))));

    // Chunked: the data within the limit comes out, then the error.
    let mut c = ServerConn::new(limits);
    c.recv(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n01234567\r\n");
    let ev = events(&mut c);
    assert_eq!(body(&ev), (b"01234567".to_vec(), false));
    c.recv(b"3\r\nabc\r\n0\r\n\r\n");
    assert!(matches!(
        c.next_event(),
        Some(Event::Error(HttpError::PayloadTooLarge))
    ));
    let mut out = Vec::new();
    c.write_error(&HttpError::PayloadTooLarge, &mut out);
    assert!(out.starts_with(b"HTTP/1.1 413 Content Too Large\r\n"));
}

/// The Connection header of the response to `req`, and whether the
/// connection must close after it.
fn connection_after(req: &str) -> (Option<String>, bool) {
    let mut c = conn();
    c.recv(req.as_bytes());
    events(&mut c);
    let out = respond(&mut c, 200, "x");
    let header = out
        .lines()
        .find_map(|l| l.strip_prefix("Connection: "))
        .map(str::to_owned);
    (header, c.must_close())
}

#[test]
fn keep_alive_matrix() {
    let cases = [
        ("HTTP/1.1", "", None, false),
        ("HTTP/1.1", "Connection: keep-alive\r\n", None, false),
        ("HTTP/1.1", "Connection: close\r\n", Some("close"), true),
        ("HTTP/1.0", "", Some("close"), true),
        (
            "HTTP/1.0",
            "Connection: keep-alive\r\n",
            Some("keep-alive"),
            false,
        ),
        ("HTTP/1.0", "Connection: close\r\n", Some("close"), true),
    ];
    for (version, fields, header, close) in cases {
        let req = format!("GET / {version}\r\nHost: h\r\n{fields}\r\n");
        assert_eq!(
            connection_after(&req),
            (header.map(str::to_owned), close),
            "{req:?}"
        );
    }
}

#[test]
fn head_requests_get_headers_but_no_body() {
    let mut c = conn();
    c.recv(b"HEAD / HTTP/1.1\r\nHost: h\r\n\r\n");
    assert!(head(&events(&mut c)[0]).is_head());
    let mut out = Vec::new();
    assert_eq!(
        c.start_response(200, &[("Content-Length", b"42")], &mut out),
        Framing::NoBody
    );
    c.write_body(b"body bytes that must not appear", &mut out);
    c.finish_response(&mut out);
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("Content-Length: 42\r\n"));
    assert!(out.ends_with("\r\n\r\n"), "{out}");
    assert!(!c.must_close());
}

#[test]
fn continue_is_written_once_and_only_when_expected() {
    let mut c = conn();
    c.recv(b"PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
    assert!(head(&events(&mut c)[0]).expect_continue);
    let mut out = Vec::new();
    c.write_continue(&mut out);
    c.write_continue(&mut out);
    assert_eq!(out, b"HTTP/1.1 100 Continue\r\n\r\n");
    c.recv(b"abc");
    assert_eq!(body(&events(&mut c)), (b"abc".to_vec(), true));
    respond(&mut c, 200, "");
    assert!(!c.must_close());

    // The body (some of it) came with the head, or there is none: the client
    // did not wait, and no 100 is written (RFC 9110 §10.1.1); the connection
    // stays reusable.
    for (req, rest) in [
        (&b"PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\na"[..], &b"bc"[..]),
        (b"PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n", b"2\r\nbc\r\n0\r\n\r\n"),
        (b"PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n", b""),
    ] {
        let mut c = conn();
        c.recv(req);
        let mut evs = events(&mut c);
        let mut out = Vec::new();
        c.write_continue(&mut out);
        assert!(out.is_empty(), "{req:?}");
        c.recv(rest);
        evs.extend(events(&mut c));
        let want = if rest.is_empty() { b"".to_vec() } else { b"abc".to_vec() };
        assert_eq!(body(&evs), (want, true), "{req:?}");
        respond(&mut c, 200, "");
        assert!(!c.must_close(), "{req:?}");
    }
    // Also once the body was read before the app asked (the core read it).
    let mut c = conn();
    c.recv(b"PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
    events(&mut c);
    c.recv(b"ab");
    events(&mut c);
    let mut out = Vec::new();
    c.write_continue(&mut out);
    assert!(out.is_empty());

    // Not expected: nothing.
    let mut c = conn();
    c.recv(b"PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\n");
    events(&mut c);
    let mut out = Vec::new();
    c.write_continue(&mut out);
    assert!(out.is_empty());

    // Not after a response started.
    let mut c = conn();
    c.recv(b"PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
    events(&mut c);
    let mut out = Vec::new();
    c.start_response(417, &[("Content-Length", b"0")], &mut out);
    let len = out.len();
    c.write_continue(&mut out);
    assert_eq!(out.len(), len);
}

#[test]
fn an_owed_continue_with_an_unread_body_closes() {
    let mut c = conn();
    c.recv(b"PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
    events(&mut c);
    let out = respond(&mut c, 401, "no");
    assert!(out.contains("Connection: close\r\n"), "{out}");
    assert!(c.must_close() && !c.wants_read());

    // Once the 100 went out the client sends the body: drop it and go on.
    let mut c = conn();
    c.recv(b"PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
    events(&mut c);
    c.write_continue(&mut Vec::new());
    let out = respond(&mut c, 401, "no");
    assert!(!out.contains("Connection"));
    assert!(!c.must_close() && c.wants_read());
    c.recv(&[&b"abc"[..], GET].concat());
    assert!(matches!(events(&mut c)[..], [Event::Head(_), Event::End]));
}

#[test]
fn chunked_framing_for_http11_without_length() {
    let mut c = conn();
    c.recv(GET);
    events(&mut c);
    let mut out = Vec::new();
    assert_eq!(
        c.start_response(200, &[("Content-Type", b"text/plain")], &mut out),
        Framing::Chunked
    );
    c.write_body(b"hello ", &mut out);
    c.write_body(b"", &mut out);
    c.write_body(b"world", &mut out);
    c.finish_response(&mut out);
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("Transfer-Encoding: chunked\r\n"));
    assert!(
        out.ends_with("\r\n\r\n6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n"),
        "{out}"
    );
    assert!(!c.must_close() && c.is_idle());
}

#[test]
fn close_framing_for_http10_without_length() {
    let mut c = conn();
    c.recv(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    events(&mut c);
    let mut out = Vec::new();
    assert_eq!(c.start_response(200, &[], &mut out), Framing::Close);
    c.write_body(b"raw", &mut out);
    assert!(!c.must_close(), "not before the response ends");
    c.finish_response(&mut out);
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("Connection: close\r\n") && out.ends_with("\r\n\r\nraw"));
    assert!(!out.contains("Transfer-Encoding") && !out.contains("Content-Length"));
    assert!(c.must_close());
}

#[test]
fn length_framing_truncates_and_a_short_body_closes() {
    let mut c = conn();
    c.recv(GET);
    events(&mut c);
    let mut out = Vec::new();
    c.start_response(200, &[("Content-Length", b"4")], &mut out);
    c.write_body(b"abcdef", &mut out);
    c.finish_response(&mut out);
    assert!(out.ends_with(b"\r\n\r\nabcd"));
    assert!(!c.must_close());

    c.recv(GET);
    events(&mut c);
    let mut out = Vec::new();
    c.start_response(200, &[("Content-Length", b"4")], &mut out);
    c.write_body(b"ab", &mut out);
    c.finish_response(&mut out);
    assert!(c.must_close(), "the peer still waits for 2 bytes");
}

#[test]
fn body_sent_accounts_a_file_body() {
    let mut c = conn();
    c.recv(GET);
    events(&mut c);
    let mut out = Vec::new();
    c.start_response(200, &[("Content-Length", b"1000")], &mut out);
    c.write_body(b"x", &mut out);
    c.body_sent(999);
    c.finish_response(&mut out);
    assert!(!c.must_close() && c.is_idle());
}

#[test]
fn nobody_statuses() {
    for status in [204, 304] {
        let mut c = conn();
        c.recv(GET);
        events(&mut c);
        let mut out = Vec::new();
        assert_eq!(c.start_response(status, &[], &mut out), Framing::NoBody);
        c.write_body(b"nope", &mut out);
        c.finish_response(&mut out);
        assert!(out.ends_with(b"\r\n\r\n") && !out.windows(4).any(|w| w == b"nope"));
        assert!(!c.must_close());
    }
}

#[test]
fn unsafe_response_headers_are_dropped() {
    let mut c = conn();
    c.recv(GET);
    events(&mut c);
    let mut out = Vec::new();
    c.start_response(
        200,
        &[("X", b"a\r\nSet-Cookie: s=1"), ("Content-Length", b"0")],
        &mut out,
    );
    let out = String::from_utf8(out).unwrap();
    assert!(!out.contains("Set-Cookie") && !out.contains("X:"), "{out}");
}

#[test]
fn eof_between_requests_closes_cleanly() {
    let mut c = conn();
    c.recv_eof();
    assert!(c.must_close() && c.next_event().is_none() && !c.wants_read());

    let mut c = conn();
    c.recv(GET);
    events(&mut c);
    respond(&mut c, 200, "");
    c.recv_eof();
    assert!(c.must_close() && c.is_idle());
}

#[test]
fn eof_mid_head_or_mid_body_closes_without_an_event() {
    let mut c = conn();
    c.recv(b"GET / HTTP/1.1\r\nHo");
    assert!(events(&mut c).is_empty());
    c.recv_eof();
    assert!(events(&mut c).is_empty());
    assert!(c.must_close());

    let mut c = conn();
    c.recv(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc");
    assert_eq!(body(&events(&mut c)), (b"abc".to_vec(), false));
    c.recv_eof();
    assert!(c.must_close() && events(&mut c).is_empty());

    // EOF with body bytes still buffered: they come out, then the close.
    let mut c = conn();
    c.recv(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc");
    c.recv_eof();
    assert!(!c.must_close());
    assert_eq!(body(&events(&mut c)), (b"abc".to_vec(), false));
    assert!(c.must_close());

    let mut c = conn();
    c.recv(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab");
    c.recv_eof();
    assert_eq!(body(&events(&mut c)), (b"ab".to_vec(), false));
    assert!(c.must_close());
}

#[test]
fn eof_after_a_complete_request_still_answers_it() {
    let mut c = conn();
    c.recv(GET);
    c.recv_eof();
    assert!(!c.must_close());
    assert_eq!(events(&mut c).len(), 2);
    assert!(!c.must_close());
    respond(&mut c, 200, "ok");
    assert!(c.must_close());

    // Pipelined, then half-closed: every complete request is answered.
    let mut c = conn();
    c.recv(&[GET, GET, b"GET /partial"].concat());
    c.recv_eof();
    for _ in 0..2 {
        assert!(matches!(events(&mut c)[..], [Event::Head(_), Event::End]));
        assert!(!c.must_close());
        respond(&mut c, 200, "");
    }
    assert!(events(&mut c).is_empty());
    assert!(c.must_close());
}

#[test]
fn keep_alive_is_promised_from_a_kept_alive_head_until_the_next_request_begins() {
    let mut c = conn();
    assert!(!c.keep_alive_promised(), "fresh: nothing said yet");
    c.recv(GET);
    events(&mut c);
    assert!(!c.keep_alive_promised(), "its answer can still say close");
    let mut out = Vec::new();
    c.start_response(200, &[("Content-Length", b"2")], &mut out);
    assert!(
        c.keep_alive_promised(),
        "the head said the connection stays"
    );
    c.write_body(b"ok", &mut out);
    c.finish_response(&mut out);
    assert!(c.keep_alive_promised() && c.is_idle());
    c.recv(b"GET / H");
    assert!(!c.keep_alive_promised(), "the next request has begun");
    // A head that says close promises nothing.
    let mut c = conn();
    c.recv(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    events(&mut c);
    c.start_response(200, &[("Content-Length", b"0")], &mut out);
    assert!(!c.keep_alive_promised());
    // Shutdown told before the head: the head says close instead.
    let mut c = conn();
    c.recv(GET);
    events(&mut c);
    c.close_after_response();
    assert!(respond(&mut c, 200, "").contains("Connection: close\r\n"));
    assert!(!c.keep_alive_promised());
    // Answered before its body was read: promised while the rest is dropped.
    let mut c = conn();
    c.recv(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\n");
    events(&mut c);
    respond(&mut c, 200, "");
    assert!(c.keep_alive_promised() && !c.is_idle());
}

#[test]
fn close_after_response_for_shutdown() {
    // Idle after a request: close at once.
    let mut c = conn();
    c.recv(GET);
    events(&mut c);
    respond(&mut c, 200, "");
    c.close_after_response();
    assert!(c.must_close());

    // Fresh (nothing received yet): its coming request is answered, once.
    let mut c = conn();
    c.close_after_response();
    assert!(!c.must_close() && c.is_fresh() && c.next_event().is_none());
    c.recv(GET);
    events(&mut c);
    assert!(respond(&mut c, 200, "").contains("Connection: close\r\n"));
    assert!(c.must_close());

    // In flight: this response says close, and nothing after it is read.
    let mut c = conn();
    c.recv(&[GET, GET].concat());
    events(&mut c);
    c.close_after_response();
    assert!(!c.must_close());
    let out = respond(&mut c, 200, "");
    assert!(out.contains("Connection: close\r\n"));
    assert!(c.must_close() && c.next_event().is_none());

    // A partial head: the next response is the last.
    let mut c = conn();
    c.recv(b"GET / HT");
    c.close_after_response();
    assert!(!c.must_close() && c.has_partial_head());
    c.recv(b"TP/1.1\r\nHost: h\r\n\r\n");
    events(&mut c);
    assert!(respond(&mut c, 200, "").contains("Connection: close\r\n"));
    assert!(c.must_close());

    // Dropping an unread body: close once it is behind us.
    let mut c = conn();
    c.recv(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\n");
    events(&mut c);
    respond(&mut c, 200, "");
    c.close_after_response();
    assert!(!c.must_close() && c.wants_read());
    c.recv(b"abcd");
    assert!(events(&mut c).is_empty());
    assert!(c.must_close());
}

#[test]
fn write_error_after_a_response_started_writes_nothing() {
    let mut c = conn();
    c.recv(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
    events(&mut c);
    let mut out = Vec::new();
    c.start_response(200, &[], &mut out);
    c.recv(b"zz\r\n");
    let Some(Event::Error(e)) = c.next_event() else {
        panic!()
    };
    let len = out.len();
    c.write_error(&e, &mut out);
    assert_eq!(out.len(), len);
    assert!(c.must_close());
}

#[test]
fn responses_without_a_request_write_nothing() {
    let mut c = conn();
    let mut out = Vec::new();
    assert_eq!(c.start_response(200, &[], &mut out), Framing::NoBody);
    c.write_body(b"x", &mut out);
    c.finish_response(&mut out);
    c.write_continue(&mut out);
    assert!(out.is_empty() && c.is_idle());
}

#[test]
fn upgrade_hands_over_the_remaining_bytes() {
    let mut c = conn();
    c.recv(
        b"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n\x81\x00",
    );
    events(&mut c);
    let mut out = Vec::new();
    c.start_response(
        101,
        &[("Connection", b"Upgrade"), ("Upgrade", b"websocket")],
        &mut out,
    );
    c.finish_response(&mut out);
    assert!(c.is_upgraded() && !c.must_close() && !c.wants_read());
    assert!(c.next_event().is_none());
    assert_eq!(c.take_buffered(), b"\x81\x00");
}

#[test]
fn the_buffer_stays_compact() {
    let mut c = conn();
    for _ in 0..1000 {
        c.recv(&[GET, b"GET / HT"].concat());
        events(&mut c);
        respond(&mut c, 200, "");
        c.recv(b"TP/1.1\r\nHost: h\r\n\r\n");
        events(&mut c);
        respond(&mut c, 200, "");
    }
    assert!(
        c.buf.capacity() < 4 * GET.len(),
        "capacity {}",
        c.buf.capacity()
    );
    assert!(c.is_idle());
}

mod preamble {
    use super::*;
    use crate::http::proxy_protocol::Preamble;

    fn proxied() -> ServerConn {
        let mut c = conn();
        c.expect_preamble();
        c
    }

    #[test]
    fn preamble_comes_before_the_head_split_anywhere() {
        let input = b"PROXY TCP4 192.0.2.7 10.0.0.1 5000 80\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n";
        for split in 0..input.len() {
            let mut c = proxied();
            assert!(
                c.has_partial_head(),
                "the head's timeout runs from the start"
            );
            assert!(!c.is_idle() && c.wants_read());
            c.recv(&input[..split]);
            let mut got = events(&mut c);
            c.recv(&input[split..]);
            got.extend(events(&mut c));
            assert!(
                matches!(got[0], Event::Preamble(Preamble::Proxied(a)) if a.to_string() == "192.0.2.7:5000"),
                "split {split}: {got:?}"
            );
            assert_eq!(head(&got[1]).path(), "/x");
            assert!(matches!(got[2], Event::End));
        }
    }

    #[test]
    fn missing_or_malformed_preamble_closes_without_an_answer() {
        for input in [
            &b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"[..],
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 99999\r\nGET / HTTP/1.1\r\n\r\n",
            b"\r\n\r\n\0\r\nQUIT\n\x13",
        ] {
            let mut c = proxied();
            c.recv(input);
            assert!(events(&mut c).is_empty());
            assert!(c.must_close() && !c.wants_read());
        }
        // End of input inside the preamble: closed, nothing said.
        let mut c = proxied();
        c.recv(b"PROXY TCP4 1.2");
        assert!(events(&mut c).is_empty() && !c.must_close());
        c.recv_eof();
        assert!(events(&mut c).is_empty());
        assert!(c.must_close());
    }

    #[test]
    fn without_expect_preamble_a_preamble_is_a_bad_request() {
        let mut c = conn();
        c.recv(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\nGET / HTTP/1.1\r\n\r\n");
        assert!(matches!(
            events(&mut c).pop(),
            Some(Event::Error(HttpError::BadRequest(_)))
        ));
        assert!(matches!(
            error_of(b"\r\n\r\n\0\r\nQUIT\n!\x11\0\x0c"),
            HttpError::BadRequest(_)
        ));
    }
}

/// Whether the peer may still be sending what the connection will not read
/// (the backend then lingers before it closes): after bad input, behind a
/// closing answer, and in a body cut short; not once everything was read,
/// nor after the peer's end of input.
#[test]
fn the_peer_may_still_be_sending_after_a_refusal_or_a_closing_answer() {
    // A 413 at the head: the body is still on its way.
    let mut c = ServerConn::new(Limits {
        max_body: 10,
        ..Limits::default()
    });
    c.recv(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99\r\n\r\n");
    assert!(matches!(events(&mut c).pop(), Some(Event::Error(_))));
    assert!(c.must_close() && c.peer_may_send());
    c.recv_eof();
    assert!(
        !c.peer_may_send(),
        "the peer's end of input: nothing more comes"
    );

    // A bad request line, with nothing after it buffered.
    let mut c = conn();
    c.recv(b"GET /a b HTTP/1.1\r\n\r\n");
    assert!(matches!(events(&mut c).pop(), Some(Event::Error(_))));
    assert!(c.peer_may_send());

    // A complete request answered with `Connection: close`: nothing unread.
    let mut c = conn();
    c.recv(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    events(&mut c);
    respond(&mut c, 200, "ok");
    assert!(c.must_close() && !c.peer_may_send());

    // The same with a request pipelined behind it.
    let mut c = conn();
    c.recv(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /next HTTP/1.1\r\n");
    events(&mut c);
    respond(&mut c, 200, "ok");
    assert!(c.must_close() && c.peer_may_send());

    // A closing answer before the body was read.
    let mut c = conn();
    c.recv(b"POST / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: 5\r\n\r\nab");
    events(&mut c);
    respond(&mut c, 401, "no");
    assert!(c.must_close() && c.peer_may_send());
    // A refused PROXY preamble is closed with no answer to protect.
    let mut c = conn();
    c.expect_preamble();
    c.recv(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert!(events(&mut c).is_empty());
    assert!(c.must_close() && !c.peer_may_send());
}
