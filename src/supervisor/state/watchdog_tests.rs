//! `--worker-timeout`: a silent worker's tracebacks, its kill and its
//! replacement; who is not watched.

use signal_hook::consts::{SIGKILL, SIGTERM};

use super::harness::{config, logged, logs, ms, secs, signals, spawns, Sim};
use super::watchdog::DUMP_WAIT;
use super::{Action, Config, Level};
use crate::supervisor::link::TRACEBACKS;

fn watched(workers: usize, timeout: u64) -> Config {
    Config {
        worker_timeout: Some(secs(timeout)),
        ..config(workers)
    }
}

#[test]
fn a_silent_worker_has_its_tracebacks_written_then_is_killed_and_replaced() {
    let mut sim = Sim::booted(watched(2, 2));
    sim.at(secs(10));
    sim.heartbeat(100, ms(500));
    sim.heartbeat(101, ms(1900));
    assert!(signals(&sim.tick()).is_empty(), "neither silent for 2 s");
    assert_eq!(
        sim.m.next_due(),
        Some(sim.t0 + ms(10_100)),
        "when 101 would be"
    );

    sim.at(ms(10_100));
    sim.heartbeat(100, ms(200));
    let found = sim.tick();
    assert_eq!(signals(&found), [(101, TRACEBACKS)]);
    assert_eq!(
        logs(&found, Level::Warn),
        ["worker 2 (pid 101) silent for 2.0s (--worker-timeout 2s): its threads' tracebacks follow; killing it"]
    );
    assert_eq!(sim.m.next_due(), Some(sim.t0 + ms(10_100) + DUMP_WAIT));
    sim.at(ms(10_600));
    assert!(
        signals(&sim.tick()).is_empty(),
        "the tracebacks are given their time"
    );
    sim.at(ms(10_100) + DUMP_WAIT);
    assert_eq!(signals(&sim.tick()), [(101, SIGKILL)]);
    sim.at(ms(11_200));
    assert!(signals(&sim.tick()).is_empty(), "killed once");

    let exit = sim.killed(101, SIGKILL);
    assert!(exit.contains(&Action::Restarted {
        number: 2,
        cause: "hung"
    }));
    assert_eq!(
        logs(&exit, Level::Info),
        ["worker 2 (pid 101) was killed as hung: killed by SIGKILL; restarting it"]
    );
    assert!(
        logs(&exit, Level::Warn).is_empty(),
        "the watchdog's line said why"
    );
    assert_eq!(spawns(&sim.tick()), [(2, false)], "replaced at once");
}

#[test]
fn a_worker_is_watched_from_its_ready_not_through_its_import() {
    let mut sim = Sim::new(watched(1, 2));
    sim.start();
    // Importing for a minute: its cores have not stamped, nothing claimed.
    sim.at(secs(60));
    assert!(signals(&sim.tick()).is_empty());
    sim.ready(100);
    // A stamp from before READY is no lapse.
    sim.heartbeat(100, secs(50));
    assert!(signals(&sim.tick()).is_empty());
    sim.at(ms(61_900));
    sim.heartbeat(100, secs(51));
    assert!(signals(&sim.tick()).is_empty());
    sim.at(ms(62_000));
    assert_eq!(signals(&sim.tick()), [(100, TRACEBACKS)]);
}

#[test]
fn a_heartbeat_that_goes_on_keeps_the_worker() {
    let mut sim = Sim::booted(watched(1, 2));
    for s in 1..30 {
        sim.at(secs(s));
        sim.heartbeat(100, ms(900));
        assert!(signals(&sim.tick()).is_empty(), "at {s} s");
    }
}

#[test]
fn without_a_timeout_nobody_is_watched() {
    let mut sim = Sim::booted(config(1));
    sim.at(secs(3600));
    sim.heartbeat(100, secs(3600));
    assert!(signals(&sim.tick()).is_empty());
    assert_eq!(sim.m.next_due(), None);
}

#[test]
fn a_draining_worker_and_a_stopping_supervisor_are_left_to_the_graceful_timeout() {
    let mut sim = Sim::booted(watched(2, 2));
    // SIGTERMed by someone else: it drains in its slot until it exits.
    sim.draining(100);
    sim.at(secs(10));
    sim.heartbeat(100, secs(10));
    sim.heartbeat(101, ms(100));
    let tick = sim.tick();
    assert!(signals(&tick).is_empty(), "{tick:?}");

    // A roll's old worker, out of its slot.
    let mut sim = Sim::booted(watched(1, 2));
    sim.signal(libc::SIGHUP);
    sim.ready(101);
    sim.at(secs(10));
    sim.heartbeat(100, secs(10));
    sim.heartbeat(101, ms(100));
    assert!(signals(&sim.tick()).is_empty());

    let mut sim = Sim::booted(watched(1, 2));
    sim.signal(SIGTERM);
    sim.at(secs(10));
    sim.heartbeat(100, secs(10));
    assert!(!signals(&sim.tick()).contains(&(100, TRACEBACKS)));
}

#[test]
fn a_silent_worker_that_exits_before_its_kill_is_replaced_all_the_same() {
    let mut sim = Sim::booted(watched(1, 2));
    sim.at(secs(5));
    sim.heartbeat(100, secs(3));
    assert_eq!(signals(&sim.tick()), [(100, TRACEBACKS)]);
    // No faulthandler installed: the signal's default ends it.
    let exit = sim.killed(100, TRACEBACKS);
    assert!(logged(&exit, "was killed as hung"));
    assert_eq!(spawns(&sim.tick()), [(1, false)]);
    sim.at(secs(7));
    assert!(
        signals(&sim.tick()).is_empty(),
        "the new worker is not ready yet"
    );
}
