//! The session's metrics, driven by hand: pipelined answers each counted
//! once their last byte is sent, never before, and the close's cause.

use super::tests::{drain, notifier, service};
use super::*;
use crate::backend::Service;
use crate::metrics::counters::Region;

#[test]
fn pipelined_answers_count_when_their_last_byte_is_sent() {
    let (_fd, region) = Region::create().unwrap();
    let shard = region.claim(7).unwrap();
    let router = Router::new(Some("/healthz".into()), vec![]).unwrap();
    let mut s = service(router)
        .counting(Some(shard))
        .open(&Peer::Unix, 0, notifier());
    let now = Instant::now();
    let input = b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\nGET /nope HTTP/1.1\r\nHost: a\r\n\r\n";
    s.on_read(input, now);
    let totals = || region.totals()[&7].clone();
    assert_eq!(totals().in_flight, 2, "both heads read, no byte sent");
    assert_eq!(
        totals().duration.iter().sum::<u64>(),
        0,
        "nothing counted before it is sent"
    );
    let out = drain(&mut s);
    let t = totals();
    assert_eq!(t.requests[0][1], 1, "GET 2xx");
    assert_eq!(t.requests[0][3], 1, "GET 4xx");
    assert_eq!(t.in_flight, 0);
    assert_eq!(t.duration.iter().sum::<u64>(), 2);
    assert_eq!(t.bytes_in, input.len() as u64);
    assert_eq!(t.bytes_out, out.len() as u64);
    s.on_read(b"BAD\r\n\r\n", now);
    drain(&mut s);
    assert!(s.done());
    drop(s);
    let t = totals();
    assert_eq!(t.requests[OTHER_METHOD][3], 1, "the 400, with no head read");
    assert_eq!(t.in_flight, 0, "a 400 without a head was never in flight");
    assert_eq!((t.accepted, t.open()), (1, 0));
    assert_eq!(t.closed[4], 1, "closed as a bad request");
}

const OTHER_METHOD: usize = crate::metrics::counters::OTHER;
