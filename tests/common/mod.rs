//! The end-to-end harness: runs the `m0serve` binary and talks to it over raw
//! sockets, with a deadline on every wait so that a broken server fails a test
//! instead of hanging it.
//!
//! - [`Server`] starts the binary (`--backend` from `M0_TEST_BACKEND`, default
//!   `uring`; `--port 0`; `--health-path /healthz`; `--cores 1`), waits for its
//!   `listening on ...` line and its supervisor's `worker(s) ready` line,
//!   captures its output, and kills it on drop.
//! - [`Client`] writes raw bytes and reads whole responses (Content-Length,
//!   chunked, or until close), keeping what follows for the next one, so
//!   pipelined answers are read in order.
//! - [`Bystander`] is another client served normally while a test misbehaves.

// Each test crate uses a different part of the harness.
#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The health path every [`Server`] gets unless the test sets its own.
pub const HEALTH: &str = "/healthz";

/// The default bound on one wait for a response.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// How long a server may take to print its listening line.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// What the supervisor prints once every worker has said READY.
const READY_LINE: &str = "worker(s) ready on ";

/// The backend under test: `M0_TEST_BACKEND` (`uring` or `portable`), default `uring`.
pub fn backend() -> String {
    match std::env::var("M0_TEST_BACKEND") {
        Ok(b) if !b.trim().is_empty() => b.trim().to_string(),
        _ => "uring".to_string(),
    }
}

/// Whether this machine can run `n` core threads on distinct CPUs.
pub fn cpus_at_least(n: usize) -> bool {
    thread::available_parallelism().map_or(1, |p| p.get()) >= n
}

// ---------------------------------------------------------------------------
// Starting the binary
// ---------------------------------------------------------------------------

/// Where a server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Addr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

/// Arguments and environment for one run of the binary.
#[derive(Default)]
pub struct ServerBuilder {
    args: Vec<String>,
    envs: Vec<(String, String)>,
}

impl ServerBuilder {
    pub fn arg(mut self, a: impl Into<String>) -> Self {
        self.args.push(a.into());
        self
    }

