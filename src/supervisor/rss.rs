//! A worker's resident memory, as `--workers-max-rss` samples it: on Linux
//! from `/proc/PID/statm`, on macOS from `proc_pidinfo(PROC_PIDTASKINFO)`
//! (there is no /proc). Elsewhere there is no sample (the limit is then not
//! enforced, and the supervisor says so at start).

/// Whether this platform can sample a worker's resident memory.
pub const SUPPORTED: bool = cfg!(any(target_os = "linux", target_vendor = "apple"));

/// Bytes resident for process `pid`, or `None` when it cannot be read.
#[cfg(target_os = "linux")]
pub fn sample(pid: u32) -> Option<u64> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

#[cfg(target_vendor = "apple")]
pub fn sample(pid: u32) -> Option<u64> {
    let pid = libc::c_int::try_from(pid).ok()?;
    // SAFETY: proc_taskinfo is plain integers, for which all zeroes is a value.
    let mut info: libc::proc_taskinfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::proc_taskinfo>() as libc::c_int;
    // SAFETY: PROC_PIDTASKINFO writes at most `size` bytes into `info`, which is that large.
    let written = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDTASKINFO,
            0,
            (&mut info as *mut libc::proc_taskinfo).cast(),
            size,
        )
    };
    (written == size).then_some(info.pti_resident_size)
}

#[cfg(not(any(target_os = "linux", target_vendor = "apple")))]
pub fn sample(_pid: u32) -> Option<u64> {
    None
}

#[cfg(all(test, any(target_os = "linux", target_vendor = "apple")))]
mod tests {
    #[test]
    fn this_process_has_some_resident_memory() {
        let rss = super::sample(std::process::id()).unwrap();
        assert!(rss > 1 << 20, "{rss}");
        assert_eq!(super::sample(u32::MAX), None);
    }
}
