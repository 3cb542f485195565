//! What goes into the state machine ([`Event`], with its [`Config`]) and
//! what comes out of it ([`Action`]): the whole of its contract with the
//! shell.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use libc::c_int;

use crate::supervisor::recycle::Recycle;

pub type Pid = u32;

/// What a worker wrote on its status pipe since the last read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Said {
    pub ready: bool,
    pub draining: bool,
    /// It served its `--workers-max-requests`.
    pub served_all: bool,
    /// Its app can serve no more: every thread stuck past `--request-timeout`.
    pub stuck: bool,
    /// The pipe's end: it will say nothing more.
    pub hung_up: bool,
}

#[derive(Debug)]
pub enum Event {
    Signal(c_int),
    /// `--reload` saw these paths change.
    Changed(Vec<PathBuf>),
    Spawned {
        number: usize,
        pid: Pid,
    },
    SpawnFailed {
        number: usize,
        error: String,
    },
    Status {
        pid: Pid,
        said: Said,
    },
    Exited {
        pid: Pid,
        status: ExitStatus,
    },
    /// A resident memory sample asked for by [`Action::SampleRss`].
    Rss {
        pid: Pid,
        bytes: u64,
    },
    /// How long since the worker's heartbeat's oldest stamp, read by the
    /// shell on each pass with `--worker-timeout`.
    Heartbeat {
        pid: Pid,
        silent: Duration,
    },
    /// Time passed: whatever is due now is done.
    Tick,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
    /// The program's own error line on stderr, outside the log.
    Print,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Spawn {
        number: usize,
        replacement: bool,
    },
    Signal {
        pid: Pid,
        signal: c_int,
    },
    SampleRss(Vec<Pid>),
    /// Stop accepting: new connections are refused from now on.
    ShutListener,
    /// Set (or clear) the readiness flag.
    Publish(bool),
    /// Every slot holds a ready worker: the start is over.
    CameUp {
        workers: usize,
    },
    /// A rolling restart (SIGHUP, a reload) began (true) or ended (false),
    /// done or given up.
    Rolling(bool),
    /// The drain began: the supervisor is on its way out.
    Stopping,
    /// A worker was replaced, for the metrics' restarts counter.
    Restarted {
        number: usize,
        cause: &'static str,
    },
    Log(Level, String),
    /// Every worker is gone after a stop: the supervisor exits so.
    Exit(i32),
}

/// What the rules need from the command line.
pub struct Config {
    pub workers: usize,
    pub graceful: Duration,
    pub shutdown_delay: Duration,
    pub recycle: Recycle,
    /// `--ready-path` is served from a shared flag.
    pub readiness: bool,
    /// `--worker-timeout`: a ready worker whose heartbeat is silent this
    /// long is killed and replaced (None: 0, not watched).
    pub worker_timeout: Option<Duration>,
}
