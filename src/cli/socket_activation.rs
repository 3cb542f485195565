//! systemd's socket activation (`sd_listen_fds(3)`): the service manager
//! binds the socket and starts m0serve with it open at descriptor 3,
//! `LISTEN_FDS=1` and `LISTEN_PID` set to our pid.
//!
//! The variables are taken out of the environment once read, so nothing
//! this process starts (its workers, the application's subprocesses) takes
//! them for its own: a worker gets the listener from its supervisor
//! ([`crate::supervisor::link`]), never from these.

use std::os::fd::RawFd;

/// The first descriptor systemd passes (`SD_LISTEN_FDS_START`).
const FIRST_FD: RawFd = 3;

/// The descriptor systemd passed this process, if it did. Variables meant
/// for another process (`LISTEN_PID` not ours) are left alone and ignored.
/// More than one socket is an error: m0serve serves one listener.
pub(super) fn take() -> Result<Option<RawFd>, String> {
    let Some(pid) = std::env::var_os("LISTEN_PID") else {
        return Ok(None);
    };
    if pid.to_str().and_then(|p| p.trim().parse::<u32>().ok()) != Some(std::process::id()) {
        return Ok(None);
    }
    let fds = std::env::var("LISTEN_FDS").unwrap_or_default();
    for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        std::env::remove_var(name);
    }
    match fds.trim().parse::<u32>() {
        Ok(0) => Ok(None),
        Ok(1) => Ok(Some(FIRST_FD)),
        Ok(n) => Err(format!(
            "socket activation passed {n} sockets (LISTEN_FDS={n}); m0serve serves one"
        )),
        Err(_) => Err(format!("LISTEN_FDS={fds} is not a count of sockets")),
    }
}
