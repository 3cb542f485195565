//! The opening handshake (RFC 6455 §4.2): validating a client's upgrade
//! request and the headers of the server's `101 Switching Protocols`.
//!
//! A request is a WebSocket attempt when its `Upgrade` header lists the
//! `websocket` token in HTTP/1.1 ([`is_websocket_request`]; an HTTP/1.0
//! request's `Upgrade` is ignored); [`validate`] then holds it to
//! §4.2.1. Refusals: 400 for a request that is not a valid handshake (method,
//! version, the `Connection: upgrade` token, `Sec-WebSocket-Key`), and 426
//! with `Sec-WebSocket-Version: 13` for a version other than 13 (§4.4),
//! a missing one included. Tokens are compared case-insensitively; headers
//! sent on several lines are read as one list.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use super::deflate;
use crate::http::head::list_items;
use crate::http::{RequestHead, Version};

/// Appended to the client's key before hashing (§1.3).
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// A request that cannot be upgraded, with the status it is answered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeError {
    /// 400: not a valid opening handshake.
    BadRequest(&'static str),
    /// 426: a `Sec-WebSocket-Version` other than 13, or none.
    UnsupportedVersion,
}

impl HandshakeError {
    pub fn status(&self) -> u16 {
        match self {
            HandshakeError::BadRequest(_) => 400,
            HandshakeError::UnsupportedVersion => 426,
        }
    }

    /// A short explanation, for the answer's body.
    pub fn reason(&self) -> &'static str {
        match self {
            HandshakeError::BadRequest(why) => why,
            HandshakeError::UnsupportedVersion => "unsupported WebSocket version",
        }
    }

    /// Headers the answer must carry: the version we speak, on a 426.
    pub fn headers(&self) -> &'static [(&'static str, &'static [u8])] {
        match self {
            HandshakeError::BadRequest(_) => &[],
            HandshakeError::UnsupportedVersion => &[("Sec-WebSocket-Version", b"13")],
        }
    }
}

/// A valid upgrade request: what the 101 needs, and what the app is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upgrade {
    /// `Sec-WebSocket-Accept`: 28 base64 characters.
    accept: [u8; 28],
    /// The subprotocols the client offered, in its order of preference.
    pub subprotocols: Vec<String>,
    /// The permessage-deflate offer accepted, if any.
    deflate: Option<deflate::Agreement>,
}

impl Upgrade {
    /// Whether permessage-deflate is agreed (the connection must then be
    /// made [`crate::ws::WsConn::with_deflate`]).
    pub fn deflate(&self) -> bool {
        self.deflate.is_some()
    }

    /// Leave permessage-deflate out (the server has it off).
    pub fn refuse_deflate(&mut self) {
        self.deflate = None;
    }

    /// The `Sec-WebSocket-Accept` value.
    pub fn accept(&self) -> &[u8] {
        &self.accept
    }

    /// The headers of the `101 Switching Protocols` answer, then those of
    /// `app` that the handshake does not write itself ([`app_may_set`]).
    /// `subprotocol` is the app's choice; a client fails the connection if it
    /// is not one it offered.
    pub fn response_headers<'a>(
        &'a self,
        subprotocol: Option<&'a str>,
        app: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> Vec<(&'a str, &'a [u8])> {
        let mut headers = vec![
            ("Upgrade", &b"websocket"[..]),
            ("Connection", b"Upgrade"),
            ("Sec-WebSocket-Accept", &self.accept[..]),
        ];
        if let Some(p) = subprotocol {
            headers.push(("Sec-WebSocket-Protocol", p.as_bytes()));
        }
        if let Some(agreed) = &self.deflate {
            headers.push(("Sec-WebSocket-Extensions", agreed.response()));
        }
        for (name, value) in app {
            // The app interface took it as the choice, written above.
            if name.eq_ignore_ascii_case("sec-websocket-protocol") {
                continue;
            }
            if app_may_set(name) {
                headers.push((name, value));
            } else {
                tracing::warn!(
                    name,
                    "dropped a field of the WebSocket handshake the app set itself"
                );
            }
        }
        headers
    }
}

/// Whether an app's `websocket.accept` may carry the field `name`. Not the
/// ones the handshake writes: a second `Sec-WebSocket-Accept` or `Connection`
/// breaks the answer, and an extension the server did not agree to would
/// have the client expect frames it never gets (RFC 6455 §9.1: a server
/// answers only with extensions it speaks). `Sec-WebSocket-Protocol` is
/// never taken from `app` either: it is written from the app's choice, which
/// the app interface checks against the client's offer (RFC 6455 §4.1: a
/// client fails the connection on a subprotocol it did not offer, or on two).
fn app_may_set(name: &str) -> bool {
    const OURS: [&str; 4] = [
        "upgrade",
        "connection",
        "sec-websocket-accept",
        "sec-websocket-extensions",
    ];
    !OURS.iter().any(|o| name.eq_ignore_ascii_case(o))
}

