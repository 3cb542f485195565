//! TLS as a backend [`Session`] around another session: ciphertext in from
//! the backend, plaintext to the inner (HTTP) session, and back.
//!
//! rustls is driven sans-IO: [`rustls::ServerConnection::read_tls`] is fed
//! from a buffer the backend filled, and what it has to send is written into
//! a buffer the backend drains through [`Session::output`]. Nothing blocks:
//! a handshake is a few messages and some CPU on the core thread.
//!
//! Flow control mirrors the plain path. The inner session's
//! [`Session::wants_read`] decides whether decrypted input is handed on; while
//! it says no, ciphertext stays here (bounded by [`HELD_INPUT`], past which
//! this session stops reading too, and the rest waits in the kernel). Output
//! is taken from the inner session one chunk at a time, only when the
//! previous chunk's ciphertext is all sent, so a client that does not read
//! holds at most one chunk here and the inner session's send clock runs as
//! it would without TLS.
//!
//! Before the handshake: a PROXY protocol preamble the inner session awaits
//! is handed to it as it came (its own parser decides what it says); a
//! malformed one closes the connection unanswered. Then a first byte that
//! cannot begin a TLS record (plain HTTP sent to the TLS port) gets a
//! plain-text 400 and a close, as nginx answers it; a handshake not finished
//! within the header read timeout (counted from the connection's start,
//! preamble included) is closed; a failed one is closed after its alert.

use std::io::{self, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::ServerConnection;

use super::info::TlsInfo;
use super::kernel;
use super::tcp_only::Either;
use super::Secured;
use crate::backend::ktls::{Ciphers, Keys};
use crate::backend::sendfile::read_at;
use crate::backend::{Linger, Notifier, Output, Peer, Service, Session};
use crate::http::proxy_protocol;

/// Plaintext taken from the inner session per encryption pass.
const CHUNK: usize = 64 * 1024;

/// Plaintext handed to the inner session per read: a record's worth.
const RECORD: usize = 16 * 1024;

/// Ciphertext held unprocessed while the inner session reads nothing, past
/// which this session stops reading too.
const HELD_INPUT: usize = 64 * 1024;

/// The record type of a handshake message (RFC 8446 §5.1): the first byte
/// of every ClientHello.
const HANDSHAKE_RECORD: u8 = 0x16;

/// Where the bytes read so far end in the stream of records. rustls is fed
/// whatever comes; the kernel may take the connection's reads over only
/// where a record ends, or it would begin with the middle of one.
#[derive(Default)]
struct RecordEdge {
    /// The header (type, version, length) of the next record, as far as read.
    header: [u8; 5],
    have: usize,
    /// Bytes of the current record's body still to come.
    left: usize,
}

impl RecordEdge {
    fn advance(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.left > 0 {
                let n = self.left.min(data.len());
                self.left -= n;
                data = &data[n..];
                continue;
            }
            let n = (self.header.len() - self.have).min(data.len());
            self.header[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if self.have == self.header.len() {
                self.left = usize::from(u16::from_be_bytes([self.header[3], self.header[4]]));
                self.have = 0;
            }
        }
    }

    fn at_edge(&self) -> bool {
        self.have == 0 && self.left == 0
    }
}

/// What a plain-HTTP client on the TLS port is told: a closing 400, its head
/// written as every other (with the `Date` a 4xx must carry, RFC 9110
/// §6.6.1), without our `Server` field (this layer does not hold the
/// server's defaults).
fn write_plain_answer(out: &mut Vec<u8>) {
    use crate::http::response::{write_head, RequestSide};
    const TEXT: &[u8] = b"The plain HTTP request was sent to HTTPS port.\r\n";
    let req = RequestSide {
        version: crate::http::Version::Http11,
        head_request: false,
        keep_alive: false,
    };
    let length = TEXT.len().to_string();
    let fields: [(&str, &[u8]); 2] = [
        ("Content-Type", b"text/plain; charset=utf-8"),
        ("Content-Length", length.as_bytes()),
    ];
    let plain = crate::http::Defaults::new(false, Vec::new());
    write_head(400, &fields, req, &plain, out);
    out.extend_from_slice(TEXT);
}

/// What every TLS connection of a server shares.
pub struct TlsShared {
    pub settings: super::config::Settings,
    /// How long a client has to finish its handshake.
    pub handshake_timeout: Duration,
    /// How long ciphertext may wait for a client that takes none of it.
    pub send_timeout: Duration,
    /// The ciphers whose records the kernel takes over after the handshake
    /// (`--ssl-ktls`, [`super::kernel`]); None: rustls keeps them all.
    pub kernel: Option<Ciphers>,
}

/// Wraps every session `inner` opens for a TCP peer in TLS.
pub struct TlsService<S> {
    inner: S,
    shared: Arc<TlsShared>,
}

impl<S> TlsService<S> {
    pub fn new(inner: S, shared: Arc<TlsShared>) -> Self {
        TlsService { inner, shared }
    }
}

impl<S> Service for TlsService<S>
where
    S: Service,
    S::Session: Secured,
{
    type Session = Either<S::Session>;

    /// TLS for a TCP peer; a Unix socket's is served plain ([`super::tcp_only`]).
    fn open(&mut self, peer: &Peer, listener: usize, notifier: Notifier) -> Self::Session {
        let inner = self.inner.open(peer, listener, notifier);
        match peer {
            Peer::Tcp(_) => {
                Either::Tls(TlsSession::new(inner, self.shared.clone(), Instant::now()))
            }
            Peer::Unix => Either::Plain(inner),
        }
    }
}

/// Where the connection stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Nothing read yet: the first byte tells TLS from plain HTTP.
    Fresh,
    Handshaking,
    /// Application data flows.
    Open,
    /// Failed (a bad handshake, plain HTTP, a timeout): close once the
    /// output (an alert, a 400) is sent.
    Failed,
}

