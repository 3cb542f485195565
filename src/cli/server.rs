//! Flags of the server process: where it listens, its cores and backend,
//! connection count, shutdown and logging.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::FalseyValueParser;
use clap::{ArgAction, Args, ValueEnum};

use super::values::{at_least_one, parse_mode, parse_seconds};
use super::CliError;
use crate::backend::Choice;
use crate::server::access_log::{format, Format};
use crate::server::listener::{Setup, BACKLOG};
use crate::server::Listen;

#[derive(Args, Debug)]
pub(super) struct ServerArgs {
    /// Listen here: HOST:PORT, [::]:PORT, unix:PATH or fd://N; repeatable, every worker serves each (a comma separates several in one value); replaces --host/--port/--uds/--fd, which it may not be given with.
    #[arg(long, short = 'b', env = "M0SERVE_BIND", value_name = "ADDRESS", value_parser = super::bind::parse,
          action = ArgAction::Append, value_delimiter = ',', conflicts_with_all = ["host", "port", "uds", "fd"])]
    bind: Vec<Listen>,

    /// Address to listen on.
    #[arg(long, env = "M0SERVE_HOST", default_value = "127.0.0.1")]
    host: String,

    /// TCP port to listen on; 0 picks any free port.
    #[arg(long, env = "M0SERVE_PORT", default_value_t = 8000)]
    port: u16,

    /// Listen on this Unix domain socket instead (--host and --port are then unused).
    #[arg(long, env = "M0SERVE_UDS", value_name = "PATH")]
    uds: Option<PathBuf>,

    /// Serve on the listening socket the parent process left open at this descriptor (instead of --host/--port/--uds).
    #[arg(long, env = "M0SERVE_FD", value_name = "N", value_parser = clap::value_parser!(i32).range(0..), conflicts_with_all = ["uds", "host", "port", "backlog"])]
    fd: Option<i32>,

    /// Mode of the --uds (or --bind unix:) socket files, in octal (660, 0o660), set before it listens [default: the umask's].
    #[arg(long, env = "M0SERVE_UDS_PERMISSIONS", value_name = "MODE", value_parser = parse_mode)]
    uds_permissions: Option<u32>,

    /// Listen backlog: connections the kernel queues before they are accepted (capped at net.core.somaxconn).
    #[arg(long, env = "M0SERVE_BACKLOG", value_name = "N", default_value_t = BACKLOG, value_parser = clap::value_parser!(i32).range(1..=65535))]
    backlog: i32,

    /// Core threads, each pinned to one CPU [default: every CPU the process may run on, fewer under a cgroup CPU quota].
    #[arg(long, env = "M0SERVE_CORES", value_name = "N", value_parser = at_least_one)]
    pub(super) cores: Option<usize>,

    /// I/O backend; auto falls back to portable where io_uring is refused [default: auto].
    #[arg(long, env = "M0SERVE_BACKEND", value_enum)]
    backend: Option<BackendArg>,

    /// Shorthand for --backend uring.
    #[arg(long, env = "M0SERVE_URING", value_parser = FalseyValueParser::new(), action = ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true")]
    uring: bool,

    /// Open connections at most; more wait in the listen backlog.
    #[arg(long, env = "M0SERVE_MAX_CONNECTIONS", value_name = "N", default_value = "10000", value_parser = at_least_one)]
    pub(super) max_connections: usize,

    /// Seconds shutdown waits for requests in flight.
    #[arg(long, env = "M0SERVE_GRACEFUL_TIMEOUT", value_name = "SECONDS", default_value = "30", value_parser = parse_seconds)]
    pub(super) graceful_timeout: Duration,

    /// Seconds into the drain that an answer still streaming (ASGI: receive() says http.disconnect) and a WebSocket (Close 1001) are told to end; 0 tells them as the drain begins [default: the graceful timeout less one second].
    #[arg(long, env = "M0SERVE_STREAM_DRAIN_TIMEOUT", value_name = "SECONDS", value_parser = parse_seconds)]
    stream_drain_timeout: Option<Duration>,

    /// Seconds after SIGTERM/SIGINT that readiness answers 503 while serving on as usual, before the drain (and --graceful-timeout) begins; the signal again drains at once.
    #[arg(long, env = "M0SERVE_SHUTDOWN_DELAY", value_name = "SECONDS", default_value = "0", value_parser = parse_seconds)]
    pub(super) shutdown_delay: Duration,

    /// Log level (RUST_LOG, when set, overrides it).
    #[arg(long, env = "M0SERVE_LOG_LEVEL", value_enum, default_value_t = LogLevel::Info)]
    pub(super) log_level: LogLevel,

    /// The server's log lines: text, or json (one object a line: time, level, logger, worker, message; an access line keeps the fields --access-log-format json gives it).
    #[arg(long, env = "M0SERVE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub(super) log_format: LogFormat,

    /// Serve Prometheus metrics of every worker on this HOST:PORT (its own listener, answered by the supervisor) [default: off].
    #[arg(long, env = "M0SERVE_METRICS_ADDRESS", value_name = "HOST:PORT", value_parser = parse_metrics_address)]
    pub(super) metrics_address: Option<String>,

    /// Log each request in the common log format (or the --access-log-format).
    #[arg(long, env = "M0SERVE_ACCESS_LOG", value_parser = FalseyValueParser::new(), action = ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true")]
    access_log: bool,

    /// The access log's line: gunicorn's atoms (%(h)s %(t)s "%(r)s" %(s)s %(D)s %({name}i)s ...) or json; turns the access log on.
    #[arg(long, env = "M0SERVE_ACCESS_LOG_FORMAT", value_name = "FORMAT", value_parser = Format::parse)]
    access_log_format: Option<Format>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum BackendArg {
    Auto,
    Uring,
    Portable,
}

