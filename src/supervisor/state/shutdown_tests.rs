//! The supervisor's own shutdown: the drain, the listener shut once the
//! workers acknowledged it, SIGKILL past the graceful timeout, the exit;
//! the shutdown delay; and the readiness flag along the way.

use signal_hook::consts::{SIGHUP, SIGINT, SIGKILL, SIGTERM};

use super::harness::{config, logged, logs, ms, secs, signals, spawns, Sim};
use super::{Action, Config, Event, Level, DRAIN_ACK};

fn delayed() -> Config {
    Config {
        shutdown_delay: secs(5),
        readiness: true,
        ..config(2)
    }
}

fn publishes(actions: &[Action]) -> Vec<bool> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Publish(ready) => Some(*ready),
            _ => None,
        })
        .collect()
}

#[test]
fn sigterm_drains_every_worker_shuts_the_listener_and_kills_stragglers() {
    let mut sim = Sim::booted(config(2));
    let term = sim.signal(SIGTERM);
    assert_eq!(
        logs(&term, Level::Info),
        ["SIGTERM: stopping the workers (graceful timeout 30s)"]
    );
    assert_eq!(signals(&term), [(100, SIGTERM), (101, SIGTERM)]);
    assert!(term.contains(&Action::Stopping), "{term:?}");
    assert!(!term.contains(&Action::ShutListener));
    // Neither says its drain began: the listener is shut regardless.
    assert_eq!(sim.m.next_due(), Some(sim.now + DRAIN_ACK));
    assert!(sim.at(ms(49)).tick().is_empty());
    assert_eq!(sim.at(ms(50)).tick(), [Action::ShutListener]);
    assert!(sim.signal(SIGTERM).is_empty());
    assert!(sim.signal(SIGINT).is_empty());

    assert_eq!(
        logs(&sim.exit(100, 0), Level::Info),
        ["worker 1 (pid 100) stopped: exit status 0"]
    );
    // Graceful timeout and margin: SIGKILL, and again each second after.
    assert_eq!(sim.m.next_due(), Some(sim.t0 + secs(35)));
    assert!(sim.at(secs(35) - ms(1)).tick().is_empty());
    let kill = [
        Action::Log(
            Level::Warn,
            "worker 2 (pid 101) still running: killing it".into(),
        ),
        Action::Signal {
            pid: 101,
            signal: SIGKILL,
        },
    ];
    assert_eq!(sim.at(secs(35)).tick(), kill);
    assert_eq!(sim.m.next_due(), Some(sim.t0 + secs(36)));
    assert_eq!(sim.at(secs(36)).tick(), kill);
    sim.killed(101, SIGKILL);
    assert_eq!(sim.tick(), [Action::Exit(0)]);
}

#[test]
fn the_listener_is_shut_as_soon_as_the_ready_workers_said_their_drain_began() {
    let mut sim = Sim::booted(config(3));
    sim.signal(SIGINT);
    assert!(sim.draining(100).is_empty());
    // One that exits without a word is waited for no longer.
    assert!(!sim.exit(101, 0).contains(&Action::ShutListener));
    assert!(sim.draining(102).contains(&Action::ShutListener));
    assert!(sim.at(DRAIN_ACK).tick().is_empty(), "shut once");
}

#[test]
fn the_shutdown_delay_says_503_serves_on_then_drains() {
    let mut sim = Sim::booted(delayed());
    let term = sim.signal(SIGTERM);
    assert_eq!(term[0], Action::Publish(false), "before the log line");
    assert!(logged(&term, "SIGTERM: shutdown delay of 5s: readiness answers 503, the workers serve on, then drain (graceful timeout 30s); SIGTERM again drains now"));
    assert!(signals(&term).is_empty());
    assert_eq!(
        logs(&sim.signal(SIGHUP), Level::Info),
        ["SIGHUP during the shutdown delay: ignored"]
    );
    assert_eq!(sim.m.next_due(), Some(sim.t0 + secs(5)));
    assert!(sim.at(secs(4)).tick().is_empty());
    let over = sim.at(secs(5)).tick();
    assert!(logged(
        &over,
        "SIGTERM: the shutdown delay is over: stopping the workers (graceful timeout 30s)"
    ));
    assert_eq!(signals(&over), [(100, SIGTERM), (101, SIGTERM)]);
    assert!(publishes(&over).is_empty(), "503 already");
}

#[test]
fn the_signal_again_or_a_worker_draining_itself_cuts_the_delay_short() {
    let mut sim = Sim::booted(delayed());
    sim.signal(SIGINT);
    let again = sim.at(secs(1)).signal(SIGINT);
    assert!(logged(&again, "SIGINT again: the shutdown delay is cut short: stopping the workers (graceful timeout 30s)"));
    assert_eq!(signals(&again), [(100, SIGINT), (101, SIGINT)]);

    let mut sim = Sim::booted(delayed());
    sim.signal(SIGINT);
    sim.at(secs(1)).draining(101);
    let cut = sim.tick();
    assert!(logged(
        &cut,
        "worker 2 (pid 101) began its drain itself: the shutdown delay is cut short"
    ));
    assert_eq!(signals(&cut), [(100, SIGINT), (101, SIGINT)]);
}

#[test]
fn readiness_is_set_once_all_came_up_and_cleared_only_with_none_serving() {
    let mut sim = Sim::new(delayed());
    sim.start();
    assert!(publishes(&sim.ready(100)).is_empty(), "not all up yet");
    let up = sim.ready(101);
    assert_eq!(up[0], Action::Publish(true), "before the ready line");
    // One crash leaves a sibling serving: still ready.
    assert!(publishes(&sim.at(secs(2)).killed(100, SIGKILL)).is_empty());
    let none = sim.killed(101, SIGKILL);
    assert_eq!(none[0], Action::Publish(false), "before the exit's line");
    sim.tick();
    assert_eq!(publishes(&sim.ready(102)), [true]);
    // A roll keeps it set: each old worker stays until its replacement is up.
    sim.ready(103);
    sim.signal(SIGHUP);
    assert!(publishes(&sim.ready(104)).is_empty());
    assert!(publishes(&sim.ready(105)).is_empty());
    // Without --ready-path there is no flag to keep.
    let mut sim = Sim::booted(config(1));
    assert!(publishes(&sim.signal(SIGTERM)).is_empty());
}

#[test]
fn a_worker_started_in_the_turn_the_drain_begins_is_stopped_with_the_rest() {
    let mut sim = Sim::booted(delayed());
    sim.signal(SIGTERM);
    // Healthy, so its restart is due at once; the delay ends at that tick.
    sim.at(secs(4)).killed(100, SIGKILL);
    let over = sim.at(secs(5)).tick();
    assert_eq!(spawns(&over), [(1, false)], "restarted before the drain");
    // The new worker's signal comes with its start's answer, first.
    assert_eq!(signals(&over), [(102, SIGTERM), (101, SIGTERM)]);
    // A start nobody asked for is drained at once.
    let stray = sim.feed(Event::Spawned {
        number: 1,
        pid: 999,
    });
    assert_eq!(signals(&stray), [(999, SIGTERM)]);
}