pub struct TlsSession<S> {
    tls: ServerConnection,
    inner: S,
    shared: Arc<TlsShared>,
    phase: Phase,
    /// The handshake must be over by then.
    handshake_deadline: Instant,
    /// Ciphertext received and not yet taken by rustls.
    incoming: Vec<u8>,
    /// Ciphertext to send, and how much of it is sent.
    outgoing: Vec<u8>,
    sent: usize,
    /// The peer closed its side; the inner session is told once it has
    /// taken everything before that.
    eof: bool,
    eof_told: bool,
    /// close_notify is queued (the inner session is done).
    closing: bool,
    /// Plain HTTP came and was answered 400 in plain text.
    answered_plain: bool,
    /// `abort` dropped `outgoing`: a write in flight is cut too.
    dropped: bool,
    /// Since when `outgoing` has waited for the client to take any of it.
    stalled_since: Option<Instant>,
    /// Scratch for plaintext on its way in or out.
    scratch: Vec<u8>,
    /// The kernel is to take over once the handshake's records are all
    /// sent and read (cleared when the negotiated cipher is not its).
    to_kernel: bool,
    /// Kept while `to_kernel`.
    edge: RecordEdge,
}

impl<S: Session + Secured> TlsSession<S> {
    pub fn new(inner: S, shared: Arc<TlsShared>, now: Instant) -> Self {
        let to_kernel = shared.kernel.is_some();
        let mut tls = ServerConnection::new(shared.settings.config.clone())
            .expect("a server configuration rustls built accepts connections");
        // What rustls buffers to send before `writer()` takes no more.
        tls.set_buffer_limit(Some(2 * CHUNK));
        TlsSession {
            tls,
            inner,
            handshake_deadline: now + shared.handshake_timeout,
            shared,
            phase: Phase::Fresh,
            incoming: Vec::new(),
            outgoing: Vec::new(),
            sent: 0,
            eof: false,
            eof_told: false,
            closing: false,
            answered_plain: false,
            dropped: false,
            stalled_since: None,
            scratch: Vec::new(),
            to_kernel,
            edge: RecordEdge::default(),
        }
    }

    /// The inner session (tests look at it).
    #[cfg(test)]
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Fail the connection: what rustls has to say (an alert) is sent, then
    /// it closes.
    fn fail(&mut self, why: &str) {
        tracing::debug!("TLS connection closed: {why}");
        self.phase = Phase::Failed;
        self.incoming = Vec::new();
        self.flush_tls();
    }

