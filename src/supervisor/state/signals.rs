//! What each signal to the supervisor does: TERM and INT stop (after the
//! shutdown delay, if any), HUP rolls, TTIN and TTOU add and remove a slot.

use std::time::Instant;

use libc::c_int;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGTTIN, SIGTTOU};

use super::{Action, Level, Machine, Phase, Slot};
use crate::supervisor::recycle::Why;
use crate::supervisor::wakeup;

impl Machine {
    pub(super) fn on_signal(&mut self, signal: c_int, now: Instant) {
        let name = wakeup::name(signal);
        let graceful = self.config.graceful;
        if signal == SIGTERM || signal == SIGINT {
            match self.phase {
                Phase::Stopping { .. } => {}
                Phase::Delaying { .. } => {
                    self.out.log(Level::Info, format!(
                        "{name} again: the shutdown delay is cut short: stopping the workers (graceful timeout {graceful:?})"
                    ));
                    self.stop(signal, now);
                }
                _ if self.config.shutdown_delay.is_zero() => {
                    self.out.log(
                        Level::Info,
                        format!("{name}: stopping the workers (graceful timeout {graceful:?})"),
                    );
                    self.stop(signal, now);
                }
                _ => {
                    let delay = self.config.shutdown_delay;
                    self.phase = Phase::Delaying {
                        drain_at: now + delay,
                        signal,
                        booting: self.booting(),
                    };
                    self.publish();
                    self.out.log(Level::Info, format!(
                        "{name}: shutdown delay of {delay:?}: readiness answers 503, the workers serve on, then drain (graceful timeout {graceful:?}); {name} again drains now"
                    ));
                }
            }
            return;
        }
        if !matches!(signal, SIGHUP | SIGTTIN | SIGTTOU) || self.stopping() {
            return;
        }
        if self.delaying() {
            self.out.log(
                Level::Info,
                format!("{name} during the shutdown delay: ignored"),
            );
            return;
        }
        if signal == SIGHUP {
            self.sighup(now);
        } else if signal == SIGTTIN {
            self.slots.push(Slot {
                respawn_at: Some(now),
                ..Slot::default()
            });
            self.out.log(
                Level::Info,
                format!("SIGTTIN: {} worker(s)", self.slots.len()),
            );
        } else if self.slots.len() > 1 {
            let slot = self.slots.pop().expect("more than one slot");
            for w in slot.worker.into_iter().chain(slot.replacement) {
                self.out.log(
                    Level::Info,
                    format!("SIGTTOU: draining worker {} (pid {})", w.number, w.pid()),
                );
                self.out.push(Action::Signal {
                    pid: w.pid(),
                    signal: SIGTERM,
                });
                self.retired.push(w);
            }
            self.step_queue(now);
        } else {
            self.out
                .log(Level::Info, "SIGTTOU: one worker is the least".into());
        }
    }

    fn sighup(&mut self, now: Instant) {
        if self.booting() {
            self.out.log(
                Level::Info,
                "SIGHUP while the workers start: ignored".into(),
            );
        } else if self.rolling {
            self.out.log(
                Level::Info,
                "SIGHUP: a rolling restart is already under way".into(),
            );
        } else {
            self.out.log(
                Level::Info,
                format!("SIGHUP: rolling restart of {} worker(s)", self.slots.len()),
            );
            self.roll(Why::Roll, now);
        }
    }
}
