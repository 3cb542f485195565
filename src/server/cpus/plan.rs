//! Which CPUs each worker process gets, and each of its core threads.
//!
//! Worker `w`'s core thread `i` is the `(w × cores + i)`-th CPU of the
//! allowed set, wrapping around: workers get disjoint CPUs while they fit,
//! and share them round-robin (with one warning) when they do not. The
//! default is the CPU budget divided among the workers, at least one core
//! each; a remainder is left idle rather than giving workers unequal shares.
//!
//! Under a CPU quota narrower than the allowed set nothing is pinned or
//! confined: a quota says how much time, not which CPUs, and the set is
//! shared with every other cgroup on the node. Pinning there would put every
//! such pod's core threads on the first CPUs of the node.

use core_affinity::CoreId;

use super::{list, Budget};

/// One worker's share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Worker {
    /// Its core threads.
    pub cores: usize,
    /// The CPUs its threads are confined to, in pin order: core thread `i`
    /// on `cpus[i]`. Empty: not pinned, not confined.
    pub cpus: Vec<usize>,
}

impl Worker {
    /// One entry per core thread: the CPU to pin it to, or `None` for all of
    /// them where the worker has fewer CPUs than cores (two threads pinned to
    /// one CPU would share it for life; unpinned, the kernel balances them
    /// over the worker's CPUs) or none at all.
    ///
    /// A worker process calls this with the share its supervisor planned,
    /// after [`super::confine`] to `cpus`.
    pub fn pins(&self) -> Vec<Option<CoreId>> {
        if self.cpus.len() < self.cores {
            return vec![None; self.cores];
        }
        self.cpus[..self.cores]
            .iter()
            .map(|&id| Some(CoreId { id }))
            .collect()
    }

    /// Where its core threads run, for the startup log.
    pub fn placement(&self) -> String {
        match self.cpus.len() {
            0 => "not pinned".into(),
            n if n < self.cores => format!("not pinned, on CPUs {}", list::format(&self.cpus)),
            _ => format!("pinned to CPUs {}", list::format(&self.cpus)),
        }
    }
}

/// Every worker's share.
#[derive(Debug, PartialEq, Eq)]
pub struct WorkerPlan {
    pub workers: Vec<Worker>,
    /// Set when the core threads outnumber the CPUs (log it once, as a warning).
    pub warning: Option<String>,
}

/// Plan `workers` processes of `cores` core threads each (`None`: the
/// budget divided among them, at least 1) on the `allowed` CPUs.
pub fn plan_workers(
    workers: usize,
    cores: Option<usize>,
    allowed: &[usize],
    budget: &Budget,
) -> Result<WorkerPlan, String> {
    if workers == 0 {
        return Err("--workers must be at least 1".into());
    }
    let cores = match cores {
        Some(0) => return Err("--cores must be at least 1".into()),
        Some(n) => n,
        None => (budget.cpus / workers).max(1),
    };
    let pin = budget.pin && !allowed.is_empty();
    let cpus = if pin { allowed.len() } else { budget.cpus };
    let threads = workers.saturating_mul(cores);
    let warning = (threads > cpus).then(|| {
        let who = if workers == 1 {
            format!("{cores} core threads")
        } else {
            let s = if cores == 1 { "" } else { "s" };
            format!("{workers} workers × {cores} core{s} = {threads} core threads")
        };
        let how = if !pin {
            "they share them"
        } else if cores > allowed.len() {
            "each worker's core threads share its CPUs unpinned"
        } else {
            "the CPUs are shared round-robin"
        };
        format!("{who} on {cpus} CPUs: {how}")
    });
    let workers = (0..workers)
        .map(|w| Worker {
            cores,
            cpus: if pin {
                share(allowed, w * cores, cores)
            } else {
                Vec::new()
            },
        })
        .collect();
    Ok(WorkerPlan { workers, warning })
}

