//! Bad input gets a clear answer and hurts nobody else (issue 2, point 3).
//!
//! Every case runs against a one-core server while a [`Bystander`] is being
//! served on the same core, checks the exact status, checks that the offending
//! connection is then closed (after a bad head the framing is lost, and after a
//! framing conflict a server that read on would be open to request smuggling),
//! and checks that the bystander went on being answered and that a fresh client
//! is answered too.
//!
//! Where a case can smuggle, a valid request follows the bad one in the same
//! write: a server that answered it would fail the closed-connection check.

mod common;

use std::time::Duration;

use common::{Bystander, Client, Server, HEALTH, TIMEOUT};

/// A request that must be refused with `status`, on a server started with `args`.
fn refused(args: &[&str], request: &[u8], status: u16) {
    refused_in_parts(args, &[request], status);
}

/// Same, the request sent in `parts` with a pause between them, so that the
/// server has read each before the next arrives.
fn refused_in_parts(args: &[&str], parts: &[&[u8]], status: u16) {
    let server = Server::start(args);
    let mut bystander = Bystander::start(&server);
    let mut c = server.connect();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(200));
        }
        // The server may answer and close before it has read everything: a
        // refused write is fine, the answer is what is checked.
        if c.try_send(part).is_err() {
            break;
        }
    }
    let r = c.read_response();
    let shown = String::from_utf8_lossy(&parts.concat())
        .chars()
        .take(120)
        .collect::<String>();
    assert_eq!(r.status, status, "the answer to {shown:?}");
    if let Err(e) = c.wait_closed(TIMEOUT) {
        panic!("after {status} to {shown:?} the connection must close: {e}");
    }
    bystander.assert_progress(3);
    server.assert_serves_another_client();
    bystander.finish();
}

/// `request` followed, in the same write, by a valid request that must never be answered.
fn with_smuggled(request: &str) -> Vec<u8> {
    format!("{request}GET {HEALTH} HTTP/1.1\r\nHost: smuggled\r\n\r\n").into_bytes()
}

// --- 400: malformed request line or header -----------------------------------

