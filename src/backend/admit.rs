//! Admitting an accepted connection, the same on either backend: where it
//! goes (here, or handed to a sibling) and what it needs before it is served.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

use socket2::SockRef;

use super::{Accepted, CoreContext, Peer};

/// Place a connection this core accepted and reserved a slot for: hand it to
/// the sibling the board picks (the reservation travels with it), or return
/// it to be admitted here. Connections that were handed over are not placed
/// again, so nothing bounces between cores.
pub fn place(ctx: &CoreContext, conn: Accepted) -> Option<Accepted> {
    match ctx.board.pick(ctx.index) {
        Some(sibling) => {
            ctx.board.hand_off(sibling, conn);
            None
        }
        None => Some(conn),
    }
}

/// Begin serving a connection here: [`prepare`] it and record the admission.
/// On an error the connection is to be dropped unserved (None): its
/// reservation is released here.
pub fn begin(ctx: &CoreContext, fd: BorrowedFd<'_>, handed: bool) -> Option<Peer> {
    match prepare(fd) {
        Ok(peer) => {
            ctx.admitted(handed);
            Some(peer)
        }
        Err(e) => {
            tracing::debug!(core = ctx.index, "dropping a connection: {e}");
            ctx.control.release();
            None
        }
    }
}

/// Name the peer and set the socket up to be served. TCP gets `TCP_NODELAY`:
/// a response leaves in whole writes, and Nagle would only hold back its last
/// segment until the client's delayed ACK. An error (the peer reset before we
/// looked) means the connection is to be closed unserved.
pub fn prepare(fd: BorrowedFd<'_>) -> io::Result<Peer> {
    let sock = SockRef::from(&fd);
    // Where send has no MSG_NOSIGNAL, a write to a reset peer must not raise SIGPIPE.
    #[cfg(target_vendor = "apple")]
    sock.set_nosigpipe(true)?;
    match sock.peer_addr()?.as_socket() {
        Some(addr) => {
            sock.set_nodelay(true)?;
            Ok(Peer::Tcp(addr))
        }
        None => Ok(Peer::Unix),
    }
}

/// Accept one connection, non-blocking and close-on-exec.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn accept(listener: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    // SAFETY: the listener is a valid descriptor for the call; null address
    // pointers are allowed (the peer is looked up at admission).
    let fd = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            flags,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: accept4 returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Accept one connection, non-blocking and close-on-exec (no `accept4`:
/// socket2 sets close-on-exec, the non-blocking flag costs a second call).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn accept(listener: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let (sock, _) = socket2::SockRef::from(&listener).accept()?;
    sock.set_nonblocking(true)?;
    Ok(sock.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_tcp_peer_is_named_and_gets_nodelay() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        match prepare(server.as_fd()).unwrap() {
            Peer::Tcp(addr) => assert_eq!(addr, client.local_addr().unwrap()),
            Peer::Unix => panic!("a TCP peer named as Unix"),
        }
        assert!(server.nodelay().unwrap());
    }

    #[test]
    fn a_unix_peer_is_unix() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(matches!(prepare(a.as_fd()).unwrap(), Peer::Unix));
    }

    #[test]
    fn a_socket_with_no_peer_is_an_error() {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        assert!(prepare(s.as_fd()).is_err());
    }
}
