//! The pool's bounded job queue: lock-free on the submit path, with parking
//! for idle pool threads.
//!
//! Submitters (core threads) push into a crossbeam [`ArrayQueue`]; they wake a
//! pool thread only if one is parked and not notified already, which two
//! atomic counts say, so a submit to a busy pool makes no syscall, nor does
//! one to a pool whose woken thread has not run yet. Parking uses a `Mutex` +
//! `Condvar`: a thread announces itself in `parked` while holding the mutex
//! and looks at the queue once more before it waits, and a waker takes the
//! same mutex before it notifies, so a wake cannot fall between that last
//! look and the wait.
//! (A stack of parked threads with `thread::park`/`unpark` would cost the same
//! futex wake; the condvar needs no list of threads and no unpark bookkeeping.)
//!
//! A refused push (queue full) owes the submitter a call to `on_room`: the
//! next pop pays it, once.
//!
//! Two pairs of threads race on "store, then look at the other side's store"
//! (Dekker's shape), and each side puts a `SeqCst` fence between its store and
//! its look, so at least one of the two sees the other:
//! - push (job in) / park (`parked` up): the pusher wakes the parker, or the
//!   parker sees the job;
//! - refused push (`refused` up) / pop (room made): the pop calls `on_room`,
//!   or the refused pusher's second try finds the room.

use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crossbeam_queue::ArrayQueue;

/// Called (from the popping thread) when a pop makes room after a refused push.
pub(crate) type OnRoom = Arc<dyn Fn() + Send + Sync>;

/// A bounded multi-producer multi-consumer job queue.
pub(crate) struct JobQueue<T> {
    jobs: ArrayQueue<T>,
    /// Set once: pushes are refused from then on, and `next_job` answers
    /// `None` once the queue is empty.
    closed: AtomicBool,
    /// A push was refused since the last pop paid `on_room`.
    refused: AtomicBool,
    /// Threads inside `park` (announced under `lock`).
    parked: AtomicUsize,
    /// Of those, how many a wake has notified already (changed under `lock`;
    /// at most `parked`). A notified thread leaves `park` only once it runs
    /// again, which may be a scheduler slice later; until then a push that
    /// looked at `parked` alone would notify again, a futex wake that finds
    /// nobody: measured, one wasted syscall per request on the core thread.
    woken: AtomicUsize,
    /// Notifies made, for the tests.
    #[cfg(test)]
    notifies: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
    on_room: OnRoom,
    /// A pop that leaves jobs queued wakes one more parked thread.
    chain: bool,
}

impl<T> JobQueue<T> {
    /// A queue that holds at most `capacity` (> 0) waiting jobs.
    pub(crate) fn new(capacity: usize, on_room: OnRoom) -> JobQueue<T> {
        JobQueue {
            jobs: ArrayQueue::new(capacity),
            closed: AtomicBool::new(false),
            refused: AtomicBool::new(false),
            parked: AtomicUsize::new(0),
            woken: AtomicUsize::new(0),
            #[cfg(test)]
            notifies: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            on_room,
            chain: false,
        }
    }

    /// Chain the wakes: each pop that leaves jobs queued wakes one more
    /// parked thread, for a queue whose jobs are pushed quietly and paid
    /// one [`JobQueue::wake`] per burst. Woken all at once, a burst's threads
    /// all queued for the GIL together, and the longer waits let CPython's
    /// forced switch (5 ms) take the GIL from a thread mid-job: the fairness
    /// probe's in-order arm, with one CPU spinning beside it, went over its
    /// bound in 4 of 5 runs (1 of 5 with a wake per push, 0 of 5 chained;
    /// with `sys.setswitchinterval(0.5)`, 0 of 5 either way). Woken in a
    /// chain, a thread joins as the one before it takes a job, so blocking
    /// views still get a thread each.
    pub(crate) fn chained(mut self) -> JobQueue<T> {
        self.chain = true;
        self
    }

