//! Pool threads stuck in calls past `--request-timeout`: their calls were
//! abandoned, but a WSGI thread cannot be stopped. Once every pool thread
//! is stuck so, the worker serves nothing more, and asks its supervisor
//! for a replacement, which is ready before this worker drains (the roll's
//! path). A thread whose call ends after all is counted out again.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// The calling thread's id as Python's `threading.get_ident()` gives it.
// `c_ulong` is 32 bits wide on some targets.
#[allow(clippy::useless_conversion)]
pub(super) fn thread_ident() -> u64 {
    // SAFETY: takes nothing and returns the calling thread's id.
    u64::from(unsafe { pyo3::ffi::PyThread_get_thread_ident() })
}

pub(super) struct Stuck {
    /// The pool's threads (0: the loop-only shape, whose core thread the
    /// supervisor's `--worker-timeout` watches instead).
    threads: usize,
    /// The stuck threads' ids, and how many (read without the lock).
    ids: Mutex<Vec<u64>>,
    count: AtomicUsize,
    /// Asks the supervisor for a replacement (set in a worker).
    ask: OnceLock<Arc<dyn Fn() + Send + Sync>>,
    asked: AtomicBool,
}

impl Stuck {
    pub(super) fn new(threads: usize) -> Stuck {
        Stuck {
            threads,
            ids: Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
            ask: OnceLock::new(),
            asked: AtomicBool::new(false),
        }
    }

    pub(super) fn asks_with(&self, ask: Arc<dyn Fn() + Send + Sync>) {
        let _ = self.ask.set(ask);
    }

    /// Thread `id`'s call ran past the limit; whether every thread is now
    /// stuck (the supervisor is asked, once).
    pub(super) fn mark(&self, id: u64) -> bool {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        if !ids.contains(&id) {
            ids.push(id);
            self.count.store(ids.len(), Ordering::Release);
        }
        let all = self.threads > 0 && ids.len() >= self.threads;
        drop(ids);
        if all && !self.asked.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                target: "m0serve::wsgi",
                "every pool thread ({}) is stuck past --request-timeout: asking for a replacement",
                self.threads
            );
            if let Some(ask) = self.ask.get() {
                ask();
            }
        }
        all
    }

    /// The calling pool thread finished a call: it is stuck no more.
    pub(super) fn done_here(&self) {
        if self.count.load(Ordering::Acquire) == 0 {
            return;
        }
        let id = thread_ident();
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        ids.retain(|&i| i != id);
        self.count.store(ids.len(), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_supervisor_is_asked_once_every_thread_is_stuck() {
        let stuck = Stuck::new(2);
        let asked = Arc::new(AtomicUsize::new(0));
        let counted = asked.clone();
        stuck.asks_with(Arc::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
        }));
        assert!(!stuck.mark(7));
        assert!(!stuck.mark(7), "the same thread twice is one");
        assert!(stuck.mark(8));
        assert!(stuck.mark(8));
        assert_eq!(asked.load(Ordering::SeqCst), 1, "asked once");
    }

    #[test]
    fn a_thread_whose_call_ends_is_counted_out() {
        let stuck = Stuck::new(2);
        stuck.mark(thread_ident());
        stuck.done_here();
        assert!(!stuck.mark(9), "one of two stuck");
    }

    #[test]
    fn the_loop_only_shape_never_asks() {
        assert!(!Stuck::new(0).mark(1));
    }
}