/// How the server's log lines are written.
#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl From<LogLevel> for tracing::Level {
    fn from(level: LogLevel) -> Self {
        match level {
            LogLevel::Error => tracing::Level::ERROR,
            LogLevel::Warn => tracing::Level::WARN,
            LogLevel::Info => tracing::Level::INFO,
            LogLevel::Debug => tracing::Level::DEBUG,
            LogLevel::Trace => tracing::Level::TRACE,
        }
    }
}

impl ServerArgs {
    /// The backend asked for: `--uring` and `--backend` must agree.
    pub(super) fn backend(&self) -> Result<Choice, CliError> {
        Ok(match (self.backend, self.uring) {
            (None, false) => Choice::Auto,
            (None | Some(BackendArg::Uring), true) => Choice::Uring,
            (Some(other), true) => {
                let name = other
                    .to_possible_value()
                    .map(|v| v.get_name().to_owned())
                    .unwrap_or_default();
                return Err(CliError::Usage(format!(
                    "--uring conflicts with --backend {name} (--uring means --backend uring)"
                )));
            }
            (Some(BackendArg::Auto), false) => Choice::Auto,
            (Some(BackendArg::Uring), false) => Choice::Uring,
            (Some(BackendArg::Portable), false) => Choice::Portable,
        })
    }

    /// Where to listen: the sockets systemd's activation passed (which
    /// replace the address flags, `--bind` too; with `--fd` or a `--bind
    /// fd://N`, it is an error), else every `--bind`, else `--fd`, else the
    /// Unix socket when given, else host and port.
    pub(super) fn listen(&self) -> Result<Vec<Listen>, CliError> {
        let activated = super::socket_activation::take().map_err(CliError::Usage)?;
        if !activated.is_empty() {
            let fd_flag =
                self.fd.is_some() || self.bind.iter().any(|b| matches!(b, Listen::Fd { .. }));
            if fd_flag {
                return Err(CliError::Usage(
                    "--fd conflicts with systemd's socket activation (LISTEN_FDS)".into(),
                ));
            }
            return Ok(activated
                .into_iter()
                .map(|fd| Listen::Fd { fd, systemd: true })
                .collect());
        }
        if !self.bind.is_empty() {
            return Ok(self.bind.clone());
        }
        Ok(vec![match (self.fd, &self.uds) {
            (Some(fd), _) => Listen::Fd { fd, systemd: false },
            (None, Some(path)) => Listen::Unix(path.clone()),
            (None, None) => Listen::Tcp {
                host: self.host.clone(),
                port: self.port,
            },
        }])
    }

    /// How far into the drain streams are told to end: the flag, else a
    /// second before the graceful timeout (time for them to end cleanly).
    /// One past the graceful timeout would never come: refused.
    pub(super) fn stream_drain_timeout(&self) -> Result<Duration, CliError> {
        let graceful = self.graceful_timeout;
        match self.stream_drain_timeout {
            None => Ok(graceful.saturating_sub(Duration::from_secs(1))),
            Some(after) if after > graceful => Err(CliError::Usage(format!(
                "--stream-drain-timeout ({}s) is past --graceful-timeout ({}s): streams would be cut before they are told",
                after.as_secs_f64(),
                graceful.as_secs_f64()
            ))),
            Some(after) => Ok(after),
        }
    }

    /// The access log's format: on with `--access-log` (the default line)
    /// or with a `--access-log-format` (a format given for a log left off
    /// would be a silent mistake).
    pub(super) fn access_log(&self) -> Option<Format> {
        match &self.access_log_format {
            Some(format) => Some(format.clone()),
            None if self.access_log => {
                Some(Format::parse(format::DEFAULT).expect("the default format parses"))
            }
            None => None,
        }
    }

    /// How a listener bound here is set up. (Checked here rather than by
    /// clap's `requires`, whose message names the missing flag on a second
    /// line, which the one-line error drops.)
    pub(super) fn socket(&self) -> Result<Setup, CliError> {
        let unix_bind = self.bind.iter().any(|b| matches!(b, Listen::Unix(_)));
        if self.uds_permissions.is_some() && self.uds.is_none() && !unix_bind {
            return Err(CliError::Usage(
                "--uds-permissions needs --uds or a --bind unix:PATH (the socket file it applies to)"
                    .into(),
            ));
        }
        Ok(Setup {
            backlog: self.backlog,
            uds_mode: self.uds_permissions,
        })
    }
}

/// `HOST:PORT` with a port (a name is resolved when it is bound).
fn parse_metrics_address(value: &str) -> Result<String, String> {
    let (host, port) = value
        .rsplit_once(':')
        .ok_or_else(|| format!("{value:?} is not HOST:PORT"))?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(format!("{value:?} is not HOST:PORT"));
    }
    Ok(value.to_string())
}
