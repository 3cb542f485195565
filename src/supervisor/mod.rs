//! The supervisor: binds the listeners once, runs `--workers` worker processes
//! on it, and keeps them running. It never imports the application.
//!
//! Each worker is the whole server of one process ([`crate::server::run`]),
//! started by running this same program again with the same arguments — the
//! Python entry relaunches `sys.executable -m m0serve`, the pure binary its
//! own executable — so it runs on the user's interpreter, virtualenv,
//! environment and working directory; internal `M0SERVE_WORKER_*` variables
//! tell it that it is a worker and which descriptors it inherited ([`link`]).
//!
//! - A worker that exits is logged with its status or signal and replaced;
//!   one that fails before it is READY on the first start stops the
//!   supervisor with that worker's exit status (2 for an app that cannot be
//!   loaded; the worker printed why). Later starts that fail back off
//!   exponentially ([`backoff`]).
//! - SIGTERM/SIGINT: every worker drains; once each said its drain began
//!   (50 ms at most), the supervisor shuts the listeners, so new connections
//!   are refused. Workers never shut the shared socket themselves. With
//!   `--shutdown-delay`, the drain waits that long first: the readiness flag
//!   ([`crate::ipc::ready_flag`]) says 503 at once, the workers know
//!   nothing yet and serve on as usual, and the graceful timeout counts from
//!   the end of the delay. The signal again during the delay drains at once,
//!   as does a worker that began its drain itself (a terminal's Ctrl-C
//!   signals the whole process group: the workers drain without waiting).
//! - With `--ready-path`, the supervisor keeps the readiness flag every
//!   worker answers from: set while every slot holds a ready worker (that
//!   has not begun a drain) and no shutdown has begun, cleared otherwise.
//! - SIGHUP: a rolling restart, one worker at a time: its replacement is
//!   started, and only once it is READY is the old one drained. A
//!   replacement that fails leaves the old worker serving.
//! - Recycling ([`recycle`]): a worker that served `--workers-max-requests`
//!   (plus its jitter), lived `--workers-lifetime`, or was sampled over
//!   `--workers-max-rss` twice in a row is replaced the same way, one
//!   worker at a time.
//! - `--reload` ([`reload`]): a change to a watched file rolls the workers
//!   as SIGHUP does; an edit that breaks the import leaves the old workers
//!   serving and the watch running, and the next good edit rolls again. A
//!   first start that fails still exits (2 for an app that cannot load).
//! - SIGTTIN / SIGTTOU: one worker more / fewer (at least one).
//! - The supervisor's death, even by SIGKILL, ends every worker within a
//!   second (the lifeline, and `PR_SET_PDEATHSIG` on Linux).

mod arbiter;
mod backoff;
pub mod link;
pub mod notify;
mod pid_file;
pub mod recycle;
pub mod reload;
mod rss;
mod state;
mod title;
mod wakeup;
mod watch_filter;
mod worker;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::backend::{self, Choice, Kind};
use std::sync::Arc;

use crate::metrics::counters::Region;
use crate::metrics::{endpoint, Restarts};
use crate::server::remote::Remote;
use crate::server::{cpus, listener, Listen, Options};
use crate::tuning::Tuning;

/// What the supervisor needs from the command line beyond [`Options`]
/// (built by [`crate::cli`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Supervision {
    pub workers: usize,
    pub pid_file: Option<std::path::PathBuf>,
    pub recycle: recycle::Recycle,
    /// `--reload`: what to watch.
    pub reload: Option<reload::Watch>,
    /// `--shutdown-delay`: readiness is 503 this long before the drain.
    pub shutdown_delay: std::time::Duration,
    /// `--metrics-address`: where the supervisor serves scrapes.
    pub metrics_address: Option<String>,
    /// systemd's notify socket and watchdog, when it started us with them.
    pub systemd: Option<notify::Systemd>,
    /// `--worker-timeout` (None: 0, off).
    pub worker_timeout: Option<std::time::Duration>,
}

