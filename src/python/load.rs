//! Loading the application named by `APP` (`module:attr`), as uvicorn and
//! Granian do: change to `--working-dir`, put `--app-dir` first on `sys.path`,
//! import the module, walk the dotted attributes, call a `--factory`, and
//! check that what comes out is callable.
//!
//! Every failure is one line naming the target. Only when the application's
//! own code raised (its import, or its factory) is the traceback worth
//! printing: that is where the bug is.

use std::path::{Path, PathBuf};

use pyo3::exceptions::{PyAttributeError, PyException, PyModuleNotFoundError};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::app::spec::{AppSpec, Interface};

/// Why the application could not be loaded.
pub enum LoadError {
    /// A mistake in the target or the directories: one line.
    Bad(String),
    /// The application's code raised: one line, after its traceback.
    Raised { message: String, error: PyErr },
    /// A `BaseException` that is not an `Exception` (KeyboardInterrupt,
    /// SystemExit): not a loading error, handed back to the caller to propagate.
    Interrupted(PyErr),
}

impl LoadError {
    /// The line to print (after the traceback, for [`LoadError::Raised`]).
    fn raised(py: Python<'_>, message: String, error: PyErr) -> LoadError {
        if error.is_instance_of::<PyException>(py) {
            LoadError::Raised { message, error }
        } else {
            LoadError::Interrupted(error)
        }
    }
}

/// Load the application `spec` names; the process's working directory and
/// `sys.path` are changed as the flags say.
pub fn load(py: Python<'_>, spec: &AppSpec) -> Result<Py<PyAny>, LoadError> {
    let target = &spec.target;
    if let Some(dir) = &spec.working_dir {
        std::env::set_current_dir(dir).map_err(|e| {
            LoadError::Bad(format!(
                "cannot change to --working-dir {}: {e}",
                dir.display()
            ))
        })?;
    }
    let app_dir = absolute_dir(&spec.app_dir)
        .map_err(|e| LoadError::Bad(format!("--app-dir {}: {e}", spec.app_dir.display())))?;
    prepend_sys_path(py, &app_dir).map_err(|e| LoadError::raised(py, "sys.path".into(), e))?;

    let module = PyModule::import(py, spec.module.as_str()).map_err(|error| {
        if missing_module(py, &error, &spec.module) {
            let name: String = error
                .value(py)
                .getattr("name")
                .and_then(|n| n.extract())
                .unwrap_or_else(|_| spec.module.clone());
            LoadError::Bad(format!(
                "cannot load '{target}': no module named '{name}' (searched {} and sys.path)",
                app_dir.display()
            ))
        } else {
            let message = format!("cannot load '{target}': importing '{}' raised", spec.module);
            LoadError::raised(py, message, error)
        }
    })?;

    let mut object = module.into_any();
    for (i, attr) in spec.attrs.iter().enumerate() {
        object = match object.getattr(attr.as_str()) {
            Ok(next) => next,
            Err(e) if e.is_instance_of::<PyAttributeError>(py) => {
                return Err(LoadError::Bad(format!(
                    "cannot load '{target}': module '{}' has no attribute '{}'",
                    spec.module,
                    spec.attrs[..=i].join(".")
                )))
            }
            Err(e) => {
                let message = format!("cannot load '{target}': getting '{attr}' raised");
                return Err(LoadError::raised(py, message, e));
            }
        };
    }

    called(py, spec, object)
}

/// The application `object` stands for: its factory's result with
/// `--factory`, itself otherwise; it must be callable.
pub fn called<'py>(
    py: Python<'py>,
    spec: &AppSpec,
    mut object: Bound<'py, PyAny>,
) -> Result<Py<PyAny>, LoadError> {
    let target = &spec.target;
    // What the object was meant to be, as --interface says.
    let kind = match spec.interface {
        Interface::Auto => "an",
        Interface::Wsgi => "a WSGI",
        Interface::Asgi | Interface::Asgi2 => "an ASGI",
    };
    if spec.factory {
        if !object.is_callable() {
            return Err(LoadError::Bad(format!(
                "cannot load '{target}': --factory was given but it is a {}, which is not callable",
                type_name(&object)
            )));
        }
        object = object.call0().map_err(|e| {
            LoadError::raised(py, format!("cannot load '{target}': the factory raised"), e)
        })?;
        if !object.is_callable() {
            return Err(LoadError::Bad(format!(
                "cannot load '{target}': the factory returned a {}, which is not {kind} application (not callable)",
                type_name(&object)
            )));
        }
    } else if !object.is_callable() {
        return Err(LoadError::Bad(format!(
            "cannot load '{target}': it is a {}, which is not {kind} application (not callable)",
            type_name(&object)
        )));
    }
    Ok(object.unbind())
}

/// Print `error` the way the loader reports it: the traceback (when the
/// application raised) on stderr, then the one line.
pub fn report(py: Python<'_>, error: LoadError) -> Result<(), PyErr> {
    match error {
        LoadError::Bad(message) => eprintln!("m0serve: error: {message}"),
        LoadError::Raised { message, error } => {
            eprint!("{}", format_traceback(py, &error));
            let summary = error.value(py).repr().map_or_else(
                |_| "an exception".to_string(),
                |r| r.to_string_lossy().into_owned(),
            );
            eprintln!("m0serve: error: {message} {summary}");
        }
        LoadError::Interrupted(error) => return Err(error),
    }
    Ok(())
}

/// Whether `error` says the target's module itself (or a package above it)
/// is missing, rather than something the module imports.
fn missing_module(py: Python<'_>, error: &PyErr, module: &str) -> bool {
    if !error.is_instance_of::<PyModuleNotFoundError>(py) {
        return false;
    }
    let Ok(name) = error
        .value(py)
        .getattr("name")
        .and_then(|n| n.extract::<String>())
    else {
        return false;
    };
    module == name
        || module
            .strip_prefix(name.as_str())
            .is_some_and(|rest| rest.starts_with('.'))
}

/// `dir` made absolute (from the current directory), so a later `chdir` by
/// the application does not change what `sys.path` means; it must exist.
fn absolute_dir(dir: &Path) -> std::io::Result<PathBuf> {
    let dir = dir.canonicalize()?;
    if !dir.is_dir() {
        return Err(std::io::Error::other("not a directory"));
    }
    Ok(dir)
}

/// Put `dir` first on `sys.path` (once).
fn prepend_sys_path(py: Python<'_>, dir: &Path) -> PyResult<()> {
    let sys_path = PyModule::import(py, "sys")?.getattr("path")?;
    let sys_path = sys_path.cast_into::<PyList>()?;
    let dir = dir.to_string_lossy();
    let first: Option<String> = sys_path.get_item(0).ok().and_then(|f| f.extract().ok());
    if first.as_deref() != Some(&*dir) {
        sys_path.insert(0, &*dir)?;
    }
    Ok(())
}

/// The short type name of `object` (`str`, `module`, `Flask`).
fn type_name(object: &Bound<'_, PyAny>) -> String {
    object
        .get_type()
        .name()
        .map_or_else(|_| "?".into(), |n| n.to_string())
}

/// The traceback of `error`, as Python prints it.
fn format_traceback(py: Python<'_>, error: &PyErr) -> String {
    let formatted = PyModule::import(py, "traceback").and_then(|tb| {
        tb.call_method1(
            "format_exception",
            (error.get_type(py), error.value(py), error.traceback(py)),
        )?
        .extract::<Vec<String>>()
    });
    match formatted {
        Ok(lines) => lines.concat(),
        Err(_) => format!("{error}\n"),
    }
}
