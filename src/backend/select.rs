//! Choosing a backend: `--backend auto|uring|portable`.

use std::fmt;

/// What the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// io_uring when the kernel allows it, else portable with one log line.
    Auto,
    /// io_uring or a clear error.
    Uring,
    Portable,
}

/// What runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Uring,
    Portable,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Uring => "uring",
            Kind::Portable => "portable",
        })
    }
}

/// Resolve `choice` against what this kernel (and any seccomp profile)
/// allows; `refuse_uring` (the `M0_URING_DISABLED` knob) acts as if it
/// refused io_uring.
pub fn select(choice: Choice, refuse_uring: bool) -> Result<Kind, String> {
    let uring_available = || {
        if refuse_uring {
            return Err("disabled by M0_URING_DISABLED=1".to_string());
        }
        uring_available()
    };
    match choice {
        Choice::Portable => Ok(Kind::Portable),
        Choice::Uring => uring_available()
            .map(|()| Kind::Uring)
            .map_err(|why| format!("--backend uring: io_uring is not available: {why}")),
        Choice::Auto => match uring_available() {
            Ok(()) => Ok(Kind::Uring),
            Err(why) => {
                tracing::warn!("io_uring is not available ({why}); using the portable backend");
                Ok(Kind::Portable)
            }
        },
    }
}

#[cfg(target_os = "linux")]
fn uring_available() -> Result<(), String> {
    m0serve_uring::probe().map_err(|e| {
        let hint = match e.raw_os_error() {
            Some(libc::EPERM) => {
                " (EPERM: a seccomp profile or kernel.io_uring_disabled refuses it)"
            }
            Some(libc::ENOSYS) => " (ENOSYS: the kernel or a seccomp profile lacks io_uring)",
            _ => "",
        };
        format!("{e}{hint}")
    })
}

#[cfg(not(target_os = "linux"))]
fn uring_available() -> Result<(), String> {
    Err("io_uring exists only on Linux".into())
}
