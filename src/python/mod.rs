//! The Python extension module `m0serve._m0serve` (feature `python`, built by
//! maturin): the `m0serve` console script and `python -m m0serve` call its
//! [`main`], which parses the same command line as the pure-Rust binary,
//! loads the WSGI or ASGI application, and serves it with the GIL released;
//! `m0serve.run` and `m0serve.Server` reach the same through [`api`].

mod api;
mod interface;
mod load;
mod log_bridge;

use std::ffi::OsString;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

use crate::app::spec::AppSpec;
use crate::asgi::{AsgiApp, AsgiConfig, AsgiVersion};
use crate::cli::{self, CliError, Invocation, Role};
use crate::server::{Options, Phase};
use crate::supervisor;
use crate::wsgi::{WsgiApp, WsgiConfig};
use interface::Served;

/// Exit status for a bad command line or an application that cannot be loaded.
const USAGE: i32 = 2;

/// `m0serve._m0serve`: `main(argv) -> int`, the API's `Server` and
/// `flags()`, and `__version__`.
///
/// Declared safe without the GIL (`gil_used = false`), so a free-threaded
/// interpreter keeps its GIL off. Audited for that: the core threads never
/// touch Python objects; every pyclass is `Send + Sync` (PyO3 checks), the
/// per-request ones are used by one thread at a time (another thread's use
/// is a `RuntimeError`, never a race); the Rust locks taken while attached
/// (environ and scope templates, `wsgi.errors`, the conduits) run no
/// Python inside, so no stop-the-world pause can wait on them; an
/// application's `bytes` read without the GIL are immutable (app::piece);
/// the pool's kept thread states attach and detach as on any build.
#[pymodule(gil_used = false)]
#[pyo3(name = "_m0serve")]
fn m0serve_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(main, m)?)?;
    m.add_function(wrap_pyfunction!(api::flags, m)?)?;
    m.add_class::<api::Server>()?;
    Ok(())
}

/// Run the command line `argv` (the program name first) and return the exit
/// status: 0 after a graceful shutdown, 1 when the server failed, 2 for a bad
/// command line or an application that cannot be loaded (or an ASGI app whose
/// lifespan startup failed: 1, with its message). Serving takes over
/// SIGINT and SIGTERM for the process. KeyboardInterrupt and SystemExit
/// raised while the application is imported propagate.
#[pyfunction]
fn main(py: Python<'_>, argv: Vec<OsString>) -> PyResult<i32> {
    let invocation = match cli::parse(argv.clone()) {
        Ok(invocation) => invocation,
        Err(e) => return Ok(e.report()),
    };
    run(py, &argv, invocation)
}

/// Run a parsed command line that names its `APP`: as its supervisor, or,
/// started by one, as a worker that imports the application and serves it.
fn run(py: Python<'_>, argv: &[OsString], invocation: Invocation) -> PyResult<i32> {
    if invocation.app.is_none() {
        let missing = "missing the APP to serve, as module:attribute (e.g. m0serve app:app)";
        return Ok(CliError::Usage(missing.into()).report());
    }
    let relaunch =
        || relaunch(py, argv).map_err(|e| format!("finding the interpreter to start workers: {e}"));
    let (options, env, spec) = match cli::role(invocation, relaunch) {
        Err(status) => return Ok(status),
        Ok((Role::Supervisor(plan), _)) => {
            let _sigint = SigintTaken::take(py)?;
            return Ok(py.detach(|| supervisor::run(plan)));
        }
        Ok((Role::Worker(options, env), spec)) => (options, env, spec.expect("checked above")),
    };
    let watched = options
        .inherited
        .as_ref()
        .is_some_and(|i| i.heartbeat.is_some());
    if watched {
        if let Err(e) = tracebacks_on_signal(py) {
            tracing::warn!("--worker-timeout: no tracebacks for a hung worker: {e}");
        }
    }
    if let Err(e) = before_import(py, &env, &spec) {
        eprintln!("m0serve: error: {}", e.value(py));
        return Ok(USAGE);
    }
    let object = match load::load(py, &spec) {
        Ok(object) => object,
        Err(e) => {
            load::report(py, e)?;
            return Ok(USAGE);
        }
    };
    serve(py, options, &spec, object)
}

