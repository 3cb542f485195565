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

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::FalseyValueParser;
use clap::{ArgAction, Parser, ValueEnum};
use tracing_subscriber::EnvFilter;

use crate::backend::Choice;
use crate::http::Limits;
use crate::routes::Router;
use crate::server::{self, Listen, Options};

/// m0serve: a thread-per-core HTTP/1.1 server on io_uring.
#[derive(Parser, Debug)]
#[command(name = "m0serve", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, env = "M0SERVE_HOST", default_value = "127.0.0.1")]
    host: String,

    /// TCP port to listen on; 0 picks any free port.
    #[arg(long, env = "M0SERVE_PORT", default_value_t = 8000)]
    port: u16,

    /// Listen on this Unix domain socket instead (--host and --port are then unused).
    #[arg(long, env = "M0SERVE_UDS", value_name = "PATH")]
    uds: Option<PathBuf>,

    /// Core threads, each pinned to one CPU [default: every CPU the process may run on, fewer under a cgroup CPU quota].
    #[arg(long, env = "M0SERVE_CORES", value_name = "N", value_parser = at_least_one)]
    cores: Option<usize>,

    /// I/O backend; auto falls back to portable where io_uring is refused [default: auto].
    #[arg(long, env = "M0SERVE_BACKEND", value_enum)]
    backend: Option<BackendArg>,

    /// Shorthand for --backend uring.
    #[arg(long, env = "M0SERVE_URING", value_parser = FalseyValueParser::new())]
    uring: bool,

    /// Answer GET/HEAD on this path with 200 "OK", without the application.
    #[arg(long, env = "M0SERVE_HEALTH_PATH", value_name = "PATH")]
    health_path: Option<String>,

    /// URL prefix of a static mount; pairs, in order, with --static-path-mount (repeatable).
    #[arg(long, env = "M0SERVE_STATIC_PATH_ROUTE", value_name = "ROUTE")]
    static_path_route: Vec<String>,

    /// Directory served under the matching --static-path-route (repeatable).
    #[arg(long, env = "M0SERVE_STATIC_PATH_MOUNT", value_name = "DIR")]
    static_path_mount: Vec<PathBuf>,

    /// Largest request body, in bytes or with a K, M, G or T suffix (powers of 1024).
    #[arg(long, env = "M0SERVE_MAX_BODY_SIZE", value_name = "SIZE", default_value = "1G", value_parser = parse_size)]
    max_body_size: u64,

    /// Seconds a client has to send a complete request head.
    #[arg(long, env = "M0SERVE_HEADER_READ_TIMEOUT", value_name = "SECONDS", default_value = "10", value_parser = parse_seconds)]
    header_read_timeout: Duration,

    /// Seconds an idle keep-alive connection is kept open.
    #[arg(long, env = "M0SERVE_KEEP_ALIVE_TIMEOUT", value_name = "SECONDS", default_value = "5", value_parser = parse_seconds)]
    keep_alive_timeout: Duration,

    /// Open connections at most; more wait in the listen backlog.
    #[arg(long, env = "M0SERVE_MAX_CONNECTIONS", value_name = "N", default_value = "10000", value_parser = at_least_one)]
    max_connections: usize,

    /// Seconds shutdown waits for requests in flight.
    #[arg(long, env = "M0SERVE_GRACEFUL_TIMEOUT", value_name = "SECONDS", default_value = "30", value_parser = parse_seconds)]
    graceful_timeout: Duration,

    /// Log level (RUST_LOG, when set, overrides it).
    #[arg(long, env = "M0SERVE_LOG_LEVEL", value_enum, default_value_t = LogLevel::Info)]
    log_level: LogLevel,

    /// Log each request in the common log format.
    #[arg(long, env = "M0SERVE_ACCESS_LOG", value_parser = FalseyValueParser::new())]
    access_log: bool,

    /// Serve WebSocket upgrades (to an app that takes them; --no-ws: they
    /// reach the app as plain HTTP) [default: on].
    #[arg(long, env = "M0SERVE_WS", value_parser = FalseyValueParser::new(), action = ArgAction::Set,
          num_args = 0..=1, default_value = "true", default_missing_value = "true",
          overrides_with = "no_ws")]
    ws: bool,

    /// Turn WebSocket support off (see --ws).
    #[arg(long, overrides_with = "ws")]
    no_ws: bool,

    /// Largest WebSocket message, in bytes or with a K, M, G or T suffix (powers of 1024).
    #[arg(long, env = "M0SERVE_WS_MAX_MESSAGE_SIZE", value_name = "SIZE", default_value = "16M", value_parser = parse_size)]
    ws_max_message_size: u64,

    /// The application to serve, as module:attribute (dotted attributes allowed), e.g. app:app.
    #[arg(env = "M0SERVE_APP", value_name = "APP")]
    app: Option<String>,

    /// The application's interface.
    #[arg(long, env = "M0SERVE_INTERFACE", value_enum, default_value_t = Interface::Wsgi)]
    interface: Interface,

    /// ASGI: the event loop; auto is uvloop when it is installed, else asyncio.
    #[arg(long = "loop", env = "M0SERVE_LOOP", value_enum, default_value_t = EventLoop::Auto)]
    event_loop: EventLoop,

    /// ASGI: the lifespan protocol; auto tolerates apps that do not support it.
    #[arg(long, env = "M0SERVE_LIFESPAN", value_enum, default_value_t = Lifespan::Auto)]
    lifespan: Lifespan,

    /// APP names a factory: call it (no arguments) to get the application.
    #[arg(long, env = "M0SERVE_FACTORY", value_parser = FalseyValueParser::new())]
    factory: bool,

    /// Directory put first on sys.path before APP is imported (relative to --working-dir).
    #[arg(long, env = "M0SERVE_APP_DIR", value_name = "DIR", default_value = ".")]
    app_dir: PathBuf,

    /// Change to this directory before importing APP.
    #[arg(long, env = "M0SERVE_WORKING_DIR", value_name = "DIR")]
    working_dir: Option<PathBuf>,

    /// Python threads running the application; 0 runs it on the core thread (loop-only).
    #[arg(
        long,
        env = "M0SERVE_BLOCKING_THREADS",
        value_name = "N",
        default_value_t = 1
    )]
    blocking_threads: usize,

    /// Requests waiting for a Python thread (ASGI: in flight on the event loop) before cores stop reading [default: 128 per thread].
    #[arg(long, env = "M0SERVE_BACKPRESSURE", value_name = "N", value_parser = at_least_one)]
    backpressure: Option<usize>,

    /// The URL prefix the application is mounted at (its SCRIPT_NAME), e.g. /api.
    #[arg(
        long,
        env = "M0SERVE_ROOT_PATH",
        value_name = "PATH",
        default_value = ""
    )]
    root_path: String,
}

