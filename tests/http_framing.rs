//! HTTP/1.1 framing end to end: keep-alive (1.1 by default, 1.0 only on
//! request), pipelined answers in order, HEAD, request bodies (Content-Length
//! and chunked with extensions and trailers), `Expect: 100-continue`, and the
//! Date and Server headers (and `--no-server-header`, `--header`).

mod common;

use std::time::{Duration, SystemTime};

use common::{request_bytes, Server, TempDir, HEALTH, TIMEOUT};

/// A server with two small static files whose bodies tell answers apart.
fn with_files() -> (Server, TempDir) {
    with_files_and(&[])
}

/// [`with_files`], with `flags` besides.
fn with_files_and(flags: &[&str]) -> (Server, TempDir) {
    let dir = TempDir::new("framing");
    dir.write("a.txt", b"alpha\n");
    dir.write("b.txt", b"bravo bravo\n");
    let root = dir.path().to_str().unwrap().to_string();
    let mut args = vec![
        "--static-path-route",
        "/static",
        "--static-path-mount",
        &root,
    ];
    args.extend_from_slice(flags);
    let server = Server::start(&args);
    (server, dir)
}

#[test]
fn http11_keeps_the_connection_alive_by_default() {
    let server = Server::start(&[]);
    let mut c = server.connect();
    for i in 0..3 {
        let r = c.request("GET", HEALTH, &[]);
        assert_eq!(r.status, 200, "request {i}");
        assert_eq!(r.version, "HTTP/1.1");
        assert!(!r.connection_has("close"), "request {i}: {:?}", r.headers);
        assert!(!r.until_close, "a kept-alive answer must carry its length");
    }
}

#[test]
fn http11_connection_close_is_honoured() {
    let server = Server::start(&[]);
    let mut c = server.connect();
    let r = c.request("GET", HEALTH, &[("Connection", "close")]);
    assert_eq!(r.status, 200);
    assert!(
        r.connection_has("close"),
        "the answer says it closes: {:?}",
        r.headers
    );
    c.assert_closed(TIMEOUT);
}

#[test]
fn http10_closes_unless_asked_to_keep_alive() {
    let server = Server::start(&[]);

    let mut c = server.connect();
    c.send(format!("GET {HEALTH} HTTP/1.0\r\n\r\n").as_bytes());
    let r = c.read_response();
    assert_eq!(r.status, 200);
    c.assert_closed(TIMEOUT);

    let mut c = server.connect();
    for i in 0..2 {
        c.send(format!("GET {HEALTH} HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").as_bytes());
        let r = c.read_response();
        assert_eq!(r.status, 200, "request {i}");
        assert!(
            r.connection_has("keep-alive"),
            "a 1.0 keep-alive is confirmed: {:?}",
            r.headers
        );
        assert!(!r.until_close);
    }
    // It stays open: a third request on it is answered too.
    c.send(format!("GET {HEALTH} HTTP/1.0\r\n\r\n").as_bytes());
    assert_eq!(c.read_response().status, 200);
    c.assert_closed(TIMEOUT);
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let (server, _dir) = with_files();
    let mut c = server.connect();
    // Sent in one write: the server must parse the next only after answering the last.
    let mut batch = Vec::new();
    let plan: Vec<(&str, &str, u16, &[u8])> = (0..50)
        .flat_map(|_| {
            [
                ("GET", "/static/a.txt", 200, &b"alpha\n"[..]),
                ("GET", "/nowhere", 404, &b""[..]),
                ("HEAD", "/static/b.txt", 200, &b""[..]),
                ("GET", "/static/b.txt", 200, &b"bravo bravo\n"[..]),
            ]
        })
        .collect();
    for (method, path, _, _) in &plan {
        batch.extend(request_bytes(method, path, &[]));
    }
    c.send(&batch);
    for (i, (method, path, status, body)) in plan.iter().enumerate() {
        let r = if *method == "HEAD" {
            c.read_head_response()
        } else {
            c.read_response()
        };
        assert_eq!(r.status, *status, "answer {i} ({method} {path})");
        if *status == 200 {
            assert_eq!(r.body, *body, "answer {i} ({method} {path})");
        }
    }
    c.assert_quiet(Duration::from_millis(200));
}

#[test]
fn head_has_the_get_headers_and_no_body() {
    let (server, _dir) = with_files();
    let mut c = server.connect();
    // HEAD then GET in one write: a HEAD answer that carried a body would be
    // read as the start of the GET's answer.
    let mut both = request_bytes("HEAD", "/static/b.txt", &[]);
    both.extend(request_bytes("GET", "/static/a.txt", &[]));
    c.send(&both);
    let head = c.read_head_response();
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("content-length"),
        Some("12"),
        "HEAD announces the GET's length"
    );
    let get = c.read_response();
    assert_eq!(get.status, 200);
    assert_eq!(get.body, b"alpha\n");
}

/// After a request with a body, a following request on the same connection is
/// answered normally: the body was consumed exactly, no more, no less.
fn assert_body_consumed(server: &Server, request: &[u8]) {
    let mut c = server.connect();
    let mut bytes = request.to_vec();
    bytes.extend(request_bytes("GET", HEALTH, &[]));
    c.send(&bytes);
    let first = c.read_response();
    assert!(
        [200, 404, 405].contains(&first.status),
        "a well-framed request with a body gets an ordinary answer, not {}",
        first.status
    );
    assert!(!first.connection_has("close"), "{:?}", first.headers);
    let second = c.read_response();
    assert_eq!(second.status, 200, "the request after the body");
    // Nothing else: had the body been parsed as requests, they would be answered here.
    c.assert_quiet(Duration::from_millis(300));
}