/// Serve the loaded application `object` in this process, through the
/// interface `--interface` names or its shape tells; returns the exit status.
fn serve(py: Python<'_>, mut options: Options, spec: &AppSpec, object: Py<PyAny>) -> PyResult<i32> {
    let (served, why) = match interface::resolve(py, spec.interface, object.bind(py)) {
        Ok(found) => found,
        Err(e) => {
            eprintln!(
                "m0serve: error: telling the interface of '{}': {e}",
                spec.target
            );
            return Ok(USAGE);
        }
    };
    if let Served::Asgi(version) = served {
        return serve_asgi(py, options, spec, object, version, &why);
    }
    let app = match WsgiApp::new(py, object, wsgi_config(spec, &options)) {
        Ok(app) => app,
        Err(e) => {
            eprintln!("m0serve: error: starting the WSGI application: {e}");
            return Ok(1);
        }
    };
    options.app = Some(app.clone());
    let _sigint = SigintTaken::take(py)?;
    // Free-threaded with the GIL off: the pool runs without the GIL turn.
    let parallel = if m0serve_pool::gil_enabled(py) {
        ""
    } else {
        " in parallel (free-threaded, the GIL is off: no GIL turn)"
    };
    tracing::info!(
        "serving {} (WSGI, {}): {why}",
        spec.target,
        match spec.blocking_threads {
            0 => "loop-only".to_string(),
            n => format!("{n} blocking thread(s){parallel}"),
        }
    );
    // The core threads never hold the GIL; neither does this one while it waits.
    let status = py.detach(|| {
        let status = cli::serve(options);
        app.shutdown();
        status
    });
    Ok(status)
}

/// Serve an ASGI application: the executor and lifespan startup first, the
/// server, then lifespan shutdown once the server has drained.
fn serve_asgi(
    py: Python<'_>,
    mut options: Options,
    spec: &AppSpec,
    object: Py<PyAny>,
    version: AsgiVersion,
    why: &str,
) -> PyResult<i32> {
    let config = AsgiConfig {
        version,
        root_path: spec.root_path.clone(),
        event_loop: spec.event_loop,
        lifespan: spec.lifespan,
        backpressure: spec.backpressure,
        turn: turn(&options),
    };
    let app = match AsgiApp::new(py, object, config) {
        Ok(app) => app,
        Err(e) => {
            eprintln!("m0serve: error: starting the ASGI application: {e}");
            return Ok(1);
        }
    };
    let event_loop = match app.start(py) {
        Ok(name) => name,
        Err(message) => {
            eprintln!("m0serve: error: {message}");
            return Ok(1);
        }
    };
    let graceful = options.config.graceful_timeout;
    let drain_began = drain_clock(&mut options);
    options.app = Some(app.clone());
    let _sigint = SigintTaken::take(py)?;
    let interface = Served::Asgi(version).name();
    tracing::info!("serving {} ({interface}, {event_loop}): {why}", spec.target);
    let status = py.detach(|| cli::serve(options));
    let began = *drain_began.lock().unwrap_or_else(PoisonError::into_inner);
    let left = began.map_or(Duration::ZERO, |t| graceful.saturating_sub(t.elapsed()));
    app.stop(py, left, graceful);
    Ok(status)
}

/// When the server's drain began (the graceful timeout counts from then),
/// noted by the phase hook, which keeps calling the one already set.
fn drain_clock(options: &mut Options) -> Arc<Mutex<Option<Instant>>> {
    let began = Arc::new(Mutex::new(None));
    let noted = began.clone();
    let mut inner = options.phase_hook.take();
    options.phase_hook = Some(Box::new(move |phase| {
        if phase == Phase::Draining {
            *noted.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        }
        if let Some(hook) = inner.as_mut() {
            hook(phase);
        }
    }));
    began
}

/// What is set up before the application's import, in a worker and for
/// the Python API's object alike: the `--env-file`s' variables, then
/// `--log-config` (a failure of which names the flag and the file).
fn before_import(py: Python<'_>, env: &[(String, String)], spec: &AppSpec) -> PyResult<()> {
    set_env(py, env)?;
    if let Some(path) = &spec.log_config {
        log_bridge::configure(py, path).map_err(|e| {
            let named = pyo3::exceptions::PyRuntimeError::new_err(format!(
                "--log-config {}: {e}",
                path.display()
            ));
            named.set_cause(py, Some(e));
            named
        })?;
    }
    Ok(())
}

