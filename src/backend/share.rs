//! Accept sharing: the board through which core threads see each other.
//!
//! A connection is owned by one core for its life. The core that admits a new
//! connection hands it to a sibling that is parked (idle) and holds no more
//! connections than it does, rather than queue it behind its own work; failing
//! that, to a sibling with fewer connections whose current pass is young. A
//! sibling that has been inside one pass for over [`BUSY_PASS`] is handed
//! nothing: it is stuck in work (a long view in the loop-only shape), and a
//! connection handed to it would wait for that work.
//! Hand-offs arrive through the sibling's hand-off *door*, which admits under
//! the same batch rule as the listener ([`super::accept`]).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_queue::SegQueue;

use super::{Accepted, Parked, Wake};

/// A pass older than this marks a core as busy: it is handed nothing.
pub const BUSY_PASS: Duration = Duration::from_millis(2);

/// One core's public face.
#[derive(Default)]
pub struct Slot {
    /// Connections handed to this core, admitted by its hand-off door.
    handoffs: SegQueue<Accepted>,
    /// Nanoseconds since the board's epoch at which the current pass began.
    pass_start: AtomicU64,
    /// Sessions notified from other threads (their [`super::slab::Key`] bits),
    /// served in this core's next pass.
    ready: SegQueue<u64>,
    /// Connections this core owns.
    connections: AtomicUsize,
    parked: Parked,
    waker: OnceLock<Box<dyn Wake>>,
}

/// The cores' shared board.
pub struct Board {
    epoch: Instant,
    slots: Vec<Slot>,
    /// Cores hand connections to idle siblings ([`Board::sharing`]).
    sharing: bool,
}

impl Board {
    /// A board for `cores` cores that share connections.
    pub fn new(cores: usize) -> Arc<Board> {
        Board::sharing(cores, true)
    }

    /// A board whose cores share connections or (the `M0_ACCEPT_SHARE=0`
    /// knob, the negative arm) each keep what they accept.
    pub fn sharing(cores: usize, sharing: bool) -> Arc<Board> {
        Arc::new(Board {
            epoch: Instant::now(),
            slots: (0..cores).map(|_| Slot::default()).collect(),
            sharing,
        })
    }

    pub fn cores(&self) -> usize {
        self.slots.len()
    }

    /// Register how core `core` is woken from its wait (once, at its start).
    pub fn set_waker(&self, core: usize, waker: Box<dyn Wake>) {
        let _ = self.slots[core].waker.set(waker);
    }

    /// Wake `core` if it is parked and nobody has woken it yet.
    pub fn wake(&self, core: usize) {
        let slot = &self.slots[core];
        if slot.parked.claim_wake() {
            if let Some(w) = slot.waker.get() {
                w.wake();
            }
        }
    }

    /// Wake every core unconditionally (shutdown).
    pub fn wake_all(&self) {
        for slot in &self.slots {
            if let Some(w) = slot.waker.get() {
                w.wake();
            }
        }
    }

    /// Core `core` starts a pass.
    pub fn begin_pass(&self, core: usize) {
        let slot = &self.slots[core];
        slot.parked.set(false);
        slot.pass_start.store(self.now_ns(), Ordering::Relaxed);
    }

    /// Core `core` is about to block in its wait. Returns false when a
    /// hand-off or a notification arrived meanwhile: the core must not block then.
    pub fn park(&self, core: usize) -> bool {
        let slot = &self.slots[core];
        slot.parked.set(true);
        // A sibling that pushed before seeing `parked` did not wake us: look again.
        if slot.handoffs.is_empty() && slot.ready.is_empty() {
            true
        } else {
            slot.parked.set(false);
            false
        }
    }

    /// Core `core` now owns `delta` more (or fewer) connections.
    pub fn count(&self, core: usize, delta: isize) {
        let c = &self.slots[core].connections;
        if delta >= 0 {
            c.fetch_add(delta as usize, Ordering::Relaxed);
        } else {
            c.fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
        }
    }

    /// The sibling `core` should hand a new connection to, if any.
    pub fn pick(&self, core: usize) -> Option<usize> {
        if !self.sharing || self.slots.len() < 2 {
            return None;
        }
        let now = self.now_ns();
        let mine = self.slots[core].connections.load(Ordering::Relaxed);
        let mut best: Option<(bool, usize, usize)> = None; // (parked, connections, index)
        for (i, s) in self.slots.iter().enumerate() {
            if i == core {
                continue;
            }
            let parked = s.parked.get();
            let conns = s.connections.load(Ordering::Relaxed);
            let age = now.saturating_sub(s.pass_start.load(Ordering::Relaxed));
            // A parked sibling holding more than this core is not worth a wake:
            // where one core takes every accept (io_uring's exclusive wake-ups
            // favour the first multishot armed), that would pile them all onto it.
            let eligible =
                (parked && conns <= mine) || (age < BUSY_PASS.as_nanos() as u64 && conns < mine);
            if !eligible {
                continue;
            }
            let better = match best {
                None => true,
                Some((bp, bc, _)) => {
                    (parked, std::cmp::Reverse(conns)) > (bp, std::cmp::Reverse(bc))
                }
            };
            if better {
                best = Some((parked, conns, i));
            }
        }
        best.map(|(_, _, i)| i)
    }