    pub fn args<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, k: impl Into<String>, v: impl Into<String>) -> Self {
        self.envs.push((k.into(), v.into()));
        self
    }

    /// Whether the test set `flag` itself, as a flag or as its `M0SERVE_*` variable
    /// (a default would then clash with it: a single-valued flag given twice is an error).
    fn given(&self, flag: &str) -> bool {
        let var = format!(
            "M0SERVE_{}",
            flag.trim_start_matches('-')
                .replace('-', "_")
                .to_uppercase()
        );
        self.args
            .iter()
            .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
            || self.envs.iter().any(|(k, _)| *k == var)
    }

    /// The value the test gave `flag`, if it gave one as `--flag VALUE`.
    fn value_of(&self, flag: &str) -> Option<&str> {
        let i = self.args.iter().position(|a| a == flag)?;
        self.args.get(i + 1).map(String::as_str)
    }

    /// The full command line: the harness's defaults, then the test's arguments.
    fn argv(&self) -> Vec<String> {
        let mut argv = Vec::new();
        if !self.given("--backend") && !self.given("--uring") {
            argv.extend(["--backend".to_string(), backend()]);
        }
        // A --bind may not be mixed with --port.
        if !self.given("--port") && !self.given("--uds") && !self.given("--bind") {
            argv.extend(["--port".to_string(), "0".to_string()]);
        }
        if !self.given("--health-path") {
            argv.extend(["--health-path".to_string(), HEALTH.to_string()]);
        }
        // One core unless the test asks for more: a misbehaving client then
        // shares its core with every other client, the strictest case.
        if !self.given("--cores") {
            argv.extend(["--cores".to_string(), "1".to_string()]);
        }
        argv.extend(self.args.iter().cloned());
        argv
    }

    /// The backend the listening line must name, when the command line fixes one.
    fn expected_backend(&self) -> Option<String> {
        if self.given("--uring") {
            return Some("uring".into());
        }
        if !self.given("--backend") {
            return Some(backend());
        }
        match self.value_of("--backend") {
            Some(b @ ("uring" | "portable")) => Some(b.to_string()),
            _ => None,
        }
    }

    fn command(&self, argv: &[String]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_m0serve"));
        cmd.args(argv);
        // The test's own environment must not leak into the server's configuration.
        for (k, _) in std::env::vars() {
            if k.starts_with("M0SERVE_") || k.starts_with("M0_") || k == "RUST_LOG" {
                cmd.env_remove(k);
            }
        }
        cmd.env("NO_COLOR", "1").env("RUST_BACKTRACE", "1");
        cmd.envs(self.envs.iter().map(|(k, v)| (k, v)));
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Start the server and wait for its listening line.
    pub fn start(self) -> Server {
        let argv = self.argv();
        let mut child = self.command(&argv).spawn().expect("spawn m0serve");
        let log = Log::capture(&mut child);
        let mut server = Server {
            child,
            addr: Addr::Unix(PathBuf::new()),
            log,
            argv,
        };
        let line = server
            .log
            .wait_for(|l| l.contains("listening on "), START_TIMEOUT)
            .unwrap_or_else(|| {
                let status = server.child.try_wait().ok().flatten();
                panic!(
                    "m0serve {:?} printed no listening line within {START_TIMEOUT:?} (exit: {status:?})\n{}",
                    server.argv,
                    server.log.dump()
                )
            });
        server.addr =
            parse_listening(&line).unwrap_or_else(|| panic!("unreadable listening line: {line:?}"));
        if let Some(kind) = self.expected_backend() {
            assert!(
                line.contains(&format!("({kind} backend")),
                "expected the {kind} backend, the server says: {line:?}"
            );
        }
        // A worker prints its listening line before the supervisor has its
        // READY: wait for the supervisor's own line, printed once the
        // readiness flag is set, so no test races the boot.
        if server
            .log
            .wait_for(|l| l.contains(READY_LINE), START_TIMEOUT)
            .is_none()
        {
            panic!(
                "m0serve {:?} listened but its supervisor never said {READY_LINE:?}\n{}",
                server.argv,
                server.log.dump()
            );
        }
        server
    }

    /// Run the binary to its exit (a command that should not serve), bounded by `limit`.
    pub fn run_to_exit(self, limit: Duration) -> Finished {
        let argv = self.argv();
        let mut child = self.command(&argv).spawn().expect("spawn m0serve");
        let log = Log::capture(&mut child);
        let status = wait_child(&mut child, limit);
        if status.is_none() {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "m0serve {argv:?} did not exit within {limit:?}\n{}",
                log.dump()
            );
        }
        log.wait_eof(Duration::from_secs(2));
        let l = log.inner.lock().unwrap();
        Finished {
            status: status.unwrap(),
            stdout: l.stdout.join("\n"),
            stderr: l.stderr.join("\n"),
        }
    }
}

/// A run that ended.
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// The stderr lines that say something.
    pub fn stderr_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect()
    }
}

