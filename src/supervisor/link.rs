//! The worker's side of its supervisor: what the supervisor passes down (in
//! internal `M0SERVE_WORKER_*` variables, not flags), and what the worker
//! does with it.
//!
//! - the listeners, bound once by the supervisor and shared by every worker;
//! - a status pipe, on which the worker writes [`READY`] once its app is
//!   loaded (lifespan startup included) and its cores accept, and
//!   [`DRAINING`] when its drain begins, [`MAX_REQUESTS`] once it has served
//!   the requests the supervisor allotted it (`--workers-max-requests`),
//!   [`STUCK`] once its app can serve no more (`--request-timeout`);
//! - the workers' connection tally ([`crate::ipc::tally`]), where shared;
//! - the readiness flag ([`crate::ipc::ready_flag`]), with `--ready-path`;
//! - its heartbeat ([`crate::ipc::heartbeat`]), with `--worker-timeout`:
//!   the worker answers [`TRACEBACKS`] by writing every Python thread's
//!   traceback to its stderr (see the extension's worker start);
//! - the lifeline: the read end of a pipe whose write end only the
//!   supervisor holds. End of file means the supervisor is gone, however it
//!   died, and the worker exits at once: no orphans (on Linux
//!   `PR_SET_PDEATHSIG`, set at spawn, kills it even sooner).

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::server::request_budget::Budget;
use crate::server::{cpus, Inherited, Options, Phase};

/// The worker's number, from 1.
pub const INDEX: &str = "M0SERVE_WORKER_INDEX";
/// The shared listening sockets, a comma-separated list of descriptors.
pub const LISTENER_FD: &str = "M0SERVE_WORKER_FD";
/// The write end of the status pipe.
pub const STATUS_FD: &str = "M0SERVE_WORKER_STATUS_FD";
/// The read end of the lifeline.
pub const LIFELINE_FD: &str = "M0SERVE_WORKER_LIFELINE_FD";
/// The workers' connection tally (absent: none is shared).
pub const TALLY_FD: &str = "M0SERVE_WORKER_TALLY_FD";
/// The readiness flag (absent: none is shared).
pub const READY_FD: &str = "M0SERVE_WORKER_READY_FD";
/// The metrics' shared region (absent: no `--metrics-address`).
pub const METRICS_FD: &str = "M0SERVE_WORKER_METRICS_FD";
/// The worker's heartbeat page (absent: `--worker-timeout 0`).
pub const HEARTBEAT_FD: &str = "M0SERVE_WORKER_HEARTBEAT_FD";
/// The worker's core threads, when the supervisor planned its CPUs.
pub const CORES: &str = "M0SERVE_WORKER_CORES";
/// The worker's CPUs (a list like `0-1,4`; empty: not pinned).
pub const CPUS: &str = "M0SERVE_WORKER_CPUS";

/// The requests this worker serves before it asks to be recycled.
pub const REQUESTS: &str = "M0SERVE_WORKER_MAX_REQUESTS";
/// `portable`: the supervisor's `--backend auto` found io_uring refused and
/// said so; the worker runs portable without probing (and logging) again.
pub const BACKEND: &str = "M0SERVE_WORKER_BACKEND";
/// A pipe holding the session-ticket secret ([`crate::tls::tickets::Seed`]).
pub const TICKETS_FD: &str = "M0SERVE_WORKER_TICKETS_FD";

/// Sent to a worker found silent: it writes every Python thread's
/// traceback to stderr (`faulthandler`, from the signal handler, without
/// the GIL a stuck thread may hold), before it is killed.
pub const TRACEBACKS: libc::c_int = libc::SIGUSR1;

/// Written on the status pipe when the worker is ready.
pub const READY: u8 = b'R';
/// Written on the status pipe when the worker's drain has begun.
pub const DRAINING: u8 = b'D';
/// Written on the status pipe when the worker has served its requests.
pub const MAX_REQUESTS: u8 = b'M';
/// Written on the status pipe when the worker can serve no more: every
/// thread of its app stuck in a call past `--request-timeout`.
pub const STUCK: u8 = b'S';

