//! Prometheus metrics (`--metrics-address`), answered in Rust on their own
//! listener, with no Python on the path.
//!
//! Design: shared memory, not a scrape relayed to each worker. The
//! supervisor creates one [`counters::Region`] (a memfd) before any
//! worker and every worker inherits it; each core thread claims a
//! [`counters::Shard`] in it, tagged with its worker number, and counts
//! there with single-writer `Relaxed` stores (no lock, no shared cache
//! line on the request path). The supervisor, which never imports
//! Python, serves the scrape from its own thread ([`endpoint`]) by
//! summing the shards per worker, so a scrape never waits on a busy worker
//! (a socket round trip to each would wait behind its core threads' work
//! and fail with a worker that is stuck or restarting, the moment it is
//! most wanted). A worker that exits has its shards freed and zeroed by
//! the supervisor: its replacement, under the same `worker` label, starts
//! from zero, which Prometheus takes as a counter reset.

pub mod counters;
pub mod endpoint;
pub mod render;

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Worker replacements by worker number and cause: the supervisor's own
/// count, touched only when a worker is replaced (never on a request).
#[derive(Default)]
pub struct Restarts(Mutex<BTreeMap<(u32, &'static str), u64>>);

impl Restarts {
    /// Worker `worker` was replaced for `cause` (`exited`, `hung`, `rolling_restart`,
    /// `reload`, `max_requests`, `lifetime`, `max_rss`, `stuck`).
    pub fn count(&self, worker: usize, cause: &'static str) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *map.entry((worker as u32, cause)).or_default() += 1;
    }

    pub fn snapshot(&self) -> BTreeMap<(u32, &'static str), u64> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
