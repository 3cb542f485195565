//! The counters the core threads keep: one [`Shard`] per core thread, in a
//! shared page set ([`Region`]) that the supervisor created and renders.
//!
//! Each shard has one writer, its core thread, so a count is a plain load
//! and store of a `Relaxed` atomic (no locked instruction, no lock, no
//! cache line shared with another core); the renderer, in another process,
//! reads the same atomics. Nothing here knows the text format: the session
//! counts, [`super::render`] renders.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::ipc::shared_page::{self, Page};

/// Core threads, across every worker, that can hold a shard; more count nothing.
pub const SHARDS: usize = 1024;

/// Request methods counted by name; any other is `other`.
pub const METHODS: [&str; 10] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE", "other",
];
/// The `other` method: also a request answered before its head was read (a 400).
pub const OTHER: usize = METHODS.len() - 1;

/// Status classes, `1xx` to `5xx`.
pub const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// Upper bounds of the request-duration histogram, in seconds (`+Inf` follows).
pub const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// Why a connection closed, as the session can tell cheaply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// Idle between requests for the keep-alive timeout.
    KeepAliveTimeout,
    /// A head (or a fresh connection's first byte) took longer than the header timeout.
    HeaderTimeout,
    /// A request body's next bytes took longer than the body timeout (408).
    BodyTimeout,
    /// The client took none of the output for the send timeout.
    SendTimeout,
    /// A malformed request, answered 4xx and closed.
    BadRequest,
    /// The client closed its side (end of file) between or after requests.
    ClientClosed,
    /// The exchange ended the connection (`Connection: close`, HTTP/1.0, a
    /// WebSocket's closing handshake).
    ServerClosed,
    /// Dropped by the backend before the session was done: a reset or
    /// another socket error.
    Reset,
    /// Closed by the graceful shutdown.
    Shutdown,
    /// A WebSocket's keepalive ping went unanswered.
    PingTimeout,
    /// An HTTP/2 keep-alive PING went unanswered.
    Http2PingTimeout,
}

/// Every cause, in label order.
pub const CAUSES: [Cause; 11] = [
    Cause::KeepAliveTimeout,
    Cause::HeaderTimeout,
    Cause::BodyTimeout,
    Cause::SendTimeout,
    Cause::BadRequest,
    Cause::ClientClosed,
    Cause::ServerClosed,
    Cause::Reset,
    Cause::Shutdown,
    Cause::PingTimeout,
    Cause::Http2PingTimeout,
];

impl Cause {
    pub fn label(self) -> &'static str {
        match self {
            Cause::KeepAliveTimeout => "keep_alive_timeout",
            Cause::HeaderTimeout => "header_timeout",
            Cause::BodyTimeout => "body_timeout",
            Cause::SendTimeout => "send_timeout",
            Cause::PingTimeout => "ws_ping_timeout",
            Cause::Http2PingTimeout => "h2_ping_timeout",
            Cause::BadRequest => "bad_request",
            Cause::ClientClosed => "client_closed",
            Cause::ServerClosed => "server_closed",
            Cause::Reset => "reset",
            Cause::Shutdown => "shutdown",
        }
    }
}

/// The index of `method` in [`METHODS`].
pub fn method_index(method: &str) -> usize {
    METHODS[..OTHER]
        .iter()
        .position(|m| *m == method)
        .unwrap_or(OTHER)
}

/// One core thread's counters. All zero is a valid, empty shard (the page
/// is zero-filled).
#[repr(C)]
pub struct Shard {
    /// The owning process; 0 while free.
    owner: AtomicU32,
    /// The owner's worker number (the `worker` label).
    worker: AtomicU32,
    requests: [[AtomicU64; CLASSES.len()]; METHODS.len()],
    /// Non-cumulative counts per bucket; the last is `+Inf`.
    duration: [AtomicU64; BUCKETS.len() + 1],
    duration_ns: AtomicU64,
    /// Started minus finished requests (wrapping: a shard may go below 0
    /// only between a core's two counts, never as rendered summed).
    in_flight: AtomicU64,
    accepted: AtomicU64,
    closed: [AtomicU64; CAUSES.len()],
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    ws_opened: AtomicU64,
    ws_closed: AtomicU64,
    ws_in: AtomicU64,
    ws_out: AtomicU64,
}

