//! The request line (RFC 9112 §3): `method SP request-target SP HTTP-version`,
//! parsed by hand and strictly, one pass, no recursion.
//!
//! httparse still parses the header fields; the request line is ours because
//! its leniencies are where the dangerous inputs live: it takes any run of
//! spaces as a separator only under a flag, knows no version but 1.0 and 1.1,
//! and lets through targets that RFC 9112 refuses. Choices (each 400 unless noted):
//! - exactly one SP between the three parts, no other whitespace (§3 allows a
//!   lenient parse on whitespace; a peer that splits the line differently
//!   would see another target);
//! - the method is a token (RFC 9110 §9.1), case-sensitive;
//! - the version is exactly `HTTP/` DIGIT `.` DIGIT: `HTTP/1.x` with x > 1 is
//!   served as HTTP/1.1 (RFC 9110 §2.5); another major digit (`HTTP/2.0`,
//!   `HTTP/0.9`, the h2 preface) is 505;
//! - the target's form and characters are [`super::target`]'s rules.

use super::head::Version;
use super::HttpError;

/// A request line split into its parts (the target not yet classified).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RequestLine<'a> {
    pub method: &'a str,
    pub target: &'a str,
    pub version: Version,
}

/// Whether `b` may appear in a token (RFC 9110 §5.6.2 `tchar`): methods,
/// field names, chunk extensions and parameters are made of them.
pub fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Parses `line` (without its CRLF).
pub(crate) fn parse(line: &[u8]) -> Result<RequestLine<'_>, HttpError> {
    let mut parts = line.splitn(3, |&b| b == b' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(HttpError::BadRequest("malformed request line"));
    };
    if method.is_empty() || !method.iter().all(|&b| is_tchar(b)) {
        return Err(HttpError::BadRequest("invalid method"));
    }
    // Checked before the target: `PRI * HTTP/2.0` is a version problem.
    let version = parse_version(version)?;
    if target.is_empty() {
        return Err(HttpError::BadRequest("malformed request line"));
    }
    if let Some(&b) = target.iter().find(|&&b| !(0x21..0x7f).contains(&b)) {
        return Err(HttpError::BadRequest(match b {
            b' ' | b'\t' => "whitespace in request target",
            0x80.. => "non-ASCII byte in request target",
            _ => "control character in request target",
        }));
    }
    Ok(RequestLine {
        // Both checked to be ASCII above.
        method: std::str::from_utf8(method).expect("tokens are ASCII"),
        target: std::str::from_utf8(target).expect("checked visible ASCII"),
        version,
    })
}

fn parse_version(version: &[u8]) -> Result<Version, HttpError> {
    match version {
        b"HTTP/1.0" => Ok(Version::Http10),
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', minor] if minor.is_ascii_digit() => {
            Ok(Version::Http11)
        }
        // Well formed (`DIGIT "." DIGIT`, or HTTP/2's and HTTP/3's bare
        // major) but not 1.x; `HTTP/01.01` or `HTTP/2.00` is no version at
        // all (RFC 9112 §2.3: one digit each side), so 400.
        [b'H', b'T', b'T', b'P', b'/', major]
        | [b'H', b'T', b'T', b'P', b'/', major, b'.', b'0'..=b'9']
            if major.is_ascii_digit() && *major != b'1' =>
        {
            Err(HttpError::VersionNotSupported)
        }
        _ => Err(HttpError::BadRequest("malformed HTTP version")),
    }
}

/// Whether the first bytes of a head, which may stop anywhere, can still
/// begin a request line: a method's token characters, then its SP. False
/// means no more bytes can help (a TLS ClientHello starts with 0x16, a stray
/// binary protocol with anything): answer at once rather than wait for a
/// CRLF or the header timeout.
pub(crate) fn can_begin(prefix: &[u8]) -> bool {
    match prefix.iter().position(|&b| !is_tchar(b)) {
        None => true,
        Some(0) => false,
        Some(at) => prefix[at] == b' ',
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(line: &str) -> HttpError {
        parse(line.as_bytes()).expect_err(line)
    }

    #[test]
    fn a_request_line_splits_in_three() {
        assert_eq!(
            parse(b"GET /a?b=c HTTP/1.1").unwrap(),
            RequestLine {
                method: "GET",
                target: "/a?b=c",
                version: Version::Http11
            }
        );
        assert_eq!(
            parse(b"M-SEARCH * HTTP/1.0").unwrap().version,
            Version::Http10
        );
        assert_eq!(parse(b"GET / HTTP/1.9").unwrap().version, Version::Http11);
    }

    /// The request that killed the server (a space in the target), and its
    /// relatives: spaces, tabs and extra words anywhere in the line.
    #[test]
    fn whitespace_anywhere_else_is_400() {
        for line in [
            "GET /a b HTTP/1.1",
            "GET /a  HTTP/1.1",
            "GET  /a HTTP/1.1",
            " GET /a HTTP/1.1",
            "GET /a HTTP/1.1 ",
            "GET /a HTTP/1.1 extra",
            "GET /a extra HTTP/1.1",
            "GET\t/a HTTP/1.1",
            "GET /a\tHTTP/1.1",
            "GET /a\tb HTTP/1.1",
            "GET /a HTTP/1.1\t",
            "GET /a",
            "GET",
            "",
        ] {
            assert_eq!(err(line).status(), 400, "{line:?}");
        }
    }

    #[test]
    fn methods_are_tokens() {
        for line in [
            "G(T / HTTP/1.1",
            "G\"T / HTTP/1.1",
            "GÉT / HTTP/1.1",
            "G\0T / HTTP/1.1",
        ] {
            assert_eq!(
                err(line),
                HttpError::BadRequest("invalid method"),
                "{line:?}"
            );
        }
        assert!(parse(b"x-y.z~!#$%&'*+^_`| / HTTP/1.1").is_ok());
    }

    #[test]
    fn target_bytes_are_visible_ascii() {
        for (line, why) in [
            ("GET /a\x01 HTTP/1.1", "control character in request target"),
            ("GET /a\x7f HTTP/1.1", "control character in request target"),
            ("GET /\u{e9} HTTP/1.1", "non-ASCII byte in request target"),
        ] {
            assert_eq!(err(line), HttpError::BadRequest(why), "{line:?}");
        }
    }

    #[test]
    fn versions() {
        for line in [
            "GET / http/1.1",
            "GET / HTTP/1.10",
            "GET / HTTP/1.",
            "GET / HTTP/1",
            "GET / HTTP/11",
            "GET / HTTP/x.1",
            "GET / HTTPS/1.1",
            "GET / HTTP/01.01",
            "GET / HTTP/01.1",
            "GET / HTTP/2.00",
            "GET / HTTP/22",
            "GET / HTTP/2.x",
        ] {
            assert_eq!(err(line).status(), 400, "{line:?}");
        }
        for line in [
            "GET / HTTP/2.0",
            "PRI * HTTP/2.0",
            "GET / HTTP/0.9",
            "GET / HTTP/3",
        ] {
            assert_eq!(err(line), HttpError::VersionNotSupported, "{line:?}");
        }
    }

    #[test]
    fn what_can_begin_a_request_line() {
        for prefix in [&b""[..], b"G", b"GET", b"GET ", b"GET /x", b"OPTIONS * H"] {
            assert!(can_begin(prefix), "{prefix:?}");
        }
        for prefix in [
            &b"\x16\x03\x01\x02\x00"[..],
            b"\0",
            b"\x80",
            b" ",
            b"GE(",
            b"GET\t",
            b"\r\x16",
        ] {
            assert!(!can_begin(prefix), "{prefix:?}");
        }
    }
}
