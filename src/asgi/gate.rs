//! The bound on requests in flight on the executor (`--backpressure`).
//!
//! The loop takes every request it is handed, so without a bound a slow app
//! would gather tasks without end while the cores went on reading. A request
//! holds a [`Permit`] from [`AsgiApp::call`](super::AsgiApp) until its task
//! ends (the channel's `finish`/`abort`, or the channel being dropped); past
//! the bound the call is refused and its conduit waits in [`Waiters`] until a
//! permit is returned, so the core stops reading that connection meanwhile.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::app::waiters::Waiters;
use crate::app::Conduit;

/// Counts the requests in flight against the bound.
pub(super) struct Gate {
    limit: usize,
    in_flight: AtomicUsize,
    waiters: Waiters,
}

/// One request's place on the executor; returned when dropped.
pub(super) struct Permit(Arc<Gate>);

impl Gate {
    /// A gate for at most `limit` requests in flight (at least one).
    pub(super) fn new(limit: usize) -> Arc<Gate> {
        Arc::new(Gate {
            limit: limit.max(1),
            in_flight: AtomicUsize::new(0),
            waiters: Waiters::default(),
        })
    }

    /// A permit, or `None` when the bound is reached: `conduit` is then
    /// notified once a permit is returned.
    pub(super) fn enter(self: &Arc<Self>, conduit: &Arc<Conduit>) -> Option<Permit> {
        if let Some(permit) = self.try_take() {
            return Some(permit);
        }
        self.waiters.push(conduit);
        self.try_take()
    }

    fn try_take(self: &Arc<Self>) -> Option<Permit> {
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Permit(Arc::clone(self)))
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.0.waiters.wake_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::share::Board;
    use crate::backend::slab::Key;
    use crate::backend::Notifier;

    /// A conduit whose notifications land on a board of its own.
    fn conduit() -> (Arc<Conduit>, Arc<Board>) {
        let board = Board::new(1);
        let notifier = Notifier::new(board.clone(), 0, Key::new(1, 1));
        (Arc::new(Conduit::new(notifier, false, false)), board)
    }

    #[test]
    fn the_bound_refuses_then_a_returned_permit_notifies_the_refused() {
        let gate = Gate::new(2);
        let (a, board_a) = conduit();
        let (b, _) = conduit();
        let (c, board) = conduit();
        let notified = || board.take_ready(0).count();
        let first = gate.enter(&a).expect("room for one");
        let second = gate.enter(&b).expect("room for two");
        assert!(gate.enter(&c).is_none(), "the third is refused");
        assert_eq!(notified(), 0);
        drop(first);
        assert_eq!(notified(), 1, "the refused conduit is told room freed");
        let _third = gate.enter(&c).expect("room again");
        assert!(gate.enter(&a).is_none(), "full again");
        drop(second);
        assert_eq!(board_a.take_ready(0).count(), 1);
        assert_eq!(notified(), 0, "told once per refusal");
    }
}
