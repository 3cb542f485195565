//! A session's metrics: what it counts into its core thread's
//! [`Shard`] (requests by method and status, their durations and how many
//! are in flight, bytes, why the connection closed). Off (`None` in the
//! session) unless `--metrics-address` is given.
//!
//! A request is timed from its head's first byte to the last byte of its
//! answer written: an answer finished by the protocol ends at the output
//! position it reached, and is counted once the sends pass it.

use std::collections::VecDeque;
use std::time::Instant;

use crate::http::ServerConn;
use crate::metrics::counters::{method_index, Cause, Shard, OTHER};
use crate::server::until_sent::UntilSent;

pub(super) struct Meter {
    shard: &'static Shard,
    /// Requests read and not yet answered: method and start.
    heads: VecDeque<(usize, Instant)>,
    /// Answers finished and not yet all sent: their method, status and
    /// start, and whether a head was counted as started for them.
    answered: UntilSent<Answer>,
    /// The first reason the session gave for closing.
    cause: Option<Cause>,
    ws: bool,
}

struct Answer {
    method: usize,
    status: u16,
    start: Instant,
    headed: bool,
}

impl Meter {
    /// A connection was accepted; `conn` now keeps its answers' statuses.
    pub(super) fn open(shard: &'static Shard, conn: &mut ServerConn) -> Meter {
        shard.accepted();
        conn.record_answers();
        Meter {
            shard,
            heads: VecDeque::new(),
            answered: UntilSent::default(),
            cause: None,
            ws: false,
        }
    }

    pub(super) fn read(&self, n: usize) {
        self.shard.bytes_in(n);
    }

    /// A request head, whose first byte came at `start`.
    pub(super) fn head(&mut self, method: &str, start: Instant) {
        self.shard.request_started();
        self.heads.push_back((method_index(method), start));
    }

    /// An HTTP/2 stream's request: its answer is counted by
    /// [`Meter::answered`], or it is [`Meter::dropped`].
    pub(super) fn started(&mut self) {
        self.shard.request_started();
    }

    /// An HTTP/2 stream's answer was given whole; its last byte is at
    /// output position `end`.
    pub(super) fn answered(&mut self, method: &str, status: u16, start: Instant, end: u64) {
        let answer = Answer {
            method: method_index(method),
            status,
            start,
            headed: true,
        };
        self.answered.push(end, answer);
    }

    /// An HTTP/2 stream ended unanswered (reset).
    pub(super) fn dropped(&mut self) {
        self.shard.request_dropped();
    }

    /// Take the answers `conn` finished; their last byte is at most at
    /// output position `end` (what was sent plus what is queued).
    pub(super) fn answers(&mut self, conn: &mut ServerConn, queued: u64, now: Instant) {
        while let Some(status) = conn.take_answered() {
            let (method, start, headed) = match self.heads.pop_front() {
                Some((method, start)) => (method, start, true),
                // An answer without a head read: a 400 for an unreadable one.
                None => (OTHER, now, false),
            };
            self.answered.push(
                queued,
                Answer {
                    method,
                    status,
                    start,
                    headed,
                },
            );
        }
        self.settle(now);
    }

    /// `n` more bytes were written.
    pub(super) fn sent(&mut self, n: usize, now: Instant) {
        self.shard.bytes_out(n);
        self.answered.sent(n as u64);
        self.settle(now);
    }

    fn settle(&mut self, now: Instant) {
        while let Some(a) = self.answered.pop_done() {
            count(self.shard, a, now);
        }
    }

    /// Why the connection is closing, if no reason was given before.
    pub(super) fn cause(&mut self, cause: Cause) {
        self.cause.get_or_insert(cause);
    }

    pub(super) fn ws_opened(&mut self) {
        self.ws = true;
        self.shard.ws_opened();
    }

    pub(super) fn ws_message(&self, inbound: bool) {
        self.shard.ws_message(inbound);
    }

    /// The connection is gone: answers still being written count (their
    /// duration up to now), requests never answered leave the in-flight
    /// count, and the close is counted with its cause (`otherwise` when the
    /// session gave none).
    pub(super) fn close(&mut self, otherwise: Cause, now: Instant) {
        for a in self.answered.drain() {
            count(self.shard, a, now);
        }
        for _ in self.heads.drain(..) {
            self.shard.request_dropped();
        }
        if self.ws {
            self.shard.ws_closed();
        }
        self.shard.closed(self.cause.unwrap_or(otherwise));
    }
}

fn count(shard: &Shard, a: Answer, now: Instant) {
    let elapsed = now.saturating_duration_since(a.start);
    shard.request_done(a.method, a.status, elapsed, a.headed);
}
