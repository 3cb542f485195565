//! m0serve: a thread-per-core HTTP/1.1 server on io_uring (or mio), built to
//! serve Python applications.
//!
//! Layers, one direction of dependency, top to bottom:
//!
//! - [`cli`]: flags and `M0SERVE_*` variables, turned into the options below;
//! - [`supervisor`]: binds the listener once and runs `--workers` worker
//!   processes on it, each the [`server`] below, replaced when they die;
//! - [`server`]: binds the listener, spawns and pins the core threads, runs
//!   graceful shutdown, and glues the protocol to the routes ([`server::session`]);
//! - [`routes`]: the Rust-native routes answered on the core thread (health, static files);
//! - [`http`]: the sans-IO HTTP/1.1 protocol: bytes in, events out, no sockets;
//! - [`ws`]: its WebSocket (RFC 6455) sibling, entered after an HTTP upgrade
//!   (both live in the `m0serve-proto` crate, `proto/`, and are re-exported here);
//! - [`backend`]: the I/O loops (io_uring through the `m0serve-uring` crate, or mio),
//!   which know nothing of HTTP: they drive [`backend::Session`]s.
//!
//! With the `python` feature, `wsgi` serves WSGI applications, `asgi` ASGI
//! ones (on an asyncio executor thread), and `python`
//! is the extension module (`m0serve._m0serve`) behind the `m0serve` console script.

/// Requests are allocated on one thread and freed on another (a core thread
/// and the app's): mimalloc frees across threads without glibc's arena
/// contention, which cost ~6% of a core thread's time serving ASGI.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod app;
#[cfg(feature = "python")]
pub mod asgi;
pub mod backend;
pub mod cli;
pub mod ipc;
pub use m0serve_proto::http;
pub mod metrics;
#[cfg(feature = "python")]
pub mod python;
pub mod reply;
pub mod routes;
pub mod server;
pub mod supervisor;
pub mod tls;
pub use m0serve_proto::ws;
#[cfg(feature = "python")]
pub mod wsgi;