fn wait_child(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait m0serve") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// `... listening on http://127.0.0.1:PORT (...)` or `... listening on unix:PATH (...)`.
fn parse_listening(line: &str) -> Option<Addr> {
    let rest = &line[line.find("listening on ")? + "listening on ".len()..];
    parse_url(rest.split_whitespace().next()?)
}

/// A listener's address as the log writes it (`http://HOST:PORT`, `unix:PATH`).
pub fn parse_url(what: &str) -> Option<Addr> {
    if let Some(hostport) = what.strip_prefix("http://") {
        return hostport.trim_end_matches('/').parse().ok().map(Addr::Tcp);
    }
    what.strip_prefix("unix:")
        .map(|p| Addr::Unix(PathBuf::from(p)))
}

// ---------------------------------------------------------------------------
// The server's output
// ---------------------------------------------------------------------------

#[derive(Default)]
struct Lines {
    stdout: Vec<String>,
    stderr: Vec<String>,
    /// How many of the two streams reached end of file.
    eof: usize,
}

/// Both output streams of the child, line by line, ANSI colours removed.
#[derive(Clone)]
struct Log {
    inner: Arc<Mutex<Lines>>,
    changed: Arc<Condvar>,
}

impl Log {
    fn capture(child: &mut Child) -> Log {
        let log = Log {
            inner: Default::default(),
            changed: Default::default(),
        };
        let out = child.stdout.take().expect("piped stdout");
        let err = child.stderr.take().expect("piped stderr");
        log.pump(out, false);
        log.pump(err, true);
        log
    }

    fn pump(&self, stream: impl Read + Send + 'static, is_err: bool) {
        let log = self.clone();
        thread::spawn(move || {
            let mut reader = io::BufReader::new(stream);
            let mut line = Vec::new();
            loop {
                line.clear();
                let n = io::BufRead::read_until(&mut reader, b'\n', &mut line).unwrap_or(0);
                let mut l = log.inner.lock().unwrap();
                if n == 0 {
                    l.eof += 1;
                    log.changed.notify_all();
                    return;
                }
                let text = strip_ansi(&String::from_utf8_lossy(&line));
                let text = text.trim_end_matches(['\r', '\n']).to_string();
                if is_err {
                    l.stderr.push(text);
                } else {
                    l.stdout.push(text);
                }
                log.changed.notify_all();
            }
        });
    }

    /// The first line (either stream) matching `pred`, waiting up to `limit`.
    fn wait_for(&self, pred: impl Fn(&str) -> bool, limit: Duration) -> Option<String> {
        let deadline = Instant::now() + limit;
        let mut l = self.inner.lock().unwrap();
        loop {
            if let Some(line) = l.stderr.iter().chain(l.stdout.iter()).find(|s| pred(s)) {
                return Some(line.clone());
            }
            let now = Instant::now();
            if now >= deadline || l.eof == 2 {
                return None;
            }
            l = self.changed.wait_timeout(l, deadline - now).unwrap().0;
        }
    }

    /// Wait until `pred` holds for at least `n` lines; returns those seen by then.
    fn wait_count(&self, pred: impl Fn(&str) -> bool, n: usize, limit: Duration) -> Vec<String> {
        let deadline = Instant::now() + limit;
        let mut l = self.inner.lock().unwrap();
        loop {
            let found: Vec<String> = l
                .stderr
                .iter()
                .chain(l.stdout.iter())
                .filter(|s| pred(s))
                .cloned()
                .collect();
            let now = Instant::now();
            if found.len() >= n || now >= deadline || l.eof == 2 {
                return found;
            }
            l = self.changed.wait_timeout(l, deadline - now).unwrap().0;
        }
    }

    fn wait_eof(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut l = self.inner.lock().unwrap();
        while l.eof < 2 {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            l = self.changed.wait_timeout(l, deadline - now).unwrap().0;
        }
    }

    fn lines(&self) -> Vec<String> {
        let l = self.inner.lock().unwrap();
        l.stderr.iter().chain(l.stdout.iter()).cloned().collect()
    }

    fn dump(&self) -> String {
        let l = self.inner.lock().unwrap();
        format!(
            "--- stderr ---\n{}\n--- stdout ---\n{}",
            l.stderr.join("\n"),
            l.stdout.join("\n")
        )
    }
}

/// Remove ANSI escape sequences (`ESC [ ... letter`), in case the logger colours.
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

// ---------------------------------------------------------------------------
// A running server
// ---------------------------------------------------------------------------

/// A running `m0serve`, killed on drop (its output is printed if the test failed).
pub struct Server {
    child: Child,
    addr: Addr,
    log: Log,
    argv: Vec<String>,
}

impl Server {
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// Start with the harness's defaults plus `args`.
    pub fn start(args: &[&str]) -> Server {
        Server::builder().args(args.iter().copied()).start()
    }

    pub fn addr(&self) -> &Addr {
        &self.addr
    }

    pub fn port(&self) -> u16 {
        match &self.addr {
            Addr::Tcp(a) => a.port(),
            Addr::Unix(p) => panic!("a Unix socket server ({}) has no port", p.display()),
        }
    }

    /// The server's (the supervisor's) pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn connect(&self) -> Client {
        Client::connect(&self.addr)
    }

    /// GET `path` on a fresh connection.
    pub fn get(&self, path: &str) -> Response {
        self.connect().request("GET", path, &[])
    }

    /// Another client is served normally: a fresh connection gets 200 on the health path.
    pub fn assert_serves_another_client(&self) {
        let mut c = Client::connect(&self.addr);
        let r = c
            .try_request("GET", HEALTH, &[], Duration::from_secs(3))
            .unwrap_or_else(|e| panic!("another client was not served: {e}\n{}", self.log.dump()));
        assert_eq!(r.status, 200, "another client got {} on {HEALTH}", r.status);
    }

    /// Send a signal (`libc::SIGTERM`, `libc::SIGINT`, ...).
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid, which has not been reaped
        // (reaping happens only in `wait_exit` and `drop`, which own `self`'s child).
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
        assert_eq!(
            rc,
            0,
            "kill({}, {sig}): {}",
            self.child.id(),
            io::Error::last_os_error()
        );
    }

    /// Wait up to `limit` for the process to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        wait_child(&mut self.child, limit)
    }

    /// Every output line so far (stderr, then stdout), ANSI colours removed.
    pub fn lines(&self) -> Vec<String> {
        self.log.lines()
    }

    /// The first output line matching `pred`, waiting up to `limit`.
    pub fn wait_for_line(&self, pred: impl Fn(&str) -> bool, limit: Duration) -> Option<String> {
        self.log.wait_for(pred, limit)
    }

    /// Wait until at least `n` lines match `pred` (bounded); returns the matches.
    pub fn wait_for_lines(
        &self,
        pred: impl Fn(&str) -> bool,
        n: usize,
        limit: Duration,
    ) -> Vec<String> {
        self.log.wait_count(pred, n, limit)
    }

    /// Everything the server printed, for failure messages.
    pub fn dump(&self) -> String {
        self.log.dump()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if thread::panicking() {
            eprintln!("m0serve {:?}\n{}", self.argv, self.log.dump());
        }
    }
}

