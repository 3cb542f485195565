//! The client's address as text (WSGI's `REMOTE_ADDR`/`REMOTE_PORT`, ASGI's
//! `client` host), written into a stack buffer: both interfaces build one per
//! request, and `to_string` cost an allocation and a pass through `fmt` each
//! (bench/results/asgi-peer-text.md).

use std::fmt::{self, Write as _};
use std::net::IpAddr;

/// Up to 45 bytes of ASCII: the longest IPv6 text (an IPv4-mapped address
/// with every group written out) fits.
pub struct PeerText {
    buf: [u8; 45],
    len: usize,
}

impl PeerText {
    fn new() -> PeerText {
        PeerText {
            buf: [0; 45],
            len: 0,
        }
    }

    /// `ip` as `Display` writes it (dotted quad, or RFC 5952 for IPv6).
    pub fn ip(ip: IpAddr) -> PeerText {
        let mut text = PeerText::new();
        match ip {
            IpAddr::V4(v4) => {
                for (i, octet) in v4.octets().into_iter().enumerate() {
                    if i > 0 {
                        text.push(b'.');
                    }
                    text.decimal(u32::from(octet));
                }
            }
            // Rare, and its compression rules are std's to get right.
            IpAddr::V6(v6) => write!(text, "{v6}").expect("an IPv6 text fits in 45 bytes"),
        }
        text
    }

    /// A port in decimal.
    pub fn port(port: u16) -> PeerText {
        let mut text = PeerText::new();
        text.decimal(u32::from(port));
        text
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII is ever written (digits, dots, and std's IPv6 text).
        std::str::from_utf8(&self.buf[..self.len]).expect("peer text is ASCII")
    }

    fn push(&mut self, byte: u8) {
        self.buf[self.len] = byte;
        self.len += 1;
    }

    fn decimal(&mut self, mut n: u32) {
        let mut digits = [0u8; 10];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for &d in &digits[i..] {
            self.push(d);
        }
    }
}

impl fmt::Write for PeerText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn addresses_read_as_display_writes_them() {
        let ips: [IpAddr; 7] = [
            Ipv4Addr::new(127, 0, 0, 1).into(),
            Ipv4Addr::new(0, 0, 0, 0).into(),
            Ipv4Addr::new(255, 255, 255, 255).into(),
            Ipv4Addr::new(10, 200, 3, 99).into(),
            Ipv6Addr::LOCALHOST.into(),
            "2001:db8::8a2e:370:7334"
                .parse::<Ipv6Addr>()
                .unwrap()
                .into(),
            Ipv6Addr::new(
                0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff,
            )
            .into(),
        ];
        for ip in ips {
            assert_eq!(PeerText::ip(ip).as_str(), ip.to_string());
        }
        let mapped: IpAddr = "::ffff:255.255.255.255".parse::<Ipv6Addr>().unwrap().into();
        assert_eq!(PeerText::ip(mapped).as_str(), mapped.to_string());
    }

    #[test]
    fn ports_read_in_decimal() {
        for port in [0u16, 7, 10, 80, 443, 8000, 9999, 10000, 65535] {
            assert_eq!(PeerText::port(port).as_str(), port.to_string());
        }
    }
}