#[test]
fn content_length_bodies_are_consumed() {
    let server = Server::start(&[]);
    let body = format!("GET {HEALTH} HTTP/1.1\r\nHost: x\r\n\r\n");
    let req = format!(
        "POST /nowhere HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    assert_body_consumed(&server, req.as_bytes());
}

#[test]
fn chunked_bodies_with_extensions_and_trailers_are_consumed() {
    let server = Server::start(&[]);
    // The chunk data looks like a request: an unframed reader would answer it.
    let inner = format!("GET {HEALTH} HTTP/1.1\r\nHost: x\r\n\r\n");
    let req = format!(
        "POST /nowhere HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n\
         {:x};name=value\r\n{inner}\r\n\
         5;quoted=\"a;b\";bare\r\nhello\r\n\
         0\r\nX-Trailer: yes\r\nX-Other: 1\r\n\r\n",
        inner.len()
    );
    assert_body_consumed(&server, req.as_bytes());
}

#[test]
fn chunked_bodies_arriving_in_pieces_are_consumed() {
    let server = Server::start(&[]);
    let mut c = server.connect();
    let req = b"POST /nowhere HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n\
                a\r\n0123456789\r\n3;x=y\r\nabc\r\n0\r\nX-T: 1\r\n\r\n";
    // Byte by byte in a few writes, splitting every framing element somewhere.
    for piece in req.chunks(7) {
        c.send(piece);
        std::thread::sleep(Duration::from_millis(5));
    }
    let r = c.read_response();
    assert!([200, 404, 405].contains(&r.status), "got {}", r.status);
    assert_eq!(c.request("GET", HEALTH, &[]).status, 200);
}

#[test]
fn expect_100_continue_gets_an_interim_answer_or_a_final_one() {
    let server = Server::start(&[]);
    let mut c = server.connect();
    c.send(b"POST /nowhere HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
    // The client waits for the server's word before sending the body.
    let first = c.read_response();
    if first.status == 100 {
        assert!(first.body.is_empty());
        c.send(b"hello");
        let fin = c.read_response();
        assert!(
            [200, 404, 405].contains(&fin.status),
            "final answer {}",
            fin.status
        );
    } else {
        // RFC 9110 §10.1.1: a final answer before the body is allowed; the
        // connection then either closes or still reads the announced 5 bytes.
        assert!([404, 405].contains(&first.status), "got {}", first.status);
        if first.connection_has("close") {
            c.assert_closed(TIMEOUT);
            return;
        }
        c.send(b"hello");
    }
    // The body was taken as a body: the next request is answered normally.
    assert_eq!(c.request("GET", HEALTH, &[]).status, 200);
    c.assert_quiet(Duration::from_millis(200));
}

#[test]
fn no_interim_answer_without_expect() {
    let server = Server::start(&[]);
    let mut c = server.connect();
    c.send(b"POST /nowhere HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello");
    let r = c.read_response();
    assert_ne!(
        r.status, 100,
        "100 Continue only answers Expect: 100-continue"
    );
}

#[test]
fn unrouted_requests_get_404() {
    let server = Server::start(&[]);
    let r = server.get("/no/such/route");
    assert_eq!(r.status, 404);
    assert!(!r.until_close, "a 404 carries its length");
}

#[test]
fn answers_carry_date_and_server() {
    let server = Server::start(&[]);
    for r in [server.get(HEALTH), server.get("/nowhere")] {
        let server_header = r.header("server").expect("a Server header");
        assert!(
            server_header.starts_with("m0serve"),
            "Server: {server_header}"
        );
        let date = r.header("date").expect("a Date header");
        let when = httpdate::parse_http_date(date).unwrap_or_else(|e| panic!("Date {date:?}: {e}"));
        let now = SystemTime::now();
        let skew = now.duration_since(when).unwrap_or_else(|e| e.duration());
        assert!(
            skew < Duration::from_secs(5),
            "Date {date:?} is {skew:?} from now"
        );
    }
}

#[test]
fn no_server_header_drops_ours_and_keeps_the_date() {
    let server = Server::start(&["--no-server-header"]);
    for r in [server.get(HEALTH), server.get("/nowhere")] {
        assert_eq!(r.status / 100, if r.status == 200 { 2 } else { 4 });
        assert_eq!(r.header("server"), None, "{:?}", r.headers);
        assert!(r.header("date").is_some(), "RFC 9110 §6.6.1: Date stays");
    }
}

#[test]
fn header_fields_go_on_every_answer_that_has_none_of_their_name() {
    let (server, _dir) = with_files_and(&[
        "--header",
        "X-Frame-Options: DENY",
        "--header",
        "Cache-Control:no-store",
        "--header",
        "Server: edge",
    ]);
    let bad = {
        let mut c = server.connect();
        c.send(b"GET /a b HTTP/1.1\r\nHost: t\r\n\r\n");
        c.read_response()
    };
    assert_eq!(bad.status, 400, "the server's own error answer");
    for r in [server.get(HEALTH), server.get("/nowhere"), bad] {
        assert_eq!(r.header("x-frame-options"), Some("DENY"), "{:?}", r.headers);
        assert_eq!(r.header("cache-control"), Some("no-store"));
        assert_eq!(r.header("server"), Some("edge"), "stands in for ours");
        assert!(r.header("date").is_some());
    }
    // A static file sets its own Cache-Control: the default gives way.
    let r = server.get("/static/a.txt");
    assert_eq!(r.status, 200);
    let cache: Vec<_> = r
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("cache-control"))
        .collect();
    assert_eq!(cache.len(), 1, "{:?}", r.headers);
    assert!(cache[0].1.starts_with("max-age="), "{cache:?}");
    assert_eq!(r.header("x-frame-options"), Some("DENY"));
}
