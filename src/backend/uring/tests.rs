//! The shared conformance bodies, plus what only a completion loop can get
//! wrong: owed batches that nothing completes to announce, and the batch
//! bound's effect on a held connection, with its negative arm.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::backend::accept::Batch;
use crate::backend::testing::{self, echo, EchoService, Entry, Setup};

testing::conformance!(super::run::<EchoService>);

/// The same rules with single-shot accepts, as a worker of several runs
/// ([`crate::backend::CoreContext::rotate_accepts`]): a batch still drains
/// past one completion, and the limit still holds the rest in the backlog.
/// Not the hand-off body: it relies on the multishot sending every accept
/// to one core, where single-shots give a core busy in a view the one
/// connection its armed accept takes.
mod rotating {
    use crate::backend::testing::{self, EchoService};
    use crate::backend::CoreContext;

    fn run(mut ctx: CoreContext, service: EchoService) -> std::io::Result<()> {
        ctx.rotate_accepts = true;
        super::super::run(ctx, service)
    }

    macro_rules! bodies {
        ($($name:ident),* $(,)?) => {$(
            #[test]
            fn $name() {
                testing::$name(run)
            }
        )*};
    }

    bodies!(
        a_panicking_session_closes_only_its_connection,
        echo_on_many_connections,
        large_write_is_echoed_intact,
        file_output_is_sent_whole,
        accept_batch_serves_held_first_and_all_of_a_burst,
        deadline_fires,
        max_connections_holds_the_rest_in_the_backlog,
        graceful_shutdown_closes_idle_and_finishes_busy,
        shutdown_deadline_closes_busy_connections,
        notified_sessions_answer_and_resume_reading,
        a_session_not_reading_is_closed_when_its_peer_resets,
        a_notification_for_a_closed_session_is_ignored,
    );
}

fn spawn(batch: usize) -> testing::Harness {
    spawn_as(batch, false)
}

fn spawn_as(batch: usize, rotate_accepts: bool) -> testing::Harness {
    Setup {
        batch: Batch::new(batch),
        rotate_accepts,
        ..Setup::default()
    }
    .spawn(super::run::<EchoService>)
}

fn read_line(s: &mut TcpStream, want: &str) {
    let mut got = vec![0; want.len()];
    s.read_exact(&mut got).unwrap();
    assert_eq!(String::from_utf8_lossy(&got), want);
}

#[test]
fn owed_batches_admit_silent_connections_without_any_completion() {
    owed_batches_admit_silent_connections(false);
}

/// With single-shot accepts the ten wait in the backlog, not as
/// completions: the batch's refill takes them, and what it leaves is owed.
#[test]
fn owed_batches_admit_silent_connections_with_single_shot_accepts() {
    owed_batches_admit_silent_connections(true);
}

