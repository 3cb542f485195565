//! What a trusted proxy says about the client (`--proxy-headers`), read from
//! the request's headers alone: RFC 7239 `Forwarded`, or the de-facto
//! `X-Forwarded-For`/`-Proto`/`-Host`/`-Port`. Sans IO: the caller decides
//! whether the peer is trusted ([`super::trusted::Trusted`]) and applies the
//! result; from an untrusted peer these are ordinary headers.
//!
//! Choices, the strict ones:
//! - **Precedence.** A request with any `Forwarded` line is read from
//!   `Forwarded` alone and every `X-Forwarded-*` is ignored, never mixed: an
//!   element of `Forwarded` binds `for`, `proto` and `host` to one hop, while
//!   `X-Forwarded-*` lines may each have been written by a different hop (or
//!   passed through from the client by a proxy that writes only the other
//!   dialect); taking the client from one and the scheme from the other
//!   would combine claims no single trusted hop made. A malformed `Forwarded`
//!   changes nothing (and still shadows `X-Forwarded-*`).
//! - **The client** is the right-most hop not itself trusted, as uvicorn
//!   0.30 and later do: each proxy appends the address it received from, so the
//!   entries left of the first untrusted one were written by someone we
//!   cannot believe. When every hop is trusted (or the list is `*`), the
//!   left-most. The client is only ever an IP address: a chosen entry that is
//!   not one (`unknown`, an obfuscated `_id`, garbage, empty) leaves the
//!   client as the peer, and so does a walk through such an entry (it cannot
//!   be trusted). `X-Forwarded-For` entries are bare addresses (no port, so
//!   the client's port is 0, as uvicorn reports); `Forwarded` nodes follow
//!   RFC 7239 §6 exactly: IPv6 in brackets and quoted, an optional port.
//! - **Scheme** (`X-Forwarded-Proto`, `proto=`): one of http, https, ws, wss
//!   (case-insensitive, RFC 3986 §3.1); anything else, a list or a repeated
//!   line is ignored. With `Forwarded`, the chosen element's `proto`/`host`
//!   (the hop that met the client wrote them).
//! - **Host** (`X-Forwarded-Host`, `host=`): RFC 9110 `Host` syntax
//!   (`uri-host [":" port]`), else ignored; `X-Forwarded-Port` (1-5 digits,
//!   <= 65535) wins over a port inside `X-Forwarded-Host`. Repeated lines or
//!   lists are ignored: a single value or nothing.

use std::net::{IpAddr, SocketAddr};

use super::is_tchar;
use super::trusted::Trusted;
use super::Fields;

/// The facts a trusted proxy forwarded; `None` where it said nothing usable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Forwarded {
    /// The client's address (port 0 when none was forwarded).
    pub client: Option<SocketAddr>,
    /// The client used TLS (https or wss: true; http or ws: false).
    pub secure: Option<bool>,
    /// The host the client asked for, without its port (IPv6 in brackets).
    pub host: Option<String>,
    /// The port the client connected to.
    pub port: Option<u16>,
}

impl Forwarded {
    /// Nothing was forwarded.
    pub fn is_empty(&self) -> bool {
        *self == Forwarded::default()
    }

    /// Where the client connected, for SERVER_NAME/SERVER_PORT/HTTP_HOST and
    /// the ASGI `server`, given the request's own `Host`; None when neither a
    /// host nor a port was forwarded (a forwarded scheme alone moves no port,
    /// as werkzeug's ProxyFix). A forwarded host without a port means the
    /// scheme's default port; a port alone keeps the `Host` header's name.
    pub fn origin(&self, host_header: Option<&[u8]>) -> Option<Origin> {
        let default = if self.secure == Some(true) { 443 } else { 80 };
        let with_port = |host: &str, port: Option<u16>| match port {
            Some(p) => format!("{host}:{p}"),
            None => host.to_owned(),
        };
        match (&self.host, self.port) {
            (Some(host), port) => Some(Origin {
                name: Some(host.clone()),
                port: port.unwrap_or(default),
                http_host: Some(with_port(host, port)),
            }),
            (None, Some(port)) => Some(Origin {
                name: None,
                port,
                http_host: host_header
                    .and_then(|h| host_port(trim(h)))
                    .map(|(host, _)| with_port(&host, Some(port))),
            }),
            (None, None) => None,
        }
    }
}

/// Where the client connected, as far as a proxy said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The server's name (None: the listening one stands).
    pub name: Option<String>,
    pub port: u16,
    /// The `Host` the client sent (None: the request's own stands).
    pub http_host: Option<String>,
}