/// A worker's inheritance from its supervisor.
pub struct Link {
    pub number: usize,
    /// Its core threads and CPUs, when the supervisor planned them.
    share: Option<cpus::Worker>,
    /// Its `--workers-max-requests` (with the jitter drawn), if any.
    max_requests: Option<u64>,
    /// [`BACKEND`] was `portable`.
    portable: bool,
    listeners: Vec<OwnedFd>,
    status: File,
    lifeline: OwnedFd,
    tally: Option<OwnedFd>,
    ready: Option<OwnedFd>,
    metrics: Option<OwnedFd>,
    heartbeat: Option<OwnedFd>,
    /// The supervisor's session-ticket secret, with TLS.
    tickets: Option<crate::tls::tickets::Seed>,
}

/// The link when this process was started as a worker; `None` when it was
/// not (it is then a supervisor). `take` gives a variable's value and
/// removes it ([`crate::cli`] reads the environment), so what the
/// application starts is not taken for a worker.
pub fn from_vars(mut take: impl FnMut(&str) -> Option<String>) -> Result<Option<Link>, String> {
    let Some(number) = take(INDEX) else {
        return Ok(None);
    };
    let number = number
        .parse()
        .map_err(|_| format!("{INDEX}={number} is not a worker number"))?;
    let required = |found: Option<String>, name: &str| {
        found.ok_or_else(|| format!("{INDEX} is set but {name} is not"))
    };
    let listeners = required(take(LISTENER_FD), LISTENER_FD)?
        .split(',')
        .map(|raw| descriptor(LISTENER_FD, raw))
        .collect::<Result<Vec<_>, _>>()?;
    let mut fd = |name: &str| take(name).map(|raw| descriptor(name, &raw)).transpose();
    let required = |found: Option<OwnedFd>, name: &str| {
        found.ok_or_else(|| format!("{INDEX} is set but {name} is not"))
    };
    let status = File::from(required(fd(STATUS_FD)?, STATUS_FD)?);
    let lifeline = required(fd(LIFELINE_FD)?, LIFELINE_FD)?;
    let tally = fd(TALLY_FD)?;
    let ready = fd(READY_FD)?;
    let metrics = fd(METRICS_FD)?;
    let heartbeat = fd(HEARTBEAT_FD)?;
    let tickets = fd(TICKETS_FD)?.map(read_seed).transpose()?;
    let share = match (take(CORES), take(CPUS)) {
        (Some(cores), Some(list)) => Some(cpus::Worker {
            cores: cores
                .parse()
                .map_err(|_| format!("{CORES}={cores} is not a count"))?,
            cpus: cpus::list::parse(&list).map_err(|e| format!("{CPUS}={list}: {e}"))?,
        }),
        _ => None,
    };
    let max_requests = match take(REQUESTS) {
        Some(n) => Some(
            n.parse()
                .map_err(|_| format!("{REQUESTS}={n} is not a count"))?,
        ),
        None => None,
    };
    let portable = match take(BACKEND).as_deref() {
        None => false,
        Some("portable") => true,
        Some(other) => return Err(format!("{BACKEND}={other} is not `portable`")),
    };
    Ok(Some(Link {
        number,
        share,
        max_requests,
        portable,
        listeners,
        status,
        lifeline,
        tally,
        ready,
        metrics,
        heartbeat,
        tickets,
    }))
}

/// The descriptor `value` of the variable `name`, adopted.
fn descriptor(name: &str, value: &str) -> Result<OwnedFd, String> {
    let raw: RawFd = value
        .parse()
        .map_err(|_| format!("{name}={value} is not a descriptor"))?;
    adopt(raw).ok_or_else(|| format!("{name}={value} is not an open descriptor"))
}

/// The ticket secret the supervisor wrote whole into the pipe `fd`.
fn read_seed(fd: OwnedFd) -> Result<crate::tls::tickets::Seed, String> {
    let mut bytes = Vec::new();
    File::from(fd)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{TICKETS_FD}: {e}"))?;
    crate::tls::tickets::Seed::from_bytes(&bytes)
        .ok_or_else(|| format!("{TICKETS_FD}: {} bytes, not a ticket secret", bytes.len()))
}

/// Own `raw`, close-on-exec again (the application's subprocesses must not
/// hold the listener), or `None` if it is not open.
fn adopt(raw: RawFd) -> Option<OwnedFd> {
    // SAFETY: F_GETFD/F_SETFD on a descriptor number only read and set its flags.
    let open = unsafe { libc::fcntl(raw, libc::F_GETFD) } >= 0
        && unsafe { libc::fcntl(raw, libc::F_SETFD, libc::FD_CLOEXEC) } >= 0;
    // SAFETY: the supervisor opened `raw` for this process alone, and this
    // is its one adoption (the variable naming it was removed).
    open.then(|| unsafe { OwnedFd::from_raw_fd(raw) })
}

