//! The supervisor's loop: one thread, asleep in `poll` on the signal wakeup
//! and the workers' status pipes, that starts, replaces, rolls and stops
//! workers. Worker slots are numbered from 1; a slot holds its worker, and
//! during a rolling restart the replacement waiting to be READY. Workers
//! taken out of their slot (rolled out, or removed by SIGTTOU) drain as
//! `retired` until they exit.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use libc::c_int;
use signal_hook::consts::{SIGHUP, SIGINT, SIGKILL, SIGTERM, SIGTTIN, SIGTTOU};

use super::wakeup::{self, Wakeup};
use super::worker::{self, describe, Inherit, Worker};
use super::{backoff, Plan, Relaunch};
use crate::backend::tally::{self, Tally};
use crate::server::listener::Listener;

/// How long shutdown waits for every worker to say its drain began before
/// the listener is shut regardless.
const DRAIN_ACK: Duration = Duration::from_millis(50);
/// How long past the graceful timeout a stopping worker has before SIGKILL.
const KILL_MARGIN: Duration = Duration::from_secs(5);
/// The longest `poll` sleeps when nothing is due (a safety net: signals and
/// statuses wake it).
const IDLE: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Slot {
    worker: Option<Worker>,
    replacement: Option<Worker>,
    failures: u32,
    respawn_at: Option<Instant>,
}

pub struct Arbiter<'a> {
    relaunch: Relaunch,
    shares: Vec<crate::server::cpus::Worker>,
    listener: &'a Listener,
    /// Both ends of the lifeline: the read end for workers to inherit, the
    /// write end held here only, closed when the supervisor ends.
    lifeline: (OwnedFd, OwnedFd),
    /// The workers' connection tally: its descriptor for them to inherit,
    /// and the supervisor's own map of it, to free a dead worker's slot.
    tally: Option<(OwnedFd, Tally)>,
    wakeup: Wakeup,
    slots: Vec<Slot>,
    retired: Vec<Worker>,
    /// The slot (index) a rolling restart is at.
    roll: Option<usize>,
    booting: bool,
    /// Set when stopping: the moment left-over workers are killed.
    stopping: Option<Instant>,
    graceful: Duration,
    status: i32,
}