    /// Whether pops chain the wakes ([`JobQueue::chained`]).
    pub(crate) fn is_chained(&self) -> bool {
        self.chain
    }

    /// Jobs waiting now.
    pub(crate) fn len(&self) -> usize {
        self.jobs.len()
    }

    /// Queue `job`, waking a parked thread if there is one. Hands the job back
    /// when the queue is full (then the next pop calls `on_room`) or closed.
    pub(crate) fn push(&self, job: T) -> Result<(), T> {
        if self.closed.load(Ordering::Acquire) {
            return Err(job);
        }
        match self.jobs.push(job) {
            Ok(()) => {
                self.wake_one();
                Ok(())
            }
            Err(job) => self.refuse(job),
        }
    }

    /// Queue `job` without waking anyone: the caller owes [`JobQueue::wake`]
    /// once its burst of pushes is over (a core thread, at the end of its
    /// pass). A refused push still owes `on_room` as with [`JobQueue::push`].
    pub(crate) fn push_quiet(&self, job: T) -> Result<(), T> {
        if self.closed.load(Ordering::Acquire) {
            return Err(job);
        }
        match self.jobs.push(job) {
            Ok(()) => Ok(()),
            Err(job) => self.refuse(job),
        }
    }

    /// Wake one parked thread for the jobs pushed quietly: no syscall when
    /// none is parked. The rest are woken in a chain, one by each pop that
    /// leaves jobs queued ([`JobQueue::chained`]). The fence pairs with
    /// `park`'s, as `push`'s does, so a thread parking meanwhile either sees
    /// the jobs or is counted here.
    pub(crate) fn wake(&self) {
        self.wake_one();
    }

    /// The full-queue path of `push`: owe `on_room`, then try once more. A pop
    /// that made room between the failed push and the flag saw no flag, and
    /// may be the last pop for a while (the refused submitter sends nothing
    /// until `on_room`). If the second try succeeds the flag stays up, and a
    /// later pop calls `on_room` once more than needed, which a retry callback
    /// tolerates.
    fn refuse(&self, job: T) -> Result<(), T> {
        self.refused.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        match self.jobs.push(job) {
            Ok(()) => {
                self.wake_one();
                Ok(())
            }
            Err(job) => Err(job),
        }
    }

    /// Take the next job, parking until one comes. `None` once the queue is
    /// closed and empty. Call it without the GIL: it may block.
    pub(crate) fn next_job(&self) -> Option<T> {
        loop {
            if let Some(job) = self.try_next_job() {
                return Some(job);
            }
            // Closed and empty. (No push races `close`: the pool closes in
            // `Pool::shutdown`, which owns the pool, so no submit is running.)
            if self.closed.load(Ordering::Acquire) {
                return None;
            }
            self.park();
        }
    }

    /// Park until a job is queued (true) or the queue is closed and empty
    /// (false), taking nothing. Call it without the GIL: it may block.
    pub(crate) fn wait_for_job(&self) -> bool {
        loop {
            if !self.jobs.is_empty() {
                return true;
            }
            if self.closed.load(Ordering::Acquire) {
                return false;
            }
            self.park();
        }
    }

    /// Take a job that is already queued: one non-blocking pop, never a spin
    /// or a park, so a thread may call it holding the GIL. Like every pop, it
    /// pays an owed `on_room` (a wake that neither blocks nor runs Python).
    pub(crate) fn try_next_job(&self) -> Option<T> {
        self.try_next_job_beside(|| false)
    }

