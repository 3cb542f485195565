//! Flags of the supervisor: how many worker processes and its pid file;
//! when a healthy worker is recycled anyway; `--reload`.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::FalseyValueParser;
use clap::{ArgAction, Args};

use super::values::{at_least_one, parse_positive_seconds, parse_seconds, parse_size};
use crate::supervisor::recycle::Recycle;
use crate::supervisor::reload::Watch;

#[derive(Args, Debug)]
pub(super) struct WorkerArgs {
    /// Worker processes, each a whole server, under a supervisor that binds the listener once.
    #[arg(long, env = "M0SERVE_WORKERS", value_name = "N", default_value_t = 1, value_parser = at_least_one)]
    pub(super) workers: usize,

    /// Write the supervisor's pid to this file (removed at exit).
    #[arg(long, env = "M0SERVE_PID_FILE", value_name = "PATH")]
    pub(super) pid_file: Option<PathBuf>,

    /// Seconds a ready worker's core threads or Python side (its GIL, its ASGI loop) may leave the supervisor's heartbeat unanswered before every Python thread's traceback is logged and the worker is killed and replaced; 0: off.
    #[arg(long, env = "M0SERVE_WORKER_TIMEOUT", value_name = "SECS", default_value = "30", value_parser = parse_seconds)]
    worker_timeout: Duration,
}

impl WorkerArgs {
    /// `--worker-timeout`, None when 0.
    pub(super) fn worker_timeout(&self) -> Option<Duration> {
        (!self.worker_timeout.is_zero()).then_some(self.worker_timeout)
    }
}

/// Each recycle starts the replacement, waits until it is ready, then
/// drains the old worker; one worker at a time.
#[derive(Args, Debug)]
pub(super) struct RecycleArgs {
    /// Recycle a worker after it has served N requests (plus its jitter).
    #[arg(long, env = "M0SERVE_WORKERS_MAX_REQUESTS", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    workers_max_requests: Option<u64>,

    /// Up to J requests more for each worker's --workers-max-requests, drawn per worker (alone: no effect).
    #[arg(
        long,
        env = "M0SERVE_WORKERS_MAX_REQUESTS_JITTER",
        value_name = "J",
        default_value_t = 0
    )]
    workers_max_requests_jitter: u64,

    /// Recycle a worker once it has run this many seconds (the first workers spread over it).
    #[arg(long, env = "M0SERVE_WORKERS_LIFETIME", value_name = "SECS", value_parser = parse_positive_seconds)]
    workers_lifetime: Option<Duration>,

    /// Recycle a worker whose resident memory is over this (MiB, or a size like 1G) in two samples a second apart (Linux).
    #[arg(long, env = "M0SERVE_WORKERS_MAX_RSS", value_name = "MIB", value_parser = mebibytes)]
    workers_max_rss: Option<u64>,
}

impl RecycleArgs {
    pub(super) fn recycle(&self) -> Recycle {
        Recycle {
            max_requests: self.workers_max_requests,
            max_requests_jitter: self.workers_max_requests_jitter,
            lifetime: self.workers_lifetime,
            max_rss: self.workers_max_rss,
        }
    }
}

/// Bytes: a bare number is MiB (`512`), a suffixed one a size (`1G`).
fn mebibytes(s: &str) -> Result<u64, String> {
    let bytes = match s.trim().parse::<u64>() {
        Ok(mib) => mib.checked_mul(1 << 20).ok_or("too large")?,
        Err(_) => parse_size(s)?,
    };
    if bytes == 0 {
        return Err("must be more than 0".into());
    }
    Ok(bytes)
}

/// Development: roll the workers when the app's files change.
#[derive(Args, Debug)]
pub(super) struct ReloadArgs {
    /// Roll the workers when a watched file changes (development).
    #[arg(long, env = "M0SERVE_RELOAD", value_parser = FalseyValueParser::new(), action = ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true")]
    reload: bool,

    /// With --reload: a directory to watch instead of the app's (repeatable; the variable holds one).
    #[arg(long = "reload-dir", env = "M0SERVE_RELOAD_DIR", value_name = "DIR")]
    reload_dirs: Vec<PathBuf>,

    /// With --reload: watch files matching this glob too, besides *.py (repeatable).
    #[arg(
        long = "reload-include",
        env = "M0SERVE_RELOAD_INCLUDE",
        value_name = "GLOB"
    )]
    reload_include: Vec<String>,

    /// With --reload: ignore files or directories matching this glob (repeatable; wins over includes).
    #[arg(
        long = "reload-exclude",
        env = "M0SERVE_RELOAD_EXCLUDE",
        value_name = "GLOB"
    )]
    reload_exclude: Vec<String>,
}

impl ReloadArgs {
    /// What to watch (None: no --reload); `app_dir` when no --reload-dir is given.
    pub(super) fn watch(self, app_dir: PathBuf) -> Result<Option<Watch>, String> {
        if !self.reload {
            return Ok(None);
        }
        let dirs = match self.reload_dirs {
            dirs if dirs.is_empty() => vec![app_dir],
            dirs => dirs,
        };
        let watch = Watch {
            dirs,
            include: self.reload_include,
            exclude: self.reload_exclude,
        };
        watch.check()?;
        Ok(Some(watch))
    }
}