/// `n` CPUs of `allowed` from index `start`, wrapping; each once (a worker
/// with more cores than the whole set gets the whole set).
fn share(allowed: &[usize], start: usize, n: usize) -> Vec<usize> {
    let n = n.min(allowed.len());
    (0..n)
        .map(|i| allowed[(start + i) % allowed.len()])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pinned(cpus: usize) -> Budget {
        Budget {
            cpus,
            pin: true,
            reason: "the affinity mask".into(),
        }
    }

    fn shares(plan: &WorkerPlan) -> Vec<(usize, Vec<usize>)> {
        plan.workers
            .iter()
            .map(|w| (w.cores, w.cpus.clone()))
            .collect()
    }

    fn pins(w: &Worker) -> Vec<Option<usize>> {
        w.pins().into_iter().map(|c| c.map(|c| c.id)).collect()
    }

    #[test]
    fn one_process_takes_one_core_per_allowed_cpu_in_order() {
        // A cpuset of 2,3,6: not the first CPUs, not contiguous.
        let plan = plan_workers(1, None, &[2, 3, 6], &pinned(3)).unwrap();
        assert_eq!(shares(&plan), vec![(3, vec![2, 3, 6])]);
        assert_eq!(pins(&plan.workers[0]), vec![Some(2), Some(3), Some(6)]);
        assert_eq!(plan.warning, None);
        assert_eq!(plan.workers[0].placement(), "pinned to CPUs 2-3,6");
    }

    #[test]
    fn fewer_cores_take_the_first_allowed_cpus() {
        let plan = plan_workers(1, Some(2), &[4, 5, 6, 7], &pinned(4)).unwrap();
        assert_eq!(pins(&plan.workers[0]), vec![Some(4), Some(5)]);
    }

    #[test]
    fn more_cores_than_cpus_in_one_process_are_not_pinned() {
        let plan = plan_workers(1, Some(3), &[0, 1], &pinned(2)).unwrap();
        assert_eq!(pins(&plan.workers[0]), vec![None; 3]);
        assert_eq!(plan.workers[0].cpus, vec![0, 1]);
        assert_eq!(plan.workers[0].placement(), "not pinned, on CPUs 0-1");
        assert_eq!(
            plan.warning.as_deref(),
            Some("3 core threads on 2 CPUs: each worker's core threads share its CPUs unpinned")
        );
    }

    #[test]
    fn two_workers_on_two_cpus_get_one_each() {
        let plan = plan_workers(2, None, &[0, 1], &pinned(2)).unwrap();
        assert_eq!(shares(&plan), vec![(1, vec![0]), (1, vec![1])]);
        assert_eq!(plan.warning, None);
    }

    #[test]
    fn two_workers_of_two_cores_on_two_cpus_share_round_robin_with_a_warning() {
        let plan = plan_workers(2, Some(2), &[0, 1], &pinned(2)).unwrap();
        assert_eq!(shares(&plan), vec![(2, vec![0, 1]), (2, vec![0, 1])]);
        assert_eq!(
            plan.warning.as_deref(),
            Some("2 workers × 2 cores = 4 core threads on 2 CPUs: the CPUs are shared round-robin")
        );
        // Three workers of one core on two CPUs: the third wraps to the first CPU.
        let plan = plan_workers(3, Some(1), &[4, 9], &pinned(2)).unwrap();
        assert_eq!(
            shares(&plan),
            vec![(1, vec![4]), (1, vec![9]), (1, vec![4])]
        );
        assert!(plan.warning.is_some());
    }

    #[test]
    fn three_workers_on_eight_cpus_default_to_two_cores_each() {
        let allowed: Vec<usize> = (0..8).collect();
        let plan = plan_workers(3, None, &allowed, &pinned(8)).unwrap();
        assert_eq!(
            shares(&plan),
            vec![(2, vec![0, 1]), (2, vec![2, 3]), (2, vec![4, 5])]
        );
        assert_eq!(plan.warning, None);
    }

    #[test]
    fn a_quota_of_two_on_sixty_four_cpus_runs_two_cores_unpinned() {
        let allowed: Vec<usize> = (0..64).collect();
        let quota = Budget {
            cpus: 2,
            pin: false,
            reason: "cgroup cpu.max 200000/100000 at /sys/fs/cgroup".into(),
        };
        let plan = plan_workers(1, None, &allowed, &quota).unwrap();
        assert_eq!(shares(&plan), vec![(2, vec![])]);
        assert_eq!(pins(&plan.workers[0]), vec![None, None]);
        assert_eq!(plan.workers[0].placement(), "not pinned");
        // Four workers on that quota: one core each, more threads than the quota.
        let plan = plan_workers(4, None, &allowed, &quota).unwrap();
        assert_eq!(shares(&plan), vec![(1, vec![]); 4]);
        assert_eq!(
            plan.warning.as_deref(),
            Some("4 workers × 1 core = 4 core threads on 2 CPUs: they share them")
        );
    }

    #[test]
    fn without_a_mask_nothing_is_pinned() {
        let plan = plan_workers(1, None, &[], &Budget::new(0, 6, None)).unwrap();
        assert_eq!(shares(&plan), vec![(6, vec![])]);
    }

    #[test]
    fn zero_workers_or_cores_is_an_error() {
        assert!(plan_workers(0, None, &[0], &pinned(1)).is_err());
        assert!(plan_workers(1, Some(0), &[0], &pinned(1)).is_err());
    }
}
