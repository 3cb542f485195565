//! `--access-log-format`: gunicorn's atoms (`%(h)s`, `%({name}i)s`, ...) or
//! `json`, compiled once at startup into a list of pieces, then rendered for
//! each answered request. Sans-IO: a [`Record`] in, a line out.
//!
//! Every value that comes from the client (the request line, headers) is
//! escaped, Apache's way: `"` and `\` get a backslash, control characters,
//! DEL and bytes outside ASCII become `\xHH`. A client can thus neither end
//! a quoted field early nor start a new line, so it cannot forge log lines.

use std::fmt::Write;
use std::time::Duration;

use crate::backend::Peer;
use crate::http::{Fields, RequestHead, Version};

/// m0serve's line since its first access log: the Common Log Format (UTC).
pub const DEFAULT: &str = r#"%(h)s - - %(t)s "%(r)s" %(s)s %(B)s"#;

/// A compiled `--access-log-format`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Format {
    /// Text with atoms, as gunicorn's `access_log_format`.
    Atoms(Vec<Piece>),
    /// One JSON object a line (keys: see [`Format::render`]).
    Json,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Atom(Atom),
}

/// gunicorn's atoms (its "Logging" settings), each `%(NAME)s`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Atom {
    /// `h`: the client's address (`unix` on a Unix socket).
    RemoteAddr,
    /// `l`: `-` (identd is not asked).
    Ident,
    /// `u`: `-` (the user is the application's business).
    User,
    /// `t`: when the request's head began, `[10/Oct/2000:13:55:36 +0000]` (UTC).
    Time,
    /// `r`: the request line, `GET /a?b HTTP/1.1`.
    RequestLine,
    /// `m`: the method.
    Method,
    /// `U`: the path, without the query.
    Path,
    /// `q`: the query, without `?`.
    Query,
    /// `H`: the protocol, `HTTP/1.1`.
    Protocol,
    /// `s`: the status.
    Status,
    /// `B`: body bytes sent.
    Bytes,
    /// `b`: body bytes sent, `-` for none.
    BytesOrDash,
    /// `f`: the `Referer` header.
    Referer,
    /// `a`: the `User-Agent` header.
    UserAgent,
    /// `T`: the request's duration in whole seconds.
    Seconds,
    /// `D`: ... in microseconds.
    Micros,
    /// `M`: ... in milliseconds.
    Millis,
    /// `L`: ... in seconds, with six decimals.
    DecimalSeconds,
    /// `p`: this process's id, `<1234>`.
    Pid,
    /// `{name}i`: a request header (lower-cased name; values of repeated ones joined by `, `).
    RequestHeader(String),
    /// `{name}o`: a response header, likewise.
    ResponseHeader(String),
}

/// What one answered request leaves for its log line.
pub struct Record<'a> {
    pub peer: &'a Peer,
    pub head: &'a RequestHead,
    pub status: u16,
    /// Body bytes sent.
    pub bytes: u64,
    /// The response headers the format names (see [`Format::response_headers`]).
    pub response_headers: &'a Fields,
    /// First byte of the head to last byte sent.
    pub duration: Duration,
    /// When the head began, in microseconds since the epoch (UTC).
    pub started_us: u64,
    pub pid: u32,
}

