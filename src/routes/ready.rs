//! The ready path: a readiness probe answered on the core thread, 200 while
//! the whole server should be sent traffic, 503 while it should not.
//!
//! Under a supervisor the answer is the supervisor's [`ReadyFlag`], shared
//! with every worker, so whichever worker a probe reaches answers for its
//! siblings too: 200 once every worker slot has held a worker that loaded
//! the app and finished lifespan startup (a worker accepts only after both)
//! and while one such worker serves; 503 from the moment a shutdown begins
//! (the `--shutdown-delay` included). A worker that died leaves it 200 while
//! a sibling serves (the supervisor's `publish_readiness` says why). A rolling restart keeps it 200: a slot's old worker serves until
//! its replacement is ready, so N ready workers serve throughout, and a
//! worker drained by the roll still answers 200 for the server it belongs to.
//!
//! Without a shared flag (a server run without a supervisor, or where no
//! memfd can be made) the process answers for itself: 200 until its drain begins.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use crate::http::RequestHead;
use crate::ipc::ready_flag::ReadyFlag;
use crate::reply::Reply;

/// What the ready path answers from.
#[derive(Debug, Default)]
pub struct Readiness {
    /// The supervisor's flag for every worker, once this worker mapped it.
    all: OnceLock<ReadyFlag>,
    /// This process's drain began (what counts without a shared flag).
    draining: AtomicBool,
}

impl Readiness {
    /// Answer with the supervisor's `flag` from now on.
    pub fn share(&self, flag: ReadyFlag) {
        let _ = self.all.set(flag);
    }

    /// This process's drain began.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Release);
    }

    pub fn ready(&self) -> bool {
        match self.all.get() {
            Some(flag) => flag.get(),
            None => !self.draining.load(Ordering::Acquire),
        }
    }
}

/// 200 "OK" or 503 "Not Ready" on GET and HEAD; 405 otherwise.
pub(super) fn answer(head: &RequestHead, readiness: &Readiness) -> Reply {
    if !super::is_get_or_head(head) {
        return super::method_not_allowed();
    }
    let mut reply = match readiness.ready() {
        true => Reply::text(200, "OK"),
        false => Reply::text(503, "Not Ready"),
    };
    // The answer changes from one moment to the next: never cached.
    reply
        .headers
        .push(("Cache-Control".into(), "no-store".into()));
    reply
}
