//! The command line parsed as a whole: defaults, flags, variables, errors.

use std::sync::Mutex;

use super::*;
use crate::app::spec::{AppSpec, EventLoop, Interface, Lifespan, BACKPRESSURE_PER_THREAD};
use crate::http::{BodyKind, Defaults, RequestHead, Version};
use crate::routes::testing::TempDir;

/// Parsing reads the process environment, which tests share: one at a time.
static ENV: Mutex<()> = Mutex::new(());

/// Run `f` with exactly the `M0SERVE_*` variables in `env` set.
fn with_env<T>(env: &[(&str, &str)], f: impl FnOnce() -> T) -> T {
    let _guard = ENV.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let clear = || {
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("M0SERVE_") {
                std::env::remove_var(name);
            }
        }
    };
    clear();
    for (name, value) in env {
        std::env::set_var(name, value);
    }
    let out = f();
    clear();
    out
}

fn os_args(args: &[&str]) -> Vec<OsString> {
    std::iter::once("m0serve")
        .chain(args.iter().copied())
        .map(OsString::from)
        .collect()
}

fn parse_env(args: &[&str], env: &[(&str, &str)]) -> Result<Invocation, CliError> {
    with_env(env, || parse(os_args(args)))
}

fn ok(args: &[&str]) -> Invocation {
    match parse_env(args, &[]) {
        Ok(invocation) => invocation,
        Err(e) => panic!("{args:?}: {e:?}"),
    }
}

/// The one-line message for a bad command line.
fn usage(args: &[&str]) -> String {
    match parse_env(args, &[]) {
        Err(CliError::Usage(message)) => message,
        Err(CliError::Info(e)) => panic!("{args:?}: not a usage error: {e:?}"),
        Err(CliError::Print(text)) => panic!("{args:?}: printed {text}"),
        Ok(_) => panic!("{args:?}: parsed"),
    }
}

fn get(path: &str) -> RequestHead {
    RequestHead {
        method: "GET".into(),
        target: path.into(),
        version: Version::Http11,
        headers: Default::default(),
        body: BodyKind::Empty,
        keep_alive: true,
        expect_continue: false,
    }
}

#[test]
fn defaults() {
    let Invocation {
        options,
        log_level,
        log_format,
        app,
        supervision,
        env,
    } = ok(&[]);
    assert!(env.is_empty());
    assert_eq!(log_format, super::LogFormat::Text);
    assert_eq!(
        ok(&["--log-format=json"]).log_format,
        super::LogFormat::Json
    );
    assert!(app.is_none());
    assert_eq!(
        supervision,
        super::Supervision {
            workers: 1,
            pid_file: None,
            recycle: Default::default(),
            reload: None,
            shutdown_delay: Duration::ZERO,
            metrics_address: None,
            systemd: None,
            worker_timeout: Some(Duration::from_secs(30)),
        }
    );
    assert!(
        matches!(options.config.listen.as_slice(), [Listen::Tcp { ref host, port: 8000 }] if host == "127.0.0.1")
    );
    assert_eq!(options.config.cores, None);
    assert_eq!(options.config.backend, Choice::Auto);
    assert_eq!(options.config.limits.max_body, 1 << 30);
    assert_eq!(options.config.limits.max_head, Limits::default().max_head);
    assert_eq!(options.config.header_read_timeout, Duration::from_secs(10));
    assert_eq!(options.config.keep_alive_timeout, Duration::from_secs(5));
    assert_eq!(options.config.graceful_timeout, Duration::from_secs(30));
    assert_eq!(options.config.max_connections, 10_000);
    assert!(options.config.access_log.is_none());
    assert_eq!(log_level, tracing::Level::INFO);
    assert!(options.config.router.route(&get("/healthz")).is_none());
}

/// Streams are told a second before the graceful timeout unless the flag
/// says when; a time past the graceful timeout would never come.
#[test]
fn the_stream_drain_timeout_follows_the_graceful_timeout_unless_given() {
    let at = |args: &[&str]| ok(args).options.config.stream_drain_timeout;
    assert_eq!(at(&[]), Duration::from_secs(29));
    assert_eq!(at(&["--graceful-timeout=5"]), Duration::from_secs(4));
    assert_eq!(at(&["--graceful-timeout=0.5"]), Duration::ZERO);
    assert_eq!(at(&["--stream-drain-timeout=0"]), Duration::ZERO);
    assert_eq!(
        at(&["--graceful-timeout=5", "--stream-drain-timeout=5"]),
        Duration::from_secs(5)
    );
    let refused = usage(&["--graceful-timeout=5", "--stream-drain-timeout=6"]);
    assert!(refused.contains("past --graceful-timeout"), "{refused}");
}

#[test]
fn flags() {
    let Invocation {
        options,
        log_level,
        supervision,
        ..
    } = ok(&[
        "--host=0.0.0.0",
        "--port=0",
        "--cores=3",
        "--backend=portable",
        "--health-path=/healthz",
        "--ready-path=/readyz",
        "--shutdown-delay=1.5",
        "--max-body-size=10M",
        "--header-read-timeout=0.25",
        "--keep-alive-timeout=1",
        "--max-connections=7",
        "--graceful-timeout=2.5",
        "--log-level=trace",
        "--access-log",
    ]);
    assert!(
        matches!(options.config.listen.as_slice(), [Listen::Tcp { ref host, port: 0 }] if host == "0.0.0.0")
    );
    assert_eq!(options.config.cores, Some(3));
    assert_eq!(options.config.backend, Choice::Portable);
    assert_eq!(options.config.limits.max_body, 10 << 20);
    assert_eq!(
        options.config.header_read_timeout,
        Duration::from_millis(250)
    );
    assert_eq!(options.config.keep_alive_timeout, Duration::from_secs(1));
    assert_eq!(options.config.max_connections, 7);
    assert_eq!(options.config.graceful_timeout, Duration::from_millis(2500));
    assert!(options.config.access_log.is_some());
    assert_eq!(log_level, tracing::Level::TRACE);
    assert_eq!(
        options
            .config
            .router
            .route(&get("/healthz"))
            .map(|r| r.status),
        Some(200)
    );
    assert_eq!(
        options
            .config
            .router
            .route(&get("/readyz"))
            .map(|r| r.status),
        Some(200)
    );
    assert_eq!(supervision.shutdown_delay, Duration::from_millis(1500));
}

#[test]
fn uds_replaces_tcp() {
    let options = ok(&["--uds", "/tmp/m0.sock"]).options.config;
    assert!(
        matches!(options.listen.as_slice(), [Listen::Unix(ref p)] if p == std::path::Path::new("/tmp/m0.sock"))
    );
}

