//! The command line as users meet it (issue 2, points 1 and 5): bad flags get
//! one line and exit 2, every flag also reads its `M0SERVE_*` variable (the
//! flag winning), `--version`, the io_uring fallback and its refusal, `--uds`.

mod common;

use std::time::Duration;

use common::{Addr, Client, Server, TempDir, HEALTH};

const EXIT_LIMIT: Duration = Duration::from_secs(10);

/// Running with `args` (and `envs`) must fail at once: exit 2, one stderr line.
fn rejected(args: &[&str], envs: &[(&str, &str)]) {
    let mut b = Server::builder().args(args.iter().copied());
    for (k, v) in envs {
        b = b.env(*k, *v);
    }
    let done = b.run_to_exit(EXIT_LIMIT);
    assert_eq!(
        done.status.code(),
        Some(2),
        "{args:?} {envs:?}: {:?}\n{}",
        done.status,
        done.stderr
    );
    let lines = done.stderr_lines();
    assert_eq!(
        lines.len(),
        1,
        "{args:?} {envs:?}: want exactly one line, got {lines:#?}"
    );
    assert!(
        !done.stderr.contains("listening on"),
        "it must not have started serving"
    );
}

#[test]
fn an_unknown_flag_is_one_line_and_exit_2() {
    rejected(&["--no-such-flag"], &[]);
}

#[test]
fn bad_values_are_one_line_and_exit_2() {
    rejected(&["--max-connections", "many"], &[]);
    rejected(&["--backend", "carrier-pigeon"], &[]);
    rejected(&["--header-read-timeout", "soon"], &[]);
    rejected(&["--max-body-size", "-5"], &[]);
    rejected(&["--log-level", "loudest"], &[]);
    rejected(&["--header", "no-colon"], &[]);
    rejected(&["--header", "Content-Length: 3"], &[]);
    rejected(&["--header", "X-A: a\u{1}b"], &[]);
    rejected(&[], &[("M0SERVE_HEADER", "Bad Name: x")]);
}

#[test]
fn an_unpaired_static_route_is_one_line_and_exit_2() {
    rejected(&["--static-path-route", "/static"], &[]);
}

#[test]
fn a_bad_value_in_an_environment_variable_is_one_line_and_exit_2() {
    rejected(&[], &[("M0SERVE_MAX_CONNECTIONS", "lots")]);
}

#[test]
fn an_app_in_the_pure_rust_binary_is_one_line_and_exit_2() {
    let done = Server::builder().arg("app:app").run_to_exit(EXIT_LIMIT);
    assert_eq!(done.status.code(), Some(2), "{}", done.stderr);
    assert!(
        done.stderr.contains("no Python support") && done.stderr.contains("pip"),
        "{}",
        done.stderr
    );
    rejected(&["app:app"], &[]);
    rejected(&[], &[("M0SERVE_APP", "app:app")]);
    rejected(&["--interface", "asgi", "app:app"], &[]);
}

#[test]
fn version_prints_the_version_and_exits_0() {
    let done = Server::builder().arg("--version").run_to_exit(EXIT_LIMIT);
    assert_eq!(done.status.code(), Some(0), "{}", done.stderr);
    let said = format!("{}{}", done.stdout, done.stderr);
    assert!(said.contains("m0serve"), "{said:?}");
    assert!(said.contains(env!("CARGO_PKG_VERSION")), "{said:?}");
    assert!(!said.contains("listening on"));
}

/// A port nobody listens on right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn m0serve_port_is_honoured() {
    let port = free_port();
    let server = Server::builder()
        .env("M0SERVE_PORT", port.to_string())
        .start();
    assert_eq!(
        server.port(),
        port,
        "the listening line names the port from M0SERVE_PORT"
    );
    assert_eq!(server.get(HEALTH).status, 200);
}

#[test]
fn m0serve_health_path_is_honoured_and_the_flag_wins() {
    let server = Server::builder()
        .env("M0SERVE_HEALTH_PATH", "/alive")
        .start();
    assert_eq!(server.get("/alive").status, 200);
    assert_eq!(server.get(HEALTH).status, 404);

    let server = Server::builder()
        .env("M0SERVE_HEALTH_PATH", "/alive")
        .args(["--health-path", "/ready"])
        .start();
    assert_eq!(
        server.get("/ready").status,
        200,
        "the flag wins over the variable"
    );
    assert_eq!(server.get("/alive").status, 404);
}

