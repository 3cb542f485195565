//! The supervisor's rules as a sans-IO state machine, every one in this
//! module: what to do when a signal arrives, a worker says something or
//! exits, or time passes. It holds no process, pipe or clock: the shell
//! ([`super::arbiter`]) polls, feeds it [`Event`]s with the time they were
//! seen, and carries out the [`Action`]s it returns. Workers are named by
//! the pid the shell reports, so tests can fabricate them.
//!
//! Worker slots are numbered from 1; a slot holds its worker, and during a
//! replacement the new worker waiting to be READY. Workers taken out of
//! their slot (rolled out, or removed by SIGTTOU) drain as `retired` until
//! they exit. Rolling restarts and recycles share one queue of slots: one
//! replacement starts at a time, the next only once it is READY (or failed).
//!
//! A [`Action::Spawn`] is answered at once by [`Event::Spawned`] or
//! [`Event::SpawnFailed`], before the shell carries out the actions after it
//! (until then the slot holds the worker without a pid).

mod contract;
mod queue;
mod readiness;
mod recycling;
mod signals;
mod stop;
mod watchdog;
mod workers;

#[cfg(test)]
mod harness;
#[cfg(test)]
mod recycle_tests;
#[cfg(test)]
mod roll_tests;
#[cfg(test)]
mod shutdown_tests;
#[cfg(test)]
mod slot_tests;
#[cfg(test)]
mod watchdog_tests;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use libc::c_int;

use super::recycle::{Why, RSS_SAMPLE};

pub use contract::{Action, Config, Event, Level, Pid, Said};
pub use watchdog::period as heartbeat_period;

/// Where the supervisor's life is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Until every slot has held a ready worker at once.
    Booting,
    Running,
    /// `--shutdown-delay`: readiness is 503 until the drain at `drain_at`.
    Delaying {
        drain_at: Instant,
        signal: c_int,
        /// The start was not over: a worker failing now still stops the
        /// supervisor with its status, and the start can still complete.
        booting: bool,
    },
    /// Every worker was told `signal`; those left at `kill_at` are killed.
    /// Until `shut_by` (cleared once done) the listener stays open for the
    /// ready workers to say their drain began.
    Stopping {
        kill_at: Instant,
        signal: c_int,
        shut_by: Option<Instant>,
    },
}

/// A worker as the rules see it.
#[derive(Debug)]
struct Tracked {
    number: usize,
    /// None between its [`Action::Spawn`] and the answer.
    pid: Option<Pid>,
    said: Said,
    started: Instant,
    /// When its `--workers-lifetime` is up.
    recycle_at: Option<Instant>,
    /// Its last resident memory sample, and how many in a row were over.
    rss: u64,
    rss_strikes: u32,
    /// Since when it has been watched (`--worker-timeout`): it said READY.
    ready_at: Option<Instant>,
    /// Its heartbeat's oldest stamp, as last read.
    heard: Option<Instant>,
    /// Found silent: its tracebacks were asked for then, and it is killed
    /// once they had time to be written.
    hung: Option<Hung>,
}

/// Where the killing of a silent worker stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hung {
    /// Told to write its tracebacks at this moment.
    Dumping(Instant),
    Killed,
}

impl Tracked {
    /// For log lines and signals: 0 before the spawn is answered, which
    /// the shell, signalling only the pids it holds, passes over.
    fn pid(&self) -> Pid {
        self.pid.unwrap_or(0)
    }

    fn ready(&self) -> bool {
        self.said.ready
    }

    fn serving(&self) -> bool {
        self.said.ready && !self.said.draining
    }
}

#[derive(Debug, Default)]
struct Slot {
    worker: Option<Tracked>,
    replacement: Option<Tracked>,
    failures: u32,
    respawn_at: Option<Instant>,
    /// Why it is in the replacement queue (or its replacement starting).
    queued: Option<Why>,
    /// Recycles whose replacement failed in a row, and the next try.
    recycle_failures: u32,
    hold_until: Option<Instant>,
}

/// The actions of the event being handled.
#[derive(Default)]
struct Out(Vec<Action>);

impl Out {
    fn push(&mut self, action: Action) {
        self.0.push(action);
    }

    fn log(&mut self, level: Level, text: String) {
        self.0.push(Action::Log(level, text));
    }
}

pub struct Machine {
    config: Config,
    phase: Phase,
    slots: Vec<Slot>,
    retired: Vec<Tracked>,
    /// Slots waiting for their replacement, in turn.
    queue: VecDeque<usize>,
    /// A rolling restart (SIGHUP, a reload) is in the queue.
    rolling: bool,
    next_rss: Instant,
    /// A change was seen: the roll is due then (after the debounce).
    reload_at: Option<Instant>,
    changed: Vec<PathBuf>,
    /// The first start launches one slot at a time, so that a failure
    /// stops it: the next slot number to launch.
    launching: Option<usize>,
    /// Every slot has held a serving worker at once (for readiness).
    came_up: bool,
    /// What the readiness flag says now.
    published: bool,
    status: i32,
    out: Out,
}

