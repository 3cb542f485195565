//! How many core threads, and which CPU each is pinned to.
//!
//! The default is one core thread per CPU the process may run on: on Linux
//! its affinity mask (`sched_getaffinity`, through core_affinity), which a
//! cgroup cpuset (a Kubernetes pod under the static CPU manager) narrows.
//! Thread `i` is pinned to the `i`-th allowed CPU. More threads than allowed
//! CPUs are not pinned at all: two pinned threads on one CPU would share it
//! for their whole life, unpinned ones are at least balanced by the kernel.

use core_affinity::CoreId;

/// The CPUs this process may run on, pinnable by id. Empty where pinning is
/// not supported (macOS schedules threads itself).
pub fn allowed() -> Vec<CoreId> {
    #[cfg(target_os = "linux")]
    {
        core_affinity::get_core_ids().unwrap_or_default()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Vec::new()
    }
}

/// How many CPUs there are when the affinity mask is not known.
pub fn available() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// One entry per core thread: the CPU to pin it to, or `None`.
/// `requested` is `--cores`; `None` takes one per allowed CPU (or `available`
/// CPUs where the mask is not known).
pub fn plan(
    requested: Option<usize>,
    allowed: &[CoreId],
    available: usize,
) -> Result<Vec<Option<CoreId>>, String> {
    let n = match requested {
        Some(0) => return Err("--cores must be at least 1".into()),
        Some(n) => n,
        None if allowed.is_empty() => available.max(1),
        None => allowed.len(),
    };
    if n > allowed.len() {
        if !allowed.is_empty() {
            tracing::info!(
                "{n} cores on {} allowed CPUs: core threads are not pinned",
                allowed.len()
            );
        }
        return Ok(vec![None; n]);
    }
    Ok(allowed[..n].iter().copied().map(Some).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[usize]) -> Vec<CoreId> {
        v.iter().map(|&id| CoreId { id }).collect()
    }

    fn pins(plan: Vec<Option<CoreId>>) -> Vec<Option<usize>> {
        plan.into_iter().map(|c| c.map(|c| c.id)).collect()
    }

    #[test]
    fn the_default_is_one_thread_per_allowed_cpu_pinned_in_order() {
        // A cpuset of 2,3,6: not the first CPUs, not contiguous.
        let plan = plan(None, &ids(&[2, 3, 6]), 64).unwrap();
        assert_eq!(pins(plan), vec![Some(2), Some(3), Some(6)]);
    }

    #[test]
    fn fewer_cores_take_the_first_allowed_cpus() {
        assert_eq!(
            pins(plan(Some(2), &ids(&[4, 5, 6, 7]), 8).unwrap()),
            vec![Some(4), Some(5)]
        );
    }

    #[test]
    fn more_cores_than_allowed_cpus_are_not_pinned() {
        assert_eq!(
            pins(plan(Some(3), &ids(&[0, 1]), 2).unwrap()),
            vec![None; 3]
        );
    }

    #[test]
    fn without_a_mask_the_default_is_the_available_parallelism() {
        assert_eq!(pins(plan(None, &[], 6).unwrap()), vec![None; 6]);
        assert_eq!(plan(None, &[], 0).unwrap().len(), 1);
    }

    #[test]
    fn zero_cores_is_an_error() {
        assert!(plan(Some(0), &ids(&[0]), 1).is_err());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_allowed_set_is_this_process_affinity_mask() {
        // SAFETY: a zeroed cpu_set_t is a valid empty set, filled by the call.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is valid for size_of::<cpu_set_t>() bytes; pid 0 is this thread.
        let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
        assert_eq!(rc, 0);
        let mask: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `i` is below CPU_SETSIZE.
            .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
            .collect();
        let got: Vec<usize> = allowed().into_iter().map(|c| c.id).collect();
        assert_eq!(got, mask);
    }
}
