//! The command line: flags and `M0SERVE_*` variables, turned into
//! [`server::Options`](crate::server::Options).
//!
//! Every flag also reads `M0SERVE_<NAME>` (`--health-path` → `M0SERVE_HEALTH_PATH`);
//! a flag on the command line wins over its variable. A mistake is reported as
//! one line on stderr with exit status 2, not clap's usage block, so it reads
//! well in a container's log.
//!
//! The same parser serves both entry points: the pure-Rust binary ([`main`]),
//! which cannot load Python and refuses an `APP`, and the Python extension
//! (`m0serve._m0serve.main`), which requires one and serves it.

//!
//! Flags are grouped by concern, one clap `Args` struct per file, flattened
//! into [`Args`]: [`server`] (the process), [`http`] (protocol limits and
//! timeouts), [`http2`] (which HTTP, and HTTP/2's limits), [`routes`] (Rust-native routes), [`app`] (the Python application),
//! [`workers`] (the supervisor and its worker processes), [`proxy`] (running
//! behind a proxy), [`tls`] (certificates and client authentication).

mod app;
mod bind;
mod config_file;
mod files;
mod http;
mod http2;
mod log_bridge;
mod log_json;
mod log_prefix;
mod proxy;
mod routes;
mod server;
mod socket_activation;
#[cfg(test)]
mod tests;
mod tls;
mod values;
mod workers;

use std::ffi::OsString;
use std::io::IsTerminal;

use clap::{FromArgMatches, Parser};
use tracing_subscriber::EnvFilter;

use crate::app::spec::AppSpec;
use crate::server::{Config, Options};
use crate::supervisor::{Plan, Relaunch, Supervision};
use crate::tuning::Tuning;
pub use log_bridge::{open as bridge_logs, Line as BridgedLine};
pub use server::LogFormat;

#[cfg(test)]
use {
    crate::{backend::Choice, http::Limits, server::Listen},
    std::{path::PathBuf, time::Duration},
    values::parse_size,
};

/// m0serve: a thread-per-core HTTP/1.1 server on io_uring.
#[derive(Parser, Debug)]
#[command(name = "m0serve", version)]
struct Args {
    #[command(flatten)]
    server: server::ServerArgs,
    #[command(flatten)]
    routes: routes::RouteArgs,
    #[command(flatten)]
    http: http::HttpArgs,
    #[command(flatten)]
    http2: http2::Http2Args,
    #[command(flatten)]
    proxy: proxy::ProxyArgs,
    #[command(flatten)]
    tls: tls::TlsArgs,
    #[command(flatten)]
    app: app::AppArgs,
    #[command(flatten)]
    workers: workers::WorkerArgs,
    #[command(flatten)]
    recycle: workers::RecycleArgs,
    #[command(flatten)]
    reload: workers::ReloadArgs,
    #[command(flatten)]
    files: files::FileArgs,
}

/// A parsed command line: what to serve, and how much to log about it.
pub struct Invocation {
    pub options: Options,
    pub log_level: tracing::Level,
    pub log_format: LogFormat,
    /// The Python application named on the command line, if any.
    pub app: Option<AppSpec>,
    /// How many workers the supervisor runs, and its pid file.
    pub supervision: Supervision,
    /// The `--env-file`s' variables, set in a worker before the app's import.
    pub env: Vec<(String, String)>,
}

/// What the pure-Rust binary says when asked to serve a Python application.
pub const NO_PYTHON: &str =
    "this build has no Python support; install with pip (`pip install .`) and run its m0serve to serve APP";

/// Why the command line did not produce an [`Invocation`].
#[derive(Debug)]
pub enum CliError {
    /// `--help` or `--version`: print it as clap renders it, exit 0.
    Info(clap::Error),
    /// A bad flag, value or configuration, as one line (without `error: `): exit 2.
    Usage(String),
    /// `--print-config`: print it on stdout, exit 0.
    Print(String),
}

/// Which process this is: decided once, here, for both entry points.
#[allow(clippy::large_enum_variant)] // one value per process, moved once
pub enum Role {
    /// Started by a user: supervise the workers, each this program again
    /// (it never imports the application).
    Supervisor(Plan),
    /// Started by a supervisor: serve, with what it handed down in
    /// [`Options::inherited`], and the `--env-file`s' variables to set before
    /// the application's import (only a worker's: a supervisor's would
    /// outlive a SIGHUP that reads the files again).
    Worker(Options, Vec<(String, String)>),
}

