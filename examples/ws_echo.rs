//! A WebSocket echo server for the Autobahn|Testsuite fuzzer (run by
//! tests/run.sh): the server with the pure-Rust echo app of
//! `m0serve::app::testing`, on one core. A test tool, not part of the CLI.
//!
//! Usage: `ws_echo PORT [auto|portable|uring]` (PORT 0: any free port, logged
//! as `listening on http://127.0.0.1:PORT`); stops on SIGTERM or SIGINT.

use std::sync::Arc;
use std::time::Duration;

use m0serve::app::testing::{ws_echo, ThreadApp};
use m0serve::backend::Choice;
use m0serve::server::{self, Config, Listen, Options};
use m0serve::tuning::Tuning;

fn main() {
    let mut args = std::env::args().skip(1);
    let port = args.next().and_then(|p| p.parse().ok()).unwrap_or(9001);
    let backend = match args.next().as_deref() {
        None | Some("auto") => Choice::Auto,
        Some("portable") => Choice::Portable,
        Some("uring") => Choice::Uring,
        Some(other) => panic!("unknown backend {other:?}: auto, portable or uring"),
    };
    // Info: the `listening on ADDR` line tells the caller the port (PORT 0 picks one).
    tracing_subscriber::fmt()
        .with_env_filter("info")
        .with_ansi(false)
        .init();
    let config = Config {
        listen: vec![Listen::Tcp {
            host: "127.0.0.1".into(),
            port,
        }],
        cores: Some(1),
        backend,
        max_connections: 1000,
        graceful_timeout: Duration::from_secs(1),
        response_defaults: Default::default(),
        ws_keepalive: None,
        body_buffer: None,
        ..Config::default()
    };
    let mut options = Options::new(config, Tuning::default());
    options.app = Some(Arc::new(ThreadApp::new(ws_echo).websocket()));
    let code = server::run(options).expect("serve");
    std::process::exit(code);
}
