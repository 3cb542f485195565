//! How many requests this process may serve before its supervisor recycles
//! it (`--workers-max-requests`): a per-process count of request heads, and
//! the one call made when it reaches the limit. Without a budget (the
//! default) counting is one atomic load per request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// A limit, and what to call when it is reached.
pub struct Budget {
    limit: u64,
    reached: Box<dyn Fn() + Send + Sync>,
}

impl Budget {
    /// Call `reached` once, on the core thread whose request is the
    /// `limit`th (at least 1).
    pub fn new(limit: u64, reached: impl Fn() + Send + Sync + 'static) -> Budget {
        Budget {
            limit: limit.max(1),
            reached: Box::new(reached),
        }
    }
}

static BUDGET: OnceLock<Budget> = OnceLock::new();
static SERVED: AtomicU64 = AtomicU64::new(0);

/// Count against `budget` from now on. Set once per process (by
/// [`super::run`], from what the supervisor handed it); a second call is
/// ignored.
pub(super) fn set(budget: Budget) {
    let _ = BUDGET.set(budget);
}

/// A request head arrived.
pub fn count() {
    if let Some(budget) = BUDGET.get() {
        if SERVED.fetch_add(1, Ordering::Relaxed) + 1 == budget.limit {
            (budget.reached)();
        }
    }
}