impl Format {
    /// Compile `spec`: `json`, or text where `%(NAME)s` is an atom and
    /// `%%` a percent sign. An unknown atom, or a `%` that starts neither,
    /// is an error naming it.
    pub fn parse(spec: &str) -> Result<Format, String> {
        if spec.trim() == "json" {
            return Ok(Format::Json);
        }
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut rest = spec;
        while let Some(at) = rest.find('%') {
            text.push_str(&rest[..at]);
            rest = &rest[at + 1..];
            if let Some(after) = rest.strip_prefix('%') {
                text.push('%');
                rest = after;
                continue;
            }
            let Some(open) = rest.strip_prefix('(') else {
                return Err(format!(
                    "'%' at {:?}: an atom is %(NAME)s, a percent sign %%",
                    truncate(&rest[..rest.len().min(8)])
                ));
            };
            let close = open
                .find(")s")
                .ok_or_else(|| format!("%({}: not closed by )s", truncate(open)))?;
            let atom = atom(&open[..close])?;
            if !text.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut text)));
            }
            pieces.push(Piece::Atom(atom));
            rest = &open[close + 2..];
        }
        text.push_str(rest);
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(Format::Atoms(pieces))
    }

    /// The response headers (lower-cased) the format shows: only these are
    /// kept for the log line.
    pub fn response_headers(&self) -> Vec<&str> {
        match self {
            Format::Json => Vec::new(),
            Format::Atoms(pieces) => pieces
                .iter()
                .filter_map(|p| match p {
                    Piece::Atom(Atom::ResponseHeader(name)) => Some(name.as_str()),
                    _ => None,
                })
                .collect(),
        }
    }

    /// Append the line for `rec` to `out` (no newline).
    ///
    /// `json`: an object with `time` (RFC 3339, UTC, microseconds: when the
    /// head began), `remote_addr` (null on a Unix socket), `remote_port`,
    /// `method`, `path`, `query`, `protocol`, `status`, `bytes` (body bytes
    /// sent), `referer` and `user_agent` (null when absent), `duration_us`
    /// (first byte of the head to last byte sent) and `pid`.
    pub fn render(&self, rec: &Record<'_>, out: &mut String) {
        match self {
            Format::Atoms(pieces) => {
                for piece in pieces {
                    match piece {
                        Piece::Text(text) => out.push_str(text),
                        Piece::Atom(atom) => render_atom(atom, rec, out),
                    }
                }
            }
            Format::Json => render_json(rec, out),
        }
    }
}

fn truncate(s: &str) -> &str {
    match s.char_indices().nth(24) {
        Some((at, _)) => &s[..at],
        None => s,
    }
}

fn atom(name: &str) -> Result<Atom, String> {
    let header = |name: &str| {
        if name.is_empty() || !name.bytes().all(is_token) {
            Err(format!("%({{{name}}}...)s: not a header name"))
        } else {
            Ok(name.to_ascii_lowercase())
        }
    };
    if let Some(inner) = name.strip_prefix('{') {
        let Some((field, kind)) = inner.rsplit_once('}') else {
            return Err(format!(
                "%({name})s: a header atom is %({{NAME}}i)s or %({{NAME}}o)s"
            ));
        };
        return match kind {
            "i" => Ok(Atom::RequestHeader(header(field)?)),
            "o" => Ok(Atom::ResponseHeader(header(field)?)),
            "e" => Err(format!(
                "%({name})s: environment atoms are not supported (the log is written without Python)"
            )),
            _ => Err(format!("%({name})s: a header atom is %({{NAME}}i)s or %({{NAME}}o)s")),
        };
    }
    Ok(match name {
        "h" => Atom::RemoteAddr,
        "l" => Atom::Ident,
        "u" => Atom::User,
        "t" => Atom::Time,
        "r" => Atom::RequestLine,
        "m" => Atom::Method,
        "U" => Atom::Path,
        "q" => Atom::Query,
        "H" => Atom::Protocol,
        "s" => Atom::Status,
        "B" => Atom::Bytes,
        "b" => Atom::BytesOrDash,
        "f" => Atom::Referer,
        "a" => Atom::UserAgent,
        "T" => Atom::Seconds,
        "D" => Atom::Micros,
        "M" => Atom::Millis,
        "L" => Atom::DecimalSeconds,
        "p" => Atom::Pid,
        other => {
            return Err(format!(
                "unknown atom %({other})s (known: h l u t r m U q H s B b f a T D M L p, %({{NAME}}i)s, %({{NAME}}o)s)"
            ))
        }
    })
}

/// RFC 9110 tchar.
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn protocol(version: Version) -> &'static str {
    match version {
        Version::Http10 => "HTTP/1.0",
        Version::Http11 => "HTTP/1.1",
        Version::Http2 => "HTTP/2",
    }
}

/// The values of every header `name` (lower-case) in `headers`, joined by
/// `, `; None when there is none.
fn joined<'h>(headers: &'h Fields, name: &str) -> Option<Vec<&'h [u8]>> {
    let found: Vec<&[u8]> = headers.all(name).collect();
    (!found.is_empty()).then_some(found)
}

/// A header's values escaped, or `-`.
fn header_or_dash(headers: &Fields, name: &str, out: &mut String) {
    match joined(headers, name) {
        None => out.push('-'),
        Some(values) => {
            for (i, value) in values.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                escape(value, out);
            }
        }
    }
}

