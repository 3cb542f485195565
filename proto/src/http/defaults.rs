//! The fields the server adds to every response head it writes (the app's,
//! the native routes' and its own error answers alike) unless the response
//! sets a field of that name itself: `Server` (`--no-server-header` turns it
//! off) and the operator's `--header NAME:VALUE` fields, as uvicorn's
//! `--header` (a site's `Strict-Transport-Security` or `X-Frame-Options`).
//!
//! Where uvicorn sends its default field beside an app's field of the same
//! name, a default here gives way to the app's: a singleton field such as
//! `Cache-Control` or `X-Frame-Options` sent twice is invalid (RFC 9110
//! §5.3), and what the app says of its own response is the more specific.
//! A `--header Server:...` stands in for ours, as in uvicorn.

use super::response::{field_is_safe, push_field, SERVER};

/// Fields the protocol writes itself (framing, connection management, the
/// date it must send: RFC 9110 §6.6.1, the WebSocket handshake's: a client
/// fails a 101 naming a subprotocol or extension it was not agreed, RFC 6455
/// §4.1), so an operator may not set them.
const OWNED: [&str; 9] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "date",
    "upgrade",
    "trailer",
    "sec-websocket-accept",
    "sec-websocket-protocol",
    "sec-websocket-extensions",
];

/// What every response gets unless it sets the field itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Defaults {
    /// `Server: m0serve` (unless a field of `fields` names `Server`).
    server: bool,
    fields: Vec<(String, Vec<u8>)>,
}

/// The server's own `Server` field only: what a connection uses unless
/// given others.
pub static STANDARD: Defaults = Defaults {
    server: true,
    fields: Vec::new(),
};

impl Defaults {
    /// `server`: send `Server: m0serve`; `fields`: checked by [`parse_field`].
    pub fn new(server: bool, fields: Vec<(String, Vec<u8>)>) -> Self {
        Defaults { server, fields }
    }

    /// Append the fields no name in `set` (the response's own, checked
    /// case-insensitively) already carries. A field of `set` that is not safe
    /// to write was dropped, so it stands in for nothing.
    pub(crate) fn write(&self, set: &[(&str, &[u8])], out: &mut Vec<u8>) {
        self.each(set, |name, value| push_field(out, name.as_bytes(), value));
    }

    /// Each field [`Defaults::write`] would append, as a name and a value,
    /// for a protocol that encodes them its own way (HTTP/2).
    pub fn each(&self, set: &[(&str, &[u8])], mut f: impl FnMut(&str, &[u8])) {
        let has = |name: &str| {
            set.iter()
                .any(|&(n, v)| n.eq_ignore_ascii_case(name) && field_is_safe(n, v))
        };
        let mut server = self.server && !has("server");
        for (name, value) in &self.fields {
            server &= !name.eq_ignore_ascii_case("server");
            if !has(name) {
                f(name, value);
            }
        }
        if server {
            f("Server", SERVER);
        }
    }
}

impl Default for Defaults {
    fn default() -> Self {
        STANDARD.clone()
    }
}

/// One `NAME:VALUE` of `--header`: the name a token, the value without
/// control characters, spaces around it dropped (RFC 9110 §5.5), and the
/// name not one the protocol owns.
pub fn parse_field(text: &str) -> Result<(String, Vec<u8>), String> {
    let (name, value) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?} is not NAME:VALUE"))?;
    let value = value.trim_matches([' ', '\t']);
    if !field_is_safe(name, value.as_bytes()) {
        return Err(format!(
            "{text:?}: a field name is a token (letters, digits, !#$%&'*+-.^_`|~) and its value has no control characters"
        ));
    }
    if OWNED.iter().any(|o| name.eq_ignore_ascii_case(o)) {
        return Err(format!("{name} is written by the server itself"));
    }
    Ok((name.to_string(), value.as_bytes().to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(d: &Defaults, set: &[(&str, &[u8])]) -> String {
        let mut out = Vec::new();
        d.write(set, &mut out);
        String::from_utf8(out).unwrap()
    }

    fn with(fields: &[&str]) -> Defaults {
        let fields = fields.iter().map(|f| parse_field(f).unwrap()).collect();
        Defaults::new(true, fields)
    }

    #[test]
    fn the_standard_is_our_server_field_unless_the_response_has_one() {
        assert_eq!(written(&STANDARD, &[]), "Server: m0serve\r\n");
        assert_eq!(written(&STANDARD, &[("SERVER", b"app")]), "");
        assert_eq!(written(&Defaults::new(false, vec![]), &[]), "");
    }

    #[test]
    fn fields_are_added_where_the_response_has_none_of_that_name() {
        let d = with(&[
            "X-Frame-Options: DENY",
            "Strict-Transport-Security:max-age=63072000",
        ]);
        assert_eq!(
            written(&d, &[]),
            "X-Frame-Options: DENY\r\nStrict-Transport-Security: max-age=63072000\r\nServer: m0serve\r\n"
        );
        assert_eq!(
            written(&d, &[("x-frame-options", b"SAMEORIGIN")]),
            "Strict-Transport-Security: max-age=63072000\r\nServer: m0serve\r\n",
            "the response's own field wins, whatever its case"
        );
    }

    #[test]
    fn an_apps_field_dropped_as_unsafe_does_not_stand_in_for_a_default() {
        let d = with(&["X-Frame-Options: DENY"]);
        assert_eq!(
            written(&d, &[("X-Frame-Options", b"a\rb"), ("Server", b"\0")]),
            "X-Frame-Options: DENY\r\nServer: m0serve\r\n"
        );
    }

    #[test]
    fn a_server_field_stands_in_for_ours_even_when_ours_is_off() {
        let d = with(&["Server: edge", "server: v2"]);
        assert_eq!(written(&d, &[]), "Server: edge\r\nserver: v2\r\n");
        let off = Defaults::new(false, vec![parse_field("Server:edge").unwrap()]);
        assert_eq!(written(&off, &[]), "Server: edge\r\n");
        assert_eq!(written(&d, &[("Server", b"app")]), "");
    }

    #[test]
    fn bad_fields_are_refused() {
        for bad in [
            "no colon",
            ":empty name",
            "sp ace: x",
            "X-Bad: a\r\nInjected: 1",
            "X-Bad: a\nb",
            "X-Nul: \0",
            "Content-Length: 5",
            "transfer-encoding: chunked",
            "Connection: close",
            "Date: Mon, 01 Jan 2024 00:00:00 GMT",
            "Sec-WebSocket-Extensions: permessage-deflate",
            "sec-websocket-protocol: chat",
        ] {
            assert!(parse_field(bad).is_err(), "{bad:?} was taken");
        }
        assert_eq!(
            parse_field("X-Empty:").unwrap(),
            ("X-Empty".into(), Vec::new())
        );
        assert_eq!(
            parse_field("X-Colon: a:b ").unwrap(),
            ("X-Colon".into(), b"a:b".to_vec())
        );
    }
}