    /// Hand `conn` to `core`'s hand-off door and wake it if parked.
    pub fn hand_off(&self, core: usize, conn: Accepted) {
        self.slots[core].handoffs.push(conn);
        self.wake(core);
    }

    /// The next connection handed to `core`.
    pub fn take_handoff(&self, core: usize) -> Option<Accepted> {
        self.slots[core].handoffs.pop()
    }

    /// Queue session `key` (its [`super::slab::Key`] bits) for `core`'s next
    /// pass, and wake the core if parked: from any thread, no syscall unless
    /// the core sleeps.
    pub fn notify(&self, core: usize, key: u64) {
        self.queue(core, key);
        self.wake(core);
    }

    /// Queue session `key` for `core`'s next pass without waking it.
    pub fn queue(&self, core: usize, key: u64) {
        self.slots[core].ready.push(key);
    }

    /// The sessions notified for `core` so far, at most as many as were
    /// queued when called: a thread that keeps notifying cannot hold the
    /// core in one pass.
    pub fn take_ready(&self, core: usize) -> impl Iterator<Item = u64> + '_ {
        let ready = &self.slots[core].ready;
        (0..ready.len()).map_while(|_| ready.pop())
    }

    /// Whether anything waits at `core`'s hand-off door.
    pub fn has_handoffs(&self, core: usize) -> bool {
        !self.slots[core].handoffs.is_empty()
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parked_sibling_is_preferred() {
        let b = Board::new(3);
        b.begin_pass(0);
        b.begin_pass(1);
        b.begin_pass(2);
        assert!(b.park(2));
        assert_eq!(b.pick(0), Some(2));
    }

    #[test]
    fn a_parked_sibling_holding_more_is_handed_nothing() {
        let b = Board::new(2);
        b.count(1, 2);
        assert!(b.park(1));
        assert_eq!(
            b.pick(0),
            None,
            "core 0 holds fewer: it keeps the connection"
        );
        b.count(0, 2);
        assert_eq!(b.pick(0), Some(1), "as many: the parked sibling takes it");
    }

    #[test]
    fn a_busy_sibling_is_handed_nothing() {
        let b = Board::new(2);
        b.count(0, 10);
        b.begin_pass(1);
        std::thread::sleep(BUSY_PASS * 2);
        assert_eq!(b.pick(0), None, "a sibling over 2 ms into its pass is busy");
        b.begin_pass(1);
        assert_eq!(
            b.pick(0),
            Some(1),
            "a young pass with fewer connections may take one"
        );
    }

    #[test]
    fn a_sibling_with_as_many_connections_is_not_handed_one() {
        let b = Board::new(2);
        b.count(0, 3);
        b.count(1, 3);
        b.begin_pass(1);
        assert_eq!(b.pick(0), None);
    }

    #[test]
    fn a_woken_sibling_that_has_not_run_yet_is_still_parked() {
        let b = Board::new(2);
        b.begin_pass(0);
        assert!(b.park(1));
        b.notify(1, 7);
        assert_eq!(b.pick(0), Some(1), "picked as before its wake");
    }

    #[test]
    fn park_refuses_while_a_handoff_waits() {
        let b = Board::new(2);
        let (r, _w) = std::os::unix::net::UnixStream::pair().unwrap();
        b.hand_off(
            1,
            Accepted {
                fd: r.into(),
                listener: 0,
            },
        );
        assert!(!b.park(1));
        assert!(b.take_handoff(1).is_some());
        assert!(b.park(1));
    }

    #[test]
    fn park_refuses_while_a_notification_waits() {
        let b = Board::new(2);
        b.notify(1, 7);
        assert!(!b.park(1));
        assert!(b.park(0), "another core's queue does not matter");
        b.notify(1, 9);
        assert_eq!(b.take_ready(1).collect::<Vec<_>>(), vec![7, 9]);
        assert!(b.park(1));
    }

    #[test]
    fn a_notification_wakes_a_parked_core_only() {
        struct Count(Arc<AtomicUsize>);
        impl Wake for Count {
            fn wake(&self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let b = Board::new(1);
        let wakes = Arc::new(AtomicUsize::new(0));
        b.set_waker(0, Box::new(Count(wakes.clone())));
        b.begin_pass(0);
        b.notify(0, 1);
        assert_eq!(
            wakes.load(Ordering::SeqCst),
            0,
            "a running core is not woken"
        );
        assert_eq!(b.take_ready(0).count(), 1);
        assert!(b.park(0));
        b.notify(0, 2);
        assert_eq!(wakes.load(Ordering::SeqCst), 1, "a parked core is woken");
        // More notifications before the woken core runs: no more wakes.
        b.notify(0, 3);
        b.notify(0, 4);
        assert_eq!(wakes.load(Ordering::SeqCst), 1, "woken once per wait");
        b.begin_pass(0);
        assert_eq!(b.take_ready(0).count(), 3);
        assert!(b.park(0));
        b.notify(0, 5);
        assert_eq!(
            wakes.load(Ordering::SeqCst),
            2,
            "the next wait is woken again"
        );
    }
}
