//! Recycling a healthy worker: by requests, lifetime and resident memory,
//! through the replacement queue, and a failed replacement's backoff.

use signal_hook::consts::SIGTERM;

use super::harness::{config, logged, logs, ms, secs, signals, spawns, Sim};
use super::{Action, Config, Event, Level, Said};
use crate::supervisor::recycle::Recycle;

fn served_all() -> Said {
    Said {
        served_all: true,
        ..Said::default()
    }
}

fn with(recycle: Recycle) -> Config {
    Config {
        recycle,
        ..config(2)
    }
}

#[test]
fn a_worker_that_served_its_requests_is_replaced_then_drained() {
    let mut sim = Sim::booted(config(2));
    assert!(sim.say(100, served_all()).is_empty());
    assert!(sim.m.next_due().is_some_and(|at| at <= sim.now));
    let recycle = sim.tick();
    assert_eq!(
        logs(&recycle, Level::Info)[0],
        "worker 1 (pid 100) served its --workers-max-requests: recycling it"
    );
    assert_eq!(spawns(&recycle), [(1, true)]);
    let ready = sim.ready(102);
    assert!(ready.contains(&Action::Restarted {
        number: 1,
        cause: "max_requests"
    }));
    assert!(logged(&ready, "recycled: draining worker 1 (pid 100)"));
    assert_eq!(signals(&ready), [(100, SIGTERM)]);
    assert!(!logged(&ready, "rolling restart done"));
    assert!(sim.tick().is_empty());
}

#[test]
fn a_worker_whose_threads_are_all_stuck_is_replaced_ready_first() {
    let mut sim = Sim::booted(config(2));
    let stuck = Said {
        stuck: true,
        ..Said::default()
    };
    assert!(sim.say(101, stuck).is_empty());
    let recycle = sim.tick();
    assert_eq!(
        logs(&recycle, Level::Info)[0],
        "worker 2 (pid 101) has every thread stuck past --request-timeout: recycling it"
    );
    assert_eq!(spawns(&recycle), [(2, true)]);
    assert!(
        signals(&recycle).is_empty(),
        "not drained before its replacement is ready"
    );
    let ready = sim.ready(102);
    assert!(ready.contains(&Action::Restarted {
        number: 2,
        cause: "stuck"
    }));
    assert_eq!(signals(&ready), [(101, SIGTERM)]);
}

#[test]
fn lifetimes_of_the_first_generation_are_spread_and_later_ones_whole() {
    let mut sim = Sim::booted(with(Recycle {
        lifetime: Some(secs(60)),
        ..Recycle::default()
    }));
    assert_eq!(sim.m.next_due(), Some(sim.t0 + secs(30)));
    assert!(sim.at(secs(30) - ms(1)).tick().is_empty());
    let first = sim.at(secs(30)).tick();
    assert!(logged(
        &first,
        "worker 1 (pid 100) reached its --workers-lifetime: recycling it"
    ));
    assert_eq!(spawns(&first), [(1, true)]);
    let ready = sim.ready(102);
    assert!(ready.contains(&Action::Restarted {
        number: 1,
        cause: "lifetime"
    }));
    // Worker 2 at 60 s; the new worker 1 lives the whole minute.
    assert_eq!(sim.m.next_due(), Some(sim.t0 + secs(60)));
    let second = sim.at(secs(60)).tick();
    assert!(logged(
        &second,
        "worker 2 (pid 101) reached its --workers-lifetime"
    ));
    sim.ready(103);
    assert_eq!(sim.m.next_due(), Some(sim.t0 + secs(90)));
}

#[test]
fn resident_memory_over_the_limit_twice_in_a_row_recycles() {
    const MIB: u64 = 1 << 20;
    let mut sim = Sim::booted(with(Recycle {
        max_rss: Some(100 * MIB),
        ..Recycle::default()
    }));
    assert_eq!(sim.m.next_due(), Some(sim.t0 + secs(1)));
    let sample = |sim: &mut Sim, at: u64, bytes: u64| {
        let asked = sim.at(secs(at)).tick();
        assert_eq!(asked, [Action::SampleRss(vec![100, 101])]);
        sim.feed(Event::Rss { pid: 100, bytes });
        sim.feed(Event::Rss {
            pid: 101,
            bytes: MIB,
        });
    };
    sample(&mut sim, 1, 200 * MIB);
    sample(&mut sim, 2, 50 * MIB); // one burst is not a leak
    sample(&mut sim, 3, 200 * MIB);
    sample(&mut sim, 4, 300 * MIB);
    let recycle = sim.tick();
    assert_eq!(
        logs(&recycle, Level::Info)[0],
        "worker 1 (pid 100) resident memory 300 MiB over --workers-max-rss twice in a row: recycling it"
    );
    assert_eq!(spawns(&recycle), [(1, true)]);
    let ready = sim.ready(102);
    assert!(ready.contains(&Action::Restarted {
        number: 1,
        cause: "max_rss"
    }));
}

#[test]
fn a_recycle_whose_replacement_fails_is_tried_again_after_a_backoff() {
    let mut sim = Sim::booted(config(2));
    sim.say(100, served_all());
    sim.tick();
    let failed = sim.exit(102, 1);
    assert_eq!(
        logs(&failed, Level::Error),
        ["recycling worker 1 (served its --workers-max-requests) stopped: the new worker 1 (pid 102) failed before it was ready (exit status 1); the old one keeps serving; next try in 100ms"]
    );
    assert_eq!(sim.m.next_due(), Some(sim.now + ms(100)));
    assert!(spawns(&sim.at(ms(99)).tick()).is_empty());
    let retry = sim.at(ms(100)).tick();
    assert!(logged(
        &retry,
        "served its --workers-max-requests: recycling it"
    ));
    assert_eq!(spawns(&retry), [(1, true)]);
}

#[test]
fn recycles_wait_for_the_first_start_and_stop_with_a_shutdown() {
    let mut sim = Sim::new(config(2));
    sim.start();
    sim.ready(100);
    sim.say(100, served_all());
    assert!(spawns(&sim.tick()).is_empty(), "still starting");
    let up = sim.ready(101);
    assert!(up.contains(&Action::CameUp { workers: 2 }));
    sim.signal(SIGTERM);
    assert!(spawns(&sim.tick()).is_empty(), "stopping");
}

#[test]
fn a_roll_is_done_once_its_slots_are_replaced_though_recycles_are_queued_behind_it() {
    let mut sim = Sim::booted(config(2));
    sim.signal(signal_hook::consts::SIGHUP);
    sim.ready(102);
    // The first replacement served its requests while the second starts.
    sim.say(102, served_all());
    let queued = sim.tick();
    assert!(spawns(&queued).is_empty(), "one replacement at a time");
    let second = sim.ready(103);
    assert!(logged(&second, "rolling restart done"), "{second:?}");
    assert!(second.contains(&Action::Rolling(false)));
    // And the recycle runs after it.
    assert_eq!(spawns(&second), [(1, true)]);
}
