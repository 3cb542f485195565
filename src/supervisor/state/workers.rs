//! A worker's life as the rules see it: its start (or failure to start),
//! what it says, its exit, and the slot's restart after a backoff.

use std::process::ExitStatus;
use std::time::{Duration, Instant};

use signal_hook::consts::SIGTERM;

use super::{Action, Level, Machine, Phase, Pid, Said, Tracked};
use crate::supervisor::backoff;
use crate::supervisor::worker::describe;

impl Machine {
    pub(super) fn on_spawned(&mut self, number: usize, pid: Pid, now: Instant) {
        let index = number - 1;
        let booting = self.booting();
        let Some(w) = self.slots.get_mut(index).and_then(|slot| {
            let pending = |w: &Option<Tracked>| w.as_ref().is_some_and(|w| w.pid.is_none());
            if pending(&slot.replacement) {
                slot.replacement.as_mut()
            } else if pending(&slot.worker) {
                slot.worker.as_mut()
            } else {
                None
            }
        }) else {
            // Nothing asked for it: it drains like a worker taken out.
            self.out.push(Action::Signal {
                pid,
                signal: SIGTERM,
            });
            return;
        };
        w.pid = Some(pid);
        // Quiet on the first start: an app that cannot load must read as
        // one line, the worker's.
        let level = if booting { Level::Debug } else { Level::Info };
        self.out
            .log(level, format!("worker {number} started (pid {pid})"));
        if let Phase::Stopping { signal, .. } = self.phase {
            // Asked for in the turn the stop began: it stops with the rest.
            self.out.push(Action::Signal { pid, signal });
        }
        if self.launching == Some(number) {
            if number < self.slots.len() {
                self.launching = Some(number + 1);
                self.spawn(number, false, now);
            } else {
                self.launching = None;
            }
        }
    }

    pub(super) fn on_spawn_failed(&mut self, number: usize, error: &str, now: Instant) {
        let index = number - 1;
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        let failed = format!("starting worker {number}: {error}");
        if slot.replacement.as_ref().is_some_and(|w| w.pid.is_none()) {
            slot.replacement = None;
            self.replacement_failed(index, &failed, now);
            return;
        }
        slot.worker = None;
        if self.launching.take().is_some() {
            self.out.log(Level::Print, failed);
            self.status = 1;
            self.stop(SIGTERM, now);
            return;
        }
        slot.failures = slot.failures.saturating_add(1);
        let delay = backoff::delay(slot.failures);
        slot.respawn_at = Some(now + delay);
        self.out
            .log(Level::Error, format!("{failed}; retrying in {delay:?}"));
    }

    pub(super) fn on_status(&mut self, pid: Pid, said: Said, now: Instant) {
        let mut became_ready = None;
        for (index, slot) in self.slots.iter_mut().enumerate() {
            if let Some(w) = slot.worker.as_mut().filter(|w| w.pid == Some(pid)) {
                became_ready = hear(w, said, now).then_some((index, false));
            } else if let Some(w) = slot.replacement.as_mut().filter(|w| w.pid == Some(pid)) {
                became_ready = hear(w, said, now).then_some((index, true));
            }
        }
        if let Some(w) = self.retired.iter_mut().find(|w| w.pid == Some(pid)) {
            hear(w, said, now);
        }
        match became_ready {
            Some((index, true)) => self.promote(index, now),
            Some((index, false)) => self.on_ready(index),
            None => {}
        }
        self.check_drain_acks();
    }

    /// A slot's worker said READY; once every slot has one, the start is over.
    fn on_ready(&mut self, index: usize) {
        // Before the log line, so that whoever reads it finds the flag set.
        self.publish();
        let w = self.slots[index].worker.as_ref().expect("a ready worker");
        self.out.log(
            Level::Info,
            format!("worker {} (pid {}) ready", w.number, w.pid()),
        );
        let all = || {
            self.slots
                .iter()
                .all(|s| s.worker.as_ref().is_some_and(Tracked::ready))
        };
        let came_up = match &mut self.phase {
            Phase::Booting if all() => {
                self.phase = Phase::Running;
                true
            }
            Phase::Delaying { booting, .. } if *booting && all() => {
                *booting = false;
                true
            }
            _ => false,
        };
        if came_up {
            self.out.push(Action::CameUp {
                workers: self.slots.len(),
            });
        }
    }

