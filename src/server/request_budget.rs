//! How many requests this process may serve before its supervisor recycles
//! it (`--workers-max-requests`): a per-process count of request heads, and
//! the one call made when it reaches the limit. Without a budget (the
//! default) counting is one atomic load per request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

struct Budget {
    limit: u64,
    reached: Box<dyn Fn() + Send + Sync>,
}

static BUDGET: OnceLock<Budget> = OnceLock::new();
static SERVED: AtomicU64 = AtomicU64::new(0);

/// Call `reached` once, on the core thread whose request is the `limit`th
/// (at least 1). Set once per process; a second call is ignored.
pub fn set(limit: u64, reached: impl Fn() + Send + Sync + 'static) {
    let _ = BUDGET.set(Budget {
        limit: limit.max(1),
        reached: Box::new(reached),
    });
}

/// A request head arrived.
pub fn count() {
    if let Some(budget) = BUDGET.get() {
        if SERVED.fetch_add(1, Ordering::Relaxed) + 1 == budget.limit {
            (budget.reached)();
        }
    }
}
