//! When a healthy worker is replaced anyway: it served its requests, lived
//! its lifetime, or its resident memory was over the limit twice in a row
//! (see [`crate::supervisor::recycle`]). The replacement goes through the
//! queue, as a roll's does.

use std::time::Instant;

use super::{Action, Level, Machine, Phase, Pid};
use crate::supervisor::recycle::{Why, RSS_SAMPLE, RSS_STRIKES};

impl Machine {
    /// Every [`RSS_SAMPLE`], ask for each ready worker's resident memory.
    pub(super) fn sample_rss(&mut self, now: Instant) {
        if self.config.recycle.max_rss.is_none() || now < self.next_rss {
            return;
        }
        self.next_rss = now + RSS_SAMPLE;
        let pids: Vec<Pid> = self
            .slots
            .iter()
            .filter_map(|s| s.worker.as_ref().filter(|w| w.ready())?.pid)
            .collect();
        if !pids.is_empty() {
            self.out.push(Action::SampleRss(pids));
        }
    }

    pub(super) fn on_rss(&mut self, pid: Pid, bytes: u64) {
        let Some(max) = self.config.recycle.max_rss else {
            return;
        };
        let slotted = self.slots.iter_mut().filter_map(|s| s.worker.as_mut());
        if let Some(w) = slotted.into_iter().find(|w| w.pid == Some(pid)) {
            w.rss = bytes;
            w.rss_strikes = if bytes > max { w.rss_strikes + 1 } else { 0 };
        }
    }

    /// When the next recycle (or its retry) is due: only for slots
    /// [`queue_recycles`](Self::queue_recycles) would queue.
    pub(super) fn recycles_at(&self) -> impl Iterator<Item = Instant> + '_ {
        let running = self.phase == Phase::Running;
        self.slots
            .iter()
            .filter(move |s| running && s.queued.is_none() && s.replacement.is_none())
            .filter_map(|s| {
                let w = s.worker.as_ref().filter(|w| w.ready())?;
                // Due already: any moment past will do.
                let due = if w.said.served_all || w.said.stuck || w.rss_strikes >= RSS_STRIKES {
                    s.hold_until.unwrap_or(w.started)
                } else {
                    w.recycle_at?
                };
                Some(s.hold_until.map_or(due, |hold| hold.max(due)))
            })
    }

    /// Queue each ready worker that has reached a recycling limit.
    pub(super) fn queue_recycles(&mut self, now: Instant) {
        if self.phase != Phase::Running {
            return;
        }
        for index in 0..self.slots.len() {
            let slot = &self.slots[index];
            if slot.queued.is_some()
                || slot.replacement.is_some()
                || slot.hold_until.is_some_and(|at| at > now)
            {
                continue;
            }
            let Some(w) = slot.worker.as_ref().filter(|w| w.ready()) else {
                continue;
            };
            let why = if w.said.stuck {
                Why::Stuck
            } else if w.said.served_all {
                Why::MaxRequests
            } else if w.rss_strikes >= RSS_STRIKES {
                Why::MaxRss(w.rss)
            } else if w.recycle_at.is_some_and(|at| at <= now) {
                Why::Lifetime
            } else {
                continue;
            };
            self.out.log(
                Level::Info,
                format!("worker {} (pid {}) {why}: recycling it", w.number, w.pid()),
            );
            self.enqueue(index, why);
        }
        self.step_queue(now);
    }
}
