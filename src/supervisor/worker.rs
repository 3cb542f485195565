//! One worker process as the supervisor sees it: started, with the listener,
//! its status pipe and the lifeline (see [`super::link`]), from the same
//! program and arguments as the supervisor, in its environment and working
//! directory; its READY, DRAINING, MAX_REQUESTS and STUCK bytes; its
//! heartbeat (`--worker-timeout`); its exit.
//!
//! Spawned, not forked: the supervisor may be a Python process, and a fork
//! of one is no fresh interpreter. The descriptors are created close-on-exec
//! and made inheritable only in the child, between fork and exec, so no
//! other process started meanwhile gets them.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};

use super::link::{self, DRAINING, MAX_REQUESTS, READY, STUCK};
use super::state::Said;
use super::wakeup;
use super::Relaunch;
use crate::ipc::heartbeat::{self, Heartbeat};
use crate::server::cpus;

/// What every worker inherits from the supervisor.
pub struct Inherit<'a> {
    /// Every listener, in the order of the configuration.
    pub listeners: Vec<BorrowedFd<'a>>,
    pub lifeline: BorrowedFd<'a>,
    pub tally: Option<BorrowedFd<'a>>,
    /// The readiness flag, with `--ready-path`.
    pub ready: Option<BorrowedFd<'a>>,
    /// Run the portable backend without probing io_uring ([`super::Plan::portable`]).
    pub portable: bool,
    pub metrics: Option<BorrowedFd<'a>>,
    /// The session-ticket secret, with TLS ([`crate::tls::tickets`]).
    pub tickets: Option<&'a crate::tls::tickets::Seed>,
    /// `--worker-timeout`: each worker gets a heartbeat page asking for a
    /// stamp this often (None: not watched).
    pub heartbeat: Option<std::time::Duration>,
}

pub struct Worker {
    child: Child,
    /// The status pipe's read end (non-blocking); `None` after end of file.
    status: Option<File>,
    /// Its heartbeat page, with `--worker-timeout`.
    heartbeat: Option<Heartbeat>,
}