impl<'a> Arbiter<'a> {
    pub fn new(plan: &Plan, listener: &'a Listener, wakeup: Wakeup) -> io::Result<Arbiter<'a>> {
        Ok(Arbiter {
            relaunch: plan.relaunch.clone(),
            shares: plan.shares.clone(),
            listener,
            lifeline: worker::pipe()?,
            tally: share_tally(),
            wakeup,
            slots: (0..plan.workers).map(|_| Slot::default()).collect(),
            retired: Vec::new(),
            roll: None,
            booting: true,
            stopping: None,
            graceful: plan.graceful_timeout,
            status: 0,
        })
    }

    pub fn run(mut self) -> i32 {
        for index in 0..self.slots.len() {
            match self.spawn(index + 1) {
                Ok(w) => self.slots[index].worker = Some(w),
                Err(e) => {
                    eprintln!("m0serve: error: starting worker {}: {e}", index + 1);
                    self.status = 1;
                    self.stop(SIGTERM);
                    break;
                }
            }
        }
        loop {
            self.sleep();
            for signal in self.wakeup.take() {
                self.on_signal(signal);
            }
            self.read_statuses();
            self.reap();
            self.respawn_due();
            if let Some(deadline) = self.stopping {
                if self.live().next().is_none() {
                    return self.status;
                }
                if Instant::now() >= deadline {
                    for w in self.live() {
                        tracing::warn!(
                            "worker {} (pid {}) still running: killing it",
                            w.number,
                            w.pid()
                        );
                        w.signal(SIGKILL);
                    }
                    self.stopping = Some(Instant::now() + IDLE);
                }
            }
        }
    }

    fn spawn(&self, number: usize) -> io::Result<Worker> {
        let inherit = Inherit {
            listener: self.listener.fd.as_fd(),
            lifeline: self.lifeline.0.as_fd(),
            tally: self.tally.as_ref().map(|(fd, _)| fd.as_fd()),
        };
        let share =
            (!self.shares.is_empty()).then(|| &self.shares[(number - 1) % self.shares.len()]);
        let w = Worker::spawn(&self.relaunch, number, share, &inherit)?;
        // Quiet on the first start: an app that cannot load must read as
        // today's one line, the worker's.
        if self.booting {
            tracing::debug!("worker {number} started (pid {})", w.pid());
        } else {
            tracing::info!("worker {number} started (pid {})", w.pid());
        }
        Ok(w)
    }

    /// Every worker process not yet reaped.
    fn live(&mut self) -> impl Iterator<Item = &mut Worker> {
        self.slots
            .iter_mut()
            .flat_map(|s| s.worker.iter_mut().chain(s.replacement.iter_mut()))
            .chain(self.retired.iter_mut())
    }

    /// Until a signal, a status byte (or a pipe's end), or the next deadline.
    fn sleep(&mut self) {
        let now = Instant::now();
        let next = self
            .slots
            .iter()
            .filter_map(|s| s.respawn_at)
            .chain(self.stopping)
            .min()
            .map_or(IDLE, |at| at.saturating_duration_since(now))
            .min(IDLE);
        let mut fds = vec![self.wakeup.fd()];
        fds.extend(self.live().filter_map(|w| w.status_fd()));
        poll_readable(&fds, next);
    }

    fn read_statuses(&mut self) {
        for index in 0..self.slots.len() {
            let slot = &mut self.slots[index];
            if slot.worker.as_mut().is_some_and(Worker::read_status) {
                self.on_ready(index, false);
            }
            let slot = &mut self.slots[index];
            if slot.replacement.as_mut().is_some_and(Worker::read_status) {
                self.on_ready(index, true);
            }
        }
        for w in &mut self.retired {
            w.read_status();
        }
    }

    fn on_ready(&mut self, index: usize, replacement: bool) {
        let slot = &mut self.slots[index];
        if replacement {
            let new = slot.replacement.take().expect("a ready replacement");
            tracing::info!("worker {} (pid {}) ready", new.number, new.pid());
            if let Some(old) = slot.worker.replace(new) {
                tracing::info!(
                    "rolling restart: draining worker {} (pid {})",
                    old.number,
                    old.pid()
                );
                old.signal(SIGTERM);
                self.retired.push(old);
            }
            self.roll = Some(index + 1);
            self.step_roll();
            return;
        }
        let w = slot.worker.as_ref().expect("a ready worker");
        tracing::info!("worker {} (pid {}) ready", w.number, w.pid());
        if self.booting
            && self
                .slots
                .iter()
                .all(|s| s.worker.as_ref().is_some_and(|w| w.ready))
        {
            self.booting = false;
            tracing::info!(
                "supervisor (pid {}): {} worker(s) ready on {}",
                std::process::id(),
                self.slots.len(),
                self.listener.addr
            );
        }
    }

    /// A worker exited: its slot in the tally, if it still held one (it
    /// died without draining), is freed, so that it holds nobody back.
    fn forget(&self, w: &Worker) {
        if let Some((_, tally)) = &self.tally {
            tally.forget(w.pid());
        }
    }

    fn reap(&mut self) {
        let now = Instant::now();
        for index in 0..self.slots.len() {
            if let Some(status) = self.slots[index]
                .replacement
                .as_mut()
                .and_then(Worker::try_exit)
            {
                let w = self.slots[index].replacement.take().expect("exited");
                self.forget(&w);
                if self.stopping.is_none() {
                    tracing::error!(
                        "rolling restart stopped: the new worker {} (pid {}) failed before it was ready ({}); the old one keeps serving",
                        w.number,
                        w.pid(),
                        describe(status)
                    );
                }
                self.roll = None;
            }
            if let Some(status) = self.slots[index].worker.as_mut().and_then(Worker::try_exit) {
                let w = self.slots[index].worker.take().expect("exited");
                self.forget(&w);
                self.on_exit(index, w, status, now);
            }
        }
        let mut i = 0;
        while i < self.retired.len() {
            if let Some(status) = self.retired[i].try_exit() {
                let w = self.retired.swap_remove(i);
                self.forget(&w);
                tracing::info!(
                    "worker {} (pid {}) drained: {}",
                    w.number,
                    w.pid(),
                    describe(status)
                );
            } else {
                i += 1;
            }
        }
    }

    /// A slot's worker exited: while stopping, as expected; before the first
    /// start completed, fatally; otherwise it is replaced, after a delay if
    /// it was failing.
    fn on_exit(&mut self, index: usize, w: Worker, status: std::process::ExitStatus, now: Instant) {
        let (number, pid, why) = (w.number, w.pid(), describe(status));
        if self.stopping.is_some() {
            tracing::info!("worker {number} (pid {pid}) stopped: {why}");
            return;
        }
        if self.booting {
            // The worker said why; the supervisor exits with its status.
            tracing::debug!("worker {number} (pid {pid}) failed to start ({why}): stopping");
            self.status = status.code().filter(|&c| c != 0).unwrap_or(1);
            self.stop(SIGTERM);
            return;
        }
        let slot = &mut self.slots[index];
        if w.ready && now.duration_since(w.started) >= backoff::HEALTHY {
            slot.failures = 0;
        } else {
            slot.failures = slot.failures.saturating_add(1);
        }
        let delay = backoff::delay(slot.failures);
        let when = match delay {
            Duration::ZERO => String::new(),
            d => format!(" in {d:?}"),
        };
        tracing::warn!(
            "worker {number} (pid {pid}) {}: {why}; restarting it{when}",
            if w.ready { "exited" } else { "failed to start" }
        );
        slot.respawn_at = Some(now + delay);
    }

    fn respawn_due(&mut self) {
        if self.stopping.is_some() {
            return;
        }
        let now = Instant::now();
        for index in 0..self.slots.len() {
            let slot = &self.slots[index];
            if slot.worker.is_some() || slot.respawn_at.is_none_or(|at| at > now) {
                continue;
            }
            let spawned = self.spawn(index + 1);
            let slot = &mut self.slots[index];
            slot.respawn_at = None;
            match spawned {
                Ok(w) => slot.worker = Some(w),
                Err(e) => {
                    slot.failures = slot.failures.saturating_add(1);
                    let delay = backoff::delay(slot.failures);
                    tracing::error!("starting worker {}: {e}; retrying in {delay:?}", index + 1);
                    slot.respawn_at = Some(now + delay);
                }
            }
        }
    }

    fn on_signal(&mut self, signal: c_int) {
        let name = wakeup::name(signal);
        if signal == SIGTERM || signal == SIGINT {
            if self.stopping.is_none() {
                tracing::info!(
                    "{name}: stopping the workers (graceful timeout {:?})",
                    self.graceful
                );
                self.stop(signal);
            }
            return;
        }
        if self.stopping.is_some() || !matches!(signal, SIGHUP | SIGTTIN | SIGTTOU) {
            return;
        }
        if signal == SIGHUP {
            if self.booting {
                tracing::info!("SIGHUP while the workers start: ignored");
            } else if self.roll.is_some() {
                tracing::info!("SIGHUP: a rolling restart is already under way");
            } else {
                tracing::info!("SIGHUP: rolling restart of {} worker(s)", self.slots.len());
                self.roll = Some(0);
                self.step_roll();
            }
        } else if signal == SIGTTIN {
            self.slots.push(Slot {
                respawn_at: Some(Instant::now()),
                ..Slot::default()
            });
            tracing::info!("SIGTTIN: {} worker(s)", self.slots.len());
        } else if self.slots.len() > 1 {
            let slot = self.slots.pop().expect("more than one slot");
            for w in slot.worker.into_iter().chain(slot.replacement) {
                tracing::info!("SIGTTOU: draining worker {} (pid {})", w.number, w.pid());
                w.signal(SIGTERM);
                self.retired.push(w);
            }
            self.step_roll();
        } else {
            tracing::info!("SIGTTOU: one worker is the least");
        }
    }

    /// Start the replacement of the worker the roll is at, or finish it.
    /// A slot whose worker is being restarted anyway is passed over.
    fn step_roll(&mut self) {
        while let Some(index) = self.roll {
            let Some(slot) = self.slots.get(index) else {
                tracing::info!("rolling restart done");
                self.roll = None;
                return;
            };
            if slot.replacement.is_some() {
                return;
            }
            if !slot.worker.as_ref().is_some_and(|w| w.ready) {
                self.roll = Some(index + 1);
                continue;
            }
            match self.spawn(index + 1) {
                Ok(w) => self.slots[index].replacement = Some(w),
                Err(e) => {
                    tracing::error!(
                        "rolling restart stopped: starting worker {}: {e}",
                        index + 1
                    );
                    self.roll = None;
                }
            }
            return;
        }
    }

    /// Tell every worker to drain (passing on the supervisor's `signal`, so
    /// their logs say which), and once the ready ones said their drain began,
    /// shut the listener: new connections are refused from then on.
    fn stop(&mut self, signal: c_int) {
        self.stopping = Some(Instant::now() + self.graceful + KILL_MARGIN);
        self.roll = None;
        for w in self.live() {
            w.signal(signal);
        }
        let until = Instant::now() + DRAIN_ACK;
        loop {
            let waiting: Vec<_> = self
                .live()
                .filter(|w| w.ready && !w.drain_begun)
                .filter_map(|w| w.status_fd())
                .collect();
            let left = until.saturating_duration_since(Instant::now());
            if waiting.is_empty() || left.is_zero() {
                break;
            }
            poll_readable(&waiting, left);
            for w in self.live() {
                w.read_status();
            }
        }
        self.listener.stop_listening();
    }
}

/// Sleep until one of `fds` is readable (or hung up), at most `timeout`.
fn poll_readable(fds: &[std::os::fd::RawFd], timeout: Duration) {
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as c_int;
    // SAFETY: `polled` is a valid array of `polled.len()` pollfds for the call.
    unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, ms) };
}

/// The tally every worker maps (unless `M0_ACCEPT_BALANCE=0`); none, with
/// a warning, where it cannot be made: the workers then accept unbalanced.
fn share_tally() -> Option<(OwnedFd, Tally)> {
    if !tally::enabled() {
        return None;
    }
    match tally::create().and_then(|fd| Tally::map(&fd).map(|t| (fd, t))) {
        Ok(shared) => Some(shared),
        // No memfd (macOS): said once at debug, not warned at every start.
        Err(e) if e.kind() == io::ErrorKind::Unsupported => {
            tracing::debug!("no connection tally for the workers: {e}");
            None
        }
        Err(e) => {
            tracing::warn!("no connection tally for the workers: {e}");
            None
        }
    }
}
