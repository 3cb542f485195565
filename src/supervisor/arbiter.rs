//! The supervisor's loop: the shell around [`Machine`], which holds every
//! rule. One thread, asleep in `poll` on the signal wakeup, the reload
//! watch and the workers' status pipes until something arrives or the
//! machine's next deadline; it then feeds the machine what it saw (signals,
//! changes, statuses, heartbeats, exits, a tick) and carries out what it answers: it
//! spawns, signals and reaps the workers, shuts the listener, keeps the
//! readiness flag and the metrics, and logs.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use libc::c_int;

use super::notify::Notifier;
use super::recycle::Recycle;
use super::reload::Reload;
use super::state::{Action, Config, Event, Level, Machine, Pid, Said};
use super::wakeup::Wakeup;
use super::worker::{self, Inherit, Worker};
use super::{rss, Plan, Relaunch};
use crate::ipc::ready_flag::{self, ReadyFlag};
use crate::ipc::tally::{self, Tally};
use crate::server::listener::Listener;
use crate::tls::tickets::Seed;

/// The longest `poll` sleeps when nothing is due (a safety net: signals and
/// statuses wake it).
const IDLE: Duration = Duration::from_secs(1);

pub struct Arbiter<'a> {
    machine: Machine,
    /// The worker processes not yet reaped, by pid.
    workers: HashMap<Pid, Worker>,
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
    /// Every listener the workers serve, in the configuration's order.
    listeners: &'a [Listener],
    /// Both ends of the lifeline: the read end for workers to inherit, the
    /// write end held here only, closed when the supervisor ends.
    lifeline: (OwnedFd, OwnedFd),
    /// The workers' connection tally: its descriptor for them to inherit,
    /// and the supervisor's own map of it, to free a dead worker's slot.
    tally: Option<(OwnedFd, Tally)>,
    /// The readiness flag (with `--ready-path`): its descriptor for the
    /// workers, and the supervisor's map of it, which it alone writes.
    ready: Option<(OwnedFd, ReadyFlag)>,
    /// The metrics, when served: the workers' shards, and restarts.
    metrics: Option<super::Metrics>,
    wakeup: Wakeup,
    reload: Option<Reload>,
    /// For each new worker's request limit.
    recycle: Recycle,
    /// The remote's handle, told where the workers are ready.
    remote: Option<crate::server::remote::Remote>,
    /// Set once the machine says the supervisor is done.
    exit: Option<i32>,
    /// systemd's notify socket, when it started us with one.
    systemd: Option<Notifier>,
    /// The workers said ready, for systemd's status line.
    workers_ready: usize,
    /// How often each worker stamps its heartbeat (`--worker-timeout`).
    heartbeat: Option<Duration>,
}

