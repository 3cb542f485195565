//! How the kernel schedules the threads that run Python.
//!
//! A core thread hands a request to a pool thread (or the ASGI loop thread)
//! and wakes it. Where that thread is woken onto the core's own CPU, as it
//! is when the other CPUs are busy (a pinned pod, a load generator beside
//! the server, a worker confined to one CPU), the default policy lets the
//! woken thread preempt the core mid-pass: the two then ping-pong, one
//! request at a time, each switch costing both their caches. `SCHED_BATCH`
//! takes away only that wake-up preemption (same weight, same share of the
//! CPU, same placement on idle CPUs): the Python thread runs once the core
//! parks or its slice ends, and then finds the whole pass's requests queued,
//! which the GIL turn's keep rule serves in one attach. It raised WSGI
//! hello's requests per second and cut its CPU per request and its p99, the
//! most with the default four pool threads, and left ASGI hello about where
//! it was (bench/pool_batch.sh, bench/results/pool-wakes.md). The fairness
//! probe holds either way.
//! A worker confined to its cores' CPUs keeps the default policy for its
//! Python threads and puts its core threads behind them instead
//! ([`core_behind_app`]; [`crate::TurnConfig::defaults`]).

/// Schedule the calling thread as `SCHED_BATCH` (Linux; elsewhere nothing).
/// Call it at the start of a thread that runs Python for the core threads,
/// where [`crate::TurnConfig::batch`] says so. A refusal (a seccomp profile)
/// is ignored: the thread merely keeps the default policy.
pub fn behind_cores() {
    batch_this_thread();
}

/// Schedule the calling core thread behind the app's threads that share its
/// CPU; call it where [`crate::TurnConfig::core_batch`] says so: the mirror image of
/// [`behind_cores`], for a worker confined to its cores' CPUs.
///
/// There the pool thread and the core take turns on one CPU, and each
/// answer the pool finished woke the core, which preempted the pool to
/// write it: a context switch per answer or two, and one job per run.
/// Behind the pool, a woken core runs once the pool parks or its slice
/// ends, and finds the whole run's answers; the pool then finds the whole
/// pass's requests: fewer context switches and less CPU per request, with
/// `--workers 2 --cores 1` against `M0_CORE_BATCH=0`
/// (bench/results/core-batch-*.md). Only one side of the pair may be
/// batched: with both (tried in a single process, whose pool is behind its
/// cores already), a request on a CPU that another process spins on waits
/// out that process's slice at each hop (docs/design/detached-loop.md).
pub fn core_behind_app() {
    batch_this_thread();
}

fn batch_this_thread() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_param is plain integers (musl's has more fields than
        // glibc's), for which all zeroes is a value: priority 0, as BATCH needs.
        let param: libc::sched_param = unsafe { std::mem::zeroed() };
        // The system call, not the libc function: musl's always answers
        // ENOSYS (it leaves scheduling policy to pthread_setschedparam).
        // SAFETY: sched_setscheduler(2) on the calling thread (pid 0), with a
        // valid parameter block on this stack frame for the call's duration.
        unsafe {
            libc::syscall(
                libc::SYS_sched_setscheduler,
                0,
                libc::SCHED_BATCH,
                &param as *const libc::sched_param,
            )
        };
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn the_calling_thread_becomes_batch_scheduled() {
        std::thread::spawn(|| {
            // SAFETY: plain syscall on the calling thread.
            let before = unsafe { libc::sched_getscheduler(0) };
            assert_eq!(before, libc::SCHED_OTHER);
            super::behind_cores();
            // SAFETY: as above.
            assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_BATCH);
        })
        .join()
        .unwrap();
    }
}