/// Whether `head` asks for a WebSocket: its `Upgrade` lists `websocket`, in
/// an HTTP/1.1 request. An HTTP/1.0 request's `Upgrade` is ignored (RFC 9110
/// §7.8: a server MUST), and the request is served as plain HTTP.
pub fn is_websocket_request(head: &RequestHead) -> bool {
    head.version == Version::Http11 && has_token(head, "upgrade", b"websocket")
}

/// Holds an upgrade request to RFC 6455 §4.2.1.
pub fn validate(head: &RequestHead) -> Result<Upgrade, HandshakeError> {
    if head.method != "GET" {
        return Err(HandshakeError::BadRequest("WebSocket upgrade must be GET"));
    }
    if head.version != Version::Http11 {
        return Err(HandshakeError::BadRequest(
            "WebSocket upgrade needs HTTP/1.1",
        ));
    }
    if !is_websocket_request(head) {
        return Err(HandshakeError::BadRequest("missing Upgrade: websocket"));
    }
    if !has_token(head, "connection", b"upgrade") {
        return Err(HandshakeError::BadRequest("missing Connection: upgrade"));
    }
    if head.header("sec-websocket-version").map(<[u8]>::trim_ascii) != Some(b"13") {
        return Err(HandshakeError::UnsupportedVersion);
    }
    let mut keys = values(head, "sec-websocket-key");
    let (Some(key), None) = (keys.next(), keys.next()) else {
        return Err(HandshakeError::BadRequest(
            "need exactly one Sec-WebSocket-Key",
        ));
    };
    let key = key.trim_ascii();
    // 16 bytes encode to 24 characters; the buffer holds what 24 could decode to.
    let mut nonce = [0u8; 18];
    if key.len() != 24 || STANDARD.decode_slice(key, &mut nonce) != Ok(16) {
        return Err(HandshakeError::BadRequest("invalid Sec-WebSocket-Key"));
    }
    let subprotocols = values(head, "sec-websocket-protocol")
        .flat_map(list_items)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    Ok(Upgrade {
        accept: accept_key(key),
        subprotocols,
        deflate: deflate::negotiate(values(head, "sec-websocket-extensions")),
    })
}

/// `Sec-WebSocket-Accept` for a client's key: base64(SHA-1(key + GUID)).
pub fn accept_key(key: &[u8]) -> [u8; 28] {
    let mut sha1 = sha1_smol::Sha1::new();
    sha1.update(key);
    sha1.update(GUID);
    let mut accept = [0u8; 28];
    // 20 bytes always encode to exactly 28 characters.
    let written = STANDARD.encode_slice(sha1.digest().bytes(), &mut accept);
    debug_assert_eq!(written, Ok(28));
    accept
}

/// The values of every header line called `name`.
fn values<'a>(head: &'a RequestHead, name: &'a str) -> impl Iterator<Item = &'a [u8]> {
    head.headers.all(name)
}

