//! The readiness flag: one word in a page the supervisor shares with its
//! workers ([`super::shared_page`]). The supervisor sets it once every
//! worker has come up, while one serves and no shutdown has begun, and
//! clears it otherwise; whichever worker answers the ready path reads it,
//! so its answer covers its siblings too (see [`crate::routes`]).

use std::fmt;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, Ordering};

use super::shared_page::{self, Page};

const SIZE: usize = std::mem::size_of::<AtomicU32>();

/// This process's view of the flag.
pub struct ReadyFlag {
    page: Page,
}

/// A new flag page, cleared (not ready), as a descriptor for workers to inherit.
pub fn create() -> io::Result<OwnedFd> {
    shared_page::create(c"m0serve-ready", SIZE)
}

impl ReadyFlag {
    /// Map the flag page `fd` names (from [`create`]).
    pub fn map(fd: &OwnedFd) -> io::Result<ReadyFlag> {
        Ok(ReadyFlag {
            page: Page::map(fd, SIZE)?,
        })
    }

    fn word(&self) -> &AtomicU32 {
        // SAFETY: the page is page-aligned, zero-initialised (a valid
        // AtomicU32) and at least SIZE long, and outlives &self.
        unsafe { &*self.page.start().as_ptr().cast::<AtomicU32>() }
    }

    /// The supervisor's part: every worker is ready (`true`), or not.
    pub fn set(&self, ready: bool) {
        self.word().store(u32::from(ready), Ordering::Release);
    }

    pub fn get(&self) -> bool {
        self.word().load(Ordering::Acquire) != 0
    }
}

impl fmt::Debug for ReadyFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadyFlag")
            .field("ready", &self.get())
            .finish()
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_flag_set_in_one_mapping_reads_in_another() {
        let fd = create().unwrap();
        let (supervisor, worker) = (ReadyFlag::map(&fd).unwrap(), ReadyFlag::map(&fd).unwrap());
        assert!(!worker.get(), "a new flag says not ready");
        supervisor.set(true);
        assert!(worker.get());
        supervisor.set(false);
        assert!(!worker.get());
    }
}
