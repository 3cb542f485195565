//! What the pool's threads did, for tests and for `M0_POOL_DEBUG=1`.
//!
//! Counters are always kept (they change on the turn's rare paths and on
//! jobs kept inside a slice), and so is the histogram of the wait to
//! re-attach (one uncontended add per attach, which already read the clock
//! and waited for the GIL: the metrics export it). The other log2
//! histograms are filled only with `M0_POOL_DEBUG=1`: the wait on the
//! queue before the pop, slice lengths, and jobs per slice. With it all
//! are printed when the pool shuts down.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::turn::Run;

/// Buckets: bucket `i` counts values in `[2^(i-1), 2^i)` (bucket 0 counts 0).
pub const BUCKETS: usize = 48;

struct Histogram([AtomicU64; BUCKETS]);

impl Histogram {
    fn new() -> Histogram {
        Histogram(std::array::from_fn(|_| AtomicU64::new(0)))
    }

    fn snapshot(&self) -> [u64; BUCKETS] {
        std::array::from_fn(|i| self.0[i].load(Ordering::Relaxed))
    }

    fn record(&self, value: u64) {
        let bucket = (u64::BITS - value.leading_zeros()) as usize;
        self.0[bucket.min(BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
    }

    /// One line per non-empty bucket: `  [lo, hi) unit: count`.
    fn render(&self, name: &str, unit: &str, out: &mut String) {
        let _ = writeln!(out, "{name}:");
        for (i, n) in self.0.iter().enumerate() {
            let n = n.load(Ordering::Relaxed);
            if n > 0 {
                let lo = if i == 0 { 0 } else { 1u64 << (i - 1) };
                let _ = writeln!(out, "  [{lo}, {}) {unit}: {n}", 1u64 << i);
            }
        }
    }
}

/// A snapshot of the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Jobs a thread took inside its slice without dropping the GIL.
    pub kept: u64,
    /// Drops at a spent slice with a waiter parked (each yielded).
    pub yields: u64,
    /// Yields that ran out of their bound before an attach completed.
    pub yield_timeouts: u64,
}

pub(crate) struct Stats {
    debug: bool,
    kept: AtomicU64,
    yields: AtomicU64,
    yield_timeouts: AtomicU64,
    attach_ns: Histogram,
    attach_sum_ns: AtomicU64,
    queue_ns: Histogram,
    slice_ns: Histogram,
    slice_jobs: Histogram,
}

impl Stats {
    pub(crate) fn new(debug: bool) -> Stats {
        Stats {
            debug,
            kept: AtomicU64::new(0),
            yields: AtomicU64::new(0),
            yield_timeouts: AtomicU64::new(0),
            attach_ns: Histogram::new(),
            attach_sum_ns: AtomicU64::new(0),
            queue_ns: Histogram::new(),
            slice_ns: Histogram::new(),
            slice_jobs: Histogram::new(),
        }
    }

    pub(crate) fn attach_wait(&self, waited: Duration) {
        let ns = waited.as_nanos() as u64;
        self.attach_ns.record(ns);
        self.attach_sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// The waits to re-attach so far: the log2 buckets (nanoseconds, see
    /// [`BUCKETS`]) and their sum.
    pub(crate) fn attach_waits(&self) -> ([u64; BUCKETS], u64) {
        (
            self.attach_ns.snapshot(),
            self.attach_sum_ns.load(Ordering::Relaxed),
        )
    }

    /// When a queue wait began, read only with the debug histograms on: a
    /// pool thread otherwise makes two clock reads fewer per job.
    pub(crate) fn queue_wait_start(&self) -> Option<Instant> {
        self.debug.then(Instant::now)
    }

    /// A queue wait that began at `start` ([`Stats::queue_wait_start`]) ended.
    pub(crate) fn queue_wait(&self, start: Option<Instant>) {
        if let Some(start) = start {
            self.queue_ns.record(start.elapsed().as_nanos() as u64);
        }
    }

    pub(crate) fn kept(&self) {
        self.kept.fetch_add(1, Ordering::Relaxed);
    }

    /// A run ended in a hand-off; `handed`: an attach completed within the bound.
    pub(crate) fn hand_off(&self, run: &Run, handed: bool) {
        self.yields.fetch_add(1, Ordering::Relaxed);
        if !handed {
            self.yield_timeouts.fetch_add(1, Ordering::Relaxed);
        }
        if self.debug {
            if let Some(start) = run.start {
                self.slice_ns.record(start.elapsed().as_nanos() as u64);
            }
            self.slice_jobs.record(run.jobs);
        }
    }

    pub(crate) fn counters(&self) -> Counters {
        Counters {
            kept: self.kept.load(Ordering::Relaxed),
            yields: self.yields.load(Ordering::Relaxed),
            yield_timeouts: self.yield_timeouts.load(Ordering::Relaxed),
        }
    }

    /// The histograms and counters, for `M0_POOL_DEBUG=1` (None without it).
    pub(crate) fn report(&self) -> Option<String> {
        if !self.debug {
            return None;
        }
        let c = self.counters();
        let mut out = format!(
            "m0serve pool (M0_POOL_DEBUG): {} jobs kept inside a slice, {} hand-offs ({} ran out of their bound)\n",
            c.kept, c.yields, c.yield_timeouts
        );
        self.attach_ns.render("wait to re-attach", "ns", &mut out);
        self.queue_ns
            .render("wait on the queue before the pop", "ns", &mut out);
        self.slice_ns.render("slice lengths", "ns", &mut out);
        self.slice_jobs.render("jobs per slice", "jobs", &mut out);
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_in_their_log2_bucket() {
        let h = Histogram::new();
        for v in [0, 1, 2, 3, 4, 1000] {
            h.record(v);
        }
        let mut out = String::new();
        h.render("h", "ns", &mut out);
        assert!(out.contains("[0, 1) ns: 1"), "{out}");
        assert!(out.contains("[1, 2) ns: 1"), "{out}");
        assert!(out.contains("[2, 4) ns: 2"), "{out}");
        assert!(out.contains("[4, 8) ns: 1"), "{out}");
        assert!(out.contains("[512, 1024) ns: 1"), "{out}");
    }

    #[test]
    fn only_the_reattach_wait_is_kept_without_debug() {
        let s = Stats::new(false);
        s.attach_wait(Duration::from_micros(5));
        s.queue_wait(s.queue_wait_start());
        assert!(s.report().is_none());
        let (buckets, sum) = s.attach_waits();
        assert_eq!(buckets[13], 1, "5000 ns is in [4096, 8192)");
        assert_eq!(sum, 5000);
        assert!(!s.queue_ns.0.iter().any(|b| b.load(Ordering::Relaxed) > 0));
    }
}
