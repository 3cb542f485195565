//! The [`Service`] that opens an [`HttpSession`] for each connection a
//! core thread accepts, with the clocks, protocol settings and metrics it
//! starts with.

use std::sync::Arc;
use std::time::Instant;

use crate::backend::{Notifier, Peer, Service};
use crate::http::ServerConn;
use crate::metrics::counters::Shard;

use super::meter::Meter;
use super::mode::Mode;
use super::output::OutputQueue;
use super::{access_log, HttpSession, Shared};

/// Opens an [`HttpSession`] per connection; one per core thread.
pub struct HttpService {
    pub(super) shared: Arc<Shared>,
    /// This core thread's metrics, when they are served.
    shard: Option<&'static Shard>,
}

impl HttpService {
    pub fn new(shared: Arc<Shared>) -> Self {
        HttpService {
            shared,
            shard: None,
        }
    }

    /// Count this core's connections and requests in `shard`.
    pub fn counting(mut self, shard: Option<&'static Shard>) -> Self {
        self.shard = shard;
        self
    }
}

impl Service for HttpService {
    type Session = HttpSession;

    fn open(&mut self, peer: &Peer, listener: usize, notifier: Notifier) -> HttpSession {
        let now = Instant::now();
        let mut conn = ServerConn::new(self.shared.limits);
        if let Some(defaults) = &self.shared.response_defaults {
            conn.set_defaults(defaults.clone());
        }
        // A PROXY protocol preamble and the first head are held to the head's
        // timeout together, from the connection's start.
        let preamble = self.shared.proxy.expects_preamble(peer);
        if preamble {
            conn.expect_preamble();
        }
        let meter = self.shard.map(|shard| Meter::open(shard, &mut conn));
        HttpSession {
            conn,
            meter,
            // A connection that never sends a head is held to the head's timeout.
            deadline: Some(now + self.shared.header_read_timeout),
            head_started: preamble.then_some(now),
            request_started: now,
            log: access_log::Backlog::default(),
            body_clock: None,
            send_since: None,
            output: OutputQueue::default(),
            pending: None,
            app: None,
            events: Vec::new(),
            mode: Mode::Http1,
            closed: false,
            given_up: false,
            eof: false,
            shutting: false,
            held_by_drain: None,
            stream_tell: None,
            peer: peer.clone(),
            server: self.shared.servers[listener].clone(),
            tls: None,
            notifier,
            // A TLS connection's protocol is ALPN's (`secured`), and a
            // PROXY preamble comes before any preface.
            sniffing: self.shared.http.h2() && !preamble,
            sniffed: Vec::new(),
            shared: self.shared.clone(),
        }
    }
}