    /// Close at once, dropping what was to be sent (a client that takes
    /// nothing, a timeout).
    fn abort(&mut self, why: &str) {
        tracing::debug!("TLS connection closed: {why}");
        self.dropped = true;
        self.phase = Phase::Failed;
        self.incoming = Vec::new();
        self.outgoing = Vec::new();
        self.sent = 0;
        self.stalled_since = None;
    }

    /// Move what rustls has to send into `outgoing`.
    fn flush_tls(&mut self) {
        while self.tls.wants_write() {
            if self.tls.write_tls(&mut self.outgoing).is_err() {
                break;
            }
        }
    }

    /// Feed held ciphertext to rustls and decrypted plaintext to the inner
    /// session, as far as the inner session takes input.
    fn pump_in(&mut self, now: Instant) {
        loop {
            if matches!(self.phase, Phase::Failed) {
                return;
            }
            if self.phase == Phase::Open && !self.deliver(now) {
                return; // the inner session holds its input back
            }
            if self.incoming.is_empty() || !self.tls.wants_read() {
                break;
            }
            let mut rest: &[u8] = &self.incoming;
            let taken = match self.tls.read_tls(&mut rest) {
                Ok(n) => n,
                Err(e) => return self.fail(&format!("reading records: {e}")),
            };
            self.incoming.drain(..taken);
            if let Err(e) = self.tls.process_new_packets() {
                return self.fail(&format!("TLS error: {e}"));
            }
            if self.phase == Phase::Handshaking && !self.tls.is_handshaking() {
                self.established();
            }
            if taken == 0 {
                break;
            }
        }
        self.flush_tls();
        if self.eof && self.incoming.is_empty() && !self.eof_told && self.phase == Phase::Open {
            // Everything before the close was taken (or rustls holds it
            // for a read the inner session does not want yet).
            if self.deliver(now) {
                self.eof_told = true;
                self.inner.on_eof(now);
            }
        } else if self.eof && self.phase != Phase::Open && self.phase != Phase::Failed {
            self.fail("the client closed during the handshake");
        }
    }