/// The interface the application speaks.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interface {
    Wsgi,
    Asgi,
}

/// The asyncio event loop an ASGI application runs on (`--loop`).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventLoop {
    Auto,
    Asyncio,
    Uvloop,
}

/// Whether to run the ASGI lifespan protocol (`--lifespan`), as uvicorn has it:
/// `auto` runs it but carries on when the app does not support it, `on`
/// requires it, `off` skips it.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifespan {
    Auto,
    On,
    Off,
}

impl EventLoop {
    /// The name `m0serve._asgi` takes.
    pub fn name(self) -> &'static str {
        match self {
            EventLoop::Auto => "auto",
            EventLoop::Asyncio => "asyncio",
            EventLoop::Uvloop => "uvloop",
        }
    }
}

impl Lifespan {
    /// The name `m0serve._asgi` takes.
    pub fn name(self) -> &'static str {
        match self {
            Lifespan::Auto => "auto",
            Lifespan::On => "on",
            Lifespan::Off => "off",
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum BackendArg {
    Auto,
    Uring,
    Portable,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum LogLevel {
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

/// A parsed command line: what to serve, and how much to log about it.
pub struct Invocation {
    pub options: Options,
    pub log_level: tracing::Level,
    /// The Python application named on the command line, if any.
    pub app: Option<AppSpec>,
}

/// A Python application to load and how to run it: everything the Python entry
/// needs beyond [`Options`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppSpec {
    /// `module:attr` as given, for messages.
    pub target: String,
    /// The module to import (dotted).
    pub module: String,
    /// The attribute path inside it, split at the dots.
    pub attrs: Vec<String>,
    /// Call the object to get the application.
    pub factory: bool,
    /// Prepended to `sys.path` (a relative one is taken from `working_dir`).
    pub app_dir: PathBuf,
    /// `chdir` here before importing.
    pub working_dir: Option<PathBuf>,
    /// Pool threads; 0 is the loop-only shape.
    pub blocking_threads: usize,
    /// Requests that may wait for a pool thread.
    pub backpressure: usize,
    /// SCRIPT_NAME: empty, or a path starting with `/` and not ending with one.
    pub root_path: String,
    /// WSGI (on the pool) or ASGI (on the executor).
    pub interface: Interface,
    /// ASGI: the event loop.
    pub event_loop: EventLoop,
    /// ASGI: the lifespan protocol.
    pub lifespan: Lifespan,
}

/// Requests queued per pool thread when `--backpressure` is not given: deep
/// enough to ride out a burst, shallow enough that a stuck app stops reading soon.
pub const BACKPRESSURE_PER_THREAD: usize = 128;

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
}

/// Run the command line `args` (the program name first) in the pure-Rust
/// binary; returns the exit status. An `APP` is refused: there is no Python here.
pub fn main(args: impl IntoIterator<Item = OsString>) -> i32 {
    let invocation = match parse(args) {
        Ok(invocation) => invocation,
        Err(e) => return e.report(),
    };
    if invocation.app.is_some() {
        return CliError::Usage(NO_PYTHON.into()).report();
    }
    init_logging(invocation.log_level);
    serve(invocation.options)
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
        }
    }
}

