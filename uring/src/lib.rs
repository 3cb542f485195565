//! m0serve's io_uring ring: one [`Ring`] per core thread, with the few typed
//! operations the server's loop needs.
//!
//! - a multishot accept per listener ([`Ring::arm_accept`]) whose completions carry
//!   [`std::os::fd::OwnedFd`]s, with its `F_MORE` flag surfaced so the caller
//!   re-arms it when it ends, and [`Ring::cancel_accept`] for the connection limit;
//!   or a single-shot one ([`Ring::arm_accept_once`]) where rings of several
//!   processes share a listener;
//! - [`Ring::recv`] into the ring's own pool of receive buffers, taken only
//!   when bytes arrive ([`Received`], given back with [`Ring::give_back`]);
//! - [`Ring::send`] on caller-owned buffers that travel with the operation
//!   and come back in its completion, and [`Ring::send_lent`] from a shared
//!   [`bytes::Bytes`] (an answer's own bytes), held until it completes;
//! - [`Ring::watch_hangup`]: a poll that completes when the peer hangs up,
//!   for a connection that has no recv armed to notice it;
//! - [`Ring::watch_writable`]: a poll that completes when a socket has room,
//!   for a write made outside the ring (`sendfile`) that found it full;
//! - one timer for the caller's next deadline ([`Ring::set_timer`]);
//! - a [`Waker`] other threads use to interrupt the ring's wait;
//! - [`Token`]: the slot and generation an operation belongs to, encoded in
//!   its user_data with the operation's kind, so stale completions are told apart.
//!
//! All of the backend's `unsafe` lives here (see `ring.rs` for the rule that
//! keeps buffers alive while the kernel uses them). tokio-uring is not used:
//! it has no multishot operations and no control over a pass.
//!
//! io_uring is Linux's alone; on every other system this crate is empty.
#![cfg(target_os = "linux")]

mod bufs;
mod ring;
mod sys;
mod token;

#[cfg(test)]
mod tests;

pub use bufs::Received;
pub use ring::{AcceptState, Completion, Config, Hangup, Op, Ring, Waker};
pub use sys::recv_now;
pub use token::Token;

use std::io;

/// The opcodes the server's loop submits.
const OPCODES: &[(u8, &str)] = &[
    (io_uring::opcode::AcceptMulti::CODE, "ACCEPT"),
    (io_uring::opcode::Recv::CODE, "RECV"),
    (io_uring::opcode::Send::CODE, "SEND"),
    (io_uring::opcode::Read::CODE, "READ"),
    (io_uring::opcode::Timeout::CODE, "TIMEOUT"),
    (io_uring::opcode::TimeoutRemove::CODE, "TIMEOUT_REMOVE"),
    (io_uring::opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
    (io_uring::opcode::PollAdd::CODE, "POLL_ADD"),
];

/// Whether this kernel (and any seccomp profile) lets us build a ring with
/// the operations we use. The opcode probe cannot see the multishot flag
/// (Linux 5.19), so a multishot accept is tried on a loopback listener too.
pub fn probe() -> io::Result<()> {
    let mut ring = Ring::new(Config::default())?;
    let supported = ring.probe_opcodes()?;
    for &(code, name) in OPCODES {
        if !supported.is_supported(code) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("the kernel lacks IORING_OP_{name}"),
            ));
        }
    }
    // Without a loopback listener there is nothing to try it on: the opcodes must do.
    let Ok(listener) = std::net::TcpListener::bind("127.0.0.1:0") else {
        return Ok(());
    };
    use std::os::fd::AsFd;
    ring.arm_accept(0, listener.as_fd())?;
    ring.cancel_accept(0)?;
    let mut out = Vec::new();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(1);
    ring.set_timer(give_up)?;
    while ring.accept_state(0) != AcceptState::Idle && std::time::Instant::now() < give_up {
        ring.submit_and_wait()?;
        ring.complete(&mut out);
        for c in out.drain(..) {
            if let Completion::Accepted { result: Err(e), .. } = c {
                if e.raw_os_error() == Some(libc::EINVAL) {
                    return Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        "the kernel lacks multishot accept (Linux 5.19)",
                    ));
                }
            }
        }
    }
    Ok(())
}
