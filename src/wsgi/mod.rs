//! WSGI (PEP 3333) applications on the pool (SKELETON: to be implemented).
//!
//! Built only with the `python` feature.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::app::{App, AppRequest, Exchange, Refused};

/// How the WSGI layer serves.
#[derive(Clone, Debug)]
pub struct WsgiConfig {
    /// Pool threads; 0 is the loop-only shape (the view runs on the core thread).
    pub threads: usize,
    /// Requests that may wait for a pool thread before cores stop reading.
    pub backpressure: usize,
    /// SCRIPT_NAME: the prefix the app is mounted at (`--root-path`).
    pub root_path: String,
}

/// A WSGI callable served through the pool.
pub struct WsgiApp {
    _app: Py<PyAny>,
    _config: WsgiConfig,
}

impl WsgiApp {
    /// Wrap the application object (already loaded) and start the pool.
    pub fn new(_py: Python<'_>, app: Py<PyAny>, config: WsgiConfig) -> PyResult<Arc<WsgiApp>> {
        Ok(Arc::new(WsgiApp {
            _app: app,
            _config: config,
        }))
    }

    /// Stop the pool once the server has drained (call without the GIL).
    pub fn shutdown(&self) {
        todo!()
    }
}

impl App for WsgiApp {
    fn call(&self, _request: AppRequest, _exchange: Arc<Exchange>) -> Result<(), Box<Refused>> {
        todo!()
    }

    fn inline(&self) -> bool {
        self._config.threads == 0
    }
}