/// Run the server until it stops; returns the exit status (1 when it could not
/// start, with the reason on stderr).
pub fn serve(options: Options) -> i32 {
    match server::run(options) {
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
    let args = Args::try_parse_from(args).map_err(clap_error)?;
    let backend = match (args.backend, args.uring) {
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
    };
    let (routes, dirs) = (args.static_path_route, args.static_path_mount);
    if routes.len() != dirs.len() {
        return Err(CliError::Usage(format!(
            "--static-path-route is given {} time(s) but --static-path-mount {} time(s); they pair in order",
            routes.len(),
            dirs.len()
        )));
    }
    let router = Router::new(args.health_path, routes.into_iter().zip(dirs).collect())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let listen = match args.uds {
        Some(path) => Listen::Unix(path),
        None => Listen::Tcp {
            host: args.host,
            port: args.port,
        },
    };
    let app = match args.app {
        None => None,
        Some(target) => Some(AppSpec {
            interface: args.interface,
            event_loop: args.event_loop,
            lifespan: args.lifespan,
            ..app_spec(
                target,
                args.factory,
                args.app_dir,
                args.working_dir,
                args.blocking_threads,
                args.backpressure,
                args.root_path,
            )?
        }),
    };
    let options = Options {
        listen,
        cores: args.cores,
        backend,
        limits: Limits {
            max_body: args.max_body_size,
            ..Limits::default()
        },
        header_read_timeout: args.header_read_timeout,
        keep_alive_timeout: args.keep_alive_timeout,
        max_connections: args.max_connections,
        graceful_timeout: args.graceful_timeout,
        router,
        access_log: args.access_log,
        app: None,
        ws: args.ws && !args.no_ws,
        ws_max_message: usize::try_from(args.ws_max_message_size).unwrap_or(usize::MAX),
    };
    Ok(Invocation {
        options,
        log_level: args.log_level.into(),
        app,
    })
}

/// Check and assemble the application flags.
fn app_spec(
    target: String,
    factory: bool,
    app_dir: PathBuf,
    working_dir: Option<PathBuf>,
    blocking_threads: usize,
    backpressure: Option<usize>,
    root_path: String,
) -> Result<AppSpec, CliError> {
    let (module, attrs) = split_target(&target).map_err(CliError::Usage)?;
    Ok(AppSpec {
        module,
        attrs,
        factory,
        app_dir,
        working_dir,
        blocking_threads,
        backpressure: backpressure.unwrap_or(BACKPRESSURE_PER_THREAD * blocking_threads.max(1)),
        root_path: root_path_of(&root_path).map_err(CliError::Usage)?,
        target,
        interface: Interface::Wsgi,
        event_loop: EventLoop::Auto,
        lifespan: Lifespan::Auto,
    })
}

/// `pkg.module:attr.sub` → (`pkg.module`, [`attr`, `sub`]).
fn split_target(target: &str) -> Result<(String, Vec<String>), String> {
    let bad = || {
        format!("APP '{target}' is not module:attribute (e.g. app:app or mysite.wsgi:application)")
    };
    let (module, attr) = target.split_once(':').ok_or_else(bad)?;
    let dotted_names = |s: &str| {
        s.split('.').all(|part| {
            let mut chars = part.chars();
            chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
                && chars.all(|c| c == '_' || c.is_alphanumeric())
        })
    };
    if !dotted_names(module) || !dotted_names(attr) {
        return Err(bad());
    }
    Ok((
        module.to_string(),
        attr.split('.').map(str::to_string).collect(),
    ))
}

/// `--root-path`: empty, or `/prefix` (a trailing `/` dropped, so `/` is empty).
fn root_path_of(path: &str) -> Result<String, String> {
    let trimmed = path.trim_end_matches('/');
    if !path.is_empty() && !path.starts_with('/') {
        return Err(format!("--root-path '{path}' must start with '/'"));
    }
    Ok(trimmed.to_string())
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

/// Log to stderr at `level`, or as `RUST_LOG` says when it is set. Colours
/// only on a terminal, so log files stay free of escape codes. A second call
/// (tests, embedding) leaves the first subscriber in place.
pub fn init_logging(level: tracing::Level) {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| EnvFilter::new(level.as_str()));
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(filter)
        .try_init();
}

/// A count that must be at least 1 (`--cores`, `--max-connections`).
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// Seconds as a non-negative decimal (`10`, `0.5`).
fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .trim()
        .parse()
        .map_err(|_| "expected a number of seconds, e.g. 10 or 0.5")?;
    Duration::try_from_secs_f64(secs)
        .map_err(|_| "expected a non-negative, finite number of seconds".into())
}

