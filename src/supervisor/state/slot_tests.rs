//! A slot's workers: the first start and its failure, a crash loop's
//! backoff, and SIGTTIN/SIGTTOU adding and removing slots.

use signal_hook::consts::{SIGKILL, SIGTERM, SIGTTIN, SIGTTOU};

use super::harness::{config, logged, logs, ms, secs, signals, spawns, Sim};
use super::{Action, Level};

#[test]
fn the_first_start_launches_one_worker_after_another_quietly() {
    let mut sim = Sim::new(config(2));
    let start = sim.start();
    assert_eq!(spawns(&start), [(1, false), (2, false)]);
    assert_eq!(
        logs(&start, Level::Debug),
        ["worker 1 started (pid 100)", "worker 2 started (pid 101)"]
    );
    assert!(logs(&start, Level::Info).is_empty());
    let one = sim.ready(100);
    assert!(!one.contains(&Action::CameUp { workers: 2 }));
    let two = sim.ready(101);
    assert_eq!(
        two,
        [
            Action::Log(Level::Info, "worker 2 (pid 101) ready".into()),
            Action::CameUp { workers: 2 }
        ]
    );
}

#[test]
fn a_worker_that_fails_its_first_start_stops_the_supervisor_with_its_status() {
    let mut sim = Sim::new(config(2));
    sim.start();
    sim.ready(101);
    let failed = sim.exit(100, 2);
    assert_eq!(
        logs(&failed, Level::Debug),
        ["worker 1 (pid 100) failed to start (exit status 2): stopping"]
    );
    assert_eq!(signals(&failed), [(101, SIGTERM)]);
    assert!(spawns(&failed).is_empty());
    assert_eq!(sim.draining(101), [Action::ShutListener]);
    sim.exit(101, 0);
    assert_eq!(sim.tick(), [Action::Exit(2)]);
}

#[test]
fn a_worker_that_cannot_be_started_at_first_stops_the_rest_from_starting() {
    let mut sim = Sim::new(config(2));
    sim.fail.push(1);
    let start = sim.start();
    assert_eq!(spawns(&start), [(1, false)]);
    assert_eq!(
        logs(&start, Level::Print),
        ["starting worker 1: No such file or directory"]
    );
    assert!(start.contains(&Action::ShutListener));
    assert_eq!(sim.tick(), [Action::Exit(1)]);
}

#[test]
fn a_crash_loop_backs_off_doubling_and_a_healthy_run_forgives_it() {
    let mut sim = Sim::booted(config(1));
    let crash = sim.at(secs(2)).killed(100, SIGKILL);
    assert_eq!(
        crash,
        [
            Action::Restarted {
                number: 1,
                cause: "exited"
            },
            Action::Log(
                Level::Warn,
                "worker 1 (pid 100) exited: killed by SIGKILL; restarting it".into()
            ),
        ]
    );
    assert_eq!(sim.m.next_due(), Some(sim.now), "a healthy worker: at once");
    assert_eq!(spawns(&sim.tick()), [(1, false)]);

    let mut t = secs(2);
    for (pid, delay) in [(101, 100), (102, 200), (103, 400)] {
        let failed = sim.exit(pid, 1);
        assert_eq!(
            logs(&failed, Level::Warn),
            [format!(
                "worker 1 (pid {pid}) failed to start: exit status 1; restarting it in {delay}ms"
            )]
        );
        assert_eq!(sim.m.next_due(), Some(sim.now + ms(delay)));
        assert!(spawns(&sim.at(t + ms(delay - 1)).tick()).is_empty());
        t += ms(delay);
        assert_eq!(spawns(&sim.at(t).tick()), [(1, false)]);
    }

    // A start that fails to spawn counts as a failure too.
    sim.exit(104, 1);
    sim.fail.push(1);
    t += ms(800);
    let unstarted = sim.at(t).tick();
    assert_eq!(
        logs(&unstarted, Level::Error),
        ["starting worker 1: No such file or directory; retrying in 1.6s"]
    );
    t += ms(1600);
    assert_eq!(spawns(&sim.at(t).tick()), [(1, false)]);

    // Ready and up a second: healthy, so its exit restarts it at once.
    sim.ready(105);
    let crash = sim.at(t + secs(1)).killed(105, SIGKILL);
    assert!(
        logged(&crash, "killed by SIGKILL; restarting it"),
        "{crash:?}"
    );
    assert!(!logged(&crash, " in "), "{crash:?}");
}

#[test]
fn sigttin_adds_a_slot_and_sigttou_drains_the_last_down_to_one() {
    let mut sim = Sim::booted(config(2));
    let more = sim.signal(SIGTTIN);
    assert_eq!(logs(&more, Level::Info), ["SIGTTIN: 3 worker(s)"]);
    assert!(spawns(&more).is_empty());
    let started = sim.tick();
    assert_eq!(spawns(&started), [(3, false)]);
    assert_eq!(logs(&started, Level::Info), ["worker 3 started (pid 102)"]);
    let ready = sim.ready(102);
    assert!(!ready.contains(&Action::CameUp { workers: 3 }));

    let fewer = sim.signal(SIGTTOU);
    assert_eq!(
        logs(&fewer, Level::Info),
        ["SIGTTOU: draining worker 3 (pid 102)"]
    );
    assert_eq!(signals(&fewer), [(102, SIGTERM)]);
    assert_eq!(
        logs(&sim.exit(102, 0), Level::Info),
        ["worker 3 (pid 102) drained: exit status 0"]
    );
    assert_eq!(signals(&sim.signal(SIGTTOU)), [(101, SIGTERM)]);
    let least = sim.signal(SIGTTOU);
    assert_eq!(
        logs(&least, Level::Info),
        ["SIGTTOU: one worker is the least"]
    );
    assert!(signals(&least).is_empty());
    assert_eq!(sim.m.live(), [100, 101]);
}

#[test]
fn sigttou_takes_a_slot_with_its_replacement_out_of_a_roll() {
    let mut sim = Sim::booted(config(2));
    sim.signal(signal_hook::consts::SIGHUP);
    let first = sim.ready(102);
    assert_eq!(spawns(&first), [(2, true)]); // 103, for slot 2
    let fewer = sim.signal(SIGTTOU);
    assert_eq!(signals(&fewer), [(101, SIGTERM), (103, SIGTERM)]);
    assert!(logged(&fewer, "rolling restart done"), "{fewer:?}");
    assert!(sim
        .ready(103)
        .iter()
        .all(|a| !matches!(a, Action::Signal { .. })));
}
