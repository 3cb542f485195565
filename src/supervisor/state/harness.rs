//! The tests' stand-in for the shell: it feeds the machine events at a
//! clock it moves by hand, and answers each spawn at once, as the shell
//! does, with a made-up pid (or a failure, for the slots told to fail).

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use libc::c_int;

use super::{Action, Config, Event, Level, Machine, Pid, Said};
use crate::supervisor::recycle::Recycle;

pub struct Sim {
    pub m: Machine,
    pub t0: Instant,
    pub now: Instant,
    next_pid: Pid,
    /// Slot numbers whose next spawn fails (each entry once).
    pub fail: Vec<usize>,
}

pub fn config(workers: usize) -> Config {
    Config {
        workers,
        graceful: Duration::from_secs(30),
        shutdown_delay: Duration::ZERO,
        recycle: Recycle::default(),
        readiness: false,
        worker_timeout: None,
    }
}

impl Sim {
    pub fn new(config: Config) -> Sim {
        let t0 = Instant::now();
        Sim {
            m: Machine::new(config, t0),
            t0,
            now: t0,
            next_pid: 100,
            fail: Vec::new(),
        }
    }

    /// Started, and every worker READY: pids 100, 101, …
    pub fn booted(config: Config) -> Sim {
        let workers = config.workers;
        let mut sim = Sim::new(config);
        sim.start();
        let mut came_up = Vec::new();
        for pid in 100..100 + workers as Pid {
            came_up = sim.ready(pid);
        }
        assert!(came_up.contains(&Action::CameUp { workers }), "{came_up:?}");
        sim
    }

    pub fn start(&mut self) -> Vec<Action> {
        let first = self.m.start(self.now);
        self.answer(first)
    }

    /// Handle `event` now; every action, spawns answered in line.
    pub fn feed(&mut self, event: Event) -> Vec<Action> {
        let actions = self.m.handle(self.now, event);
        self.answer(actions)
    }

    fn answer(&mut self, actions: Vec<Action>) -> Vec<Action> {
        let mut all = Vec::new();
        for action in actions {
            let spawn = match action {
                Action::Spawn { number, .. } => Some(number),
                _ => None,
            };
            all.push(action);
            if let Some(number) = spawn {
                let answer = if let Some(at) = self.fail.iter().position(|&n| n == number) {
                    self.fail.remove(at);
                    Event::SpawnFailed {
                        number,
                        error: "No such file or directory".into(),
                    }
                } else {
                    self.next_pid += 1;
                    Event::Spawned {
                        number,
                        pid: self.next_pid - 1,
                    }
                };
                all.extend(self.feed(answer));
            }
        }
        all
    }

    /// Move the clock to `t0 + at`.
    pub fn at(&mut self, at: Duration) -> &mut Sim {
        self.now = self.t0 + at;
        self
    }

    pub fn tick(&mut self) -> Vec<Action> {
        self.feed(Event::Tick)
    }

    pub fn signal(&mut self, signal: c_int) -> Vec<Action> {
        self.feed(Event::Signal(signal))
    }

    pub fn say(&mut self, pid: Pid, said: Said) -> Vec<Action> {
        self.feed(Event::Status { pid, said })
    }

    pub fn ready(&mut self, pid: Pid) -> Vec<Action> {
        let said = Said {
            ready: true,
            ..Said::default()
        };
        self.say(pid, said)
    }

    pub fn draining(&mut self, pid: Pid) -> Vec<Action> {
        let said = Said {
            draining: true,
            ..Said::default()
        };
        self.say(pid, said)
    }

    /// `pid`'s heartbeat was last stamped `silent` ago.
    pub fn heartbeat(&mut self, pid: Pid, silent: Duration) -> Vec<Action> {
        self.feed(Event::Heartbeat { pid, silent })
    }

    /// `pid` exited with `code`.
    pub fn exit(&mut self, pid: Pid, code: i32) -> Vec<Action> {
        let status = ExitStatus::from_raw(code << 8);
        self.feed(Event::Exited { pid, status })
    }

    /// `pid` was killed by `signal`.
    pub fn killed(&mut self, pid: Pid, signal: c_int) -> Vec<Action> {
        let status = ExitStatus::from_raw(signal);
        self.feed(Event::Exited { pid, status })
    }
}

/// The spawns asked for: (slot number, as a replacement).
pub fn spawns(actions: &[Action]) -> Vec<(usize, bool)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Spawn {
                number,
                replacement,
            } => Some((*number, *replacement)),
            _ => None,
        })
        .collect()
}

/// The signals sent: (pid, signal).
pub fn signals(actions: &[Action]) -> Vec<(Pid, c_int)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Signal { pid, signal } => Some((*pid, *signal)),
            _ => None,
        })
        .collect()
}

/// The log lines at `level`.
pub fn logs(actions: &[Action], level: Level) -> Vec<&str> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Log(l, text) if *l == level => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Whether a log line at any level contains `text`.
pub fn logged(actions: &[Action], text: &str) -> bool {
    actions
        .iter()
        .any(|a| matches!(a, Action::Log(_, line) if line.contains(text)))
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}
