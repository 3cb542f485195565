//! The workers' tally: how many connections each worker process holds, in a
//! page the supervisor creates and every worker maps, so that a worker
//! holding more than a sibling leaves new connections in the shared
//! listener's queue for it (least connections, across processes).
//!
//! Who accepts from a listener that several processes share is otherwise
//! whoever is running when a connection arrives: the other worker's wake-up
//! (an epoll registration, an io_uring accept queued on the listener) only
//! asks its thread to accept, and a worker that is already awake takes the
//! connection from the queue first. A worker whose Python is backlogged is
//! awake more than an idle one, and so kept its share and more. With the
//! tally it stops accepting while it holds more than [`SLACK`] connections
//! above its least-loaded sibling; the least-loaded worker never stops, so
//! someone always accepts.
//!
//! A slot belongs to a worker from the moment it accepts until its drain
//! begins (a booting or a draining worker is nobody's sibling); the
//! supervisor frees the slot of a worker that died without draining.
//! `M0_ACCEPT_BALANCE=0` makes the supervisor share no tally: the negative arm.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use super::shared_page::{self, Page};

/// Worker processes the tally can hold; more take no slot (and so are
/// neither held back nor hold others back).
pub const SLOTS: usize = 256;

/// How many connections a worker may hold above its least-loaded sibling
/// and still accept: one, so two workers checking at once do not flap.
pub const SLACK: u32 = 1;

const SIZE: usize = SLOTS * std::mem::size_of::<Slot>();

#[repr(C)]
struct Slot {
    /// The owner's pid; 0 when free.
    pid: AtomicU32,
    connections: AtomicU32,
}

/// This process's view of the shared page.
pub struct Tally {
    page: Page,
    /// The slot this process holds; `usize::MAX` while none.
    mine: AtomicUsize,
}

/// A new, zeroed tally page, as a descriptor for workers to inherit.
pub fn create() -> io::Result<OwnedFd> {
    shared_page::create(c"m0serve-tally", SIZE)
}

impl Tally {
    /// Map the tally page `fd` names (from [`create`]).
    pub fn map(fd: &OwnedFd) -> io::Result<Tally> {
        Ok(Tally {
            page: Page::map(fd, SIZE)?,
            mine: AtomicUsize::new(usize::MAX),
        })
    }

    fn slots(&self) -> &[Slot] {
        // SAFETY: the page holds SLOTS slots, zero-initialised (a valid
        // AtomicU32 pair), page-aligned, and outlives &self.
        unsafe { std::slice::from_raw_parts(self.page.start().as_ptr().cast::<Slot>(), SLOTS) }
    }

    /// Take a free slot for this process, holding `connections`.
    pub fn join(&self, connections: usize) {
        let pid = std::process::id();
        for (i, slot) in self.slots().iter().enumerate() {
            if slot
                .pid
                .compare_exchange(0, pid, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                slot.connections
                    .store(connections as u32, Ordering::Relaxed);
                self.mine.store(i, Ordering::Release);
                return;
            }
        }
    }

    /// Give this process's slot up (its drain began).
    pub fn leave(&self) {
        let i = self.mine.swap(usize::MAX, Ordering::AcqRel);
        if let Some(slot) = self.slots().get(i) {
            slot.connections.store(0, Ordering::Relaxed);
            slot.pid.store(0, Ordering::Release);
        }
    }

    /// Free the slot of `pid`, which exited (the supervisor's part).
    pub fn forget(&self, pid: u32) {
        for slot in self.slots() {
            if slot.pid.load(Ordering::Acquire) == pid {
                slot.connections.store(0, Ordering::Relaxed);
                let _ = slot
                    .pid
                    .compare_exchange(pid, 0, Ordering::AcqRel, Ordering::Relaxed);
            }
        }
    }

    /// This process now holds one connection more (`true`) or fewer.
    pub fn count(&self, more: bool) {
        if let Some(slot) = self.slots().get(self.mine.load(Ordering::Acquire)) {
            if more {
                slot.connections.fetch_add(1, Ordering::Relaxed);
            } else {
                // Saturating: the slot may have been zeroed by a leave.
                let _ = slot
                    .connections
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
            }
        }
    }

    /// Whether this process may accept: it holds no more than [`SLACK`]
    /// connections above every sibling that holds a slot.
    pub fn may_accept(&self) -> bool {
        let slots = self.slots();
        let Some(me) = slots.get(self.mine.load(Ordering::Acquire)) else {
            return true;
        };
        let mine = me.connections.load(Ordering::Relaxed);
        slots.iter().all(|s| {
            std::ptr::eq(s, me)
                || s.pid.load(Ordering::Acquire) == 0
                || s.connections.load(Ordering::Relaxed) + SLACK >= mine
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_holding_more_than_a_sibling_plus_slack_waits() {
        let fd = create().unwrap();
        let (a, b) = (Tally::map(&fd).unwrap(), Tally::map(&fd).unwrap());
        a.join(0);
        assert!(a.may_accept(), "alone");
        // b shares the page under the same pid here: give it its own slot by hand.
        b.join(0);
        for _ in 0..2 {
            a.count(true);
        }
        assert!(!a.may_accept(), "2 against 0");
        assert!(b.may_accept(), "the least-loaded always may");
        b.count(true);
        assert!(a.may_accept(), "2 against 1 is within the slack");
        a.count(false);
        a.count(false);
        a.count(false);
        assert!(a.may_accept(), "a count never goes below 0");
    }

    #[test]
    fn a_leaving_or_forgotten_worker_holds_nobody_back() {
        let fd = create().unwrap();
        let (a, b) = (Tally::map(&fd).unwrap(), Tally::map(&fd).unwrap());
        a.join(5);
        b.join(0);
        assert!(!a.may_accept());
        b.leave();
        assert!(a.may_accept(), "a draining worker is nobody's sibling");
        b.join(0);
        assert!(!a.may_accept());
        a.forget(std::process::id());
        assert!(
            a.may_accept() && b.may_accept(),
            "freed slots: nobody is held back"
        );
    }

    #[test]
    fn a_process_without_a_slot_is_never_held_back() {
        let fd = create().unwrap();
        let (a, b) = (Tally::map(&fd).unwrap(), Tally::map(&fd).unwrap());
        b.join(0);
        assert!(a.may_accept());
    }
}
