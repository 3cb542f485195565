//! Response heads and body framing.
//!
//! The head is written straight into the caller's output buffer: the app's
//! headers (minus the ones the protocol owns), then framing, `Connection`,
//! `Date` and `Server`. The body is framed by a `BodyWriter`.

use super::chunked::{encode_chunk, LAST_CHUNK};
use super::date;
use super::defaults::Defaults;
use super::head::Version;
use super::is_tchar;

/// How a response body is framed on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body is sent (HEAD, 1xx, 204, 304).
    NoBody,
    Length(u64),
    Chunked,
    /// Delimited by closing the connection (an HTTP/1.0 client, no length).
    Close,
}

/// The value of the `Server` header on every response (unless the app sets its own).
pub const SERVER: &[u8] = b"m0serve";

/// The reason phrase for `status`; empty for codes without a common one
/// (a reason phrase is optional on the wire).
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        103 => "Early Hints",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        205 => "Reset Content",
        206 => "Partial Content",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        422 => "Unprocessable Content",
        426 => "Upgrade Required",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        451 => "Unavailable For Legal Reasons",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// Appends `n` in `radix` (10 or 16, lowercase) without allocating.
pub(crate) fn push_int(out: &mut Vec<u8>, mut n: u64, radix: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b"0123456789abcdef"[(n % radix) as usize];
        n /= radix;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[i..]);
}

/// Whether an app-given field may go on the wire: a token name, and a value
/// without control characters but HTAB (RFC 9110 §5.5). CR, LF or NUL would
/// split or end the head (response splitting); the others make strict
/// clients refuse the whole response.
pub fn field_is_safe(name: &str, value: &[u8]) -> bool {
    !name.is_empty()
        && name.bytes().all(is_tchar)
        && !value.iter().any(|&b| (b < b' ' && b != b'\t') || b == 0x7F)
}

/// Whether a final response with `status` may carry a body (RFC 9110 §6.4.1:
/// not 204, not 304).
pub fn status_allows_body(status: u16) -> bool {
    status != 204 && status != 304
}

/// A strict Content-Length value: one or more digits, fitting in 64 bits.
pub fn parse_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit().then_some(())?;
        n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

pub(crate) fn push_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// What the request side decided for the response about to be written.
#[derive(Clone, Copy, Debug)]
pub struct RequestSide {
    pub version: Version,
    /// A HEAD request: no body, but the head as for GET.
    pub head_request: bool,
    /// The connection may stay open after this response (request, shutdown, EOF).
    pub keep_alive: bool,
}

/// What [`write_head`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    pub framing: Framing,
    /// The head did not say `Connection: close`: the connection may be reused.
    pub keep_alive: bool,
}

/// Room reserved beyond the app's fields: the status line, the fields the
/// server adds (`Date`, `Server`, framing) and the blank line take about 100
/// bytes, which leaves the rest for a small body.
const HEAD_ROOM: usize = 256;