fn owed_batches_admit_silent_connections(rotate_accepts: bool) {
    let h = spawn_as(2, rotate_accepts);
    let mut blocker = h.connect();
    echo(&mut blocker, "warm\n");
    // Ten silent connections queue while the core is held in a view: one
    // reap brings all ten accepts, a batch admits two, and the rest are
    // owed. Their eager reads find nothing and no timer is armed, so
    // nothing would complete to end a wait that blocked while owing.
    h.hold(&mut blocker);
    let mut silent: Vec<TcpStream> = (0..10).map(|_| h.connect()).collect();
    h.release();
    read_line(&mut blocker, "hold\n");
    let opened = || h.journal().count(|e| matches!(e, Entry::Opened { .. }));
    let give_up = Instant::now() + Duration::from_secs(2);
    while opened() < 11 {
        assert!(
            Instant::now() < give_up,
            "only {} admitted: owed batches waited",
            opened()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    for (i, c) in silent.iter_mut().enumerate() {
        echo(c, &format!("late {i}\n"));
    }
    h.shutdown(Duration::from_secs(1));
}

/// Three connections, one after another, to a core sharing its listener
/// with a sibling ring whose thread never enters it again (a killed
/// worker's: see the uring crate's `a_ring_closed_after_its_wake_up_
/// strands_the_connection`); returns the first that got no answer
/// within 1 s. Whichever accept was queued first, the second connection
/// at the latest finds the sibling's at the head and the core's waiting
/// behind it, and wakes only the sibling.
fn stranded_behind_a_dead_sibling(recheck: Option<Duration>) -> Option<usize> {
    use m0serve_uring::{Config, Ring};
    use std::os::fd::{AsFd, OwnedFd};
    use std::sync::mpsc;

    let h = Setup {
        rotate_accepts: true,
        recheck,
        ..Setup::default()
    }
    .spawn(super::run::<EchoService>);
    let mut warm = h.connect();
    echo(&mut warm, "warm\n");
    // On a thread of its own that then only blocks: like a killed
    // worker's, its ring is never entered again.
    let (armed, end) = (mpsc::channel(), mpsc::channel::<()>());
    let listener: std::sync::Arc<OwnedFd> = h.listener().clone();
    let sibling = std::thread::spawn(move || {
        let mut ring = Ring::new(Config::default()).unwrap();
        assert!(ring.arm_accept_once(0, listener.as_fd()).unwrap());
        ring.submit().unwrap();
        armed.0.send(()).unwrap();
        let _ = end.1.recv();
    });
    armed.1.recv().unwrap();
    let mut clients = Vec::new();
    let stranded = (0..3).find(|i| {
        // The core's accept is armed again and waiting: an accept issued
        // after the wake-up would find the connection queued and take it.
        std::thread::sleep(Duration::from_millis(50));
        let mut c = h.connect();
        c.write_all(format!("{i}\n").as_bytes()).unwrap();
        let answered = !testing::silent_for(&mut c, Duration::from_secs(1));
        clients.push(c);
        !answered
    });
    end.0.send(()).unwrap();
    sibling.join().unwrap();
    h.shutdown(Duration::from_millis(100));
    stranded
}

#[test]
fn a_connection_a_dead_sibling_was_woken_for_is_taken_by_the_recheck() {
    assert_eq!(
        stranded_behind_a_dead_sibling(Some(Duration::from_millis(50))),
        None,
        "the recheck took every connection within 1 s"
    );
    // The negative arm: without it the connection waits for the next client.
    assert!(
        stranded_behind_a_dead_sibling(None).is_some(),
        "no connection was stranded without the recheck: the sibling took no wake-up"
    );
}

/// A held connection asks once a burst of slow admissions is under way;
/// returns how many of the burst the core served before it.
fn burst_served_before_a_held_request(batch: usize) -> usize {
    const BURST: usize = 10;
    let h = spawn(batch);
    let mut held = h.connect();
    let mut blocker = h.connect();
    echo(&mut held, "warm\n");
    echo(&mut blocker, "warm\n");
    h.hold(&mut blocker);
    let mut burst: Vec<TcpStream> = (0..BURST)
        .map(|_| {
            let mut c = h.connect();
            c.write_all(b"sleep 50\n").unwrap();
            c
        })
        .collect();
    h.release();
    read_line(&mut blocker, "hold\n");
    // The first of the burst answered: its batch is being admitted now.
    read_line(&mut burst[0], "sleep 50\n");
    echo(&mut held, "fast\n");
    for c in &mut burst[1..] {
        read_line(c, "sleep 50\n");
    }
    let lines = h.journal().lines();
    h.shutdown(Duration::from_secs(1));
    let fast = lines.iter().position(|l| l == "fast").unwrap();
    lines[..fast].iter().filter(|l| *l == "sleep 50").count()
}

#[test]
fn a_held_connection_waits_one_batch_not_the_whole_burst() {
    let with_batch = burst_served_before_a_held_request(2);
    assert!(
        with_batch <= 4,
        "{with_batch} of 10 served before the held request"
    );
    // The negative arm: a batch that drains everything makes it wait for all.
    let drained = burst_served_before_a_held_request(0);
    assert_eq!(drained, 10, "batch 0 should serve the whole burst first");
}
