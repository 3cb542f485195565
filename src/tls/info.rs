//! What a finished handshake agreed, as the application is told it (ASGI's
//! `tls` extension; WSGI's `wsgi.url_scheme`).

use std::sync::Arc;

use rustls::ServerConnection;

use super::config::pem;

/// The facts of one TLS connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsInfo {
    /// The protocol version's code point (0x0303: TLS 1.2, 0x0304: TLS 1.3).
    pub version: u16,
    /// The cipher suite's IANA code point.
    pub cipher: u16,
    /// The server's leaf certificate, PEM.
    pub server_cert: Arc<str>,
    /// The client's chain, leaf first, PEM (empty without a client certificate).
    pub client_chain: Vec<String>,
    /// The client certificate's subject, as an RFC 4514 string.
    pub client_name: Option<String>,
    /// The application protocol ALPN agreed (None: the client offered none).
    pub alpn: Option<Vec<u8>>,
}

impl TlsInfo {
    /// What `conn`, whose handshake is over, agreed.
    pub fn of(conn: &ServerConnection, server_cert: &Arc<str>) -> TlsInfo {
        let chain = conn.peer_certificates().unwrap_or_default();
        TlsInfo {
            version: conn.protocol_version().map(u16::from).unwrap_or(0),
            cipher: conn
                .negotiated_cipher_suite()
                .map(|s| u16::from(s.suite()))
                .unwrap_or(0),
            server_cert: server_cert.clone(),
            client_chain: chain.iter().map(|c| pem("CERTIFICATE", c)).collect(),
            client_name: chain.first().and_then(|c| subject_rfc4514(c)),
            alpn: conn.alpn_protocol().map(<[u8]>::to_vec),
        }
    }
}

/// The subject of a DER certificate as RFC 4514 writes a distinguished name:
/// the last RDN first, `type=value` joined by `,` (`+` within an RDN).
fn subject_rfc4514(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let mut rdns = Vec::new();
    let rdns_in_order: Vec<_> = cert.subject().iter().collect();
    for rdn in rdns_in_order.into_iter().rev() {
        let mut parts = Vec::new();
        for atv in rdn.iter() {
            let oid = atv.attr_type();
            let name = x509_parser::objects::oid2abbrev(oid, x509_parser::objects::oid_registry())
                .map(str::to_string)
                .unwrap_or_else(|_| oid.to_id_string());
            let value = atv.as_str().ok()?;
            parts.push(format!("{name}={}", escape(value)));
        }
        rdns.push(parts.join("+"));
    }
    Some(rdns.join(","))
}

/// RFC 4514 §2.4: the characters a value cannot carry bare.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, '"' | '+' | ',' | ';' | '<' | '>' | '\\')
            || (i == 0 && matches!(c, '#' | ' '))
            || (i == last && c == ' ');
        if c == '\0' {
            out.push_str("\\00");
            continue;
        }
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn rfc_4514_escapes_what_it_must() {
        assert_eq!(escape("plain"), "plain");
        assert_eq!(escape("a,b+c"), "a\\,b\\+c");
        assert_eq!(escape(" lead and trail "), "\\ lead and trail\\ ");
        assert_eq!(escape("#hash"), "\\#hash");
        assert_eq!(escape("x\"y<z>;\\"), "x\\\"y\\<z\\>\\;\\\\");
    }
}
