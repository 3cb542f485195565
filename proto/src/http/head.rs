//! Request heads: found with a resumable line scan, the request line parsed
//! by [`super::request_line`] and its target by [`super::target`], the
//! fields by httparse, then held to RFC 9112's framing rules (the
//! anti-smuggling part).
//!
//! Choices where the RFCs leave room (each refused with 400 unless noted):
//! - a bare LF anywhere in a head (RFC 9112 §2.2 allows accepting it; a peer
//!   that reads it differently could smuggle a header past us);
//! - Content-Length that is not plain digits (a list like `5, 5` included),
//!   or repeated on several lines, even with one value: RFC 9110 §8.6 lets a
//!   recipient either merge identical values or refuse, and a proxy ahead
//!   that reads `0` and `00`, or the first line or the last, differently
//!   from us could frame another body (llhttp and nginx refuse too);
//! - Transfer-Encoding with Content-Length, in an HTTP/1.0 request, empty, or
//!   with chunked anywhere but last; any other coding (`gzip`) is 501;
//! - an HTTP/1.1 request with no Host, any request with more than one, or a
//!   Host that is not `uri-host [":" port]` with a host (RFC 9112 §3.2; an
//!   empty one names no http URI, RFC 9110 §4.2.1);
//! - Content-Type on more than one line: it is a single media type (RFC 9110
//!   §8.3), which a sender must not repeat (§5.3), and taking the first line
//!   where a proxy or filter ahead takes the last would give the app a body
//!   of another type than the one that was checked (gunicorn refuses too);
//! - more than [`MAX_HEADERS`] header lines is 431, like an oversized head.
//!   obs-fold, a space before the colon, and CR or NUL in a value are refused
//!   by httparse itself.

use super::request_line::{self, RequestLine};
use super::response::parse_length;
use super::target::{self, Target};
use super::{Fields, HttpError};

/// The most header lines a request may have: heads are parsed into a stack
/// array of this size (431 beyond). 100, as gunicorn's and Granian's
/// defaults: a request one of them serves is not refused here for its count.
pub const MAX_HEADERS: usize = 100;

/// The protocol version of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
    /// A request on an HTTP/2 stream ([`crate::h2`]).
    Http2,
}

/// How the request's body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    /// No body (no Content-Length, no Transfer-Encoding, or Content-Length: 0).
    Empty,
    Length(u64),
    Chunked,
}

/// A parsed, validated request head.
#[derive(Clone, Debug)]
pub struct RequestHead {
    pub method: String,
    /// The request-target as sent: origin-form (path and query) or `*`; an
    /// absolute-form target is given as its origin-form, its authority as `Host`.
    pub target: String,
    pub version: Version,
    /// Header names as sent, values as bytes, in order (duplicates kept).
    pub headers: Fields,
    pub body: BodyKind,
    /// The connection may stay open after this exchange, as far as the request says.
    pub keep_alive: bool,
    /// `Expect: 100-continue` was sent.
    pub expect_continue: bool,
}

impl RequestHead {
    /// The path part of the target (before `?`), still percent-encoded.
    pub fn path(&self) -> &str {
        self.target.split_once('?').map_or(&self.target, |(p, _)| p)
    }

    /// The query part of the target (after `?`), raw; empty if none.
    pub fn query(&self) -> &str {
        self.target.split_once('?').map_or("", |(_, q)| q)
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers.get(name)
    }

    pub fn is_head(&self) -> bool {
        self.method == "HEAD"
    }
}

/// Finds the end of a request head in a growing buffer, resuming where the
/// last call stopped so a head that trickles in is scanned once, not once per read.
#[derive(Debug, Default)]
pub(crate) struct HeadScanner {
    /// Bytes of the buffer already scanned (no LF of the blank line in them).
    scanned: usize,
    /// The request line of a head still arriving was found and is valid.
    line_checked: bool,
}