/// Add `n` to a counter only this thread writes: a load and a store, no
/// read-modify-write instruction.
#[inline]
fn bump(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

impl Shard {
    /// A request head arrived.
    pub fn request_started(&self) {
        bump(&self.in_flight, 1);
    }

    /// A request's answer was sent to its last byte (or the connection went
    /// first), `elapsed` after its head's first byte; `started`: it was
    /// counted by [`Shard::request_started`] (a 400 for an unreadable head was not).
    pub fn request_done(&self, method: usize, status: u16, elapsed: Duration, started: bool) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        bump(&self.requests[method.min(OTHER)][class], 1);
        let secs = elapsed.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(BUCKETS.len());
        bump(&self.duration[bucket], 1);
        bump(&self.duration_ns, elapsed.as_nanos() as u64);
        if started {
            self.request_dropped();
        }
    }

    /// A started request ended without an answer (its connection went).
    pub fn request_dropped(&self) {
        bump(&self.in_flight, u64::MAX); // -1, wrapping
    }

    pub fn accepted(&self) {
        bump(&self.accepted, 1);
    }

    pub fn closed(&self, cause: Cause) {
        let i = CAUSES.iter().position(|c| *c == cause).unwrap_or(0);
        bump(&self.closed[i], 1);
    }

    pub fn bytes_in(&self, n: usize) {
        bump(&self.bytes_in, n as u64);
    }

    pub fn bytes_out(&self, n: usize) {
        bump(&self.bytes_out, n as u64);
    }

    pub fn ws_opened(&self) {
        bump(&self.ws_opened, 1);
    }

    pub fn ws_closed(&self) {
        bump(&self.ws_closed, 1);
    }

    /// A WebSocket message from the client (`true`) or to it.
    pub fn ws_message(&self, inbound: bool) {
        bump(if inbound { &self.ws_in } else { &self.ws_out }, 1);
    }

    fn read(&self, into: &mut Totals) {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        for (row, out) in self.requests.iter().zip(&mut into.requests) {
            for (a, o) in row.iter().zip(out.iter_mut()) {
                *o += get(a);
            }
        }
        for (a, o) in self.duration.iter().zip(&mut into.duration) {
            *o += get(a);
        }
        into.duration_ns += get(&self.duration_ns);
        into.in_flight = into.in_flight.wrapping_add(get(&self.in_flight));
        into.accepted += get(&self.accepted);
        for (a, o) in self.closed.iter().zip(&mut into.closed) {
            *o += get(a);
        }
        into.bytes_in += get(&self.bytes_in);
        into.bytes_out += get(&self.bytes_out);
        into.ws_opened += get(&self.ws_opened);
        into.ws_closed += get(&self.ws_closed);
        into.ws_in += get(&self.ws_in);
        into.ws_out += get(&self.ws_out);
    }
}

/// One worker's counters, summed over its shards: what is rendered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub requests: [[u64; CLASSES.len()]; METHODS.len()],
    pub duration: [u64; BUCKETS.len() + 1],
    pub duration_ns: u64,
    /// Wrapping sum: read as `i64`.
    pub in_flight: u64,
    pub accepted: u64,
    pub closed: [u64; CAUSES.len()],
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub ws_opened: u64,
    pub ws_closed: u64,
    pub ws_in: u64,
    pub ws_out: u64,
}

impl Totals {
    /// Connections open now: accepted, less every close.
    pub fn open(&self) -> u64 {
        self.accepted
            .saturating_sub(self.closed.iter().sum::<u64>())
    }
}

/// Log2 buckets of the pool's re-attach wait (nanoseconds: bucket `i`
/// counts `[2^(i-1), 2^i)`), as the pool keeps them.
pub const REATTACH_BUCKETS: usize = 48;

/// What a worker's application side is doing, sampled from its pool (WSGI)
/// or its executor (ASGI); `kind` says which (0: neither).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppFigures {
    pub kind: u64,
    /// Jobs waiting in the pool's queue.
    pub pool_queued: u64,
    /// Jobs a pool thread took inside its slice without dropping the GIL.
    pub pool_kept: u64,
    /// Hand-offs of the GIL at a spent slice, and those that ran out of their bound.
    pub pool_handoffs: u64,
    pub pool_handoff_timeouts: u64,
    pub reattach: Vec<u64>,
    pub reattach_sum_ns: u64,
    /// Requests waiting for the ASGI executor, and tasks running on its loop.
    pub asgi_queued: u64,
    pub asgi_tasks: u64,
}