    pub(super) fn on_exit(&mut self, pid: Pid, status: ExitStatus, now: Instant) {
        let is = |w: &Option<Tracked>| w.as_ref().is_some_and(|w| w.pid == Some(pid));
        if let Some(index) = self.slots.iter().position(|s| is(&s.replacement)) {
            let w = self.slots[index].replacement.take().expect("exited");
            if !self.stopping() {
                let failed = format!(
                    "the new worker {} (pid {pid}) failed before it was ready ({}); the old one keeps serving",
                    w.number,
                    describe(status)
                );
                self.replacement_failed(index, &failed, now);
            }
        } else if let Some(index) = self.slots.iter().position(|s| is(&s.worker)) {
            let w = self.slots[index].worker.take().expect("exited");
            self.worker_exited(index, w, status, now);
        } else if let Some(at) = self.retired.iter().position(|w| w.pid == Some(pid)) {
            let w = self.retired.swap_remove(at);
            self.out.log(
                Level::Info,
                format!(
                    "worker {} (pid {pid}) drained: {}",
                    w.number,
                    describe(status)
                ),
            );
        }
        self.check_drain_acks();
    }

    /// A slot's worker exited: while stopping, as expected; before the first
    /// start completed, fatally; otherwise it is replaced, after a delay if
    /// it was failing.
    fn worker_exited(&mut self, index: usize, w: Tracked, status: ExitStatus, now: Instant) {
        let (number, pid, why) = (w.number, w.pid(), describe(status));
        // Its slot is empty: not ready, before the log line says why.
        self.publish();
        if self.stopping() {
            self.out.log(
                Level::Info,
                format!("worker {number} (pid {pid}) stopped: {why}"),
            );
            return;
        }
        if self.booting() {
            // The worker said why; the supervisor exits with its status.
            self.out.log(
                Level::Debug,
                format!("worker {number} (pid {pid}) failed to start ({why}): stopping"),
            );
            self.status = status.code().filter(|&c| c != 0).unwrap_or(1);
            self.stop(SIGTERM, now);
            return;
        }
        let hung = w.hung.is_some();
        self.out.push(Action::Restarted {
            number,
            cause: if hung { "hung" } else { "exited" },
        });
        let slot = &mut self.slots[index];
        if slot.replacement.is_none() && slot.queued.take().is_some() {
            self.queue.retain(|&i| i != index);
        }
        let slot = &mut self.slots[index];
        if w.ready() && now.duration_since(w.started) >= backoff::HEALTHY {
            slot.failures = 0;
        } else {
            slot.failures = slot.failures.saturating_add(1);
        }
        let delay = backoff::delay(slot.failures);
        let when = match delay {
            Duration::ZERO => String::new(),
            d => format!(" in {d:?}"),
        };
        let (what, level) = match (hung, w.ready()) {
            // The watchdog's warning said why already.
            (true, _) => ("was killed as hung", Level::Info),
            (false, true) => ("exited", Level::Warn),
            (false, false) => ("failed to start", Level::Warn),
        };
        self.out.log(
            level,
            format!("worker {number} (pid {pid}) {what}: {why}; restarting it{when}"),
        );
        slot.respawn_at = Some(now + delay);
    }

    /// Start each empty slot whose restart is due.
    pub(super) fn respawn_due(&mut self, now: Instant) {
        if self.stopping() {
            return;
        }
        for index in 0..self.slots.len() {
            let slot = &mut self.slots[index];
            if slot.worker.is_some() || slot.respawn_at.is_none_or(|at| at > now) {
                continue;
            }
            slot.respawn_at = None;
            self.spawn(index, false, now);
        }
    }
}

/// Note what `w` said; true when this made it ready (its watch begins).
fn hear(w: &mut Tracked, said: Said, now: Instant) -> bool {
    let was_ready = w.said.ready;
    w.said.ready |= said.ready;
    w.said.draining |= said.draining;
    w.said.served_all |= said.served_all;
    w.said.stuck |= said.stuck;
    w.said.hung_up |= said.hung_up;
    let became = w.said.ready && !was_ready;
    if became {
        w.ready_at = Some(now);
    }
    became
}
