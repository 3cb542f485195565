//! The listening socket every core accepts from: TCP or a Unix domain socket,
//! non-blocking, with a deep backlog (connections beyond `max_connections`
//! wait there, see [`crate::backend::Control::try_reserve`]); bound here, or
//! inherited already listening from the parent (`--fd`, systemd's socket
//! activation).

use std::fmt;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use socket2::{Domain, SockAddr, Socket, Type};

use super::Listen;

/// The default listen backlog (`--backlog`): what a burst (or a full
/// server) queues in the kernel.
pub const BACKLOG: i32 = 1024;

/// How a socket this process binds is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setup {
    /// The `listen(2)` backlog (the kernel caps it at `net.core.somaxconn`).
    pub backlog: i32,
    /// The mode of a Unix socket's file, set between bind and listen, so no
    /// client connects while it is still the umask's (None: the umask's).
    pub uds_mode: Option<u32>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            backlog: BACKLOG,
            uds_mode: None,
        }
    }
}

/// A bound listener. A Unix socket's file is removed when this is dropped,
/// unless it is `shared`.
pub struct Listener {
    pub fd: Arc<OwnedFd>,
    pub addr: Address,
    /// Not this process's to shut down or unlink: bound by a supervisor and
    /// shared with its other workers (one open file description: a shutdown
    /// would stop every worker's listener), or inherited from the parent
    /// (`--fd`, socket activation), which keeps it for the next server: new
    /// connections then wait in its backlog rather than being refused.
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

impl Address {
    /// As logged: `https://` for a TCP listener that serves TLS.
    pub fn url(&self, secure: bool) -> String {
        match self {
            Address::Tcp(addr) if secure => format!("https://{addr}"),
            _ => self.to_string(),
        }
    }
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
/// An inherited descriptor is checked and taken over as it is (its backlog
/// is its parent's choice).
pub fn bind(listen: &Listen, setup: Setup) -> io::Result<Listener> {
    match listen {
        Listen::Tcp { host, port } => bind_tcp(host, *port, setup.backlog),
        Listen::Unix(path) => bind_unix(path, setup),
        Listen::Fd { fd, systemd } => {
            let name = if *systemd {
                format!("socket activation's fd {fd}")
            } else {
                format!("--fd {fd}")
            };
            inherit(*fd).map_err(|e| io::Error::new(e.kind(), format!("{name}: {e}")))
        }
    }
}

/// Bind every one of `listens`, in order; the first failure is the error
/// (what was bound before it is dropped, so a Unix socket's file is removed).
pub fn bind_all(listens: &[Listen], setup: Setup) -> io::Result<Vec<Listener>> {
    listens.iter().map(|listen| bind(listen, setup)).collect()
}

fn bind_tcp(host: &str, port: u16, backlog: i32) -> io::Result<Listener> {
    // "[::1]" as well as "::1": the brackets belong to URLs, not addresses.
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let addr = (host, port).to_socket_addrs()?.next().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: no address"))
    })?;
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    sock.set_reuse_address(true)?;
    sock.bind(&addr.into())
        .map_err(|e| io::Error::new(e.kind(), format!("binding {addr}: {e}")))?;
    sock.listen(backlog)?;
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

fn bind_unix(path: &Path, setup: Setup) -> io::Result<Listener> {
    use std::os::unix::fs::PermissionsExt;
    remove_stale(path)?;
    let sock = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    sock.bind(&SockAddr::unix(path)?)
        .map_err(|e| io::Error::new(e.kind(), format!("binding {}: {e}", path.display())))?;
    if let Some(mode) = setup.uds_mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|e| {
            let _ = std::fs::remove_file(path); // ours, and not yet listening
            io::Error::new(
                e.kind(),
                format!("--uds-permissions on {}: {e}", path.display()),
            )
        })?;
    }
    sock.listen(setup.backlog)?;
    sock.set_nonblocking(true)?;
    Ok(Listener {
        fd: Arc::new(sock.into()),
        addr: Address::Unix(path.to_path_buf()),
        shared: false,
    })
}

/// Take over the listening socket the parent left open at `fd`: it must be
/// a stream socket (TCP or Unix) in the listening state, or the server does
/// not start. Close-on-exec from here on (a worker gets it from its
/// supervisor explicitly; the application's subprocesses never do).
fn inherit(fd: RawFd) -> io::Result<Listener> {
    // SAFETY: F_GETFD/F_SETFD on a descriptor number only read and set its flags.
    let open = unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0
        && unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } >= 0;
    if !open {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "not an open descriptor",
        ));
    }
    // SAFETY: the parent opened `fd` for this process; the command line (or
    // the environment, which was cleared) names it once, and this is the
    // one place that takes it.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    check_listening(&owned)?;
    adopt(owned)
}

/// Refuse what cannot be accepted from: not a socket, a datagram socket, a
/// socket nobody called `listen(2)` on, or an address family we do not serve.
fn check_listening(fd: &OwnedFd) -> io::Result<()> {
    let sock = socket2::SockRef::from(fd);
    let invalid = |why: &str| io::Error::new(io::ErrorKind::InvalidInput, why.to_string());
    let kind = sock.r#type().map_err(|e| match e.raw_os_error() {
        Some(libc::ENOTSOCK) => invalid("not a socket"),
        _ => e,
    })?;
    if kind != Type::STREAM {
        return Err(invalid("not a stream socket (SOCK_STREAM)"));
    }
    // The bound address's family: SO_DOMAIN, which socket2's `domain()`
    // reads, is Linux's alone; getsockname answers the same everywhere.
    let domain = sock.local_addr()?.domain();
    if ![Domain::IPV4, Domain::IPV6, Domain::UNIX].contains(&domain) {
        return Err(invalid("not a TCP or Unix domain socket"));
    }
    if !is_listener(fd)? {
        return Err(invalid("not listening (nobody called listen(2) on it)"));
    }
    Ok(())
}