#[test]
fn websocket_flags() {
    let ws = |args: &[&str], env: &[(&str, &str)]| {
        let options = parse_env(args, env).unwrap().options.config;
        (options.ws, options.ws_max_message)
    };
    assert_eq!(ws(&[], &[]), (true, 16 << 20), "on by default, 16 MiB");
    assert!(!ws(&["--no-ws"], &[]).0);
    assert!(ws(&["--no-ws", "--ws"], &[]).0, "the last flag wins");
    assert!(!ws(&["--ws", "--no-ws"], &[]).0);
    assert!(!ws(&[], &[("M0SERVE_WS", "0")]).0);
    assert!(ws(&["--ws"], &[("M0SERVE_WS", "false")]).0, "the flag wins");
    assert_eq!(ws(&["--ws-max-message-size=1K"], &[]).1, 1024);
    assert_eq!(ws(&[], &[("M0SERVE_WS_MAX_MESSAGE_SIZE", "2M")]).1, 2 << 20);
    assert!(usage(&["--ws-max-message-size=lots"]).contains("ws-max-message-size"));
}

#[test]
fn server_header_flags() {
    let server_header = |args: &[&str], env: &[(&str, &str)]| {
        parse_env(args, env)
            .unwrap()
            .options
            .config
            .response_defaults
            == Defaults::default()
    };
    assert!(server_header(&[], &[]), "on by default");
    assert!(!server_header(&["--no-server-header"], &[]));
    assert!(
        server_header(&["--no-server-header", "--server-header"], &[]),
        "the last flag wins"
    );
    assert!(!server_header(&[], &[("M0SERVE_SERVER_HEADER", "false")]));
    assert!(
        server_header(&["--server-header"], &[("M0SERVE_SERVER_HEADER", "0")]),
        "the flag wins"
    );
}

#[test]
fn header_flags() {
    let defaults = |args: &[&str], env: &[(&str, &str)]| {
        parse_env(args, env)
            .unwrap()
            .options
            .config
            .response_defaults
    };
    assert_eq!(defaults(&[], &[]), Defaults::default());
    let field = |name: &str, value: &str| (name.to_string(), value.as_bytes().to_vec());
    assert_eq!(
        defaults(
            &[
                "--header",
                "X-Frame-Options: DENY",
                "--header=Server:edge",
                "--no-server-header"
            ],
            &[]
        ),
        Defaults::new(
            false,
            vec![field("X-Frame-Options", "DENY"), field("Server", "edge")]
        )
    );
    assert_eq!(
        defaults(&[], &[("M0SERVE_HEADER", "X-A: 1")]),
        Defaults::new(true, vec![field("X-A", "1")])
    );
    for bad in ["nocolon", "Bad Name: x", "Content-Length: 1", "Date: x"] {
        match parse_env(&["--header", bad], &[]) {
            Err(CliError::Usage(err)) => assert!(err.contains("--header"), "{bad:?}: {err}"),
            _ => panic!("{bad:?} was taken"),
        }
    }
}

#[test]
fn websocket_keepalive_flags() {
    let keepalive = |args: &[&str], env: &[(&str, &str)]| {
        parse_env(args, env).unwrap().options.config.ws_keepalive
    };
    let k = |interval: f64, timeout: f64| {
        Some(crate::ws::Keepalive {
            interval: Duration::from_secs_f64(interval),
            timeout: Duration::from_secs_f64(timeout),
        })
    };
    assert_eq!(keepalive(&[], &[]), k(20.0, 20.0), "uvicorn's defaults");
    assert_eq!(
        keepalive(&["--ws-ping-interval=5", "--ws-ping-timeout=0.5"], &[]),
        k(5.0, 0.5)
    );
    let env = [
        ("M0SERVE_WS_PING_INTERVAL", "7"),
        ("M0SERVE_WS_PING_TIMEOUT", "3"),
    ];
    assert_eq!(keepalive(&[], &env), k(7.0, 3.0));
    assert_eq!(
        keepalive(&["--ws-ping-interval=0"], &[]),
        None,
        "0: no pings"
    );
    assert!(usage(&["--ws-ping-timeout=0"]).contains("more than 0"));
    assert!(usage(&["--ws-ping-interval=-1"]).contains("ws-ping-interval"));
}

#[test]
fn environment_variables_are_read_and_flags_win() {
    let env = [
        ("M0SERVE_PORT", "9001"),
        ("M0SERVE_HEALTH_PATH", "/hz"),
        ("M0SERVE_READY_PATH", "/rz"),
        ("M0SERVE_SHUTDOWN_DELAY", "3"),
        ("M0SERVE_BACKEND", "portable"),
        ("M0SERVE_CORES", "2"),
        ("M0SERVE_MAX_BODY_SIZE", "4K"),
        ("M0SERVE_ACCESS_LOG", "1"),
        ("M0SERVE_LOG_LEVEL", "debug"),
    ];
    let Ok(Invocation {
        options,
        log_level,
        supervision,
        ..
    }) = parse_env(&[], &env)
    else {
        panic!("env parse failed")
    };
    assert!(matches!(
        options.config.listen.as_slice(),
        [Listen::Tcp { port: 9001, .. }]
    ));
    assert_eq!(
        options.config.router.route(&get("/hz")).map(|r| r.status),
        Some(200)
    );
    assert_eq!(
        options.config.router.route(&get("/rz")).map(|r| r.status),
        Some(200)
    );
    assert_eq!(supervision.shutdown_delay, Duration::from_secs(3));
    assert_eq!(options.config.backend, Choice::Portable);
    assert_eq!(options.config.cores, Some(2));
    assert_eq!(options.config.limits.max_body, 4096);
    assert!(options.config.access_log.is_some());
    assert_eq!(log_level, tracing::Level::DEBUG);

    let Ok(flagged) = parse_env(&["--port", "9002"], &env) else {
        panic!("flag parse failed")
    };
    assert!(matches!(
        flagged.options.config.listen.as_slice(),
        [Listen::Tcp { port: 9002, .. }]
    ));

    let Ok(off) = parse_env(&[], &[("M0SERVE_ACCESS_LOG", "false")]) else {
        panic!("parse failed")
    };
    assert!(off.options.config.access_log.is_none());

    let bad = parse_env(&[], &[("M0SERVE_PORT", "http")]);
    assert!(matches!(bad, Err(CliError::Usage(ref m)) if m.contains("invalid value 'http'")));
}

