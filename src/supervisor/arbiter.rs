//! The supervisor's loop: one thread, asleep in `poll` on the signal wakeup
//! and the workers' status pipes, that starts, replaces, rolls and stops
//! workers. Worker slots are numbered from 1; a slot holds its worker, and
//! during a rolling restart the replacement waiting to be READY. Workers
//! taken out of their slot (rolled out, or removed by SIGTTOU) drain as
//! `retired` until they exit.
//!
//! Rolling restarts and recycles share one queue of slots: one replacement
//! starts at a time, and the next only once it is READY (or failed), so no
//! two workers are ever being replaced at once.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use libc::c_int;
use signal_hook::consts::{SIGHUP, SIGINT, SIGKILL, SIGTERM, SIGTTIN, SIGTTOU};

use super::recycle::{Recycle, Why, RSS_SAMPLE, RSS_STRIKES};
use super::reload::{Reload, DEBOUNCE};
use super::wakeup::{self, Wakeup};
use super::worker::{self, describe, Inherit, Worker};
use super::{backoff, rss, Plan, Relaunch};
use crate::ipc::ready_flag::{self, ReadyFlag};
use crate::ipc::tally::{self, Tally};
use crate::server::listener::Listener;
use crate::tls::tickets::Seed;

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
    /// Why it is in the replacement queue (or its replacement starting).
    queued: Option<Why>,
    /// Recycles whose replacement failed in a row, and the next try.
    recycle_failures: u32,
    hold_until: Option<Instant>,
}

pub struct Arbiter<'a> {
    relaunch: Relaunch,
    shares: Vec<crate::server::cpus::Worker>,
    /// [`Plan::portable`].
    portable: bool,
    /// [`Plan::tls`].
    tls: bool,
    /// With TLS, the session-ticket secret the workers derive their keys
    /// from, kept at the period before the current one (the oldest a
    /// worker started now needs), so older keys cannot be recomputed here.
    tickets: RefCell<Option<Seed>>,
    listener: &'a Listener,
    /// Both ends of the lifeline: the read end for workers to inherit, the
    /// write end held here only, closed when the supervisor ends.
    lifeline: (OwnedFd, OwnedFd),
    /// The workers' connection tally: its descriptor for them to inherit,
    /// and the supervisor's own map of it, to free a dead worker's slot.
    tally: Option<(OwnedFd, Tally)>,
    /// The readiness flag (with `--ready-path`): its descriptor for the
    /// workers, and the supervisor's map of it, which it alone writes.
    ready: Option<(OwnedFd, ReadyFlag)>,
    /// What the flag says now (to log its changes).
    published: bool,
    /// Every slot has held a ready worker at once: the start is over.
    came_up: bool,
    /// The metrics, when served: the workers' shards, and restarts.
    metrics: Option<super::Metrics>,
    wakeup: Wakeup,
    slots: Vec<Slot>,
    retired: Vec<Worker>,
    /// Slots waiting for their replacement, in turn.
    queue: VecDeque<usize>,
    /// A rolling restart (SIGHUP, a reload) is in the queue.
    rolling: bool,
    recycle: Recycle,
    next_rss: Instant,
    reload: Option<Reload>,
    /// A change was seen: the roll is due then (after the debounce).
    reload_at: Option<Instant>,
    changed: Vec<PathBuf>,
    booting: bool,
    /// Set when stopping: the moment left-over workers are killed.
    stopping: Option<Instant>,
    /// During the shutdown delay: when the drain begins, and the signal
    /// that asked for it (passed on to the workers then).
    drain_at: Option<(Instant, c_int)>,
    shutdown_delay: Duration,
    graceful: Duration,
    status: i32,
    /// The embedder's handle, told where the workers are ready.
    remote: Option<crate::server::remote::Remote>,
}

