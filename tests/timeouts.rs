//! Slow and idle clients and the connection limit (issue 2, point 3): a head
//! sent a byte at a time is cut off after `--header-read-timeout` (counted
//! from its first byte, not reset by each byte), an idle keep-alive after
//! `--keep-alive-timeout`, and at `--max-connections` a new connection waits
//! in the backlog until a slot frees. Each while another client is served.

mod common;

use std::time::{Duration, Instant};

use common::{Bystander, Client, Server, HEALTH, TIMEOUT};

/// How long after its due time a timeout may fire (timers, a loaded CI box).
const SLACK: Duration = Duration::from_millis(2500);

/// Whether the server has closed `c`, looking for at most `wait`. A closing
/// server may first say 408; anything else it sends is a failure.
fn closed_within(c: &mut Client, wait: Duration) -> bool {
    match c.wait_closed(wait) {
        Ok(()) => true,
        Err(e) if e.starts_with("still open") => false,
        Err(e) if e.starts_with("the server sent more") => {
            let r = c
                .try_read_response(TIMEOUT, false)
                .unwrap_or_else(|e| panic!("before the close: {e}"));
            assert_eq!(r.status, 408, "the only answer a timed-out client may get");
            c.assert_closed(TIMEOUT);
            true
        }
        Err(e) => panic!("while waiting for the close: {e}"),
    }
}

#[test]
fn a_head_sent_one_byte_at_a_time_is_closed_after_the_header_read_timeout() {
    let server = Server::start(&["--header-read-timeout", "1", "--keep-alive-timeout", "30"]);
    let mut bystander = Bystander::start(&server);
    let mut slow = server.connect();
    let head = format!(
        "GET {HEALTH} HTTP/1.1\r\nHost: a-slow-client.example\r\nX-Pad: {}\r\n\r\n",
        "p".repeat(40)
    );
    let start = Instant::now();
    let mut closed_at = None;
    // A byte every 250 ms would take over 20 s; a timer reset by each byte never fires.
    for &b in head.as_bytes() {
        if slow.try_send(&[b]).is_err() || closed_within(&mut slow, Duration::from_millis(250)) {
            closed_at = Some(start.elapsed());
            break;
        }
        if start.elapsed() > Duration::from_secs(1) + SLACK {
            break;
        }
    }
    let at = closed_at
        .unwrap_or_else(|| panic!("still open {:?} after its first byte", start.elapsed()));
    assert!(
        at >= Duration::from_millis(700),
        "closed after {at:?}, before the 1 s timeout"
    );
    bystander.assert_progress(3);
    server.assert_serves_another_client();
    let served = bystander.finish();
    assert!(
        served >= 10,
        "the bystander was answered {served} times during the slow head"
    );
}

#[test]
fn an_idle_keep_alive_is_closed_after_the_keep_alive_timeout() {
    let server = Server::start(&["--keep-alive-timeout", "1", "--header-read-timeout", "30"]);
    let mut bystander = Bystander::start(&server);
    let mut idle = server.connect();
    assert_eq!(idle.request("GET", HEALTH, &[]).status, 200);
    let start = Instant::now();
    assert!(
        !closed_within(&mut idle, Duration::from_millis(600)),
        "closed before the keep-alive timeout"
    );
    assert!(
        closed_within(&mut idle, Duration::from_secs(1) + SLACK),
        "still open {:?} idle",
        start.elapsed()
    );
    // The bystander, never idle that long, is still served on its own keep-alive.
    bystander.assert_progress(3);
    server.assert_serves_another_client();
    bystander.finish();
}

#[test]
fn a_keep_alive_in_use_is_not_closed_by_the_keep_alive_timeout() {
    // The timeout counts idle time, not the connection's age.
    let server = Server::start(&["--keep-alive-timeout", "1"]);
    let mut c = server.connect();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(2500) {
        assert_eq!(
            c.request("GET", HEALTH, &[]).status,
            200,
            "after {:?}",
            start.elapsed()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn at_max_connections_a_new_connection_waits_until_a_slot_frees() {
    let server = Server::start(&["--max-connections", "2", "--keep-alive-timeout", "60"]);
    let mut first = server.connect();
    let mut second = server.connect();
    assert_eq!(first.request("GET", HEALTH, &[]).status, 200);
    assert_eq!(second.request("GET", HEALTH, &[]).status, 200);

    // The third completes its handshake in the kernel's backlog, but is not served.
    let mut third = server.connect();
    third.send(format!("GET {HEALTH} HTTP/1.1\r\nHost: third\r\n\r\n").as_bytes());
    third.assert_quiet(Duration::from_secs(1));

    // Meanwhile the admitted clients are served normally.
    assert_eq!(second.request("GET", HEALTH, &[]).status, 200);
    assert_eq!(first.request("GET", HEALTH, &[]).status, 200);

    // One leaves: the third is admitted and answered.
    drop(first);
    let r = third
        .try_read_response(Duration::from_secs(3), false)
        .unwrap_or_else(|e| {
            panic!("the waiting connection was not answered after a slot freed: {e}")
        });
    assert_eq!(r.status, 200);
    assert_eq!(second.request("GET", HEALTH, &[]).status, 200);
}
