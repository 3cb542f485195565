//! Flags of the Python application: what to load, its interface, and the
//! pool or event loop that runs it.

use std::path::PathBuf;

use clap::builder::FalseyValueParser;
use clap::{ArgAction, Args};

use crate::app::spec::{AppSpec, EventLoop, Interface, Lifespan, BACKPRESSURE_PER_THREAD};

use super::values::at_least_one;
use super::CliError;

/// The default `--blocking-threads`.
pub const DEFAULT_BLOCKING_THREADS: usize = 4;

#[derive(Args, Debug)]
pub(super) struct AppArgs {
    /// The application to serve, as module:attribute (dotted attributes allowed), e.g. app:app.
    #[arg(env = "M0SERVE_APP", value_name = "APP")]
    pub(super) app: Option<String>,

    /// The application's interface; auto tells ASGI 3, ASGI 2 and WSGI apart from the object (the log says what it found).
    #[arg(long, env = "M0SERVE_INTERFACE", value_enum, default_value_t = Interface::Auto)]
    interface: Interface,

    /// ASGI: the event loop; auto is uvloop when it is installed, else asyncio.
    #[arg(long = "loop", env = "M0SERVE_LOOP", value_enum, default_value_t = EventLoop::Auto)]
    event_loop: EventLoop,

    /// ASGI: the lifespan protocol; auto tolerates apps that do not support it.
    #[arg(long, env = "M0SERVE_LIFESPAN", value_enum, default_value_t = Lifespan::Auto)]
    lifespan: Lifespan,

    /// APP names a factory: call it (no arguments) to get the application.
    #[arg(long, env = "M0SERVE_FACTORY", value_parser = FalseyValueParser::new(), action = ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true")]
    factory: bool,

    /// Directory put first on sys.path before APP is imported (relative to --working-dir).
    #[arg(long, env = "M0SERVE_APP_DIR", value_name = "DIR", default_value = ".")]
    app_dir: PathBuf,

    /// Change to this directory before importing APP.
    #[arg(long, env = "M0SERVE_WORKING_DIR", value_name = "DIR")]
    working_dir: Option<PathBuf>,

    /// Python threads running the application; 0 runs it on the core thread (loop-only).
    // 4 by default: a view that waits (a database, an API) must not hold up
    // the next client, and the GIL turn keeps CPU-bound views as fast on 4
    // threads as on 1 (bench/threads.sh, figures in the README).
    #[arg(
        long,
        env = "M0SERVE_BLOCKING_THREADS",
        value_name = "N",
        default_value_t = DEFAULT_BLOCKING_THREADS
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

    /// Configure Python's logging from this file in each worker before APP is imported: dictConfig from .json or .yaml/.yml (PyYAML), fileConfig from any other (.ini); configuring the m0serve.error and m0serve.access loggers hands them the server's lines.
    #[arg(long, env = "M0SERVE_LOG_CONFIG", value_name = "FILE")]
    log_config: Option<PathBuf>,
}

impl AppArgs {
    /// Where APP is imported from: `--app-dir`, from `--working-dir` (or
    /// this process's directory) when relative.
    pub(super) fn dir(&self) -> PathBuf {
        match &self.working_dir {
            Some(dir) => dir.join(&self.app_dir),
            None => self.app_dir.clone(),
        }
    }

    /// Check and assemble the application flags (None: no `APP` was named).
    pub(super) fn spec(mut self) -> Result<Option<AppSpec>, CliError> {
        let Some(target) = self.app.take() else {
            return Ok(None);
        };
        let (module, attrs) = split_target(&target).map_err(CliError::Usage)?;
        self.assemble(target, module, attrs).map(Some)
    }

    /// The application flags for an application object the caller already
    /// holds (the Python API's), named `name` in messages: nothing to import.
    pub(super) fn spec_of_object(self, name: String) -> Result<AppSpec, CliError> {
        if let Some(target) = &self.app {
            return Err(CliError::Usage(format!(
                "an application object was given, and APP '{target}' too (M0SERVE_APP?)"
            )));
        }
        self.assemble(name, String::new(), Vec::new())
    }

    fn assemble(
        self,
        target: String,
        module: String,
        attrs: Vec<String>,
    ) -> Result<AppSpec, CliError> {
        let threads = self.blocking_threads;
        Ok(AppSpec {
            module,
            attrs,
            factory: self.factory,
            app_dir: self.app_dir,
            working_dir: self.working_dir,
            blocking_threads: threads,
            backpressure: self
                .backpressure
                .unwrap_or(BACKPRESSURE_PER_THREAD * threads.max(1)),
            root_path: root_path_of(&self.root_path).map_err(CliError::Usage)?,
            target,
            interface: self.interface,
            event_loop: self.event_loop,
            lifespan: self.lifespan,
            log_config: self.log_config,
        })
    }
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