/// How long shutdown waits for every worker to say its drain began before
/// the listener is shut regardless.
pub const DRAIN_ACK: Duration = Duration::from_millis(50);
/// How long past the graceful timeout a stopping worker has before SIGKILL.
pub const KILL_MARGIN: Duration = Duration::from_secs(5);
/// Between SIGKILLs to workers that outlive the first.
const KILL_AGAIN: Duration = Duration::from_secs(1);

impl Machine {
    pub fn new(config: Config, now: Instant) -> Machine {
        Machine {
            slots: (0..config.workers).map(|_| Slot::default()).collect(),
            config,
            phase: Phase::Booting,
            retired: Vec::new(),
            queue: VecDeque::new(),
            rolling: false,
            next_rss: now + RSS_SAMPLE,
            reload_at: None,
            changed: Vec::new(),
            launching: None,
            came_up: false,
            published: false,
            status: 0,
            out: Out::default(),
        }
    }

    /// The first start: worker 1 (the rest follow as each one starts).
    pub fn start(&mut self, now: Instant) -> Vec<Action> {
        if !self.slots.is_empty() {
            self.launching = Some(1);
            self.spawn(0, false, now);
        }
        self.take()
    }

    pub fn handle(&mut self, now: Instant, event: Event) -> Vec<Action> {
        match event {
            Event::Signal(signal) => self.on_signal(signal, now),
            Event::Changed(paths) => {
                if !paths.is_empty() {
                    self.changed.extend(paths);
                    self.reload_at = Some(now + super::reload::DEBOUNCE);
                }
            }
            Event::Spawned { number, pid } => self.on_spawned(number, pid, now),
            Event::SpawnFailed { number, error } => self.on_spawn_failed(number, &error, now),
            Event::Status { pid, said } => self.on_status(pid, said, now),
            Event::Exited { pid, status } => self.on_exit(pid, status, now),
            Event::Rss { pid, bytes } => self.on_rss(pid, bytes),
            Event::Heartbeat { pid, silent } => self.on_heartbeat(pid, silent, now),
            Event::Tick => self.tick(now),
        }
        self.take()
    }

    /// When the next thing is due (a tick then), if anything is.
    pub fn next_due(&self) -> Option<Instant> {
        let respawns = self
            .slots
            .iter()
            .filter(|_| !self.stopping())
            .filter_map(|s| s.respawn_at);
        let phase = match self.phase {
            Phase::Delaying { drain_at, .. } => Some(drain_at),
            Phase::Stopping {
                kill_at, shut_by, ..
            } => Some(shut_by.map_or(kill_at, |at| at.min(kill_at))),
            _ => None,
        };
        let reload = self
            .reload_at
            .filter(|_| self.phase == Phase::Running && !self.rolling);
        respawns
            .chain(phase)
            .chain(self.recycles_at())
            .chain(self.config.recycle.max_rss.map(|_| self.next_rss))
            .chain(reload)
            .chain(self.watchdog_at())
            .min()
    }

    /// Every worker process with a pid, slots first, in slot order.
    pub fn live(&self) -> Vec<Pid> {
        self.tracked().filter_map(|w| w.pid).collect()
    }

    fn tracked(&self) -> impl Iterator<Item = &Tracked> {
        self.slots
            .iter()
            .flat_map(|s| s.worker.iter().chain(s.replacement.iter()))
            .chain(self.retired.iter())
    }

    fn take(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.out.0)
    }

    fn booting(&self) -> bool {
        matches!(
            self.phase,
            Phase::Booting | Phase::Delaying { booting: true, .. }
        )
    }

    fn stopping(&self) -> bool {
        matches!(self.phase, Phase::Stopping { .. })
    }

    fn delaying(&self) -> bool {
        matches!(self.phase, Phase::Delaying { .. })
    }

    /// Ask the shell for a worker in slot `index`, held without a pid until
    /// it answers.
    fn spawn(&mut self, index: usize, replacement: bool, now: Instant) {
        let number = index + 1;
        let first = self.booting().then_some(self.slots.len());
        let tracked = Tracked {
            number,
            pid: None,
            said: Said::default(),
            started: now,
            recycle_at: self.config.recycle.deadline(now, number, first),
            rss: 0,
            rss_strikes: 0,
            ready_at: None,
            heard: None,
            hung: None,
        };
        let slot = &mut self.slots[index];
        if replacement {
            slot.replacement = Some(tracked);
        } else {
            slot.worker = Some(tracked);
        }
        self.out.push(Action::Spawn {
            number,
            replacement,
        });
    }

    /// Everything due at `now`, in the order the rules depend on.
    fn tick(&mut self, now: Instant) {
        self.respawn_due(now);
        self.watchdog_due(now);
        self.sample_rss(now);
        self.queue_recycles(now);
        self.reload_due(now);
        self.drain_due(now);
        self.publish();
        self.stop_due(now);
    }
}
