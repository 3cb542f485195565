//! Wakes a core thread defers to the end of its pass.
//!
//! A core thread hands jobs to threads that may share its CPU (a worker's
//! pool threads are confined to its cores' CPUs). Woken at the first job, such
//! a thread preempts the core in the middle of its pass, runs that one job and
//! parks again, and the core resumes only to wake it for the next: measured
//! with `--workers 2 --cores 1` on WSGI hello, 0.6-0.9 involuntary switches
//! of each core thread per request. Deferred to the end of the pass (just
//! before the core waits), one wake lets the woken thread take the whole
//! pass's jobs in one go, and where it runs on another CPU it starts no more
//! than one pass later.
//!
//! The pool defers its wake where its threads share the core's CPU (a
//! worker confined to its cores' CPUs; `M0_POOL_DEFER_WAKE` overrides), and
//! wakes one thread, which wakes the next as it takes a job: woken together,
//! the pass's threads took their jobs out of order past the fairness
//! probe's bound.
//!
//! Only a thread that runs a core loop may defer ([`on_core_thread`]):
//! elsewhere (a test's thread, a thread with no pass to end) nothing would pay,
//! and the caller wakes at once.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

/// Something to wake once the pass is over, told how many jobs it was given.
pub trait Wake: Send + Sync {
    fn wake(&self, jobs: usize);
}

thread_local! {
    /// Set on a core thread: it pays what it owes before each wait.
    static CORE: Cell<bool> = const { Cell::new(false) };
    /// The wakes owed this pass and the jobs behind each.
    static OWED: RefCell<Vec<(Arc<dyn Wake>, usize)>> = const { RefCell::new(Vec::new()) };
}

/// Mark the calling thread as a core thread: it calls [`pay`] before it waits.
pub fn enter_core() {
    CORE.with(|c| c.set(true));
}

/// Whether the calling thread runs a core loop, which pays what it defers.
pub fn on_core_thread() -> bool {
    CORE.with(Cell::get)
}

/// Owe `waker` a wake for one more job at the end of this pass. Only on a
/// core thread ([`on_core_thread`]): nothing else pays.
pub fn defer(waker: &Arc<dyn Wake>) {
    debug_assert!(on_core_thread(), "a wake deferred where no pass ends");
    OWED.with(|owed| {
        let mut owed = owed.borrow_mut();
        match owed.iter_mut().find(|(w, _)| Arc::ptr_eq(w, waker)) {
            Some((_, jobs)) => *jobs += 1,
            None => owed.push((Arc::clone(waker), 1)),
        }
    });
}

/// Make the wakes owed this pass; a core loop calls it before it waits.
pub fn pay() {
    // Taken out first: a wake must not find the list borrowed.
    let owed = OWED.with(|owed| std::mem::take(&mut *owed.borrow_mut()));
    for (waker, jobs) in owed {
        waker.wake(jobs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Count(AtomicUsize, AtomicUsize);

    impl Wake for Count {
        fn wake(&self, jobs: usize) {
            self.0.fetch_add(1, Ordering::SeqCst);
            self.1.fetch_add(jobs, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_core_thread_owes_one_wake_per_waker_per_pass_with_its_jobs() {
        std::thread::spawn(|| {
            let count = Arc::new(Count::default());
            let waker: Arc<dyn Wake> = count.clone();
            assert!(!on_core_thread());
            enter_core();
            assert!(on_core_thread());
            defer(&waker);
            defer(&waker);
            defer(&waker);
            assert_eq!(
                count.0.load(Ordering::SeqCst),
                0,
                "nothing before the pass ends"
            );
            pay();
            assert_eq!(count.0.load(Ordering::SeqCst), 1);
            assert_eq!(count.1.load(Ordering::SeqCst), 3);
            pay();
            assert_eq!(count.0.load(Ordering::SeqCst), 1, "paid once");
        })
        .join()
        .unwrap();
    }
}
