//! Rolling restarts (SIGHUP and `--reload`): one replacement at a time,
//! the old worker drained only once the new one is READY, and a failed
//! replacement that leaves the old workers serving.

use signal_hook::consts::{SIGHUP, SIGINT, SIGKILL, SIGTERM};

use super::harness::{config, logged, logs, ms, secs, signals, spawns, Sim};
use super::{Action, Event, Level};
use crate::supervisor::reload::DEBOUNCE;

#[test]
fn a_roll_replaces_one_worker_at_a_time_and_drains_the_old_once_the_new_is_ready() {
    let mut sim = Sim::booted(config(2));
    let hup = sim.signal(SIGHUP);
    assert!(
        logged(&hup, "SIGHUP: rolling restart of 2 worker(s)"),
        "{hup:?}"
    );
    assert_eq!(spawns(&hup), [(1, true)]);
    assert!(hup.contains(&Action::Rolling(true)), "{hup:?}");
    assert!(logs(&hup, Level::Info).contains(&"worker 1 started (pid 102)"));
    assert!(signals(&hup).is_empty());

    let again = sim.signal(SIGHUP);
    assert_eq!(
        logs(&again, Level::Info),
        ["SIGHUP: a rolling restart is already under way"]
    );
    assert!(spawns(&again).is_empty());
    assert!(!again.contains(&Action::Rolling(true)), "{again:?}");

    let first = sim.ready(102);
    assert_eq!(signals(&first), [(100, SIGTERM)]);
    assert!(first.contains(&Action::Restarted {
        number: 1,
        cause: "rolling_restart"
    }));
    assert!(logged(
        &first,
        "rolling restart: draining worker 1 (pid 100)"
    ));
    assert_eq!(spawns(&first), [(2, true)]);
    assert!(!logged(&first, "rolling restart done"));
    assert!(!first.contains(&Action::Rolling(false)));

    let second = sim.ready(103);
    assert_eq!(signals(&second), [(101, SIGTERM)]);
    assert!(logged(&second, "rolling restart done"));
    assert!(second.contains(&Action::Rolling(false)), "{second:?}");

    let drained = sim.exit(100, 0);
    assert_eq!(
        logs(&drained, Level::Info),
        ["worker 1 (pid 100) drained: exit status 0"]
    );
    assert_eq!(sim.m.live(), [102, 103, 101]);
}

#[test]
fn a_roll_whose_replacement_fails_leaves_the_old_workers_serving() {
    let mut sim = Sim::booted(config(2));
    sim.signal(SIGHUP);
    let failed = sim.exit(102, 2);
    assert_eq!(
        logs(&failed, Level::Error),
        ["rolling restart stopped: the new worker 1 (pid 102) failed before it was ready (exit status 2); the old one keeps serving"]
    );
    assert!(signals(&failed).is_empty());
    assert!(
        spawns(&failed).is_empty(),
        "the rest of the roll is dropped"
    );
    assert!(failed.contains(&Action::Rolling(false)), "{failed:?}");
    assert_eq!(sim.m.live(), [100, 101]);
    assert!(sim.at(secs(5)).tick().is_empty());

    // A replacement that cannot even start stops the roll the same way.
    sim.fail.push(1);
    let unstarted = sim.signal(SIGHUP);
    assert_eq!(spawns(&unstarted), [(1, true)]);
    assert_eq!(
        logs(&unstarted, Level::Error),
        ["rolling restart stopped: starting worker 1: No such file or directory"]
    );
    assert!(!logged(&unstarted, "rolling restart done"));

    // The next SIGHUP is a roll of its own.
    assert_eq!(spawns(&sim.signal(SIGHUP)), [(1, true)]);
}

#[test]
fn a_reload_rolls_once_changes_are_quiet_and_a_broken_edit_keeps_the_old_workers() {
    let mut sim = Sim::booted(config(2));
    sim.feed(Event::Changed(vec!["b.py".into(), "a.py".into()]));
    assert_eq!(sim.m.next_due(), Some(sim.now + DEBOUNCE));
    sim.at(ms(100)).feed(Event::Changed(vec!["a.py".into()]));
    assert!(
        sim.at(ms(349)).tick().is_empty(),
        "each change restarts the wait"
    );

    let roll = sim.at(ms(350)).tick();
    assert_eq!(
        logs(&roll, Level::Info)[0],
        "--reload: a.py and 1 more changed: rolling 2 worker(s)"
    );
    assert_eq!(spawns(&roll), [(1, true)]);

    let broken = sim.exit(102, 1);
    assert!(
        logged(
            &broken,
            "reload stopped: the new worker 1 (pid 102) failed before it was ready (exit status 1)"
        ),
        "{broken:?}"
    );
    assert!(spawns(&broken).is_empty());

    // The next good edit rolls again.
    sim.feed(Event::Changed(vec!["a.py".into()]));
    let next = sim.at(ms(350) + DEBOUNCE).tick();
    assert!(logged(&next, "--reload: a.py changed: rolling 2 worker(s)"));
    let first = sim.ready(103);
    assert!(first.contains(&Action::Restarted {
        number: 1,
        cause: "reload"
    }));
    assert!(logged(&first, "reload: draining worker 1 (pid 100)"));
}

#[test]
fn a_reload_retries_a_slot_in_backoff_at_once() {
    let mut sim = Sim::booted(config(1));
    sim.at(ms(500)).exit(100, 1); // not yet healthy: 100 ms
    assert_eq!(spawns(&sim.at(ms(600)).tick()), [(1, false)]);
    sim.exit(101, 1); // 200 ms
    assert_eq!(spawns(&sim.at(ms(800)).tick()), [(1, false)]);
    sim.exit(102, 1); // 400 ms: past the debounce
    sim.feed(Event::Changed(vec!["app.py".into()]));
    let reload = sim.at(ms(800) + DEBOUNCE).tick();
    assert!(logged(&reload, "--reload: app.py changed"), "{reload:?}");
    assert!(spawns(&reload).is_empty());
    // Pulled in to now, and started at the next tick.
    assert_eq!(sim.m.next_due(), Some(sim.now));
    assert_eq!(spawns(&sim.tick()), [(1, false)]);
}

#[test]
fn sigterm_during_a_roll_stops_every_worker_and_the_roll() {
    let mut sim = Sim::booted(config(2));
    sim.signal(SIGHUP); // replacement 102 for slot 1
    let term = sim.signal(SIGTERM);
    assert_eq!(
        signals(&term),
        [(100, SIGTERM), (102, SIGTERM), (101, SIGTERM)]
    );
    assert!(spawns(&term).is_empty());
    assert!(
        !term.contains(&Action::ShutListener),
        "the ready ones ack first"
    );
    assert!(sim.signal(SIGHUP).is_empty());
    assert!(sim.signal(SIGINT).is_empty());

    assert!(!sim.draining(100).contains(&Action::ShutListener));
    assert_eq!(sim.draining(101), [Action::ShutListener]);

    // The replacement's end is no failed roll, and the roll goes no further.
    assert!(sim.killed(102, SIGTERM).is_empty());
    assert_eq!(
        logs(&sim.exit(100, 0), Level::Info),
        ["worker 1 (pid 100) stopped: exit status 0"]
    );
    assert!(sim.tick().is_empty());
    sim.killed(101, SIGKILL);
    assert_eq!(sim.tick(), [Action::Exit(0)]);
}