    /// Hand the inner session the plaintext rustls holds, while it wants
    /// input; true when rustls holds none any more.
    fn deliver(&mut self, now: Instant) -> bool {
        loop {
            if !self.inner.wants_read() {
                return false;
            }
            grow(&mut self.scratch, RECORD);
            match self.tls.reader().read(&mut self.scratch[..RECORD]) {
                Ok(0) => {
                    // close_notify: the client's end of stream.
                    self.eof = true;
                    return true;
                }
                Ok(n) => {
                    let data = std::mem::take(&mut self.scratch);
                    self.inner.on_read(&data[..n], now);
                    self.scratch = data;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(_) => return true, // an unclean close: `on_eof` tells it
            }
        }
    }

    /// The handshake just finished: tell the inner session what it agreed.
    fn established(&mut self) {
        self.phase = Phase::Open;
        let info = TlsInfo::of(&self.tls, &self.shared.settings.server_cert_pem);
        self.inner.secured(Arc::new(info));
        let cipher = self
            .tls
            .negotiated_cipher_suite()
            .and_then(|s| kernel::cipher_of(s.suite()));
        self.to_kernel &= matches!((self.shared.kernel, cipher), (Some(k), Some(c)) if k.has(c));
    }

    /// Whether the kernel may take the connection over now: the handshake
    /// is over, every record rustls made is sent, the bytes read end a
    /// record and rustls took them all, and the inner session has taken all
    /// the plaintext rustls decrypted.
    pub(super) fn kernel_ready(&mut self) -> bool {
        self.to_kernel
            && self.phase == Phase::Open
            && !self.closing
            && !self.eof
            && self.incoming.is_empty()
            && self.edge.at_edge()
            && self.sent == self.outgoing.len()
            && !self.tls.wants_write()
            && self
                .tls
                .process_new_packets()
                .is_ok_and(|io| io.plaintext_bytes_to_read() == 0 && !io.peer_has_closed())
    }

    /// The inner session, to be served plain over a socket the kernel
    /// encrypts, and the keys the kernel needs for it; None when rustls
    /// would not give them up (the connection must then close).
    pub(super) fn into_kernel(self) -> (S, Option<Keys>) {
        let version = self.tls.protocol_version();
        let suite = self.tls.negotiated_cipher_suite();
        let keys = match (version, self.tls.dangerous_extract_secrets()) {
            (Some(version), Ok(secrets)) => kernel::keys(version, secrets),
            (_, Err(e)) => {
                tracing::warn!("kernel TLS: rustls kept the secrets: {e}");
                None
            }
            (None, Ok(_)) => None,
        };
        if let (Some(_), Some(suite)) = (&keys, suite) {
            tracing::debug!(
                "TLS connection's records handed to the kernel ({:?})",
                suite.suite()
            );
        }
        (self.inner, keys)
    }

    /// Encrypt the inner session's next output, if any, into `outgoing`.
    fn pump_out(&mut self, now: Instant) {
        if self.phase != Phase::Open || self.closing {
            return;
        }
        loop {
            let taken = match self.inner.output() {
                Output::None => 0,
                Output::Bytes(bytes) => {
                    let n = bytes.len().min(CHUNK);
                    self.tls.writer().write(&bytes[..n]).unwrap_or(0)
                }
                Output::File { fd, offset, len } => {
                    let want = len.min(CHUNK);
                    grow(&mut self.scratch, want);
                    // The inner session keeps `fd` open until `on_sent` moves past it.
                    match read_at(fd, &mut self.scratch[..want], offset) {
                        Ok(0) => return self.fail("a file body ended early"),
                        Ok(n) => self.tls.writer().write(&self.scratch[..n]).unwrap_or(0),
                        Err(e) => return self.fail(&format!("reading a file body: {e}")),
                    }
                }
            };
            if taken == 0 {
                break;
            }
            self.inner.on_sent(taken, now);
            self.flush_tls();
            if self.outgoing.len() >= CHUNK {
                break;
            }
        }
        self.flush_tls();
        if self.inner.done() && self.outgoing.is_empty() {
            self.closing = true;
            self.tls.send_close_notify();
            self.flush_tls();
        }
    }
}

/// At least `len` bytes of `buf` usable (zeroed once, when it grows; a
/// connection that only handshakes and asks for a page never zeroes 64 KiB).
fn grow(buf: &mut Vec<u8>, len: usize) {
    if buf.len() < len {
        buf.resize(len, 0);
    }
}

impl<S: Session + Secured> Session for TlsSession<S> {
    fn on_read(&mut self, data: &[u8], now: Instant) {
        if self.phase == Phase::Fresh && self.inner.awaits_preamble() {
            self.incoming.extend_from_slice(data);
            match proxy_protocol::parse(&self.incoming) {
                Ok(None) => return,
                Ok(Some((_, len))) => {
                    let preamble: Vec<u8> = self.incoming.drain(..len).collect();
                    self.inner.on_read(&preamble, now);
                    if self.inner.done() || self.inner.awaits_preamble() {
                        return self.abort("the inner session refused the preamble");
                    }
                }
                Err(proxy_protocol::Malformed) => {
                    return self.abort("a malformed or missing PROXY protocol preamble")
                }
            }
            let rest = std::mem::take(&mut self.incoming);
            if rest.is_empty() {
                return;
            }
            return self.on_read(&rest, now);
        }
        if self.phase == Phase::Fresh {
            match data.first() {
                None => return,
                Some(&HANDSHAKE_RECORD) => self.phase = Phase::Handshaking,
                Some(_) => {
                    write_plain_answer(&mut self.outgoing);
                    self.answered_plain = true;
                    self.phase = Phase::Failed;
                    return;
                }
            }
        }
        if self.phase == Phase::Failed {
            return;
        }
        if self.to_kernel {
            self.edge.advance(data);
        }
        self.incoming.extend_from_slice(data);
        self.pump_in(now);
    }

    fn on_eof(&mut self, now: Instant) {
        self.eof = true;
        if self.phase == Phase::Fresh {
            self.phase = Phase::Failed;
            return;
        }
        self.pump_in(now);
    }

