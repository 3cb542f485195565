//! Request targets (RFC 9112 §3.2) and the authority grammar of RFC 3986
//! §3.2.2 they share with the `Host` field.
//!
//! The four forms, and what each is allowed with (400 otherwise):
//! - origin-form (`/path?query`): every method but CONNECT;
//! - asterisk-form (`*`): OPTIONS only;
//! - authority-form (`host:port`): CONNECT only, which an origin server does
//!   not serve: 501 (RFC 9110 §9.3.6 leaves it to proxies);
//! - absolute-form (`http://host/path`): any method but CONNECT; its
//!   authority is the request's host, whatever `Host` says (§3.2.2), and it
//!   is served as its origin-form. Only `http` and `https` URIs, with a
//!   non-empty host and no userinfo (RFC 9110 §4.2.1, §4.2.4).
//!
//! A `#` (a fragment is never sent) is refused in every form. Of the other
//! visible characters RFC 3986 keeps out of paths and queries (`"<>\^`{|}`
//! and `[]` in a path), none is refused: browsers send several of them
//! unencoded (the WHATWG URL standard leaves `|`, `[`, `]` raw in paths and
//! `{`, `|`, `}`, `^` in queries), and refusing them would turn real clients
//! away for no safety gained — they cannot split a line or a field.

use super::HttpError;

/// A request target, classified.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Target<'a> {
    /// Path and query as sent.
    Origin(&'a str),
    Asterisk,
    /// A CONNECT target (already found to be refused with 501 by [`classify`]'s caller).
    Authority,
    /// An absolute URI: its authority, and its path and query ("/" if it has no path).
    Absolute {
        authority: &'a str,
        origin: &'a str,
    },
}

/// Sorts `target` into its form and checks that `method` may use it.
pub(crate) fn classify<'a>(method: &str, target: &'a str) -> Result<Target<'a>, HttpError> {
    if target.contains('#') {
        return Err(HttpError::BadRequest("fragment in request target"));
    }
    let form = if target.starts_with('/') {
        Target::Origin(target)
    } else if target == "*" {
        Target::Asterisk
    } else if method == "CONNECT" {
        if !is_authority(target) {
            return Err(HttpError::BadRequest("invalid CONNECT target"));
        }
        Target::Authority
    } else {
        absolute(target)?
    };
    match (&form, method) {
        (Target::Authority, _) => Err(HttpError::NotImplemented("CONNECT is not served here")),
        (_, "CONNECT") => Err(HttpError::BadRequest(
            "CONNECT needs an authority-form target",
        )),
        (Target::Asterisk, m) if m != "OPTIONS" => Err(HttpError::BadRequest(
            "asterisk-form target without OPTIONS",
        )),
        _ => Ok(form),
    }
}

/// An absolute-form target: `scheme "://" authority [ path-abempty ] [ "?" query ]`.
fn absolute(target: &str) -> Result<Target<'_>, HttpError> {
    const BAD: HttpError = HttpError::BadRequest("invalid request target");
    let (scheme, rest) = target.split_once("://").ok_or(BAD)?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(HttpError::BadRequest(
            "request target is not an http(s) URI",
        ));
    }
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, origin) = rest.split_at(end);
    if authority.contains('@') {
        return Err(HttpError::BadRequest("userinfo in request target"));
    }
    if !is_http_host(authority) {
        return Err(HttpError::BadRequest("invalid host in request target"));
    }
    let origin = if origin.is_empty() {
        "/"
    } else if origin.starts_with('?') {
        // An empty path with a query: the origin-form needs its "/" (§3.2.1).
        return Err(HttpError::BadRequest("absolute-form target without a path"));
    } else {
        origin
    };
    Ok(Target::Absolute { authority, origin })
}

/// authority-form: `uri-host ":" port`, both present (RFC 9112 §3.2.3).
fn is_authority(target: &str) -> bool {
    match target.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && !port.is_empty() && is_host_port(target),
        None => false,
    }
}

/// The host of `host [":" port]`, brackets kept for an IP literal.
fn host_part(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority
            .find(']')
            .map_or(authority, |end| &authority[..=end]);
    }
    authority
        .rsplit_once(':')
        .map_or(authority, |(host, _)| host)
}

/// Whether a `Host` field value, or an absolute-form target's authority,
/// names the host of an http(s) URI: `uri-host [ ":" port ]` with a host
/// that is not empty. RFC 9112 §3.2 lets a client send an empty Host for a
/// URI without an authority, but an http(s) URI always has one, and RFC 9110
/// §4.2.1 has a recipient reject one whose host is empty: such a request has
/// no target this server could be asked for (400, as nginx answers).
pub(crate) fn is_http_host(value: &str) -> bool {
    is_host_port(value) && !host_part(value).is_empty()
}

