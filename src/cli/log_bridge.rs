//! The server's lines handed to Python's `logging` (`--log-config`
//! configuring the `m0serve.error` or `m0serve.access` logger), and only
//! then: until [`open`] is called, an event costs one atomic load here, and
//! the access log's line is written to stderr without the GIL as before.
//!
//! A core thread never runs Python: a bridged event is formatted where it
//! happens and sent down a channel, and a Python thread of the caller's
//! (`python::log_bridge`) takes it from there. A bridged logger's lines are
//! no longer written to stderr (Python's handlers write them).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Mutex, OnceLock};

use tracing::{Event, Subscriber};
use tracing_subscriber::layer::Context;

use super::log_json::Fields;

/// One line for Python.
pub struct Line {
    pub level: tracing::Level,
    /// The access log's (`m0serve.access`), else the server's (`m0serve.error`).
    pub access: bool,
    pub message: String,
}

const ERROR: u8 = 1;
const ACCESS: u8 = 2;

/// Which loggers are bridged: [`ERROR`] and [`ACCESS`] bits.
static BRIDGED: AtomicU8 = AtomicU8::new(0);
static SENDER: OnceLock<Mutex<Sender<Line>>> = OnceLock::new();

/// Hand the server's lines (`error`) and the access log's (`access`) to the
/// returned receiver from now on. Once per process.
pub fn open(error: bool, access: bool) -> Option<Receiver<Line>> {
    let (tx, rx) = channel();
    SENDER.set(Mutex::new(tx)).ok()?;
    let bits = if error { ERROR } else { 0 } | if access { ACCESS } else { 0 };
    BRIDGED.store(bits, Ordering::Release);
    Some(rx)
}

fn bit(target: &str) -> u8 {
    if target == "m0serve::access" {
        ACCESS
    } else {
        ERROR
    }
}

/// Whether lines of `target` go to Python rather than stderr.
pub(super) fn takes(target: &str) -> bool {
    BRIDGED.load(Ordering::Acquire) & bit(target) != 0
}

/// The layer that sends bridged events down the channel. `hint` is the
/// global filter's most verbose level (it sees nothing the filter drops):
/// without it the subscriber's level hint is unknown, and every disabled
/// `debug!` in a hot path (the h2 crate's) costs a filter call.
pub(super) struct Bridge {
    pub(super) hint: Option<tracing_subscriber::filter::LevelFilter>,
}

impl<S: Subscriber> tracing_subscriber::Layer<S> for Bridge {
    fn max_level_hint(&self) -> Option<tracing_subscriber::filter::LevelFilter> {
        self.hint
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        if !takes(meta.target()) {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let line = Line {
            level: *meta.level(),
            access: bit(meta.target()) == ACCESS,
            message: fields.text(),
        };
        if let Some(tx) = SENDER.get() {
            let _ = tx.lock().unwrap_or_else(|e| e.into_inner()).send(line);
        }
    }
}
