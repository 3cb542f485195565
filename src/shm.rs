//! Shared pages between the supervisor and its workers: a memfd the
//! supervisor creates (zero-filled) and every process maps. Used by the
//! connection tally ([`crate::backend::tally`]) and the metrics
//! ([`crate::metrics`]).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

/// A new, zeroed shared file of `size` bytes named `name`.
#[cfg(not(target_os = "linux"))]
pub fn create(_name: &std::ffi::CStr, _size: usize) -> io::Result<OwnedFd> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "no memfd on this system",
    ))
}

/// A new, zeroed shared file of `size` bytes named `name`.
#[cfg(target_os = "linux")]
pub fn create(name: &std::ffi::CStr, size: usize) -> io::Result<OwnedFd> {
    // SAFETY: memfd_create with a NUL-terminated name; the result is checked.
    let raw = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: memfd_create returned a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ftruncate on the descriptor just created; it zero-fills.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Map the first `size` bytes of `fd` shared, read-write.
pub fn map(fd: &OwnedFd, size: usize) -> io::Result<NonNull<u8>> {
    // SAFETY: a shared read-write mapping of a descriptor at least `size`
    // long (create sized it); the result is checked.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(NonNull::new(p.cast()).expect("mmap returned a mapping"))
}
