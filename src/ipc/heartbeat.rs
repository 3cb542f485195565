//! A worker's heartbeat: a page the supervisor shares with one worker
//! ([`super::shared_page`]), where each loop of the worker that must keep
//! answering (every core thread, and the application's Python side: its
//! GIL, its event loop) stamps the time every period the supervisor wrote
//! at the page's head. The worker's heartbeat is its oldest stamp: one
//! stuck loop silences it, however busy the others are.
//!
//! Stamps are CLOCK_MONOTONIC milliseconds, one clock for every process of
//! the machine. A slot is claimed by whoever will stamp it and stamped at
//! once, so a loop that stops before its first period is seen.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::shared_page::{self, Page};

const SIZE: usize = 4096;
/// The words before the slots: the period in milliseconds, the slots claimed.
const PERIOD: usize = 0;
const CLAIMED: usize = 1;
const FIRST: usize = 2;
const SLOTS: usize = SIZE / std::mem::size_of::<AtomicU64>() - FIRST;

/// This process's view of one worker's heartbeat page.
#[derive(Clone)]
pub struct Heartbeat {
    page: Arc<Page>,
}

/// The supervisor's part: a new page asking for a stamp every `period`, as
/// a descriptor for the worker to inherit, and its own view of it.
pub fn create(period: Duration) -> io::Result<(OwnedFd, Heartbeat)> {
    let fd = shared_page::create(c"m0serve-heartbeat", SIZE)?;
    let heartbeat = Heartbeat::map(&fd)?;
    let ms = u64::try_from(period.as_millis()).unwrap_or(u64::MAX).max(1);
    heartbeat.words()[PERIOD].store(ms, Ordering::Release);
    Ok((fd, heartbeat))
}

impl Heartbeat {
    /// Map the page `fd` names (from [`create`]).
    pub fn map(fd: &OwnedFd) -> io::Result<Heartbeat> {
        Ok(Heartbeat {
            page: Arc::new(Page::map(fd, SIZE)?),
        })
    }

    fn words(&self) -> &[AtomicU64] {
        // SAFETY: the page is page-aligned, zero-initialised (valid
        // AtomicU64s) and SIZE long, and outlives &self.
        unsafe {
            std::slice::from_raw_parts(
                self.page.start().as_ptr().cast::<AtomicU64>(),
                SIZE / std::mem::size_of::<AtomicU64>(),
            )
        }
    }

    /// How often each slot is stamped.
    pub fn period(&self) -> Duration {
        Duration::from_millis(self.words()[PERIOD].load(Ordering::Acquire).max(1))
    }

    /// A slot for one loop, stamped now; None once every slot is taken (that
    /// loop then goes unwatched).
    pub fn claim(&self) -> Option<Beat> {
        let slot = self.words()[CLAIMED].fetch_add(1, Ordering::AcqRel) as usize;
        if slot >= SLOTS {
            return None;
        }
        let beat = Beat {
            heartbeat: self.clone(),
            slot: FIRST + slot,
        };
        beat.stamp();
        Some(beat)
    }

    /// The supervisor's part: how long since the oldest slot's stamp (None:
    /// nothing claimed yet).
    pub fn silent(&self) -> Option<Duration> {
        let words = self.words();
        let claimed = (words[CLAIMED].load(Ordering::Acquire) as usize).min(SLOTS);
        let oldest = words[FIRST..FIRST + claimed]
            .iter()
            .map(|w| w.load(Ordering::Acquire))
            // Claimed, not yet stamped: an instant ago.
            .filter(|&stamp| stamp != 0)
            .min()?;
        Some(Duration::from_millis(now_ms().saturating_sub(oldest)))
    }
}

/// One loop's slot.
pub struct Beat {
    heartbeat: Heartbeat,
    slot: usize,
}

impl Beat {
    /// The loop answers: stamp its slot now.
    pub fn stamp(&self) {
        self.heartbeat.words()[self.slot].store(now_ms(), Ordering::Release);
    }

    pub fn period(&self) -> Duration {
        self.heartbeat.period()
    }

    /// For a loop that passes often: stamps at most once a period.
    pub fn pulse(self) -> Pulse {
        Pulse {
            beat: self,
            next: Instant::now(),
        }
    }
}

/// A [`Beat`] kept by a loop that stamps it as it passes, once due.
pub struct Pulse {
    beat: Beat,
    next: Instant,
}

impl Pulse {
    /// Stamp if a period has passed since the last stamp; when the next is
    /// due (the loop must wake by then even with nothing else to do).
    pub fn tick(&mut self, now: Instant) -> Instant {
        if now >= self.next {
            self.beat.stamp();
            self.next = now + self.beat.period();
        }
        self.next
    }
}

/// CLOCK_MONOTONIC in milliseconds, never 0 (an unstamped slot's value).
fn now_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000).max(1)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_slot_is_the_workers_heartbeat() {
        let (fd, supervisor) = create(Duration::from_millis(40)).unwrap();
        let worker = Heartbeat::map(&fd).unwrap();
        assert_eq!(supervisor.silent(), None, "nothing claimed: not watched");
        assert_eq!(worker.period(), Duration::from_millis(40));
        let (core, app) = (worker.claim().unwrap(), worker.claim().unwrap());
        assert!(supervisor.silent().unwrap() < Duration::from_millis(30));
        std::thread::sleep(Duration::from_millis(60));
        core.stamp();
        let silent = supervisor.silent().unwrap();
        assert!(
            silent >= Duration::from_millis(55),
            "{silent:?}: the app's slot is stale"
        );
        app.stamp();
        assert!(supervisor.silent().unwrap() < Duration::from_millis(30));
    }

    #[test]
    fn a_pulse_stamps_once_a_period() {
        let (fd, supervisor) = create(Duration::from_millis(50)).unwrap();
        let mut pulse = Heartbeat::map(&fd).unwrap().claim().unwrap().pulse();
        let start = Instant::now();
        assert_eq!(pulse.tick(start), start + Duration::from_millis(50));
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(
            pulse.tick(Instant::now()),
            start + Duration::from_millis(50)
        );
        assert!(
            supervisor.silent().unwrap() >= Duration::from_millis(25),
            "not due: not stamped"
        );
        pulse.tick(start + Duration::from_millis(50));
        assert!(supervisor.silent().unwrap() < Duration::from_millis(10));
    }

    #[test]
    fn claims_past_the_page_go_unwatched() {
        let (_fd, heartbeat) = create(Duration::from_secs(1)).unwrap();
        let beats: Vec<_> = (0..SLOTS).map(|_| heartbeat.claim()).collect();
        assert!(beats.iter().all(Option::is_some));
        assert!(heartbeat.claim().is_none());
    }
}
