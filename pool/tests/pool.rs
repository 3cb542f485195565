//! The pool with a real interpreter: where jobs run, their thread states,
//! backpressure, GIL sharing, shutdown and panics. See ../README.md for how
//! to run these.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyInt;

use common::{shutdown_detached, start, PATIENCE};
use m0serve_pool::{keep_thread_state, Config, Pool};

extern "C" {
    // Public since CPython 3.9; pyo3-ffi leaves it out.
    fn PyThreadState_GetID(tstate: *mut ffi::PyThreadState) -> u64;
}

/// What a job sees of the thread state it runs on.
#[derive(Debug)]
struct Seen {
    thread: String,
    ident: u64,
    tstate_id: u64,
    /// This thread's count of jobs, kept in a `threading.local`: it survives
    /// between jobs only if the thread state does.
    local_count: u64,
}

fn new_local() -> Arc<Py<PyAny>> {
    Python::attach(|py| {
        let local = py.import("threading")?.getattr("local")?.call0()?;
        PyResult::Ok(Arc::new(local.unbind()))
    })
    .unwrap()
}

fn see(py: Python<'_>, local: &Py<PyAny>) -> Seen {
    let local = local.bind(py);
    let count = local
        .getattr("n")
        .map_or(0, |n| n.extract::<u64>().unwrap())
        + 1;
    local.setattr("n", count).unwrap();
    let ident = py
        .import("threading")
        .unwrap()
        .call_method0("get_ident")
        .unwrap()
        .extract()
        .unwrap();
    // SAFETY: attached (we hold `py`), so the current thread state is valid.
    let tstate_id = unsafe { PyThreadState_GetID(ffi::PyThreadState_Get()) };
    Seen {
        thread: thread::current().name().unwrap_or("").to_owned(),
        ident,
        tstate_id,
        local_count: count,
    }
}

#[test]
fn jobs_run_on_the_pool_threads_not_on_the_submitter() {
    let (pool, _room) = start(2, 32);
    let (tx, rx) = mpsc::channel();
    for _ in 0..20 {
        let tx = tx.clone();
        let job = Box::new(move |_py: Python<'_>| {
            let me = thread::current();
            tx.send((me.id(), me.name().map(str::to_owned))).unwrap();
        });
        pool.try_submit(job).map_err(|_| "refused").unwrap();
    }
    let me = thread::current().id();
    for _ in 0..20 {
        let (id, name) = rx.recv_timeout(PATIENCE).unwrap();
        assert_ne!(id, me);
        let name = name.unwrap();
        assert!(name == "m0-pool-0" || name == "m0-pool-1", "{name}");
    }
    shutdown_detached(pool);
}

#[test]
fn many_jobs_through_four_threads_are_all_answered() {
    const JOBS: u64 = 2_000;
    // A small queue, so submits are refused and resumed by `on_room` often.
    let (pool, room) = start(4, 4);
    let (tx, rx) = mpsc::channel();
    for n in 0..JOBS {
        let tx = tx.clone();
        room.submit(
            &pool,
            Box::new(move |py: Python<'_>| {
                let doubled: u64 = PyInt::new(py, n)
                    .call_method1("__add__", (n,))
                    .unwrap()
                    .extract()
                    .unwrap();
                tx.send(doubled).unwrap();
            }),
        );
    }
    let mut sum = 0;
    for _ in 0..JOBS {
        sum += rx.recv_timeout(PATIENCE).unwrap();
    }
    assert_eq!(sum, JOBS * (JOBS - 1));
    assert!(room.calls() > 0, "the queue of 4 never filled");
    shutdown_detached(pool);
}