/// Writes a response head for `status` and the app's `headers` to `out`.
///
/// The protocol owns framing and connection management, so of the app's
/// headers: `Content-Length` is parsed (an invalid one is dropped) and
/// rewritten by us, `Transfer-Encoding` is dropped, and `Connection` is
/// dropped (its `close` token honoured) except on a 101, where it belongs to the
/// upgrade. A field with a non-token name or a control character in its value is dropped
/// with a warning. `Date` is added unless the app set it, and the
/// [`Defaults`] (`Server`, the operator's `--header` fields) each unless the
/// app set a field of its name.
pub fn write_head(
    status: u16,
    headers: &[(&str, &[u8])],
    req: RequestSide,
    defaults: &Defaults,
    out: &mut Vec<u8>,
) -> Written {
    // A status must be three digits on the wire.
    let status = if (100..=999).contains(&status) {
        status
    } else {
        500
    };
    let informational = (100..200).contains(&status);
    let upgrade = status == 101;
    // One allocation for the head and a small body: grown from empty, a
    // hello response's buffer was allocated once and reallocated three times.
    let fields: usize = headers.iter().map(|(n, v)| n.len() + v.len() + 4).sum();
    out.reserve(fields + HEAD_ROOM);
    out.extend_from_slice(b"HTTP/1.1 ");
    push_int(out, u64::from(status), 10);
    out.push(b' ');
    out.extend_from_slice(reason_phrase(status).as_bytes());
    out.extend_from_slice(b"\r\n");

    let mut length = None;
    let (mut app_close, mut has_date) = (false, false);
    for &(name, value) in headers {
        if !field_is_safe(name, value) {
            tracing::warn!(
                name,
                "dropped a response header with an invalid name or value"
            );
            continue;
        }
        if name.eq_ignore_ascii_case("content-length") {
            length = length.or(parse_length(value));
            continue;
        }
        if name.eq_ignore_ascii_case("transfer-encoding") {
            continue;
        }
        if name.eq_ignore_ascii_case("connection") && !upgrade {
            app_close |= super::head::list_items(value).any(|t| t.eq_ignore_ascii_case(b"close"));
            continue;
        }
        has_date |= name.eq_ignore_ascii_case("date");
        push_field(out, name.as_bytes(), value);
    }

    let framing = if req.head_request || informational || !status_allows_body(status) {
        Framing::NoBody
    } else if let Some(n) = length {
        Framing::Length(n)
    } else if req.version == Version::Http11 {
        Framing::Chunked
    } else {
        Framing::Close
    };
    let keep_alive = req.keep_alive && !app_close && framing != Framing::Close;

    // 1xx and 204 must not carry a length; HEAD and 304 keep the app's.
    if let Some(n) = length.filter(|_| !informational && status != 204) {
        out.extend_from_slice(b"Content-Length: ");
        push_int(out, n, 10);
        out.extend_from_slice(b"\r\n");
    }
    if framing == Framing::Chunked {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
    }
    if !upgrade {
        if !keep_alive {
            out.extend_from_slice(b"Connection: close\r\n");
        } else if req.version == Version::Http10 {
            out.extend_from_slice(b"Connection: keep-alive\r\n");
        }
    }
    if !has_date {
        date::with_now(|d| push_field(out, b"Date", d));
    }
    defaults.write(headers, out);
    out.extend_from_slice(b"\r\n");
    Written {
        framing,
        keep_alive,
    }
}

/// Frames one response body according to its [`Framing`].
#[derive(Debug)]
pub(crate) struct BodyWriter {
    framing: Framing,
    /// For `Length`: bytes still owed.
    left: u64,
}

impl BodyWriter {
    pub fn new(framing: Framing) -> Self {
        let left = match framing {
            Framing::Length(n) => n,
            _ => 0,
        };
        BodyWriter { framing, left }
    }

    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// Appends `data`, framed. Bytes past a declared length, or any bytes of a
    /// bodiless response, are dropped: they would corrupt the next response.
    pub fn write(&mut self, data: &[u8], out: &mut Vec<u8>) {
        match self.framing {
            Framing::NoBody => {}
            Framing::Length(_) => {
                let n = self.left.min(data.len() as u64) as usize;
                out.extend_from_slice(&data[..n]);
                self.left -= n as u64;
            }
            Framing::Chunked => encode_chunk(data, out),
            Framing::Close => out.extend_from_slice(data),
        }
    }

    /// `len` body bytes were written by the caller itself (a file). Only
    /// `Length` framing counts them; other framings cannot be bypassed.
    pub fn sent(&mut self, len: u64) {
        if let Framing::Length(_) = self.framing {
            self.left = self.left.saturating_sub(len);
        }
    }

