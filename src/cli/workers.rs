//! Flags of the supervisor: how many worker processes, and its pid file.

use std::path::PathBuf;

use clap::Args;

use super::values::at_least_one;

#[derive(Args, Debug)]
pub(super) struct WorkerArgs {
    /// Worker processes, each a whole server, under a supervisor that binds the listener once.
    #[arg(long, env = "M0SERVE_WORKERS", value_name = "N", default_value_t = 1, value_parser = at_least_one)]
    pub(super) workers: usize,

    /// Write the supervisor's pid to this file (removed at exit).
    #[arg(long, env = "M0SERVE_PID_FILE", value_name = "PATH")]
    pub(super) pid_file: Option<PathBuf>,
}
