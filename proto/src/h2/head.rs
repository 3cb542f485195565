//! Heads between HTTP/2 and what an HTTP/1.1 app expects.
//!
//! A request becomes the [`RequestHead`] an HTTP/1.1 request would: its
//! `:authority` as `Host` (RFC 9113 §8.3.1), its `cookie` fields joined with
//! `; ` (§8.2.3). A `Host` that names another authority than `:authority` is
//! refused (§8.3.1 says SHOULD treat as malformed; we take the strict side,
//! as the two would route and log differently). h2 itself refuses pseudo-
//! and connection-specific fields, uppercase names and over-long lists.
//!
//! A response is the app's fields less the connection-specific ones
//! (`Connection`, `Keep-Alive`, `Proxy-Connection`, `Transfer-Encoding`,
//! `Upgrade`: §8.2.2 forbids them, and an app written for HTTP/1.1 sends them
//! in good faith, so they are dropped, not an error), plus `Date` and the
//! server's [`Defaults`].

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Method, Request, Response, StatusCode};

use crate::http::response::field_is_safe;
use crate::http::{date, BodyKind, Defaults, Fields, RequestHead, Version};

/// A request HTTP/2 carried that no HTTP/1.1 app could be handed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// `Host` and `:authority` differ (400).
    HostMismatch,
    /// CONNECT (405): m0serve is no tunnel.
    Connect,
    /// The body is over the limit (413), by its Content-Length or as it came.
    TooLarge,
}

impl Refused {
    pub fn status(self) -> u16 {
        match self {
            Refused::HostMismatch => 400,
            Refused::Connect => 405,
            Refused::TooLarge => 413,
        }
    }
}

/// The head of `req`; `ended`: its stream ended with the head (no body).
pub fn request_head<B>(req: &Request<B>, ended: bool) -> Result<RequestHead, Refused> {
    if req.method() == Method::CONNECT {
        return Err(Refused::Connect);
    }
    let uri = req.uri();
    let target = uri
        .path_and_query()
        .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned());
    let fields = req.headers();
    let bytes: usize = fields.iter().map(|(n, v)| n.as_str().len() + v.len()).sum();
    let mut headers = Fields::with_capacity(fields.len() + 1, bytes + 64);
    let authority = uri.authority().map(|a| a.as_str());
    match (authority, fields.get(http::header::HOST)) {
        (Some(a), Some(host)) if !a.as_bytes().eq_ignore_ascii_case(host.as_bytes()) => {
            return Err(Refused::HostMismatch)
        }
        (Some(a), None) => headers.push("host", a.as_bytes()),
        _ => {}
    }
    let mut cookies = fields.get_all(http::header::COOKIE).iter();
    if let Some(first) = cookies.next() {
        let mut joined = first.as_bytes().to_vec();
        for more in cookies {
            joined.extend_from_slice(b"; ");
            joined.extend_from_slice(more.as_bytes());
        }
        headers.push("cookie", &joined);
    }
    let mut length = None;
    let mut expect_continue = false;
    for (name, value) in fields {
        if name == http::header::COOKIE {
            continue;
        }
        if name == http::header::CONTENT_LENGTH {
            length = length.or(crate::http::response::parse_length(value.as_bytes()));
        }
        if name == http::header::EXPECT {
            expect_continue |= value.as_bytes().eq_ignore_ascii_case(b"100-continue");
        }
        headers.push(name.as_str(), value.as_bytes());
    }
    let body = match (ended, length) {
        (true, _) | (false, Some(0)) => BodyKind::Empty,
        (false, Some(n)) => BodyKind::Length(n),
        // Neither ended nor sized: read to the stream's end, as chunked is.
        (false, None) => BodyKind::Chunked,
    };
    Ok(RequestHead {
        method: req.method().as_str().to_owned(),
        target,
        version: Version::Http2,
        headers,
        body,
        keep_alive: true,
        expect_continue: expect_continue && !ended,
    })
}

/// Fields HTTP/2 forbids (RFC 9113 §8.2.2), dropped from an app's answer.
fn connection_specific(name: &str) -> bool {
    [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
    ]
    .iter()
    .any(|n| name.eq_ignore_ascii_case(n))
}

/// The response head for `status` and the app's `headers`: the unsafe or
/// connection-specific ones dropped, `TE` too unless it is `trailers`
/// (the only value §8.2.2 allows), `Date` and `defaults` added.
pub fn response_head(status: u16, headers: &[(&str, &[u8])], defaults: &Defaults) -> Response<()> {
    let status = StatusCode::from_u16(status)
        .ok()
        .filter(|s| s.as_u16() >= 200)
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut map = HeaderMap::with_capacity(headers.len() + 2);
    let mut has_date = false;
    for &(name, value) in headers {
        let te = name.eq_ignore_ascii_case("te");
        if connection_specific(name) || (te && value != b"trailers") {
            continue;
        }
        has_date |= name.eq_ignore_ascii_case("date");
        append(&mut map, name, value);
    }
    if !has_date {
        date::with_now(|d| append(&mut map, "date", d));
    }
    defaults.each(headers, |name, value| append(&mut map, name, value));
    let mut response = Response::new(());
    *response.status_mut() = status;
    *response.headers_mut() = map;
    response
}

