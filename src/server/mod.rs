//! The server: binds the listener, spawns and pins the core threads, runs
//! graceful shutdown.
//!
//! The main thread binds, logs the one line tests and people read
//! (`listening on ...`), spawns a thread per core, then blocks on SIGTERM and
//! SIGINT. Either signal, or a core thread that fails, begins the graceful
//! shutdown: cores stop accepting, close idle connections, finish the
//! requests in flight, and are closed regardless at `--graceful-timeout`.

pub mod access_log;
#[cfg(test)]
mod app_tests;
mod config;
pub mod cpus;
pub mod listener;
pub mod proxy;
pub mod remote;
pub mod request_budget;
mod sampler;
pub mod session;
mod until_sent;

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use core_affinity::CoreId;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

use std::os::fd::OwnedFd;

use crate::app::ServerAddr;
use crate::backend::accept::{Batch, RECHECK};
use crate::backend::linger;
use crate::backend::share::Board;
use crate::backend::{self, Control, CoreContext, Kind, Service};
use crate::tls::{TlsService, TlsShared};
use crate::tuning::Tuning;
pub use config::{Config, HttpVersion};

/// Where to listen: one listener (a server has one or more).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    Tcp {
        host: String,
        port: u16,
    },
    Unix(PathBuf),
    /// A socket the parent left listening at this descriptor: `--fd`, or
    /// systemd's socket activation (`systemd`: named in errors as such).
    Fd {
        fd: std::os::fd::RawFd,
        systemd: bool,
    },
}

/// Everything the server runs with: the user's [`Config`], the mechanism
/// knobs, the application, what a supervisor handed this worker, and the
/// hooks of whoever started it.
pub struct Options {
    pub config: Config,
    pub tuning: Tuning,
    /// Where requests no Rust-native route answers go (None: 404).
    pub app: Option<Arc<dyn crate::app::App>>,
    /// From the supervisor, in a worker (None: a process serving alone).
    pub inherited: Option<Inherited>,
    /// Told when the server is ready (cores up) and when its drain begins:
    /// how a worker keeps its supervisor informed.
    pub phase_hook: Option<PhaseHook>,
    /// The embedder's handle (the Python API): told where the server is
    /// ready, and able to stop it as SIGTERM would.
    pub remote: Option<remote::Remote>,
}

impl Options {
    /// `config` and `tuning`, with no app, no supervisor and no hooks.
    pub fn new(config: Config, tuning: Tuning) -> Options {
        Options {
            config,
            tuning,
            app: None,
            inherited: None,
            phase_hook: None,
            remote: None,
        }
    }
}

/// What a supervisor hands its worker ([`crate::supervisor::link`]).
pub struct Inherited {
    /// The worker's number, from 1 (the metrics' `worker` label).
    pub number: u32,
    /// The listeners the supervisor bound, shared by every worker, in the
    /// order of [`Config::listen`] (see [`listener::adopt`]).
    pub listeners: Vec<OwnedFd>,
    /// The core threads and CPUs its supervisor planned for this worker
    /// (None: planned here, from `cores`, the mask and the quota).
    pub cpu_share: Option<cpus::Worker>,
    /// This process's threads are confined to its cores' CPUs (the pool's
    /// scheduling defaults follow it: [`Tuning::turn`]).
    pub confined: bool,
    /// The connections each worker holds ([`crate::ipc::tally`]).
    pub tally: Option<crate::ipc::tally::Tally>,
    /// The metrics' shared region, where the supervisor serves them: each
    /// core thread counts in a shard of its own ([`crate::metrics`]).
    pub metrics: Option<crate::metrics::counters::Region>,
    /// The requests to serve before asking to be recycled.
    pub budget: Option<request_budget::Budget>,
    /// The heartbeat the supervisor watches (`--worker-timeout`): each core
    /// and the app's Python side claim a slot of it.
    pub heartbeat: Option<crate::ipc::heartbeat::Heartbeat>,
    /// Asks the supervisor for a replacement (see [`crate::app::App::when_stuck`]).
    pub replace_me: Option<Arc<dyn Fn() + Send + Sync>>,
}