/// Tell which process this is from the variables a supervisor sets, start
/// logging for it, and become it: a worker enters its supervisor's link, a
/// supervisor plans its workers, each started by `relaunch` (the pure
/// binary's own executable, the extension's interpreter). On failure, the
/// exit status, with the reason printed.
pub fn role(
    invocation: Invocation,
    relaunch: impl FnOnce() -> Result<Relaunch, String>,
) -> Result<(Role, Option<AppSpec>), i32> {
    let link =
        crate::supervisor::link::from_vars(take_var).map_err(|e| CliError::Usage(e).report())?;
    let Invocation {
        mut options,
        log_level,
        log_format,
        app,
        supervision,
        env,
    } = invocation;
    let role = match link {
        Some(link) => {
            init_logging(log_level, log_format, Some(link.number));
            link.enter(&mut options);
            Role::Worker(options, env)
        }
        None => {
            init_logging(log_level, log_format, None);
            let relaunch = relaunch().map_err(|e| {
                eprintln!("m0serve: error: {e}");
                1
            })?;
            Role::Supervisor(Plan::new(&options, &supervision, relaunch))
        }
    };
    Ok((role, app))
}

/// A variable's value, removed from the environment.
fn take_var(name: &str) -> Option<String> {
    let value = std::env::var(name).ok()?;
    std::env::remove_var(name);
    Some(value)
}

/// Run the command line `args` (the program name first) in the pure-Rust
/// binary; returns the exit status. An `APP` is refused: there is no Python here.
pub fn main(args: impl IntoIterator<Item = OsString>) -> i32 {
    let args: Vec<OsString> = args.into_iter().collect();
    let invocation = match parse(args.clone()) {
        Ok(invocation) => invocation,
        Err(e) => return e.report(),
    };
    if invocation.app.is_some() {
        return CliError::Usage(NO_PYTHON.into()).report();
    }
    let relaunch = || match std::env::current_exe() {
        Ok(program) => Ok(Relaunch {
            program,
            args: args.into_iter().skip(1).collect(),
        }),
        Err(e) => Err(format!("finding this executable to start workers: {e}")),
    };
    match role(invocation, relaunch) {
        Ok((Role::Worker(options, _), _)) => serve(options),
        Ok((Role::Supervisor(plan), _)) => crate::supervisor::run(plan),
        Err(status) => status,
    }
}

impl CliError {
    /// Print it (help and version on stdout, a mistake as one stderr line)
    /// and return the exit status: 0 or 2.
    pub fn report(self) -> i32 {
        match self {
            CliError::Info(info) => {
                // A closed stdout (`m0serve --help | head -0`) is not worth a panic.
                let _ = info.print();
                0
            }
            CliError::Usage(message) => {
                eprintln!("m0serve: error: {message}");
                2
            }
            CliError::Print(text) => {
                print!("{text}");
                0
            }
        }
    }
}

/// Run the server until it stops; returns the exit status (1 when it could not
/// start, with the reason on stderr).
pub fn serve(options: Options) -> i32 {
    match crate::server::run(options) {
        Ok(status) => status,
        Err(e) => {
            eprintln!("m0serve: error: {e}");
            1
        }
    }
}

/// Parse `args` (the program name first) and the `M0SERVE_*` variables, and
/// check the router configuration; starts nothing.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Invocation, CliError> {
    parse_as(args, None)
}

/// As [`parse`], for an application object the caller holds (the Python
/// API's), named `name` in messages: an `APP` is refused, and the
/// invocation's [`AppSpec`] is the object's.
pub fn parse_for_object(
    args: impl IntoIterator<Item = OsString>,
    name: &str,
) -> Result<Invocation, CliError> {
    parse_as(args, Some(name))
}

