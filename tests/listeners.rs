//! Several listeners (issue 33, point 6), the pure-Rust binary: two TCP
//! binds and a Unix one under two workers, each answering the health path,
//! every worker logging every listener, and the supervisor's ready line
//! naming them in order. (Which worker answers is tested with an app that
//! names it: tests/python/test_listeners.py.)

#![cfg(target_os = "linux")]

mod common;

use std::time::Duration;

use common::{parse_url, Addr, Client, Server, HEALTH};

#[test]
fn two_tcp_binds_and_a_unix_bind_under_two_workers_each_answer() {
    let dir = std::env::temp_dir().join(format!("m0-listeners-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("m0.sock");
    let unix = format!("unix:{}", sock.display());
    let server = Server::start(&[
        "--workers",
        "2",
        "--bind",
        "127.0.0.1:0",
        "-b",
        "127.0.0.1:0",
        "--bind",
        &unix,
    ]);
    let ready = server
        .wait_for_line(
            |l| l.contains("worker(s) ready on "),
            Duration::from_secs(10),
        )
        .expect("the supervisor's ready line");
    let urls: Vec<&str> = ready
        .split("ready on ")
        .nth(1)
        .unwrap()
        .split(", ")
        .collect();
    assert_eq!(urls.len(), 3, "{ready}");
    assert_eq!(urls[2], unix, "{ready}");
    let addrs: Vec<Addr> = urls.iter().map(|u| parse_url(u.trim()).unwrap()).collect();
    for addr in &addrs {
        let mut held: Vec<Client> = (0..4).map(|_| Client::connect(addr)).collect();
        for c in &mut held {
            assert_eq!(
                c.request("GET", HEALTH, &[]).status,
                200,
                "{}",
                server.dump()
            );
        }
    }
    for url in &urls {
        let said = server
            .lines()
            .iter()
            .filter(|l| l.contains(&format!("listening on {url} ")))
            .count();
        assert_eq!(said, 2, "each worker logs {url}\n{}", server.dump());
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