/// What the headers of a request from a trusted peer forward.
pub fn resolve(headers: &Fields, trusted: &Trusted) -> Forwarded {
    if let Some(value) = joined(headers, "forwarded") {
        return from_forwarded(&value, trusted).unwrap_or_default();
    }
    let mut f = Forwarded::default();
    if let Some(value) = joined(headers, "x-forwarded-for") {
        let hops: Vec<Node> = value
            .split(|&b| b == b',')
            .map(|item| {
                match std::str::from_utf8(trim(item))
                    .ok()
                    .and_then(|s| s.parse().ok())
                {
                    Some(ip) => Node::Ip(ip, None),
                    None => Node::Opaque,
                }
            })
            .collect();
        f.client = choose(&hops, trusted).and_then(|i| hops[i].addr());
    }
    if let Some(value) = single(headers, "x-forwarded-proto") {
        f.secure = scheme(trim(value));
    }
    if let Some(value) = single(headers, "x-forwarded-host") {
        if let Some((host, port)) = host_port(trim(value)) {
            f.host = Some(host);
            f.port = port;
        }
    }
    if let Some(value) = single(headers, "x-forwarded-port") {
        if let Some(port) = port(trim(value)) {
            f.port = Some(port);
        }
    }
    f
}

/// One hop's `for`: an address (and port), or something that is not one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    Ip(IpAddr, Option<u16>),
    /// `unknown`, an obfuscated identifier, or no `for` at all.
    Opaque,
}

impl Node {
    fn addr(self) -> Option<SocketAddr> {
        match self {
            Node::Ip(ip, port) => Some(SocketAddr::new(ip, port.unwrap_or(0))),
            Node::Opaque => None,
        }
    }
}

/// The index of the hop taken as the client: the right-most untrusted one,
/// else the left-most. None for an empty list.
fn choose(hops: &[Node], trusted: &Trusted) -> Option<usize> {
    let believed = |node: &Node| match node {
        _ if trusted.all() => true,
        Node::Ip(ip, _) => trusted.contains(*ip),
        Node::Opaque => false,
    };
    let last = hops.len().checked_sub(1)?;
    Some(
        hops.iter()
            .rposition(|n| !believed(n))
            .unwrap_or(0)
            .min(last),
    )
}

/// One `Forwarded` element's parameters (RFC 7239 §4).
#[derive(Default)]
struct Element {
    node: Option<Node>,
    proto: Option<Vec<u8>>,
    host: Option<Vec<u8>>,
    by: bool,
}

fn from_forwarded(value: &[u8], trusted: &Trusted) -> Option<Forwarded> {
    let elements = parse_elements(value)?;
    let hops: Vec<Node> = elements
        .iter()
        .map(|e| e.node.unwrap_or(Node::Opaque))
        .collect();
    let at = choose(&hops, trusted)?;
    let chosen = &elements[at];
    let mut f = Forwarded {
        client: hops[at].addr(),
        ..Forwarded::default()
    };
    f.secure = chosen.proto.as_deref().and_then(scheme);
    if let Some((host, port)) = chosen.host.as_deref().and_then(host_port) {
        f.host = Some(host);
        f.port = port;
    }
    Some(f)
}

/// `1#forwarded-element`; None if malformed anywhere. Empty list elements
/// are skipped (RFC 9110 §5.6.1); whitespace is allowed around commas only.
fn parse_elements(value: &[u8]) -> Option<Vec<Element>> {
    let mut elements = Vec::new();
    let mut p = Parser { s: value, i: 0 };
    loop {
        p.skip_ows();
        if p.eat(b',') {
            continue;
        }
        if p.done() {
            break;
        }
        let mut e = Element::default();
        loop {
            if p.peek() != Some(b';') {
                let name = p.token()?.to_ascii_lowercase();
                if !p.eat(b'=') {
                    return None;
                }
                let v = p.value()?;
                let seen = match name.as_slice() {
                    b"for" => e.node.replace(node(&v)?).is_some(),
                    b"proto" => e.proto.replace(v).is_some(),
                    b"host" => e.host.replace(v).is_some(),
                    b"by" => std::mem::replace(&mut e.by, true),
                    _ => false, // extensions (RFC 7239 §5.5) are skipped
                };
                if seen {
                    return None; // §4: a parameter at most once per element
                }
            }
            if !p.eat(b';') {
                break;
            }
        }
        elements.push(e);
        p.skip_ows();
        if !p.done() && !p.eat(b',') {
            return None;
        }
    }
    (!elements.is_empty()).then_some(elements)
}

