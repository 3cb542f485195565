//! When a healthy worker is replaced anyway (`--workers-max-requests`,
//! `--workers-lifetime`, `--workers-max-rss`): the limits, each worker's
//! share of them, and why a recycle happens. The recycle itself is the
//! rolling restart's (the replacement is READY before the old worker
//! drains), one at a time (the queue in `supervisor::state`).

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::time::{Duration, Instant};

/// The recycling limits (all off by default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recycle {
    pub max_requests: Option<u64>,
    /// Up to this many requests more, drawn per worker, so workers started
    /// together do not reach their limit together (gunicorn's jitter).
    pub max_requests_jitter: u64,
    pub lifetime: Option<Duration>,
    /// Bytes of resident memory; two samples in a row above it recycle.
    pub max_rss: Option<u64>,
}

/// How often the workers' resident memory is sampled.
pub const RSS_SAMPLE: Duration = Duration::from_secs(1);
/// Samples in a row above `--workers-max-rss` that recycle a worker: one
/// burst (a big request) is not a leak.
pub const RSS_STRIKES: u32 = 2;

/// Why a worker is being replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// SIGHUP.
    Roll,
    /// `--reload` saw a change.
    Reload,
    MaxRequests,
    Lifetime,
    MaxRss(u64),
    /// Every thread of its app is stuck past `--request-timeout`.
    Stuck,
}

impl Why {
    /// Its name as a metrics label.
    pub fn label(&self) -> &'static str {
        match self {
            Why::Roll => "rolling_restart",
            Why::Reload => "reload",
            Why::MaxRequests => "max_requests",
            Why::Lifetime => "lifetime",
            Why::MaxRss(_) => "max_rss",
            Why::Stuck => "stuck",
        }
    }
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::Roll => f.write_str("rolling restart"),
            Why::Reload => f.write_str("reload"),
            Why::MaxRequests => f.write_str("served its --workers-max-requests"),
            Why::Stuck => f.write_str("has every thread stuck past --request-timeout"),
            Why::Lifetime => f.write_str("reached its --workers-lifetime"),
            Why::MaxRss(rss) => write!(
                f,
                "resident memory {} MiB over --workers-max-rss twice in a row",
                rss >> 20
            ),
        }
    }
}

impl Recycle {
    /// A new worker's request limit: the maximum plus its draw of the
    /// jitter (no need for a random crate: std's per-process hash keys).
    pub fn requests_for(&self, number: usize) -> Option<u64> {
        let max = self.max_requests?;
        let draw = RandomState::new().hash_one((number, Instant::now()));
        Some(max.saturating_add(draw % self.max_requests_jitter.saturating_add(1)))
    }

    /// When a worker started at `started` is due for its lifetime recycle.
    /// The first generation (`first` of `workers`, started together) is
    /// spread over the lifetime: worker k of n at k/n of it, so none lives
    /// longer than the lifetime and their recycles come evenly apart; later
    /// workers keep that spacing by starting where the one before ended.
    pub fn deadline(
        &self,
        started: Instant,
        number: usize,
        first: Option<usize>,
    ) -> Option<Instant> {
        let lifetime = self.lifetime?;
        let life = match first {
            Some(workers) if workers > 1 && number <= workers => {
                lifetime.mul_f64(number as f64 / workers as f64)
            }
            _ => lifetime,
        };
        Some(started + life)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_limits_stay_within_the_jitter_and_vary() {
        let recycle = Recycle {
            max_requests: Some(100),
            max_requests_jitter: 10,
            ..Recycle::default()
        };
        let limits: Vec<u64> = (0..50).map(|n| recycle.requests_for(n).unwrap()).collect();
        assert!(
            limits.iter().all(|&n| (100..=110).contains(&n)),
            "{limits:?}"
        );
        assert!(limits.iter().any(|&n| n != limits[0]), "{limits:?}");
        let exact = Recycle {
            max_requests: Some(7),
            ..Recycle::default()
        };
        assert_eq!(exact.requests_for(1), Some(7));
        assert_eq!(Recycle::default().requests_for(1), None);
    }

    #[test]
    fn the_first_generation_spreads_its_lifetimes_and_later_ones_live_it_whole() {
        let recycle = Recycle {
            lifetime: Some(Duration::from_secs(60)),
            ..Recycle::default()
        };
        let t = Instant::now();
        let at = |number, first| recycle.deadline(t, number, first).unwrap() - t;
        assert_eq!(at(1, Some(3)), Duration::from_secs(20));
        assert_eq!(at(2, Some(3)), Duration::from_secs(40));
        assert_eq!(at(3, Some(3)), Duration::from_secs(60));
        assert_eq!(at(1, Some(1)), Duration::from_secs(60));
        assert_eq!(at(2, None), Duration::from_secs(60));
        assert_eq!(Recycle::default().deadline(t, 1, None), None);
    }
}
