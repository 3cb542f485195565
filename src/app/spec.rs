//! The Python application to serve and how ([`AppSpec`]): what the command
//! line (or the Python API) asked for, read by the entry that loads it
//! (`python`) and by the interface that runs it (`wsgi`, `asgi`). The enums
//! are the flags' values too (clap's `ValueEnum`).

use std::path::PathBuf;

use clap::ValueEnum;

/// The interface the application speaks (`--interface`).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interface {
    /// Found from the application object (`m0serve._interface`).
    Auto,
    Wsgi,
    /// ASGI: version 3, or 2 where the object is an ASGI 2 class. `asgi3`
    /// is uvicorn's name for it.
    #[value(alias = "asgi3")]
    Asgi,
    /// ASGI 2, whatever the object looks like.
    Asgi2,
}

/// The asyncio event loop an ASGI application runs on (`--loop`).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventLoop {
    Auto,
    Asyncio,
    Uvloop,
}

/// Whether to run the ASGI lifespan protocol (`--lifespan`), as uvicorn has it:
/// `auto` runs it but carries on when the app does not support it, `on`
/// requires it, `off` skips it.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifespan {
    Auto,
    On,
    Off,
}

impl EventLoop {
    /// The name `m0serve._asgi` takes.
    pub fn name(self) -> &'static str {
        match self {
            EventLoop::Auto => "auto",
            EventLoop::Asyncio => "asyncio",
            EventLoop::Uvloop => "uvloop",
        }
    }
}

impl Lifespan {
    /// The name `m0serve._asgi` takes.
    pub fn name(self) -> &'static str {
        match self {
            Lifespan::Auto => "auto",
            Lifespan::On => "on",
            Lifespan::Off => "off",
        }
    }
}

/// A Python application to load and how to run it: everything the Python entry
/// needs beyond [`crate::server::Options`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppSpec {
    /// `module:attr` as given, for messages.
    pub target: String,
    /// The module to import (dotted).
    pub module: String,
    /// The attribute path inside it, split at the dots.
    pub attrs: Vec<String>,
    /// Call the object to get the application.
    pub factory: bool,
    /// Prepended to `sys.path` (a relative one is taken from `working_dir`).
    pub app_dir: PathBuf,
    /// `chdir` here before importing.
    pub working_dir: Option<PathBuf>,
    /// Pool threads; 0 is the loop-only shape.
    pub blocking_threads: usize,
    /// Requests that may wait for a pool thread.
    pub backpressure: usize,
    /// SCRIPT_NAME: empty, or a path starting with `/` and not ending with one.
    pub root_path: String,
    /// WSGI (on the pool) or ASGI (on the executor).
    pub interface: Interface,
    /// ASGI: the event loop.
    pub event_loop: EventLoop,
    /// ASGI: the lifespan protocol.
    pub lifespan: Lifespan,
    /// Python's logging configured from this file before the import
    /// (`--log-config`: dictConfig from JSON or YAML, fileConfig from INI).
    pub log_config: Option<PathBuf>,
}

/// Requests queued per pool thread when `--backpressure` is not given: deep
/// enough to ride out a burst, shallow enough that a stuck app stops reading soon.
pub const BACKPRESSURE_PER_THREAD: usize = 128;