/// A moment in the server's life that [`Options::phase_hook`] is told of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The core threads are up and accepting.
    Ready,
    /// A signal began the graceful shutdown.
    Draining,
}

/// See [`Options::phase_hook`]; called on the server's main thread.
pub type PhaseHook = Box<dyn FnMut(Phase) + Send>;

/// Serve until SIGTERM or SIGINT; returns the process exit code: 0 after a
/// graceful shutdown, 1 when a core thread failed.
pub fn run(options: Options) -> io::Result<i32> {
    let Options {
        mut config,
        tuning,
        app,
        mut inherited,
        phase_hook,
        remote,
    } = options;
    let kind = backend::select(config.backend, tuning.uring_disabled).map_err(io::Error::other)?;
    let replace_me = inherited.as_mut().and_then(|i| i.replace_me.take());
    let (worker, share, inherited_fds, tally, metrics, heartbeat) = match inherited {
        Some(i) => {
            if let Some(budget) = i.budget {
                request_budget::set(budget);
            }
            (
                i.number,
                i.cpu_share,
                Some(i.listeners),
                i.tally,
                i.metrics,
                i.heartbeat,
            )
        }
        None => (1, None, None, None, None, None),
    };
    let pins = cpus::core_pins(share, config.cores)?;
    let listeners = match inherited_fds {
        Some(fds) => fds
            .into_iter()
            .map(listener::adopt)
            .collect::<io::Result<Vec<_>>>()?,
        None => listener::bind_all(&config.listen, config.socket)?,
    };
    if listeners.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no address to listen on",
        ));
    }
    let control = Arc::new(Control::new(config.max_connections).with_tally(tally));
    let graceful = config.graceful_timeout;
    let readiness = config.router.readiness();

    let servers = listeners
        .iter()
        .enumerate()
        .map(|(i, l)| Arc::new(server_addr(&l.addr, config.listen.get(i))))
        .collect();
    let tls = config.tls.take().map(|mut settings| {
        settings.offer(match config.http {
            config::HttpVersion::Auto => {
                &[crate::tls::config::ALPN_H2, crate::tls::config::ALPN_HTTP11]
            }
            config::HttpVersion::One => &[crate::tls::config::ALPN_HTTP11],
            config::HttpVersion::Two => &[crate::tls::config::ALPN_H2],
        });
        Arc::new(TlsShared {
            kernel: crate::tls::kernel::choose(settings.kernel),
            settings,
            handshake_timeout: config.header_read_timeout,
            send_timeout: config.send_timeout,
        })
    });
    let shared = Arc::new(session::Shared::new(config, &tuning, app, servers));
    let _sampler = match (metrics, &shared.app) {
        (Some(region), Some(app)) => sampler::Sampler::start(region, worker, app.clone()),
        _ => None,
    };
    // A shard per core, for life, claimed before the cores (and the
    // `listening on` line): a scrape from then on shows every one.
    let shards: Vec<_> = (0..pins.len())
        .map(|_| metrics.and_then(|region| region.claim(worker)))
        .collect();
    let app = shared.app.clone();
    // Before the cores, which answer the ready path: a worker is watched
    // from READY on, its Python side included.
    if let (Some(heartbeat), Some(app)) = (&heartbeat, &app) {
        app.keep_heartbeat(heartbeat);
    }
    if let (Some(ask), Some(app)) = (replace_me, &app) {
        app.when_stuck(ask);
    }
    let service = move |core: usize| {
        let shard = shards.get(core).copied().flatten();
        session::HttpService::new(shared.clone()).counting(shard)
    };

    let secure = tls.is_some();
    let core_main = move |ctx: CoreContext| {
        if let Some(app) = &app {
            app.on_core_thread();
        }
        let service = service(ctx.index);
        match &tls {
            Some(tls) => run_backend(kind, ctx, TlsService::new(service, tls.clone())),
            None => run_backend(kind, ctx, service),
        }
    };
    serve(
        listeners,
        pins,
        kind,
        &tuning,
        control,
        Lifecycle {
            graceful,
            hook: phase_hook,
            readiness,
            secure,
            remote,
            heartbeat,
        },
        Arc::new(core_main),
    )
}