// ---------------------------------------------------------------------------
// A raw client
// ---------------------------------------------------------------------------

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
        }
    }
    fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(t),
            Stream::Unix(s) => s.set_write_timeout(t),
        }
    }
    fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Unix(s) => s.shutdown(how),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What one read with a deadline found.
enum Fill {
    Data,
    Eof,
}

/// A parsed response.
#[derive(Debug, Clone)]
pub struct Response {
    /// `HTTP/1.1` or `HTTP/1.0`.
    pub version: String,
    pub status: u16,
    pub reason: String,
    /// Names as sent, values trimmed, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Trailer fields of a chunked body.
    pub trailers: Vec<(String, String)>,
    /// The body was read until the connection closed (no length was given).
    pub until_close: bool,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every value of header `name`.
    pub fn headers_named(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// Whether the `Connection` header lists `token`.
    pub fn connection_has(&self, token: &str) -> bool {
        self.headers_named("connection")
            .iter()
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A connection that writes raw bytes and reads whole responses.
pub struct Client {
    stream: Stream,
    /// Bytes read but not yet consumed by a response (pipelined answers).
    buf: Vec<u8>,
}

fn io_err(kind: io::ErrorKind, msg: impl Into<String>) -> io::Error {
    io::Error::new(kind, msg.into())
}

impl Client {
    pub fn connect(addr: &Addr) -> Client {
        Client::try_connect(addr).unwrap_or_else(|e| panic!("connect to {addr:?}: {e}"))
    }

    pub fn try_connect(addr: &Addr) -> io::Result<Client> {
        let stream = match addr {
            Addr::Tcp(a) => {
                let s = TcpStream::connect_timeout(a, TIMEOUT)?;
                s.set_nodelay(true)?;
                Stream::Tcp(s)
            }
            Addr::Unix(p) => Stream::Unix(UnixStream::connect(p)?),
        };
        stream.set_write_timeout(Some(TIMEOUT))?;
        Ok(Client {
            stream,
            buf: Vec::new(),
        })
    }

    /// A TCP connection whose receive buffer is `bytes` small (set before the
    /// handshake, so the window stays small): a reader that stops reading then
    /// really stalls the server's writes.
    pub fn connect_small_window(addr: &Addr, bytes: usize) -> Client {
        let Addr::Tcp(a) = addr else {
            panic!("a small window needs TCP")
        };
        let sock = socket2::Socket::new(
            socket2::Domain::for_address(*a),
            socket2::Type::STREAM,
            None,
        )
        .unwrap();
        sock.set_recv_buffer_size(bytes).unwrap();
        sock.connect_timeout(&(*a).into(), TIMEOUT).unwrap();
        let s: TcpStream = sock.into();
        s.set_nodelay(true).unwrap();
        s.set_write_timeout(Some(TIMEOUT)).unwrap();
        Client {
            stream: Stream::Tcp(s),
            buf: Vec::new(),
        }
    }

    /// Write all of `bytes` (panics on error).
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream
            .write_all(bytes)
            .unwrap_or_else(|e| panic!("send: {e}"));
    }

    /// Write `bytes`, reporting errors: a server that answers and closes early
    /// (bad input) may refuse the rest of what we send.
    pub fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Close our sending side (the server reads end of file).
    pub fn shutdown_write(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }

    /// Send a simple request (`Host` added) and read its response.
    pub fn request(&mut self, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
        self.try_request(method, path, headers, TIMEOUT)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    pub fn try_request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        limit: Duration,
    ) -> io::Result<Response> {
        self.try_send(&request_bytes(method, path, headers))?;
        self.try_read_response(limit, method == "HEAD")
    }

    /// Read one response (panics on timeout or a malformed answer).
    pub fn read_response(&mut self) -> Response {
        self.try_read_response(TIMEOUT, false)
            .unwrap_or_else(|e| panic!("reading a response: {e}"))
    }

    /// Read the response to a HEAD request: its framing headers describe no body.
    pub fn read_head_response(&mut self) -> Response {
        self.try_read_response(TIMEOUT, true)
            .unwrap_or_else(|e| panic!("reading a HEAD response: {e}"))
    }

    /// Read one response within `limit`. `to_head`: the request was HEAD.
    /// Interim (1xx) responses are returned as they come.
    pub fn try_read_response(&mut self, limit: Duration, to_head: bool) -> io::Result<Response> {
        let deadline = Instant::now() + limit;
        let head_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i + 4;
            }
            if let Fill::Eof = self.fill(deadline)? {
                return Err(io_err(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "closed before a complete head; got {:?}",
                        String::from_utf8_lossy(&self.buf)
                    ),
                ));
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end - 4]).into_owned();
        self.buf.drain(..head_end);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default().to_string();
        let status = parts.next().and_then(|s| s.parse::<u16>().ok());
        let (true, Some(status)) = (version.starts_with("HTTP/1."), status) else {
            return Err(io_err(
                io::ErrorKind::InvalidData,
                format!("bad status line {status_line:?}"),
            ));
        };
        let reason = parts.next().unwrap_or_default().to_string();
        let headers = parse_fields(lines)?;
        let mut resp = Response {
            version,
            status,
            reason,
            headers,
            body: Vec::new(),
            trailers: Vec::new(),
            until_close: false,
        };

