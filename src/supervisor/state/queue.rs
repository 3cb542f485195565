//! The replacement queue that rolling restarts (SIGHUP, `--reload`) and
//! recycles share: one replacement starts at a time, and the old worker
//! drains only once its replacement is READY.

use std::time::Instant;

use signal_hook::consts::SIGTERM;

use super::{Action, Level, Machine, Phase};
use crate::supervisor::backoff;
use crate::supervisor::recycle::Why;

impl Machine {
    /// Queue every slot for a replacement (one already queued keeps its
    /// place): the rolling restart of SIGHUP and of a reload.
    pub(super) fn roll(&mut self, why: Why, now: Instant) {
        if !self.rolling {
            self.out.push(Action::Rolling(true));
        }
        self.rolling = true;
        for index in 0..self.slots.len() {
            self.enqueue(index, why);
        }
        self.step_queue(now);
    }

    pub(super) fn enqueue(&mut self, index: usize, why: Why) {
        let slot = &mut self.slots[index];
        if slot.queued.is_none() {
            slot.queued = Some(why);
            self.queue.push_back(index);
        }
    }

    /// Start the replacement of the next slot in the queue, unless one is
    /// starting already. A slot with no ready worker (it is being restarted
    /// anyway) is passed over.
    pub(super) fn step_queue(&mut self, now: Instant) {
        // A roll is done once its own slots are replaced, whatever recycles
        // are queued behind it (they may never run out).
        let rolled = |s: &super::Slot| matches!(s.queued, Some(Why::Roll | Why::Reload));
        if self.rolling && !self.slots.iter().any(rolled) {
            self.out.log(Level::Info, "rolling restart done".into());
            self.out.push(Action::Rolling(false));
            self.rolling = false;
        }
        while !self.stopping() && self.slots.iter().all(|s| s.replacement.is_none()) {
            let Some(index) = self.queue.pop_front() else {
                return;
            };
            let Some(slot) = self.slots.get_mut(index).filter(|s| s.queued.is_some()) else {
                continue;
            };
            if !slot.worker.as_ref().is_some_and(|w| w.ready()) {
                slot.queued = None;
                continue;
            }
            self.spawn(index, true, now);
        }
    }

    /// Slot `index`'s replacement is READY: it takes the slot, and the old
    /// worker drains.
    pub(super) fn promote(&mut self, index: usize, now: Instant) {
        let slot = &mut self.slots[index];
        let new = slot.replacement.take().expect("a ready replacement");
        self.out.log(
            Level::Info,
            format!("worker {} (pid {}) ready", new.number, new.pid()),
        );
        let why = slot.queued.take().unwrap_or(Why::Roll);
        slot.recycle_failures = 0;
        slot.hold_until = None;
        if let Some(old) = slot.worker.replace(new) {
            self.out.push(Action::Restarted {
                number: old.number,
                cause: why.label(),
            });
            let what = match why {
                Why::Roll => "rolling restart",
                Why::Reload => "reload",
                _ => "recycled",
            };
            self.out.log(
                Level::Info,
                format!("{what}: draining worker {} (pid {})", old.number, old.pid()),
            );
            self.out.push(Action::Signal {
                pid: old.pid(),
                signal: SIGTERM,
            });
            self.retired.push(old);
        }
        self.step_queue(now);
    }

    /// A replacement could not start, or failed before it was ready: the
    /// old worker keeps serving. The rest of a rolling restart is dropped;
    /// a recycle is tried again after a backoff.
    pub(super) fn replacement_failed(&mut self, index: usize, failed: &str, now: Instant) {
        let slot = &mut self.slots[index];
        match slot.queued.take() {
            why @ (Some(Why::Roll | Why::Reload) | None) => {
                let what = match why {
                    Some(Why::Reload) => "reload",
                    _ => "rolling restart",
                };
                self.out
                    .log(Level::Error, format!("{what} stopped: {failed}"));
                if self.rolling {
                    self.out.push(Action::Rolling(false));
                }
                self.rolling = false;
                let slots = &mut self.slots;
                self.queue.retain(|&i| {
                    let rolled = matches!(slots[i].queued, Some(Why::Roll | Why::Reload));
                    if rolled {
                        slots[i].queued = None;
                    }
                    !rolled
                });
            }
            Some(why) => {
                slot.recycle_failures = slot.recycle_failures.saturating_add(1);
                let delay = backoff::delay(slot.recycle_failures);
                slot.hold_until = Some(now + delay);
                self.out.log(
                    Level::Error,
                    format!(
                        "recycling worker {} ({why}) stopped: {failed}; next try in {delay:?}",
                        index + 1
                    ),
                );
            }
        }
        self.step_queue(now);
    }

    /// Roll for the changes seen, once they are quiet and no roll is under
    /// way (one that is already started may not have seen the last edit).
    pub(super) fn reload_due(&mut self, now: Instant) {
        if self.phase != Phase::Running || self.rolling || self.reload_at.is_none_or(|at| at > now)
        {
            return;
        }
        self.reload_at = None;
        let mut changed = std::mem::take(&mut self.changed);
        changed.sort();
        changed.dedup();
        let more = match changed.len() {
            0 | 1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        self.out.log(
            Level::Info,
            format!(
                "--reload: {}{more} changed: rolling {} worker(s)",
                changed
                    .first()
                    .map_or("a file".into(), |p| p.display().to_string()),
                self.slots.len()
            ),
        );
        // A slot waiting out a failed start's backoff tries the new code now.
        for slot in self.slots.iter_mut().filter(|s| s.respawn_at.is_some()) {
            slot.respawn_at = Some(now);
            slot.failures = 0;
        }
        self.roll(Why::Reload, now);
    }
}
