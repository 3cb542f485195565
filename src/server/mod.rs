//! The server: binds the listener, spawns and pins the core threads, runs
//! graceful shutdown (SKELETON: `run` to be implemented).

mod access_log;
pub mod session;

use std::path::PathBuf;
use std::time::Duration;

use crate::backend::Choice;
use crate::http::Limits;
use crate::routes::Router;

/// Where to listen.
#[derive(Clone, Debug)]
pub enum Listen {
    Tcp { host: String, port: u16 },
    Unix(PathBuf),
}

/// Everything the server needs, built by the CLI.
pub struct Options {
    pub listen: Listen,
    /// Core threads; `None`: one per CPU of the process's affinity mask.
    pub cores: Option<usize>,
    pub backend: Choice,
    pub limits: Limits,
    /// A client must send a complete head within this (from its first byte).
    pub header_read_timeout: Duration,
    /// An idle keep-alive connection is closed after this.
    pub keep_alive_timeout: Duration,
    /// Connections beyond this wait in the listen backlog.
    pub max_connections: usize,
    /// How long shutdown waits for requests in flight before it closes them.
    pub graceful_timeout: Duration,
    pub router: Router,
    /// Log each request in the common log format (target `m0serve::access`).
    pub access_log: bool,
}

/// Serve until SIGTERM or SIGINT; returns the process exit code.
pub fn run(_options: Options) -> std::io::Result<i32> {
    todo!()
}