/// A worker its supervisor watches (`--worker-timeout`) writes every
/// Python thread's traceback to stderr when told to
/// ([`supervisor::link::TRACEBACKS`]), from faulthandler's C handler: it
/// needs no GIL, which the stuck view may hold. Before the import, so a
/// hang anywhere after it is covered.
fn tracebacks_on_signal(py: Python<'_>) -> PyResult<()> {
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("all_threads", true)?;
    PyModule::import(py, "faulthandler")?.call_method(
        "register",
        (supervisor::link::TRACEBACKS,),
        Some(&kwargs),
    )?;
    Ok(())
}

/// Set the `--env-file`s' variables `os.environ` does not have yet, through
/// `os.environ` (which the interpreter read at its start, and which also
/// sets the process's), before the application is imported.
fn set_env(py: Python<'_>, env: &[(String, String)]) -> PyResult<()> {
    if env.is_empty() {
        return Ok(());
    }
    let environ = PyModule::import(py, "os")?.getattr("environ")?;
    for (name, value) in env {
        environ.call_method1("setdefault", (name, value))?;
    }
    Ok(())
}

/// How a worker is started: this interpreter (`sys.executable`, the user's
/// virtualenv's) running `-m m0serve` with the same arguments.
fn relaunch(py: Python<'_>, argv: &[OsString]) -> PyResult<supervisor::Relaunch> {
    let executable: String = PyModule::import(py, "sys")?
        .getattr("executable")?
        .extract()?;
    if executable.is_empty() {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(
            "sys.executable is empty",
        ));
    }
    let mut args: Vec<OsString> = vec!["-m".into(), "m0serve".into()];
    args.extend(argv.iter().skip(1).cloned());
    Ok(supervisor::Relaunch {
        program: executable.into(),
        args,
    })
}

fn wsgi_config(spec: &AppSpec, options: &Options) -> WsgiConfig {
    WsgiConfig {
        threads: spec.blocking_threads,
        backpressure: spec.backpressure,
        root_path: spec.root_path.clone(),
        turn: turn(options),
    }
}

/// The pool's GIL turn and scheduling: the knobs over the defaults of a
/// process confined to its cores' CPUs (a worker among several) or not.
fn turn(options: &Options) -> m0serve_pool::TurnConfig {
    let confined = options.inherited.as_ref().is_some_and(|i| i.confined);
    options.tuning.turn(confined)
}

/// Python's SIGINT handler, given back to the default disposition while the
/// server serves, so the server's handler (installed by `server::run`) is
/// the only one: Python's own would otherwise be chained to it and raise
/// KeyboardInterrupt once serving returns, turning a clean Ctrl-C shutdown
/// into a traceback. Put back on drop, for a process that goes on (the
/// Python API). Python lets only its main thread change handlers; from any
/// other thread (an embedding, a test's server), the server's handler is
/// simply installed over Python's.
struct SigintTaken<'py> {
    /// `signal` and the handler to put back (None: not the main thread).
    restore: Option<(Bound<'py, PyModule>, Bound<'py, PyAny>)>,
}

impl<'py> SigintTaken<'py> {
    fn take(py: Python<'py>) -> PyResult<SigintTaken<'py>> {
        let threading = PyModule::import(py, "threading")?;
        let current = threading.call_method0("current_thread")?;
        let main = threading.call_method0("main_thread")?;
        if !current.is(&main) {
            return Ok(SigintTaken { restore: None });
        }
        let signal = PyModule::import(py, "signal")?;
        let number = signal.getattr("SIGINT")?;
        let previous = signal.call_method1("signal", (&number, signal.getattr("SIG_DFL")?))?;
        // None: a handler Python did not install, which it cannot put back.
        let restore = (!previous.is_none()).then_some((signal, previous));
        Ok(SigintTaken { restore })
    }
}

impl Drop for SigintTaken<'_> {
    fn drop(&mut self) {
        if let Some((signal, previous)) = self.restore.take() {
            let put_back = signal
                .getattr("SIGINT")
                .and_then(|number| signal.call_method1("signal", (number, previous)));
            if let Err(e) = put_back {
                tracing::warn!("putting Python's SIGINT handler back: {e}");
            }
        }
    }
}
