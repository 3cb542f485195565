//! `m0serve._m0serve.Server`, behind the Python API (`m0serve.run`,
//! `m0serve.Server`, python/m0serve/_api.py, which turns keywords into the
//! command line parsed here): one server, served once, stopped from any
//! thread. An import string runs as the command line does (a supervisor and
//! its workers); an application object is served in this process, by one
//! worker without reload, since no other process could import it.

use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use super::load::{self, LoadError};
use crate::cli::{self, CliError, FlagKind, Invocation};
use crate::server::remote::Remote;

#[pyclass(module = "m0serve._m0serve", name = "Server", frozen)]
pub struct Server {
    argv: Vec<OsString>,
    /// The application object, and its name in messages (None: `argv` names
    /// an import string).
    object: Option<(Py<PyAny>, String)>,
    remote: Remote,
    served: AtomicBool,
}

#[pymethods]
impl Server {
    /// Check the command line `argv` (the program name first) now, so a bad
    /// value is a `ValueError` before anything listens.
    #[new]
    #[pyo3(signature = (argv, app=None, name=None))]
    fn new(argv: Vec<OsString>, app: Option<Py<PyAny>>, name: Option<String>) -> PyResult<Server> {
        let object = app.map(|app| (app, name.unwrap_or_else(|| "the application".into())));
        parse(&argv, object.as_ref().map(|(_, name)| name.as_str()))?;
        Ok(Server {
            argv,
            object,
            remote: Remote::new(),
            served: AtomicBool::new(false),
        })
    }

    /// Serve until shut down (SIGINT, SIGTERM or [`Server::shutdown`]), with
    /// the GIL released; returns the exit status (0 after a graceful shutdown).
    fn serve(&self, py: Python<'_>) -> PyResult<i32> {
        if self.served.swap(true, Ordering::SeqCst) {
            return Err(PyRuntimeError::new_err(
                "this Server has served already; make a new one",
            ));
        }
        let name = self.object.as_ref().map(|(_, name)| name.as_str());
        let mut invocation = parse(&self.argv, name)?;
        invocation.options.remote = Some(self.remote.clone());
        let Some((object, _)) = &self.object else {
            return super::run(py, &self.argv, invocation);
        };
        let Invocation {
            options,
            log_level,
            log_format,
            app,
            env,
            ..
        } = invocation;
        let spec = app.expect("parse_for_object gives the object's spec");
        super::before_import(py, &env, &spec)?;
        cli::init_logging(log_level, log_format, None);
        let object = match load::called(py, &spec, object.bind(py).clone()) {
            Ok(object) => object,
            Err(LoadError::Bad(message)) => return Err(PyValueError::new_err(message)),
            Err(LoadError::Raised { error, .. } | LoadError::Interrupted(error)) => {
                return Err(error)
            }
        };
        super::serve(py, options, &spec, object)
    }

    /// Stop serving, as SIGTERM would (a graceful drain), from any thread;
    /// before `serve` starts, it makes `serve` return at once.
    fn shutdown(&self) {
        self.remote.request_stop();
    }

    /// Where it serves (`http://127.0.0.1:8000`), once ready; None before
    /// and after.
    #[getter]
    fn url(&self) -> Option<String> {
        self.remote.url()
    }

    /// Wait until it is ready (its URL), shut down or `timeout` seconds
    /// passed (None), with the GIL released.
    fn wait_ready(&self, py: Python<'_>, timeout: f64) -> PyResult<Option<String>> {
        let timeout = Duration::try_from_secs_f64(timeout)
            .map_err(|e| PyValueError::new_err(format!("timeout: {e}")))?;
        let remote = self.remote.clone();
        Ok(py.detach(move || remote.wait_ready(timeout)))
    }
}

/// The long flags and how each takes its value (`switch`, `toggle`,
/// `value`, `list`), which the keywords of `m0serve.run` follow.
#[pyfunction]
pub fn flags() -> Vec<(String, &'static str)> {
    cli::flags()
        .into_iter()
        .map(|(name, kind)| {
            let kind = match kind {
                FlagKind::Switch => "switch",
                FlagKind::Toggle => "toggle",
                FlagKind::Value => "value",
                FlagKind::List => "list",
            };
            (name, kind)
        })
        .collect()
}

/// `argv` parsed; a mistake is a `ValueError` with the command line's
/// one-line message. With an object, only one worker and no reload.
fn parse(argv: &[OsString], object: Option<&str>) -> PyResult<Invocation> {
    let parsed = match object {
        Some(name) => cli::parse_for_object(argv.to_vec(), name),
        None => cli::parse(argv.to_vec()),
    };
    let invocation = parsed.map_err(|e| match e {
        CliError::Usage(message) => PyValueError::new_err(message),
        CliError::Info(info) => PyValueError::new_err(info.to_string()),
        CliError::Print(_) => PyValueError::new_err(
            "print_config is the command line's: run `m0serve --print-config`",
        ),
    })?;
    if object.is_some() {
        if let Some(flag) = invocation.supervision.needs_supervisor() {
            return Err(PyValueError::new_err(format!(
                "{flag} needs worker processes, which import the application: pass its import string (\"module:attribute\") instead of the object"
            )));
        }
    } else if invocation.app.is_none() {
        return Err(PyValueError::new_err(
            "no application: pass one, or its import string (\"module:attribute\")",
        ));
    }
    Ok(invocation)
}