        if to_head || (100..200).contains(&status) || status == 204 || status == 304 {
            return Ok(resp);
        }
        let chunked = resp.headers_named("transfer-encoding").iter().any(|v| {
            v.split(',')
                .next_back()
                .is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"))
        });
        if chunked {
            self.read_chunked(&mut resp, deadline)?;
        } else if let Some(len) = resp.header("content-length") {
            let len: usize = len.parse().map_err(|_| {
                io_err(
                    io::ErrorKind::InvalidData,
                    format!("bad Content-Length {len:?}"),
                )
            })?;
            resp.body = self.take_exact(len, deadline)?;
        } else {
            while let Fill::Data = self.fill(deadline)? {}
            resp.body = std::mem::take(&mut self.buf);
            resp.until_close = true;
        }
        Ok(resp)
    }

    fn read_chunked(&mut self, resp: &mut Response, deadline: Instant) -> io::Result<()> {
        loop {
            let line = self.take_line(deadline)?;
            let size = line.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size, 16).map_err(|_| {
                io_err(
                    io::ErrorKind::InvalidData,
                    format!("bad chunk size line {line:?}"),
                )
            })?;
            if size == 0 {
                let mut trailer = Vec::new();
                loop {
                    let l = self.take_line(deadline)?;
                    if l.is_empty() {
                        break;
                    }
                    trailer.push(l);
                }
                resp.trailers = parse_fields(trailer.iter().map(String::as_str))?;
                return Ok(());
            }
            let data = self.take_exact(size, deadline)?;
            resp.body.extend_from_slice(&data);
            if self.take_exact(2, deadline)? != b"\r\n" {
                return Err(io_err(
                    io::ErrorKind::InvalidData,
                    "chunk data not followed by CRLF",
                ));
            }
        }
    }

    /// One CRLF-terminated line, without its CRLF.
    fn take_line(&mut self, deadline: Instant) -> io::Result<String> {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..i]).into_owned();
                self.buf.drain(..i + 2);
                return Ok(line);
            }
            if let Fill::Eof = self.fill(deadline)? {
                return Err(io_err(
                    io::ErrorKind::UnexpectedEof,
                    "closed inside a chunked body",
                ));
            }
        }
    }

    /// Exactly `n` bytes.
    pub fn take_exact(&mut self, n: usize, deadline: Instant) -> io::Result<Vec<u8>> {
        while self.buf.len() < n {
            if let Fill::Eof = self.fill(deadline)? {
                return Err(io_err(
                    io::ErrorKind::UnexpectedEof,
                    format!("closed after {} of {n} body bytes", self.buf.len()),
                ));
            }
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// Read at least `n` raw bytes into the buffer (they stay there for the
    /// response reader); for starting a download and then pausing it.
    pub fn buffer_at_least(&mut self, n: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.buf.len() < n {
            match self.fill(deadline) {
                Ok(Fill::Data) => {}
                Ok(Fill::Eof) => panic!("closed after {} bytes, wanted {n}", self.buf.len()),
                Err(e) => panic!("after {} bytes, wanted {n}: {e}", self.buf.len()),
            }
        }
    }

    /// One read into the buffer, bounded by `deadline`.
    fn fill(&mut self, deadline: Instant) -> io::Result<Fill> {
        let now = Instant::now();
        if now >= deadline {
            return Err(io_err(io::ErrorKind::TimedOut, self.timeout_message()));
        }
        self.stream.set_read_timeout(Some(deadline - now))?;
        let mut chunk = [0u8; 64 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => Ok(Fill::Eof),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(Fill::Data)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Err(io_err(io::ErrorKind::TimedOut, self.timeout_message()))
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(Fill::Data),
            Err(e) => Err(e),
        }
    }

    fn timeout_message(&self) -> String {
        format!(
            "timed out; unconsumed bytes: {:?}",
            String::from_utf8_lossy(&self.buf)
        )
    }

    /// Wait up to `limit` for the server to close the connection. Ok when it did
    /// (end of file or a reset) with nothing more sent; Err says what came instead.
    pub fn wait_closed(&mut self, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            if !self.buf.is_empty() {
                return Err(format!(
                    "the server sent more: {:?}",
                    String::from_utf8_lossy(&self.buf)
                ));
            }
            match self.fill(deadline) {
                Ok(Fill::Eof) => return Ok(()),
                Ok(Fill::Data) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                    return Err(format!("still open after {limit:?}"));
                }
                Err(e) => return Err(format!("read error: {e}")),
            }
        }
    }

    /// The server closes this connection within `limit` and sends nothing more.
    pub fn assert_closed(&mut self, limit: Duration) {
        if let Err(e) = self.wait_closed(limit) {
            panic!("expected the server to close the connection: {e}");
        }
    }

    /// Nothing arrives for `quiet` and the connection stays open.
    pub fn assert_quiet(&mut self, quiet: Duration) {
        let deadline = Instant::now() + quiet;
        match self.fill(deadline) {
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {}
            Ok(Fill::Eof) => panic!("the server closed the connection"),
            Ok(Fill::Data) => panic!("unexpected bytes: {:?}", String::from_utf8_lossy(&self.buf)),
            Err(e) => panic!("read error: {e}"),
        }
    }
}

