//! `--bind ADDRESS`, gunicorn's forms: `HOST:PORT` (a name, or an IPv4
//! address), `[IPV6]:PORT`, `unix:PATH` and `fd://N`; a host without a port
//! listens on 8000, as gunicorn's does. An IPv6 address goes in brackets, as
//! in a URL (`[::]:8000`), so its colons are not taken for the port's.

use std::net::Ipv6Addr;

use crate::server::Listen;

/// The port of a `--bind` that names none (gunicorn's).
const DEFAULT_PORT: u16 = 8000;

/// One `--bind` value.
pub(super) fn parse(value: &str) -> Result<Listen, String> {
    let value = value.trim();
    if let Some(path) = value
        .strip_prefix("unix://")
        .or_else(|| value.strip_prefix("unix:"))
    {
        if path.is_empty() {
            return Err("unix: needs a path (unix:/run/app.sock)".into());
        }
        return Ok(Listen::Unix(path.into()));
    }
    if let Some(n) = value.strip_prefix("fd://") {
        return match n.parse::<i32>() {
            Ok(fd) if fd >= 0 => Ok(Listen::Fd { fd, systemd: false }),
            _ => Err(format!("fd://{n}: not a descriptor number")),
        };
    }
    let (host, port) = match value.strip_prefix('[') {
        Some(rest) => {
            let (addr, after) = rest
                .split_once(']')
                .ok_or("an IPv6 address's bracket is not closed ([::1]:8000)")?;
            addr.parse::<Ipv6Addr>()
                .map_err(|_| format!("[{addr}] is not an IPv6 address"))?;
            let port = match after {
                "" => None,
                _ => Some(after.strip_prefix(':').ok_or("expected :PORT after ]")?),
            };
            (addr, port)
        }
        None => match value.rsplit_once(':') {
            Some((host, _)) if host.contains(':') => {
                return Err("an IPv6 address goes in brackets ([::1]:8000)".into())
            }
            Some((host, port)) => (host, Some(port)),
            None => (value, None),
        },
    };
    if host.is_empty() {
        return Err("expected HOST:PORT, [::]:PORT, unix:PATH or fd://N".into());
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(port) => port
            .parse()
            .map_err(|_| format!("{port:?} is not a port (0-65535)"))?,
    };
    Ok(Listen::Tcp {
        host: host.to_string(),
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(host: &str, port: u16) -> Listen {
        Listen::Tcp {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn every_form_is_read() {
        assert_eq!(parse("127.0.0.1:8001"), Ok(tcp("127.0.0.1", 8001)));
        assert_eq!(parse("localhost:0"), Ok(tcp("localhost", 0)));
        assert_eq!(parse("0.0.0.0"), Ok(tcp("0.0.0.0", 8000)));
        assert_eq!(parse("[::]:8002"), Ok(tcp("::", 8002)));
        assert_eq!(parse("[::1]:80"), Ok(tcp("::1", 80)));
        assert_eq!(parse("[::1]"), Ok(tcp("::1", 8000)));
        assert_eq!(parse(" 10.0.0.1:9 "), Ok(tcp("10.0.0.1", 9)));
        assert_eq!(
            parse("unix:/run/app.sock"),
            Ok(Listen::Unix("/run/app.sock".into()))
        );
        assert_eq!(
            parse("unix:///run/app.sock"),
            Ok(Listen::Unix("/run/app.sock".into()))
        );
        assert_eq!(
            parse("fd://3"),
            Ok(Listen::Fd {
                fd: 3,
                systemd: false
            })
        );
    }

    #[test]
    fn what_is_no_address_is_refused_saying_why() {
        for (value, why) in [
            ("", "expected HOST:PORT"),
            (":8000", "expected HOST:PORT"),
            ("host:http", "not a port"),
            ("host:65536", "not a port"),
            ("::1:8000", "in brackets"),
            ("[::1:8000", "not closed"),
            ("[::1]8000", "expected :PORT"),
            ("[nope]:80", "not an IPv6 address"),
            ("[::1]:x", "not a port"),
            ("unix:", "needs a path"),
            ("fd://", "not a descriptor"),
            ("fd://-1", "not a descriptor"),
            ("fd://three", "not a descriptor"),
        ] {
            let err = parse(value).expect_err(value);
            assert!(err.contains(why), "{value:?}: {err}");
        }
    }
}
