//! The peers trusted to speak for their clients (`--forwarded-allow-ips`):
//! proxies whose forwarding headers and PROXY protocol preambles are believed.
//!
//! The list is uvicorn's: comma-separated addresses and CIDR networks, `*`
//! for every peer, default `127.0.0.1`. Stricter than uvicorn in one way: an
//! entry that is neither an address, a network nor `*` is an error (uvicorn
//! keeps it as a literal host name that only a Unix socket path could match),
//! because a mistyped entry that silently trusts nothing, or something else,
//! is worse than a refusal at start. A network with host bits set
//! (`10.0.0.1/8`) is an error for the same reason (Python's `ip_network`
//! refuses it too).
//!
//! An IPv4-mapped IPv6 peer (`::ffff:10.0.0.1`, what a dual-stack `[::]`
//! listener reports for IPv4 clients) is matched as the IPv4 address it is.

use std::net::IpAddr;

/// The trusted peers: every peer, or those in the listed networks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trusted {
    any: bool,
    /// Networks as (address, prefix length); a single address is a full-length prefix.
    nets: Vec<(IpAddr, u8)>,
}

impl Default for Trusted {
    /// uvicorn's default: the local IPv4 loopback address only.
    fn default() -> Self {
        Trusted {
            any: false,
            nets: vec![(IpAddr::from([127, 0, 0, 1]), 32)],
        }
    }
}

impl Trusted {
    /// Parse a comma-separated list of addresses, CIDR networks and `*`.
    pub fn parse(list: &str) -> Result<Trusted, String> {
        let mut trusted = Trusted {
            any: false,
            nets: Vec::new(),
        };
        for entry in list.split(',').map(str::trim) {
            if entry == "*" {
                trusted.any = true;
            } else if entry.is_empty() {
                return Err(
                    "an empty entry (expected addresses or CIDR networks, comma-separated, or *)"
                        .into(),
                );
            } else {
                trusted.nets.push(parse_net(entry)?);
            }
        }
        Ok(trusted)
    }

    /// Every peer is trusted (`*`).
    pub fn all(&self) -> bool {
        self.any
    }

    /// Whether `ip` is a trusted peer.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.any || self.nets.iter().any(|&(net, len)| in_net(ip, net, len))
    }
}

fn parse_net(entry: &str) -> Result<(IpAddr, u8), String> {
    let bad = || format!("{entry:?} is not an IP address or CIDR network");
    let (addr, len) = match entry.split_once('/') {
        None => (entry, None),
        Some((addr, len)) => (addr, Some(len)),
    };
    let ip: IpAddr = addr.parse().map_err(|_| bad())?;
    let ip = ip.to_canonical();
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len = match len {
        None => max,
        Some(len) if len.bytes().all(|b| b.is_ascii_digit()) && !len.is_empty() => len
            .parse::<u8>()
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(bad)?,
        Some(_) => return Err(bad()),
    };
    if mask(ip, len) != ip {
        return Err(format!(
            "{entry:?} has host bits set (did you mean {}/{len}?)",
            mask(ip, len)
        ));
    }
    Ok((ip, len))
}

/// `ip` with all but its first `len` bits cleared.
fn mask(ip: IpAddr, len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            std::net::Ipv4Addr::from(u32::from(v4) & m).into()
        }
        IpAddr::V6(v6) => {
            let m = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            std::net::Ipv6Addr::from(u128::from(v6) & m).into()
        }
    }
}

fn in_net(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    ip.is_ipv4() == net.is_ipv4() && mask(ip, len) == net
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn default_is_ipv4_loopback_only() {
        let t = Trusted::default();
        assert!(t.contains(ip("127.0.0.1")));
        assert!(t.contains(ip("::ffff:127.0.0.1")), "mapped IPv4 matches");
        assert!(!t.contains(ip("127.0.0.2")));
        assert!(!t.contains(ip("::1")), "uvicorn's default names IPv4 only");
    }

    #[test]
    fn addresses_networks_and_star() {
        let t = Trusted::parse(" 10.0.0.0/8, 192.168.1.5 ,2001:db8::/32").unwrap();
        assert!(t.contains(ip("10.255.0.1")));
        assert!(!t.contains(ip("11.0.0.1")));
        assert!(t.contains(ip("192.168.1.5")));
        assert!(!t.contains(ip("192.168.1.6")));
        assert!(t.contains(ip("2001:db8:1::1")));
        assert!(!t.contains(ip("2001:db9::1")));
        assert!(
            t.contains(ip("::ffff:10.1.2.3")),
            "mapped IPv4 peers match IPv4 networks"
        );
        assert!(!t.all());
        let star = Trusted::parse("*").unwrap();
        assert!(star.all() && star.contains(ip("8.8.8.8")) && star.contains(ip("::1")));
        let zero = Trusted::parse("0.0.0.0/0").unwrap();
        assert!(zero.contains(ip("8.8.8.8")) && !zero.contains(ip("::1")));
    }

    #[test]
    fn bad_entries_are_refused() {
        for bad in [
            "",
            "10.0.0.1,",
            "localhost",
            "10.0.0.0/33",
            "10.0.0.1/8",
            "::1/129",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "10.0.0.0/8/8",
            "010.0.0.1",
            "unix:/tmp/s",
        ] {
            assert!(Trusted::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