#[test]
fn uring_is_shorthand_for_backend_uring() {
    assert_eq!(ok(&["--uring"]).options.config.backend, Choice::Uring);
    assert_eq!(
        ok(&["--uring", "--backend", "uring"])
            .options
            .config
            .backend,
        Choice::Uring
    );
    assert_eq!(
        ok(&["--backend", "uring"]).options.config.backend,
        Choice::Uring
    );
    assert_eq!(
        ok(&["--backend", "auto"]).options.config.backend,
        Choice::Auto
    );
    let Ok(env) = parse_env(&[], &[("M0SERVE_URING", "yes")]) else {
        panic!("parse failed")
    };
    assert_eq!(env.options.config.backend, Choice::Uring);
    for other in ["portable", "auto"] {
        let message = usage(&["--uring", "--backend", other]);
        assert_eq!(
            message,
            format!("--uring conflicts with --backend {other} (--uring means --backend uring)")
        );
    }
}

#[test]
fn bad_values_are_one_line() {
    assert_eq!(
        usage(&["--port", "abc"]),
        "invalid value 'abc' for '--port <PORT>': invalid digit found in string"
    );
    assert_eq!(
        usage(&["--cores", "0"]),
        "invalid value '0' for '--cores <N>': must be at least 1"
    );
    assert!(usage(&["--max-connections", "0"]).contains("must be at least 1"));
    assert!(usage(&["--port", "70000"]).starts_with("invalid value '70000' for '--port <PORT>'"));
    assert!(usage(&["--backend", "epoll"])
        .starts_with("invalid value 'epoll' for '--backend <BACKEND>'"));
    assert!(usage(&["--log-level", "loud"])
        .starts_with("invalid value 'loud' for '--log-level <LOG_LEVEL>'"));
    assert!(usage(&["--max-body-size", "10X"]).contains("K, M, G or T suffix"));
    assert!(usage(&["--keep-alive-timeout=-1"]).contains("non-negative"));
    assert!(usage(&["--graceful-timeout", "soon"]).contains("number of seconds"));
    assert!(usage(&["--no-such-flag"]).contains("unexpected argument '--no-such-flag'"));
    for message in [usage(&["--port", "abc"]), usage(&["--no-such-flag"])] {
        assert!(
            !message.contains('\n') && !message.starts_with("error"),
            "{message:?}"
        );
        assert!(!message.contains('\u{1b}'), "escape codes in {message:?}");
    }
}

#[test]
fn sizes() {
    assert_eq!(parse_size("512"), Ok(512));
    assert_eq!(parse_size("64k"), Ok(64 << 10));
    assert_eq!(parse_size("10M"), Ok(10 << 20));
    assert_eq!(parse_size("1GiB"), Ok(1 << 30));
    assert_eq!(parse_size("2T"), Ok(2 << 40));
    assert!(parse_size("").is_err());
    assert!(parse_size("M").is_err());
    assert!(parse_size("1.5G").is_err());
    assert!(parse_size("99999999999T").is_err());
}

#[test]
fn static_flags_pair_in_order() {
    let dir = std::env::temp_dir();
    let dir = dir.to_str().unwrap();
    let options = ok(&[
        "--static-path-route=/a",
        "--static-path-route=/b",
        "--static-path-mount",
        dir,
        "--static-path-mount",
        dir,
    ])
    .options
    .config;
    // A mounted prefix owns its paths (a miss is its own 404); others are not ours.
    for mounted in ["/a/m0serve-no-such-file", "/b/m0serve-no-such-file"] {
        assert_eq!(
            options.router.route(&get(mounted)).map(|r| r.status),
            Some(404)
        );
    }
    assert!(options.router.route(&get("/c/x")).is_none());

    let message = usage(&[
        "--static-path-route=/a",
        "--static-path-route=/b",
        "--static-path-mount",
        dir,
    ]);
    assert!(
        message.contains("--static-path-route is given 2 time(s) but --static-path-mount 1"),
        "{message}"
    );
    assert!(
        usage(&["--static-path-mount", dir, "--static-path-mount", dir])
            .contains("they pair in order")
    );
}

#[test]
fn a_lone_static_mount_is_served_under_static() {
    let dir = TempDir::new("cli-lone-mount");
    std::fs::write(dir.path().join("a.txt"), "a").unwrap();
    let options = ok(&["--static-path-mount", dir.path().to_str().unwrap()])
        .options
        .config;
    let reply = options.router.route(&get("/static/a.txt")).unwrap();
    assert_eq!(reply.status, 200);
    assert!(options.router.route(&get("/a.txt")).is_none());
}

#[test]
fn static_files_carry_the_expires_flag_as_max_age() {
    let dir = TempDir::new("cli-expires");
    std::fs::write(dir.path().join("a.txt"), "a").unwrap();
    let mount = [
        "--static-path-route=/s",
        "--static-path-mount",
        dir.path().to_str().unwrap(),
    ];
    let cache_control = |invocation: Invocation| {
        let reply = invocation
            .options
            .config
            .router
            .route(&get("/s/a.txt"))
            .unwrap();
        assert_eq!(reply.status, 200);
        reply
            .headers
            .iter()
            .find(|(name, _)| name == "Cache-Control")
            .map(|(_, value)| value.clone())
    };
    let with = |value: &str| {
        let flag = format!("--static-path-expires={value}");
        cache_control(ok(&[&mount[..], &[flag.as_str()]].concat()))
    };
    // Granian's default, so its users' static files keep their caching.
    assert_eq!(cache_control(ok(&mount)).as_deref(), Some("max-age=86400"));
    assert_eq!(with("0"), None);
    // Granian's duration forms.
    for (value, secs) in [
        ("3600", 3600),
        ("1d", 86400),
        ("1h30m", 5400),
        ("90s", 90),
        ("1d2h3m4s", 93784),
    ] {
        assert_eq!(with(value), Some(format!("max-age={secs}")), "{value}");
    }
    let from_env = parse_env(&mount, &[("M0SERVE_STATIC_PATH_EXPIRES", "60")]).unwrap();
    assert_eq!(cache_control(from_env).as_deref(), Some("max-age=60"));
    for bad in [
        "-1",
        "1.5",
        "",
        "d",
        "1x",
        "1m1h",
        "1d1d",
        "1h30",
        "99999999999999999999d",
    ] {
        let flag = format!("--static-path-expires={bad}");
        let args = [&mount[..], &[flag.as_str()]].concat();
        assert!(usage(&args).contains("--static-path-expires"), "{bad}");
    }
}