/// Whether `listen(2)` was called on the socket (SO_ACCEPTCONN).
#[cfg(not(target_vendor = "apple"))]
fn is_listener(fd: &OwnedFd) -> io::Result<bool> {
    socket2::SockRef::from(fd).is_listener()
}

/// Whether `listen(2)` was called on the socket: socket2 reads SO_ACCEPTCONN
/// only on Linux and the BSDs it names, but Darwin answers it too
/// (`getsockopt(2)`, `sys/socket.h`).
#[cfg(target_vendor = "apple")]
fn is_listener(fd: &OwnedFd) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: SO_ACCEPTCONN writes one c_int into `value`, which `len` sizes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ACCEPTCONN,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value != 0)
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
        let l = bind(
            &Listen::Tcp {
                host: "127.0.0.1".into(),
                port: 0,
            },
            Setup::default(),
        )
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
        let l = bind(
            &Listen::Tcp {
                host: "[::1]".into(),
                port: 0,
            },
            Setup::default(),
        )
        .unwrap();
        assert!(l.addr.to_string().starts_with("http://[::1]:"));
    }

    #[test]
    fn a_stale_unix_socket_is_replaced_and_removed_at_exit() {
        let path = temp_path("stale");
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap()); // leaves the file
        assert!(path.exists());
        let l = bind(&Listen::Unix(path.clone()), Setup::default()).unwrap();
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
        let err = bind(&Listen::Unix(path.clone()), Setup::default())
            .err()
            .expect("a live socket is in use");
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        assert!(path.exists());
        drop(live);
        std::fs::remove_file(&path).unwrap();
    }

    /// `fd` handed over as the parent would leave it: a number this process
    /// owns no `OwnedFd` for any more.
    fn leak(fd: impl Into<OwnedFd>) -> RawFd {
        use std::os::fd::IntoRawFd;
        fd.into().into_raw_fd()
    }

    fn inherited(fd: RawFd) -> io::Result<Listener> {
        bind(&Listen::Fd { fd, systemd: false }, Setup::default())
    }

    #[test]
    fn an_inherited_listener_is_served_left_shared_and_close_on_exec() {
        let parent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = parent.local_addr().unwrap();
        let l = inherited(leak(parent)).unwrap();
        assert_eq!(l.addr, Address::Tcp(addr));
        assert!(
            l.shared,
            "the parent's socket is not ours to shut or unlink"
        );
        // SAFETY: F_GETFD only reads the flags of a descriptor we hold.
        let flags = unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&*l.fd), libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        let _client = std::net::TcpStream::connect(addr).unwrap();
        assert!(SockRef::from(&*l.fd).accept().is_ok());
    }

    #[test]
    fn an_inherited_unix_listener_keeps_its_file() {
        let path = temp_path("inherited");
        let parent = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let l = inherited(leak(parent)).unwrap();
        assert_eq!(l.addr, Address::Unix(path.clone()));
        drop(l);
        assert!(path.exists(), "the parent's socket file is left alone");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn what_is_not_a_listening_stream_socket_is_refused_by_name() {
        let refused = |fd: RawFd, why: &str| {
            let err = bind(&Listen::Fd { fd, systemd: true }, Setup::default())
                .err()
                .expect("refused");
            let text = err.to_string();
            assert!(
                text.starts_with(&format!("socket activation's fd {fd}: ")),
                "{text}"
            );
            assert!(text.contains(why), "{text}");
        };
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        refused(leak(udp), "not a stream socket");
        let unbound = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        refused(leak(unbound), "not listening");
        let (read, _write) = std::io::pipe().unwrap();
        refused(leak(read), "not a socket");
        // A number no process has open (closing one of ours would race the
        // other tests' opens for its number).
        refused(1 << 30, "not an open descriptor");
    }

    #[test]
    fn the_backlog_and_the_socket_file_mode_are_applied() {
        use std::os::unix::fs::PermissionsExt;
        let path = temp_path("mode");
        let setup = Setup {
            backlog: 7,
            uds_mode: Some(0o640),
        };
        let l = bind(&Listen::Unix(path.clone()), setup).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777, 0o640);
        drop(l);
        let tcp = bind(
            &Listen::Tcp {
                host: "127.0.0.1".into(),
                port: 0,
            },
            setup,
        )
        .unwrap();
        // Only Linux reports a listener's backlog back (TCP_INFO).
        #[cfg(target_os = "linux")]
        assert_eq!(listen_backlog(&tcp), Some(7));
        drop(tcp);
    }

    /// A listening TCP socket's backlog, as the kernel reports it (Linux:
    /// `tcpi_sacked` of a socket in LISTEN is its backlog).
    #[cfg(target_os = "linux")]
    fn listen_backlog(l: &Listener) -> Option<u32> {
        // SAFETY: tcp_info is plain integers, for which all zeroes is a value.
        let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        // SAFETY: TCP_INFO writes at most `len` bytes into `info`, which is that large.
        let rc = unsafe {
            libc::getsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&*l.fd),
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                (&mut info as *mut libc::tcp_info).cast(),
                &mut len,
            )
        };
        (rc == 0).then_some(info.tcpi_sacked)
    }

    #[test]
    fn a_regular_file_at_the_path_is_left_alone() {
        let path = temp_path("file");
        std::fs::write(&path, b"not a socket").unwrap();
        assert!(bind(&Listen::Unix(path.clone()), Setup::default()).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"not a socket");
        std::fs::remove_file(&path).unwrap();
    }
}
