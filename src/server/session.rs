//! An HTTP/1.1 connection as a backend [`Session`]: the sans-IO protocol
//! ([`ServerConn`]) glued to the routes, with the read timeouts and an output
//! queue that keeps pipelined answers (file bodies included) in order.

use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::{Notifier, Output, Peer, Service, Session};
use crate::http::{Event, Framing, Limits, RequestHead, ServerConn};
use crate::reply::{Body, Reply};
use crate::routes::Router;

use super::access_log;

/// Queued output past which a connection stops reading (and parsing pipelined
/// requests) until the client has taken some: a client that pipelines without
/// reading cannot make the server buffer without bound.
const OUTPUT_HIGH_WATER: usize = 1 << 20;

/// What every connection of the server shares.
pub struct Shared {
    pub router: Router,
    pub limits: Limits,
    pub header_read_timeout: Duration,
    pub keep_alive_timeout: Duration,
    pub access_log: bool,
}

/// Opens an [`HttpSession`] per connection; one per core thread.
pub struct HttpService {
    shared: Arc<Shared>,
}

impl HttpService {
    pub fn new(shared: Arc<Shared>) -> Self {
        HttpService { shared }
    }
}

impl Service for HttpService {
    type Session = HttpSession;

    fn open(&mut self, peer: &Peer, notifier: Notifier) -> HttpSession {
        HttpSession {
            conn: ServerConn::new(self.shared.limits),
            // A connection that never sends a head is held to the head's timeout.
            deadline: Some(Instant::now() + self.shared.header_read_timeout),
            head_started: None,
            queue: VecDeque::new(),
            pending: None,
            queued: 0,
            closed: false,
            eof: false,
            shutting: false,
            peer: peer.clone(),
            notifier,
            shared: self.shared.clone(),
        }
    }
}

/// A piece of queued output.
enum Chunk {
    Bytes {
        buf: Vec<u8>,
        pos: usize,
    },
    File {
        file: File,
        offset: u64,
        remaining: u64,
    },
}

pub struct HttpSession {
    conn: ServerConn,
    shared: Arc<Shared>,
    /// When the session gives up waiting for input.
    deadline: Option<Instant>,
    /// When the first byte of the head being read arrived.
    head_started: Option<Instant>,
    queue: VecDeque<Chunk>,
    /// A request whose body is still being read before it is answered.
    pending: Option<RequestHead>,
    /// Bytes queued (file bodies counted too).
    queued: u64,
    /// Closed by a timeout: done regardless of the protocol's state.
    closed: bool,
    eof: bool,
    /// Graceful shutdown began: done as soon as idle.
    shutting: bool,
    peer: Peer,
    /// Wakes this session from an application thread.
    notifier: Notifier,
}

impl HttpSession {
    /// Serve every complete request the protocol has buffered.
    ///
    /// The routes answer from the head alone, but a request with a body is
    /// answered once its body has been read (and dropped): a body that turns
    /// out malformed then gets its 400 rather than a success followed by a
    /// silent close. Under `Expect: 100-continue` the answer goes at once and
    /// the client never sends the body.
    fn pump(&mut self, now: Instant) {
        let mut out = Vec::new();
        while self.queued < OUTPUT_HIGH_WATER as u64 {
            match self.conn.next_event() {
                None => break,
                Some(Event::Head(head)) => {
                    self.head_started = None;
                    if head.expect_continue {
                        self.answer(&head, &mut out);
                    } else {
                        self.pending = Some(head);
                    }
                }
                Some(Event::Data(_)) => {}
                Some(Event::End) => {
                    if let Some(head) = self.pending.take() {
                        self.answer(&head, &mut out);
                    }
                }
                Some(Event::Error(err)) => {
                    self.head_started = None;
                    self.pending = None;
                    self.conn.write_error(&err, &mut out);
                    break;
                }
            }
        }
        self.push_bytes(out);
        self.rearm(now);
    }

    fn answer(&mut self, head: &RequestHead, out: &mut Vec<u8>) {
        let reply = self
            .shared
            .router
            .route(head)
            .unwrap_or_else(|| Reply::text(404, "Not Found"));
        self.respond(head, reply, out);
    }

