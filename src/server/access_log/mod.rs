//! The access log: one line per answered request, in the `--access-log-format`
//! ([`format`]), emitted through `tracing` under the target `m0serve::access`.
//!
//! A line is written by the core thread once the response's last byte has
//! been sent (handed to the kernel), with the request's duration from the
//! first byte of its head to then; never by Python. A session keeps its
//! answered-but-not-yet-sent requests in a [`Backlog`], each marked with the
//! output offset its response ends at. A connection that ends before its
//! answers are out (a reset, a timeout) still logs them, at its end.

pub mod clf_time;
pub mod format;

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub use format::Format;

use super::until_sent::UntilSent;
use crate::backend::Peer;
use crate::http::{Fields, RequestHead};

/// An answered request waiting for its last byte to go out.
pub struct Answered {
    pub head: Arc<RequestHead>,
    pub status: u16,
    /// Body bytes of the answer.
    pub bytes: u64,
    /// The response headers the format shows ([`Format::response_headers`]).
    pub response_headers: Fields,
    /// When the head's first byte arrived.
    pub started: Instant,
    /// The client the app was told (a trusted proxy's, under
    /// `--proxy-headers`), logged as uvicorn logs it; `None`: the connection's.
    pub peer: Option<Peer>,
}

/// A session's answered requests, in output order, until their last byte is sent.
#[derive(Default)]
pub struct Backlog(UntilSent<Answered>);

impl Backlog {
    /// `answer`'s last byte is `queued` bytes past what has been sent; with
    /// nothing queued (its last bytes went out before its end was known: a
    /// body's final event carries no bytes) it is logged now.
    pub fn push(
        &mut self,
        queued: u64,
        answer: Answered,
        now: Instant,
        peer: &Peer,
        format: &Format,
    ) {
        self.0.push(queued, answer);
        self.log_done(now, peer, format);
    }

    /// `n` more bytes went out at `now`: log the answers they completed.
    pub fn sent(&mut self, n: usize, now: Instant, peer: &Peer, format: &Format) {
        self.0.sent(n as u64);
        self.log_done(now, peer, format);
    }

    fn log_done(&mut self, now: Instant, peer: &Peer, format: &Format) {
        while let Some(answer) = self.0.pop_done() {
            write(answer.peer.as_ref().unwrap_or(peer), &answer, now, format);
        }
    }

    /// The connection ended: log what is left as of `now`.
    pub fn flush(&mut self, now: Instant, peer: &Peer, format: &Format) {
        for answer in self.0.drain() {
            write(answer.peer.as_ref().unwrap_or(peer), &answer, now, format);
        }
    }
}

/// The response headers of `headers` that `format` shows, kept for its line.
pub fn kept_headers<'h, V: AsRef<[u8]> + 'h>(
    format: &Format,
    headers: impl IntoIterator<Item = (&'h str, V)>,
) -> Fields {
    let wanted = format.response_headers();
    if wanted.is_empty() {
        return Fields::default();
    }
    headers
        .into_iter()
        .filter(|(name, _)| wanted.iter().any(|w| name.eq_ignore_ascii_case(w)))
        .collect()
}

fn write(peer: &Peer, answer: &Answered, now: Instant, format: &Format) {
    let duration = now.saturating_duration_since(answer.started);
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .saturating_sub(duration);
    let record = format::Record {
        peer,
        head: &answer.head,
        status: answer.status,
        bytes: answer.bytes,
        response_headers: &answer.response_headers,
        duration,
        started_us: wall.as_micros() as u64,
        pid: std::process::id(),
    };
    let mut line = String::with_capacity(256);
    format.render(&record, &mut line);
    tracing::info!(target: "m0serve::access", "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_response_headers_the_format_shows_are_kept() {
        let format = Format::parse("%({x-request-id}o)s %({Server}o)s").unwrap();
        let headers = [
            ("Content-Type", "text/plain"),
            ("X-Request-Id", "7"),
            ("server", "m0"),
        ];
        let kept = kept_headers(&format, headers);
        assert_eq!(kept, vec![("X-Request-Id", "7"), ("server", "m0")].into());
        let none = Format::parse(format::DEFAULT).unwrap();
        assert!(kept_headers(&none, headers).is_empty());
    }
}
