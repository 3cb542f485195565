//! The signals the supervisor acts on, and a descriptor its loop polls that
//! becomes readable when one arrives (signal-hook writes to it from the
//! handler), so the loop sleeps in one `poll` on signals and workers alike.
//! macOS behaves the same: signal-hook's handlers, and `poll(2)` on a socket
//! pair and pipes (Darwin's poll refuses only devices, none of which are here).

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use libc::c_int;
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM, SIGTTIN, SIGTTOU};
use signal_hook::iterator::Signals;

/// Stop (TERM, INT), roll (HUP), one worker more or less (TTIN, TTOU), and a
/// child's exit (CHLD).
const HANDLED: [c_int; 6] = [SIGTERM, SIGINT, SIGHUP, SIGTTIN, SIGTTOU, SIGCHLD];

pub struct Wakeup {
    signals: Signals,
    read: UnixStream,
    write: UnixStream,
    /// A stop asked from inside the process ([`Wakeup::stopper`]).
    stop: Arc<AtomicBool>,
}

impl Wakeup {
    /// Install the handlers (before any worker starts, so none is missed).
    pub fn install() -> io::Result<Wakeup> {
        let (read, write) = UnixStream::pair()?;
        read.set_nonblocking(true)?;
        write.set_nonblocking(true)?;
        for signal in HANDLED {
            signal_hook::low_level::pipe::register(signal, write.try_clone()?)?;
        }
        Ok(Wakeup {
            signals: Signals::new(HANDLED)?,
            read,
            write,
            stop: Arc::default(),
        })
    }

    /// What the embedder calls to stop the supervisor as SIGTERM would
    /// ([`crate::server::remote::Remote`]), without signalling the process.
    pub fn stopper(&self) -> io::Result<Box<dyn Fn() + Send>> {
        let write = self.write.try_clone()?;
        let stop = self.stop.clone();
        Ok(Box::new(move || {
            stop.store(true, Ordering::SeqCst);
            // Full means a wake is pending already.
            let _ = (&write).write(&[0]);
        }))
    }

    /// Readable once a signal arrived.
    pub fn fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// The signals that arrived since the last call (each once).
    pub fn take(&mut self) -> Vec<c_int> {
        drain(&mut self.read);
        let mut arrived: Vec<c_int> = self.signals.pending().collect();
        if self.stop.swap(false, Ordering::SeqCst) {
            arrived.push(SIGTERM);
        }
        arrived
    }
}

/// Empty a non-blocking wake socket, so that `poll` sleeps again until the
/// next wake (the bytes carry nothing: the wake is the news).
pub fn drain(wake: &mut UnixStream) {
    let mut sink = [0u8; 64];
    while matches!(wake.read(&mut sink), Ok(n) if n > 0) {}
}

/// `SIGTERM`, or `signal 42` for one without a name.
pub fn name(signal: c_int) -> String {
    signal_hook::low_level::signal_name(signal)
        .map(str::to_string)
        .unwrap_or_else(|| format!("signal {signal}"))
}