/// [`AppFigures::kind`] of a WSGI pool.
pub const POOL: u64 = 1;
/// [`AppFigures::kind`] of an ASGI executor.
pub const EXECUTOR: u64 = 2;

/// A worker's [`AppFigures`], where its sampler writes them.
#[repr(C)]
pub struct Figures {
    owner: AtomicU32,
    worker: AtomicU32,
    kind: AtomicU64,
    pool_queued: AtomicU64,
    pool_kept: AtomicU64,
    pool_handoffs: AtomicU64,
    pool_handoff_timeouts: AtomicU64,
    reattach: [AtomicU64; REATTACH_BUCKETS],
    reattach_sum_ns: AtomicU64,
    asgi_queued: AtomicU64,
    asgi_tasks: AtomicU64,
}

impl Figures {
    /// Publish `f` (one writer: the worker's sampler).
    pub fn store(&self, f: &AppFigures) {
        let set = |a: &AtomicU64, v: u64| a.store(v, Ordering::Relaxed);
        set(&self.kind, f.kind);
        set(&self.pool_queued, f.pool_queued);
        set(&self.pool_kept, f.pool_kept);
        set(&self.pool_handoffs, f.pool_handoffs);
        set(&self.pool_handoff_timeouts, f.pool_handoff_timeouts);
        for (a, v) in self.reattach.iter().zip(&f.reattach) {
            set(a, *v);
        }
        set(&self.reattach_sum_ns, f.reattach_sum_ns);
        set(&self.asgi_queued, f.asgi_queued);
        set(&self.asgi_tasks, f.asgi_tasks);
    }

    fn load(&self) -> AppFigures {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        AppFigures {
            kind: get(&self.kind),
            pool_queued: get(&self.pool_queued),
            pool_kept: get(&self.pool_kept),
            pool_handoffs: get(&self.pool_handoffs),
            pool_handoff_timeouts: get(&self.pool_handoff_timeouts),
            reattach: self.reattach.iter().map(get).collect(),
            reattach_sum_ns: get(&self.reattach_sum_ns),
            asgi_queued: get(&self.asgi_queued),
            asgi_tasks: get(&self.asgi_tasks),
        }
    }

    fn clear(&self) {
        self.store(&AppFigures {
            reattach: vec![0; REATTACH_BUCKETS],
            ..Default::default()
        });
    }
}

/// Worker processes whose figures the region holds.
pub const WORKERS: usize = 256;

const SHARDS_SIZE: usize = SHARDS * std::mem::size_of::<Shard>();
const SIZE: usize = SHARDS_SIZE + WORKERS * std::mem::size_of::<Figures>();

/// The shards of every worker: a shared mapping that lives as long as the
/// process (it is never unmapped: core threads hold `&'static` shards).
#[derive(Clone, Copy)]
pub struct Region {
    shards: &'static [Shard],
    figures: &'static [Figures],
}

impl Region {
    /// A new, zeroed region, as a descriptor for workers to inherit, and the
    /// creator's own map of it.
    pub fn create() -> io::Result<(OwnedFd, Region)> {
        let fd = shared_page::create(c"m0serve-metrics", SIZE)?;
        let region = Region::map(&fd)?;
        Ok((fd, region))
    }

    /// Map the region `fd` names (from [`Region::create`]).
    pub fn map(fd: &OwnedFd) -> io::Result<Region> {
        let p = Page::map(fd, SIZE)?.leak();
        // SAFETY: the mapping is SIZE bytes, zero-filled (valid arrays of
        // shards then figures: atomics only, 8-byte aligned sizes), and
        // never unmapped.
        let (shards, figures) = unsafe {
            (
                std::slice::from_raw_parts(p.as_ptr().cast::<Shard>(), SHARDS),
                std::slice::from_raw_parts(p.as_ptr().add(SHARDS_SIZE).cast::<Figures>(), WORKERS),
            )
        };
        Ok(Region { shards, figures })
    }

