//! Flags of the Rust-native routes: the health and ready paths, static mounts.

use std::path::PathBuf;

use clap::Args;

use super::values::parse_duration_secs;
use super::CliError;
use crate::routes::{Router, DEFAULT_STATIC_MAX_AGE};

#[derive(Args, Debug)]
pub(super) struct RouteArgs {
    /// Answer GET/HEAD on this path with 200 "OK", without the application.
    #[arg(long, env = "M0SERVE_HEALTH_PATH", value_name = "PATH")]
    health_path: Option<String>,

    /// Answer GET/HEAD on this path with 200 once every worker is ready, 503 while not or while shutting down, without the application.
    #[arg(long, env = "M0SERVE_READY_PATH", value_name = "PATH")]
    ready_path: Option<String>,

    /// URL prefix of a static mount; pairs, in order, with --static-path-mount (repeatable);
    /// a single mount given no route is served under /static, as in Granian.
    #[arg(long, env = "M0SERVE_STATIC_PATH_ROUTE", value_name = "ROUTE")]
    static_path_route: Vec<String>,

    /// Directory served under the matching --static-path-route (repeatable).
    #[arg(long, env = "M0SERVE_STATIC_PATH_MOUNT", value_name = "DIR")]
    static_path_mount: Vec<PathBuf>,

    /// Static files are sent with Cache-Control: max-age=SECS (Granian's flag, default and
    /// duration forms: 86400, 1d, 12h, 1h30m); 0: none.
    #[arg(
        long,
        env = "M0SERVE_STATIC_PATH_EXPIRES",
        value_name = "SECS",
        default_value_t = DEFAULT_STATIC_MAX_AGE,
        value_parser = parse_duration_secs
    )]
    static_path_expires: u64,

    /// The file a static directory stands for (Granian's flag; its default serves none).
    #[arg(
        long,
        env = "M0SERVE_STATIC_PATH_DIR_TO_FILE",
        value_name = "NAME",
        default_value = "index.html"
    )]
    static_path_dir_to_file: String,
}

/// The route of a lone `--static-path-mount`.
const DEFAULT_STATIC_ROUTE: &str = "/static";

impl RouteArgs {
    /// The router: the static flags pair in order, and the router checks the rest.
    pub(super) fn router(self) -> Result<Router, CliError> {
        let (mut routes, dirs) = (self.static_path_route, self.static_path_mount);
        // Granian's default, so its one-mount command lines carry over.
        if routes.is_empty() && dirs.len() == 1 {
            routes.push(DEFAULT_STATIC_ROUTE.to_owned());
        }
        if routes.len() != dirs.len() {
            return Err(CliError::Usage(format!(
                "--static-path-route is given {} time(s) but --static-path-mount {} time(s); they pair in order",
                routes.len(),
                dirs.len()
            )));
        }
        let router = Router::new(self.health_path, routes.into_iter().zip(dirs).collect())
            .and_then(|router| router.with_ready_path(self.ready_path))
            .map_err(|e| CliError::Usage(e.to_string()))?;
        let router = router
            .with_static_index(&self.static_path_dir_to_file)
            .map_err(|e| CliError::Usage(format!("--static-path-dir-to-file: {e}")))?;
        Ok(router.with_static_max_age(self.static_path_expires))
    }
}
