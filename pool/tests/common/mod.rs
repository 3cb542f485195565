//! Helpers shared by the pool's integration tests.

#![allow(dead_code)] // each test binary uses its own part

use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use m0serve_pool::{Config, Job, Pool};
use pyo3::Python;

/// A job as the tests write one: any closure, boxed.
pub type BoxedJob = Box<dyn for<'py> FnOnce(Python<'py>) + Send + 'static>;

/// A bound on every wait, so a broken pool fails a test instead of hanging it.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Counts `on_room` calls and lets a refused submitter wait for the next one.
#[derive(Default)]
pub struct Room {
    calls: Mutex<u64>,
    called: Condvar,
}

impl Room {
    pub fn calls(&self) -> u64 {
        *self.calls.lock().unwrap()
    }

    /// Submit `job`, waiting for `on_room` after each refusal (a lost
    /// `on_room` panics after [`PATIENCE`]).
    pub fn submit<J: Job>(&self, pool: &Pool, mut job: J) {
        loop {
            let seen = self.calls();
            match pool.try_submit(job) {
                Ok(()) => return,
                Err(back) => job = back,
            }
            let calls = self.calls.lock().unwrap();
            let (_calls, waited) = self
                .called
                .wait_timeout_while(calls, PATIENCE, |calls| *calls == seen)
                .unwrap();
            assert!(!waited.timed_out(), "a refused submit never got on_room");
        }
    }
}

/// Start a pool whose `on_room` feeds the returned [`Room`].
pub fn start(threads: usize, backpressure: usize) -> (Pool, Arc<Room>) {
    let room = Arc::new(Room::default());
    let signal = room.clone();
    let on_room = Arc::new(move || {
        *signal.calls.lock().unwrap() += 1;
        signal.called.notify_all();
    });
    let config = Config {
        threads,
        backpressure,
    };
    (Pool::start(config, on_room).unwrap(), room)
}

/// Shut `pool` down from a thread that has never attached to Python, as a
/// core thread would, and fail if that takes longer than [`PATIENCE`].
pub fn shutdown_detached(pool: Pool) {
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        pool.shutdown();
        done_tx.send(()).unwrap();
    });
    done_rx
        .recv_timeout(PATIENCE)
        .expect("shutdown did not finish");
}
