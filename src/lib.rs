//! m0serve: a thread-per-core HTTP/1.1 server on io_uring (or mio), built to
//! serve Python applications.
//!
//! Layers, one direction of dependency, top to bottom (a module uses only
//! those below it; `tests/layers.rs` holds the rule and fails a use against it):
//!
//! - `python` (feature `python`): the extension module (`m0serve._m0serve`)
//!   behind the `m0serve` console script and the Python API;
//! - [`cli`]: flags and `M0SERVE_*` variables, turned into the options below;
//! - [`supervisor`]: binds the listener once and runs `--workers` worker
//!   processes on it, each the [`server`] below, replaced when they die;
//! - `wsgi`, `asgi` (feature `python`): the application interfaces, side by
//!   side: WSGI on the pool, ASGI on an asyncio executor thread;
//! - [`server`]: binds the listener, spawns and pins the core threads, runs
//!   graceful shutdown, and glues the protocol to the routes and the
//!   application ([`server::session`]);
//! - [`app`]: what an application is handed and hands back ([`app::App`],
//!   the conduit), and what the command line asked of it ([`app::spec`]);
//! - [`routes`]: the Rust-native routes answered on the core thread (health, static files);
//! - [`tls`]: rustls, sans-IO, between a backend and the sessions; [`reply`];
//! - [`metrics`]: counters each core keeps in a shared region;
//! - [`backend`]: the I/O loops (io_uring through the `m0serve-uring` crate, or mio),
//!   which know nothing of HTTP: they drive [`backend::Session`]s;
//! - [`ipc`]: memory shared between the supervisor and its workers;
//! - [`tuning`]: the `M0_*` mechanism knobs, read once at start;
//! - [`http`], [`ws`]: the sans-IO HTTP/1.1 and WebSocket (RFC 6455)
//!   protocols, bytes in, events out, no sockets (the `m0serve-proto`
//!   crate, `proto/`, re-exported here).
//!
//! Python appears only in `python`, `wsgi`, `asgi` and `app`'s helpers
//! both interfaces share.

/// Requests are allocated on one thread and freed on another (a core thread
/// and the app's): mimalloc frees across threads without glibc's arena
/// contention, which showed in a core thread's profile serving ASGI
/// (bench/HISTORY.md, "Allocations that cross threads").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod app;
#[cfg(feature = "python")]
pub mod asgi;
pub mod backend;
pub mod cli;
pub mod ipc;
pub use m0serve_proto::h2;
pub use m0serve_proto::http;
pub mod metrics;
#[cfg(feature = "python")]
pub mod python;
pub mod reply;
pub mod routes;
pub mod server;
pub mod supervisor;
pub mod tls;
pub mod tuning;
pub use m0serve_proto::ws;
#[cfg(feature = "python")]
pub mod wsgi;