/// A `node` (RFC 7239 §6): IPv4, `[IPv6]`, `unknown` or `_obfuscated`,
/// with an optional numeric or obfuscated port. None if malformed.
fn node(v: &[u8]) -> Option<Node> {
    let (name, port) = if let Some(rest) = v.strip_prefix(b"[") {
        let close = rest.iter().position(|&b| b == b']')?;
        let ip: std::net::Ipv6Addr = std::str::from_utf8(&rest[..close]).ok()?.parse().ok()?;
        return match &rest[close + 1..] {
            b"" => Some(Node::Ip(IpAddr::V6(ip), None)),
            [b':', port @ ..] => Some(Node::Ip(IpAddr::V6(ip), node_port(port)?)),
            _ => None,
        };
    } else {
        match v.iter().position(|&b| b == b':') {
            Some(at) => (&v[..at], Some(node_port(&v[at + 1..])?)),
            None => (v, None),
        }
    };
    if name.eq_ignore_ascii_case(b"unknown") || obfuscated(name) {
        return Some(Node::Opaque);
    }
    let ip: std::net::Ipv4Addr = std::str::from_utf8(name).ok()?.parse().ok()?;
    Some(Node::Ip(IpAddr::V4(ip), port.flatten()))
}

/// `port / obfport`: Some(Some(n)) for a number, Some(None) for an obfuscated one.
fn node_port(v: &[u8]) -> Option<Option<u16>> {
    if obfuscated(v) {
        return Some(None);
    }
    port(v).map(Some)
}

/// `"_" 1*(ALPHA / DIGIT / "." / "_" / "-")`.
fn obfuscated(v: &[u8]) -> bool {
    v.len() > 1
        && v[0] == b'_'
        && v[1..]
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// 1 to 5 digits, at most 65535.
fn port(v: &[u8]) -> Option<u16> {
    if v.is_empty() || v.len() > 5 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// http/ws: Some(false); https/wss: Some(true); anything else None.
fn scheme(v: &[u8]) -> Option<bool> {
    match v.to_ascii_lowercase().as_slice() {
        b"http" | b"ws" => Some(false),
        b"https" | b"wss" => Some(true),
        _ => None,
    }
}

/// `uri-host [":" port]` (RFC 9110 §7.2, RFC 3986 §3.2.2): the host as
/// sent and the port, or None if malformed.
fn host_port(v: &[u8]) -> Option<(String, Option<u16>)> {
    let (host, rest) = if v.first() == Some(&b'[') {
        let close = v.iter().position(|&b| b == b']')?;
        std::str::from_utf8(&v[1..close])
            .ok()?
            .parse::<std::net::Ipv6Addr>()
            .ok()?;
        v.split_at(close + 1)
    } else {
        let end = v.iter().position(|&b| b == b':').unwrap_or(v.len());
        let reg = |b: &u8| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'-' | b'.' | b'_' | b'~' | b'%' | b'!' | b'$' | b'&' | b'\''
                )
                || matches!(b, b'(' | b')' | b'*' | b'+' | b';' | b'=')
        };
        if end == 0 || !v[..end].iter().all(reg) {
            return None;
        }
        v.split_at(end)
    };
    let port = match rest {
        b"" => None,
        [b':', digits @ ..] => Some(port(digits)?),
        _ => return None,
    };
    Some((String::from_utf8(host.to_vec()).ok()?, port))
}

/// The values of every line named `name`, joined with `,` (RFC 9110 §5.3).
fn joined(headers: &Fields, name: &str) -> Option<Vec<u8>> {
    let mut lines = headers.all(name);
    let mut value = lines.next()?.to_vec();
    for v in lines {
        value.push(b',');
        value.extend_from_slice(v);
    }
    Some(value)
}

/// The value of the only line named `name` (None if absent, repeated or a list).
fn single<'a>(headers: &'a Fields, name: &str) -> Option<&'a [u8]> {
    let mut lines = headers.all(name);
    let value = lines.next()?;
    (lines.next().is_none() && !value.contains(&b',')).then_some(value)
}

fn trim(v: &[u8]) -> &[u8] {
    v.trim_ascii()
}

/// A cursor over a header value.
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn done(&self) -> bool {
        self.i == self.s.len()
    }

    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        self.i += usize::from(hit);
        hit
    }

    fn skip_ows(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    fn token(&mut self) -> Option<&[u8]> {
        let start = self.i;
        while self.peek().is_some_and(is_tchar) {
            self.i += 1;
        }
        (self.i > start).then(|| &self.s[start..self.i])
    }

    /// `token / quoted-string`, unquoted.
    fn value(&mut self) -> Option<Vec<u8>> {
        if !self.eat(b'"') {
            return self.token().map(<[u8]>::to_vec);
        }
        let mut v = Vec::new();
        loop {
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(v);
                }
                b'\\' => {
                    self.i += 1;
                    let c = self.peek()?;
                    if !(c == b'\t' || c == b' ' || c >= 0x21) || c == 0x7f {
                        return None;
                    }
                    v.push(c);
                }
                c if c == b'\t' || c == b' ' || (c >= 0x21 && c != 0x7f) => v.push(c),
                _ => return None,
            }
            self.i += 1;
        }
    }
}

#[cfg(test)]
#[path = "forwarded_tests.rs"]
mod tests;
