//! Keepalive pings: a peer that went away without a FIN (a closed laptop, a
//! dropped mobile link, a NAT that forgot the flow) leaves a quiet WebSocket
//! that nothing else would ever end, with an app task waiting on it for good.
//! After `interval` with nothing heard, the server pings; if nothing at all
//! comes back within `timeout`, the peer is taken for gone. The pings also
//! keep an idle connection alive through proxies that close quiet ones
//! (nginx's `proxy_read_timeout` is 60 s). uvicorn's defaults: 20 s and 20 s.
//!
//! Any bytes from the peer count as an answer, not only the Pong: a peer
//! that is sending is there, and RFC 6455 §5.5.3 lets it answer only the
//! latest of several pings anyway.

use std::time::{Duration, Instant};

/// When a quiet peer is pinged, and how long it has to answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keepalive {
    /// Quiet this long (nothing heard): a Ping.
    pub interval: Duration,
    /// After the Ping, nothing heard for this long: gone.
    pub timeout: Duration,
}

/// What is due at a connection's keepalive deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// Not yet (the deadline moved).
    Nothing,
    /// Send a Ping.
    Ping,
    /// The Ping went unanswered: the peer is gone.
    Gone,
}

/// One connection's keepalive clock.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// When the peer was last heard from.
    heard: Instant,
    /// When the unanswered Ping went out.
    pinged: Option<Instant>,
}

impl Clock {
    pub fn new(now: Instant) -> Clock {
        Clock {
            heard: now,
            pinged: None,
        }
    }

    /// Bytes came from the peer.
    pub fn heard(&mut self, now: Instant) {
        self.heard = now;
        self.pinged = None;
    }

    /// When [`Clock::due`] next has something to do.
    pub fn deadline(&self, k: &Keepalive) -> Instant {
        match self.pinged {
            None => self.heard + k.interval,
            Some(at) => at + k.timeout,
        }
    }

    /// What is due at `now`. `listening` false: the connection is not
    /// being read (the app has its fill), so an answer may be waiting
    /// unread, or output is queued ahead of where a Ping would go (the send
    /// timeout watches a client that takes none of it); either counts as
    /// heard rather than gone, and no Ping is sent.
    pub fn due(&mut self, k: &Keepalive, now: Instant, listening: bool) -> Due {
        if now < self.deadline(k) {
            return Due::Nothing;
        }
        if !listening {
            self.heard(now);
            return Due::Nothing;
        }
        match self.pinged {
            None => {
                self.pinged = Some(now);
                Due::Ping
            }
            Some(_) => Due::Gone,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: Keepalive = Keepalive {
        interval: Duration::from_secs(20),
        timeout: Duration::from_secs(10),
    };

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn a_quiet_peer_is_pinged_after_the_interval_then_gone_after_the_timeout() {
        let t0 = Instant::now();
        let mut c = Clock::new(t0);
        assert_eq!(c.deadline(&K), t0 + secs(20));
        assert_eq!(c.due(&K, t0 + secs(19), true), Due::Nothing);
        assert_eq!(c.due(&K, t0 + secs(20), true), Due::Ping);
        assert_eq!(c.deadline(&K), t0 + secs(30));
        assert_eq!(c.due(&K, t0 + secs(29), true), Due::Nothing);
        assert_eq!(c.due(&K, t0 + secs(30), true), Due::Gone);
    }

    #[test]
    fn anything_heard_answers_the_ping_and_restarts_the_interval() {
        let t0 = Instant::now();
        let mut c = Clock::new(t0);
        assert_eq!(c.due(&K, t0 + secs(20), true), Due::Ping);
        c.heard(t0 + secs(25));
        assert_eq!(c.deadline(&K), t0 + secs(45));
        assert_eq!(c.due(&K, t0 + secs(30), true), Due::Nothing);
        assert_eq!(c.due(&K, t0 + secs(45), true), Due::Ping);
        // A peer that keeps talking is never pinged.
        let mut c = Clock::new(t0);
        for n in 1..10 {
            c.heard(t0 + secs(15 * n));
            assert_eq!(c.due(&K, t0 + secs(15 * n + 10), true), Due::Nothing);
        }
    }

    #[test]
    fn a_connection_not_being_read_is_not_given_up() {
        let t0 = Instant::now();
        let mut c = Clock::new(t0);
        assert_eq!(c.due(&K, t0 + secs(20), true), Due::Ping);
        // The answer may be in the socket, unread while the app is full.
        assert_eq!(c.due(&K, t0 + secs(30), false), Due::Nothing);
        assert_eq!(c.deadline(&K), t0 + secs(50));
        assert_eq!(c.due(&K, t0 + secs(50), true), Due::Ping);
        assert_eq!(c.due(&K, t0 + secs(60), true), Due::Gone);
    }
}