    fn on_hangup(&mut self, now: Instant) {
        if self.phase == Phase::Open {
            self.inner.on_hangup(now);
        }
    }

    fn output(&mut self) -> Output<'_> {
        let now = Instant::now();
        if self.sent == self.outgoing.len() {
            self.outgoing.clear();
            self.sent = 0;
            self.pump_out(now);
        }
        if self.sent < self.outgoing.len() {
            self.stalled_since.get_or_insert(now);
            Output::Bytes(&self.outgoing[self.sent..])
        } else {
            self.stalled_since = None;
            Output::None
        }
    }

    fn on_sent(&mut self, n: usize, now: Instant) {
        self.sent += n;
        self.stalled_since = Some(now);
        if self.sent == self.outgoing.len() {
            self.outgoing.clear();
            self.sent = 0;
            self.stalled_since = None;
            // Output taken: the inner session may want the input held here
            // (ciphertext, or plaintext rustls decrypted) now.
            if self.phase == Phase::Open || self.eof {
                self.pump_in(now);
            }
        }
    }

    fn wants_read(&self) -> bool {
        match self.phase {
            Phase::Fresh | Phase::Handshaking => !self.eof,
            // Bound for the kernel, with no record begun: read nothing
            // more here until it has taken over.
            Phase::Open if self.to_kernel && self.incoming.is_empty() && self.edge.at_edge() => {
                false
            }
            Phase::Open => !self.eof && self.inner.wants_read() && self.incoming.len() < HELD_INPUT,
            Phase::Failed => false,
        }
    }

    fn aborted(&self) -> bool {
        self.dropped || (self.phase == Phase::Open && self.inner.aborted())
    }

    fn done(&self) -> bool {
        match self.phase {
            Phase::Failed => true,
            Phase::Open => self.closing || (self.inner.done() && self.eof_told),
            Phase::Fresh | Phase::Handshaking => false,
        }
    }

    fn deadline(&self) -> Option<Instant> {
        let own = match self.phase {
            Phase::Fresh | Phase::Handshaking => Some(self.handshake_deadline),
            Phase::Open => None,
            Phase::Failed => return None,
        };
        let stalled = self.stalled_since.map(|t| t + self.shared.send_timeout);
        // The inner session's clock runs during the handshake too: a drain
        // shortens a fresh connection's wait through it.
        [own, stalled, self.inner.deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    fn on_deadline(&mut self, now: Instant) {
        if self.phase == Phase::Failed {
            return;
        }
        if self
            .stalled_since
            .is_some_and(|t| now >= t + self.shared.send_timeout)
        {
            return self.abort("the client took no output within the send timeout");
        }
        if self.inner.deadline().is_some_and(|d| now >= d) {
            self.inner.on_deadline(now);
        }
        match self.phase {
            Phase::Fresh | Phase::Handshaking
                if now >= self.handshake_deadline || self.inner.done() =>
            {
                self.abort("no complete handshake within the header read timeout")
            }
            _ => {}
        }
    }

    fn idle(&self) -> bool {
        match self.phase {
            // A drain gives a connection that has sent nothing the grace
            // the inner session gives one; a handshake under way is not idle.
            Phase::Fresh => self.inner.idle(),
            Phase::Handshaking => false,
            Phase::Open => self.inner.idle() && self.outgoing.is_empty(),
            Phase::Failed => true,
        }
    }

    fn on_shutdown(&mut self) {
        self.inner.on_shutdown();
    }

    fn on_notify(&mut self, now: Instant) {
        if self.phase == Phase::Open {
            self.inner.on_notify(now);
            self.pump_in(now);
        }
    }

    /// As the inner session says (what it will not read comes encrypted),
    /// and also when ciphertext it never took waits here (records
    /// pipelined behind its last answer). A refused plain-HTTP client may be
    /// sending a body; a failed or timed-out handshake has no answer to lose.
    fn linger(&self) -> Linger {
        match self.phase {
            Phase::Open => match self.inner.linger() {
                Linger::No => Linger::No,
                _ if !self.incoming.is_empty() => Linger::Yes,
                asked => asked,
            },
            Phase::Failed if self.answered_plain => Linger::IfUnread,
            _ => Linger::No,
        }
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