/// Where a listener at `addr` listens, as the app is told: a TCP listener
/// bound from a host name keeps that name (`listen`, what it was bound
/// from: a worker's flags, which name the supervisor's listeners in order
/// unless socket activation replaced them, so the port must agree; an
/// inherited one has only its address).
fn server_addr(addr: &listener::Address, listen: Option<&Listen>) -> ServerAddr {
    match addr {
        listener::Address::Tcp(addr) => ServerAddr::Tcp {
            host: match listen {
                Some(Listen::Tcp { host, port }) if [0, addr.port()].contains(port) => host.clone(),
                _ => addr.ip().to_string(),
            },
            port: addr.port(),
        },
        listener::Address::Unix(path) => ServerAddr::Unix(path.clone()),
    }
}

/// How the server's life is told and ended: its graceful timeout, who
/// hears of its phases, and the ready path's state, told of the drain.
struct Lifecycle {
    graceful: Duration,
    hook: Option<PhaseHook>,
    readiness: Option<Arc<crate::routes::Readiness>>,
    /// The cores serve TLS: the address is logged as `https://`.
    secure: bool,
    remote: Option<remote::Remote>,
    /// Each core stamps a slot of it ([`Inherited::heartbeat`]).
    heartbeat: Option<crate::ipc::heartbeat::Heartbeat>,
}

/// What a core thread runs: its backend's loop with its own service.
type CoreMain = Arc<dyn Fn(CoreContext) -> io::Result<()> + Send + Sync>;

/// Run `service` on the selected backend.
fn run_backend<S: Service>(kind: Kind, ctx: CoreContext, service: S) -> io::Result<()> {
    match kind {
        Kind::Portable => backend::portable::run(ctx, service),
        #[cfg(target_os = "linux")]
        Kind::Uring => backend::uring::run(ctx, service),
        #[cfg(not(target_os = "linux"))]
        Kind::Uring => unreachable!("select() picks io_uring only on Linux"),
    }
}