#[test]
fn a_static_directory_stands_for_the_dir_to_file_flag() {
    let dir = TempDir::new("cli-dir-to-file");
    std::fs::create_dir_all(dir.path().join("d")).unwrap();
    std::fs::write(dir.path().join("d/index.html"), "html").unwrap();
    std::fs::write(dir.path().join("d/index.txt"), "text!").unwrap();
    let mount = [
        "--static-path-route=/s",
        "--static-path-mount",
        dir.path().to_str().unwrap(),
    ];
    let length = |invocation: Invocation| {
        let reply = invocation
            .options
            .config
            .router
            .route(&get("/s/d"))
            .unwrap();
        (reply.status == 200).then(|| {
            reply
                .headers
                .iter()
                .any(|(n, v)| n == "Content-Length" && v == "5")
        })
    };
    // index.html by default (4 bytes), the named file otherwise (5).
    assert_eq!(length(ok(&mount)), Some(false));
    let named = [&mount[..], &["--static-path-dir-to-file", "index.txt"]].concat();
    assert_eq!(length(ok(&named)), Some(true));
    let from_env = parse_env(&mount, &[("M0SERVE_STATIC_PATH_DIR_TO_FILE", "index.txt")]).unwrap();
    assert_eq!(length(from_env), Some(true));
    let missing = [&mount[..], &["--static-path-dir-to-file", "nope.txt"]].concat();
    assert_eq!(length(ok(&missing)), None);
    for bad in ["", ".", "..", "d/index.txt", "../x"] {
        let flag = format!("--static-path-dir-to-file={bad}");
        let message = usage(&[&mount[..], &[flag.as_str()]].concat());
        assert!(
            message.contains("--static-path-dir-to-file") && message.contains("one file name"),
            "{bad}: {message}"
        );
    }
}

#[test]
fn bad_router_configuration_is_a_usage_error() {
    let missing = std::env::temp_dir().join(format!("m0serve-missing-{}", std::process::id()));
    let missing = missing.to_str().unwrap();
    let message = usage(&["--static-path-route=/s", "--static-path-mount", missing]);
    assert!(
        message.contains("does not exist") && message.contains(missing),
        "{message}"
    );
    assert!(usage(&["--health-path", "healthz"]).contains("must start with '/'"));
    assert!(usage(&["--ready-path", "readyz"]).contains("must start with '/'"));
    assert!(usage(&["--health-path=/h", "--ready-path=/h"]).contains("health path too"));
    assert!(usage(&["--shutdown-delay=-1"]).contains("non-negative"));
}

#[test]
fn help_and_version_are_info() {
    for (flag, kind) in [
        ("--help", clap::error::ErrorKind::DisplayHelp),
        ("--version", clap::error::ErrorKind::DisplayVersion),
    ] {
        match parse_env(&[flag], &[]) {
            Err(CliError::Info(e)) => assert_eq!(e.kind(), kind),
            _ => panic!("{flag} is not info"),
        }
    }
}

fn app(args: &[&str], env: &[(&str, &str)]) -> AppSpec {
    match parse_env(args, env) {
        Ok(Invocation { app: Some(app), .. }) => app,
        Ok(_) => panic!("{args:?}: no app"),
        Err(e) => panic!("{args:?}: {e:?}"),
    }
}

#[test]
fn app_defaults() {
    let spec = app(&["main:app"], &[]);
    assert_eq!(
        spec,
        AppSpec {
            target: "main:app".into(),
            module: "main".into(),
            attrs: vec!["app".into()],
            factory: false,
            app_dir: PathBuf::from("."),
            working_dir: None,
            blocking_threads: 4,
            backpressure: BACKPRESSURE_PER_THREAD * 4,
            root_path: String::new(),
            interface: Interface::Auto,
            event_loop: EventLoop::Auto,
            lifespan: Lifespan::Auto,
            log_config: None,
        }
    );
}

#[test]
fn asgi_flags_and_their_variables() {
    let spec = app(
        &[
            "--interface=asgi",
            "--loop=uvloop",
            "--lifespan=off",
            "main:app",
        ],
        &[],
    );
    assert_eq!(
        (spec.interface, spec.event_loop, spec.lifespan),
        (Interface::Asgi, EventLoop::Uvloop, Lifespan::Off)
    );
    let env = [
        ("M0SERVE_INTERFACE", "asgi"),
        ("M0SERVE_LOOP", "asyncio"),
        ("M0SERVE_LIFESPAN", "on"),
    ];
    let spec = app(&["main:app"], &env);
    assert_eq!(
        (spec.interface, spec.event_loop, spec.lifespan),
        (Interface::Asgi, EventLoop::Asyncio, Lifespan::On)
    );
    assert_eq!(
        app(&["--loop=auto", "main:app"], &env).event_loop,
        EventLoop::Auto
    );
    assert!(usage(&["--loop=trio", "a:b"]).starts_with("invalid value 'trio'"));
    assert!(usage(&["--lifespan=yes", "a:b"]).starts_with("invalid value 'yes'"));
}

#[test]
fn app_flags_and_their_variables() {
    let spec = app(
        &[
            "--factory",
            "--app-dir=src",
            "--working-dir=/srv",
            "--blocking-threads=4",
            "--root-path=/api/",
            "--interface=wsgi",
            "pkg.sub.wsgi:make.app",
        ],
        &[],
    );
    assert_eq!(spec.module, "pkg.sub.wsgi");
    assert_eq!(spec.attrs, ["make", "app"]);
    assert!(spec.factory);
    assert_eq!(spec.app_dir, PathBuf::from("src"));
    assert_eq!(spec.working_dir, Some(PathBuf::from("/srv")));
    assert_eq!(spec.blocking_threads, 4);
    // The default depth follows the thread count.
    assert_eq!(spec.backpressure, 4 * BACKPRESSURE_PER_THREAD);
    assert_eq!(spec.root_path, "/api");

    let env = [
        ("M0SERVE_APP", "site.wsgi:application"),
        ("M0SERVE_FACTORY", "true"),
        ("M0SERVE_APP_DIR", "/code"),
        ("M0SERVE_WORKING_DIR", "/tmp"),
        ("M0SERVE_BLOCKING_THREADS", "0"),
        ("M0SERVE_BACKPRESSURE", "7"),
        ("M0SERVE_ROOT_PATH", "/"),
        ("M0SERVE_INTERFACE", "wsgi"),
    ];
    let spec = app(&[], &env);
    assert_eq!(spec.target, "site.wsgi:application");
    assert!(spec.factory);
    assert_eq!(spec.app_dir, PathBuf::from("/code"));
    assert_eq!(spec.working_dir, Some(PathBuf::from("/tmp")));
    assert_eq!(spec.blocking_threads, 0);
    assert_eq!(spec.backpressure, 7);
    assert_eq!(spec.root_path, "");
    // Loop-only still gets a queue depth of its own.
    assert_eq!(
        app(&["--blocking-threads=0", "a:b"], &[]).backpressure,
        BACKPRESSURE_PER_THREAD
    );
    // The command line wins.
    let flagged = app(&["--blocking-threads=2", "other:app"], &env);
    assert_eq!(flagged.target, "other:app");
    assert_eq!(flagged.blocking_threads, 2);
}