/// Trailer fields for the end of a stream (the unsafe and the
/// connection-specific dropped, as in a head).
pub fn trailers(fields: &[(&str, &[u8])]) -> HeaderMap {
    let mut map = HeaderMap::with_capacity(fields.len());
    for &(name, value) in fields {
        if !connection_specific(name) {
            append(&mut map, name, value);
        }
    }
    map
}

fn append(map: &mut HeaderMap, name: &str, value: &[u8]) {
    let parsed = field_is_safe(name, value)
        .then(|| {
            let name = HeaderName::from_bytes(name.as_bytes()).ok()?;
            let value = HeaderValue::from_maybe_shared(Bytes::copy_from_slice(value)).ok()?;
            Some((name, value))
        })
        .flatten();
    match parsed {
        Some((name, value)) => {
            map.append(name, value);
        }
        None => tracing::warn!(
            name,
            "dropped a response header with an invalid name or value"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(authority: &str, fields: &[(&str, &str)]) -> Request<()> {
        let mut b = Request::builder()
            .method("GET")
            .uri(format!("https://{authority}/p?q=1"));
        for (n, v) in fields {
            b = b.header(*n, *v);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn authority_becomes_host_and_cookies_are_joined() {
        let r = req(
            "example.com:8443",
            &[("cookie", "a=1"), ("x-y", "z"), ("cookie", "b=2")],
        );
        let head = request_head(&r, true).unwrap();
        assert_eq!(head.version, Version::Http2);
        assert_eq!(head.target, "/p?q=1");
        assert_eq!(head.header("host"), Some(&b"example.com:8443"[..]));
        assert_eq!(head.header("cookie"), Some(&b"a=1; b=2"[..]));
        assert_eq!(head.headers.all("cookie").count(), 1);
        assert_eq!(head.header("x-y"), Some(&b"z"[..]));
        assert_eq!(head.body, BodyKind::Empty);
    }

    #[test]
    fn a_host_naming_another_authority_is_refused_and_the_same_one_kept_once() {
        let other = req("a.example", &[("host", "b.example")]);
        assert_eq!(
            request_head(&other, true).unwrap_err(),
            Refused::HostMismatch
        );
        let same = req("a.example", &[("host", "A.example")]);
        let head = request_head(&same, true).unwrap();
        assert_eq!(head.headers.all("host").count(), 1);
    }

    #[test]
    fn the_body_is_sized_by_content_length_or_read_to_the_end() {
        let sized = req("h", &[("content-length", "5"), ("expect", "100-continue")]);
        let head = request_head(&sized, false).unwrap();
        assert_eq!(head.body, BodyKind::Length(5));
        assert!(head.expect_continue);
        let open = request_head(&req("h", &[]), false).unwrap();
        assert_eq!(open.body, BodyKind::Chunked);
    }

    #[test]
    fn connect_is_refused() {
        let r = Request::builder()
            .method("CONNECT")
            .uri("example.com:443")
            .body(())
            .unwrap();
        assert_eq!(request_head(&r, true).unwrap_err(), Refused::Connect);
    }

    #[test]
    fn connection_specific_fields_are_dropped_and_date_and_server_added() {
        let app: &[(&str, &[u8])] = &[
            ("Content-Type", b"text/plain"),
            ("Connection", b"keep-alive"),
            ("Keep-Alive", b"timeout=5"),
            ("Transfer-Encoding", b"chunked"),
            ("Upgrade", b"h2c"),
            ("TE", b"gzip"),
            ("Bad Name", b"x"),
            ("X-Two", b"1"),
            ("X-Two", b"2"),
        ];
        let r = response_head(200, app, &Defaults::default());
        let h = r.headers();
        assert_eq!(h["content-type"], "text/plain");
        for gone in [
            "connection",
            "keep-alive",
            "transfer-encoding",
            "upgrade",
            "te",
        ] {
            assert!(!h.contains_key(gone), "{gone} kept");
        }
        assert_eq!(h.get_all("x-two").iter().count(), 2);
        assert!(h.contains_key("date"));
        assert_eq!(h["server"], "m0serve");
        assert_eq!(h.len(), 5);
    }

    #[test]
    fn an_informational_or_invalid_status_is_a_500() {
        assert_eq!(response_head(103, &[], &Defaults::default()).status(), 500);
        assert_eq!(response_head(1000, &[], &Defaults::default()).status(), 500);
        assert_eq!(response_head(204, &[], &Defaults::default()).status(), 204);
    }
}
