//! `--worker-timeout`: a ready worker whose heartbeat (every core thread's
//! loop and its Python side: [`crate::ipc::heartbeat`]) has been silent
//! that long is told to write every Python thread's traceback, given
//! [`DUMP_WAIT`] to do so, then killed; its exit restarts the slot as any
//! exit does. A worker is watched from its READY on (a slow import is the
//! start's business), and not once it drains (the graceful timeout bounds
//! that), nor while the supervisor stops.

use std::time::{Duration, Instant};

use signal_hook::consts::SIGKILL;

use super::{Action, Hung, Level, Machine, Phase, Pid, Tracked};
use crate::supervisor::link::TRACEBACKS;

/// How long a silent worker has to write its tracebacks before SIGKILL.
pub const DUMP_WAIT: Duration = Duration::from_secs(1);

/// How often a watched worker's loops stamp their heartbeat: several times
/// within the timeout, so a late wake or a busy pass is no silence, and at
/// most once a second, so an idle core wakes seldom.
pub fn period(timeout: Duration) -> Duration {
    (timeout / 4).clamp(Duration::from_millis(100), Duration::from_secs(1))
}

impl Machine {
    pub(super) fn on_heartbeat(&mut self, pid: Pid, silent: Duration, now: Instant) {
        if let Some(w) = self.slotted_mut().find(|w| w.pid == Some(pid)) {
            w.heard = now.checked_sub(silent).or(Some(now));
        }
    }

    /// When the next watched worker falls silent for the timeout, or a
    /// silent one's tracebacks have had their time.
    pub(super) fn watchdog_at(&self) -> Option<Instant> {
        let timeout = self.config.worker_timeout?;
        self.watched()
            .filter_map(|w| match w.hung {
                None => Some(last_sign(w)? + timeout),
                Some(Hung::Dumping(at)) => Some(at + DUMP_WAIT),
                Some(Hung::Killed) => None,
            })
            .min()
    }

    /// Ask each worker silent past the timeout for its tracebacks; kill
    /// each one that has had its time to write them.
    pub(super) fn watchdog_due(&mut self, now: Instant) {
        let Some(timeout) = self.config.worker_timeout else {
            return;
        };
        if self.phase != Phase::Running {
            return;
        }
        let mut out = Vec::new();
        for w in self.slotted_mut().filter(|w| watched(w)) {
            let pid = w.pid();
            match w.hung {
                None => {
                    let Some(last) = last_sign(w).filter(|&t| now >= t + timeout) else {
                        continue;
                    };
                    let silent = now.duration_since(last);
                    out.push(Action::Log(
                        Level::Warn,
                        format!(
                            "worker {} (pid {pid}) silent for {:.1}s (--worker-timeout {}s): \
                             its threads' tracebacks follow; killing it",
                            w.number,
                            silent.as_secs_f64(),
                            timeout.as_secs_f64()
                        ),
                    ));
                    out.push(Action::Signal {
                        pid,
                        signal: TRACEBACKS,
                    });
                    w.hung = Some(Hung::Dumping(now));
                }
                Some(Hung::Dumping(at)) if now >= at + DUMP_WAIT => {
                    out.push(Action::Signal {
                        pid,
                        signal: SIGKILL,
                    });
                    w.hung = Some(Hung::Killed);
                }
                Some(_) => {}
            }
        }
        for action in out {
            self.out.push(action);
        }
    }

    /// The workers in slots (not their starting replacements, nor the
    /// retired, which drain).
    fn slotted_mut(&mut self) -> impl Iterator<Item = &mut Tracked> {
        self.slots.iter_mut().filter_map(|s| s.worker.as_mut())
    }

    fn watched(&self) -> impl Iterator<Item = &Tracked> {
        let running = self.phase == Phase::Running;
        self.slots
            .iter()
            .filter_map(|s| s.worker.as_ref())
            .filter(move |w| running && watched(w))
    }
}

/// Serving, with a pid: its drain and its end have bounds of their own.
fn watched(w: &Tracked) -> bool {
    w.pid.is_some() && w.serving() && !w.said.hung_up
}

/// The latest sign of life: its heartbeat's oldest stamp, or its READY if
/// later (a stamp from before it said so is no lapse).
fn last_sign(w: &Tracked) -> Option<Instant> {
    let ready = w.ready_at?;
    Some(w.heard.map_or(ready, |heard| heard.max(ready)))
}