#[test]
fn bad_app_flags_are_usage_errors() {
    for target in [
        "app", "app:", ":app", "a..b:app", "a:b..c", "a-b:app", "a:1x", "a:b:c",
    ] {
        let message = usage(&[target]);
        assert!(
            message.contains(&format!("APP '{target}' is not module:attribute")),
            "{target}: {message}"
        );
    }
    assert!(usage(&["--backpressure=0", "a:b"]).contains("must be at least 1"));
    assert!(usage(&["--blocking-threads=-1", "a:b"]).contains("--blocking-threads"));
    assert_eq!(
        usage(&["--root-path=api", "a:b"]),
        "--root-path 'api' must start with '/'"
    );
    assert!(usage(&["--interface=cgi", "a:b"]).starts_with("invalid value 'cgi'"));
}

#[test]
fn the_pure_rust_binary_refuses_an_app() {
    assert_eq!(with_env(&[], || main(os_args(&["--port=0", "app:app"]))), 2);
    assert_eq!(
        with_env(&[("M0SERVE_APP", "app:app")], || main(os_args(&[
            "--port=0"
        ]))),
        2
    );
    assert!(NO_PYTHON.contains("no Python support") && NO_PYTHON.contains("pip"));
}

#[test]
fn main_exit_statuses_without_serving() {
    assert_eq!(with_env(&[], || main(os_args(&["--port", "abc"]))), 2);
    assert_eq!(
        with_env(&[], || main(os_args(&["--static-path-route=/s"]))),
        2
    );
    assert_eq!(with_env(&[], || main(os_args(&["--version"]))), 0);
}

#[test]
fn slow_client_flags_and_their_variables() {
    let defaults = ok(&[]).options.config;
    let buffer = defaults.body_buffer.expect("buffering is on by default");
    assert_eq!(buffer.memory, 1 << 20);
    assert_eq!(buffer.spill_dir, std::env::temp_dir());
    assert_eq!(defaults.body_read_timeout, Duration::from_secs(30));
    assert_eq!(defaults.send_timeout, Duration::from_secs(30));

    let flagged = ok(&[
        "--body-buffer-size=64K",
        "--body-spill-dir=/var/tmp",
        "--body-read-timeout=2.5",
        "--send-timeout=4",
    ])
    .options
    .config;
    let buffer = flagged.body_buffer.unwrap();
    assert_eq!(buffer.memory, 64 << 10);
    assert_eq!(buffer.spill_dir, PathBuf::from("/var/tmp"));
    assert_eq!(flagged.body_read_timeout, Duration::from_millis(2500));
    assert_eq!(flagged.send_timeout, Duration::from_secs(4));
    assert!(ok(&["--request-buffering=off"])
        .options
        .config
        .body_buffer
        .is_none());

    let env = [
        ("M0SERVE_REQUEST_BUFFERING", "off"),
        ("M0SERVE_BODY_READ_TIMEOUT", "3"),
        ("M0SERVE_SEND_TIMEOUT", "5"),
    ];
    let Ok(from_env) = parse_env(&[], &env) else {
        panic!("env parse failed")
    };
    assert!(from_env.options.config.body_buffer.is_none());
    assert_eq!(
        from_env.options.config.body_read_timeout,
        Duration::from_secs(3)
    );
    assert_eq!(from_env.options.config.send_timeout, Duration::from_secs(5));
    let env = [
        ("M0SERVE_BODY_BUFFER_SIZE", "2M"),
        ("M0SERVE_BODY_SPILL_DIR", "/srv/spill"),
    ];
    let Ok(from_env) = parse_env(&["--request-buffering", "on"], &env) else {
        panic!("env parse failed")
    };
    let buffer = from_env.options.config.body_buffer.unwrap();
    assert_eq!(buffer.memory, 2 << 20);
    assert_eq!(buffer.spill_dir, PathBuf::from("/srv/spill"));

    assert!(usage(&["--request-buffering=maybe"]).contains("--request-buffering"));
    assert!(usage(&["--send-timeout=-1"]).contains("--send-timeout"));
}

#[test]
fn workers_and_the_pid_file_take_flags() {
    let inv = ok(&["--workers", "3", "--pid-file", "/run/m0.pid"]);
    assert_eq!(inv.supervision.workers, 3);
    assert_eq!(inv.supervision.pid_file, Some(PathBuf::from("/run/m0.pid")));
    assert!(parse(["m0serve", "--workers", "0"].map(OsString::from)).is_err());
}

#[test]
fn recycling_limits_take_flags() {
    let inv = ok(&[
        "--workers-max-requests=1000",
        "--workers-max-requests-jitter=50",
        "--workers-lifetime=3600",
        "--workers-max-rss=512",
    ]);
    let recycle = inv.supervision.recycle;
    assert_eq!(recycle.max_requests, Some(1000));
    assert_eq!(recycle.max_requests_jitter, 50);
    assert_eq!(recycle.lifetime, Some(Duration::from_secs(3600)));
    assert_eq!(recycle.max_rss, Some(512 << 20));
    assert_eq!(
        ok(&["--workers-max-rss=1G"]).supervision.recycle.max_rss,
        Some(1 << 30)
    );
    assert!(usage(&["--workers-max-requests=0"]).contains("--workers-max-requests"));
    assert!(usage(&["--workers-lifetime=0"]).contains("--workers-lifetime"));
    assert!(usage(&["--workers-max-rss=0"]).contains("--workers-max-rss"));
}

#[test]
fn reload_watches_the_app_dir_or_each_reload_dir() {
    assert_eq!(ok(&["--reload-dir=/x"]).supervision.reload, None);
    let watch = ok(&["--reload", "--app-dir=src", "--working-dir=/code"])
        .supervision
        .reload
        .unwrap();
    assert_eq!(watch.dirs, [PathBuf::from("/code/src")]);
    assert!(watch.include.is_empty() && watch.exclude.is_empty());
    let watch = ok(&[
        "--reload",
        "--reload-dir=a",
        "--reload-dir=b",
        "--reload-include=*.html",
        "--reload-exclude=test_*.py",
    ])
    .supervision
    .reload
    .unwrap();
    assert_eq!(watch.dirs, [PathBuf::from("a"), PathBuf::from("b")]);
    assert_eq!(watch.include, ["*.html"]);
    assert_eq!(watch.exclude, ["test_*.py"]);
    assert!(usage(&["--reload", "--reload-include=a["]).contains("--reload-include"));
}

