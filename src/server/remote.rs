//! A server's handle for the code that embeds it in a process (the Python
//! API's `m0serve.Server`): it learns where the server listens once it is
//! ready, and asks it to stop from another thread, as SIGTERM would (a
//! graceful drain), without signalling the process, so that two servers in
//! one process stop one at a time.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

/// Shared by the embedder and the server (or supervisor) it runs.
#[derive(Clone, Default)]
pub struct Remote(Arc<Shared>);

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    stop_requested: bool,
    /// How the running server is told: set while it runs.
    on_stop: Option<Box<dyn Fn() + Send>>,
    /// Where it listens, once every core (or worker) is ready.
    ready_at: Option<String>,
}

impl Remote {
    pub fn new() -> Remote {
        Remote::default()
    }

    /// Ask the server to stop: now if it runs, or as soon as it starts.
    pub fn request_stop(&self) {
        let mut state = self.lock();
        state.stop_requested = true;
        if let Some(on_stop) = &state.on_stop {
            on_stop();
        }
        drop(state);
        self.0.changed.notify_all();
    }

    /// Until [`Remote::release`]: how a stop reaches the running server.
    /// Called at once when a stop was asked for already.
    pub fn on_stop(&self, on_stop: Box<dyn Fn() + Send>) {
        let mut state = self.lock();
        if state.stop_requested {
            on_stop();
        }
        state.on_stop = Some(on_stop);
    }

    /// The server is ready at `url`.
    pub fn ready(&self, url: String) {
        self.lock().ready_at = Some(url);
        self.0.changed.notify_all();
    }

    /// The server ended: no more stops to deliver, and it is no longer ready.
    pub fn release(&self) {
        let mut state = self.lock();
        state.on_stop = None;
        state.ready_at = None;
        drop(state);
        self.0.changed.notify_all();
    }

    /// Where the server listens, once ready (None until then, and after).
    pub fn url(&self) -> Option<String> {
        self.lock().ready_at.clone()
    }

    /// Block until the server is ready (its URL), a stop is asked for, or
    /// `timeout` passes (None for both of those).
    pub fn wait_ready(&self, timeout: Duration) -> Option<String> {
        let state = self.lock();
        let (state, _) = self
            .0
            .changed
            .wait_timeout_while(state, timeout, |s| {
                s.ready_at.is_none() && !s.stop_requested
            })
            .unwrap_or_else(PoisonError::into_inner);
        state.ready_at.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Remote")
            .field("stop_requested", &state.stop_requested)
            .field("ready_at", &state.ready_at)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counting(remote: &Remote) -> Arc<AtomicUsize> {
        let told = Arc::new(AtomicUsize::new(0));
        let t = told.clone();
        remote.on_stop(Box::new(move || {
            t.fetch_add(1, Ordering::SeqCst);
        }));
        told
    }

    #[test]
    fn a_stop_reaches_the_running_server() {
        let remote = Remote::new();
        let told = counting(&remote);
        assert_eq!(told.load(Ordering::SeqCst), 0);
        remote.request_stop();
        assert_eq!(told.load(Ordering::SeqCst), 1);
        remote.release();
        remote.request_stop();
        assert_eq!(told.load(Ordering::SeqCst), 1, "released: not told again");
    }

    #[test]
    fn a_stop_asked_before_the_server_runs_is_delivered_when_it_does() {
        let remote = Remote::new();
        remote.request_stop();
        assert_eq!(counting(&remote).load(Ordering::SeqCst), 1);
    }

    #[test]
    fn waiting_ends_when_ready_or_stopped() {
        let remote = Remote::new();
        assert_eq!(remote.wait_ready(Duration::from_millis(10)), None);
        let r = remote.clone();
        let ready = std::thread::spawn(move || r.wait_ready(Duration::from_secs(10)));
        remote.ready("http://127.0.0.1:1".into());
        assert_eq!(ready.join().unwrap().as_deref(), Some("http://127.0.0.1:1"));
        remote.release();
        assert_eq!(remote.url(), None);
        let r = remote.clone();
        let stopped = std::thread::spawn(move || r.wait_ready(Duration::from_secs(10)));
        remote.request_stop();
        assert_eq!(stopped.join().unwrap(), None);
    }
}
