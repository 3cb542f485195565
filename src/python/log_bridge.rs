//! `--log-config`: Python's logging configured before the application is
//! imported (`m0serve._logging`), and, where the file configured the
//! `m0serve.error` or `m0serve.access` logger, the server's lines handed to
//! it ([`crate::cli::bridge_logs`]) by a thread of its own (`m0-log`), which
//! attaches for each line: the core threads only send.

use std::path::Path;

use pyo3::prelude::*;

use crate::cli::{self, BridgedLine};

/// Configure logging from `path`; start the bridge if it asks for one.
pub fn configure(py: Python<'_>, path: &Path) -> PyResult<()> {
    let (error, access): (bool, bool) = PyModule::import(py, "m0serve._logging")?
        .call_method1("configure", (path.display().to_string(),))?
        .extract()?;
    if !(error || access) {
        return Ok(());
    }
    let Some(lines) = cli::bridge_logs(error, access) else {
        return Ok(());
    };
    let logging = PyModule::import(py, "logging")?;
    let loggers: (Py<PyAny>, Py<PyAny>) = (
        logging
            .call_method1("getLogger", ("m0serve.error",))?
            .unbind(),
        logging
            .call_method1("getLogger", ("m0serve.access",))?
            .unbind(),
    );
    std::thread::Builder::new()
        .name("m0-log".into())
        .spawn(move || {
            for line in lines {
                Python::attach(|py| emit(py, &loggers, line));
            }
        })?;
    Ok(())
}

fn emit(py: Python<'_>, (error, access): &(Py<PyAny>, Py<PyAny>), line: BridgedLine) {
    let level = match line.level {
        tracing::Level::ERROR => 40,
        tracing::Level::WARN => 30,
        tracing::Level::INFO => 20,
        tracing::Level::DEBUG => 10,
        tracing::Level::TRACE => 5,
    };
    let logger = if line.access { access } else { error };
    if let Err(e) = logger.call_method1(py, "log", (level, line.message)) {
        e.print(py);
    }
}
