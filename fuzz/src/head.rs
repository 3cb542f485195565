use m0serve_proto::http::{BodyKind, Event, RequestHead, ServerConn, Version};

use crate::session::LIMITS;

/// The request-head parser (through [`ServerConn`], which finds the head,
/// parses it and admits it): no panic, a refusal is one of the statuses the
/// parser documents, and an accepted head obeys RFC 9110/9112's grammar and
/// framing rules and is what the bytes said.
pub fn head(data: &[u8]) {
    let mut conn = ServerConn::new(LIMITS);
    conn.recv(data);
    match conn.next_event() {
        Some(Event::Head(head)) => check(&head, data),
        Some(Event::Error(e)) => {
            assert!(
                [400, 413, 414, 417, 431, 501, 505].contains(&e.status()),
                "unexpected status {e:?}"
            );
        }
        Some(other) => panic!("{other:?} before any head"),
        None => {}
    }
}

fn check(head: &RequestHead, data: &[u8]) {
    assert!(is_token(head.method.as_bytes()), "method {:?}", head.method);
    assert!(
        !head.target.is_empty() && head.target.bytes().all(|b| b > b' ' && b != 0x7F),
        "target {:?}",
        head.target
    );
    // Served as origin-form, or `*` (RFC 9112 §3.2.1, §3.2.4); never with a fragment.
    assert!(
        (head.target.starts_with('/') || head.target == "*") && !head.target.contains('#'),
        "target {:?}",
        head.target
    );
    let values = |name: &str| -> Vec<&[u8]> {
        head.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
            .collect()
    };
    // The request line, after any empty lines, is method SP target SP HTTP/1.x.
    let mut line = data;
    while let Some(rest) = line.strip_prefix(b"\r\n") {
        line = rest;
    }
    let method = format!("{} ", head.method);
    assert!(
        line.starts_with(method.as_bytes()),
        "request line vs {method:?}"
    );
    let rest = &line[method.len()..];
    let sp = rest
        .iter()
        .position(|&b| b == b' ')
        .expect("a space after the target");
    let (sent, version) = (&rest[..sp], &rest[sp + 1..]);
    assert!(version.starts_with(b"HTTP/1."), "version {version:?}");
    let minor = version[7];
    assert_eq!(
        head.version == Version::Http10,
        minor == b'0',
        "minor version {minor}"
    );
    if sent != head.target.as_bytes() {
        // Only an absolute-form target is served as something else: its
        // path and query ("/" for none), its authority as the one Host
        // (RFC 9112 §3.2.2).
        let sent = std::str::from_utf8(sent).expect("an absolute-form target is text");
        let (scheme, rest) = sent.split_once("://").expect("an absolute-form target");
        assert!(
            scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https"),
            "scheme {scheme:?}"
        );
        let (authority, origin) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
        // An empty path is "/" (RFC 9110 §4.2.3); the parser may instead
        // refuse one followed by a query, but never serve it without "/".
        let served = if origin.starts_with('/') {
            origin.to_owned()
        } else {
            format!("/{origin}")
        };
        assert_eq!(head.target, served, "the origin-form of {sent:?}");
        assert!(!sent.contains('#'), "a fragment in {sent:?}");
        assert!(!authority.starts_with(':'), "no host in {sent:?}");
        assert!(
            !authority.is_empty() && !authority.contains('@'),
            "authority {authority:?}"
        );
        assert_eq!(values("host"), [authority.as_bytes()], "Host of {sent:?}");
    }

    for (name, value) in &head.headers {
        assert!(is_token(name.as_bytes()), "header name {name:?}");
        assert!(
            !value.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0),
            "header value {value:?}"
        );
        assert!(
            value.first() != Some(&b' ') && value.last() != Some(&b' '),
            "untrimmed value {value:?}"
        );
    }
    if head.version == Version::Http11 {
        assert_eq!(values("host").len(), 1, "Host lines");
    }
    let lengths = values("content-length");
    let codings = values("transfer-encoding");
    // Every Content-Length line is digits (leading zeros allowed) worth `n`.
    let all_read_as = |n: u64| {
        lengths.iter().all(|v| {
            v.iter().all(u8::is_ascii_digit)
                && std::str::from_utf8(v).ok().and_then(|s| s.parse().ok()) == Some(n)
        })
    };
    match head.body {
        BodyKind::Empty => {
            assert!(codings.is_empty(), "Transfer-Encoding with no body");
            assert!(all_read_as(0), "Content-Length {lengths:?} with no body");
        }
        BodyKind::Length(n) => {
            assert!(codings.is_empty(), "Transfer-Encoding with a length");
            assert!(!lengths.is_empty(), "a length without Content-Length");
            assert!(all_read_as(n), "Content-Length {lengths:?} read as {n}");
        }
        BodyKind::Chunked => {
            assert!(lengths.is_empty(), "Content-Length with chunked");
            assert_eq!(head.version, Version::Http11, "chunked in HTTP/1.0");
            // Lines of a list header read as one list (RFC 9110 §5.3).
            let last = codings
                .iter()
                .flat_map(|v| v.split(|&b| b == b','))
                .map(trim_ows)
                .rfind(|item| !item.is_empty());
            assert!(
                last.is_some_and(|c| c.eq_ignore_ascii_case(b"chunked")),
                "Transfer-Encoding {codings:?}"
            );
        }
    }
    // The Connection options: a comma-separated list of tokens (RFC 9110 §7.6.1).
    let options = values("connection");
    let says = |token: &[u8]| {
        options
            .iter()
            .flat_map(|v| v.split(|&b| b == b','))
            .any(|item| trim_ows(item).eq_ignore_ascii_case(token))
    };
    if head.keep_alive {
        assert!(!says(b"close"), "keep-alive despite Connection: close");
        assert!(
            head.version == Version::Http11 || says(b"keep-alive"),
            "an HTTP/1.0 keep-alive it did not ask for"
        );
    }
    // Expect is a list: an accepted head's members are all 100-continue (any
    // other is 417), and it is expected exactly when one is, in HTTP/1.1.
    let expectations: Vec<&[u8]> = values("expect")
        .iter()
        .flat_map(|v| v.split(|&b| b == b','))
        .map(trim_ows)
        .filter(|m| !m.is_empty())
        .collect();
    assert!(
        expectations
            .iter()
            .all(|m| m.eq_ignore_ascii_case(b"100-continue")),
        "accepted an expectation other than 100-continue"
    );
    assert_eq!(
        head.expect_continue,
        head.version == Version::Http11 && !expectations.is_empty(),
        "expect_continue disagrees with Expect"
    );
}

/// `token` (RFC 9110 §5.6.2): one or more tchar.
pub(crate) fn is_token(s: &[u8]) -> bool {
    !s.is_empty()
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Without the optional whitespace (SP, HTAB) around it.
pub(crate) fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}