#[test]
fn m0serve_cores_is_honoured() {
    if !common::cpus_at_least(2) {
        eprintln!("skipped: fewer than 2 CPUs");
        return;
    }
    let server = Server::builder().env("M0SERVE_CORES", "2").start();
    let line = server
        .wait_for_line(|l| l.contains("listening on"), Duration::ZERO)
        .unwrap();
    assert!(line.contains("2 cores"), "{line}");
    assert_eq!(server.get(HEALTH).status, 200);
}

#[test]
fn the_listening_line_names_the_cores() {
    let server = Server::start(&["--cores", "1"]);
    let line = server
        .wait_for_line(|l| l.contains("listening on"), Duration::ZERO)
        .unwrap();
    assert!(line.contains("1 core"), "{line}");
}

#[test]
fn auto_falls_back_to_portable_with_one_line_when_io_uring_is_refused() {
    let server = Server::builder()
        .env("M0_URING_DISABLED", "1")
        .args(["--backend", "auto"])
        .start();
    let listening = server
        .wait_for_line(|l| l.contains("listening on"), Duration::ZERO)
        .unwrap();
    assert!(listening.contains("(portable backend"), "{listening}");
    let warnings: Vec<String> = server
        .lines()
        .into_iter()
        .filter(|l| l.contains("io_uring is not available"))
        .collect();
    assert_eq!(warnings.len(), 1, "one line says why: {warnings:#?}");
    assert_eq!(server.get(HEALTH).status, 200);
}

#[test]
fn auto_falls_back_with_one_line_for_all_workers() {
    // The supervisor probes once; its workers run portable without probing
    // (and logging) again. Before, each worker logged the fallback itself.
    let server = Server::builder()
        .env("M0_URING_DISABLED", "1")
        .args(["--backend", "auto", "--workers", "2", "--cores", "1"])
        .start();
    assert!(
        server
            .wait_for_line(|l| l.contains("2 worker(s) ready"), Duration::from_secs(10))
            .is_some(),
        "both workers ready"
    );
    let lines = server.lines();
    let listening: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("listening on"))
        .collect();
    assert_eq!(listening.len(), 2, "{lines:#?}");
    assert!(
        listening.iter().all(|l| l.contains("(portable backend")),
        "{listening:#?}"
    );
    let warnings = lines
        .iter()
        .filter(|l| l.contains("io_uring is not available"));
    assert_eq!(warnings.count(), 1, "one line for the server: {lines:#?}");
    assert_eq!(server.get(HEALTH).status, 200);
}

#[test]
fn uring_refuses_to_fall_back_and_says_why() {
    for args in [&["--uring"][..], &["--backend", "uring"][..]] {
        let done = Server::builder()
            .env("M0_URING_DISABLED", "1")
            .args(args.iter().copied())
            .run_to_exit(EXIT_LIMIT);
        assert!(
            !done.status.success(),
            "{args:?} started without io_uring: {}",
            done.stderr
        );
        assert!(
            done.stderr.contains("io_uring"),
            "{args:?}: the message names io_uring: {:?}",
            done.stderr
        );
        assert!(
            !done.stderr.contains("listening on"),
            "{args:?} must not serve"
        );
    }
}

#[test]
fn access_log_logs_requests_only_when_asked() {
    let server = Server::start(&["--access-log"]);
    assert_eq!(server.get(HEALTH).status, 200);
    let line = server.wait_for_line(
        |l| l.contains(&format!("GET {HEALTH}")),
        Duration::from_secs(3),
    );
    let line = line.unwrap_or_else(|| panic!("no access log line:\n{}", server.dump()));
    assert!(line.contains("200"), "the line carries the status: {line}");

    let quiet = Server::start(&[]);
    assert_eq!(quiet.get(HEALTH).status, 200);
    assert!(
        quiet
            .wait_for_line(
                |l| l.contains(&format!("GET {HEALTH}")),
                Duration::from_millis(500)
            )
            .is_none(),
        "no access log without --access-log"
    );
}

#[test]
fn uds_serves_over_a_unix_socket() {
    let dir = TempDir::new("uds");
    let path = dir.path().join("m0.sock");
    let server = Server::start(&["--uds", path.to_str().unwrap()]);
    assert_eq!(
        server.addr(),
        &Addr::Unix(path.clone()),
        "the listening line names the socket"
    );
    let mut c = Client::connect(server.addr());
    for _ in 0..2 {
        assert_eq!(c.request("GET", HEALTH, &[]).status, 200);
    }
    assert_eq!(c.request("GET", "/nowhere", &[]).status, 404);
}
