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

use std::collections::VecDeque;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub use format::Format;

use crate::backend::Peer;
use crate::http::RequestHead;

/// An answered request waiting for its last byte to go out.
pub struct Answered {
    pub head: RequestHead,
    pub status: u16,
    /// Body bytes of the answer.
    pub bytes: u64,
    /// The response headers the format shows ([`Format::response_headers`]).
    pub response_headers: Vec<(String, Vec<u8>)>,
    /// When the head's first byte arrived.
    pub started: Instant,
}

/// A session's answered requests, in output order, and its output counter.
#[derive(Default)]
pub struct Backlog {
    /// Bytes of output sent so far.
    sent: u64,
    /// Each answer with the output offset just past its last byte.
    waiting: VecDeque<(u64, Answered)>,
}

impl Backlog {
    /// `answer`'s last byte is `queued` bytes past what has been sent.
    pub fn push(&mut self, queued: u64, answer: Answered) {
        self.waiting.push_back((self.sent + queued, answer));
    }

    /// `n` more bytes went out at `now`: log the answers they completed.
    pub fn sent(&mut self, n: usize, now: Instant, peer: &Peer, format: &Format) {
        self.sent += n as u64;
        while let Some(answer) = self.next_done() {
            write(peer, &answer, now, format);
        }
    }

    /// The oldest answer whose last byte has been sent.
    fn next_done(&mut self) -> Option<Answered> {
        match self.waiting.front() {
            Some((end, _)) if *end <= self.sent => self.waiting.pop_front().map(|(_, a)| a),
            _ => None,
        }
    }

    /// The connection ended: log what is left as of `now`.
    pub fn flush(&mut self, now: Instant, peer: &Peer, format: &Format) {
        for (_, answer) in self.waiting.drain(..) {
            write(peer, &answer, now, format);
        }
    }
}

/// The response headers of `headers` that `format` shows, kept for its line.
pub fn kept_headers<'h, V: AsRef<[u8]> + 'h>(
    format: &Format,
    headers: impl IntoIterator<Item = (&'h str, V)>,
) -> Vec<(String, Vec<u8>)> {
    let wanted = format.response_headers();
    if wanted.is_empty() {
        return Vec::new();
    }
    headers
        .into_iter()
        .filter(|(name, _)| wanted.iter().any(|w| name.eq_ignore_ascii_case(w)))
        .map(|(name, value)| (name.to_string(), value.as_ref().to_vec()))
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
    use crate::http::{BodyKind, Version};

    fn answer(target: &str) -> Answered {
        Answered {
            head: RequestHead {
                method: "GET".into(),
                target: target.into(),
                version: Version::Http11,
                headers: Vec::new(),
                body: BodyKind::Empty,
                keep_alive: true,
                expect_continue: false,
            },
            status: 200,
            bytes: 5,
            response_headers: Vec::new(),
            started: Instant::now(),
        }
    }

    #[test]
    fn an_answer_is_done_only_once_its_last_byte_is_sent() {
        let mut log = Backlog::default();
        log.push(100, answer("/a")); // ends at 100
        log.sent += 40;
        log.push(60 + 50, answer("/b")); // 60 still queued before it: ends at 150
        assert!(log.next_done().is_none(), "40 of /a's 100 bytes are out");
        log.sent += 59;
        assert!(log.next_done().is_none(), "one byte of /a is still queued");
        log.sent += 1;
        assert_eq!(log.next_done().map(|a| a.head.target), Some("/a".into()));
        assert!(log.next_done().is_none());
        log.sent += 50;
        assert_eq!(log.next_done().map(|a| a.head.target), Some("/b".into()));
    }

    #[test]
    fn only_the_response_headers_the_format_shows_are_kept() {
        let format = Format::parse("%({x-request-id}o)s %({Server}o)s").unwrap();
        let headers = [
            ("Content-Type", "text/plain"),
            ("X-Request-Id", "7"),
            ("server", "m0"),
        ];
        let kept = kept_headers(&format, headers);
        assert_eq!(
            kept,
            vec![
                ("X-Request-Id".into(), b"7".to_vec()),
                ("server".into(), b"m0".to_vec())
            ]
        );
        let none = Format::parse(format::DEFAULT).unwrap();
        assert!(kept_headers(&none, headers).is_empty());
    }
}
