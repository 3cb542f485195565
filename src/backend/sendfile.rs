//! Writing a file's bytes to a socket: [`super::Output::File`].
//!
//! `sendfile(2)` where the platform has one we use (Linux, macOS), so the
//! bytes go from the page cache to the socket without a copy through user
//! space; elsewhere `pread` into a buffer and `write`, which is correct but
//! copies. Either way a call writes what the socket takes now and returns
//! how much; the caller advances the offset (through `on_sent`) and calls
//! again, so nothing is remembered here.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

/// Read up to `buf.len()` bytes of the file `file` from `offset` (0 at its
/// end): for writers that must see the bytes (the fallback below; TLS,
/// which encrypts them).
pub fn read_at(file: RawFd, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let off = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
    // SAFETY: `buf` is valid for `buf.len()` bytes; `file` is open and
    // owned by the caller for the call.
    let got = unsafe { libc::pread(file, buf.as_mut_ptr().cast(), buf.len(), off) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(got as usize)
}

/// Write up to `len` bytes of the file `file` from `offset` to `sock`.
/// Returns how many were written: 0 only at the end of the file.
/// `WouldBlock` when the socket takes nothing now.
pub fn send_file(sock: BorrowedFd<'_>, file: RawFd, offset: u64, len: usize) -> io::Result<usize> {
    imp::send_file(sock.as_raw_fd(), file, offset, len)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod imp {
    use std::io;
    use std::os::fd::RawFd;

    pub fn send_file(sock: RawFd, file: RawFd, offset: u64, len: usize) -> io::Result<usize> {
        let mut off = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        // Linux moves at most 0x7ffff000 bytes a call anyway.
        let len = len.min(0x7fff_f000);
        // SAFETY: both descriptors are owned by the caller for the call; `off`
        // is a valid off_t that the kernel updates.
        let n = unsafe { libc::sendfile(sock, file, &mut off, len) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

#[cfg(target_vendor = "apple")]
mod imp {
    use std::io;
    use std::os::fd::RawFd;

    pub fn send_file(sock: RawFd, file: RawFd, offset: u64, len: usize) -> io::Result<usize> {
        let off = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        let mut n = libc::off_t::try_from(len).unwrap_or(libc::off_t::MAX);
        // SAFETY: both descriptors are owned by the caller for the call; `n` is
        // a valid off_t the kernel sets to the bytes sent; no headers/trailers.
        let rc = unsafe { libc::sendfile(file, sock, off, &mut n, std::ptr::null_mut(), 0) };
        // macOS reports a partial send as EAGAIN with `n` set: that is progress.
        if rc < 0 {
            let e = io::Error::last_os_error();
            if n > 0
                && matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                )
            {
                return Ok(n as usize);
            }
            return Err(e);
        }
        Ok(n as usize)
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_vendor = "apple")))]
mod imp {
    use std::io;
    use std::os::fd::RawFd;

    pub fn send_file(sock: RawFd, file: RawFd, offset: u64, len: usize) -> io::Result<usize> {
        let mut buf = [0u8; 64 * 1024];
        let want = len.min(buf.len());
        let got = super::read_at(file, &mut buf[..want], offset)?;
        if got == 0 {
            return Ok(0);
        }
        // What the socket does not take now is read again next call.
        // SAFETY: `buf[..got]` was just filled; `sock` is owned by the caller.
        let n = unsafe { libc::write(sock, buf.as_ptr().cast(), got as usize) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    fn temp_file(content: &[u8]) -> std::fs::File {
        let path = std::env::temp_dir().join(format!(
            "m0serve-sendfile-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(content).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        f
    }

    #[test]
    fn sends_the_range_asked_for() {
        let file = temp_file(b"0123456789");
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let n = send_file(a.as_fd(), file.as_raw_fd(), 3, 5).unwrap();
        assert_eq!(n, 5);
        let mut got = [0; 5];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"34567");
    }

    #[test]
    fn past_the_end_of_the_file_sends_nothing() {
        let file = temp_file(b"abc");
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(send_file(a.as_fd(), file.as_raw_fd(), 3, 10).unwrap(), 0);
    }

    #[test]
    fn a_full_socket_is_would_block() {
        let file = temp_file(&vec![7u8; 1 << 20]);
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let mut off = 0;
        let err = loop {
            match send_file(a.as_fd(), file.as_raw_fd(), off, 1 << 20) {
                Ok(0) => panic!("the socket took the whole file"),
                Ok(n) => off += n as u64,
                Err(e) => break e,
            }
        };
        assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
        assert!(off > 0);
    }
}
