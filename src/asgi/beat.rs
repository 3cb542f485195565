//! The ASGI side's heartbeat stamp: a callback the heartbeat's thread
//! queues on the event loop (`call_soon_threadsafe`), so the slot is
//! stamped only when the loop gets back to its scheduler, not merely when
//! the GIL is free. One at a time: a loop that does not run it is not
//! queued another each period.

use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::intern;
use pyo3::prelude::*;

use crate::ipc::heartbeat::Beat;

#[pyclass(module = "m0serve", name = "LoopBeat", frozen)]
pub struct LoopBeat {
    beat: Beat,
    queued: AtomicBool,
}

#[pymethods]
impl LoopBeat {
    /// On the loop: it answers.
    fn __call__(&self) {
        self.beat.stamp();
        self.queued.store(false, Ordering::Release);
    }
}

impl LoopBeat {
    pub fn new(beat: Beat) -> LoopBeat {
        LoopBeat {
            beat,
            queued: AtomicBool::new(false),
        }
    }

    /// From the heartbeat's thread: queue the stamp on `event_loop`, unless
    /// the last one is still waiting there. A loop already closed (shut
    /// down) is nothing to stamp.
    pub fn queue(slf: &Bound<'_, LoopBeat>, event_loop: &Bound<'_, PyAny>) {
        if slf.get().queued.swap(true, Ordering::AcqRel) {
            return;
        }
        let py = slf.py();
        if event_loop
            .call_method1(intern!(py, "call_soon_threadsafe"), (slf,))
            .is_err()
        {
            slf.get().queued.store(false, Ordering::Release);
        }
    }
}
