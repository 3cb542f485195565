//! Session deadlines: one heap per core, with lazy deletion.
//!
//! A session's [`super::Session::deadline`] moves (each read pushes a read
//! timeout later) far more often than it fires, so moving it must cost
//! nothing. The heap holds `(instant, token)` entries and is never searched:
//! each connection remembers in its [`Armed`] the earliest entry it has in the
//! heap, a new entry is pushed only when the deadline moves *earlier* than
//! that, and an entry that fires is checked against the session's current
//! deadline (a later one is re-armed, a stale one ignored). Entries of closed
//! connections stay until they fire and are ignored then (a slot reused by a
//! new connection has its own `Armed`), so the heap holds at most the live
//! connections plus those closed within one timeout.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// The earliest entry a connection has in the [`Timers`] heap, if any.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Armed(Option<Instant>);

impl Armed {
    /// An entry for this connection at `at` was popped: whether it is the one
    /// armed (which is then spent), rather than a stale one.
    pub fn fired(&mut self, at: Instant) -> bool {
        if self.0 == Some(at) {
            self.0 = None;
            true
        } else {
            false
        }
    }
}

/// A core's deadline heap; tokens are the backend's connection slots.
#[derive(Debug, Default)]
pub struct Timers {
    heap: BinaryHeap<Reverse<(Instant, usize)>>,
}

impl Timers {
    /// Make sure the connection `token` is woken by `deadline`: push an entry
    /// unless one no later is already armed. Call after every callback that
    /// may have moved the session's deadline.
    pub fn arm(&mut self, token: usize, armed: &mut Armed, deadline: Option<Instant>) {
        if let Some(d) = deadline {
            if armed.0.is_none_or(|a| d < a) {
                self.heap.push(Reverse((d, token)));
                armed.0 = Some(d);
            }
        }
    }

    /// Pop the next entry due at `now`: `(token, at)`. The backend checks it
    /// with [`Armed::fired`], then calls `on_deadline` only if the session's
    /// current deadline has passed, then re-arms.
    pub fn pop_due(&mut self, now: Instant) -> Option<(usize, Instant)> {
        match self.heap.peek() {
            Some(Reverse((at, _))) if *at <= now => {
                let Reverse((at, token)) = self.heap.pop()?;
                Some((token, at))
            }
            _ => None,
        }
    }

    /// The earliest entry (possibly stale: waking for it costs one empty pass).
    pub fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    /// How long a wait may block before the earliest entry is due.
    pub fn timeout(&self, now: Instant) -> Option<Duration> {
        self.next().map(|at| at.saturating_duration_since(now))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_deadline_moved_later_pushes_nothing_and_is_rearmed_when_it_fires() {
        let t0 = Instant::now();
        let mut timers = Timers::default();
        let mut armed = Armed::default();
        timers.arm(3, &mut armed, Some(t0 + ms(10)));
        timers.arm(3, &mut armed, Some(t0 + ms(20)));
        timers.arm(3, &mut armed, Some(t0 + ms(30)));
        assert_eq!(timers.len(), 1, "moving a deadline later is free");
        assert_eq!(timers.pop_due(t0 + ms(5)), None);
        let (token, at) = timers.pop_due(t0 + ms(10)).unwrap();
        assert_eq!((token, at), (3, t0 + ms(10)));
        assert!(armed.fired(at));
        // The backend sees the session's deadline is now t0+30 and re-arms.
        timers.arm(3, &mut armed, Some(t0 + ms(30)));
        assert_eq!(timers.next(), Some(t0 + ms(30)));
    }

    #[test]
    fn a_deadline_moved_earlier_is_pushed_and_the_old_entry_goes_stale() {
        let t0 = Instant::now();
        let mut timers = Timers::default();
        let mut armed = Armed::default();
        timers.arm(1, &mut armed, Some(t0 + ms(50)));
        timers.arm(1, &mut armed, Some(t0 + ms(10)));
        assert_eq!(timers.timeout(t0), Some(ms(10)));
        let (_, at) = timers.pop_due(t0 + ms(10)).unwrap();
        assert!(armed.fired(at));
        let (_, stale) = timers.pop_due(t0 + ms(60)).unwrap();
        assert!(!armed.fired(stale), "the superseded entry is stale");
        assert!(timers.is_empty());
    }

    #[test]
    fn entries_pop_in_deadline_order_and_a_reused_slot_ignores_its_predecessor() {
        let t0 = Instant::now();
        let mut timers = Timers::default();
        let (mut a, mut b) = (Armed::default(), Armed::default());
        timers.arm(7, &mut a, Some(t0 + ms(30)));
        timers.arm(8, &mut b, Some(t0 + ms(20)));
        // Slot 7 is closed and reused by a connection with its own Armed.
        let mut reused = Armed::default();
        timers.arm(7, &mut reused, Some(t0 + ms(40)));
        let order: Vec<_> = std::iter::from_fn(|| timers.pop_due(t0 + ms(100))).collect();
        assert_eq!(
            order,
            vec![(8, t0 + ms(20)), (7, t0 + ms(30)), (7, t0 + ms(40))]
        );
        assert!(!reused.fired(t0 + ms(30)));
        assert!(reused.fired(t0 + ms(40)));
    }
}
