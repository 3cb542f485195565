//! TLS applies to TCP listeners only: one setting serves every TCP bind,
//! and a Unix socket's peer (a local proxy or sidecar, which the kernel
//! already keeps to this machine) is served plain HTTP. [`Either`] is the
//! session of either kind, delegating every call to the one it holds.

use std::time::Instant;

use bytes::Bytes;

use super::session::TlsSession;
use super::Secured;
use crate::backend::{Linger, Output, Session};

/// A connection's session on a TLS server: TLS (a TCP peer), or plain (a
/// Unix socket's). Not boxed: on a TLS server most connections are TLS,
/// and a slab slot of a TLS session's size is what one was before.
#[allow(clippy::large_enum_variant)]
pub enum Either<S> {
    Tls(TlsSession<S>),
    Plain(S),
}

/// `$call` on whichever session `$self` holds.
macro_rules! each {
    ($self:expr, $s:ident => $call:expr) => {
        match $self {
            Either::Tls($s) => $call,
            Either::Plain($s) => $call,
        }
    };
}

impl<S: Session + Secured> Session for Either<S> {
    fn on_read(&mut self, data: &[u8], now: Instant) {
        each!(self, s => s.on_read(data, now))
    }
    fn on_eof(&mut self, now: Instant) {
        each!(self, s => s.on_eof(now))
    }
    fn on_hangup(&mut self, now: Instant) {
        each!(self, s => s.on_hangup(now))
    }
    fn output(&mut self) -> Output<'_> {
        each!(self, s => s.output())
    }
    fn on_sent(&mut self, n: usize, now: Instant) {
        each!(self, s => s.on_sent(n, now))
    }
    fn lend_output(&mut self) -> Option<(Bytes, usize)> {
        each!(self, s => s.lend_output())
    }
    fn on_sent_lent(&mut self, buf: Bytes, n: usize, now: Instant) {
        each!(self, s => s.on_sent_lent(buf, n, now))
    }
    fn wants_read(&self) -> bool {
        each!(self, s => s.wants_read())
    }
    fn done(&self) -> bool {
        each!(self, s => s.done())
    }
    fn aborted(&self) -> bool {
        each!(self, s => s.aborted())
    }
    fn deadline(&self) -> Option<Instant> {
        each!(self, s => s.deadline())
    }
    fn on_deadline(&mut self, now: Instant) {
        each!(self, s => s.on_deadline(now))
    }
    fn idle(&self) -> bool {
        each!(self, s => s.idle())
    }
    fn on_shutdown(&mut self) {
        each!(self, s => s.on_shutdown())
    }
    fn on_notify(&mut self, now: Instant) {
        each!(self, s => s.on_notify(now))
    }
    fn linger(&self) -> Linger {
        each!(self, s => s.linger())
    }
}
