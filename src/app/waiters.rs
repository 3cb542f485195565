//! The conduits of refused requests ([`super::Refused`]), notified once the
//! application has room again so that their sessions call again.
//!
//! A refusing app registers the conduit, then tries once more: room that
//! freed between the refusal and the registration would otherwise be missed.
//! If that try succeeds the registration stays and costs one spurious
//! notification later, which sessions ignore.

use std::sync::Arc;

use crossbeam_queue::SegQueue;

use super::Conduit;

/// Refused conduits waiting for room (lock-free: any thread registers, any frees).
#[derive(Default)]
pub struct Waiters(SegQueue<Arc<Conduit>>);

impl Waiters {
    /// Notify `conduit` at the next [`Waiters::wake_all`].
    pub fn push(&self, conduit: &Arc<Conduit>) {
        self.0.push(Arc::clone(conduit));
    }

    /// Notify every waiting conduit: each session calls again (those that
    /// find no room register again). All of them, not one: a notified
    /// session may have closed since and would never call.
    pub fn wake_all(&self) {
        while let Some(conduit) = self.0.pop() {
            conduit.notify();
        }
    }
}
