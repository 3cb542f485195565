//! The few plain syscalls the backend needs beside the ring.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Receive what the socket already holds, without waiting: the admission's
/// eager read. `Err(WouldBlock)` when nothing has arrived yet.
pub fn recv_now(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a live, exclusively borrowed slice of `buf.len()` bytes
    // for the whole (synchronous) call; `fd` is borrowed, so open throughout.
    let n = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// A new eventfd, counter 0. Blocking on purpose: io_uring completes a read
/// of a non-blocking file with EAGAIN instead of waiting for it on some
/// kernels, and nothing else reads it.
pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain FFI call with no pointers.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: eventfd returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Add 1 to an eventfd's counter (wakes a read armed on it).
pub(crate) fn eventfd_add(fd: BorrowedFd<'_>) -> io::Result<()> {
    let one: u64 = 1;
    // SAFETY: `one` is 8 readable bytes on this stack frame for the whole
    // synchronous call; `fd` is borrowed, so open throughout.
    let n = unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