/// Apache's escaping (see the module's comment).
pub(super) fn escape(bytes: &[u8], out: &mut String) {
    for &b in bytes {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
}

fn render_atom(atom: &Atom, rec: &Record<'_>, out: &mut String) {
    let head = rec.head;
    match atom {
        Atom::RemoteAddr => match rec.peer {
            Peer::Tcp(addr) => {
                let _ = write!(out, "{}", addr.ip());
            }
            Peer::Unix => out.push_str("unix"),
        },
        Atom::Ident | Atom::User => out.push('-'),
        Atom::Time => {
            out.push('[');
            out.push_str(&super::clf_time::clf(rec.started_us / 1_000_000));
            out.push(']');
        }
        Atom::RequestLine => {
            escape(head.method.as_bytes(), out);
            out.push(' ');
            escape(head.target.as_bytes(), out);
            out.push(' ');
            out.push_str(protocol(head.version));
        }
        Atom::Method => escape(head.method.as_bytes(), out),
        Atom::Path => escape(head.path().as_bytes(), out),
        Atom::Query => escape(head.query().as_bytes(), out),
        Atom::Protocol => out.push_str(protocol(head.version)),
        Atom::Status => {
            let _ = write!(out, "{}", rec.status);
        }
        Atom::Bytes => {
            let _ = write!(out, "{}", rec.bytes);
        }
        Atom::BytesOrDash if rec.bytes == 0 => out.push('-'),
        Atom::BytesOrDash => {
            let _ = write!(out, "{}", rec.bytes);
        }
        Atom::Referer => header_or_dash(&head.headers, "referer", out),
        Atom::UserAgent => header_or_dash(&head.headers, "user-agent", out),
        Atom::Seconds => {
            let _ = write!(out, "{}", rec.duration.as_secs());
        }
        Atom::Micros => {
            let _ = write!(out, "{}", rec.duration.as_micros());
        }
        Atom::Millis => {
            let _ = write!(out, "{}", rec.duration.as_millis());
        }
        Atom::DecimalSeconds => {
            let d = rec.duration;
            let _ = write!(out, "{}.{:06}", d.as_secs(), d.subsec_micros());
        }
        Atom::Pid => {
            let _ = write!(out, "<{}>", rec.pid);
        }
        Atom::RequestHeader(name) => header_or_dash(&head.headers, name, out),
        Atom::ResponseHeader(name) => header_or_dash(rec.response_headers, name, out),
    }
}

/// A JSON string: RFC 8259's escapes; bytes that are not UTF-8 become U+FFFD.
pub fn json_string(bytes: &[u8], out: &mut String) {
    out.push('"');
    for c in String::from_utf8_lossy(bytes).chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_header(headers: &Fields, name: &str, out: &mut String) {
    match joined(headers, name) {
        None => out.push_str("null"),
        Some(values) => json_string(&values.join(&b", "[..]), out),
    }
}

fn render_json(rec: &Record<'_>, out: &mut String) {
    let head = rec.head;
    out.push_str("{\"time\":\"");
    out.push_str(&super::clf_time::rfc3339_micros(rec.started_us));
    out.push_str("\",\"remote_addr\":");
    match rec.peer {
        Peer::Tcp(addr) => {
            let _ = write!(out, "\"{}\",\"remote_port\":{}", addr.ip(), addr.port());
        }
        Peer::Unix => out.push_str("null,\"remote_port\":null"),
    }
    out.push_str(",\"method\":");
    json_string(head.method.as_bytes(), out);
    out.push_str(",\"path\":");
    json_string(head.path().as_bytes(), out);
    out.push_str(",\"query\":");
    json_string(head.query().as_bytes(), out);
    let _ = write!(
        out,
        ",\"protocol\":\"{}\",\"status\":{},\"bytes\":{},\"referer\":",
        protocol(head.version),
        rec.status,
        rec.bytes
    );
    json_header(&head.headers, "referer", out);
    out.push_str(",\"user_agent\":");
    json_header(&head.headers, "user-agent", out);
    let _ = write!(
        out,
        ",\"duration_us\":{},\"pid\":{}}}",
        rec.duration.as_micros(),
        rec.pid
    );
}

#[cfg(test)]
mod tests;