#[test]
fn each_pool_thread_keeps_one_thread_state_across_jobs() {
    const JOBS: usize = 200;
    let local = new_local();
    let (pool, room) = start(2, 8);
    let (tx, rx) = mpsc::channel();
    for _ in 0..JOBS {
        let (tx, local) = (tx.clone(), local.clone());
        room.submit(
            &pool,
            Box::new(move |py: Python<'_>| tx.send(see(py, &local)).unwrap()),
        );
    }
    let mut by_thread: HashMap<String, Vec<Seen>> = HashMap::new();
    for _ in 0..JOBS {
        let seen = rx.recv_timeout(PATIENCE).unwrap();
        by_thread.entry(seen.thread.clone()).or_default().push(seen);
    }
    for (thread, seen) in &by_thread {
        let first = &seen[0];
        for (n, s) in seen.iter().enumerate() {
            assert_eq!(s.ident, first.ident, "{thread}");
            assert_eq!(s.tstate_id, first.tstate_id, "{thread}: a new thread state");
            assert_eq!(
                s.local_count,
                n as u64 + 1,
                "{thread}: threading.local lost"
            );
        }
    }
    shutdown_detached(pool);
}

#[test]
fn keep_thread_state_keeps_it_where_a_plain_attach_would_not() {
    // The control first: without a kept state every attach gets a new one,
    // which is what the test above would see from a pool that did not keep.
    let local = new_local();
    let seen = thread::spawn(move || {
        let mut seen = Vec::new();
        for _ in 0..2 {
            seen.push(Python::attach(|py| see(py, &local)));
        }
        keep_thread_state();
        keep_thread_state(); // a second call changes nothing
        for _ in 0..2 {
            seen.push(Python::attach(|py| see(py, &local)));
        }
        seen
    })
    .join()
    .unwrap();
    let counts: Vec<u64> = seen.iter().map(|s| s.local_count).collect();
    assert_eq!(counts, [1, 1, 1, 2]);
    assert_ne!(seen[0].tstate_id, seen[1].tstate_id);
    assert_eq!(seen[2].tstate_id, seen[3].tstate_id);
}

#[test]
fn a_full_queue_refuses_and_the_next_pop_calls_on_room() {
    let (pool, room) = start(1, 2);
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    // Occupy the only thread (detached, so it holds no GIL while it waits).
    let blocker = Box::new(move |py: Python<'_>| {
        started_tx.send(()).unwrap();
        py.detach(move || release_rx.recv_timeout(PATIENCE).unwrap());
    });
    pool.try_submit(blocker).map_err(|_| "refused").unwrap();
    started_rx.recv_timeout(PATIENCE).unwrap();

    let ran = Arc::new(AtomicUsize::new(0));
    let job = || {
        let ran = ran.clone();
        Box::new(move |_py: Python<'_>| {
            ran.fetch_add(1, Ordering::SeqCst);
        })
    };
    assert!(pool.try_submit(job()).is_ok());
    assert!(pool.try_submit(job()).is_ok());
    let refused = pool.try_submit(job());
    assert!(refused.is_err(), "a third job past a bound of two");
    assert_eq!(room.calls(), 0, "on_room before any pop");

    release_tx.send(()).unwrap();
    // The refused job goes in once `on_room` says there is room.
    room.submit(&pool, refused.err().unwrap());
    shutdown_detached(pool);
    assert_eq!(ran.load(Ordering::SeqCst), 3);
    assert_eq!(room.calls(), 1, "on_room once per refusal episode");
}

#[test]
fn a_view_holding_the_gil_runs_while_another_sleeps_with_it_released() {
    let (pool, _room) = start(2, 8);
    let sleeping = Arc::new(AtomicBool::new(false));
    let slept = Arc::new(AtomicBool::new(false));
    let (done_tx, done_rx) = mpsc::channel();

    let (flag, done, tx) = (sleeping.clone(), slept.clone(), done_tx.clone());
    let sleeper = Box::new(move |py: Python<'_>| {
        flag.store(true, Ordering::SeqCst);
        // time.sleep releases the GIL while it sleeps.
        py.import("time")
            .unwrap()
            .call_method1("sleep", (3.0,))
            .unwrap();
        done.store(true, Ordering::SeqCst);
        tx.send("sleeper").unwrap();
    });
    pool.try_submit(sleeper).map_err(|_| "refused").unwrap();
    let deadline = Instant::now() + PATIENCE;
    while !sleeping.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "the sleeper never started");
        thread::sleep(Duration::from_millis(1));
    }

    let (done, tx) = (slept.clone(), done_tx);
    let busy = Box::new(move |py: Python<'_>| {
        // Pure Python work: it holds the GIL the whole time.
        let total: u64 = py
            .eval(c"sum(range(200000))", None, None)
            .unwrap()
            .extract()
            .unwrap();
        assert_eq!(total, 199_999 * 200_000 / 2);
        tx.send(if done.load(Ordering::SeqCst) {
            "busy, after the sleeper"
        } else {
            "busy"
        })
        .unwrap();
    });
    pool.try_submit(busy).map_err(|_| "refused").unwrap();

    assert_eq!(done_rx.recv_timeout(PATIENCE).unwrap(), "busy");
    assert_eq!(done_rx.recv_timeout(PATIENCE).unwrap(), "sleeper");
    shutdown_detached(pool);
}

#[test]
fn shutdown_finishes_the_queued_jobs_then_joins() {
    const JOBS: usize = 40;
    let (pool, _room) = start(2, JOBS);
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..JOBS {
        let ran = ran.clone();
        let job = Box::new(move |py: Python<'_>| {
            py.detach(|| thread::sleep(Duration::from_millis(5)));
            ran.fetch_add(1, Ordering::SeqCst);
        });
        pool.try_submit(job).map_err(|_| "refused").unwrap();
    }
    // Most jobs are still queued here (40 x 5 ms on two threads).
    shutdown_detached(pool);
    assert_eq!(ran.load(Ordering::SeqCst), JOBS);
}