    /// Write `reply` as the answer to `head`.
    fn respond(&mut self, head: &RequestHead, reply: Reply, out: &mut Vec<u8>) {
        let Reply {
            status,
            headers,
            body,
        } = reply;
        let len = body.len().to_string();
        let mut list: Vec<(&str, &[u8])> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_bytes()))
            .collect();
        let has_length = headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-length"));
        if !has_length && !matches!(status, 100..=199 | 204 | 304) {
            list.push(("Content-Length", len.as_bytes()));
        }
        let framing = self.conn.start_response(status, &list, out);
        let sent = match (framing, body) {
            (Framing::NoBody, _) | (_, Body::Empty) => 0,
            (_, Body::Bytes(bytes)) => {
                self.conn.write_body(&bytes, out);
                bytes.len() as u64
            }
            (_, Body::File { file, offset, len }) => {
                self.push_bytes(std::mem::take(out));
                self.conn.body_sent(len);
                self.queued += len;
                self.queue.push_back(Chunk::File {
                    file,
                    offset,
                    remaining: len,
                });
                len
            }
        };
        self.conn.finish_response(out);
        if self.shared.access_log {
            access_log::record(&self.peer, head, status, sent);
        }
    }

    fn push_bytes(&mut self, bytes: Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        self.queued += bytes.len() as u64;
        if let Some(Chunk::Bytes { buf, .. }) = self.queue.back_mut() {
            buf.extend_from_slice(&bytes);
        } else {
            self.queue.push_back(Chunk::Bytes { buf: bytes, pos: 0 });
        }
    }

    /// Set the read deadline that fits the state: the head's timeout while a
    /// head is arriving, the keep-alive timeout while idle, none otherwise.
    fn rearm(&mut self, now: Instant) {
        if self.closed {
            return;
        }
        self.deadline = if let Some(start) = self.head_started {
            Some(start + self.shared.header_read_timeout)
        } else if self.conn.is_idle() && self.queue.is_empty() {
            Some(now + self.shared.keep_alive_timeout)
        } else {
            None
        };
    }
}

impl Session for HttpSession {
    fn on_read(&mut self, data: &[u8], now: Instant) {
        self.conn.recv(data);
        self.pump(now);
        // After the pump: one read may complete a head and bring part of the next.
        if self.head_started.is_none() && self.conn.has_partial_head() {
            self.head_started = Some(now);
            self.rearm(now);
        }
    }

    fn on_eof(&mut self, now: Instant) {
        self.eof = true;
        self.conn.recv_eof();
        self.pump(now);
    }