/// Spawn the cores on `listeners`, wait for a signal (or a core's failure),
/// shut down within `graceful`, and join them.
fn serve(
    listeners: Vec<listener::Listener>,
    pins: Vec<Option<CoreId>>,
    kind: Kind,
    tuning: &Tuning,
    control: Arc<Control>,
    lifecycle: Lifecycle,
    core_main: CoreMain,
) -> io::Result<i32> {
    let Lifecycle {
        graceful,
        mut hook,
        readiness,
        secure,
        remote,
        heartbeat,
    } = lifecycle;
    let mut tell = |phase| {
        if let Some(hook) = hook.as_mut() {
            hook(phase);
        }
    };
    let n = pins.len();
    // Handlers go in before the log line: a SIGTERM sent by whoever read
    // it must begin a shutdown, not kill the process.
    let mut signals = Signals::new([SIGTERM, SIGINT])?;
    if let Some(remote) = &remote {
        // Closing the iterator ends the wait below, as a failing core does.
        let handle = signals.handle();
        remote.on_stop(Box::new(move || handle.close()));
    }
    let failed = Arc::new(AtomicBool::new(false));
    let board = Board::sharing(n, tuning.accept_share);
    let batch = Batch::new(tuning.accept_batch);
    // Other processes may accept from a shared listener (a supervisor's
    // workers all share theirs): the rules for it then hold for every one.
    let shared = listeners.iter().any(|l| l.shared);
    let rotate_accepts = shared && tuning.accept_rotate;
    let recheck = shared.then_some(RECHECK);
    let linger = linger::Settings::quiet_for(tuning.linger);
    for l in &listeners {
        tracing::info!(
            "listening on {} ({kind} backend, {n} cores)",
            l.addr.url(secure)
        );
        if secure && matches!(l.addr, listener::Address::Unix(_)) {
            tracing::info!("{}: plain HTTP (TLS applies to TCP listeners only)", l.addr);
        }
    }
    let fds: Vec<_> = listeners.iter().map(|l| l.fd.clone()).collect();

    let mut threads = Vec::with_capacity(n);
    for (index, pin) in pins.into_iter().enumerate() {
        let ctx = CoreContext {
            index,
            listeners: fds.clone(),
            board: board.clone(),
            control: control.clone(),
            batch,
            rotate_accepts,
            recheck,
            linger,
            heartbeat: heartbeat
                .as_ref()
                .and_then(|h| h.claim())
                .map(|beat| beat.pulse()),
        };
        let spawned = spawn_core(
            ctx,
            pin,
            core_main.clone(),
            failed.clone(),
            signals.handle(),
        );
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => {
                tracing::error!("spawning core {index}: {e}");
                failed.store(true, Ordering::SeqCst);
                break;
            }
        }
    }

    if !failed.load(Ordering::SeqCst) {
        control.join_tally();
        tell(Phase::Ready);
        if let Some(remote) = &remote {
            remote.ready(listeners[0].addr.url(secure));
        }
        // Ends with a signal, or with None when a failing core (or the
        // embedder's stop) closed the iterator.
        let name = match signals.forever().next() {
            Some(SIGINT) => Some("SIGINT"),
            Some(_) => Some("SIGTERM"),
            None if !failed.load(Ordering::SeqCst) => Some("stop requested"),
            None => None,
        };
        if let Some(name) = name {
            tracing::info!("{name}: shutting down (graceful timeout {graceful:?})");
        }
    }
    control.shut_down(Instant::now() + graceful);
    if let Some(readiness) = &readiness {
        readiness.drain();
    }
    // After the flag, so that a supervisor that shuts the shared listener on
    // hearing this finds the cores expecting their accepts to fail.
    tell(Phase::Draining);
    // After the flag: a core that sees its accept fail knows why.
    listeners
        .iter()
        .for_each(listener::Listener::stop_listening);
    board.wake_all();
    for t in threads {
        // Failures were logged (and recorded) by the thread itself.
        let _ = t.join();
    }
    signals.handle().close();
    if let Some(remote) = &remote {
        remote.release();
    }
    drop(listeners); // unlinks the Unix sockets' files
    Ok(if failed.load(Ordering::SeqCst) { 1 } else { 0 })
}