impl<'a> Arbiter<'a> {
    pub fn new(
        plan: &Plan,
        listener: &'a Listener,
        wakeup: Wakeup,
        reload: Option<Reload>,
        metrics: Option<super::Metrics>,
    ) -> io::Result<Arbiter<'a>> {
        Ok(Arbiter {
            relaunch: plan.relaunch.clone(),
            shares: plan.shares.clone(),
            portable: plan.portable,
            tls: plan.tls,
            tickets: RefCell::new(plan.tls.then(ticket_seed).flatten()),
            listener,
            lifeline: worker::pipe()?,
            tally: plan.balance.then(share_tally).flatten(),
            ready: plan.ready_flag.then(share_ready_flag).flatten(),
            published: false,
            came_up: false,
            metrics,
            wakeup,
            slots: (0..plan.workers).map(|_| Slot::default()).collect(),
            retired: Vec::new(),
            queue: VecDeque::new(),
            rolling: false,
            recycle: plan.recycle.clone(),
            next_rss: Instant::now() + RSS_SAMPLE,
            reload,
            reload_at: None,
            changed: Vec::new(),
            booting: true,
            stopping: None,
            drain_at: None,
            shutdown_delay: plan.shutdown_delay,
            graceful: plan.graceful_timeout,
            status: 0,
            remote: plan.remote.clone(),
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
            self.watch_changes();
            self.read_statuses();
            self.reap();
            self.respawn_due();
            self.sample_rss();
            self.queue_recycles();
            self.reload_due();
            self.drain_due();
            self.publish_readiness();
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

    /// The ticket secret for a worker starting now: moved on to the period
    /// before the current one (and kept there).
    fn tickets_now(&self) -> Option<Seed> {
        let mut kept = self.tickets.borrow_mut();
        let seed = kept.as_mut()?;
        *seed = seed.at(crate::tls::tickets::now_period().saturating_sub(1));
        Some(seed.clone())
    }

    fn spawn(&self, number: usize) -> io::Result<Worker> {
        let tickets = self.tickets_now();
        let inherit = Inherit {
            listener: self.listener.fd.as_fd(),
            lifeline: self.lifeline.0.as_fd(),
            tally: self.tally.as_ref().map(|(fd, _)| fd.as_fd()),
            ready: self.ready.as_ref().map(|(fd, _)| fd.as_fd()),
            portable: self.portable,
            metrics: self.metrics.as_ref().map(|m| m.fd.as_fd()),
            tickets: tickets.as_ref(),
        };
        let share =
            (!self.shares.is_empty()).then(|| &self.shares[(number - 1) % self.shares.len()]);
        let requests = self.recycle.requests_for(number);
        let mut w = Worker::spawn(&self.relaunch, number, share, requests, &inherit)?;
        let first = self.booting.then_some(self.slots.len());
        w.recycle_at = self.recycle.deadline(w.started, number, first);
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
            .chain(self.drain_at.map(|(at, _)| at))
            .chain(self.recycles_at())
            .chain(self.recycle.max_rss.map(|_| self.next_rss))
            .chain(self.reload_at.filter(|_| !self.booting && !self.rolling))
            .min()
            .map_or(IDLE, |at| at.saturating_duration_since(now))
            .min(IDLE);
        let mut fds = vec![self.wakeup.fd()];
        fds.extend(self.reload.as_ref().map(Reload::fd));
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
            let why = slot.queued.take().unwrap_or(Why::Roll);
            slot.recycle_failures = 0;
            slot.hold_until = None;
            if let Some(old) = slot.worker.replace(new) {
                if let Some(metrics) = &self.metrics {
                    metrics.restarts.count(old.number, why.label());
                }
                let what = match why {
                    Why::Roll => "rolling restart",
                    Why::Reload => "reload",
                    _ => "recycled",
                };
                tracing::info!("{what}: draining worker {} (pid {})", old.number, old.pid());
                old.signal(SIGTERM);
                self.retired.push(old);
            }
            self.step_queue();
            return;
        }
        // Before the log lines, so that whoever reads them finds the flag set.
        self.publish_readiness();
        let w = self.slots[index].worker.as_ref().expect("a ready worker");
        tracing::info!("worker {} (pid {}) ready", w.number, w.pid());
        if self.booting
            && self
                .slots
                .iter()
                .all(|s| s.worker.as_ref().is_some_and(|w| w.ready))
        {
            self.booting = false;
            let url = self.listener.addr.url(self.tls);
            tracing::info!(
                "supervisor (pid {}): {} worker(s) ready on {url}",
                std::process::id(),
                self.slots.len(),
            );
            if let Some(remote) = &self.remote {
                remote.ready(url);
            }
        }
    }

    /// A worker exited: its slot in the tally, if it still held one (it
    /// died without draining), is freed, so that it holds nobody back.
    fn forget(&self, w: &Worker) {
        if let Some((_, tally)) = &self.tally {
            tally.forget(w.pid());
        }
        if let Some(metrics) = &self.metrics {
            metrics.region.forget(w.pid());
        }
    }

    /// Worker `number` was replaced, for `cause` (the metrics' count).
    fn restarted(&self, number: usize, cause: &'static str) {
        if let Some(metrics) = &self.metrics {
            metrics.restarts.count(number, cause);
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
                    let failed = format!(
                        "the new worker {} (pid {}) failed before it was ready ({}); the old one keeps serving",
                        w.number,
                        w.pid(),
                        describe(status)
                    );
                    self.replacement_failed(index, &failed, now);
                }
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
        // Its slot is empty: not ready, before the log line says why.
        self.publish_readiness();
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
        self.restarted(number, "exited");
        if self.slots[index].replacement.is_none() && self.slots[index].queued.take().is_some() {
            self.queue.retain(|&i| i != index);
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
            if self.stopping.is_some() {
                return;
            }
            if self.drain_at.is_some() {
                tracing::info!(
                    "{name} again: the shutdown delay is cut short: stopping the workers (graceful timeout {:?})",
                    self.graceful
                );
                self.stop(signal);
            } else if self.shutdown_delay.is_zero() {
                tracing::info!(
                    "{name}: stopping the workers (graceful timeout {:?})",
                    self.graceful
                );
                self.stop(signal);
            } else {
                self.drain_at = Some((Instant::now() + self.shutdown_delay, signal));
                self.publish_readiness();
                tracing::info!(
                    "{name}: shutdown delay of {:?}: readiness answers 503, the workers serve on, then drain (graceful timeout {:?}); {name} again drains now",
                    self.shutdown_delay,
                    self.graceful
                );
            }
            return;
        }
        if !matches!(signal, SIGHUP | SIGTTIN | SIGTTOU) || self.stopping.is_some() {
            return;
        }
        if self.drain_at.is_some() {
            tracing::info!("{name} during the shutdown delay: ignored");
            return;
        }
        if signal == SIGHUP {
            if self.booting {
                tracing::info!("SIGHUP while the workers start: ignored");
            } else if self.rolling {
                tracing::info!("SIGHUP: a rolling restart is already under way");
            } else {
                tracing::info!("SIGHUP: rolling restart of {} worker(s)", self.slots.len());
                self.roll(Why::Roll);
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
            self.step_queue();
        } else {
            tracing::info!("SIGTTOU: one worker is the least");
        }
    }

    /// Note what the watch reported; the roll waits for [`DEBOUNCE`] of quiet.
    fn watch_changes(&mut self) {
        let Some(reload) = self.reload.as_mut() else {
            return;
        };
        let changed = reload.take();
        if !changed.is_empty() {
            self.changed.extend(changed);
            self.reload_at = Some(Instant::now() + DEBOUNCE);
        }
    }

    /// Roll for the changes seen, once they are quiet and no roll is under
    /// way (one that is already started may not have seen the last edit).
    fn reload_due(&mut self) {
        if self.booting
            || self.rolling
            || self.stopping.is_some()
            || self.drain_at.is_some()
            || self.reload_at.is_none_or(|at| at > Instant::now())
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
        tracing::info!(
            "--reload: {}{more} changed: rolling {} worker(s)",
            changed
                .first()
                .map_or("a file".into(), |p| p.display().to_string()),
            self.slots.len()
        );
        // A slot waiting out a failed start's backoff tries the new code now.
        let now = Instant::now();
        for slot in self.slots.iter_mut().filter(|s| s.respawn_at.is_some()) {
            slot.respawn_at = Some(now);
            slot.failures = 0;
        }
        self.roll(Why::Reload);
    }

    /// Queue every slot for a replacement (one already queued keeps its
    /// place): the rolling restart of SIGHUP and of a reload.
    fn roll(&mut self, why: Why) {
        self.rolling = true;
        for index in 0..self.slots.len() {
            self.enqueue(index, why);
        }
        self.step_queue();
    }

    fn enqueue(&mut self, index: usize, why: Why) {
        let slot = &mut self.slots[index];
        if slot.queued.is_none() {
            slot.queued = Some(why);
            self.queue.push_back(index);
        }
    }

    /// Start the replacement of the next slot in the queue, unless one is
    /// starting already. A slot with no ready worker (it is being restarted
    /// anyway) is passed over.
    fn step_queue(&mut self) {
        while self.stopping.is_none() && self.slots.iter().all(|s| s.replacement.is_none()) {
            let Some(index) = self.queue.pop_front() else {
                if self.rolling {
                    tracing::info!("rolling restart done");
                    self.rolling = false;
                }
                return;
            };
            if self.slots.get(index).is_none_or(|s| s.queued.is_none()) {
                continue;
            }
            if !self.slots[index].worker.as_ref().is_some_and(|w| w.ready) {
                self.slots[index].queued = None;
                continue;
            }
            match self.spawn(index + 1) {
                Ok(w) => self.slots[index].replacement = Some(w),
                Err(e) => {
                    let failed = format!("starting worker {}: {e}", index + 1);
                    self.replacement_failed(index, &failed, Instant::now());
                }
            }
        }
    }

    /// A replacement could not start, or failed before it was ready: the
    /// old worker keeps serving. The rest of a rolling restart is dropped;
    /// a recycle is tried again after a backoff.
    fn replacement_failed(&mut self, index: usize, failed: &str, now: Instant) {
        let slot = &mut self.slots[index];
        match slot.queued.take() {
            why @ (Some(Why::Roll | Why::Reload) | None) => {
                let what = match why {
                    Some(Why::Reload) => "reload",
                    _ => "rolling restart",
                };
                tracing::error!("{what} stopped: {failed}");
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
                tracing::error!(
                    "recycling worker {} ({why}) stopped: {failed}; next try in {delay:?}",
                    index + 1
                );
            }
        }
        self.step_queue();
    }

    /// When the next lifetime recycle (or its retry) is due, for `sleep`:
    /// only for slots [`queue_recycles`](Self::queue_recycles) would queue.
    fn recycles_at(&self) -> impl Iterator<Item = Instant> + '_ {
        self.slots
            .iter()
            .filter(|s| !self.booting && s.queued.is_none() && s.replacement.is_none())
            .filter_map(|s| {
                let w = s.worker.as_ref().filter(|w| w.ready)?;
                let due = if w.served_all || w.rss_strikes >= RSS_STRIKES {
                    Instant::now()
                } else {
                    w.recycle_at?
                };
                Some(s.hold_until.map_or(due, |hold| hold.max(due)))
            })
    }

    /// Queue each ready worker that has reached a recycling limit.
    fn queue_recycles(&mut self) {
        if self.booting || self.stopping.is_some() || self.drain_at.is_some() {
            return;
        }
        let now = Instant::now();
        for index in 0..self.slots.len() {
            let slot = &self.slots[index];
            if slot.queued.is_some()
                || slot.replacement.is_some()
                || slot.hold_until.is_some_and(|at| at > now)
            {
                continue;
            }
            let Some(w) = slot.worker.as_ref().filter(|w| w.ready) else {
                continue;
            };
            let why = if w.served_all {
                Why::MaxRequests
            } else if w.rss_strikes >= RSS_STRIKES {
                Why::MaxRss(w.rss)
            } else if w.recycle_at.is_some_and(|at| at <= now) {
                Why::Lifetime
            } else {
                continue;
            };
            tracing::info!("worker {} (pid {}) {why}: recycling it", w.number, w.pid());
            self.enqueue(index, why);
        }
        self.step_queue();
    }

    /// Every [`RSS_SAMPLE`], each ready worker's resident memory against
    /// `--workers-max-rss`.
    fn sample_rss(&mut self) {
        let Some(max) = self.recycle.max_rss else {
            return;
        };
        let now = Instant::now();
        if now < self.next_rss {
            return;
        }
        self.next_rss = now + RSS_SAMPLE;
        for w in self.slots.iter_mut().filter_map(|s| s.worker.as_mut()) {
            if let Some(bytes) = w.ready.then(|| rss::sample(w.pid())).flatten() {
                w.rss = bytes;
                w.rss_strikes = if bytes > max { w.rss_strikes + 1 } else { 0 };
            }
        }
    }

    /// Tell every worker to drain (passing on the supervisor's `signal`, so
    /// their logs say which), and once the ready ones said their drain began,
    /// shut the listener: new connections are refused from then on.
    fn stop(&mut self, signal: c_int) {
        self.stopping = Some(Instant::now() + self.graceful + KILL_MARGIN);
        self.drain_at = None;
        self.publish_readiness();
        self.queue.clear();
        self.rolling = false;
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

impl Arbiter<'_> {
    /// The shutdown delay is over, or a worker began its drain without
    /// waiting for it (the signal reached it too): the drain begins.
    fn drain_due(&mut self) {
        let Some((at, signal)) = self.drain_at else {
            return;
        };
        let name = wakeup::name(signal);
        if Instant::now() >= at {
            tracing::info!(
                "{name}: the shutdown delay is over: stopping the workers (graceful timeout {:?})",
                self.graceful
            );
        } else if let Some(w) = self.slotted().find(|w| w.drain_begun) {
            tracing::info!(
                "worker {} (pid {}) began its drain itself: the shutdown delay is cut short",
                w.number,
                w.pid()
            );
        } else {
            return;
        }
        self.stop(signal);
    }

    /// The workers in their slots (not replacements, not retired ones).
    fn slotted(&self) -> impl Iterator<Item = &Worker> {
        self.slots.iter().filter_map(|s| s.worker.as_ref())
    }

    /// Set the readiness flag once every slot has held a ready worker (the
    /// start is over), while at least one ready worker has not begun a drain
    /// and no shutdown has begun; clear it otherwise. A worker that died
    /// leaves the pod ready while a sibling serves (taking the pod out of
    /// its Service for one crash would move all its load onto the others);
    /// only with no worker left serving is it 503. A rolling restart keeps it
    /// set: a slot's old worker stays in it until its replacement is ready.
    fn publish_readiness(&mut self) {
        let Some((_, flag)) = &self.ready else {
            return;
        };
        let serving = |w: &Worker| w.ready && !w.drain_begun;
        self.came_up = self.came_up
            || self
                .slots
                .iter()
                .all(|s| s.worker.as_ref().is_some_and(serving));
        let ready = self.stopping.is_none()
            && self.drain_at.is_none()
            && self.came_up
            && self.slotted().any(serving);
        flag.set(ready);
        if ready != self.published {
            self.published = ready;
            tracing::debug!("readiness: {}", if ready { "200" } else { "503" });
        }
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

/// The readiness flag every worker maps; none, with a warning, where it
/// cannot be made: each worker then answers the ready path for itself.
/// A fresh session-ticket secret; without one (no randomness: never seen)
/// each worker keeps keys of its own, and says so.
fn ticket_seed() -> Option<Seed> {
    match Seed::generate() {
        Ok(seed) => Some(seed),
        Err(_) => {
            tracing::warn!("no session-ticket secret for the workers: each keeps its own keys");
            None
        }
    }
}

fn share_ready_flag() -> Option<(OwnedFd, ReadyFlag)> {
    match ready_flag::create().and_then(|fd| ReadyFlag::map(&fd).map(|f| (fd, f))) {
        Ok(shared) => Some(shared),
        Err(e) => {
            tracing::warn!(
                "--ready-path: no readiness flag shared by the workers ({e}): each answers for itself"
            );
            None
        }
    }
}

/// The tally every worker maps (unless `M0_ACCEPT_BALANCE=0`); none, with
/// a warning, where it cannot be made: the workers then accept unbalanced.
fn share_tally() -> Option<(OwnedFd, Tally)> {
    match tally::create().and_then(|fd| Tally::map(&fd).map(|t| (fd, t))) {
        Ok(shared) => Some(shared),
        Err(e) => {
            tracing::warn!("no connection tally for the workers: {e}");
            None
        }
    }
}
