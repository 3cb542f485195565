//! Worker processes and their CPUs (issue 9, point 3): with `--workers 2
//! --cores 1` on two CPUs, each worker is pinned and confined to its own CPU,
//! every one of its threads (pool and executor included) inherits that set,
//! and the log says which worker has which.

#![cfg(target_os = "linux")]

mod common;

use std::fs;
use std::time::Duration;

use common::{cpus_at_least, Server, HEALTH};

/// The pids of `pid`'s children (its workers).
fn children(pid: u32) -> Vec<u32> {
    let tasks = fs::read_dir(format!("/proc/{pid}/task")).expect("the supervisor's tasks");
    tasks
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .map(|p| p.parse().unwrap())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// The `Cpus_allowed_list` of every thread of process `pid`.
fn thread_cpus(pid: u32) -> Vec<String> {
    let tasks = fs::read_dir(format!("/proc/{pid}/task")).expect("the worker's tasks");
    tasks
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("status")).ok())
        .filter_map(|status| {
            status.lines().find_map(|l| {
                l.strip_prefix("Cpus_allowed_list:")
                    .map(|v| v.trim().to_string())
            })
        })
        .collect()
}

#[test]
fn two_workers_with_one_core_each_get_a_cpu_each() {
    if !cpus_at_least(2) {
        eprintln!("skipped: needs two CPUs in the affinity mask");
        return;
    }
    let server = Server::start(&["--workers", "2", "--cores", "1"]);
    for n in [1, 2] {
        let want = format!(
            "worker {n}: 1 core thread (--cores), pinned to CPUs {}",
            n - 1
        );
        assert!(
            server
                .wait_for_line(|l| l.contains(&want), Duration::from_secs(10))
                .is_some(),
            "no line {want:?} in:\n{}",
            server.dump()
        );
    }
    // Both started and ready (a worker not yet exec'd is still the supervisor's fork).
    assert!(
        server
            .wait_for_line(|l| l.contains("2 worker(s) ready"), Duration::from_secs(10))
            .is_some(),
        "{}",
        server.dump()
    );
    assert_eq!(server.get(HEALTH).status, 200);
    let workers = children(server.pid());
    assert_eq!(workers.len(), 2, "workers: {workers:?}");
    let mut sets: Vec<Vec<String>> = workers.iter().map(|&w| thread_cpus(w)).collect();
    sets.sort();
    for (cpu, threads) in sets.iter().enumerate() {
        assert!(threads.len() > 1, "{threads:?}");
        assert!(
            threads.iter().all(|t| *t == cpu.to_string()),
            "a worker's threads should all be on CPU {cpu}: {threads:?}"
        );
    }
}
