//! Held wakes: a thread about to notify many sessions in a burst can hold
//! the wakes of the cores it notifies and make each once, when it releases.
//!
//! The ASGI loop answers a batch of requests in one go; woken per answer, a
//! parked core would be woken again and again (a syscall each, and on a
//! virtual machine an interrupt to an idle CPU), to write one response per
//! pass. Held, it is woken once and writes the batch in one pass. The
//! notifications themselves are queued at once; only the wake waits, and only
//! on the holding thread.

use std::cell::RefCell;
use std::sync::Arc;

use super::share::Board;

/// A core owed a wake: its board and its index.
type Owed = (Arc<Board>, usize);

thread_local! {
    /// The cores owed a wake while this thread holds them (None: not holding).
    static HELD: RefCell<Option<Vec<Owed>>> = const { RefCell::new(None) };
}

/// Hold this thread's wakes until [`release`] (holding twice holds once).
pub fn hold() {
    HELD.with(|h| {
        h.borrow_mut().get_or_insert_with(Vec::new);
    });
}

/// Stop holding, and wake each core owed a wake that is still parked.
pub fn release() {
    let owed = HELD.with(|h| h.borrow_mut().take());
    for (board, core) in owed.into_iter().flatten() {
        board.wake(core);
    }
}

/// Wake `core` (if parked), or note it for [`release`] while holding.
pub(super) fn wake(board: &Arc<Board>, core: usize) {
    let held = HELD.with(|h| match h.borrow_mut().as_mut() {
        Some(owed) => {
            if !owed
                .iter()
                .any(|(b, c)| *c == core && Arc::ptr_eq(b, board))
            {
                owed.push((Arc::clone(board), core));
            }
            true
        }
        None => false,
    });
    if !held {
        board.wake(core);
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

    #[test]
    fn held_wakes_are_made_once_at_release() {
        let (board, woken) = parked_board();
        hold();
        for _ in 0..5 {
            wake(&board, 1);
        }
        assert_eq!(woken.load(Ordering::SeqCst), 0, "held");
        release();
        assert_eq!(woken.load(Ordering::SeqCst), 1, "one wake for the burst");
        wake(&board, 1);
        assert_eq!(woken.load(Ordering::SeqCst), 2, "not held after release");
    }

    #[test]
    fn holding_is_per_thread() {
        let (board, woken) = parked_board();
        hold();
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
