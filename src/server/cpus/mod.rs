//! Which CPUs the server runs on: how many core threads by default, which
//! CPU each is pinned to, and (with worker processes) which CPUs each worker
//! gets.
//!
//! The default count is the CPUs this process may use: its affinity mask
//! (`sched_getaffinity`, which a cgroup cpuset narrows), or fewer under a
//! cgroup CPU quota ([`quota`]): a pod limited to 2 CPUs on a 64-CPU node
//! runs 2 core threads, not 64. [`plan_workers`] divides that among workers;
//! a worker process [`confine`]s itself to its CPUs before it starts any
//! thread, then pins its core threads with [`Worker::pins`].

pub mod list;
mod plan;
pub mod quota;
mod startup;

use std::fmt;
use std::io;

pub use plan::{plan_workers, Worker, WorkerPlan};
use quota::Quota;
pub use startup::{core_pins, worker_shares};

/// The CPUs this process may run on. Empty where pinning is not supported
/// (macOS schedules threads itself).
pub fn allowed() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        core_affinity::get_core_ids()
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.id)
            .collect()
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

/// How many CPUs the default plan uses, whether to pin, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    pub cpus: usize,
    /// Whether threads are pinned to CPUs of the allowed set: not under a
    /// quota narrower than it (see [`plan_workers`]'s module).
    pub pin: bool,
    /// Where `cpus` came from, for the log.
    pub reason: String,
}

impl Budget {
    /// The smaller of the quota (if any) and the allowed set (`allowed`
    /// CPUs; 0 where the mask is not known: then `available`).
    pub fn new(allowed: usize, available: usize, quota: Option<&Quota>) -> Budget {
        let (cpus, reason) = if allowed > 0 {
            (allowed, "the affinity mask".to_string())
        } else {
            (available.max(1), "available_parallelism".to_string())
        };
        match quota {
            Some(q) if q.cpus < cpus => Budget {
                cpus: q.cpus,
                pin: false,
                reason: q.to_string(),
            },
            Some(q) => Budget {
                cpus,
                pin: allowed > 0,
                reason: format!("{reason} (the {q} allows as many)"),
            },
            None => Budget {
                cpus,
                pin: allowed > 0,
                reason,
            },
        }
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = if self.cpus == 1 { "" } else { "s" };
        write!(f, "{} CPU{s}: {}", self.cpus, self.reason)
    }
}

/// Confine the calling thread, and every thread it creates from then on, to
/// `cpus` (empty: leave it as it is). A worker process calls it on its main
/// thread before starting any other, so its pool and executor threads stay
/// on its CPUs. Linux only; elsewhere it does nothing.
pub fn confine(cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() {
        return Ok(());
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &cpu in cpus {
            if cpu >= libc::CPU_SETSIZE as usize {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("CPU {cpu} is beyond CPU_SETSIZE"),
                ));
            }
            // SAFETY: `cpu` is below CPU_SETSIZE, the set's size.
            unsafe { libc::CPU_SET(cpu, &mut set) };
        }
        // SAFETY: `set` is valid for size_of::<cpu_set_t>() bytes; pid 0 is
        // the calling thread, whose children inherit its mask.
        let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn quota(cpus: usize, quota_us: u64) -> Quota {
        Quota {
            cpus,
            quota_us,
            period_us: 100000,
            file: "cpu.max",
            dir: PathBuf::from("/sys/fs/cgroup/kubepods/pod1"),
        }
    }

    #[test]
    fn a_quota_of_two_on_sixty_four_cpus_is_two_unpinned() {
        let b = Budget::new(64, 64, Some(&quota(2, 200000)));
        assert_eq!((b.cpus, b.pin), (2, false));
        assert_eq!(
            b.to_string(),
            "2 CPUs: cgroup cpu.max 200000/100000 at /sys/fs/cgroup/kubepods/pod1"
        );
    }

    #[test]
    fn a_quota_as_wide_as_the_set_leaves_the_mask_in_charge() {
        // A Guaranteed pod with a 2-CPU cpuset and a quota of 2: pinned.
        let b = Budget::new(2, 64, Some(&quota(2, 200000)));
        assert_eq!((b.cpus, b.pin), (2, true));
        assert!(b
            .to_string()
            .starts_with("2 CPUs: the affinity mask (the cgroup"));
    }

    #[test]
    fn without_a_quota_the_mask_or_the_parallelism() {
        assert_eq!(
            Budget::new(4, 8, None).to_string(),
            "4 CPUs: the affinity mask"
        );
        let b = Budget::new(0, 6, None);
        assert_eq!((b.cpus, b.pin), (6, false));
        assert_eq!(b.to_string(), "6 CPUs: available_parallelism");
        // Under a quota without a mask (macOS has neither, but the rule holds).
        assert_eq!(Budget::new(0, 8, Some(&quota(1, 50000))).cpus, 1);
        assert_eq!(
            Budget::new(0, 0, None).to_string(),
            "1 CPU: available_parallelism"
        );
    }

    #[cfg(target_os = "linux")]
    fn mask() -> Vec<usize> {
        // SAFETY: a zeroed cpu_set_t is a valid empty set, filled by the call.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is valid for size_of::<cpu_set_t>() bytes; pid 0 is this thread.
        let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
        assert_eq!(rc, 0);
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `i` is below CPU_SETSIZE.
            .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
            .collect()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_allowed_set_is_this_process_affinity_mask() {
        assert_eq!(allowed(), mask());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn confine_narrows_the_thread_and_the_threads_it_starts() {
        // On a thread of its own: the test harness's threads keep their mask.
        std::thread::spawn(|| {
            let last = *mask().last().unwrap();
            confine(&[last]).unwrap();
            assert_eq!(mask(), vec![last]);
            let child = std::thread::spawn(mask).join().unwrap();
            assert_eq!(
                child,
                vec![last],
                "a thread started after confine inherits it"
            );
            assert!(confine(&[libc::CPU_SETSIZE as usize]).is_err());
            assert!(confine(&[]).is_ok());
            assert_eq!(mask(), vec![last]);
        })
        .join()
        .unwrap();
    }
}
