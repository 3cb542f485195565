//! Kept thread states are released when their threads end: the interpreter's
//! list of thread states is counted before, during and after. A binary of its
//! own with one test, so no other test's threads change the count.

mod common;

use std::sync::{mpsc, Arc, Barrier};
use std::thread;

use pyo3::{ffi, Python};

use common::{shutdown_detached, start, PATIENCE};
use m0serve_pool::keep_thread_state;

/// Thread states in the main interpreter, this thread's attach included.
fn thread_states() -> usize {
    Python::attach(|_py| {
        let mut count = 0;
        // SAFETY: attached, so the interpreter's thread list is stable while
        // we walk it (it changes only under the GIL).
        unsafe {
            let mut tstate = ffi::PyInterpreterState_ThreadHead(ffi::PyInterpreterState_Main());
            while !tstate.is_null() {
                count += 1;
                tstate = ffi::PyThreadState_Next(tstate);
            }
        }
        count
    })
}

#[test]
fn kept_thread_states_live_as_long_as_their_threads() {
    let before = thread_states();

    // A pool of three: once all three are inside a job at once, each has its
    // state.
    let (pool, room) = start(3, 8);
    let all_in = Arc::new(Barrier::new(3));
    let (tx, rx) = mpsc::channel();
    for _ in 0..3 {
        let (all_in, tx) = (all_in.clone(), tx.clone());
        room.submit(
            &pool,
            Box::new(move |py: Python<'_>| {
                py.detach(|| {
                    all_in.wait();
                });
                tx.send(()).unwrap();
            }),
        );
    }
    for _ in 0..3 {
        rx.recv_timeout(PATIENCE).unwrap();
    }
    assert_eq!(thread_states(), before + 3);
    for _ in 0..50 {
        room.submit(&pool, |_py: Python<'_>| ());
    }
    assert_eq!(thread_states(), before + 3);
    shutdown_detached(pool);
    assert_eq!(thread_states(), before, "a pool thread's state outlived it");

    // A core thread in the loop-only shape: kept while it runs, gone after.
    let (kept_tx, kept_rx) = mpsc::channel();
    let (exit_tx, exit_rx) = mpsc::channel::<()>();
    let core = thread::spawn(move || {
        keep_thread_state();
        Python::attach(|_py| ());
        kept_tx.send(()).unwrap();
        exit_rx.recv_timeout(PATIENCE).unwrap();
    });
    kept_rx.recv_timeout(PATIENCE).unwrap();
    assert_eq!(thread_states(), before + 1);
    exit_tx.send(()).unwrap();
    core.join().unwrap();
    assert_eq!(thread_states(), before, "a kept state outlived its thread");
}
