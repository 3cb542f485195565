//! A worker's resident memory, as `--workers-max-rss` samples it: on Linux
//! from `/proc/PID/statm`. Elsewhere there is no sample (the limit is then
//! not enforced, and the supervisor says so at start).

/// Whether this platform can sample a worker's resident memory.
pub const SUPPORTED: bool = cfg!(target_os = "linux");

/// Bytes resident for process `pid`, or `None` when it cannot be read.
#[cfg(target_os = "linux")]
pub fn sample(pid: u32) -> Option<u64> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

#[cfg(not(target_os = "linux"))]
pub fn sample(_pid: u32) -> Option<u64> {
    None
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn this_process_has_some_resident_memory() {
        let rss = super::sample(std::process::id()).unwrap();
        assert!(rss > 1 << 20, "{rss}");
        assert_eq!(super::sample(u32::MAX), None);
    }
}