impl HeadScanner {
    /// Scans `buf`, which starts at the head's first byte, for the blank line
    /// ending it; returns the head's length once it has arrived. A bare LF is
    /// refused (400), and a head longer than `max_head`, complete or not, is 431.
    pub fn scan(&mut self, buf: &[u8], max_head: usize) -> Result<Option<usize>, HttpError> {
        let mut from = self.scanned;
        while let Some(off) = buf[from..].iter().position(|&b| b == b'\n') {
            let lf = from + off;
            if lf == 0 || buf[lf - 1] != b'\r' {
                self.check_line(buf, max_head)?;
                return Err(HttpError::BadRequest("bare LF in request head"));
            }
            if lf >= 3 && buf[lf - 3..lf] == *b"\r\n\r" {
                if lf + 1 > max_head {
                    self.check_line(buf, max_head)?;
                    return Err(too_large(buf, max_head));
                }
                *self = HeadScanner::default();
                return Ok(Some(lf + 1));
            }
            from = lf + 1;
        }
        self.scanned = buf.len();
        self.check_line(buf, max_head)?;
        if buf.len() > max_head {
            return Err(too_large(buf, max_head));
        }
        Ok(None)
    }

    /// Holds the request line of a head still arriving to the rules as soon
    /// as it is complete, so a bad one is answered at once rather than when
    /// the head ends (a client that sends it and then waits, or half-closes,
    /// would get no answer at all). Once per head, and off the common path:
    /// a head that arrives whole is parsed once, by [`parse`].
    ///
    /// An error found past the line (a bare LF, a head over `max_head`) is
    /// reported only after the line has been looked at, as it would have been
    /// had the head arrived in pieces: the answer does not hang on how the
    /// bytes were split. A line that does not end within `max_head`, or
    /// ends in a bare LF, is left to those errors.
    fn check_line(&mut self, buf: &[u8], max_head: usize) -> Result<(), HttpError> {
        if self.line_checked {
            return Ok(());
        }
        let within = &buf[..buf.len().min(max_head)];
        let Some(lf) = within.iter().position(|&b| b == b'\n') else {
            return Ok(());
        };
        if lf == 0 || buf[lf - 1] != b'\r' {
            return Ok(());
        }
        parse_line(&buf[..lf - 1])?;
        self.line_checked = true;
        Ok(())
    }

    /// `n` bytes were removed from the front of the scanned buffer.
    pub fn consumed(&mut self, n: usize) {
        self.scanned = self.scanned.saturating_sub(n);
    }
}

/// A head over `max_head`, judged on its first `max_head + 1` bytes alone,
/// which every caller has, so that the answer does not hang on how far past
/// the limit a read happened to reach (a method of 100 KB got 431 from one
/// backend and 414 from the other):
/// - the request line ended within them: the fields are too large, 431;
/// - else the line alone is over the limit (RFC 9112 §3): in its target,
///   414 (MUST); in its method (no SP yet), 501, "a method longer than any
///   that it implements" (SHOULD); bytes that make no method, 400.
fn too_large(buf: &[u8], max_head: usize) -> HttpError {
    let seen = &buf[..buf.len().min(max_head + 1)];
    if seen.contains(&b'\n') {
        return HttpError::HeadTooLarge;
    }
    let method_end = seen.iter().position(|&b| b == b' ').unwrap_or(seen.len());
    let method = &seen[..method_end];
    if method.is_empty() || !method.iter().all(|&b| super::is_tchar(b)) {
        HttpError::BadRequest("malformed request line")
    } else if method_end == seen.len() {
        HttpError::NotImplemented("request method too long")
    } else {
        HttpError::UriTooLong
    }
}

/// The items of a comma-separated header list, whitespace trimmed, empty ones
/// skipped (RFC 9110 §5.6.1).
pub fn list_items(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|item| !item.is_empty())
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// A request line (without its CRLF) and its target's form, checked against
/// the method: what a head is held to, whole or still arriving.
fn parse_line(line: &[u8]) -> Result<(RequestLine<'_>, Target<'_>), HttpError> {
    let line = request_line::parse(line)?;
    let form = target::classify(line.method, line.target)?;
    Ok((line, form))
}

