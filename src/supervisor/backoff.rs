//! How long a worker slot waits before its next start after failures: doubling
//! from [`FIRST`] up to [`MAX`], so a broken deploy costs a start every 10 s,
//! not a spinning CPU.

use std::time::Duration;

/// The delay after the first failure.
pub const FIRST: Duration = Duration::from_millis(100);
/// The bound the delays double up to.
pub const MAX: Duration = Duration::from_secs(10);
/// A worker that served this long before it exited was healthy: its slot's
/// failures are forgotten, and it is replaced at once.
pub const HEALTHY: Duration = Duration::from_secs(1);

/// The wait before the next start after `failures` failures in a row.
pub fn delay(failures: u32) -> Duration {
    match failures {
        0 => Duration::ZERO,
        n => FIRST.saturating_mul(1 << (n - 1).min(16)).min(MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_the_first_and_stop_at_the_bound() {
        let ms: Vec<u128> = (0..9).map(|n| delay(n).as_millis()).collect();
        assert_eq!(ms, [0, 100, 200, 400, 800, 1600, 3200, 6400, 10_000]);
        assert_eq!(delay(u32::MAX), MAX);
    }
}