impl Supervision {
    /// The first flag given that only a supervisor carries out (None: one
    /// process can serve alone, as the Python API serves an object).
    pub fn needs_supervisor(&self) -> Option<&'static str> {
        let recycle = &self.recycle;
        [
            (self.workers != 1, "--workers"),
            (self.reload.is_some(), "--reload"),
            (self.pid_file.is_some(), "--pid-file"),
            (self.metrics_address.is_some(), "--metrics-address"),
            (!self.shutdown_delay.is_zero(), "--shutdown-delay"),
            (recycle.max_requests.is_some(), "--workers-max-requests"),
            (recycle.lifetime.is_some(), "--workers-lifetime"),
            (recycle.max_rss.is_some(), "--workers-max-rss"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}

/// How to start a worker: this program again, with its arguments.
#[derive(Clone, Debug)]
pub struct Relaunch {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

/// What the supervisor runs.
pub struct Plan {
    pub listen: Vec<Listen>,
    pub socket: listener::Setup,
    pub workers: usize,
    pub pid_file: Option<PathBuf>,
    /// The workers' `--graceful-timeout`: a worker still running this long
    /// (and a margin) after it was told to stop is killed.
    pub graceful_timeout: Duration,
    pub relaunch: Relaunch,
    /// Worker `n`'s CPUs ([`cpus::worker_shares`]); empty with one worker.
    pub shares: Vec<cpus::Worker>,
    pub recycle: recycle::Recycle,
    pub reload: Option<reload::Watch>,
    /// `--shutdown-delay`: how long after SIGTERM/SIGINT the drain begins.
    pub shutdown_delay: Duration,
    /// `--ready-path` is served: share a readiness flag with the workers.
    pub ready_flag: bool,
    /// `--backend auto` found io_uring refused: the supervisor logged the
    /// fallback once, and its workers run portable without probing again
    /// (one line per server, not one per worker).
    pub portable: bool,
    /// `--metrics-address`: where scrapes are served.
    pub metrics_address: Option<String>,
    /// The workers serve TLS (the logged address is `https://`).
    pub tls: bool,
    /// The embedder's handle (the Python API): told where the workers are
    /// ready, and able to stop the supervisor as SIGTERM would.
    pub remote: Option<Remote>,
    /// Share a connection tally with the workers ([`crate::ipc::tally`];
    /// the `M0_ACCEPT_BALANCE=0` knob turns it off, the negative arm).
    pub balance: bool,
    /// systemd's notify socket and watchdog ([`notify`]).
    pub systemd: Option<notify::Systemd>,
    /// `--worker-timeout`: a worker whose heartbeat is silent this long is
    /// killed and replaced (None: not watched).
    pub worker_timeout: Option<Duration>,
}

impl Plan {
    pub fn new(options: &Options, supervision: &Supervision, relaunch: Relaunch) -> Plan {
        let config = &options.config;
        Plan {
            listen: config.listen.clone(),
            socket: config.socket,
            workers: supervision.workers,
            pid_file: supervision.pid_file.clone(),
            graceful_timeout: config.graceful_timeout,
            relaunch,
            shares: cpus::worker_shares(supervision.workers, config.cores),
            recycle: supervision.recycle.clone(),
            reload: supervision.reload.clone(),
            shutdown_delay: supervision.shutdown_delay,
            ready_flag: config.router.readiness().is_some(),
            portable: auto_falls_back(config.backend, &options.tuning),
            metrics_address: supervision.metrics_address.clone(),
            tls: config.tls.is_some(),
            remote: options.remote.clone(),
            balance: options.tuning.accept_balance,
            systemd: supervision.systemd.clone(),
            worker_timeout: supervision.worker_timeout,
        }
    }
}

/// Whether `--backend auto` falls back here; [`backend::select`] logs why.
/// `--uring` is left to the workers, the first of which exits with the error.
fn auto_falls_back(choice: Choice, tuning: &Tuning) -> bool {
    choice == Choice::Auto
        && matches!(
            backend::select(choice, tuning.uring_disabled),
            Ok(Kind::Portable)
        )
}

/// The metrics the workers share and the supervisor serves: their region
/// (its descriptor for the workers), and the restarts counted here.
pub struct Metrics {
    pub fd: std::os::fd::OwnedFd,
    pub region: Region,
    pub restarts: Arc<Restarts>,
}

/// Bind `--metrics-address` and serve it, before any worker starts.
fn start_metrics(addr: &str) -> std::io::Result<Metrics> {
    let listener = endpoint::bind(addr)?;
    let (fd, region) = Region::create()?;
    let restarts = Arc::new(Restarts::default());
    endpoint::spawn(listener, region, restarts.clone())?;
    Ok(Metrics {
        fd,
        region,
        restarts,
    })
}

/// Supervise until SIGTERM or SIGINT; returns the exit status: 0 after a
/// graceful shutdown, 1 when the listener (or the pid file) failed, a
/// worker's status when the first start failed.
pub fn run(plan: Plan) -> i32 {
    title::set("m0serve: supervisor");
    let fail = |e: std::io::Error| {
        eprintln!("m0serve: error: {e}");
        1
    };
    // Handlers before any worker, so no signal and no exit is missed.
    let wakeup = match wakeup::Wakeup::install() {
        Ok(wakeup) => wakeup,
        Err(e) => return fail(e),
    };
    if let Some(remote) = &plan.remote {
        match wakeup.stopper() {
            Ok(stopper) => remote.on_stop(stopper),
            Err(e) => return fail(e),
        }
    }
    let listeners = match listener::bind_all(&plan.listen, plan.socket) {
        Ok(listeners) => listeners,
        Err(e) => return fail(e),
    };
    let pid_file = match plan.pid_file.as_deref().map(pid_file::PidFile::write) {
        Some(Err(e)) => return fail(e),
        Some(Ok(file)) => Some(file),
        None => None,
    };
    if plan.recycle.max_rss.is_some() && !rss::SUPPORTED {
        tracing::warn!(
            "--workers-max-rss: resident memory cannot be sampled on this platform; not enforced"
        );
    }
    for l in &listeners {
        tracing::debug!(
            "supervisor (pid {}) bound {}; starting {} worker(s)",
            std::process::id(),
            l.addr.url(plan.tls),
            plan.workers
        );
    }
    let metrics = match plan.metrics_address.as_deref().map(start_metrics) {
        Some(Err(e)) => return fail(e),
        Some(Ok(metrics)) => Some(metrics),
        None => None,
    };
    let reload = match plan.reload.as_ref().map(reload::Reload::start) {
        Some(Err(e)) => return fail(e),
        Some(Ok(reload)) => Some(reload),
        None => None,
    };
    let status = match arbiter::Arbiter::new(&plan, &listeners, wakeup, reload, metrics) {
        Ok(arbiter) => arbiter.run(),
        Err(e) => fail(e),
    };
    if let Some(remote) = &plan.remote {
        remote.release();
    }
    drop(pid_file);
    drop(listeners); // unlinks the Unix sockets' files, after every worker exited
    status
}