#[test]
fn metrics_address_from_the_flag_or_its_variable() {
    assert_eq!(ok(&[]).supervision.metrics_address, None, "off by default");
    let flag = ok(&["--metrics-address", "0.0.0.0:9100"]);
    assert_eq!(
        flag.supervision.metrics_address.as_deref(),
        Some("0.0.0.0:9100")
    );
    let env = parse_env(&[], &[("M0SERVE_METRICS_ADDRESS", "[::1]:9100")]).unwrap();
    assert_eq!(
        env.supervision.metrics_address.as_deref(),
        Some("[::1]:9100")
    );
    for bad in ["9100", ":9100", "host:", "host:http"] {
        assert!(
            usage(&["--metrics-address", bad]).contains("is not HOST:PORT"),
            "{bad}"
        );
    }
}

#[test]
fn inherited_socket_flags() {
    let fd = ok(&["--fd", "5"]).options.config;
    assert!(matches!(
        fd.listen.as_slice(),
        [Listen::Fd {
            fd: 5,
            systemd: false
        }]
    ));
    let env = parse_env(&[], &[("M0SERVE_FD", "4")])
        .unwrap()
        .options
        .config;
    assert!(matches!(
        env.listen.as_slice(),
        [Listen::Fd {
            fd: 4,
            systemd: false
        }]
    ));
    // The address flags and --backlog do nothing with a socket already bound.
    for other in [
        ["--port", "1"],
        ["--host", "::"],
        ["--uds", "/tmp/x"],
        ["--backlog", "9"],
    ] {
        let message = usage(&["--fd", "5", other[0], other[1]]);
        assert!(message.contains("cannot be used with"), "{message}");
    }
    assert!(usage(&["--fd=-1"]).contains("--fd"));
}

#[test]
fn backlog_and_uds_permissions() {
    let defaults = ok(&[]).options.config.socket;
    assert_eq!(defaults.backlog, 1024);
    assert_eq!(defaults.uds_mode, None);
    let set = ok(&[
        "--uds",
        "/tmp/m0.sock",
        "--uds-permissions",
        "0o660",
        "--backlog",
        "64",
    ]);
    assert_eq!(set.options.config.socket.backlog, 64);
    assert_eq!(set.options.config.socket.uds_mode, Some(0o660));
    let env = [
        ("M0SERVE_UDS", "/tmp/m0.sock"),
        ("M0SERVE_UDS_PERMISSIONS", "600"),
        ("M0SERVE_BACKLOG", "2048"),
    ];
    let env = parse_env(&[], &env).unwrap().options.config.socket;
    assert_eq!((env.backlog, env.uds_mode), (2048, Some(0o600)));
    for mode in ["0660", "660", "0o660"] {
        let parsed = ok(&["--uds=/tmp/s", &format!("--uds-permissions={mode}")]);
        assert_eq!(parsed.options.config.socket.uds_mode, Some(0o660), "{mode}");
    }
    for bad in ["0", "-5", "65536", "lots"] {
        assert!(
            usage(&[&format!("--backlog={bad}")]).contains("--backlog"),
            "{bad}"
        );
    }
    for bad in ["rw-rw----", "8", "0x1b6", "1777", ""] {
        let message = usage(&["--uds=/tmp/s", "--uds-permissions", bad]);
        assert!(message.contains("--uds-permissions"), "{bad}: {message}");
    }
    // A mode for a socket file there is none of.
    assert!(usage(&["--uds-permissions", "660"]).contains("needs --uds"));
}

#[test]
fn socket_activation_is_taken_only_for_this_process_and_then_cleared() {
    let me = std::process::id().to_string();
    let other = (std::process::id() + 1).to_string();
    let activated = |pid: &str, fds: &str| {
        with_env(&[], || {
            std::env::set_var("LISTEN_PID", pid);
            std::env::set_var("LISTEN_FDS", fds);
            std::env::set_var("LISTEN_FDNAMES", "http");
            let parsed = parse(os_args(&[]));
            let left = ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"]
                .map(|v| std::env::var_os(v).is_some());
            for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
                std::env::remove_var(name);
            }
            (parsed, left)
        })
    };
    let (ours, left) = activated(&me, "1");
    assert!(matches!(
        ours.unwrap().options.config.listen.as_slice(),
        [Listen::Fd {
            fd: 3,
            systemd: true
        }]
    ));
    assert_eq!(left, [false; 3], "cleared for what this process starts");
    let (theirs, left) = activated(&other, "1");
    assert!(matches!(
        theirs.unwrap().options.config.listen.as_slice(),
        [Listen::Tcp { .. }]
    ));
    assert_eq!(
        left, [true; 3],
        "another process's variables are left alone"
    );
    // Several sockets: each is served, in order.
    let (two, _) = activated(&me, "2");
    let fds: Vec<_> = two.unwrap().options.config.listen;
    assert_eq!(
        fds,
        [3, 4].map(|fd| Listen::Fd { fd, systemd: true }),
        "both of LISTEN_FDS=2"
    );
    let Err(CliError::Usage(bad)) = activated(&me, "two").0 else {
        panic!("a count that is no number accepted")
    };
    assert!(bad.contains("LISTEN_FDS=two"), "{bad}");
    let with_fd = with_env(&[], || {
        std::env::set_var("LISTEN_PID", &me);
        std::env::set_var("LISTEN_FDS", "1");
        parse(os_args(&["--fd", "5"]))
    });
    let Err(CliError::Usage(conflict)) = with_fd else {
        panic!("--fd and activation accepted together")
    };
    assert!(conflict.contains("--fd"), "{conflict}");
    let with_binds = |binds: &[&str]| {
        with_env(&[], || {
            std::env::set_var("LISTEN_PID", &me);
            std::env::set_var("LISTEN_FDS", "1");
            parse(os_args(binds))
        })
    };
    assert!(
        matches!(with_binds(&["--bind", "fd://5"]), Err(CliError::Usage(m)) if m.contains("--fd")),
        "a --bind fd://N and activation accepted together"
    );
    // Activation replaces the addresses, --bind's as --host's.
    let replaced = with_binds(&["--bind", "127.0.0.1:9", "--bind", "unix:/tmp/x.sock"]);
    assert_eq!(
        replaced.unwrap().options.config.listen,
        [Listen::Fd {
            fd: 3,
            systemd: true
        }]
    );
}