/// Whether any `name` header lists `token` (case-insensitive).
fn has_token(head: &RequestHead, name: &str, token: &[u8]) -> bool {
    values(head, name)
        .flat_map(list_items)
        .any(|t| t.eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::head::parse;

    const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

    fn head(extra: &str) -> RequestHead {
        request("GET", "HTTP/1.1", extra)
    }

    fn request(method: &str, version: &str, extra: &str) -> RequestHead {
        let text = format!("{method} /chat {version}\r\nHost: h\r\n{extra}\r\n");
        parse(text.as_bytes()).unwrap()
    }

    fn good(extra: &str) -> String {
        format!(
            "Upgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n{extra}"
        )
    }

    #[test]
    fn accept_key_matches_the_rfc_example() {
        assert_eq!(&accept_key(KEY.as_bytes()), b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn a_valid_request_gets_the_101_headers() {
        let up = validate(&head(&good(""))).unwrap();
        assert!(up.subprotocols.is_empty());
        assert_eq!(
            up.response_headers(None, []),
            [
                ("Upgrade", &b"websocket"[..]),
                ("Connection", b"Upgrade"),
                ("Sec-WebSocket-Accept", b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
            ]
        );
    }

    #[test]
    fn the_app_cannot_set_the_fields_of_the_handshake() {
        let up = validate(&head(&good(""))).unwrap();
        let app: [(&str, &[u8]); 6] = [
            ("X-App", b"1"),
            ("sec-websocket-accept", b"forged"),
            ("Sec-WebSocket-Extensions", b"permessage-deflate"),
            ("Connection", b"close"),
            ("upgrade", b"h2c"),
            ("Sec-WebSocket-Protocol", b"chat"),
        ];
        let names = |h: Vec<(&str, &[u8])>| -> Vec<String> {
            h.iter().map(|(n, _)| n.to_ascii_lowercase()).collect()
        };
        assert_eq!(
            names(up.response_headers(None, app)),
            ["upgrade", "connection", "sec-websocket-accept", "x-app"],
            "the subprotocol is the app's only through its choice"
        );
        let chosen = up.response_headers(Some("v2"), app);
        let protocols: Vec<_> = chosen
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("sec-websocket-protocol"))
            .collect();
        assert_eq!(protocols, [&("Sec-WebSocket-Protocol", &b"v2"[..])]);
    }

    #[test]
    fn tokens_match_case_insensitively_inside_lists() {
        let h = head(&format!(
            "upgrade: WebSocket\r\nconnection: keep-alive, UPGRADE\r\n\
             sec-websocket-key:  {KEY} \r\nsec-websocket-version: 13\r\n"
        ));
        assert!(is_websocket_request(&h));
        assert!(validate(&h).is_ok());
        // The token split over two header lines.
        let h = head(&format!(
            "Upgrade: h2c\r\nUpgrade: websocket\r\nConnection: keep-alive\r\nConnection: upgrade\r\n\
             Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n"
        ));
        assert!(validate(&h).is_ok());
    }

    #[test]
    fn subprotocols_are_collected_in_order() {
        let up = validate(&head(&good(
            "Sec-WebSocket-Protocol: chat, superchat\r\nSec-WebSocket-Protocol: v2\r\n",
        )))
        .unwrap();
        assert_eq!(up.subprotocols, ["chat", "superchat", "v2"]);
        let headers = up.response_headers(Some("superchat"), []);
        assert_eq!(
            headers.last(),
            Some(&("Sec-WebSocket-Protocol", &b"superchat"[..]))
        );
    }

    #[test]
    fn not_a_websocket_request() {
        assert!(!is_websocket_request(&head("")));
        assert!(!is_websocket_request(&head("Upgrade: h2c\r\n")));
        assert!(!is_websocket_request(&request(
            "GET",
            "HTTP/1.0",
            &good("")
        )));
        assert_eq!(
            validate(&head("Connection: upgrade\r\nUpgrade: h2c\r\n")),
            Err(HandshakeError::BadRequest("missing Upgrade: websocket"))
        );
    }

    #[test]
    fn wrong_method_or_version_is_400() {
        let err = validate(&request("POST", "HTTP/1.1", &good(""))).unwrap_err();
        assert_eq!(err.status(), 400);
        let err = validate(&request("GET", "HTTP/1.0", &good(""))).unwrap_err();
        assert_eq!(err.status(), 400);
    }

    #[test]
    fn missing_connection_upgrade_is_400() {
        let h = head(&format!(
            "Upgrade: websocket\r\nConnection: keep-alive\r\n\
             Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n"
        ));
        assert_eq!(
            validate(&h),
            Err(HandshakeError::BadRequest("missing Connection: upgrade"))
        );
    }

    #[test]
    fn other_versions_are_426_naming_13() {
        for version in [
            "",
            "Sec-WebSocket-Version: 8\r\n",
            "Sec-WebSocket-Version: 130\r\n",
        ] {
            let h = head(&format!(
                "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {KEY}\r\n{version}"
            ));
            let err = validate(&h).unwrap_err();
            assert_eq!(err, HandshakeError::UnsupportedVersion, "{version:?}");
            assert_eq!(err.status(), 426);
            assert_eq!(err.headers(), [("Sec-WebSocket-Version", &b"13"[..])]);
        }
    }

    #[test]
    fn the_101_leaves_through_the_http_connection_and_frames_follow() {
        use crate::http::{Event, Limits, ServerConn};
        use crate::ws::frame::client_frame;
        use crate::ws::{WsConn, WsEvent};

        let mut http = ServerConn::new(Limits::default());
        let request = format!("GET /chat HTTP/1.1\r\nHost: h\r\n{}\r\n", good(""));
        // The client's first frame came in the same read as its request.
        let hello = client_frame(true, 1, b"Hello", [1, 2, 3, 4]);
        http.recv(&[request.as_bytes(), &hello].concat());
        let Some(Event::Head(head)) = http.next_event() else {
            panic!()
        };
        let upgrade = validate(&head).unwrap();
        let mut out = Vec::new();
        http.start_response(101, &upgrade.response_headers(None, []), &mut out);
        http.finish_response(&mut out);
        let response = String::from_utf8(out).unwrap();
        assert!(response.starts_with("HTTP/1.1 101 Switching Protocols\r\n"));
        assert!(response.contains("\r\nConnection: Upgrade\r\n"));
        assert!(response.contains("\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
        assert!(response.ends_with("\r\n\r\n") && !response.contains("Content-Length"));

        assert!(http.is_upgraded());
        let mut ws = WsConn::new(1 << 20);
        ws.recv(&http.take_buffered());
        assert_eq!(ws.next_event(), Some(WsEvent::Text("Hello".into())));
    }

    #[test]
    fn keys_must_decode_to_sixteen_bytes() {
        for key in [
            "",
            "Sec-WebSocket-Key: \r\n",
            // 15 and 17 bytes encoded.
            "Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAA\r\n",
            "Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAAA=\r\n",
            // 24 characters, not base64.
            "Sec-WebSocket-Key: !!!!!!!!!!!!!!!!!!!!!!==\r\n",
            // Twice.
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
        ] {
            let h = head(&format!(
                "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n{key}"
            ));
            let err = validate(&h).unwrap_err();
            assert_eq!(err.status(), 400, "{key:?}");
            assert!(err.headers().is_empty());
        }
    }
}