#[test]
fn a_panicking_job_does_not_kill_its_thread() {
    // One thread, so the job after the panics must run on the same thread.
    let (pool, _room) = start(1, 8);
    pool.try_submit(Box::new(|_py: Python<'_>| panic!("a view's bug")))
        .map_err(|_| "refused")
        .unwrap();
    // One that panics with a Python error set: the next job must not see it.
    pool.try_submit(Box::new(|py: Python<'_>| {
        PyValueError::new_err("left behind").restore(py);
        panic!("a view's bug, mid-call");
    }))
    .map_err(|_| "refused")
    .unwrap();
    let (tx, rx) = mpsc::channel();
    pool.try_submit(Box::new(move |py: Python<'_>| {
        let clean = !PyErr::occurred(py);
        tx.send((thread::current().name().map(str::to_owned), clean))
            .unwrap();
    }))
    .map_err(|_| "refused")
    .unwrap();
    let (name, clean) = rx.recv_timeout(PATIENCE).unwrap();
    assert_eq!(name.as_deref(), Some("m0-pool-0"));
    assert!(
        clean,
        "a panicked job's Python error leaked into the next job"
    );
    shutdown_detached(pool);
}

#[test]
fn submitters_never_take_the_gil() {
    const JOBS: usize = 10;
    let ran = Arc::new(AtomicUsize::new(0));
    // Hold the GIL on this thread while another thread starts the pool and
    // submits: if either needed the GIL it would not finish.
    let pool = Python::attach(|_py| {
        let ran = ran.clone();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let config = Config {
                threads: 2,
                backpressure: JOBS,
            };
            let pool = Pool::start(config, Arc::new(|| ())).unwrap();
            for _ in 0..JOBS {
                let ran = ran.clone();
                let job = Box::new(move |_py: Python<'_>| {
                    ran.fetch_add(1, Ordering::SeqCst);
                });
                pool.try_submit(job).map_err(|_| "refused").unwrap();
            }
            tx.send(pool).unwrap();
        });
        rx.recv_timeout(PATIENCE)
            .expect("start or submit waited for the GIL")
    });
    shutdown_detached(pool);
    assert_eq!(ran.load(Ordering::SeqCst), JOBS);
}

#[test]
#[should_panic(expected = "without the GIL")]
fn shutdown_under_the_gil_refuses_rather_than_deadlock() {
    let (pool, _room) = start(1, 1);
    Python::attach(|_py| pool.shutdown());
}

#[test]
fn a_pool_needs_a_thread_and_room() {
    for (threads, backpressure) in [(0, 8), (4, 0)] {
        let config = Config {
            threads,
            backpressure,
        };
        let err = Pool::start(config, Arc::new(|| ())).err().unwrap();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    }
}

/// The per-job cost, printed: trivial jobs (no Python call) through 1 and 4
/// threads, saturated (a full queue) and one at a time (each job waited for,
/// so every job pays a wake). Not a gate: run it by name with
/// `--ignored --nocapture` (see ../README.md).
#[test]
#[ignore]
fn throughput_of_trivial_jobs() {
    const SATURATED: usize = 200_000;
    const ONE_AT_A_TIME: usize = 20_000;
    for threads in [1, 4] {
        let (pool, room) = start(threads, 1024);
        let ran = Arc::new(AtomicUsize::new(0));
        let began = Instant::now();
        for _ in 0..SATURATED {
            let ran = ran.clone();
            room.submit(
                &pool,
                Box::new(move |_py: Python<'_>| {
                    ran.fetch_add(1, Ordering::Relaxed);
                }),
            );
        }
        shutdown_detached(pool);
        let saturated = began.elapsed();
        assert_eq!(ran.load(Ordering::SeqCst), SATURATED);

        let (pool, _room) = start(threads, 1024);
        let (tx, rx) = mpsc::channel();
        let began = Instant::now();
        for _ in 0..ONE_AT_A_TIME {
            let tx = tx.clone();
            pool.try_submit(Box::new(move |_py: Python<'_>| tx.send(()).unwrap()))
                .map_err(|_| "refused")
                .unwrap();
            rx.recv_timeout(PATIENCE).unwrap();
        }
        let one_at_a_time = began.elapsed();
        shutdown_detached(pool);

        println!(
            "{threads} thread(s): saturated {:.0} jobs/s ({:.2} us/job); \
             one at a time {:.0} jobs/s ({:.2} us round trip)",
            SATURATED as f64 / saturated.as_secs_f64(),
            saturated.as_secs_f64() * 1e6 / SATURATED as f64,
            ONE_AT_A_TIME as f64 / one_at_a_time.as_secs_f64(),
            one_at_a_time.as_secs_f64() * 1e6 / ONE_AT_A_TIME as f64,
        );
    }
}