/// Parses and validates one complete head (`head` ends with its blank line).
pub(crate) fn parse(head: &[u8]) -> Result<RequestHead, HttpError> {
    // The scanner found the blank line and refused bare LFs: a CRLF ends the line.
    let line_end = head
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or(HttpError::BadRequest("malformed request head"))?;
    let (line, form) = parse_line(&head[..line_end])?;
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    match httparse::parse_headers(&head[line_end + 2..], &mut fields) {
        Ok(httparse::Status::Complete((_, fields))) => validate(&line, form, fields),
        Ok(httparse::Status::Partial) => Err(HttpError::BadRequest("malformed request head")),
        Err(httparse::Error::TooManyHeaders) => Err(HttpError::HeadTooLarge),
        Err(_) => Err(HttpError::BadRequest("malformed header field")),
    }
}

/// Applies the framing and connection rules to a parsed head and copies it out.
fn validate(
    line: &RequestLine<'_>,
    form: Target<'_>,
    fields: &[httparse::Header<'_>],
) -> Result<RequestHead, HttpError> {
    let version = line.version;
    let absolute = match form {
        Target::Absolute { authority, .. } => Some(authority),
        _ => None,
    };
    let bytes = fields
        .iter()
        .map(|f| f.name.len() + f.value.len())
        .sum::<usize>()
        + absolute.map_or(0, |a| "Host".len() + a.len());
    let mut headers = Fields::with_capacity(fields.len() + 1, bytes);
    let mut length: Option<u64> = None;
    let (mut hosts, mut content_types) = (0, 0);
    let (mut close, mut keep_alive) = (false, false);
    let (mut expect_continue, mut expect_other) = (false, false);
    // Transfer-Encoding: seen at all, any coding, last coding chunked, chunked before the last.
    let (mut te, mut codings, mut last_chunked, mut chunked_early, mut unknown) =
        (false, 0, false, false, false);
    for field in fields {
        let (name, value) = (field.name, field.value);
        if name.eq_ignore_ascii_case("content-length") {
            let n = parse_length(value).ok_or(HttpError::BadRequest("invalid Content-Length"))?;
            if length.is_some() {
                return Err(HttpError::BadRequest("repeated Content-Length"));
            }
            length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            te = true;
            for coding in list_items(value) {
                chunked_early |= last_chunked;
                last_chunked = coding.eq_ignore_ascii_case(b"chunked");
                unknown |= !last_chunked;
                codings += 1;
            }
        } else if name.eq_ignore_ascii_case("connection") {
            for option in list_items(value) {
                close |= option.eq_ignore_ascii_case(b"close");
                keep_alive |= option.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case("content-type") {
            content_types += 1;
            if content_types > 1 {
                return Err(HttpError::BadRequest("repeated Content-Type"));
            }
        } else if name.eq_ignore_ascii_case("expect") {
            for member in list_items(value) {
                let continues = member.eq_ignore_ascii_case(b"100-continue");
                expect_continue |= continues;
                expect_other |= !continues;
            }
        } else if name.eq_ignore_ascii_case("host") {
            hosts += 1;
            if !std::str::from_utf8(value).is_ok_and(target::is_http_host) {
                return Err(HttpError::BadRequest("invalid Host header"));
            }
            // The target's authority is the host, whatever Host said (§3.2.2).
            if let Some(authority) = absolute {
                headers.push(name, authority.as_bytes());
                continue;
            }
        }
        headers.push(name, value);
    }

    // More than one Host is refused in any version, none only in 1.1 (§3.2).
    if hosts > 1 {
        return Err(HttpError::BadRequest("duplicate Host header"));
    }
    if version == Version::Http11 && hosts == 0 {
        return Err(HttpError::BadRequest("missing Host header"));
    }
    let target = match form {
        Target::Origin(target) => target,
        Target::Asterisk => "*",
        Target::Authority => unreachable!("classify refuses CONNECT"),
        Target::Absolute { authority, origin } => {
            // Its authority replaced the Host field above, or is the Host.
            if hosts == 0 {
                headers.push("Host", authority.as_bytes());
            }
            origin
        }
    };
    let body = if te {
        if length.is_some() {
            return Err(HttpError::BadRequest(
                "both Transfer-Encoding and Content-Length",
            ));
        }
        if version == Version::Http10 {
            return Err(HttpError::BadRequest(
                "Transfer-Encoding in an HTTP/1.0 request",
            ));
        }
        if codings == 0 {
            return Err(HttpError::BadRequest("empty Transfer-Encoding"));
        }
        if chunked_early {
            return Err(HttpError::BadRequest(
                "chunked is not the final transfer coding",
            ));
        }
        if unknown {
            return Err(HttpError::NotImplemented("unsupported transfer coding"));
        }
        BodyKind::Chunked
    } else {
        match length {
            None | Some(0) => BodyKind::Empty,
            Some(n) => BodyKind::Length(n),
        }
    };
    // RFC 9110 §10.1.1 lets a server answer an expectation it does not
    // know with 417 or ignore it; ignored, a client waiting on it would
    // take the answer as met. The strict choice, made last: a head that
    // is malformed as well gets the answer its malformation calls for.
    if expect_other {
        return Err(HttpError::ExpectationFailed);
    }
    Ok(RequestHead {
        method: line.method.to_owned(),
        target: target.to_owned(),
        version,
        headers,
        body,
        keep_alive: match version {
            Version::Http11 | Version::Http2 => !close,
            Version::Http10 => keep_alive && !close,
        },
        // A 1.0 client cannot understand a 100 (RFC 9110 §10.1.1).
        expect_continue: expect_continue && version == Version::Http11,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(head: &str) -> Result<RequestHead, HttpError> {
        parse(head.as_bytes())
    }

    fn status(head: &str) -> u16 {
        match parse_str(head) {
            Ok(h) => panic!("accepted {head:?}: {h:?}"),
            Err(e) => e.status(),
        }
    }

    #[test]
    fn parses_a_request() {
        let h =
            parse_str("GET /a/b?x=1&y HTTP/1.1\r\nHost: example\r\nX-Two: 1\r\nx-two: 2\r\n\r\n")
                .unwrap();
        assert_eq!(h.method, "GET");
        assert_eq!(h.target, "/a/b?x=1&y");
        assert_eq!((h.path(), h.query()), ("/a/b", "x=1&y"));
        assert_eq!(h.version, Version::Http11);
        assert_eq!(h.headers.len(), 3);
        assert_eq!(h.header("X-TWO"), Some(&b"1"[..]));
        assert_eq!(h.header("missing"), None);
        assert_eq!(h.body, BodyKind::Empty);
        assert!(h.keep_alive && !h.expect_continue && !h.is_head());
    }

    #[test]
    fn body_kinds() {
        let kind = |fields: &str| {
            parse_str(&format!("POST / HTTP/1.1\r\nHost: h\r\n{fields}\r\n"))
                .unwrap()
                .body
        };
        assert_eq!(kind("Content-Length: 0\r\n"), BodyKind::Empty);
        assert_eq!(kind("Content-Length: 12\r\n"), BodyKind::Length(12));
        assert_eq!(kind("Transfer-Encoding: chunked\r\n"), BodyKind::Chunked);
        assert_eq!(kind("Transfer-Encoding: CHUNKED\r\n"), BodyKind::Chunked);
        assert_eq!(kind("Transfer-Encoding: , chunked\r\n"), BodyKind::Chunked);
    }

    #[test]
    fn keep_alive_matrix() {
        let cases = [
            ("1.1", "", true),
            ("1.1", "Connection: close\r\n", false),
            ("1.1", "Connection: keep-alive\r\n", true),
            ("1.1", "Connection: Upgrade, CLOSE\r\n", false),
            ("1.0", "", false),
            ("1.0", "Connection: keep-alive\r\n", true),
            ("1.0", "Connection: Keep-Alive\r\n", true),
            ("1.0", "Connection: close\r\n", false),
            ("1.0", "Connection: keep-alive, close\r\n", false),
        ];
        for (version, fields, keep) in cases {
            let h = parse_str(&format!("GET / HTTP/{version}\r\nHost: h\r\n{fields}\r\n")).unwrap();
            assert_eq!(h.keep_alive, keep, "HTTP/{version} {fields:?}");
        }
    }

    #[test]
    fn expect_continue_only_for_http11() {
        assert!(
            parse_str("PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\n\r\n")
                .unwrap()
                .expect_continue
        );
        assert!(
            !parse_str("PUT / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n")
                .unwrap()
                .expect_continue
        );
        assert!(
            parse_str("PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue, \r\n\r\n")
                .unwrap()
                .expect_continue,
            "an empty list member is no expectation"
        );
    }

    #[test]
    fn an_expectation_other_than_100_continue_is_417() {
        for expect in ["other", "100-continue, other", "100-continue;x=1"] {
            for version in ["1.1", "1.0"] {
                let head = format!("PUT / HTTP/{version}\r\nHost: h\r\nExpect: {expect}\r\n\r\n");
                assert_eq!(
                    parse_str(&head).unwrap_err().status(),
                    417,
                    "HTTP/{version} Expect: {expect}"
                );
            }
        }
        assert!(parse_str("PUT / HTTP/1.1\r\nHost: h\r\nExpect:\r\n\r\n").is_ok());
        // Malformed as well: the malformation's answer (§3.2 says 400 MUST).
        let both = "PUT / HTTP/1.1\r\nHost: a\r\nHost: b\r\nExpect: other\r\n\r\n";
        assert_eq!(parse_str(both).unwrap_err().status(), 400);
    }

    #[test]
    fn malformed_heads_are_400() {
        for head in [
            "GET\r\n\r\n",
            "GET  / HTTP/1.1\r\nHost: h\r\n\r\n",
            "GET / HTTP/1.1 \r\nHost: h\r\n\r\n",
            "G(T / HTTP/1.1\r\nHost: h\r\n\r\n",
            "GET / http/1.1\r\nHost: h\r\n\r\n",
            "GET / HTTP/1.10\r\nHost: h\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nX : space before colon\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n folded\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n\tfolded\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nX: \x01\r\n\r\n",
        ] {
            assert_eq!(status(head), 400, "{head:?}");
        }
    }

    #[test]
    fn framing_conflicts_are_400() {
        for fields in [
            "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
            "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
            "Content-Length: 5\r\nContent-Length: 6\r\n",
            "Content-Length: 7\r\ncontent-length: 7\r\n",
            "Content-Length: 0\r\nContent-Length: 00\r\n",
            "Content-Length: 5, 5\r\n",
            "Content-Length: -1\r\n",
            "Content-Length: 0x10\r\n",
            "Content-Length: 99999999999999999999\r\n",
            "Content-Length:\r\n",
            "Transfer-Encoding: chunked, gzip\r\n",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n",
            "Transfer-Encoding: chunked, chunked\r\n",
            "Transfer-Encoding: \r\n",
            "Host: other\r\n",
        ] {
            let head = format!("POST / HTTP/1.1\r\nHost: h\r\n{fields}\r\n");
            assert_eq!(status(&head), 400, "{fields:?}");
        }
        assert_eq!(
            status("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
            400
        );
        assert_eq!(status("GET / HTTP/1.1\r\n\r\n"), 400, "missing Host");
        for empty in ["Host:", "Host: ", "Host: :80", "host:\t"] {
            let head = format!("GET / HTTP/1.1\r\n{empty}\r\n\r\n");
            assert_eq!(status(&head), 400, "{empty:?}");
            let head = format!("GET / HTTP/1.0\r\n{empty}\r\n\r\n");
            assert_eq!(status(&head), 400, "1.0 {empty:?}");
        }
        assert!(
            parse_str("GET / HTTP/1.0\r\n\r\n").is_ok(),
            "1.0 needs no Host"
        );
    }

    #[test]
    fn content_type_on_two_lines_is_400() {
        for fields in [
            "Content-Type: application/json\r\nContent-Type: text/html\r\n",
            "Content-Type: text/plain\r\ncontent-type: text/plain\r\n",
        ] {
            let head = format!("POST / HTTP/1.1\r\nHost: h\r\n{fields}\r\n");
            assert_eq!(status(&head), 400, "{fields:?}");
        }
        let one = parse_str("POST / HTTP/1.1\r\nHost: h\r\nContent-Type: a/b; q=\"x,y\"\r\n\r\n");
        assert_eq!(
            one.unwrap().header("content-type"),
            Some(&b"a/b; q=\"x,y\""[..])
        );
    }

    #[test]
    fn unknown_transfer_codings_are_501() {
        for coding in ["gzip", "gzip, chunked", "deflate,chunked"] {
            let head = format!("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: {coding}\r\n\r\n");
            assert_eq!(status(&head), 501, "{coding}");
        }
    }

    #[test]
    fn other_major_versions_are_505() {
        assert_eq!(status("GET / HTTP/2.0\r\nHost: h\r\n\r\n"), 505);
        assert_eq!(status("PRI * HTTP/2.0\r\n\r\n"), 505);
        assert_eq!(status("GET / HTTP/3\r\n\r\n"), 505);
        assert_eq!(status("GET / HTTP/0.9\r\n\r\n"), 505);
    }

    #[test]
    fn unknown_minor_version_is_served_as_http11() {
        let h = parse_str("GET / HTTP/1.2\r\nHost: h\r\n\r\n").unwrap();
        assert_eq!(h.version, Version::Http11);
        assert!(h.keep_alive);
    }

    #[test]
    fn a_bad_request_line_ending_in_a_known_version_is_400() {
        // httparse reports these as version errors (the second space comes early).
        assert_eq!(status("GET /a / HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
        assert_eq!(status("GET /a / HTTP/1.0\r\n\r\n"), 400);
        assert_eq!(status("GET /a / HTTP/1.2\r\nHost: h\r\n\r\n"), 400);
    }

    #[test]
    fn too_many_headers_is_431() {
        let ok: String = (0..MAX_HEADERS - 1)
            .map(|i| format!("X-{i}: v\r\n"))
            .collect();
        assert!(parse_str(&format!("GET / HTTP/1.1\r\nHost: h\r\n{ok}\r\n")).is_ok());
        let over: String = (0..MAX_HEADERS).map(|i| format!("X-{i}: v\r\n")).collect();
        assert_eq!(
            status(&format!("GET / HTTP/1.1\r\nHost: h\r\n{over}\r\n")),
            431
        );
    }

    #[test]
    fn scanner_finds_the_end_across_reads() {
        let head = b"GET / HTTP/1.1\r\nHost: h\r\n\r\nNEXT";
        let mut scanner = HeadScanner::default();
        for end in 1..head.len() - 4 {
            assert_eq!(scanner.scan(&head[..end], 1024), Ok(None), "at {end}");
            // Resumes where it stopped: each byte is looked at once.
            assert_eq!(scanner.scanned, end);
        }
        assert_eq!(scanner.scan(head, 1024), Ok(Some(head.len() - 4)));
        // Reset after a find: the next head is scanned from its start.
        assert_eq!(scanner.scanned, 0);
    }

    #[test]
    fn a_bad_request_line_is_refused_before_its_head_is_complete() {
        for (partial, status) in [
            (&b"GET / HTTQ/1.1\r\n"[..], 400),
            (
                b"PROXY TCP4 192.168.0.1 192.168.0.11 65iii 100000\r\nHost",
                400,
            ),
            (b"GET /a b HTTP/1.1\r\n", 400),
            (b"GET / HTTP/2.0\r\nHost: h\r\n", 505),
            (b"GET example.com HTTP/1.1\r\n", 400),
        ] {
            let mut scanner = HeadScanner::default();
            let got = scanner.scan(partial, 1024).map_err(|e| e.status());
            assert_eq!(got, Err(status), "{:?}", String::from_utf8_lossy(partial));
        }
        // A good line with the rest to come: nothing yet, and the line is
        // looked at once, not at every read.
        let mut scanner = HeadScanner::default();
        assert_eq!(scanner.scan(b"GET / HTTP/1.1\r\nHo", 1024), Ok(None));
        assert!(scanner.line_checked);
        assert_eq!(
            scanner.scan(b"GET / HTTP/1.1\r\nHost: h\r\n", 1024),
            Ok(None)
        );
        assert_eq!(
            scanner.scan(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n", 1024),
            Ok(Some(27))
        );
        assert!(
            !scanner.line_checked,
            "the next head's line is checked anew"
        );
    }

    #[test]
    fn scanner_refuses_bare_lf() {
        for head in [
            &b"GET / HTTP/1.1\nHost: h\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost: h\n\r\n",
            b"\n",
        ] {
            assert_eq!(
                HeadScanner::default().scan(head, 1024),
                Err(HttpError::BadRequest("bare LF in request head")),
                "{:?}",
                String::from_utf8_lossy(head)
            );
        }
    }

    #[test]
    fn scanner_enforces_the_head_limit() {
        let head = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n";
        assert_eq!(
            HeadScanner::default().scan(head, head.len()),
            Ok(Some(head.len()))
        );
        assert_eq!(
            HeadScanner::default().scan(head, head.len() - 1),
            Err(HttpError::HeadTooLarge)
        );
        // Incomplete and already past the limit: refused without waiting for more.
        let mut partial = b"GET / HTTP/1.1\r\nX: ".to_vec();
        partial.resize(31, b'a');
        assert_eq!(
            HeadScanner::default().scan(&partial, 30),
            Err(HttpError::HeadTooLarge)
        );
        assert_eq!(HeadScanner::default().scan(&partial[..30], 30), Ok(None));
    }

    #[test]
    fn a_request_line_alone_over_the_limit_is_414_or_501() {
        let mut line = b"GET /".to_vec();
        line.resize(100, b'a');
        // Incomplete: the line has not even ended.
        assert_eq!(
            HeadScanner::default().scan(&line, 64),
            Err(HttpError::UriTooLong)
        );
        // Complete, the line over the limit by itself.
        line.extend_from_slice(b" HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(
            HeadScanner::default().scan(&line, 64),
            Err(HttpError::UriTooLong)
        );
        // The line within the limit, the fields past it: 431.
        let mut head = b"GET /a HTTP/1.1\r\nX: ".to_vec();
        head.resize(100, b'a');
        assert_eq!(
            HeadScanner::default().scan(&head, 64),
            Err(HttpError::HeadTooLarge)
        );
        // A method over the limit by itself: 501 (RFC 9112 §3), however
        // far past the limit the bytes reach and whether the line ends.
        for len in [65, 66, 100, 1000] {
            let mut method = vec![b'A'; len];
            assert_eq!(
                HeadScanner::default().scan(&method, 64),
                Err(HttpError::NotImplemented("request method too long")),
                "{len}"
            );
            method.extend_from_slice(b" / HTTP/1.1\r\nHost: h\r\n\r\n");
            assert_eq!(
                HeadScanner::default().scan(&method, 64),
                Err(HttpError::NotImplemented("request method too long")),
                "{len} complete"
            );
        }
        // The first 65 bytes decide, not what follows them.
        let mut at_the_edge = vec![b'A'; 65];
        at_the_edge.extend_from_slice(b" /");
        assert_eq!(
            HeadScanner::default()
                .scan(&at_the_edge, 64)
                .map_err(|e| e.status()),
            Err(501)
        );
        // Bytes that are no method: 400.
        let mut junk = vec![b'A'; 10];
        junk.resize(100, b'(');
        assert_eq!(
            HeadScanner::default()
                .scan(&junk, 64)
                .map_err(|e| e.status()),
            Err(400)
        );
    }

    #[test]
    fn list_items_trim_and_skip_empty() {
        let items: Vec<&[u8]> = list_items(b" a ,\tb,, c\t").collect();
        assert_eq!(items, [&b"a"[..], b"b", b"c"]);
        assert_eq!(list_items(b" , ").count(), 0);
    }
}
