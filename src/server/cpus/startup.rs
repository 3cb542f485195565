//! The plan this process starts with, found and logged once: each worker's
//! share in a supervisor, each core thread's CPU in a server. The one place
//! the budget is read and the placement lines are written.

use std::io;

use core_affinity::CoreId;

use super::{allowed, available, plan_workers, quota, Budget, Worker, WorkerPlan};

/// Plan `workers` of `requested` cores each (None: the budget's share) on
/// this process's CPUs, logging the quota's warnings and the plan's; with
/// where the count came from, for the placement lines.
fn plan(workers: usize, requested: Option<usize>) -> Result<(WorkerPlan, String), String> {
    let allowed = allowed();
    let found = quota::read();
    for why in &found.ignored {
        tracing::warn!("{why}");
    }
    let budget = Budget::new(allowed.len(), available(), found.quota.as_ref());
    let plan = plan_workers(workers, requested, &allowed, &budget)?;
    if let Some(warning) = &plan.warning {
        tracing::warn!("{warning}");
    }
    let source = match requested {
        Some(_) => "--cores".to_string(),
        None => budget.to_string(),
    };
    Ok((plan, source))
}

/// `N core thread(s) (source), placement`.
fn describe(share: &Worker, source: Option<&str>) -> String {
    let s = if share.cores == 1 { "" } else { "s" };
    match source {
        Some(source) => format!(
            "{} core thread{s} ({source}), {}",
            share.cores,
            share.placement()
        ),
        None => format!("{} core thread{s}, {}", share.cores, share.placement()),
    }
}

/// Each worker's core threads and CPUs, logged once by the supervisor: with
/// several workers, worker `n` is pinned and confined to its own CPUs of
/// the allowed set (see [`plan_workers`]). One worker plans its cores
/// itself, as a single process always has (its pool keeps the whole mask),
/// so this is empty then. Workers added later by SIGTTIN take the shares
/// round-robin.
pub fn worker_shares(workers: usize, requested: Option<usize>) -> Vec<Worker> {
    if workers < 2 {
        return Vec::new();
    }
    let (plan, source) = match plan(workers, requested) {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!("{e}: the workers plan their CPUs themselves");
            return Vec::new();
        }
    };
    for (i, w) in plan.workers.iter().enumerate() {
        tracing::info!("worker {}: {}", i + 1, describe(w, Some(&source)));
    }
    plan.workers
}

/// The CPU of each core thread of this process, logged: the `share` its
/// supervisor planned (which it already logged, with where the count came
/// from), else planned here for one process from `requested`, the mask and
/// the quota. A single process is not [`super::confine`]d: its pool
/// threads keep the whole mask; a worker with a share confines itself.
pub fn core_pins(
    share: Option<Worker>,
    requested: Option<usize>,
) -> io::Result<Vec<Option<CoreId>>> {
    if let Some(share) = share {
        tracing::info!("{}", describe(&share, None));
        return Ok(share.pins());
    }
    let (plan, source) =
        plan(1, requested).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let worker = &plan.workers[0];
    tracing::info!("{}", describe(worker, Some(&source)));
    Ok(worker.pins())
}