impl Worker {
    /// `share`: the core threads and CPUs planned for it (None: it plans
    /// them itself); `max_requests`: what it serves before it asks to be
    /// recycled.
    pub fn spawn(
        relaunch: &Relaunch,
        number: usize,
        share: Option<&cpus::Worker>,
        max_requests: Option<u64>,
        inherit: &Inherit<'_>,
    ) -> io::Result<Worker> {
        let (status_read, status_write) = pipe()?;
        // SAFETY: O_NONBLOCK on a descriptor we own.
        unsafe { libc::fcntl(status_read.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        let listeners: Vec<_> = inherit.listeners.iter().map(|fd| fd.as_raw_fd()).collect();
        let listener_list = listeners.iter().map(|fd| fd.to_string());
        let lifeline = inherit.lifeline.as_raw_fd();
        let status = status_write.as_raw_fd();
        let tally = inherit.tally.map(|fd| fd.as_raw_fd());
        let ready = inherit.ready.map(|fd| fd.as_raw_fd());
        let metrics = inherit.metrics.map(|fd| fd.as_raw_fd());
        // The ticket secret goes through a pipe of its own, written whole
        // (40 bytes: far below a pipe's buffer) and closed before the spawn,
        // rather than in the environment, which the worker's /proc shows.
        let tickets_read = match inherit.tickets {
            Some(seed) => {
                let (read, write) = pipe()?;
                std::io::Write::write_all(&mut File::from(write), &seed.to_bytes())?;
                Some(read)
            }
            None => None,
        };
        let tickets = tickets_read.as_ref().map(|fd| fd.as_raw_fd());
        let (heartbeat_fd, heartbeat) = match inherit.heartbeat {
            Some(period) => {
                let (fd, page) = heartbeat::create(period)?;
                (Some(fd), Some(page))
            }
            None => (None, None),
        };
        let beats = heartbeat_fd.as_ref().map(|fd| fd.as_raw_fd());
        let mut command = Command::new(&relaunch.program);
        command
            .args(&relaunch.args)
            .env(link::INDEX, number.to_string())
            .env(
                link::LISTENER_FD,
                listener_list.collect::<Vec<_>>().join(","),
            )
            .env(link::STATUS_FD, status.to_string())
            .env(link::LIFELINE_FD, lifeline.to_string());
        if let Some(tally) = tally {
            command.env(link::TALLY_FD, tally.to_string());
        }
        if let Some(ready) = ready {
            command.env(link::READY_FD, ready.to_string());
        }
        if let Some(metrics) = metrics {
            command.env(link::METRICS_FD, metrics.to_string());
        }
        if let Some(tickets) = tickets {
            command.env(link::TICKETS_FD, tickets.to_string());
        }
        if let Some(beats) = beats {
            command.env(link::HEARTBEAT_FD, beats.to_string());
        }
        if let Some(share) = share {
            command
                .env(link::CORES, share.cores.to_string())
                .env(link::CPUS, cpus::list::format(&share.cpus));
        }
        if let Some(n) = max_requests {
            command.env(link::REQUESTS, n.to_string());
        }
        if inherit.portable {
            command.env(link::BACKEND, "portable");
        }
        #[cfg(target_os = "linux")]
        let supervisor = std::process::id() as libc::pid_t;
        // SAFETY: the closure runs in the child between fork and exec and
        // calls only async-signal-safe functions (fcntl, prctl, getppid,
        // _exit), allocating nothing (it reads `listeners`, built before).
        unsafe {
            command.pre_exec(move || {
                for fd in [lifeline, status]
                    .into_iter()
                    .chain(listeners.iter().copied())
                    .chain(tally)
                    .chain(ready)
                    .chain(metrics)
                    .chain(tickets)
                    .chain(beats)
                {
                    if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                // Killed when the supervisor's thread that spawned it dies
                // (the supervisor's main loop, which lives to the end).
                // Elsewhere (macOS has no parent-death signal) the lifeline
                // alone ends an orphan: its watcher thread reads end of file
                // and exits (link.rs).
                #[cfg(target_os = "linux")]
                {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    if libc::getppid() != supervisor {
                        libc::_exit(1);
                    }
                }
                Ok(())
            })
        };
        let child = command.spawn()?;
        drop(status_write);
        drop(tickets_read);
        drop(heartbeat_fd);
        Ok(Worker {
            child,
            status: Some(File::from(status_read)),
            heartbeat,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The status pipe, while it is open, to poll.
    pub fn status_fd(&self) -> Option<RawFd> {
        self.status.as_ref().map(|f| f.as_raw_fd())
    }

    /// Read what the worker wrote since the last read.
    pub fn read_status(&mut self) -> Said {
        let mut said = Said::default();
        let Some(status) = self.status.as_mut() else {
            return said;
        };
        let mut bytes = [0u8; 16];
        loop {
            match status.read(&mut bytes) {
                Ok(0) => {
                    self.status = None;
                    said.hung_up = true;
                    break;
                }
                Ok(n) => {
                    said.ready |= bytes[..n].contains(&READY);
                    said.draining |= bytes[..n].contains(&DRAINING);
                    said.served_all |= bytes[..n].contains(&MAX_REQUESTS);
                    said.stuck |= bytes[..n].contains(&STUCK);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        said
    }

    /// How long since its heartbeat's oldest stamp (None: not watched, or
    /// nothing claimed yet).
    pub fn silent(&self) -> Option<std::time::Duration> {
        self.heartbeat.as_ref()?.silent()
    }

    /// Its exit status, once it has exited (reaped here).
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill on our own child's pid, not yet reaped (try_exit
        // reaps it, and the worker is dropped then), so it is not reused.
        unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
    }
}

/// `exit status 2`, `killed by SIGKILL`, `killed by SIGSEGV (core dumped)`.
pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!(
            "killed by {}{}",
            wakeup::name(signal),
            if status.core_dumped() {
                " (core dumped)"
            } else {
                ""
            }
        ),
        (None, None) => format!("{status}"),
    }
}

/// A pipe, both ends close-on-exec: (read, write).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    #[cfg(target_os = "linux")]
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    #[cfg(not(target_os = "linux"))]
    // SAFETY: as above; close-on-exec is set right after (the supervisor
    // spawns from one thread, so no fork sees the gap).
    let rc = unsafe {
        let rc = libc::pipe(fds.as_mut_ptr());
        if rc == 0 {
            libc::fcntl(fds[0], libc::F_SETFD, libc::FD_CLOEXEC);
            libc::fcntl(fds[1], libc::F_SETFD, libc::FD_CLOEXEC);
        }
        rc
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe returned two new descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_as_an_operator_would_say_them() {
        assert_eq!(describe(ExitStatus::from_raw(2 << 8)), "exit status 2");
        assert_eq!(
            describe(ExitStatus::from_raw(libc::SIGKILL)),
            "killed by SIGKILL"
        );
        assert_eq!(
            describe(ExitStatus::from_raw(libc::SIGSEGV | 0x80)),
            "killed by SIGSEGV (core dumped)"
        );
    }
}