/// `METHOD path HTTP/1.1` with a Host header, the given headers, and no body.
pub fn request_bytes(method: &str, path: &str, headers: &[(&str, &str)]) -> Vec<u8> {
    let mut r = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str("\r\n");
    r.into_bytes()
}

fn parse_fields<'a>(lines: impl Iterator<Item = &'a str>) -> io::Result<Vec<(String, String)>> {
    lines
        .map(|l| {
            let (k, v) = l.split_once(':').ok_or_else(|| {
                io_err(io::ErrorKind::InvalidData, format!("bad header line {l:?}"))
            })?;
            Ok((k.to_string(), v.trim().to_string()))
        })
        .collect()
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

// ---------------------------------------------------------------------------
// Another client, served meanwhile
// ---------------------------------------------------------------------------

/// A keep-alive client on its own thread, asking for the health path every
/// 20 ms, each answer due within 2 s: proof that the server keeps serving
/// others while a test misbehaves on another connection.
pub struct Bystander {
    served: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Result<(), String>>>,
}

impl Bystander {
    /// Connect and get one answer before returning, so the bystander is
    /// established before the test misbehaves.
    pub fn start(server: &Server) -> Bystander {
        let mut client = server.connect();
        let first = client
            .try_request("GET", HEALTH, &[], TIMEOUT)
            .unwrap_or_else(|e| panic!("the bystander's first request: {e}"));
        assert_eq!(first.status, 200, "the bystander's first request");
        let served = Arc::new(AtomicUsize::new(1));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (served.clone(), stop.clone());
        let handle = thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                let r = client
                    .try_request("GET", HEALTH, &[], Duration::from_secs(2))
                    .map_err(|e| {
                        format!(
                            "the bystander's request {}: {e}",
                            s.load(Ordering::SeqCst) + 1
                        )
                    })?;
                if r.status != 200 {
                    return Err(format!("the bystander got {}", r.status));
                }
                s.fetch_add(1, Ordering::SeqCst);
                thread::sleep(Duration::from_millis(20));
            }
            Ok(())
        });
        Bystander {
            served,
            stop,
            handle: Some(handle),
        }
    }

    /// Wait until the bystander is answered `n` more times (within 3 s): it is
    /// being served now, not only before.
    pub fn assert_progress(&mut self, n: usize) {
        let from = self.served.load(Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(3);
        while self.served.load(Ordering::SeqCst) < from + n {
            let ended = self.handle.as_ref().is_some_and(|h| h.is_finished());
            if ended || Instant::now() >= deadline {
                self.stop.store(true, Ordering::SeqCst);
                let outcome = if ended {
                    self.handle
                        .take()
                        .unwrap()
                        .join()
                        .expect("bystander thread")
                } else {
                    Ok(())
                };
                panic!(
                    "the bystander was not served meanwhile ({} answers, wanted {n} more): {outcome:?}",
                    self.served.load(Ordering::SeqCst) - from
                );
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stop; panics if any of its requests failed. Returns how many were answered.
    pub fn finish(mut self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        let outcome = self
            .handle
            .take()
            .unwrap()
            .join()
            .expect("bystander thread");
        if let Err(e) = outcome {
            panic!("{e}");
        }
        self.served.load(Ordering::SeqCst)
    }
}

impl Drop for Bystander {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------------------
// Scratch directories
// ---------------------------------------------------------------------------

/// A directory under the system's temporary directory, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let path = std::env::temp_dir().join(format!(
            "m0serve-test-{tag}-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Write `contents` at `rel` (parents created); returns the full path.
    pub fn write(&self, rel: &str, contents: &[u8]) -> PathBuf {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, contents).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `len` bytes of a pattern that is not periodic in any small power of two,
/// so that a misplaced range or a skipped chunk shows.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 7 + i / 251) % 253) as u8).collect()
}