    fn output(&mut self) -> Output<'_> {
        match self.queue.front() {
            None => Output::None,
            Some(Chunk::Bytes { buf, pos }) => Output::Bytes(&buf[*pos..]),
            Some(Chunk::File {
                file,
                offset,
                remaining,
            }) => Output::File {
                fd: file.as_raw_fd(),
                offset: *offset,
                len: (*remaining).min(1 << 30) as usize,
            },
        }
    }

    fn on_sent(&mut self, n: usize, now: Instant) {
        self.queued -= n as u64;
        let finished = match self.queue.front_mut() {
            None => false,
            Some(Chunk::Bytes { buf, pos }) => {
                *pos += n;
                *pos >= buf.len()
            }
            Some(Chunk::File {
                offset, remaining, ..
            }) => {
                *offset += n as u64;
                *remaining -= n as u64;
                *remaining == 0
            }
        };
        if finished {
            self.queue.pop_front();
        }
        if self.queue.is_empty() {
            // Pipelined requests held back by the high-water mark, and the keep-alive clock.
            self.pump(now);
        }
    }

    fn wants_read(&self) -> bool {
        !self.closed
            && !self.eof
            && self.queued < OUTPUT_HIGH_WATER as u64
            && self.conn.wants_read()
    }

    fn done(&self) -> bool {
        self.closed || self.conn.must_close() || (self.shutting && self.idle())
    }

    fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    fn on_deadline(&mut self, now: Instant) {
        if self.deadline.is_some_and(|d| d <= now) {
            // A slow head or an idle keep-alive: close without an answer, as
            // clients expect of an idle close, and drop what was queued.
            self.closed = true;
            self.deadline = None;
            self.queue.clear();
            self.queued = 0;
        }
    }

    fn idle(&self) -> bool {
        self.queue.is_empty() && self.conn.is_idle()
    }

    fn on_shutdown(&mut self) {
        self.conn.close_after_response();
        self.shutting = true;
    }

    fn on_notify(&mut self, now: Instant) {
        let _ = &self.notifier;
        self.pump(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A notifier nobody drains (these sessions are driven by hand).
    fn notifier() -> Notifier {
        let key = crate::backend::slab::Key::new(0, 0);
        Notifier::new(crate::backend::share::Board::new(1), 0, key)
    }

    fn service(router: Router) -> HttpService {
        HttpService::new(Arc::new(Shared {
            router,
            limits: Limits::default(),
            header_read_timeout: Duration::from_secs(10),
            keep_alive_timeout: Duration::from_secs(5),
            access_log: false,
        }))
    }

    /// Everything the session wants written, files read in place.
    fn drain(s: &mut HttpSession) -> Vec<u8> {
        let mut all = Vec::new();
        loop {
            let n = match s.output() {
                Output::None => return all,
                Output::Bytes(b) => {
                    all.extend_from_slice(b);
                    b.len()
                }
                Output::File { fd, offset, len } => {
                    let mut buf = vec![0u8; len];
                    // SAFETY: `fd` is the session's open file, `buf` holds `len` bytes.
                    let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), len, offset as i64) };
                    all.extend_from_slice(&buf[..n as usize]);
                    n as usize
                }
            };
            s.on_sent(n, Instant::now());
        }
    }

    #[test]
    fn pipelined_answers_keep_their_order_around_a_file_body() {
        let dir = std::env::temp_dir().join(format!("m0-session-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::File::create(dir.join("a.txt"))
            .unwrap()
            .write_all(b"FILEBODY")
            .unwrap();
        let router =
            Router::new(Some("/healthz".into()), vec![("/s".into(), dir.clone())]).unwrap();
        let mut s = service(router).open(&Peer::Unix, notifier());
        let now = Instant::now();
        s.on_read(
            b"GET /s/a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
            now,
        );
        let out = String::from_utf8(drain(&mut s)).unwrap();
        let file = out.find("FILEBODY").expect("file body sent");
        let second = out.rfind("HTTP/1.1 200").unwrap();
        assert!(
            file < second,
            "the second answer waited for the file body: {out}"
        );
        assert!(!s.done() && s.idle());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_head_that_starts_after_a_complete_one_is_timed() {
        let mut s = service(Router::default()).open(&Peer::Unix, notifier());
        let now = Instant::now();
        s.on_read(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HT", now);
        drain(&mut s);
        assert_eq!(s.deadline(), Some(now + Duration::from_secs(10)));
        s.on_deadline(now + Duration::from_secs(11));
        assert!(s.done());
    }

    #[test]
    fn an_idle_connection_gets_the_keep_alive_deadline() {
        let mut s = service(Router::default()).open(&Peer::Unix, notifier());
        let now = Instant::now();
        s.on_read(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", now);
        assert!(String::from_utf8(drain(&mut s))
            .unwrap()
            .starts_with("HTTP/1.1 404"));
        let later = Instant::now();
        let d = s.deadline().expect("keep-alive deadline");
        assert!(d >= now + Duration::from_secs(5) && d <= later + Duration::from_secs(5));
        s.on_deadline(d - Duration::from_millis(1));
        assert!(!s.done(), "not before the deadline");
        s.on_deadline(d);
        assert!(s.done());
    }

    #[test]
    fn shutdown_closes_idle_sessions_and_lets_a_busy_one_finish() {
        let mut idle = service(Router::default()).open(&Peer::Unix, notifier());
        idle.on_shutdown();
        assert!(idle.done());
        let mut busy = service(Router::default()).open(&Peer::Unix, notifier());
        busy.on_read(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", Instant::now());
        busy.on_shutdown();
        // Done, but the backend closes only once the queued answer is written.
        assert!(String::from_utf8(drain(&mut busy))
            .unwrap()
            .starts_with("HTTP/1.1 404"));
        assert!(busy.done());
        let mut fresh = service(Router::default()).open(&Peer::Unix, notifier());
        fresh.on_read(b"GET / HTTP/1.1\r\nHost: x\r\n", Instant::now());
        fresh.on_shutdown();
        assert!(!fresh.done(), "a request on its way is answered");
        fresh.on_read(b"\r\n", Instant::now());
        assert!(String::from_utf8(drain(&mut fresh))
            .unwrap()
            .contains("onnection: close"));
        assert!(fresh.done());
    }

    #[test]
    fn a_request_with_a_body_is_answered_after_its_body() {
        let router = Router::new(Some("/healthz".into()), vec![]).unwrap();
        let mut s = service(router).open(&Peer::Unix, notifier());
        let now = Instant::now();
        s.on_read(
            b"POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
            now,
        );
        assert!(
            drain(&mut s).is_empty(),
            "no answer before the body is read"
        );
        s.on_read(b"lo\r\nzz\r\n", now);
        let out = String::from_utf8(drain(&mut s)).unwrap();
        assert!(
            out.starts_with("HTTP/1.1 400"),
            "a malformed body gets its 400: {out}"
        );
        assert!(s.done());
    }
}
