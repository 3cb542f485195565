//! Copies the application's figures (its pool's queue and GIL turn, or its
//! executor's queue and tasks) into the metrics region every
//! [`PERIOD`], from a thread of its own: the figures live in the app's
//! atomics, and sampling them keeps the request path and the app's threads
//! free of any metrics work. A scrape sees them at most one period old.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::app::App;
use crate::metrics::counters::Region;

/// How often the figures are copied.
const PERIOD: Duration = Duration::from_millis(100);

/// The running sampler; dropping it stops and joins it.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Sample `app` for worker `worker` into `region` (None: no slot, or no thread).
    pub fn start(region: Region, worker: u32, app: Arc<dyn App>) -> Option<Sampler> {
        let slot = region.claim_figures(worker)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("m0-metrics-sample".into())
            .spawn(move || {
                while !stopped.load(Ordering::Acquire) {
                    slot.store(&app.figures());
                    std::thread::park_timeout(PERIOD);
                }
            })
            .map_err(|e| tracing::warn!("sampling the app's figures: {e}"))
            .ok()?;
        Some(Sampler {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}