    /// [`JobQueue::try_next_job`] by a thread that knows whether another is
    /// `standing_by` (asked only where the chain would wake one): waiting
    /// for the GIL, to take the queue's next jobs
    /// once it has it. The chain then wakes nobody, nor while a thread it
    /// woke is on its way: one thread ready to take over when this one's
    /// view blocks is what the chain is for, and each more would only queue
    /// for the GIL, a wake and two context switches apiece (in a worker
    /// whose pool shares its core's CPU, four threads cost 0.48 switches per
    /// request where one cost 0.18).
    pub(crate) fn try_next_job_beside(&self, standing_by: impl FnOnce() -> bool) -> Option<T> {
        let job = self.jobs.pop()?;
        self.room_made();
        if self.chain
            && !self.jobs.is_empty()
            && self.woken.load(Ordering::Relaxed) == 0
            && !standing_by()
        {
            self.wake_one();
        }
        Some(job)
    }

    /// Refuse further pushes and wake every parked thread, so each one drains
    /// what is queued and then sees `None`.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.wake.notify_all();
    }

    /// Pay a refused push its `on_room`, once.
    fn room_made(&self) {
        fence(Ordering::SeqCst);
        // The load keeps the common case (nothing owed) to a read of a shared
        // line; only an owed call pays for the swap.
        if self.refused.load(Ordering::Relaxed) && self.refused.swap(false, Ordering::Relaxed) {
            (self.on_room)();
        }
    }

    /// Wake one parked thread, if any not notified already: no syscall when
    /// none is parked, nor when every parked thread is on its way out.
    fn wake_one(&self) {
        fence(Ordering::SeqCst);
        // Acquire pairs with `park`'s release of `parked` (see there).
        if self.parked.load(Ordering::Acquire) > self.woken.load(Ordering::Relaxed) {
            let guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            // Exact under the lock. A thread counted in `parked` is waiting or
            // on its way out, so a notify wakes a sleeper if one is left.
            if self.parked.load(Ordering::Relaxed) <= self.woken.load(Ordering::Relaxed) {
                return;
            }
            self.woken.fetch_add(1, Ordering::Relaxed);
            // Notify after the unlock: notified under it, a sleeper on this
            // CPU preempts us, finds the mutex held and sleeps on it again,
            // and our unlock must wake it a second time (seen in the profile
            // of a worker whose pool shares the core's CPU,
            // bench/results/pool-wake-unlocked.md). Taking
            // the lock is what orders us after the parker's last look; the
            // notify need not be inside it.
            drop(guard);
            #[cfg(test)]
            self.notifies.fetch_add(1, Ordering::Relaxed);
            self.wake.notify_one();
        }
    }

    /// Sleep until a push or `close` wakes us (or a spurious wake: the caller
    /// loops).
    fn park(&self) {
        let mut guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.parked.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        // The last look, under the mutex a waker must take: a push after it
        // finds us counted and notifies only once we wait.
        if self.jobs.is_empty() && !self.closed.load(Ordering::Acquire) {
            guard = self
                .wake
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner);
        }
        // Still under the lock: leave, taking one notification with us (ours,
        // or, after a spurious wake, another's: its thread then takes none).
        // `woken` first, and `parked` released after it: a `wake_one` that
        // sees us gone from `parked` sees our `woken` gone too, so it never
        // reads a sleeper as notified (a lost wake); the other way round it
        // only notifies once too often.
        let woken = self.woken.load(Ordering::Relaxed);
        if woken > 0 {
            self.woken.store(woken - 1, Ordering::Relaxed);
        }
        self.parked.fetch_sub(1, Ordering::Release);
        drop(guard);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;
    use std::thread;
    use std::time::Duration;

    fn counting_queue(capacity: usize) -> (Arc<JobQueue<u32>>, Arc<AtomicUsize>) {
        let rooms = Arc::new(AtomicUsize::new(0));
        let counter = rooms.clone();
        let queue = JobQueue::new(
            capacity,
            Arc::new(move || {
                counter.fetch_add(1, Ordering::SeqCst);
            }),
        );
        (Arc::new(queue), rooms)
    }

    /// Parks `n` threads on `queue`, each sending what it took; waits until
    /// all are parked.
    fn parked_takers(queue: &Arc<JobQueue<u32>>, n: usize) -> mpsc::Receiver<u32> {
        let (tx, rx) = mpsc::channel();
        for _ in 0..n {
            let (queue, tx) = (queue.clone(), tx.clone());
            thread::spawn(move || {
                while let Some(job) = queue.next_job() {
                    tx.send(job).unwrap();
                }
            });
        }
        while queue.parked.load(Ordering::SeqCst) < n {
            thread::sleep(Duration::from_millis(1));
        }
        rx
    }

    #[test]
    fn a_quiet_push_wakes_nobody_until_the_owed_wake() {
        let (queue, _) = counting_queue(8);
        let rx = parked_takers(&queue, 2);
        queue.push_quiet(7).unwrap();
        queue.push_quiet(8).unwrap();
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "a parked thread took a quietly pushed job before the wake"
        );
        queue.wake();
        let mut got = [
            rx.recv_timeout(Duration::from_secs(5)).unwrap(),
            rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        ];
        got.sort();
        assert_eq!(got, [7, 8]);
        queue.close();
    }

    #[test]
    fn the_chain_wakes_nobody_while_a_thread_stands_by() {
        let queue = JobQueue::<u32>::new(8, Arc::new(|| {})).chained();
        for job in 0..4 {
            queue.push_quiet(job).unwrap();
        }
        // Two threads parked (counted as a parker counts itself; no real
        // thread needed to see whether a pop notifies).
        queue.parked.store(2, Ordering::SeqCst);
        assert_eq!(queue.try_next_job_beside(|| true), Some(0));
        assert_eq!(
            queue.notifies.load(Ordering::SeqCst),
            0,
            "woke one beside a thread standing by"
        );
        assert_eq!(queue.try_next_job_beside(|| false), Some(1));
        assert_eq!(
            queue.notifies.load(Ordering::SeqCst),
            1,
            "nobody stood by: the chain wakes one"
        );
        assert_eq!(queue.try_next_job_beside(|| false), Some(2));
        assert_eq!(
            queue.notifies.load(Ordering::SeqCst),
            1,
            "the thread just woken is on its way: no second one"
        );
        queue.parked.store(0, Ordering::SeqCst);
        queue.woken.store(0, Ordering::SeqCst);
    }

    #[test]
    fn the_owed_wake_reaches_as_many_threads_as_jobs_by_chain() {
        // Two jobs that each block their taker: both run only if two of the
        // three parked threads were woken, the second by the first's pop.
        let queue = Arc::new(JobQueue::<mpsc::Sender<()>>::new(8, Arc::new(|| {})).chained());
        let (started, starts) = mpsc::channel();
        let (release_tx, release) = mpsc::channel::<()>();
        let release = Arc::new(Mutex::new(release));
        for _ in 0..3 {
            let (queue, started, release) = (queue.clone(), started.clone(), release.clone());
            thread::spawn(move || {
                while let Some(done) = queue.next_job() {
                    started.send(()).unwrap();
                    let _ = release.lock().unwrap().recv_timeout(Duration::from_secs(5));
                    let _ = done.send(());
                }
            });
        }
        while queue.parked.load(Ordering::SeqCst) < 3 {
            thread::sleep(Duration::from_millis(1));
        }
        let (done, _dones) = mpsc::channel();
        queue.push_quiet(done.clone()).unwrap();
        queue.push_quiet(done).unwrap();
        queue.wake();
        starts.recv_timeout(Duration::from_secs(5)).unwrap();
        starts
            .recv_timeout(Duration::from_secs(5))
            .expect("the second job waited behind the first: one thread woken for two jobs");
        drop(release_tx);
        queue.close();
    }

    #[test]
    fn try_next_job_takes_queued_jobs_in_order() {
        let (queue, _) = counting_queue(4);
        for n in 0..3 {
            queue.push(n).unwrap();
        }
        assert_eq!(queue.try_next_job(), Some(0));
        assert_eq!(queue.try_next_job(), Some(1));
        assert_eq!(queue.try_next_job(), Some(2));
        assert_eq!(queue.try_next_job(), None);
    }

    #[test]
    fn try_next_job_on_an_empty_queue_answers_at_once() {
        // On a thread of its own, so a version that waits fails here within a
        // second instead of hanging the suite.
        let (queue, _) = counting_queue(4);
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || tx.send(queue.try_next_job()).unwrap());
        let got = rx.recv_timeout(Duration::from_secs(1));
        assert_eq!(got, Ok(None));
    }

    #[test]
    fn a_full_queue_refuses_and_the_next_pop_calls_on_room_once() {
        let (queue, rooms) = counting_queue(2);
        queue.push(1).unwrap();
        queue.push(2).unwrap();
        assert_eq!(queue.push(3), Err(3));
        assert_eq!(queue.push(4), Err(4));
        assert_eq!(rooms.load(Ordering::SeqCst), 0);
        assert_eq!(queue.try_next_job(), Some(1));
        assert_eq!(rooms.load(Ordering::SeqCst), 1);
        // The debt is paid: later pops owe nothing.
        assert_eq!(queue.next_job(), Some(2));
        assert_eq!(rooms.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_pop_between_a_failed_push_and_its_refusal_does_not_strand_it() {
        // The race, one step at a time: the push finds the queue full, a
        // consumer pops (seeing no refusal, so no `on_room`), then the push
        // records its refusal. The push must take the room it missed.
        let (queue, rooms) = counting_queue(1);
        queue.push(1).unwrap();
        let job = queue.jobs.push(2).unwrap_err();
        assert_eq!(queue.try_next_job(), Some(1));
        assert_eq!(rooms.load(Ordering::SeqCst), 0);
        assert_eq!(queue.refuse(job), Ok(()));
        assert_eq!(queue.try_next_job(), Some(2));
    }

    #[test]
    fn pops_without_a_refusal_never_call_on_room() {
        let (queue, rooms) = counting_queue(2);
        for n in 0..10 {
            queue.push(n).unwrap();
            assert_eq!(queue.next_job(), Some(n));
        }
        assert_eq!(rooms.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_parked_thread_is_notified_once_however_many_jobs_follow() {
        // Each round: one thread parked, then three pushes back to back. The
        // first notifies; the taker then waits at a gate after each job, so
        // it cannot park again before the round ends, and the other two
        // pushes come while it is on its way out of `park` (or gone from it):
        // neither may notify it again.
        let (queue, _) = counting_queue(8);
        let (tx, rx) = mpsc::channel();
        let (gate, gated) = mpsc::channel::<()>();
        let taker = {
            let queue = queue.clone();
            thread::spawn(move || {
                while let Some(job) = queue.next_job() {
                    tx.send(job).unwrap();
                    if gated.recv().is_err() {
                        return;
                    }
                }
            })
        };
        for round in 0..50u32 {
            while queue.parked.load(Ordering::SeqCst) == 0 {
                thread::yield_now();
            }
            let before = queue.notifies.load(Ordering::SeqCst);
            for n in 0..3 {
                queue.push(round * 3 + n).unwrap();
            }
            let notified = queue.notifies.load(Ordering::SeqCst) - before;
            for n in 0..3 {
                assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(round * 3 + n));
                gate.send(()).unwrap();
            }
            assert_eq!(
                notified, 1,
                "round {round}: a thread already notified was notified again"
            );
        }
        queue.close();
        taker.join().unwrap();
    }

    #[test]
    fn a_push_wakes_a_parked_thread() {
        let (queue, _) = counting_queue(2);
        let (tx, rx) = mpsc::channel();
        let consumer = {
            let queue = queue.clone();
            thread::spawn(move || tx.send(queue.next_job()).unwrap())
        };
        // Wait until the consumer is parked, so the push must wake it.
        while queue.parked.load(Ordering::SeqCst) == 0 {
            thread::yield_now();
        }
        queue.push(7).unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(Some(7)));
        consumer.join().unwrap();
    }

    #[test]
    fn park_does_not_sleep_on_a_job_pushed_before_it() {
        // The race, one step at a time: a consumer finds the queue empty, a
        // push finds nobody parked (so wakes nobody), then the consumer parks.
        // Its last look must see the job; on a thread of its own, so a park
        // that sleeps fails here instead of hanging the suite.
        let (queue, _) = counting_queue(2);
        assert_eq!(queue.try_next_job(), None);
        queue.push(5).unwrap();
        let (tx, rx) = mpsc::channel();
        let parker = queue.clone();
        thread::spawn(move || {
            parker.park();
            tx.send(()).unwrap();
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(1)), Ok(()));
        assert_eq!(queue.try_next_job(), Some(5));
    }

    #[test]
    fn close_refuses_pushes_and_lets_parked_threads_drain_then_leave() {
        let (queue, _) = counting_queue(4);
        let consumers: Vec<_> = (0..3)
            .map(|_| {
                let queue = queue.clone();
                thread::spawn(move || {
                    let mut took = Vec::new();
                    while let Some(job) = queue.next_job() {
                        took.push(job);
                    }
                    took
                })
            })
            .collect();
        while queue.parked.load(Ordering::SeqCst) < 3 {
            thread::yield_now();
        }
        queue.push(1).unwrap();
        queue.push(2).unwrap();
        queue.close();
        assert_eq!(queue.push(3), Err(3));
        let mut took: Vec<u32> = consumers
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .collect();
        took.sort();
        assert_eq!(took, vec![1, 2]);
    }

    /// Push `per_producer` jobs from each producer through a queue of one,
    /// retrying only when `on_room` says so (with a timeout that fails the
    /// test): a lost wake or a lost `on_room` stalls a producer.
    fn stress(producer_count: u32, consumer_count: usize, per_producer: u32) {
        let room = Arc::new((Mutex::new(0u64), Condvar::new()));
        let signal = room.clone();
        let queue: Arc<JobQueue<u32>> = Arc::new(JobQueue::new(
            1,
            Arc::new(move || {
                *signal.0.lock().unwrap() += 1;
                signal.1.notify_all();
            }),
        ));
        let consumers: Vec<_> = (0..consumer_count)
            .map(|_| {
                let queue = queue.clone();
                thread::spawn(move || {
                    let mut sum = 0u64;
                    while let Some(job) = queue.next_job() {
                        sum += u64::from(job);
                    }
                    sum
                })
            })
            .collect();
        let producers: Vec<_> = (0..producer_count)
            .map(|_| {
                let queue = queue.clone();
                let room = room.clone();
                thread::spawn(move || {
                    for n in 1..=per_producer {
                        let mut job = n;
                        loop {
                            let seen = *room.0.lock().unwrap();
                            match queue.push(job) {
                                Ok(()) => break,
                                Err(back) => job = back,
                            }
                            let guard = room.0.lock().unwrap();
                            let (_guard, waited) = room
                                .1
                                .wait_timeout_while(guard, Duration::from_secs(5), |calls| {
                                    *calls == seen
                                })
                                .unwrap();
                            assert!(!waited.timed_out(), "on_room never came");
                        }
                    }
                })
            })
            .collect();
        for producer in producers {
            producer.join().unwrap();
        }
        queue.close();
        let total: u64 = consumers.into_iter().map(|c| c.join().unwrap()).sum();
        let per = u64::from(per_producer);
        assert_eq!(total, u64::from(producer_count) * per * (per + 1) / 2);
    }

    #[test]
    fn one_producer_and_one_consumer_lose_no_job_and_no_wake() {
        // Nobody else pushes, so a pop that missed the refusal is the last.
        stress(1, 1, 50_000);
    }

    #[test]
    fn many_producers_and_consumers_lose_no_job_and_no_wake() {
        stress(2, 3, 10_000);
    }
}