/// Bytes, optionally with a binary suffix: `512`, `64K`, `10M`, `1G`, `1GiB`.
fn parse_size(s: &str) -> Result<u64, String> {
    const FORMS: &str =
        "expected bytes, optionally with a K, M, G or T suffix, e.g. 1048576, 512K, 10M, 1G";
    let s = s.trim();
    let (number, suffix) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let number: u64 = number.parse().map_err(|_| FORMS)?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        "t" | "tib" => 40,
        _ => return Err(FORMS.into()),
    };
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| "too large".into())
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::http::{BodyKind, RequestHead, Version};

    /// Parsing reads the process environment, which tests share: one at a time.
    static ENV: Mutex<()> = Mutex::new(());

    /// Run `f` with exactly the `M0SERVE_*` variables in `env` set.
    fn with_env<T>(env: &[(&str, &str)], f: impl FnOnce() -> T) -> T {
        let _guard = ENV.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let clear = || {
            for (name, _) in std::env::vars_os() {
                if name.to_string_lossy().starts_with("M0SERVE_") {
                    std::env::remove_var(name);
                }
            }
        };
        clear();
        for (name, value) in env {
            std::env::set_var(name, value);
        }
        let out = f();
        clear();
        out
    }

    fn os_args(args: &[&str]) -> Vec<OsString> {
        std::iter::once("m0serve")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect()
    }

    fn parse_env(args: &[&str], env: &[(&str, &str)]) -> Result<Invocation, CliError> {
        with_env(env, || parse(os_args(args)))
    }

    fn ok(args: &[&str]) -> Invocation {
        match parse_env(args, &[]) {
            Ok(invocation) => invocation,
            Err(e) => panic!("{args:?}: {e:?}"),
        }
    }

    /// The one-line message for a bad command line.
    fn usage(args: &[&str]) -> String {
        match parse_env(args, &[]) {
            Err(CliError::Usage(message)) => message,
            Err(CliError::Info(e)) => panic!("{args:?}: not a usage error: {e:?}"),
            Ok(_) => panic!("{args:?}: parsed"),
        }
    }

    fn get(path: &str) -> RequestHead {
        RequestHead {
            method: "GET".into(),
            target: path.into(),
            version: Version::Http11,
            headers: vec![],
            body: BodyKind::Empty,
            keep_alive: true,
            expect_continue: false,
        }
    }

    #[test]
    fn defaults() {
        let Invocation {
            options,
            log_level,
            app,
        } = ok(&[]);
        assert!(app.is_none());
        assert!(
            matches!(options.listen, Listen::Tcp { ref host, port: 8000 } if host == "127.0.0.1")
        );
        assert_eq!(options.cores, None);
        assert_eq!(options.backend, Choice::Auto);
        assert_eq!(options.limits.max_body, 1 << 30);
        assert_eq!(options.limits.max_head, Limits::default().max_head);
        assert_eq!(options.header_read_timeout, Duration::from_secs(10));
        assert_eq!(options.keep_alive_timeout, Duration::from_secs(5));
        assert_eq!(options.graceful_timeout, Duration::from_secs(30));
        assert_eq!(options.max_connections, 10_000);
        assert!(!options.access_log);
        assert_eq!(log_level, tracing::Level::INFO);
        assert!(options.router.route(&get("/healthz")).is_none());
    }

    #[test]
    fn flags() {
        let Invocation {
            options, log_level, ..
        } = ok(&[
            "--host=0.0.0.0",
            "--port=0",
            "--cores=3",
            "--backend=portable",
            "--health-path=/healthz",
            "--max-body-size=10M",
            "--header-read-timeout=0.25",
            "--keep-alive-timeout=1",
            "--max-connections=7",
            "--graceful-timeout=2.5",
            "--log-level=trace",
            "--access-log",
        ]);
        assert!(matches!(options.listen, Listen::Tcp { ref host, port: 0 } if host == "0.0.0.0"));
        assert_eq!(options.cores, Some(3));
        assert_eq!(options.backend, Choice::Portable);
        assert_eq!(options.limits.max_body, 10 << 20);
        assert_eq!(options.header_read_timeout, Duration::from_millis(250));
        assert_eq!(options.keep_alive_timeout, Duration::from_secs(1));
        assert_eq!(options.max_connections, 7);
        assert_eq!(options.graceful_timeout, Duration::from_millis(2500));
        assert!(options.access_log);
        assert_eq!(log_level, tracing::Level::TRACE);
        assert_eq!(
            options.router.route(&get("/healthz")).map(|r| r.status),
            Some(200)
        );
    }

    #[test]
    fn uds_replaces_tcp() {
        let options = ok(&["--uds", "/tmp/m0.sock"]).options;
        assert!(
            matches!(options.listen, Listen::Unix(ref p) if p == std::path::Path::new("/tmp/m0.sock"))
        );
    }

    #[test]
    fn websocket_flags() {
        let ws = |args: &[&str], env: &[(&str, &str)]| {
            let options = parse_env(args, env).unwrap().options;
            (options.ws, options.ws_max_message)
        };
        assert_eq!(ws(&[], &[]), (true, 16 << 20), "on by default, 16 MiB");
        assert!(!ws(&["--no-ws"], &[]).0);
        assert!(ws(&["--no-ws", "--ws"], &[]).0, "the last flag wins");
        assert!(!ws(&["--ws", "--no-ws"], &[]).0);
        assert!(!ws(&[], &[("M0SERVE_WS", "0")]).0);
        assert!(ws(&["--ws"], &[("M0SERVE_WS", "false")]).0, "the flag wins");
        assert_eq!(ws(&["--ws-max-message-size=1K"], &[]).1, 1024);
        assert_eq!(ws(&[], &[("M0SERVE_WS_MAX_MESSAGE_SIZE", "2M")]).1, 2 << 20);
        assert!(usage(&["--ws-max-message-size=lots"]).contains("ws-max-message-size"));
    }

    #[test]
    fn environment_variables_are_read_and_flags_win() {
        let env = [
            ("M0SERVE_PORT", "9001"),
            ("M0SERVE_HEALTH_PATH", "/hz"),
            ("M0SERVE_BACKEND", "portable"),
            ("M0SERVE_CORES", "2"),
            ("M0SERVE_MAX_BODY_SIZE", "4K"),
            ("M0SERVE_ACCESS_LOG", "1"),
            ("M0SERVE_LOG_LEVEL", "debug"),
        ];
        let Ok(Invocation {
            options, log_level, ..
        }) = parse_env(&[], &env)
        else {
            panic!("env parse failed")
        };
        assert!(matches!(options.listen, Listen::Tcp { port: 9001, .. }));
        assert_eq!(
            options.router.route(&get("/hz")).map(|r| r.status),
            Some(200)
        );
        assert_eq!(options.backend, Choice::Portable);
        assert_eq!(options.cores, Some(2));
        assert_eq!(options.limits.max_body, 4096);
        assert!(options.access_log);
        assert_eq!(log_level, tracing::Level::DEBUG);

        let Ok(flagged) = parse_env(&["--port", "9002"], &env) else {
            panic!("flag parse failed")
        };
        assert!(matches!(
            flagged.options.listen,
            Listen::Tcp { port: 9002, .. }
        ));

        let Ok(off) = parse_env(&[], &[("M0SERVE_ACCESS_LOG", "false")]) else {
            panic!("parse failed")
        };
        assert!(!off.options.access_log);

        let bad = parse_env(&[], &[("M0SERVE_PORT", "http")]);
        assert!(matches!(bad, Err(CliError::Usage(ref m)) if m.contains("invalid value 'http'")));
    }

    #[test]
    fn uring_is_shorthand_for_backend_uring() {
        assert_eq!(ok(&["--uring"]).options.backend, Choice::Uring);
        assert_eq!(
            ok(&["--uring", "--backend", "uring"]).options.backend,
            Choice::Uring
        );
        assert_eq!(ok(&["--backend", "uring"]).options.backend, Choice::Uring);
        assert_eq!(ok(&["--backend", "auto"]).options.backend, Choice::Auto);
        let Ok(env) = parse_env(&[], &[("M0SERVE_URING", "yes")]) else {
            panic!("parse failed")
        };
        assert_eq!(env.options.backend, Choice::Uring);
        for other in ["portable", "auto"] {
            let message = usage(&["--uring", "--backend", other]);
            assert_eq!(
                message,
                format!("--uring conflicts with --backend {other} (--uring means --backend uring)")
            );
        }
    }

    #[test]
    fn bad_values_are_one_line() {
        assert_eq!(
            usage(&["--port", "abc"]),
            "invalid value 'abc' for '--port <PORT>': invalid digit found in string"
        );
        assert_eq!(
            usage(&["--cores", "0"]),
            "invalid value '0' for '--cores <N>': must be at least 1"
        );
        assert!(usage(&["--max-connections", "0"]).contains("must be at least 1"));
        assert!(
            usage(&["--port", "70000"]).starts_with("invalid value '70000' for '--port <PORT>'")
        );
        assert!(usage(&["--backend", "epoll"])
            .starts_with("invalid value 'epoll' for '--backend <BACKEND>'"));
        assert!(usage(&["--log-level", "loud"])
            .starts_with("invalid value 'loud' for '--log-level <LOG_LEVEL>'"));
        assert!(usage(&["--max-body-size", "10X"]).contains("K, M, G or T suffix"));
        assert!(usage(&["--keep-alive-timeout=-1"]).contains("non-negative"));
        assert!(usage(&["--graceful-timeout", "soon"]).contains("number of seconds"));
        assert!(usage(&["--no-such-flag"]).contains("unexpected argument '--no-such-flag'"));
        for message in [usage(&["--port", "abc"]), usage(&["--no-such-flag"])] {
            assert!(
                !message.contains('\n') && !message.starts_with("error"),
                "{message:?}"
            );
            assert!(!message.contains('\u{1b}'), "escape codes in {message:?}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("10M"), Ok(10 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("2T"), Ok(2 << 40));
        assert!(parse_size("").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("1.5G").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn static_flags_pair_in_order() {
        let dir = std::env::temp_dir();
        let dir = dir.to_str().unwrap();
        let options = ok(&[
            "--static-path-route=/a",
            "--static-path-route=/b",
            "--static-path-mount",
            dir,
            "--static-path-mount",
            dir,
        ])
        .options;
        // A mounted prefix owns its paths (a miss is its own 404); others are not ours.
        for mounted in ["/a/m0serve-no-such-file", "/b/m0serve-no-such-file"] {
            assert_eq!(
                options.router.route(&get(mounted)).map(|r| r.status),
                Some(404)
            );
        }
        assert!(options.router.route(&get("/c/x")).is_none());

        let message = usage(&[
            "--static-path-route=/a",
            "--static-path-route=/b",
            "--static-path-mount",
            dir,
        ]);
        assert!(
            message.contains("--static-path-route is given 2 time(s) but --static-path-mount 1"),
            "{message}"
        );
        assert!(usage(&["--static-path-mount", dir]).contains("they pair in order"));
    }

    #[test]
    fn bad_router_configuration_is_a_usage_error() {
        let missing = std::env::temp_dir().join(format!("m0serve-missing-{}", std::process::id()));
        let missing = missing.to_str().unwrap();
        let message = usage(&["--static-path-route=/s", "--static-path-mount", missing]);
        assert!(
            message.contains("does not exist") && message.contains(missing),
            "{message}"
        );
        assert!(usage(&["--health-path", "healthz"]).contains("must start with '/'"));
    }

    #[test]
    fn help_and_version_are_info() {
        for (flag, kind) in [
            ("--help", clap::error::ErrorKind::DisplayHelp),
            ("--version", clap::error::ErrorKind::DisplayVersion),
        ] {
            match parse_env(&[flag], &[]) {
                Err(CliError::Info(e)) => assert_eq!(e.kind(), kind),
                _ => panic!("{flag} is not info"),
            }
        }
    }

    fn app(args: &[&str], env: &[(&str, &str)]) -> AppSpec {
        match parse_env(args, env) {
            Ok(Invocation { app: Some(app), .. }) => app,
            Ok(_) => panic!("{args:?}: no app"),
            Err(e) => panic!("{args:?}: {e:?}"),
        }
    }

    #[test]
    fn app_defaults() {
        let spec = app(&["main:app"], &[]);
        assert_eq!(
            spec,
            AppSpec {
                target: "main:app".into(),
                module: "main".into(),
                attrs: vec!["app".into()],
                factory: false,
                app_dir: PathBuf::from("."),
                working_dir: None,
                blocking_threads: 1,
                backpressure: BACKPRESSURE_PER_THREAD,
                root_path: String::new(),
                interface: Interface::Wsgi,
                event_loop: EventLoop::Auto,
                lifespan: Lifespan::Auto,
            }
        );
    }

    #[test]
    fn asgi_flags_and_their_variables() {
        let spec = app(
            &[
                "--interface=asgi",
                "--loop=uvloop",
                "--lifespan=off",
                "main:app",
            ],
            &[],
        );
        assert_eq!(
            (spec.interface, spec.event_loop, spec.lifespan),
            (Interface::Asgi, EventLoop::Uvloop, Lifespan::Off)
        );
        let env = [
            ("M0SERVE_INTERFACE", "asgi"),
            ("M0SERVE_LOOP", "asyncio"),
            ("M0SERVE_LIFESPAN", "on"),
        ];
        let spec = app(&["main:app"], &env);
        assert_eq!(
            (spec.interface, spec.event_loop, spec.lifespan),
            (Interface::Asgi, EventLoop::Asyncio, Lifespan::On)
        );
        assert_eq!(
            app(&["--loop=auto", "main:app"], &env).event_loop,
            EventLoop::Auto
        );
        assert!(usage(&["--loop=trio", "a:b"]).starts_with("invalid value 'trio'"));
        assert!(usage(&["--lifespan=yes", "a:b"]).starts_with("invalid value 'yes'"));
    }

    #[test]
    fn app_flags_and_their_variables() {
        let spec = app(
            &[
                "--factory",
                "--app-dir=src",
                "--working-dir=/srv",
                "--blocking-threads=4",
                "--root-path=/api/",
                "--interface=wsgi",
                "pkg.sub.wsgi:make.app",
            ],
            &[],
        );
        assert_eq!(spec.module, "pkg.sub.wsgi");
        assert_eq!(spec.attrs, ["make", "app"]);
        assert!(spec.factory);
        assert_eq!(spec.app_dir, PathBuf::from("src"));
        assert_eq!(spec.working_dir, Some(PathBuf::from("/srv")));
        assert_eq!(spec.blocking_threads, 4);
        // The default depth follows the thread count.
        assert_eq!(spec.backpressure, 4 * BACKPRESSURE_PER_THREAD);
        assert_eq!(spec.root_path, "/api");

        let env = [
            ("M0SERVE_APP", "site.wsgi:application"),
            ("M0SERVE_FACTORY", "true"),
            ("M0SERVE_APP_DIR", "/code"),
            ("M0SERVE_WORKING_DIR", "/tmp"),
            ("M0SERVE_BLOCKING_THREADS", "0"),
            ("M0SERVE_BACKPRESSURE", "7"),
            ("M0SERVE_ROOT_PATH", "/"),
            ("M0SERVE_INTERFACE", "wsgi"),
        ];
        let spec = app(&[], &env);
        assert_eq!(spec.target, "site.wsgi:application");
        assert!(spec.factory);
        assert_eq!(spec.app_dir, PathBuf::from("/code"));
        assert_eq!(spec.working_dir, Some(PathBuf::from("/tmp")));
        assert_eq!(spec.blocking_threads, 0);
        assert_eq!(spec.backpressure, 7);
        assert_eq!(spec.root_path, "");
        // Loop-only still gets a queue depth of its own.
        assert_eq!(
            app(&["--blocking-threads=0", "a:b"], &[]).backpressure,
            BACKPRESSURE_PER_THREAD
        );
        // The command line wins.
        let flagged = app(&["--blocking-threads=2", "other:app"], &env);
        assert_eq!(flagged.target, "other:app");
        assert_eq!(flagged.blocking_threads, 2);
    }

    #[test]
    fn bad_app_flags_are_usage_errors() {
        for target in [
            "app", "app:", ":app", "a..b:app", "a:b..c", "a-b:app", "a:1x", "a:b:c",
        ] {
            let message = usage(&[target]);
            assert!(
                message.contains(&format!("APP '{target}' is not module:attribute")),
                "{target}: {message}"
            );
        }
        assert!(usage(&["--backpressure=0", "a:b"]).contains("must be at least 1"));
        assert!(usage(&["--blocking-threads=-1", "a:b"]).contains("--blocking-threads"));
        assert_eq!(
            usage(&["--root-path=api", "a:b"]),
            "--root-path 'api' must start with '/'"
        );
        assert!(usage(&["--interface=cgi", "a:b"]).starts_with("invalid value 'cgi'"));
    }

    #[test]
    fn the_pure_rust_binary_refuses_an_app() {
        assert_eq!(with_env(&[], || main(os_args(&["--port=0", "app:app"]))), 2);
        assert_eq!(
            with_env(&[("M0SERVE_APP", "app:app")], || main(os_args(&[
                "--port=0"
            ]))),
            2
        );
        assert!(NO_PYTHON.contains("no Python support") && NO_PYTHON.contains("pip"));
    }

    #[test]
    fn main_exit_statuses_without_serving() {
        assert_eq!(with_env(&[], || main(os_args(&["--port", "abc"]))), 2);
        assert_eq!(
            with_env(&[], || main(os_args(&["--static-path-route=/s"]))),
            2
        );
        assert_eq!(with_env(&[], || main(os_args(&["--version"]))), 0);
    }
}