fn parse_as(
    args: impl IntoIterator<Item = OsString>,
    object: Option<&str>,
) -> Result<Invocation, CliError> {
    let (matches, from_file) = files::matches(args.into_iter().collect())?;
    let Args {
        server,
        routes,
        http,
        http2: versions,
        proxy,
        tls,
        app,
        workers,
        recycle,
        reload,
        files,
    } = Args::from_arg_matches(&matches).map_err(clap_error)?;
    if files.print_config {
        return Err(CliError::Print(files::describe(&matches, &from_file)));
    }
    let env = files.env()?;
    let reload = reload.watch(app.dir()).map_err(CliError::Usage)?;
    let backend = server.backend()?;
    let router = routes.router()?;
    let app = match object {
        None => app.spec()?,
        Some(name) => Some(app.spec_of_object(name.to_string())?),
    };
    let proxy = proxy.proxy(proxy::uvicorn_env())?;
    let tls = tls.settings()?;
    let tuning = Tuning::from_env().map_err(CliError::Usage)?;
    let config = Config {
        listen: server.listen()?,
        socket: server.socket()?,
        cores: server.cores,
        backend,
        limits: http.limits(),
        header_read_timeout: http.header_read_timeout,
        keep_alive_timeout: http.keep_alive_timeout,
        max_connections: server.max_connections,
        graceful_timeout: server.graceful_timeout,
        stream_drain_timeout: server.stream_drain_timeout()?,
        router,
        access_log: server.access_log(),
        ws: http.ws(),
        ws_max_message: http.ws_max_message(),
        response_defaults: http.response_defaults(),
        ws_keepalive: http.ws_keepalive(),
        ws_deflate: http.ws_deflate(),
        body_buffer: http.body_buffer(),
        body_read_timeout: http.body_read_timeout,
        send_timeout: http.send_timeout,
        request_timeout: http.request_timeout,
        proxy,
        tls,
        http: versions.http,
        http2: versions.settings(),
    };
    Ok(Invocation {
        options: Options::new(config, tuning),
        log_level: server.log_level.into(),
        log_format: server.log_format,
        app,
        supervision: Supervision {
            worker_timeout: workers.worker_timeout(),
            workers: workers.workers,
            pid_file: workers.pid_file,
            recycle: recycle.recycle(),
            reload,
            shutdown_delay: server.shutdown_delay,
            metrics_address: server.metrics_address,
            // Taken, so neither the workers nor the app speak for us.
            systemd: crate::supervisor::notify::Systemd::from_vars(
                take_var("NOTIFY_SOCKET"),
                take_var("WATCHDOG_USEC"),
                take_var("WATCHDOG_PID"),
            ),
        },
        env,
    })
}

/// How a long flag takes its value, for callers that build a command line
/// from names and values (the Python API's keywords).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagKind {
    /// Present or absent (`--no-ws`).
    Switch,
    /// On or off, `--name=true|false` (`--access-log`, `--ws`).
    Toggle,
    /// One value (`--port=8000`).
    Value,
    /// Repeatable, one value each time (`--header`).
    List,
}

/// Every long flag but `--help` and `--version`, with how it takes its value.
pub fn flags() -> Vec<(String, FlagKind)> {
    use clap::{ArgAction, CommandFactory};
    Args::command()
        .get_arguments()
        .filter_map(|arg| {
            let name = arg.get_long()?;
            let kind = match arg.get_action() {
                ArgAction::Help | ArgAction::Version => return None,
                ArgAction::SetTrue | ArgAction::SetFalse => FlagKind::Switch,
                ArgAction::Append => FlagKind::List,
                _ if arg.get_num_args().is_some_and(|n| n.min_values() == 0) => FlagKind::Toggle,
                _ => FlagKind::Value,
            };
            Some((name.to_string(), kind))
        })
        .collect()
}

/// Help and version pass through; an error keeps only its first line, which
/// names the flag and the problem (the rest is usage and tips).
fn clap_error(e: clap::Error) -> CliError {
    if !e.use_stderr() {
        return CliError::Info(e);
    }
    let rendered = e.render().to_string();
    let first = rendered.lines().next().unwrap_or("invalid command line");
    CliError::Usage(first.strip_prefix("error: ").unwrap_or(first).to_string())
}

/// Log to stderr at `level`, or as `RUST_LOG` says when it is set, in
/// `format`. Colours only on a terminal, so log files stay free of escape
/// codes. A worker's lines say `worker=N` (its supervisor and siblings share
/// the stream). A second call (tests, embedding) leaves the first subscriber
/// in place.
pub fn init_logging(level: tracing::Level, format: LogFormat, worker: Option<usize>) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let filter = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| EnvFilter::new(level.as_str()));
    // A logger Python's logging took over is written by its handlers. Each
    // layer carries the filter's level hint, so the subscriber has one (see
    // `log_bridge::Bridge`).
    let hint = filter.max_level_hint();
    let to_stderr = tracing_subscriber::filter::filter_fn(|meta| !log_bridge::takes(meta.target()))
        .with_max_level_hint(hint.unwrap_or(tracing_subscriber::filter::LevelFilter::TRACE));
    let stderr = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let stderr = match format {
        LogFormat::Text => stderr
            .with_ansi(std::io::stderr().is_terminal())
            .event_format(log_prefix::Prefixed::new(worker))
            .with_filter(to_stderr)
            .boxed(),
        LogFormat::Json => stderr
            .with_ansi(false)
            .event_format(log_json::JsonLines { worker })
            .with_filter(to_stderr)
            .boxed(),
    };
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(stderr)
        .with(log_bridge::Bridge { hint })
        .try_init();
}
