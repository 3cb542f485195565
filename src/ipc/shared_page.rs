//! A page of memory a supervisor shares with its workers: a memfd it
//! creates, each worker inherits and maps. What the page holds is its
//! user's (atomics only, as several processes write it at once): the
//! workers' connection tally ([`super::tally`]), the readiness flag
//! ([`super::ready_flag`]), the metrics' counters ([`crate::metrics`]).

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

/// A new, zeroed shared page of `len` bytes, as a descriptor to inherit.
/// The system call, not glibc's wrapper (2.27): the wheels are built for
/// glibc 2.17, where the wrapper's symbol would be missing at import.
#[cfg(target_os = "linux")]
pub fn create(name: &CStr, len: usize) -> io::Result<OwnedFd> {
    // SAFETY: memfd_create(2) with a NUL-terminated name and flags; it
    // returns a new descriptor or -1, checked below.
    let raw = unsafe { libc::syscall(libc::SYS_memfd_create, name.as_ptr(), libc::MFD_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    let raw = libc::c_int::try_from(raw).map_err(io::Error::other)?;
    // SAFETY: memfd_create returned a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    sized(fd, len)
}

/// A new, zeroed shared page of `len` bytes, as a descriptor to inherit.
/// Without memfd (macOS), a POSIX shared memory object unlinked as soon as
/// it is open: only the descriptor names it then, as a memfd would be.
/// Darwin caps the name at 31 bytes (PSHMNAMLEN), so `name` is not used.
#[cfg(not(target_os = "linux"))]
pub fn create(_name: &CStr, len: usize) -> io::Result<OwnedFd> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static MADE: AtomicU32 = AtomicU32::new(0);
    let unique = format!(
        "/m0-{}-{}",
        std::process::id(),
        MADE.fetch_add(1, Ordering::Relaxed)
    );
    let unique = std::ffi::CString::new(unique).expect("no NUL in a formatted name");
    let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL;
    // SAFETY: shm_open with a NUL-terminated name; the mode is read as the
    // variadic argument it is; the result is checked. POSIX opens it close-on-exec.
    let raw = unsafe { libc::shm_open(unique.as_ptr(), flags, 0o600 as libc::c_uint) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: shm_open returned a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: shm_unlink of the name just made; the open descriptor keeps the object.
    unsafe { libc::shm_unlink(unique.as_ptr()) };
    sized(fd, len)
}

/// `fd` grown to `len` zeroed bytes.
fn sized(fd: OwnedFd, len: usize) -> io::Result<OwnedFd> {
    // SAFETY: ftruncate on a descriptor this process owns; it zero-fills.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// This process's mapping of a shared page, unmapped on drop.
pub struct Page {
    start: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is only reached through the atomics its users lay
// over it, and lives until the Page is dropped.
unsafe impl Send for Page {}
// SAFETY: as above.
unsafe impl Sync for Page {}

impl Page {
    /// Map the first `len` bytes of the page `fd` names (from [`create`],
    /// with at least that `len`).
    pub fn map(fd: &OwnedFd, len: usize) -> io::Result<Page> {
        // SAFETY: a shared read-write mapping of a descriptor at least `len`
        // long (create sized it); the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Page {
            start: NonNull::new(p.cast()).expect("mmap returned a mapping"),
            len,
        })
    }

    /// Keep the mapping for the rest of the process (its users hold
    /// `&'static` views of it): its first byte.
    pub fn leak(self) -> NonNull<u8> {
        let start = self.start;
        std::mem::forget(self);
        start
    }

    /// The first byte: page-aligned, valid for `len` bytes while `self` lives.
    pub fn start(&self) -> NonNull<u8> {
        self.start
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in `map`, used by nothing after.
        unsafe { libc::munmap(self.start.as_ptr().cast(), self.len) };
    }
}
