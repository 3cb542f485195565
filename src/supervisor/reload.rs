//! `--reload`: watch the app's directories with the `notify` crate
//! (inotify on Linux, FSEvents on macOS, kqueue on the BSDs) and wake the
//! supervisor's loop when a file its [`Filter`] counts changes. The loop
//! waits for [`DEBOUNCE`] of quiet (an editor's save is several events, a
//! `git checkout` many) and then rolls the workers, as SIGHUP does.
//!
//! A replacement that fails (an edit that breaks the import) leaves the old
//! workers serving and the watch running: the next good edit rolls again.

use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use notify::event::EventKind;
use notify::{RecommendedWatcher, RecursiveMode, Watcher};

use super::watch_filter::Filter;

/// Quiet after the last change before the workers are rolled.
pub const DEBOUNCE: Duration = Duration::from_millis(250);

/// What `--reload` watches, from the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watch {
    pub dirs: Vec<PathBuf>,
    pub include: Vec<String>,
    pub exclude: Vec<String>,
}

impl Watch {
    /// Check the globs (a bad one is a usage error at parse time).
    pub fn check(&self) -> Result<(), String> {
        Filter::new(Vec::new(), &self.include, &self.exclude).map(drop)
    }
}

/// The running watch: the watcher, and what its thread reported.
pub struct Reload {
    _watcher: RecommendedWatcher,
    wake: UnixStream,
    changed: Receiver<PathBuf>,
}

impl Reload {
    pub fn start(watch: &Watch) -> io::Result<Reload> {
        let mut roots = Vec::new();
        for dir in &watch.dirs {
            // Events name paths under what was watched: canonical, so the
            // filter finds their root whatever the spelling on the command line.
            let root = dir.canonicalize().map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("--reload: watching {}: {e}", dir.display()),
                )
            })?;
            roots.push(root);
        }
        let filter =
            Filter::new(roots.clone(), &watch.include, &watch.exclude).map_err(io::Error::other)?;
        let (wake, mut ring) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        ring.set_nonblocking(true)?;
        let (tell, changed) = channel();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let Ok(event) = event else { return };
                // Reads (the workers importing the app) are no change.
                if matches!(event.kind, EventKind::Access(_)) {
                    return;
                }
                for path in event.paths.into_iter().filter(|p| filter.matches(p)) {
                    if tell.send(path).is_ok() {
                        // Full means a wakeup is pending already.
                        let _ = ring.write(&[1]);
                    }
                }
            })
            .map_err(|e| io::Error::other(format!("--reload: {e}")))?;
        for root in &roots {
            watcher.watch(root, RecursiveMode::Recursive).map_err(|e| {
                io::Error::other(format!("--reload: watching {}: {e}", root.display()))
            })?;
        }
        let dirs: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
        tracing::info!("--reload: watching {}", dirs.join(", "));
        Ok(Reload {
            _watcher: watcher,
            wake,
            changed,
        })
    }

    /// Readable once a change was reported.
    pub fn fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// The changed paths reported since the last call.
    pub fn take(&mut self) -> Vec<PathBuf> {
        super::wakeup::drain(&mut self.wake);
        self.changed.try_iter().collect()
    }
}