    /// `len` body bytes the caller writes itself (a file) right after `out`:
    /// frames them. Returns how many of them to write (a declared length caps
    /// them, a bodiless response takes none) and what to append after them
    /// (the end of a chunk).
    pub fn external(&mut self, len: u64, out: &mut Vec<u8>) -> (u64, &'static [u8]) {
        match self.framing {
            Framing::NoBody => (0, b""),
            Framing::Length(_) => {
                let n = self.left.min(len);
                self.left -= n;
                (n, b"")
            }
            Framing::Chunked if len == 0 => (0, b""),
            Framing::Chunked => {
                push_int(out, len, 16);
                out.extend_from_slice(b"\r\n");
                (len, b"\r\n")
            }
            Framing::Close => (len, b""),
        }
    }

    /// Ends the body; returns false if a declared length was not met (the
    /// connection must then close: the peer is still waiting for bytes).
    pub fn finish(&mut self, out: &mut Vec<u8>) -> bool {
        if self.framing == Framing::Chunked {
            out.extend_from_slice(LAST_CHUNK);
        }
        self.left == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::defaults::STANDARD;

    fn head(status: u16, headers: &[(&str, &[u8])], req: RequestSide) -> (String, Written) {
        let mut out = Vec::new();
        let written = write_head(status, headers, req, &STANDARD, &mut out);
        (String::from_utf8(out).unwrap(), written)
    }

    const GET11: RequestSide = RequestSide {
        version: Version::Http11,
        head_request: false,
        keep_alive: true,
    };

    /// The head without its Date line (which changes every second).
    fn undated(head: &str) -> String {
        head.lines()
            .filter(|l| !l.starts_with("Date: "))
            .map(|l| format!("{l}\r\n"))
            .collect()
    }

    #[test]
    fn writes_status_line_and_protocol_headers() {
        let (h, w) = head(
            200,
            &[("Content-Type", b"text/plain"), ("Content-Length", b"2")],
            GET11,
        );
        assert_eq!(
            w,
            Written {
                framing: Framing::Length(2),
                keep_alive: true
            }
        );
        assert_eq!(
            undated(&h),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nServer: m0serve\r\n\r\n"
        );
        let date = h.lines().find_map(|l| l.strip_prefix("Date: ")).unwrap();
        assert!(httpdate::parse_http_date(date).is_ok(), "{date}");
        assert!(h.ends_with("\r\n\r\n"));
    }

    #[test]
    fn reason_phrases() {
        assert!(head(404, &[], GET11)
            .0
            .starts_with("HTTP/1.1 404 Not Found\r\n"));
        assert!(head(431, &[], GET11)
            .0
            .starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
        assert!(head(599, &[], GET11).0.starts_with("HTTP/1.1 599 \r\n"));
        assert!(head(42, &[], GET11)
            .0
            .starts_with("HTTP/1.1 500 Internal Server Error\r\n"));
    }

    #[test]
    fn framing_matrix() {
        let http10 = RequestSide {
            version: Version::Http10,
            ..GET11
        };
        let head_req = RequestSide {
            head_request: true,
            ..GET11
        };
        let len: &[(&str, &[u8])] = &[("Content-Length", b"5")];
        // The framing and keep-alive decided, and a field that must (not) appear.
        let check = |status, headers, req, framing, keep_alive, field: &str, present| {
            let (h, w) = head(status, headers, req);
            assert_eq!(
                w,
                Written {
                    framing,
                    keep_alive
                },
                "{h}"
            );
            assert_eq!(h.contains(field), present, "{field} in {h}");
        };
        check(
            200,
            len,
            GET11,
            Framing::Length(5),
            true,
            "Content-Length: 5",
            true,
        );
        check(
            200,
            &[],
            GET11,
            Framing::Chunked,
            true,
            "Transfer-Encoding: chunked",
            true,
        );
        check(
            200,
            &[],
            http10,
            Framing::Close,
            false,
            "Connection: close",
            true,
        );
        check(
            200,
            len,
            http10,
            Framing::Length(5),
            true,
            "Connection: keep-alive",
            true,
        );
        check(
            204,
            len,
            GET11,
            Framing::NoBody,
            true,
            "Content-Length",
            false,
        );
        check(
            304,
            len,
            GET11,
            Framing::NoBody,
            true,
            "Content-Length: 5",
            true,
        );
        check(
            304,
            &[],
            GET11,
            Framing::NoBody,
            true,
            "Transfer-Encoding",
            false,
        );
        check(
            103,
            &[],
            GET11,
            Framing::NoBody,
            true,
            "Content-Length",
            false,
        );
        check(
            200,
            len,
            head_req,
            Framing::NoBody,
            true,
            "Content-Length: 5",
            true,
        );
        check(
            200,
            &[],
            head_req,
            Framing::NoBody,
            true,
            "Transfer-Encoding",
            false,
        );
    }

    #[test]
    fn connection_header_follows_keep_alive() {
        let closing = RequestSide {
            keep_alive: false,
            ..GET11
        };
        let (h, w) = head(200, &[("Content-Length", b"0")], closing);
        assert!(!w.keep_alive);
        assert!(h.contains("Connection: close\r\n"));
        // 1.1 keep-alive is the default: no Connection header at all.
        assert!(!head(200, &[("Content-Length", b"0")], GET11)
            .0
            .contains("Connection"));
        // The app asking to close is honoured, its own header replaced by ours.
        let (h, w) = head(
            200,
            &[("Connection", b"Close"), ("Content-Length", b"0")],
            GET11,
        );
        assert!(!w.keep_alive);
        assert_eq!(h.matches("Connection").count(), 1, "{h}");
        // A 101 keeps the app's Connection header for the upgrade, and adds none.
        let (h, _) = head(
            101,
            &[("Connection", b"Upgrade"), ("Upgrade", b"websocket")],
            GET11,
        );
        assert_eq!(h.matches("Connection").count(), 1, "{h}");
        assert!(h.contains("Connection: Upgrade\r\n"));
    }

    #[test]
    fn protocol_owned_and_unsafe_headers_do_not_reach_the_wire() {
        let headers: &[(&str, &[u8])] = &[
            ("Transfer-Encoding", b"gzip"),
            ("Content-Length", b"abc"),
            ("X-Split", b"a\r\nSet-Cookie: evil=1"),
            ("X-Lf", b"a\nb"),
            ("X-Nul", b"a\0b"),
            ("X-Ctl", b"a\x01b"),
            ("X-Del", b"a\x7fb"),
            ("X-Tab", b"a\tb"),
            ("Bad Name", b"v"),
            ("Bad\r\nName", b"v"),
            ("", b"v"),
            ("X-Ok", b"fine"),
        ];
        let (h, w) = head(200, headers, GET11);
        assert_eq!(
            w.framing,
            Framing::Chunked,
            "an invalid app Content-Length is ignored"
        );
        assert_eq!(
            undated(&h),
            "HTTP/1.1 200 OK\r\nX-Tab: a\tb\r\nX-Ok: fine\r\nTransfer-Encoding: chunked\r\nServer: m0serve\r\n\r\n"
        );
    }

    #[test]
    fn without_ours_only_an_apps_server_field_is_sent() {
        let mut out = Vec::new();
        let off = Defaults::new(false, Vec::new());
        write_head(200, &[("Content-Length", b"0")], GET11, &off, &mut out);
        let h = String::from_utf8(out).unwrap();
        assert!(!h.contains("Server"), "{h}");
        assert!(h.contains("\r\nDate: "), "{h}");
        let mut out = Vec::new();
        write_head(200, &[("Server", b"app")], GET11, &off, &mut out);
        assert!(String::from_utf8(out).unwrap().contains("Server: app\r\n"));
    }

    #[test]
    fn app_date_and_server_replace_ours() {
        let (h, _) = head(
            200,
            &[("Server", b"app"), ("Date", b"x"), ("Content-Length", b"0")],
            GET11,
        );
        assert_eq!(h.matches("Server").count(), 1);
        assert_eq!(h.matches("Date").count(), 1);
        assert!(h.contains("Server: app\r\n") && h.contains("Date: x\r\n"));
    }

    #[test]
    fn parses_lengths_strictly() {
        assert_eq!(parse_length(b"0"), Some(0));
        assert_eq!(parse_length(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_length(b"000000000000000000000042"), Some(42));
        for bad in [
            &b""[..],
            b"18446744073709551616",
            b"+1",
            b"-1",
            b" 1",
            b"1 ",
            b"0x1",
            b"1,1",
        ] {
            assert_eq!(
                parse_length(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn length_body_truncates_and_reports_short_bodies() {
        let mut out = Vec::new();
        let mut body = BodyWriter::new(Framing::Length(5));
        body.write(b"hel", &mut out);
        body.write(b"lo, world", &mut out);
        assert_eq!(out, b"hello");
        assert!(body.finish(&mut out));
        assert_eq!(out, b"hello");

        let mut short = BodyWriter::new(Framing::Length(5));
        short.write(b"hel", &mut out);
        assert!(!short.finish(&mut out));
    }

    #[test]
    fn body_sent_counts_toward_length_only() {
        let mut out = Vec::new();
        let mut body = BodyWriter::new(Framing::Length(10));
        body.write(b"abc", &mut out);
        body.sent(7);
        assert!(body.finish(&mut out));
        let mut body = BodyWriter::new(Framing::Length(10));
        body.sent(9);
        assert!(!body.finish(&mut out));
    }

    #[test]
    fn external_bytes_are_framed_for_each_framing() {
        let mut out = Vec::new();
        let mut body = BodyWriter::new(Framing::Length(10));
        body.write(b"abc", &mut out);
        assert_eq!(
            body.external(100, &mut out),
            (7, &b""[..]),
            "capped at the length"
        );
        assert!(body.finish(&mut out));
        assert_eq!(out, b"abc");
        let mut out = Vec::new();
        let mut body = BodyWriter::new(Framing::Chunked);
        assert_eq!(body.external(0, &mut out), (0, &b""[..]), "no empty chunk");
        assert_eq!(body.external(26, &mut out), (26, &b"\r\n"[..]));
        assert_eq!(out, b"1a\r\n");
        let mut body = BodyWriter::new(Framing::NoBody);
        assert_eq!(body.external(5, &mut out).0, 0);
        let mut body = BodyWriter::new(Framing::Close);
        assert_eq!(body.external(5, &mut out).0, 5);
    }

    #[test]
    fn chunked_close_and_nobody_bodies() {
        let mut out = Vec::new();
        let mut body = BodyWriter::new(Framing::Chunked);
        body.write(b"hello", &mut out);
        body.write(b"", &mut out);
        assert!(body.finish(&mut out));
        assert_eq!(out, b"5\r\nhello\r\n0\r\n\r\n");

        let mut out = Vec::new();
        let mut body = BodyWriter::new(Framing::Close);
        body.write(b"raw", &mut out);
        assert!(body.finish(&mut out));
        assert_eq!(out, b"raw");

        let mut out = Vec::new();
        let mut body = BodyWriter::new(Framing::NoBody);
        body.write(b"dropped", &mut out);
        assert!(body.finish(&mut out));
        assert!(out.is_empty());
    }

    #[test]
    fn push_int_formats() {
        let mut out = Vec::new();
        for (n, radix) in [
            (0, 10),
            (1234567890, 10),
            (u64::MAX, 10),
            (0, 16),
            (255, 16),
            (u64::MAX, 16),
        ] {
            out.clear();
            push_int(&mut out, n, radix);
            let expected = if radix == 10 {
                n.to_string()
            } else {
                format!("{n:x}")
            };
            assert_eq!(out, expected.as_bytes());
        }
    }
}
