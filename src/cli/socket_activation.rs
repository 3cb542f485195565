//! systemd's socket activation (`sd_listen_fds(3)`): the service manager
//! binds the sockets and starts m0serve with them open from descriptor 3
//! on, `LISTEN_FDS` their count and `LISTEN_PID` set to our pid. Each is
//! served (in that order); `LISTEN_FDNAMES` is not looked at.
//!
//! The variables are taken out of the environment once read, so nothing
//! this process starts (its workers, the application's subprocesses) takes
//! them for its own: a worker gets the listener from its supervisor
//! ([`crate::supervisor::link`]), never from these.

use std::os::fd::RawFd;

/// The first descriptor systemd passes (`SD_LISTEN_FDS_START`).
const FIRST_FD: RawFd = 3;

/// The descriptors systemd passed this process, if it did (empty if not).
/// Variables meant for another process (`LISTEN_PID` not ours) are left
/// alone and ignored.
pub(super) fn take() -> Result<Vec<RawFd>, String> {
    let Some(pid) = std::env::var_os("LISTEN_PID") else {
        return Ok(Vec::new());
    };
    if pid.to_str().and_then(|p| p.trim().parse::<u32>().ok()) != Some(std::process::id()) {
        return Ok(Vec::new());
    }
    let fds = std::env::var("LISTEN_FDS").unwrap_or_default();
    for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        std::env::remove_var(name);
    }
    // Far below any descriptor limit: a count beyond it is a mistake.
    match fds.trim().parse::<u16>() {
        Ok(n) => Ok((0..RawFd::from(n)).map(|i| FIRST_FD + i).collect()),
        Err(_) => Err(format!("LISTEN_FDS={fds} is not a count of sockets")),
    }
}