#[test]
fn malformed_request_line_400_bad_method_token() {
    refused(&[], b"G@T /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 400);
}

#[test]
fn malformed_request_line_400_bad_version() {
    refused(&[], b"GET /healthz HTPT/1.1\r\nHost: x\r\n\r\n", 400);
}

#[test]
fn malformed_request_line_400_missing_version() {
    refused(&[], b"GET /healthz\r\nHost: x\r\n\r\n", 400);
}

#[test]
fn malformed_request_line_400_garbage() {
    refused(&[], b"\x01\x02\x03 hello\r\n\r\n", 400);
}

#[test]
fn malformed_header_400_space_in_name() {
    refused(
        &[],
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n",
        400,
    );
}

#[test]
fn malformed_header_400_no_colon() {
    refused(
        &[],
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n",
        400,
    );
}

#[test]
fn malformed_content_length_400() {
    refused(
        &[],
        &with_smuggled("POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"),
        400,
    );
}

// --- 431: head over 64 KiB -----------------------------------------------------

#[test]
fn head_over_64_kib_431() {
    // First just under the limit (no blank line yet), then enough to cross it:
    // the server has read all of the first part before the second arrives, so
    // nothing it has not read is left behind to turn its close into a reset.
    let mut first = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    first.resize(63 * 1024, b'a');
    let second = [b'a'; 4 * 1024];
    refused_in_parts(&[], &[&first, &second, b"\r\n\r\n"], 431);
}

#[test]
fn many_headers_over_64_kib_431() {
    let mut first = b"GET /healthz HTTP/1.1\r\nHost: x\r\n".to_vec();
    let mut i = 0;
    while first.len() < 63 * 1024 {
        first.extend(format!("X-H{i}: {}\r\n", "v".repeat(60)).as_bytes());
        i += 1;
    }
    let mut second = Vec::new();
    for j in 0..40 {
        second.extend(format!("X-More{j}: {}\r\n", "v".repeat(60)).as_bytes());
    }
    refused_in_parts(&[], &[&first, &second, b"\r\n"], 431);
}

// --- 414: a request line over 64 KiB --------------------------------------------

#[test]
fn target_over_64_kib_414() {
    // The request line alone crosses the head's limit: its target is what is
    // too long (RFC 9112 §3), in two parts as above.
    let mut first = b"GET /healthz?q=".to_vec();
    first.resize(63 * 1024, b'a');
    let second = [b'a'; 4 * 1024];
    refused_in_parts(
        &[],
        &[&first, &second, b" HTTP/1.1\r\nHost: x\r\n\r\n"],
        414,
    );
}

// --- 501: a method over 64 KiB --------------------------------------------------

#[test]
fn method_over_64_kib_501() {
    // The method alone crosses the head's limit: "longer than any that it
    // implements" (RFC 9112 §3), whatever the backend's reads bring.
    let first = vec![b'A'; 63 * 1024];
    let second = [b'A'; 4 * 1024];
    refused_in_parts(
        &[],
        &[&first, &second, b" / HTTP/1.1\r\nHost: x\r\n\r\n"],
        501,
    );
}

// --- 413: body over --max-body-size --------------------------------------------

#[test]
fn content_length_over_max_body_size_413() {
    // The length alone decides: the body is never sent.
    refused(
        &["--max-body-size", "1024"],
        b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1025\r\n\r\n",
        413,
    );
}

#[test]
fn chunked_body_over_max_body_size_413() {
    let chunk = "a".repeat(600);
    let req = format!(
        "POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
         258\r\n{chunk}\r\n258\r\n{chunk}\r\n0\r\n\r\n"
    );
    refused(&["--max-body-size", "1024"], req.as_bytes(), 413);
}

#[test]
fn expect_continue_over_max_body_size_is_413_not_100() {
    // read_response returns the first answer: it must be the refusal, not 100.
    refused(
        &["--max-body-size", "1024"],
        b"POST /healthz HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4096\r\n\r\n",
        413,
    );
}

#[test]
fn body_at_max_body_size_is_accepted() {
    // The boundary: exactly the limit is not refused (the 413 above is not a
    // refusal of every body).
    let server = Server::start(&["--max-body-size", "1024"]);
    let mut c = server.connect();
    let mut req = b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1024\r\n\r\n".to_vec();
    req.extend([b'z'; 1024]);
    c.send(&req);
    let r = c.read_response();
    assert_ne!(r.status, 413);
    assert!(r.status < 500, "got {}", r.status);
}

// --- 400 and close: framing conflicts (no request smuggling) --------------------

#[test]
fn transfer_encoding_with_content_length_400() {
    let req = "POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n";
    refused(&[], &with_smuggled(req), 400);
}

#[test]
fn differing_content_lengths_400() {
    let req =
        "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!";
    refused(&[], &with_smuggled(req), 400);
}

#[test]
fn differing_content_lengths_in_one_field_400() {
    let req = "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 6\r\n\r\nhello!";
    refused(&[], &with_smuggled(req), 400);
}

#[test]
fn invalid_chunk_size_400_not_hex() {
    let req = "POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n";
    refused(&[], &with_smuggled(req), 400);
}

#[test]
fn invalid_chunk_size_400_empty() {
    let req = "POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\r\nhello\r\n0\r\n\r\n";
    refused(&[], &with_smuggled(req), 400);
}

#[test]
fn invalid_chunk_size_400_overflow() {
    // 17 hex digits do not fit in 64 bits; a size that wrapped would be a smuggling hole.
    let req = "POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000005\r\nhello\r\n0\r\n\r\n";
    refused(&[], &with_smuggled(req), 400);
}

#[test]
fn obs_fold_400() {
    let req = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n  b\r\n\r\n";
    refused(&[], &with_smuggled(req), 400);
}

#[test]
fn cr_inside_a_value_400() {
    let req = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n";
    refused(&[], &with_smuggled(req), 400);
}

#[test]
fn lf_inside_a_value_400() {
    // A lenient parser reads the bare LF as a line end and finds two headers.
    let req = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\nX-B: b\r\n\r\n";
    refused(&[], &with_smuggled(req), 400);
}

#[test]
fn nul_inside_a_value_400() {
    let mut req = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a".to_vec();
    req.push(0);
    req.extend(b"b\r\n\r\n");
    refused(&[], &req, 400);
}

// --- 501: unknown transfer coding ------------------------------------------------

#[test]
fn unknown_transfer_coding_501() {
    let req = "POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n";
    refused(&[], &with_smuggled(req), 501);
}

#[test]
fn unknown_transfer_coding_before_chunked_501() {
    let req = "POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: x-unknown, chunked\r\n\r\n0\r\n\r\n";
    refused(&[], &with_smuggled(req), 501);
}

// --- 505: HTTP/2+ request line ------------------------------------------------------

#[test]
fn http2_request_line_505() {
    refused(&[], b"GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 505);
}

#[test]
fn http3_request_line_505() {
    refused(&[], b"GET /healthz HTTP/3.0\r\nHost: x\r\n\r\n", 505);
}

// --- good input after bad input elsewhere -----------------------------------------

#[test]
fn a_good_request_before_a_bad_one_is_answered_first() {
    // The bad request closes the connection only after what came before it is answered.
    let server = Server::start(&[]);
    let mut c: Client = server.connect();
    let mut bytes = format!("GET {HEALTH} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes();
    bytes.extend(b"GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n");
    c.send(&bytes);
    assert_eq!(c.read_response().status, 200);
    assert_eq!(c.read_response().status, 505);
    c.assert_closed(TIMEOUT);
}

// --- issue 11: no request kills the server; strict targets and Host ----------

/// Each `(request, status)` on its own connection of one server, a bystander
/// served throughout: the whole family must be answered by the same live process.
fn all_refused_by_one_server(cases: &[(&[u8], u16)]) {
    let server = Server::start(&[]);
    let mut bystander = Bystander::start(&server);
    for &(request, status) in cases {
        let mut c = server.connect();
        let _ = c.try_send(request);
        let shown = String::from_utf8_lossy(request).into_owned();
        let r = c
            .try_read_response(TIMEOUT, false)
            .unwrap_or_else(|e| panic!("no answer to {shown:?} (server dead?): {e}"));
        assert_eq!(r.status, status, "the answer to {shown:?}");
        if let Err(e) = c.wait_closed(TIMEOUT) {
            panic!("after {status} to {shown:?} the connection must close: {e}");
        }
        bystander.assert_progress(1);
    }
    server.assert_serves_another_client();
    bystander.finish();
}

/// `GET /a b HTTP/1.1` once overflowed a core thread's stack (the parser
/// called itself for ever) and killed the process; its relatives put spaces,
/// tabs and extra words anywhere in the request line.
#[test]
fn whitespace_anywhere_in_the_request_line_is_400_and_kills_nothing() {
    all_refused_by_one_server(&[
        (b"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET /a b HTTP/1.2\r\nHost: x\r\n\r\n", 400),
        (b"GET /a b c HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET /a\tb HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET\t/ HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET /\tHTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1 \r\nHost: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET / extra HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\t\r\nHost: x\r\n\r\n", 400),
    ]);
}

/// RFC 9112 §3.2: the target's form must fit the method; `#`, controls and
/// raw non-ASCII are refused; CONNECT is a proxy's method (501 here).
#[test]
fn request_targets_are_held_to_rfc_9112() {
    all_refused_by_one_server(&[
        (b"GET healthz HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET /healthz#top HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET /\x7f HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET /\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET ftp://x/healthz HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET http://user@x/healthz HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n", 501),
        (b"CONNECT /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET /healthz HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
        (b"GET /healthz HTTP/1.1\r\nHost: x:port\r\n\r\n", 400),
        (b"GET /healthz HTTP/1.1\r\nHost: x/y\r\n\r\n", 400),
        (b"GET /healthz HTTP/1.0\r\nHost: x\r\nHost: y\r\n\r\n", 400),
        (b"POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n20;invalid=\r\n", 400),
    ]);
}

#[test]
fn absolute_form_and_asterisk_form_are_served() {
    let server = Server::start(&["--health-path", HEALTH]);
    let mut c = server.connect();
    c.send(format!("GET http://example.com{HEALTH} HTTP/1.1\r\nHost: other\r\n\r\n").as_bytes());
    assert_eq!(c.read_response().status, 200);
    c.send(b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n");
    // No route owns `*`: the server's own answer, on a connection kept open.
    assert_eq!(c.read_response().status, 404);
    c.send(format!("GET {HEALTH} HTTP/1.1\r\nHost: [::1]:8000\r\n\r\n").as_bytes());
    assert_eq!(c.read_response().status, 200);
}

/// Bytes that cannot begin a request line are answered at once: no CRLF is
/// waited for, nor the header-read timeout (set long here to tell them apart).
#[test]
fn non_http_bytes_are_answered_at_once() {
    let server = Server::start(&["--header-read-timeout", "30"]);
    let mut bystander = Bystander::start(&server);
    let client_hello = b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03";
    for bytes in [&client_hello[..], b"\0", b"\xff\xfe", b"GET\t"] {
        let mut c = server.connect();
        let started = std::time::Instant::now();
        c.send(bytes);
        let r = c
            .try_read_response(TIMEOUT, false)
            .unwrap_or_else(|e| panic!("no answer to {bytes:?}: {e}"));
        assert_eq!(r.status, 400, "{bytes:?}");
        c.assert_closed(TIMEOUT);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{bytes:?} answered after {:?}",
            started.elapsed()
        );
        bystander.assert_progress(1);
    }
    bystander.finish();
}