#[test]
fn access_log_formats() {
    use crate::server::access_log::{format, Format};
    let default = Format::parse(format::DEFAULT).unwrap();
    assert_eq!(
        ok(&["--access-log"]).options.config.access_log,
        Some(default)
    );
    // A format turns the log on: given for a log left off, it would do nothing.
    assert_eq!(
        ok(&["--access-log-format", "json"])
            .options
            .config
            .access_log,
        Some(Format::Json)
    );
    let env = [("M0SERVE_ACCESS_LOG_FORMAT", "%(s)s %(D)s")];
    let from_env = parse_env(&[], &env)
        .unwrap()
        .options
        .config
        .access_log
        .unwrap();
    assert_eq!(from_env, Format::parse("%(s)s %(D)s").unwrap());
    let message = usage(&["--access-log-format", "%(h)s %(zz)s"]);
    assert!(
        message.contains("--access-log-format") && message.contains("unknown atom %(zz)s"),
        "{message}"
    );
}

#[test]
fn proxy_flags_defaults_and_variables() {
    use crate::http::trusted::Trusted;
    let off = ok(&[]).options.config.proxy;
    assert!(!off.headers && !off.protocol);
    assert_eq!(off.trusted, Trusted::default());
    let on = ok(&[
        "--proxy-headers",
        "--proxy-protocol",
        "--forwarded-allow-ips=10.0.0.0/8, ::1",
    ])
    .options
    .config
    .proxy;
    assert!(on.headers && on.protocol);
    assert_eq!(on.trusted, Trusted::parse("10.0.0.0/8,::1").unwrap());
    let env = parse_env(
        &[],
        &[
            ("M0SERVE_PROXY_HEADERS", "1"),
            ("M0SERVE_FORWARDED_ALLOW_IPS", "*"),
        ],
    )
    .unwrap()
    .options
    .config
    .proxy;
    assert!(env.headers && env.trusted.all());
    assert!(usage(&["--forwarded-allow-ips=localhost"]).contains("--forwarded-allow-ips"));
}

#[test]
fn uvicorn_variable_is_the_trusted_list_unless_the_flag_is_given() {
    use crate::http::trusted::Trusted;
    let args = |list: &[&str]| Args::try_parse_from(os_args(list)).unwrap().proxy;
    let uvicorn = Some(OsString::from("192.168.0.0/16"));
    let from_env = args(&[]).proxy(uvicorn.clone()).ok().unwrap();
    assert_eq!(from_env.trusted, Trusted::parse("192.168.0.0/16").unwrap());
    let flag = args(&["--forwarded-allow-ips=10.0.0.1"]);
    let from_flag = flag.proxy(uvicorn).ok().unwrap();
    assert_eq!(from_flag.trusted, Trusted::parse("10.0.0.1").unwrap());
    match args(&[]).proxy(Some(OsString::from("10.0.0.1,nope"))) {
        Err(CliError::Usage(line)) => {
            assert!(
                line.contains("FORWARDED_ALLOW_IPS") && !line.contains('\n'),
                "{line}"
            )
        }
        _ => panic!("a bad FORWARDED_ALLOW_IPS accepted"),
    }
}

#[test]
fn switches_take_an_optional_value_after_an_equals_sign() {
    let with = |args: &[&str], env: &[(&str, &str)]| {
        let invocation = parse_env(args, env).unwrap_or_else(|e| panic!("{args:?}: {e:?}"));
        (
            invocation.options.config.access_log.is_some(),
            invocation.app.map(|a| a.target),
        )
    };
    assert_eq!(
        with(&["--access-log", "app:app"], &[]),
        (true, Some("app:app".into()))
    );
    assert_eq!(with(&["--access-log=true"], &[]), (true, None));
    // The flag's value wins over its variable, both ways.
    assert_eq!(
        with(&["--access-log=false"], &[("M0SERVE_ACCESS_LOG", "1")]),
        (false, None)
    );
    assert_eq!(with(&[], &[("M0SERVE_ACCESS_LOG", "1")]), (true, None));
    let reload = |args: &[&str]| ok(args).supervision.reload.is_some();
    assert!(reload(&["--reload", "app:app"]));
    assert!(!reload(&["--reload=false", "app:app"]));
}

#[test]
fn the_flag_table_names_each_flag_with_how_it_takes_a_value() {
    let table: std::collections::HashMap<String, FlagKind> = super::flags().into_iter().collect();
    assert_eq!(table["port"], FlagKind::Value);
    assert_eq!(table["access-log"], FlagKind::Toggle);
    assert_eq!(table["ws"], FlagKind::Toggle);
    assert_eq!(table["no-ws"], FlagKind::Switch);
    assert_eq!(table["header"], FlagKind::List);
    assert_eq!(table["static-path-mount"], FlagKind::List);
    assert!(!table.contains_key("help") && !table.contains_key("version"));
    // Every flag parses in the form the table gives it.
    for (name, kind) in &table {
        let arg = match kind {
            FlagKind::Switch => format!("--{name}"),
            FlagKind::Toggle => format!("--{name}=false"),
            FlagKind::Value | FlagKind::List => continue,
        };
        if let Err(CliError::Usage(e)) = parse_env(&[arg.as_str()], &[]) {
            assert!(!e.contains("unexpected"), "{arg}: {e}");
        }
    }
}

#[test]
fn the_configs_defaults_are_the_command_lines() {
    let parsed = ok(&[]).options.config;
    assert_eq!(
        format!("{parsed:?}"),
        format!("{:?}", crate::server::Config::default())
    );
}

#[test]
fn a_bad_knob_is_a_usage_error_naming_it() {
    let parsed = with_env(&[], || {
        std::env::set_var("M0_ACCEPT_BATCH", "many");
        let parsed = parse(os_args(&[]));
        std::env::remove_var("M0_ACCEPT_BATCH");
        parsed
    });
    match parsed {
        Err(CliError::Usage(message)) => assert!(
            message.contains("M0_ACCEPT_BATCH must be a whole number"),
            "{message}"
        ),
        _ => panic!("M0_ACCEPT_BATCH=many was accepted"),
    }
}