impl<'a> Arbiter<'a> {
    pub fn new(
        plan: &Plan,
        listeners: &'a [Listener],
        wakeup: Wakeup,
        reload: Option<Reload>,
        metrics: Option<super::Metrics>,
    ) -> io::Result<Arbiter<'a>> {
        let ready = plan.ready_flag.then(share_ready_flag).flatten();
        let config = Config {
            workers: plan.workers,
            graceful: plan.graceful_timeout,
            shutdown_delay: plan.shutdown_delay,
            recycle: plan.recycle.clone(),
            readiness: ready.is_some(),
            worker_timeout: plan.worker_timeout,
        };
        Ok(Arbiter {
            machine: Machine::new(config, Instant::now()),
            workers: HashMap::new(),
            relaunch: plan.relaunch.clone(),
            shares: plan.shares.clone(),
            portable: plan.portable,
            tls: plan.tls,
            tickets: RefCell::new(plan.tls.then(ticket_seed).flatten()),
            listeners,
            lifeline: worker::pipe()?,
            tally: plan.balance.then(share_tally).flatten(),
            ready,
            metrics,
            wakeup,
            reload,
            recycle: plan.recycle.clone(),
            remote: plan.remote.clone(),
            exit: None,
            systemd: plan.systemd.as_ref().and_then(|systemd| {
                Notifier::open(systemd, Instant::now())
                    .map_err(|e| tracing::warn!("NOTIFY_SOCKET {}: {e}", systemd.socket))
                    .ok()
            }),
            workers_ready: 0,
            heartbeat: plan.worker_timeout.map(super::state::heartbeat_period),
        })
    }

    pub fn run(mut self) -> i32 {
        let now = Instant::now();
        let first = self.machine.start(now);
        self.act(now, first);
        loop {
            self.sleep();
            let now = Instant::now();
            for signal in self.wakeup.take() {
                self.feed(now, Event::Signal(signal));
            }
            let changed = self.reload.as_mut().map(Reload::take).unwrap_or_default();
            if !changed.is_empty() {
                self.feed(now, Event::Changed(changed));
            }
            for pid in self.machine.live() {
                let said = self.workers.get_mut(&pid).map(Worker::read_status);
                if let Some(said) = said.filter(|&said| said != Said::default()) {
                    self.feed(now, Event::Status { pid, said });
                }
            }
            for pid in self.machine.live() {
                if let Some(silent) = self.workers.get(&pid).and_then(Worker::silent) {
                    self.feed(now, Event::Heartbeat { pid, silent });
                }
            }
            for pid in self.machine.live() {
                let status = self.workers.get_mut(&pid).and_then(Worker::try_exit);
                if let Some(status) = status {
                    if let Some(w) = self.workers.remove(&pid) {
                        self.forget(&w);
                    }
                    self.feed(now, Event::Exited { pid, status });
                }
            }
            self.feed(now, Event::Tick);
            if let Some(systemd) = &mut self.systemd {
                systemd.ping_due(now);
            }
            if let Some(status) = self.exit {
                return status;
            }
        }
    }

    fn feed(&mut self, now: Instant, event: Event) {
        let actions = self.machine.handle(now, event);
        self.act(now, actions);
    }

    /// Carry out `actions` in order; a spawn's answer (and what it leads
    /// to) is fed back before the next one.
    fn act(&mut self, now: Instant, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Spawn { number, .. } => match self.spawn(number) {
                    Ok(w) => {
                        let pid = w.pid();
                        self.workers.insert(pid, w);
                        self.feed(now, Event::Spawned { number, pid });
                    }
                    Err(e) => {
                        let error = e.to_string();
                        self.feed(now, Event::SpawnFailed { number, error });
                    }
                },
                Action::Signal { pid, signal } => {
                    if let Some(w) = self.workers.get(&pid) {
                        w.signal(signal);
                    }
                }
                Action::SampleRss(pids) => {
                    for pid in pids {
                        if let Some(bytes) = rss::sample(pid) {
                            self.feed(now, Event::Rss { pid, bytes });
                        }
                    }
                }
                Action::ShutListener => self.listeners.iter().for_each(Listener::stop_listening),
                Action::Publish(ready) => {
                    if let Some((_, flag)) = &self.ready {
                        flag.set(ready);
                    }
                }
                Action::CameUp { workers } => {
                    let urls: Vec<_> = self
                        .listeners
                        .iter()
                        .map(|l| l.addr.url(self.tls))
                        .collect();
                    tracing::info!(
                        "supervisor (pid {}): {workers} worker(s) ready on {}",
                        std::process::id(),
                        urls.join(", "),
                    );
                    // The embedder is told of the first (its `url`).
                    if let Some((remote, first)) = self.remote.as_ref().zip(urls.into_iter().next())
                    {
                        remote.ready(first);
                    }
                    self.workers_ready = workers;
                    if let Some(systemd) = &mut self.systemd {
                        systemd.ready(&format!("{workers} worker(s) ready"));
                    }
                }
                Action::Rolling(began) => {
                    if let Some(systemd) = &mut self.systemd {
                        if began {
                            systemd.reloading();
                        } else {
                            let workers = self.workers_ready;
                            systemd.ready(&format!("{workers} worker(s) ready"));
                        }
                    }
                }
                Action::Stopping => {
                    if let Some(systemd) = &mut self.systemd {
                        systemd.stopping();
                    }
                }
                Action::Restarted { number, cause } => {
                    if let Some(metrics) = &self.metrics {
                        metrics.restarts.count(number, cause);
                    }
                }
                Action::Log(level, text) => log(level, &text),
                Action::Exit(status) => {
                    self.exit.get_or_insert(status);
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
            listeners: self.listeners.iter().map(|l| l.fd.as_fd()).collect(),
            lifeline: self.lifeline.0.as_fd(),
            tally: self.tally.as_ref().map(|(fd, _)| fd.as_fd()),
            ready: self.ready.as_ref().map(|(fd, _)| fd.as_fd()),
            portable: self.portable,
            metrics: self.metrics.as_ref().map(|m| m.fd.as_fd()),
            tickets: tickets.as_ref(),
            heartbeat: self.heartbeat,
        };
        let share =
            (!self.shares.is_empty()).then(|| &self.shares[(number - 1) % self.shares.len()]);
        let requests = self.recycle.requests_for(number);
        Worker::spawn(&self.relaunch, number, share, requests, &inherit)
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

    /// Until a signal, a status byte (or a pipe's end), or the next deadline.
    fn sleep(&mut self) {
        let now = Instant::now();
        let ping = self.systemd.as_ref().and_then(Notifier::next_ping);
        let next = [self.machine.next_due(), ping]
            .into_iter()
            .flatten()
            .min()
            .map_or(IDLE, |at| at.saturating_duration_since(now))
            .min(IDLE);
        let mut fds = vec![self.wakeup.fd()];
        fds.extend(self.reload.as_ref().map(Reload::fd));
        fds.extend(self.workers.values().filter_map(Worker::status_fd));
        poll_readable(&fds, next);
    }
}

fn log(level: Level, text: &str) {
    match level {
        Level::Debug => tracing::debug!("{text}"),
        Level::Info => tracing::info!("{text}"),
        Level::Warn => tracing::warn!("{text}"),
        Level::Error => tracing::error!("{text}"),
        Level::Print => eprintln!("m0serve: error: {text}"),
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

/// The readiness flag every worker maps; none, with a warning, where it
/// cannot be made: each worker then answers the ready path for itself.
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