    /// Take a free shard for one core thread of worker `worker`; `None` when
    /// all are taken (that core then counts nothing).
    pub fn claim(&self, worker: u32) -> Option<&'static Shard> {
        let pid = std::process::id();
        let shard = self.shards.iter().find(|s| {
            s.owner
                .compare_exchange(0, pid, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })?;
        shard.worker.store(worker, Ordering::Release);
        Some(shard)
    }

    /// Take the figures slot of this process, worker `worker`.
    pub fn claim_figures(&self, worker: u32) -> Option<&'static Figures> {
        let pid = std::process::id();
        let slot = self.figures.iter().find(|s| {
            s.owner
                .compare_exchange(0, pid, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })?;
        slot.worker.store(worker, Ordering::Release);
        Some(slot)
    }

    /// Each worker's application figures (workers without any are left out).
    pub fn figures(&self) -> std::collections::BTreeMap<u32, AppFigures> {
        let mut by_worker = std::collections::BTreeMap::new();
        for s in self.figures {
            if s.owner.load(Ordering::Acquire) == 0 {
                continue;
            }
            let f = s.load();
            if f.kind != 0 {
                // A rolled worker and its replacement overlap a moment: one is shown.
                by_worker.insert(s.worker.load(Ordering::Acquire), f);
            }
        }
        by_worker
    }

    /// Free and zero every shard of `pid`, which exited (the supervisor's part).
    pub fn forget(&self, pid: u32) {
        for s in self.figures {
            if s.owner.load(Ordering::Acquire) == pid {
                s.clear();
                s.worker.store(0, Ordering::Relaxed);
                s.owner.store(0, Ordering::Release);
            }
        }
        for s in self.shards {
            if s.owner.load(Ordering::Acquire) == pid {
                zero(s);
                s.worker.store(0, Ordering::Relaxed);
                s.owner.store(0, Ordering::Release);
            }
        }
    }

    /// Each worker number with its shards summed, in worker order.
    pub fn totals(&self) -> std::collections::BTreeMap<u32, Totals> {
        let mut by_worker = std::collections::BTreeMap::new();
        for s in self.shards {
            if s.owner.load(Ordering::Acquire) == 0 {
                continue;
            }
            let worker = s.worker.load(Ordering::Acquire);
            s.read(by_worker.entry(worker).or_insert_with(Totals::default));
        }
        by_worker
    }
}

fn zero(s: &Shard) {
    let all = s
        .requests
        .iter()
        .flatten()
        .chain(&s.duration)
        .chain(&s.closed)
        .chain([
            &s.duration_ns,
            &s.in_flight,
            &s.accepted,
            &s.bytes_in,
            &s.bytes_out,
            &s.ws_opened,
            &s.ws_closed,
            &s.ws_in,
            &s.ws_out,
        ]);
    for a in all {
        a.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_sum_by_worker_and_a_forgotten_process_counts_nothing() {
        let (fd, region) = Region::create().unwrap();
        let other = Region::map(&fd).unwrap();
        let a = region.claim(1).unwrap();
        let b = other.claim(2).unwrap();
        let c = region.claim(2).unwrap();
        a.request_started();
        a.request_done(method_index("GET"), 200, Duration::from_micros(50), true);
        b.request_done(method_index("BREW"), 404, Duration::from_millis(3), false);
        c.request_started();
        c.accepted();
        c.closed(Cause::BadRequest);
        let totals = region.totals();
        assert_eq!(totals[&1].requests[0][1], 1, "GET 2xx");
        assert_eq!(totals[&1].duration[0], 1, "50 µs is in the first bucket");
        assert_eq!(totals[&1].in_flight, 0);
        assert_eq!(
            totals[&2].requests[OTHER][3], 1,
            "an unknown method is other"
        );
        assert_eq!(totals[&2].duration[5], 1, "3 ms is in the 5 ms bucket");
        assert_eq!(totals[&2].in_flight as i64, 1);
        assert_eq!(totals[&2].open(), 0);
        assert_eq!(totals[&2].closed[4], 1);
        region.forget(std::process::id());
        assert!(region.totals().is_empty(), "every shard freed");
        assert_eq!(
            region.claim(3).map(|s| s as *const Shard),
            Some(a as *const Shard),
            "a freed shard is taken again, zeroed"
        );
        assert_eq!(region.totals()[&3], Totals::default());
    }
}