/// A file of `text` under a fresh temporary directory.
fn temp_file(name: &str, text: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("m0-cli-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_config_file_is_below_the_variables_and_the_command_line() {
    let file = temp_file(
        "m0.toml",
        "port = 9000\nkeep_alive_timeout = 7\nheader = ['X-A: 1']\n",
    );
    let config = format!("--config={}", file.display());
    let from_file = ok(&[&config]).options.config;
    assert!(matches!(
        from_file.listen.as_slice(),
        [Listen::Tcp { port: 9000, .. }]
    ));
    assert_eq!(from_file.keep_alive_timeout, Duration::from_secs(7));
    assert_eq!(
        from_file.response_defaults,
        Defaults::new(true, vec![("X-A".to_string(), b"1".to_vec())])
    );
    let env = parse_env(&[&config], &[("M0SERVE_PORT", "9100")])
        .unwrap()
        .options
        .config;
    assert!(matches!(
        env.listen.as_slice(),
        [Listen::Tcp { port: 9100, .. }]
    ));
    assert_eq!(env.keep_alive_timeout, Duration::from_secs(7));
    let cli = parse_env(&[&config, "--port=9200"], &[("M0SERVE_PORT", "9100")])
        .unwrap()
        .options
        .config;
    assert!(matches!(
        cli.listen.as_slice(),
        [Listen::Tcp { port: 9200, .. }]
    ));
    // The variable names the file too.
    let named = parse_env(&[], &[("M0SERVE_CONFIG", &file.display().to_string())])
        .unwrap()
        .options
        .config;
    assert!(matches!(
        named.listen.as_slice(),
        [Listen::Tcp { port: 9000, .. }]
    ));
}

#[test]
fn a_value_the_file_gives_that_the_flag_refuses_names_the_file_line_and_key() {
    let file = temp_file("m0.toml", "host = '::1'\nport = 'eighty'\n");
    let message = usage(&[&format!("--config={}", file.display())]);
    assert!(
        message.starts_with(&format!("{}:2: port: ", file.display())),
        "{message}"
    );
    assert!(message.contains("eighty"), "{message}");
    let missing = usage(&["--config=/nonexistent/m0.toml"]);
    assert!(
        missing.starts_with("--config /nonexistent/m0.toml: "),
        "{missing}"
    );
}

#[test]
fn print_config_names_where_each_value_came_from() {
    let file = temp_file("m0.toml", "port = 9000\n");
    let config = format!("--config={}", file.display());
    let printed = match parse_env(
        &[&config, "--print-config", "--cores=2"],
        &[("M0SERVE_HOST", "0.0.0.0")],
    ) {
        Err(CliError::Print(text)) => text,
        _ => panic!("--print-config did not print"),
    };
    let line = |name: &str| {
        printed
            .lines()
            .find(|l| l.starts_with(&format!("{name} = ")))
            .unwrap_or_else(|| panic!("no {name} in\n{printed}"))
            .to_string()
    };
    assert_eq!(
        line("port"),
        format!("port = \"9000\"  # {}:1", file.display())
    );
    assert_eq!(line("host"), "host = \"0.0.0.0\"  # M0SERVE_HOST");
    assert_eq!(line("cores"), "cores = \"2\"  # command line");
    assert_eq!(
        line("graceful_timeout"),
        "graceful_timeout = \"30\"  # default"
    );
}

#[test]
fn env_files_are_read_in_order_the_first_naming_a_variable_winning() {
    let first = temp_file(
        ".env",
        "# a comment\nENVFILE_TEST_A=one\nexport ENVFILE_TEST_B='two words'\n",
    );
    let second = temp_file(".env", "ENVFILE_TEST_A=ignored\nENVFILE_TEST_C=three\n");
    let invocation = ok(&[
        &format!("--env-file={}", first.display()),
        &format!("--env-file={}", second.display()),
    ]);
    assert_eq!(
        invocation.env,
        [
            ("ENVFILE_TEST_A".to_string(), "one".to_string()),
            ("ENVFILE_TEST_B".to_string(), "two words".to_string()),
            ("ENVFILE_TEST_C".to_string(), "three".to_string()),
        ]
    );
    let bad = temp_file(".env", "GOOD=1\nnot a line\n");
    let message = usage(&[&format!("--env-file={}", bad.display())]);
    assert!(
        message.starts_with(&format!("--env-file {}: ", bad.display())),
        "{message}"
    );
}

#[test]
fn bind_is_repeatable_from_the_command_line_the_variable_and_the_file() {
    let tcp = |host: &str, port| Listen::Tcp {
        host: host.into(),
        port,
    };
    let unix = Listen::Unix("/tmp/m0-b.sock".into());
    let flags = ok(&[
        "--bind",
        "127.0.0.1:9001",
        "-b",
        "[::1]:9002",
        "--bind=unix:/tmp/m0-b.sock",
    ]);
    assert_eq!(
        flags.options.config.listen,
        [tcp("127.0.0.1", 9001), tcp("::1", 9002), unix.clone()]
    );
    // The variable: a comma-separated list.
    let env = parse_env(
        &[],
        &[("M0SERVE_BIND", "127.0.0.1:9001, unix:/tmp/m0-b.sock")],
    )
    .unwrap();
    assert_eq!(
        env.options.config.listen,
        [tcp("127.0.0.1", 9001), unix.clone()]
    );
    // The file: an array.
    let file = temp_file("bind.toml", "bind = ['0.0.0.0:9003', 'fd://7']\n");
    let from_file = ok(&[&format!("--config={}", file.display())])
        .options
        .config;
    assert_eq!(
        from_file.listen,
        [
            tcp("0.0.0.0", 9003),
            Listen::Fd {
                fd: 7,
                systemd: false
            }
        ]
    );
    // --uds-permissions applies to a --bind unix: socket file too.
    let mode = ok(&["--bind=unix:/tmp/m0-b.sock", "--uds-permissions=600"]);
    assert_eq!(mode.options.config.socket.uds_mode, Some(0o600));
}

#[test]
fn bind_with_the_old_address_flags_or_a_bad_address_is_a_usage_error() {
    // Strict: which address would win is a guess, so neither does.
    for old in [
        "--host=0.0.0.0",
        "--port=9000",
        "--uds=/tmp/x.sock",
        "--fd=3",
    ] {
        let message = usage(&["--bind=127.0.0.1:9001", old]);
        assert!(message.contains("--bind"), "{old}: {message}");
        let flag = old.split('=').next().unwrap();
        assert!(message.contains(flag), "{old}: {message}");
    }
    let env = parse_env(&["--bind=127.0.0.1:9001"], &[("M0SERVE_PORT", "9000")]);
    assert!(
        matches!(env, Err(CliError::Usage(ref m)) if m.contains("--port")),
        "M0SERVE_PORT beside --bind accepted"
    );
    for bad in ["::1:80", "host:http", "unix:", "fd://x", ""] {
        let message = usage(&["--bind", bad]);
        assert!(message.contains("--bind"), "{bad:?}: {message}");
        assert!(!message.contains('\n'), "{bad:?}: one line: {message}");
    }
}