/// Spawn core thread `m0-core-{index}`, pinned to `pin`. A core that panics,
/// fails, or returns before shutdown is logged, marks the run `failed`, and
/// closes the signal iterator so the main thread shuts the others down.
fn spawn_core(
    ctx: CoreContext,
    pin: Option<CoreId>,
    core_main: CoreMain,
    failed: Arc<AtomicBool>,
    signals: Handle,
) -> io::Result<JoinHandle<()>> {
    let index = ctx.index;
    std::thread::Builder::new()
        .name(format!("m0-core-{index}"))
        .spawn(move || {
            if let Some(cpu) = pin {
                if !core_affinity::set_for_current(cpu) {
                    tracing::warn!("core {index}: could not pin to CPU {}", cpu.id);
                }
            }
            let control = ctx.control.clone();
            let failure = match catch_unwind(AssertUnwindSafe(|| core_main(ctx))) {
                Ok(Ok(())) if control.shutting_down() => None,
                Ok(Ok(())) => Some("returned before shutdown".to_string()),
                Ok(Err(e)) => Some(e.to_string()),
                Err(panic) => Some(panic_message(panic.as_ref())),
            };
            if let Some(why) = failure {
                tracing::error!("core {index} failed: {why}");
                failed.store(true, Ordering::SeqCst);
                signals.close();
            }
        })
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let msg = backend::guard::panic_message(panic).unwrap_or("a panic");
    format!("panicked: {msg}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Notifier, Output, Peer, Session};

    /// A service whose connections are closed at once, unanswered.
    #[derive(Clone, Copy)]
    struct Unwired;

    impl Service for Unwired {
        type Session = Unwired;
        fn open(&mut self, _peer: &Peer, _listener: usize, _notifier: Notifier) -> Unwired {
            Unwired
        }
    }

    impl Session for Unwired {
        fn on_read(&mut self, _data: &[u8], _now: Instant) {}
        fn on_eof(&mut self, _now: Instant) {}
        fn output(&mut self) -> Output<'_> {
            Output::None
        }
        fn on_sent(&mut self, _n: usize, _now: Instant) {}
        fn wants_read(&self) -> bool {
            false
        }
        fn done(&self) -> bool {
            true
        }
        fn deadline(&self) -> Option<Instant> {
            None
        }
        fn on_deadline(&mut self, _now: Instant) {}
        fn idle(&self) -> bool {
            true
        }
        fn on_shutdown(&mut self) {}
        fn on_notify(&mut self, _now: Instant) {}
    }
    use std::io::Read;

    fn tcp_listener() -> listener::Listener {
        listener::bind(
            &Listen::Tcp {
                host: "127.0.0.1".into(),
                port: 0,
            },
            listener::Setup::default(),
        )
        .unwrap()
    }

    fn serve_with(core_main: CoreMain, cores: usize) -> JoinHandle<io::Result<i32>> {
        serve_on(vec![tcp_listener()], core_main, cores, None)
    }

    fn serve_on(
        l: Vec<listener::Listener>,
        core_main: CoreMain,
        cores: usize,
        remote: Option<remote::Remote>,
    ) -> JoinHandle<io::Result<i32>> {
        let control = Arc::new(Control::new(16));
        let grace = Duration::from_secs(1);
        std::thread::spawn(move || {
            serve(
                l,
                vec![None; cores],
                Kind::Portable,
                &Tuning::default(),
                control,
                Lifecycle {
                    graceful: grace,
                    hook: None,
                    readiness: None,
                    secure: false,
                    remote,
                    heartbeat: None,
                },
                core_main,
            )
        })
    }

    fn join_within(t: JoinHandle<io::Result<i32>>, bound: Duration) -> i32 {
        let start = Instant::now();
        while !t.is_finished() {
            assert!(start.elapsed() < bound, "serve did not return in {bound:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
        t.join().unwrap().unwrap()
    }

    // One test, in order: the signal handlers are process-wide.
    #[test]
    fn serve_exits_1_when_a_core_fails_and_0_after_sigterm() {
        let erring: CoreMain = Arc::new(|ctx: CoreContext| {
            if ctx.index == 1 {
                return Err(io::Error::other("boom"));
            }
            run_backend(Kind::Portable, ctx, Unwired)
        });
        assert_eq!(
            join_within(serve_with(erring, 2), Duration::from_secs(5)),
            1
        );

        let panicking: CoreMain =
            Arc::new(|_ctx: CoreContext| panic!("a core panicked on purpose"));
        assert_eq!(
            join_within(serve_with(panicking, 1), Duration::from_secs(5)),
            1
        );

        let l = tcp_listener();
        let listener::Address::Tcp(addr) = l.addr else {
            unreachable!()
        };
        let core_main: CoreMain = Arc::new(|ctx| run_backend(Kind::Portable, ctx, Unwired));
        let t = serve_on(vec![l], core_main.clone(), 2, None);
        // Served (closed at once by the placeholder): the cores run, and the
        // signal handlers were installed before them.
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(c.read(&mut [0; 8]).unwrap(), 0);
        // SAFETY: kill on our own pid with a signal whose handler is installed.
        assert_eq!(unsafe { libc::kill(libc::getpid(), SIGTERM) }, 0);
        assert_eq!(join_within(t, Duration::from_secs(5)), 0);

        // The embedder's stop: a graceful exit, told where it was ready.
        let remote = remote::Remote::new();
        let t = serve_on(vec![tcp_listener()], core_main, 1, Some(remote.clone()));
        let url = remote.wait_ready(Duration::from_secs(5)).expect("ready");
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        remote.request_stop();
        assert_eq!(join_within(t, Duration::from_secs(5)), 0);
        assert_eq!(remote.url(), None, "no longer ready once it ended");
    }
}
