//! The GIL turn, in the spirit of the seeds' gates: the keep rule runs (and
//! only where it should), the barrier hands off under contention, and a
//! shutdown reaches a thread inside its slice. The unfairness these rules
//! prevent needs the fairness probe's load (probes/pool_fairness.py); these
//! tests prove the rules run.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use common::{shutdown_detached, BoxedJob, PATIENCE};
use m0serve_pool::{Config, Counters, Pool, TurnConfig};

/// A view that waits 50 µs without the GIL (a short query), then holds the
/// GIL for `spin` (the rendering). The wait lets a thread parked in the
/// re-attach take the GIL: a thread that drops and re-takes the GIL between
/// jobs is otherwise never made to wait for it (CPython forces no switch on
/// a holder that re-takes it within each 5 ms interval), so no run begins
/// and the threads parked behind it starve: with views that only spin, one
/// thread served all 400 jobs in 7 of 40 rounds.
fn gil_holding_job(spin: Duration, done: mpsc::Sender<()>) -> BoxedJob {
    Box::new(move |py| {
        py.detach(|| std::thread::sleep(Duration::from_micros(50)));
        let end = Instant::now() + spin;
        while Instant::now() < end {
            std::hint::spin_loop();
        }
        done.send(()).unwrap();
    })
}

/// Return once every one of the pool's `threads` has started: one job per
/// thread, each waiting (without the GIL) until all have begun. Flooded
/// before that, a thread still inside its first GIL acquisition (its kept
/// thread state) can starve behind the first one as
/// [`gil_holding_job`] describes.
fn warm_up(pool: &Pool, threads: usize) {
    let begun = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    for _ in 0..threads {
        let (begun, tx) = (begun.clone(), tx.clone());
        let job: BoxedJob = Box::new(move |py| {
            begun.fetch_add(1, Ordering::SeqCst);
            py.detach(|| {
                let end = Instant::now() + PATIENCE;
                while begun.load(Ordering::SeqCst) < threads && Instant::now() < end {
                    std::thread::sleep(Duration::from_micros(100));
                }
            });
            tx.send(()).unwrap();
        });
        assert!(pool.try_submit(job).is_ok());
    }
    for _ in 0..threads {
        rx.recv_timeout(PATIENCE)
            .expect("a warm-up job was never answered");
    }
    assert_eq!(
        begun.load(Ordering::SeqCst),
        threads,
        "the pool's threads never ran at once"
    );
}

/// Run `jobs` GIL-holding jobs through `threads` threads, all queued at once
/// so that every thread is awake and they contend; every job must be
/// answered. The counters are those of the flood alone (not the warm-up's).
fn contend(threads: usize, turn: TurnConfig, jobs: usize) -> Counters {
    let config = Config {
        threads,
        backpressure: jobs,
    };
    let pool = Pool::start_with(config, turn, Arc::new(|| {})).unwrap();
    warm_up(&pool, threads);
    let before = pool.counters();
    let (tx, rx) = mpsc::channel();
    for _ in 0..jobs {
        assert!(pool
            .try_submit(gil_holding_job(Duration::from_micros(300), tx.clone()))
            .is_ok());
    }
    for i in 0..jobs {
        rx.recv_timeout(PATIENCE)
            .unwrap_or_else(|_| panic!("job {i} of {jobs} was never answered"));
    }
    let after = pool.counters();
    shutdown_detached(pool);
    Counters {
        kept: after.kept - before.kept,
        yields: after.yields - before.yields,
        yield_timeouts: after.yield_timeouts - before.yield_timeouts,
    }
}

/// The default policy: with the pool scheduled behind the cores
/// (`SCHED_BATCH`) a woken thread does not preempt the one holding the GIL,
/// so this test's threads rarely meet the contention the rules act on (the
/// fairness probe judges the batch-scheduled pool under real load).
const ON: TurnConfig = TurnConfig {
    turn: true,
    keep: true,
    debug: false,
    batch: false,
    defer_wake: true,
    core_batch: false,
};

#[test]
fn a_slice_takes_the_jobs_queued_behind_it_without_dropping_the_gil() {
    let c = contend(4, ON, 400);
    assert!(c.kept > 0, "no job was taken inside a slice: {c:?}");
}

#[test]
fn with_keep_off_every_job_drops_the_gil() {
    let c = contend(4, TurnConfig { keep: false, ..ON }, 400);
    assert_eq!(c.kept, 0, "{c:?}");
}

#[test]
fn the_barrier_hands_off_at_spent_slices() {
    let c = contend(4, TurnConfig { keep: false, ..ON }, 400);
    assert!(c.yields > 0, "no thread yielded to a waiter: {c:?}");
}

#[test]
fn with_the_turn_off_there_is_neither_barrier_nor_keep() {
    let c = contend(4, TurnConfig { turn: false, ..ON }, 400);
    assert_eq!((c.kept, c.yields), (0, 0), "{c:?}");
}

