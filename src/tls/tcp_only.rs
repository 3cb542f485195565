//! TLS applies to TCP listeners only: one setting serves every TCP bind,
//! and a Unix socket's peer (a local proxy or sidecar, which the kernel
//! already keeps to this machine) is served plain HTTP. [`Either`] is the
//! session of either kind, delegating every call to the one it holds. A TLS
//! session whose records the kernel takes over becomes a plain one.

use std::time::Instant;

use bytes::Bytes;

use super::session::TlsSession;
use super::Secured;
use crate::backend::ktls::Keys;
use crate::backend::{Linger, Output, Session};

/// A connection's session on a TLS server: TLS (a TCP peer), or plain (a
/// Unix socket's). Not boxed: on a TLS server most connections are TLS,
/// and a slab slot of a TLS session's size is what one was before.
#[allow(clippy::large_enum_variant)]
pub enum Either<S> {
    Tls(TlsSession<S>),
    /// A Unix socket's, or a TLS one the kernel encrypts.
    Plain(S),
    /// Between the two, and after rustls would not give its keys up: the
    /// connection closes unanswered.
    Cut(Cut),
}

/// A session that is over: it reads nothing, says nothing, and is aborted.
pub struct Cut;

impl Session for Cut {
    fn on_read(&mut self, _: &[u8], _: Instant) {}
    fn on_eof(&mut self, _: Instant) {}
    fn output(&mut self) -> Output<'_> {
        Output::None
    }
    fn on_sent(&mut self, _: usize, _: Instant) {}
    fn wants_read(&self) -> bool {
        false
    }
    fn done(&self) -> bool {
        true
    }
    fn aborted(&self) -> bool {
        true
    }
    fn deadline(&self) -> Option<Instant> {
        None
    }
    fn on_deadline(&mut self, _: Instant) {}
    fn idle(&self) -> bool {
        true
    }
    fn on_shutdown(&mut self) {}
    fn on_notify(&mut self, _: Instant) {}
    fn linger(&self) -> Linger {
        Linger::No
    }
}

/// `$call` on whichever session `$self` holds.
macro_rules! each {
    ($self:expr, $s:ident => $call:expr) => {
        match $self {
            Either::Tls($s) => $call,
            Either::Plain($s) => $call,
            Either::Cut($s) => $call,
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
    fn kernel_tls(&mut self) -> Option<Keys> {
        let Either::Tls(tls) = self else {
            return None;
        };
        if !tls.kernel_ready() {
            return None;
        }
        let Either::Tls(tls) = std::mem::replace(self, Either::Cut(Cut)) else {
            unreachable!("a TLS session, looked at above");
        };
        let (inner, keys) = tls.into_kernel();
        if keys.is_some() {
            *self = Either::Plain(inner);
        }
        keys
    }
}
