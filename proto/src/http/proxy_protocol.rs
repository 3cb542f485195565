//! The PROXY protocol preamble (HAProxy's spec, versions 1 and 2): the first
//! bytes a load balancer (AWS NLB, HAProxy, ingress controllers) sends on a
//! connection, naming the client it accepted. Sans IO: [`parse`] looks at
//! the start of a connection's bytes and says how many the preamble took.
//!
//! Strict choices where the spec leaves room:
//! - A malformed preamble is an error, never a guess: v1 needs single spaces,
//!   the exact fields, addresses of the family named (no leading zeros in
//!   IPv4), decimal ports, `\r\n` within 107 bytes; v2 needs version 2, the
//!   PROXY or LOCAL command, and a length that holds the addresses of its family.
//! - `UNKNOWN` (v1), LOCAL and the UNSPEC family (v2): the connection's own
//!   peer stands ([`Preamble::Local`]), as the spec asks. A v2 AF_UNIX
//!   address names no IP client, so the peer stands too. A datagram
//!   protocol on a stream connection is an error.
//! - v2 TLVs are skipped, but walked: one that runs past the header is an error.
//! - Length is bounded by the spec (107 bytes for v1; 16 + the 16-bit length
//!   for v2); time by the header-read timeout (the caller's).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The v2 signature (spec §2.2).
const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// The longest v1 line, `\r\n` included (spec §2.1).
const V1_MAX: usize = 107;

/// What a valid preamble says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preamble {
    /// The client's address, as the proxy accepted it.
    Proxied(SocketAddr),
    /// No client address (a health check of the proxy's own, or one it
    /// cannot express): the connection's peer stands.
    Local,
}

/// The preamble is not one: the connection closes without an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed;

/// The preamble at the start of `buf` and its length; `Ok(None)` while it
/// may still be one but is incomplete.
pub fn parse(buf: &[u8]) -> Result<Option<(Preamble, usize)>, Malformed> {
    let n = buf.len().min(V2_SIGNATURE.len());
    if buf[..n] == V2_SIGNATURE[..n] {
        return if n == V2_SIGNATURE.len() {
            v2(buf)
        } else {
            Ok(None)
        };
    }
    let n = buf.len().min(6);
    if buf[..n] != b"PROXY "[..n] {
        return Err(Malformed);
    }
    v1(buf)
}

fn v1(buf: &[u8]) -> Result<Option<(Preamble, usize)>, Malformed> {
    // The CR must leave room for its LF within the limit.
    let window = &buf[..buf.len().min(V1_MAX - 1)];
    let Some(cr) = window.iter().position(|&b| b == b'\r') else {
        return if window.len() == V1_MAX - 1 {
            Err(Malformed)
        } else {
            Ok(None)
        };
    };
    match buf.get(cr + 1) {
        None => return Ok(None),
        Some(b'\n') => {}
        Some(_) => return Err(Malformed),
    }
    let line = std::str::from_utf8(&buf[6..cr]).map_err(|_| Malformed)?;
    if !line.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        return Err(Malformed);
    }
    let fields: Vec<&str> = line.split(' ').collect();
    let preamble = match fields.as_slice() {
        // "the receiver must ignore anything presented before the CRLF"
        ["UNKNOWN", ..] => Preamble::Local,
        [family, source, destination, sport, dport] => {
            let ip = match *family {
                "TCP4" => IpAddr::V4(source.parse::<Ipv4Addr>().map_err(|_| Malformed)?),
                "TCP6" => IpAddr::V6(source.parse::<Ipv6Addr>().map_err(|_| Malformed)?),
                _ => return Err(Malformed),
            };
            let dst_ok = match *family {
                "TCP4" => destination.parse::<Ipv4Addr>().is_ok(),
                _ => destination.parse::<Ipv6Addr>().is_ok(),
            };
            if !dst_ok {
                return Err(Malformed);
            }
            let sport = v1_port(sport)?;
            v1_port(dport)?;
            Preamble::Proxied(SocketAddr::new(ip, sport))
        }
        _ => return Err(Malformed),
    };
    Ok(Some((preamble, cr + 2)))
}

/// A decimal port, 0..=65535, without sign or leading zeros.
fn v1_port(s: &str) -> Result<u16, Malformed> {
    let digits = !s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits || (s.len() > 1 && s.starts_with('0')) {
        return Err(Malformed);
    }
    s.parse().map_err(|_| Malformed)
}

fn v2(buf: &[u8]) -> Result<Option<(Preamble, usize)>, Malformed> {
    let Some(head) = buf.get(..16) else {
        // The version and command byte can be judged early.
        return match buf.get(12) {
            Some(&b) if b >> 4 != 2 || b & 0xf > 1 => Err(Malformed),
            _ => Ok(None),
        };
    };
    let (version_command, family, len) =
        (head[12], head[13], u16::from_be_bytes([head[14], head[15]]));
    if version_command >> 4 != 2 {
        return Err(Malformed);
    }
    let local = match version_command & 0xf {
        0 => true,
        1 => false,
        _ => return Err(Malformed),
    };
    let (address_family, transport) = (family >> 4, family & 0xf);
    let address_len = match address_family {
        0 => 0,
        1 => 12,
        2 => 36,
        3 => 216,
        _ => return Err(Malformed),
    };
    if transport > 2 || (transport == 2 && !local) || usize::from(len) < address_len {
        return Err(Malformed);
    }
    let total = 16 + usize::from(len);
    let Some(body) = buf.get(16..total) else {
        return Ok(None);
    };
    skip_tlvs(&body[address_len..])?;
    let client = match address_family {
        _ if local => None,
        1 => {
            let ip = Ipv4Addr::new(body[0], body[1], body[2], body[3]);
            Some(SocketAddr::new(
                ip.into(),
                u16::from_be_bytes([body[8], body[9]]),
            ))
        }
        2 => {
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&body[..16]);
            let ip = Ipv6Addr::from(octets);
            Some(SocketAddr::new(
                ip.into(),
                u16::from_be_bytes([body[32], body[33]]),
            ))
        }
        _ => None, // UNSPEC or AF_UNIX: no IP client to name
    };
    if !local && address_family != 0 && transport == 0 {
        return Err(Malformed); // PROXY over an unspecified transport, with addresses
    }
    Ok(Some((
        client.map_or(Preamble::Local, Preamble::Proxied),
        total,
    )))
}

/// Walk the TLVs (type, 16-bit length, value) to the end: none may overrun.
fn skip_tlvs(mut tlvs: &[u8]) -> Result<(), Malformed> {
    while !tlvs.is_empty() {
        let [_, hi, lo, rest @ ..] = tlvs else {
            return Err(Malformed);
        };
        let n = usize::from(u16::from_be_bytes([*hi, *lo]));
        tlvs = rest.get(n..).ok_or(Malformed)?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "proxy_protocol_tests.rs"]
mod tests;