#[test]
fn a_pool_of_one_has_no_barrier() {
    let c = contend(1, ON, 200);
    assert_eq!((c.kept, c.yields), (0, 0), "{c:?}");
}

#[test]
fn a_shutdown_reaches_a_thread_inside_its_slice() {
    // Two threads contend so that runs begin; the queue is closed while they
    // keep taking jobs inside their slices: every queued job still runs, and
    // the threads leave without another submit to wake them.
    let config = Config {
        threads: 2,
        backpressure: 64,
    };
    let pool = Pool::start_with(config, ON, Arc::new(|| {})).unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..64 {
        let ran = ran.clone();
        let job: BoxedJob = Box::new(move |_py| {
            let end = Instant::now() + Duration::from_micros(200);
            while Instant::now() < end {
                std::hint::spin_loop();
            }
            ran.fetch_add(1, Ordering::SeqCst);
        });
        assert!(pool.try_submit(job).is_ok());
    }
    std::thread::sleep(Duration::from_millis(2));
    shutdown_detached(pool);
    assert_eq!(ran.load(Ordering::SeqCst), 64);
}

#[test]
fn a_process_confined_to_its_cores_cpus_batches_its_cores_not_its_pool() {
    let alone = TurnConfig::defaults(false);
    assert_eq!(alone, TurnConfig::default());
    assert!(alone.batch && !alone.defer_wake && !alone.core_batch);
    let confined = TurnConfig::defaults(true);
    assert!(!confined.batch && confined.defer_wake && confined.core_batch);
    assert!(confined.turn && confined.keep && !confined.debug);
}

/// The order in which `jobs` GIL-holding jobs, all queued at once, started
/// on `threads` contending threads (by submission index).
fn start_order(threads: usize, turn: TurnConfig, jobs: usize) -> Vec<usize> {
    let config = Config {
        threads,
        backpressure: jobs,
    };
    let pool = Pool::start_with(config, turn, Arc::new(|| {})).unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::with_capacity(jobs)));
    let (tx, rx) = mpsc::channel();
    for i in 0..jobs {
        let order = Arc::clone(&order);
        let done = gil_holding_job(Duration::from_micros(200), tx.clone());
        let job: BoxedJob = Box::new(move |py| {
            order.lock().unwrap().push(i);
            done(py);
        });
        assert!(pool.try_submit(job).is_ok());
    }
    for i in 0..jobs {
        rx.recv_timeout(PATIENCE)
            .unwrap_or_else(|_| panic!("job {i} of {jobs} was never answered"));
    }
    shutdown_detached(pool);
    let order = order.lock().unwrap().clone();
    order
}

/// Jobs that started after a job submitted after them.
fn overtaken(order: &[usize]) -> usize {
    order.windows(2).filter(|w| w[1] < w[0]).count()
}

#[test]
fn with_the_keep_rule_jobs_are_taken_under_the_gil_in_queue_order() {
    // Only the thread holding the GIL pops: no job waits in the hands of a
    // thread parked on the GIL while later ones are served.
    let order = start_order(4, ON, 1000);
    assert_eq!(overtaken(&order), 0, "{order:?}");
}

#[test]
fn popped_before_the_attach_jobs_are_overtaken() {
    // The negative arm: with the keep rule off, each thread pops its job and
    // then waits for the GIL, while the holder goes on with later jobs.
    // (Measured: 167-203 of 1000 overtaken; at 300 jobs some runs had none.)
    let order = start_order(4, TurnConfig { keep: false, ..ON }, 1000);
    assert!(overtaken(&order) > 0, "{order:?}");
}

/// The policy a pool thread runs its jobs under (SCHED_BATCH is Linux's).
#[cfg(target_os = "linux")]
fn job_policy(turn: TurnConfig) -> i32 {
    let pool = Pool::start_with(
        Config {
            threads: 1,
            backpressure: 1,
        },
        turn,
        Arc::new(|| {}),
    )
    .unwrap();
    let (tx, rx) = mpsc::channel();
    let job: BoxedJob = Box::new(move |_py| {
        // SAFETY: plain syscall about the calling thread.
        tx.send(unsafe { libc::sched_getscheduler(0) }).unwrap();
    });
    assert!(pool.try_submit(job).is_ok());
    let policy = rx.recv_timeout(PATIENCE).unwrap();
    shutdown_detached(pool);
    policy
}

#[cfg(target_os = "linux")]
#[test]
fn pool_threads_are_scheduled_behind_the_cores_unless_batch_is_off() {
    assert_eq!(job_policy(TurnConfig::default()), libc::SCHED_BATCH);
    assert_eq!(
        job_policy(TurnConfig {
            batch: false,
            ..TurnConfig::default()
        }),
        libc::SCHED_OTHER
    );
}
