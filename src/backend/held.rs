//! Held wakes: a thread about to notify many sessions in a burst can hold
//! the wakes of the cores it notifies and make each once, when it releases.
//!
//! The ASGI loop answers a batch of requests in one go; woken per answer, a
//! parked core would be woken again and again (a syscall each, and on a
//! virtual machine an interrupt to an idle CPU), to write one response per
//! pass. Held, it is woken once and writes the batch in one pass. The
//! notifications themselves are queued at once; only the wake waits, and only
//! on the holding thread, and for about [`HOLD_BOUND`]: the bound is checked
//! at each notification and at each [`refresh`] (the ASGI loop refreshes
//! after each request it starts), so a step that blocks its loop holds back
//! the answers finished before it by no more than that step.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::share::Board;

/// The longest a wake is held: a notification later than this into a hold
/// releases it.
pub const HOLD_BOUND: Duration = Duration::from_millis(1);

/// What a holding thread owes: the cores to wake (board and index), and
/// when the hold ends.
struct Hold {
    until: Instant,
    owed: Vec<(Arc<Board>, usize)>,
}

thread_local! {
    /// This thread's hold, if it holds its wakes.
    static HELD: RefCell<Option<Hold>> = const { RefCell::new(None) };
}

/// Hold this thread's wakes until [`release`] (holding twice holds once).
pub fn hold() {
    hold_for(HOLD_BOUND);
}

fn hold_for(bound: Duration) {
    HELD.with(|h| {
        h.borrow_mut().get_or_insert_with(|| Hold {
            until: Instant::now() + bound,
            owed: Vec::new(),
        });
    });
}

/// Past the bound, make the owed wakes and hold anew: for a holder that runs
/// long pieces of work between notifications (a step per request).
pub fn refresh() {
    let past = HELD.with(|h| {
        h.borrow()
            .as_ref()
            .is_some_and(|h| Instant::now() > h.until)
    });
    if past {
        release();
        hold();
    }
}

/// Stop holding, and wake each core owed a wake that is still parked.
pub fn release() {
    let hold = HELD.with(|h| h.borrow_mut().take());
    for (board, core) in hold.into_iter().flat_map(|h| h.owed) {
        board.wake(core);
    }
}

/// Wake `core` (if parked), or note it for [`release`] while holding.
pub(super) fn wake(board: &Arc<Board>, core: usize) {
    let held = HELD.with(|h| {
        let mut h = h.borrow_mut();
        let Some(hold) = h.as_mut() else {
            return Some(false);
        };
        if Instant::now() > hold.until {
            return None;
        }
        if !hold
            .owed
            .iter()
            .any(|(b, c)| *c == core && Arc::ptr_eq(b, board))
        {
            hold.owed.push((Arc::clone(board), core));
        }
        Some(true)
    });
    match held {
        Some(true) => {}
        Some(false) => board.wake(core),
        // Held too long: make every owed wake now, and this one.
        None => {
            release();
            board.wake(core);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Wake;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Count(Arc<AtomicUsize>);
    impl Wake for Count {
        fn wake(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn parked_board() -> (Arc<Board>, Arc<AtomicUsize>) {
        let board = Board::new(2);
        let woken = Arc::new(AtomicUsize::new(0));
        board.set_waker(1, Box::new(Count(Arc::clone(&woken))));
        assert!(board.park(1));
        (board, woken)
    }

    /// The woken core ran a pass and waits again: a wake reaches it anew
    /// (one wake per wait, [`crate::backend::Parked::claim_wake`]).
    fn waits_again(board: &Board) {
        board.begin_pass(1);
        assert!(board.park(1));
    }

    #[test]
    fn held_wakes_are_made_once_at_release() {
        let (board, woken) = parked_board();
        // A bound no scheduling delay reaches: the wakes wait for the release.
        hold_for(Duration::from_secs(60));
        for _ in 0..5 {
            wake(&board, 1);
        }
        assert_eq!(woken.load(Ordering::SeqCst), 0, "held");
        release();
        assert_eq!(woken.load(Ordering::SeqCst), 1, "one wake for the burst");
        waits_again(&board);
        wake(&board, 1);
        assert_eq!(woken.load(Ordering::SeqCst), 2, "not held after release");
    }

    #[test]
    fn a_hold_past_its_bound_wakes_at_once() {
        let (board, woken) = parked_board();
        hold();
        std::thread::sleep(HOLD_BOUND * 2);
        wake(&board, 1);
        assert!(
            woken.load(Ordering::SeqCst) >= 1,
            "a notification past the bound wakes"
        );
        let before = woken.load(Ordering::SeqCst);
        waits_again(&board);
        release();
        wake(&board, 1);
        assert_eq!(woken.load(Ordering::SeqCst), before + 1, "the hold ended");
    }

    #[test]
    fn a_refresh_past_the_bound_makes_the_owed_wakes_and_holds_anew() {
        let (board, woken) = parked_board();
        hold();
        wake(&board, 1);
        refresh();
        assert_eq!(
            woken.load(Ordering::SeqCst),
            0,
            "inside the bound: still held"
        );
        std::thread::sleep(HOLD_BOUND * 2);
        refresh();
        assert_eq!(woken.load(Ordering::SeqCst), 1, "past the bound: made");
        waits_again(&board);
        hold_for(Duration::from_secs(60)); // holding already: no new hold
        wake(&board, 1);
        assert_eq!(woken.load(Ordering::SeqCst), 1, "held anew");
        release();
        assert_eq!(woken.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn holding_is_per_thread() {
        let (board, woken) = parked_board();
        hold_for(Duration::from_secs(60));
        let b = Arc::clone(&board);
        std::thread::spawn(move || wake(&b, 1)).join().unwrap();
        assert_eq!(
            woken.load(Ordering::SeqCst),
            1,
            "another thread wakes at once"
        );
        release();
    }
}