/// Whether a value is `uri-host [ ":" port ]` (RFC 9112 §3.2, RFC 3986
/// §3.2.2); the host may be empty (a `reg-name` may).
fn is_host_port(value: &str) -> bool {
    let (host, port) = if let Some(inner) = value.strip_prefix('[') {
        let Some((literal, after)) = inner.split_once(']') else {
            return false;
        };
        if !is_ip_literal(literal) {
            return false;
        }
        match after {
            "" => return true,
            _ => match after.strip_prefix(':') {
                Some(port) => ("", port),
                None => return false,
            },
        }
    } else {
        match value.rsplit_once(':') {
            Some((host, port)) => (host, port),
            None => (value, ""),
        }
    };
    is_reg_name(host) && is_port(port)
}

/// `port = *DIGIT`; more than a TCP port can be is refused, the strict reading.
fn is_port(port: &str) -> bool {
    port.is_empty() || (port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok())
}

/// `reg-name = *( unreserved / pct-encoded / sub-delims )` (an IPv4 address is one too).
fn is_reg_name(host: &str) -> bool {
    let bytes = host.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3);
                if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                    return false;
                }
                i += 3;
                continue;
            }
            b if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b) => {}
            _ => return false,
        }
        i += 1;
    }
    true
}

/// The inside of `[...]`: an IPv6 address, or `IPvFuture` (`v` HEX+ `.` ...).
fn is_ip_literal(literal: &str) -> bool {
    if let Some(future) = literal.strip_prefix(['v', 'V']) {
        return match future.split_once('.') {
            Some((version, rest)) => {
                !version.is_empty()
                    && version.bytes().all(|b| b.is_ascii_hexdigit())
                    && !rest.is_empty()
                    && rest
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:".contains(&b))
            }
            None => false,
        };
    }
    literal.parse::<std::net::Ipv6Addr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(method: &str, target: &str) -> u16 {
        match classify(method, target) {
            Ok(form) => panic!("accepted {method} {target}: {form:?}"),
            Err(e) => e.status(),
        }
    }

    #[test]
    fn origin_and_asterisk_forms() {
        assert_eq!(classify("GET", "/a?b#").map_err(|e| e.status()), Err(400));
        assert_eq!(classify("GET", "/a/b?c=d"), Ok(Target::Origin("/a/b?c=d")));
        assert_eq!(classify("OPTIONS", "*"), Ok(Target::Asterisk));
        // Characters browsers send unencoded are served (see the module docs).
        assert!(classify("GET", "/a|b[1]?q={x}^`\"<>\\").is_ok());
        for target in ["a/b", "?x", "*x", "**", "%2F", "#", "/a#frag"] {
            assert_eq!(status("GET", target), 400, "{target}");
        }
        for method in ["GET", "POST", "HEAD"] {
            assert_eq!(status(method, "*"), 400, "{method} *");
        }
    }

    #[test]
    fn connect_is_refused_by_an_origin_server() {
        assert_eq!(status("CONNECT", "example.com:443"), 501);
        assert_eq!(status("CONNECT", "[::1]:443"), 501);
        for target in [
            "example.com",
            "example.com:",
            ":443",
            "/",
            "*",
            "http://example.com/",
        ] {
            assert_eq!(status("CONNECT", target), 400, "{target}");
        }
        // authority-form with any other method is no form at all.
        assert_eq!(status("GET", "example.com:443"), 400);
    }

    #[test]
    fn absolute_form_gives_its_authority_and_origin() {
        assert_eq!(
            classify("GET", "http://example.com:8080/a?b"),
            Ok(Target::Absolute {
                authority: "example.com:8080",
                origin: "/a?b"
            })
        );
        assert_eq!(
            classify("GET", "HTTPS://[::1]"),
            Ok(Target::Absolute {
                authority: "[::1]",
                origin: "/"
            })
        );
        for target in [
            "ftp://example.com/",
            "http:/example.com/",
            "http://",
            "http:///a",
            "http://:80/",
            "http://user@example.com/",
            "http://exa mple.com/",
            "http://example.com?q",
            "http://[::1/",
            "http://example.com:99999/",
        ] {
            assert_eq!(status("GET", target), 400, "{target}");
        }
    }

    #[test]
    fn host_values() {
        for host in [
            "",
            "example.com",
            "example.com:8080",
            "example.com:",
            "127.0.0.1:80",
            "[::1]",
            "[::1]:8000",
            "[2001:db8::7]",
            "[v1.fe80::a+en1]",
            "xn--bcher-kva.example",
            "a%2Fb",
            "!$&'()*+,;=-._~",
        ] {
            assert!(is_host_port(host), "{host:?}");
        }
        for host in [
            "exa mple.com",
            "example.com:80:80",
            "example.com:http",
            "example.com:65536",
            "user@example.com",
            "example.com/path",
            "[::1",
            "[::1]x",
            "[::1]:x",
            "[not-ip]",
            "[v1]",
            "::1",
            "a%2",
            "a%zz",
            "ex\"ample",
            "\u{e9}.example",
        ] {
            assert!(!is_host_port(host), "{host:?}");
        }
        // An http(s) URI's host is never empty.
        assert!(is_host_port("") && is_host_port(":80"));
        for host in ["", ":80", ":"] {
            assert!(!is_http_host(host), "{host:?}");
        }
        for host in ["a", "a:80", "[::1]", "[::1]:80"] {
            assert!(is_http_host(host), "{host:?}");
        }
    }
}
