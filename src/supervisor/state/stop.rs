//! The supervisor's own shutdown: the shutdown delay's end, the drain (every
//! worker told, the listener shut once the ready ones said their drain
//! began), SIGKILL for those past the graceful timeout, and the exit.

use std::time::Instant;

use libc::c_int;
use signal_hook::consts::SIGKILL;

use super::{Action, Level, Machine, Phase, Tracked, DRAIN_ACK, KILL_AGAIN, KILL_MARGIN};
use crate::supervisor::wakeup;

impl Machine {
    /// Tell every worker to drain (passing on the supervisor's `signal`, so
    /// their logs say which); the listener is shut once the ready ones said
    /// their drain began, or after [`DRAIN_ACK`].
    pub(super) fn stop(&mut self, signal: c_int, now: Instant) {
        self.out.push(Action::Stopping);
        self.phase = Phase::Stopping {
            kill_at: now + self.config.graceful + KILL_MARGIN,
            signal,
            shut_by: Some(now + DRAIN_ACK),
        };
        self.publish();
        self.queue.clear();
        self.rolling = false;
        for pid in self.live() {
            self.out.push(Action::Signal { pid, signal });
        }
        self.check_drain_acks();
    }

    /// Shut the listener once no ready worker is left to say its drain
    /// began: new connections are refused from then on.
    pub(super) fn check_drain_acks(&mut self) {
        let Phase::Stopping { shut_by, .. } = &mut self.phase else {
            return;
        };
        let waiting =
            |w: &Tracked| w.pid.is_some() && w.ready() && !w.said.draining && !w.said.hung_up;
        let mut tracked = self
            .slots
            .iter()
            .flat_map(|s| s.worker.iter().chain(s.replacement.iter()))
            .chain(self.retired.iter());
        if shut_by.is_some() && !tracked.any(waiting) {
            *shut_by = None;
            self.out.push(Action::ShutListener);
        }
    }

    /// The shutdown delay is over, or a worker began its drain without
    /// waiting for it (the signal reached it too): the drain begins.
    pub(super) fn drain_due(&mut self, now: Instant) {
        let Phase::Delaying {
            drain_at, signal, ..
        } = self.phase
        else {
            return;
        };
        let name = wakeup::name(signal);
        if now >= drain_at {
            self.out.log(
                Level::Info,
                format!(
                    "{name}: the shutdown delay is over: stopping the workers (graceful timeout {:?})",
                    self.config.graceful
                ),
            );
        } else if let Some(w) = self
            .slots
            .iter()
            .filter_map(|s| s.worker.as_ref())
            .find(|w| w.said.draining)
        {
            self.out.log(
                Level::Info,
                format!(
                    "worker {} (pid {}) began its drain itself: the shutdown delay is cut short",
                    w.number,
                    w.pid()
                ),
            );
        } else {
            return;
        }
        self.stop(signal, now);
    }

    /// While stopping: the listener's deadline, the exit once every worker
    /// is gone, and SIGKILL for those left past the graceful timeout.
    pub(super) fn stop_due(&mut self, now: Instant) {
        let Phase::Stopping {
            kill_at, shut_by, ..
        } = &mut self.phase
        else {
            return;
        };
        if shut_by.is_some_and(|at| now >= at) {
            *shut_by = None;
            self.out.push(Action::ShutListener);
        }
        if now < *kill_at {
            if self.live().is_empty() {
                self.out.push(Action::Exit(self.status));
            }
            return;
        }
        *kill_at = now + KILL_AGAIN;
        let live: Vec<_> = self
            .tracked()
            .filter_map(|w| Some((w.number, w.pid?)))
            .collect();
        if live.is_empty() {
            self.out.push(Action::Exit(self.status));
        }
        for (number, pid) in live {
            self.out.log(
                Level::Warn,
                format!("worker {number} (pid {pid}) still running: killing it"),
            );
            self.out.push(Action::Signal {
                pid,
                signal: SIGKILL,
            });
        }
    }
}