impl Link {
    /// Become worker `number`: the title, the lifeline watch, what the
    /// supervisor handed down in `options.inherited`, its word on the
    /// backend, tickets and readiness in `options.config`, and the phase
    /// hook that tells it ours. SIGHUP, SIGTTIN and SIGTTOU, the
    /// supervisor's to act on, are ignored here (a terminal's hang-up
    /// reaches the whole process group).
    pub fn enter(self, options: &mut Options) {
        super::title::set(&format!("m0serve: worker {}", self.number));
        for signal in [libc::SIGHUP, libc::SIGTTIN, libc::SIGTTOU] {
            let _ = signal_hook::flag::register(signal, Arc::new(AtomicBool::new(false)));
        }
        // Before any other thread of this process exists (the lifeline's,
        // the app's pool or executor): they inherit the set.
        let confined = self.share.as_ref().is_some_and(|share| {
            cpus::confine(&share.cpus)
                .map_err(|e| tracing::warn!("confining worker {} to its CPUs: {e}", self.number))
                .is_ok()
        });
        let config = &mut options.config;
        if let (Some(seed), Some(tls)) = (&self.tickets, config.tls.as_mut()) {
            tls.share_tickets(seed);
        }
        watch(self.lifeline);
        if self.portable {
            config.backend = crate::backend::Choice::Portable;
        }
        // Without it, the ready path answers for this worker alone.
        if let (Some(fd), Some(readiness)) = (self.ready, config.router.readiness()) {
            match crate::ipc::ready_flag::ReadyFlag::map(&fd) {
                Ok(flag) => readiness.share(flag),
                Err(e) => tracing::warn!("mapping the readiness flag: {e}"),
            }
        }
        // One-byte writes on a pipe are atomic: the core thread that counts
        // the last request and the main thread may both write.
        let status = Arc::new(self.status);
        let budget = self.max_requests.map(|limit| {
            tracing::debug!("recycled after {limit} requests");
            let status = status.clone();
            Budget::new(limit, move || tell(&status, MAX_REQUESTS))
        });
        options.inherited = Some(Inherited {
            number: self.number as u32,
            listeners: self.listeners,
            cpu_share: self.share,
            confined,
            tally: self.tally.and_then(|fd| {
                crate::ipc::tally::Tally::map(&fd)
                    .map_err(|e| tracing::warn!("mapping the workers' tally: {e}"))
                    .ok()
            }),
            metrics: self.metrics.and_then(|fd| {
                crate::metrics::counters::Region::map(&fd)
                    .map_err(|e| tracing::warn!("mapping the metrics' region: {e}"))
                    .ok()
            }),
            budget,
            replace_me: Some({
                let status = status.clone();
                Arc::new(move || tell(&status, STUCK))
            }),
            heartbeat: self.heartbeat.and_then(|fd| {
                crate::ipc::heartbeat::Heartbeat::map(&fd)
                    .map_err(|e| tracing::warn!("mapping the heartbeat: {e}"))
                    .ok()
            }),
        });
        options.phase_hook = Some(Box::new(move |phase| {
            tell(
                &status,
                match phase {
                    Phase::Ready => READY,
                    Phase::Draining => DRAINING,
                },
            )
        }));
    }
}

fn tell(mut status: &File, byte: u8) {
    // A supervisor that is gone is the lifeline's business.
    let _ = status.write_all(&[byte]);
}

/// Exit as soon as the lifeline reads end of file. `_exit`, not a drain:
/// with the supervisor gone nobody would replace or stop this worker.
fn watch(lifeline: OwnedFd) {
    let spawned = std::thread::Builder::new()
        .name("m0-lifeline".into())
        .spawn(move || {
            let mut lifeline = File::from(lifeline);
            let mut byte = [0u8; 1];
            loop {
                match lifeline.read(&mut byte) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Ok(n) if n > 0 => continue,
                    _ => break,
                }
            }
            eprintln!("m0serve: the supervisor is gone; worker exiting");
            // SAFETY: _exit ends the process without running anything else.
            unsafe { libc::_exit(1) }
        });
    if let Err(e) = spawned {
        tracing::warn!("watching the supervisor: {e}");
    }
}
