//! The accept batch: new connections wait for the ones a core already holds.
//!
//! Every admission runs the connection's eager read, and when the core serves
//! requests itself (the loop-only shape) that read is a whole request. A core
//! that drained its listener before anything else would serve a burst of N new
//! connections back to back while every connection it already held waited. So:
//!
//! - a *door* (the listener, or the hand-off channel through which a sibling
//!   passes connections) admits at most one batch per pass, 16 by default
//!   ([`crate::tuning::DEFAULT_ACCEPT_BATCH`]; `M0_ACCEPT_BATCH=0` drains
//!   everything: the negative arm);
//! - the batch runs after the pass's other events, so a request already held
//!   is served before the burst that arrived beside it;
//! - what a batch leaves is *owed*: neither door announces the same backlog
//!   again (edge-triggered readiness, or accepts already completed by a
//!   multishot), so the next pass takes a batch with no event, and a pass with
//!   something owed never blocks in its wait.
//!
//! A count rather than a time budget: a count is what a probe can hold the
//! loop to, and a clock read per accept buys nothing a smaller count does not.

/// How often an io_uring core looks at a listener shared with sibling
/// processes itself, when its own accept saw no connection for that long.
/// An accept wait is exclusive: a connection wakes one waiter, and a
/// sibling's ring that will never run its accept (its worker was killed)
/// keeps that wake-up to itself, leaving the connection queued with nobody
/// woken for it until the next client arrives (a ring test in the uring
/// crate shows the kernel doing so; `uring/tests.rs` holds the negative arm).
/// A stranded connection waits twice this at most, and an idle core pays
/// ten non-blocking accepts a second. Unshared listeners need none.
pub const RECHECK: std::time::Duration = std::time::Duration::from_millis(100);

/// Admissions per door per pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch(usize);

impl Batch {
    /// A batch of `n` admissions; 0 means no limit.
    pub fn new(n: usize) -> Batch {
        Batch(if n == 0 { usize::MAX } else { n })
    }

    pub fn limit(self) -> usize {
        self.0
    }
}

/// What one step of a batch found at the door.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// A connection was admitted (or handed on); the batch goes on.
    Admitted,
    /// The door is empty: nothing is owed.
    Empty,
    /// The door cannot be taken from now (the connection limit, or an error
    /// such as EMFILE that trying harder will not cure): nothing is owed, so
    /// the pass's wait still blocks, bounded by [`RETRY_BLOCKED`].
    Blocked,
}

/// How long a core waits before it retries a door that was [`Step::Blocked`].
pub const RETRY_BLOCKED: std::time::Duration = std::time::Duration::from_millis(5);

/// One door's state across passes.
#[derive(Debug, Default)]
pub struct Door {
    /// Readiness was announced (or a batch left some): take a batch this pass.
    ready: bool,
    /// The last batch stopped at its limit: the next pass must not block.
    owed: bool,
    /// The last batch was blocked: retry after [`RETRY_BLOCKED`].
    blocked: bool,
}

impl Door {
    /// The door's readiness was announced by an event.
    pub fn announce(&mut self) {
        self.ready = true;
    }

    /// Whether this pass should take a batch from the door.
    pub fn due(&self) -> bool {
        self.ready || self.owed || self.blocked
    }

    /// Whether a batch is owed, so the pass's wait must not block.
    pub fn owed(&self) -> bool {
        self.owed
    }

    /// Whether the door is waiting out a [`Step::Blocked`].
    pub fn blocked(&self) -> bool {
        self.blocked
    }

    /// Forget everything owed (shutdown: the door is closing).
    pub fn clear(&mut self) {
        *self = Door::default();
    }

    /// Run one batch: call `step` until the door is empty, blocked, or the
    /// batch is spent. Returns how many were admitted.
    pub fn run(&mut self, batch: Batch, mut step: impl FnMut() -> Step) -> usize {
        let mut admitted = 0;
        self.ready = false;
        self.owed = false;
        self.blocked = false;
        loop {
            if admitted >= batch.limit() {
                self.owed = true;
                return admitted;
            }
            match step() {
                Step::Admitted => admitted += 1,
                Step::Empty => return admitted,
                Step::Blocked => {
                    self.blocked = true;
                    return admitted;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_stops_at_its_limit_and_owes_the_rest() {
        let mut door = Door::default();
        door.announce();
        let mut backlog = 40;
        let take = |b: &mut usize| {
            if *b == 0 {
                Step::Empty
            } else {
                *b -= 1;
                Step::Admitted
            }
        };
        assert_eq!(door.run(Batch::new(16), || take(&mut backlog)), 16);
        assert!(door.owed() && door.due());
        assert_eq!(door.run(Batch::new(16), || take(&mut backlog)), 16);
        assert!(door.owed());
        assert_eq!(door.run(Batch::new(16), || take(&mut backlog)), 8);
        assert!(!door.owed() && !door.due(), "an emptied door owes nothing");
    }

    #[test]
    fn zero_drains_everything_in_one_pass() {
        let mut door = Door::default();
        door.announce();
        let mut backlog = 1000;
        let n = door.run(Batch::new(0), || {
            if backlog == 0 {
                Step::Empty
            } else {
                backlog -= 1;
                Step::Admitted
            }
        });
        assert_eq!(n, 1000);
        assert!(!door.owed());
    }

    #[test]
    fn a_blocked_door_is_retried_but_not_owed() {
        let mut door = Door::default();
        door.announce();
        assert_eq!(door.run(Batch::new(16), || Step::Blocked), 0);
        assert!(
            !door.owed(),
            "a blocked door must not keep the wait from blocking"
        );
        assert!(door.blocked() && door.due());
    }

    #[test]
    fn a_door_nobody_announced_is_not_due() {
        assert!(!Door::default().due());
    }
}
