//! The listening socket every core accepts from: TCP or a Unix domain socket,
//! non-blocking, with a deep backlog (connections beyond `max_connections`
//! wait there, see [`crate::backend::Control::try_reserve`]).

use std::fmt;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use socket2::{Domain, SockAddr, Socket, Type};

use super::Listen;

/// The listen backlog: what a burst (or a full server) queues in the kernel.
pub const BACKLOG: i32 = 1024;

/// A bound listener. A Unix socket's file is removed when this is dropped,
/// unless it is `shared`.
pub struct Listener {
    pub fd: Arc<OwnedFd>,
    pub addr: Address,
    /// Bound by a supervisor and shared with its other workers: one open file
    /// description, so this process must neither shut it down (that would stop
    /// every worker's listener) nor unlink its file (the supervisor's to do).
    pub shared: bool,
}

impl Listener {
    /// Stop listening now, while the cores still hold the socket: the drain
    /// has begun, and a connection the kernel completed from here on would
    /// only wait in the backlog until the process exits. `shutdown(SHUT_RD)`
    /// takes a TCP listener out of LISTEN (new connections are refused at
    /// once; the backlog, which nobody will accept, is reset) and makes a
    /// Unix listener refuse connects.
    ///
    /// A `shared` listener is left alone: its owner, the supervisor, shuts it.
    pub fn stop_listening(&self) {
        if self.shared {
            return;
        }
        if let Err(e) = socket2::SockRef::from(&*self.fd).shutdown(std::net::Shutdown::Read) {
            tracing::warn!("closing the listener: {e}");
        }
    }
}

/// Where a [`Listener`] listens, as logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Tcp(addr) => write!(f, "http://{addr}"),
            Address::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// Bind and listen on `listen`. TCP with `SO_REUSEADDR` (a restart does not
/// wait out TIME_WAIT); port 0 binds a free port, which [`Listener::addr`] names.
pub fn bind(listen: &Listen) -> io::Result<Listener> {
    match listen {
        Listen::Tcp { host, port } => bind_tcp(host, *port),
        Listen::Unix(path) => bind_unix(path),
    }
}

fn bind_tcp(host: &str, port: u16) -> io::Result<Listener> {
    // "[::1]" as well as "::1": the brackets belong to URLs, not addresses.
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let addr = (host, port).to_socket_addrs()?.next().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: no address"))
    })?;
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    sock.set_reuse_address(true)?;
    sock.bind(&addr.into())
        .map_err(|e| io::Error::new(e.kind(), format!("binding {addr}: {e}")))?;
    sock.listen(BACKLOG)?;
    sock.set_nonblocking(true)?;
    let bound = sock
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::other("not an inet socket"))?;
    Ok(Listener {
        fd: Arc::new(sock.into()),
        addr: Address::Tcp(bound),
        shared: false,
    })
}

fn bind_unix(path: &Path) -> io::Result<Listener> {
    remove_stale(path)?;
    let sock = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    sock.bind(&SockAddr::unix(path)?)
        .map_err(|e| io::Error::new(e.kind(), format!("binding {}: {e}", path.display())))?;
    sock.listen(BACKLOG)?;
    sock.set_nonblocking(true)?;
    Ok(Listener {
        fd: Arc::new(sock.into()),
        addr: Address::Unix(path.to_path_buf()),
        shared: false,
    })
}

/// Take over a listener a supervisor bound and passed down (a worker's):
/// its address is read back from the socket; it is `shared`.
pub fn adopt(fd: OwnedFd) -> io::Result<Listener> {
    let sock = Socket::from(fd);
    sock.set_nonblocking(true)?;
    let local = sock.local_addr()?;
    let addr = match (local.as_socket(), local.as_pathname()) {
        (Some(inet), _) => Address::Tcp(inet),
        (None, Some(path)) => Address::Unix(path.to_path_buf()),
        (None, None) => return Err(io::Error::other("the inherited listener has no address")),
    };
    Ok(Listener {
        fd: Arc::new(sock.into()),
        addr,
        shared: true,
    })
}

/// Remove a socket file a previous server left behind. Only a socket nobody
/// accepts on is removed: a live server's socket is an error, and so is any
/// other kind of file (we never delete what is not ours).
fn remove_stale(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let in_use = |why: &str| {
        io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("{}: {why}", path.display()),
        )
    };
    if !meta.file_type().is_socket() {
        return Err(in_use("exists and is not a socket"));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(in_use("a server is listening on it")),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            tracing::info!("removing the stale socket {}", path.display());
            std::fs::remove_file(path)
        }
        Err(e) => Err(e),
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if self.shared {
            return;
        }
        if let Address::Unix(path) = &self.addr {
            if let Err(e) = std::fs::remove_file(path) {
                tracing::warn!("removing {}: {e}", path.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::SockRef;

    fn temp_path(name: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("m0serve-{}-{name}.sock", std::process::id()));
        let _ = std::fs::remove_file(&p);
        p
    }

    #[test]
    fn port_zero_binds_a_real_port_that_accepts() {
        let l = bind(&Listen::Tcp {
            host: "127.0.0.1".into(),
            port: 0,
        })
        .unwrap();
        let Address::Tcp(addr) = l.addr else {
            panic!("not TCP")
        };
        assert_ne!(addr.port(), 0);
        assert_eq!(
            l.addr.to_string(),
            format!("http://127.0.0.1:{}", addr.port())
        );
        let sock = SockRef::from(&*l.fd);
        assert!(sock.reuse_address().unwrap());
        // Non-blocking: nothing pending is WouldBlock, not a hang.
        assert_eq!(sock.accept().unwrap_err().kind(), io::ErrorKind::WouldBlock);
        let _client = std::net::TcpStream::connect(addr).unwrap();
        assert!(sock.accept().is_ok());
    }

    #[test]
    fn an_ipv6_host_in_brackets_binds() {
        // Skipped where the box has no IPv6 loopback.
        if std::net::TcpListener::bind("[::1]:0").is_err() {
            return;
        }
        let l = bind(&Listen::Tcp {
            host: "[::1]".into(),
            port: 0,
        })
        .unwrap();
        assert!(l.addr.to_string().starts_with("http://[::1]:"));
    }

    #[test]
    fn a_stale_unix_socket_is_replaced_and_removed_at_exit() {
        let path = temp_path("stale");
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap()); // leaves the file
        assert!(path.exists());
        let l = bind(&Listen::Unix(path.clone())).unwrap();
        assert_eq!(l.addr.to_string(), format!("unix:{}", path.display()));
        let _client = std::os::unix::net::UnixStream::connect(&path).unwrap();
        assert!(SockRef::from(&*l.fd).accept().is_ok());
        drop(l);
        assert!(!path.exists(), "the socket file is unlinked at exit");
    }

    #[test]
    fn a_live_unix_socket_is_not_taken_over() {
        let path = temp_path("live");
        let live = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let err = bind(&Listen::Unix(path.clone()))
            .err()
            .expect("a live socket is in use");
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        assert!(path.exists());
        drop(live);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_regular_file_at_the_path_is_left_alone() {
        let path = temp_path("file");
        std::fs::write(&path, b"not a socket").unwrap();
        assert!(bind(&Listen::Unix(path.clone())).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"not a socket");
        std::fs::remove_file(&path).unwrap();
    }
}
