//! The TLS layer fed bytes alone: a rustls client in memory on one side, a
//! scripted inner session on the other.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};

use super::*;
use crate::backend::ktls::{Cipher, Ciphers};
use crate::backend::{Output, Session};
use crate::tls::config::{ClientAuth, Files, MinVersion, Settings};
use crate::tls::kernel;
use crate::tls::tcp_only::Either;

/// An inner session that answers each line `ping` with `pong\n`, closes
/// after `bye`, and reads only while `reading`.
#[derive(Default)]
struct Lines {
    got: Vec<u8>,
    out: Vec<u8>,
    reading: bool,
    done: bool,
    eof: bool,
    info: Option<Arc<TlsInfo>>,
    /// A timeout of the inner session's own (done when it passes).
    timeout: Option<Instant>,
    /// Awaiting a PROXY protocol preamble; what it was handed of one.
    preamble: bool,
    got_preamble: Vec<u8>,
}

impl Lines {
    fn new() -> Self {
        Lines {
            reading: true,
            ..Default::default()
        }
    }
}

impl Secured for Lines {
    fn secured(&mut self, info: Arc<TlsInfo>) {
        self.info = Some(info);
    }
    fn awaits_preamble(&self) -> bool {
        self.preamble
    }
}

impl Session for Lines {
    fn on_read(&mut self, data: &[u8], _now: Instant) {
        if self.preamble {
            self.got_preamble.extend_from_slice(data);
            self.preamble = false;
            return;
        }
        assert!(self.reading, "handed input it did not want");
        assert!(
            self.info.is_some(),
            "handed input before the handshake was over"
        );
        self.got.extend_from_slice(data);
        while let Some(end) = self.got.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.got.drain(..=end).collect();
            match &line[..] {
                b"ping\n" => self.out.extend_from_slice(b"pong\n"),
                b"bye\n" => self.done = true,
                b"big\n" => self.out.extend(std::iter::repeat_n(b'x', 300_000)),
                _ => {}
            }
        }
    }
    fn on_eof(&mut self, _now: Instant) {
        self.eof = true;
    }
    fn output(&mut self) -> Output<'_> {
        if self.out.is_empty() {
            Output::None
        } else {
            Output::Bytes(&self.out)
        }
    }
    fn on_sent(&mut self, n: usize, _now: Instant) {
        self.out.drain(..n);
    }
    fn wants_read(&self) -> bool {
        self.reading && !self.done
    }
    fn done(&self) -> bool {
        self.done && self.out.is_empty()
    }
    fn deadline(&self) -> Option<Instant> {
        self.timeout
    }
    fn on_deadline(&mut self, now: Instant) {
        if self.timeout.is_some_and(|t| now >= t) {
            self.done = true;
            self.out.clear();
        }
    }
    fn idle(&self) -> bool {
        self.got.is_empty() && self.out.is_empty()
    }
    fn on_shutdown(&mut self) {}
    fn on_notify(&mut self, _now: Instant) {}
}

struct Pki {
    dir: std::path::PathBuf,
    server_cert: CertificateDer<'static>,
}

/// The folder holds a private key: it goes with the test, pass or fail.
impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A self-signed certificate for `localhost`, written to a fresh folder.
fn pki(tag: &str) -> Pki {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let dir = std::env::temp_dir().join(format!("m0serve-tls-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cert.pem"), made.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), made.signing_key.serialize_pem()).unwrap();
    Pki {
        dir,
        server_cert: made.cert.der().clone(),
    }
}

fn files(pki: &Pki) -> Files {
    Files {
        certfile: pki.dir.join("cert.pem"),
        keyfile: pki.dir.join("key.pem"),
        password: None,
        ca_certs: None,
        client_auth: ClientAuth::None,
        min_version: MinVersion::Tls12,
        kernel: kernel::Mode::Off,
    }
}

/// What a server's connections share, with the tests' timeouts.
fn shared(settings: Settings) -> Arc<TlsShared> {
    Arc::new(TlsShared {
        settings,
        handshake_timeout: Duration::from_secs(10),
        send_timeout: Duration::from_secs(30),
        kernel: None,
    })
}

fn server(files: &Files, now: Instant) -> TlsSession<Lines> {
    TlsSession::new(Lines::new(), shared(files.load().unwrap()), now)
}

/// One `ping` exchange of a client of `config` with a server of `shared`:
/// how its handshake went.
fn handshake_kind(
    shared: &Arc<TlsShared>,
    config: &Arc<ClientConfig>,
    now: Instant,
) -> Option<rustls::HandshakeKind> {
    let mut s = TlsSession::new(Lines::new(), shared.clone(), now);
    let mut c =
        ClientConnection::new(config.clone(), ServerName::try_from("localhost").unwrap()).unwrap();
    c.writer().write_all(b"ping\n").unwrap();
    assert_eq!(shuttle(&mut c, &mut s, 1 << 20, now), b"pong\n");
    c.handshake_kind()
}

fn roots(pki: &Pki) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    roots.add(pki.server_cert.clone()).unwrap();
    roots
}

fn client_config(
    pki: &Pki,
    client_auth: Option<(CertificateDer<'static>, PrivateKeyDer<'static>)>,
) -> ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots(pki));
    let mut config = match client_auth {
        Some((cert, key)) => builder.with_client_auth_cert(vec![cert], key).unwrap(),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

fn client(config: ClientConfig) -> ClientConnection {
    ClientConnection::new(Arc::new(config), ServerName::try_from("localhost").unwrap()).unwrap()
}

/// Move bytes both ways until neither side has anything to say; the
/// client's bytes reach the server in pieces of at most `piece`. Returns
/// the plaintext the client received.
fn shuttle(
    c: &mut ClientConnection,
    s: &mut TlsSession<Lines>,
    piece: usize,
    now: Instant,
) -> Vec<u8> {
    let mut plain = Vec::new();
    for _ in 0..10_000 {
        let mut moved = false;
        let mut wire = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut wire).unwrap();
        }
        for chunk in wire.chunks(piece.max(1)) {
            if !s.wants_read() {
                break; // a real backend would leave it in the kernel; a test must not
            }
            s.on_read(chunk, now);
            moved = true;
        }
        while let Output::Bytes(b) = s.output() {
            let bytes = b.to_vec();
            s.on_sent(bytes.len(), now);
            let mut rest = &bytes[..];
            while !rest.is_empty() {
                c.read_tls(&mut rest).unwrap();
                c.process_new_packets().unwrap();
                plain.extend(read_plain(c));
            }
            moved = true;
        }
        if !moved {
            return plain;
        }
    }
    panic!("the two sides kept talking");
}

/// What the client has to send now.
fn client_bytes(c: &mut ClientConnection) -> Vec<u8> {
    let mut wire = Vec::new();
    while c.wants_write() {
        c.write_tls(&mut wire).unwrap();
    }
    wire
}

fn read_plain(c: &mut ClientConnection) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match c.reader().read(&mut buf) {
            Ok(0) => return all,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(_) => return all,
        }
    }
}

#[test]
fn a_handshake_then_lines_both_ways_however_the_bytes_are_split() {
    let pki = pki("split");
    let files = files(&pki);
    let now = Instant::now();
    for piece in [1, 2, 5, 64, 1000, 1 << 20] {
        let mut s = server(&files, now);
        let mut c = client(client_config(&pki, None));
        c.writer().write_all(b"ping\nping\n").unwrap();
        let got = shuttle(&mut c, &mut s, piece, now);
        assert_eq!(got, b"pong\npong\n", "split into {piece}-byte pieces");
        let info = s.inner().info.clone().expect("told of the handshake");
        assert_eq!(info.version, 0x0304, "TLS 1.3 by default");
        assert_ne!(info.cipher, 0);
        assert!(info
            .server_cert
            .starts_with("-----BEGIN CERTIFICATE-----\n"));
        assert!(info.client_chain.is_empty() && info.client_name.is_none());
        assert_eq!(c.alpn_protocol(), Some(&b"http/1.1"[..]));
    }
}

#[test]
fn a_large_answer_arrives_whole_and_the_inner_session_is_drained_in_chunks() {
    let pki = pki("big");
    let now = Instant::now();
    let mut s = server(&files(&pki), now);
    let mut c = client(client_config(&pki, None));
    c.writer().write_all(b"big\n").unwrap();
    let got = shuttle(&mut c, &mut s, 4096, now);
    assert_eq!(got.len(), 300_000);
    assert!(got.iter().all(|&b| b == b'x'));
}

#[test]
fn input_waits_while_the_inner_session_reads_nothing() {
    let pki = pki("hold");
    let now = Instant::now();
    let mut s = server(&files(&pki), now);
    let mut c = client(client_config(&pki, None));
    shuttle(&mut c, &mut s, 1 << 20, now); // the handshake
    s.inner.reading = false;
    c.writer().write_all(b"ping\n").unwrap();
    let wire = client_bytes(&mut c);
    s.on_read(&wire, now); // arrived before the session said it reads nothing more
    assert!(
        s.inner().got.is_empty(),
        "delivered to a session not reading"
    );
    assert!(!s.wants_read(), "reads on while its input is held");
    s.inner.reading = true;
    s.on_notify(now);
    assert!(s.wants_read());
    assert_eq!(shuttle(&mut c, &mut s, 1 << 20, now), b"pong\n");
}

#[test]
fn the_inner_session_done_sends_close_notify_then_is_done() {
    let pki = pki("close");
    let now = Instant::now();
    let mut s = server(&files(&pki), now);
    let mut c = client(client_config(&pki, None));
    c.writer().write_all(b"ping\nbye\n").unwrap();
    assert_eq!(shuttle(&mut c, &mut s, 1 << 20, now), b"pong\n");
    assert!(s.done());
    let mut buf = [0u8; 16];
    assert_eq!(
        c.reader().read(&mut buf).unwrap(),
        0,
        "no close_notify seen"
    );
}

#[test]
fn plain_http_on_the_tls_port_gets_a_400_at_once() {
    let pki = pki("plain");
    let now = Instant::now();
    let mut s = server(&files(&pki), now);
    s.on_read(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", now);
    let Output::Bytes(out) = s.output() else {
        panic!("no answer");
    };
    let text = String::from_utf8_lossy(out).to_string();
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
    assert!(text.contains("Connection: close"));
    assert!(text.contains("\r\nDate: "), "a 4xx carries Date: {text}");
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(
        head.contains(&format!("Content-Length: {}", body.len())),
        "{text}"
    );
    assert!(s.done() && !s.wants_read());
}

#[test]
fn garbage_after_a_record_header_fails_the_handshake_with_an_alert() {
    let pki = pki("garbage");
    let now = Instant::now();
    let mut s = server(&files(&pki), now);
    // A ClientHello record whose one-byte hello cannot be decoded.
    s.on_read(b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\xff", now);
    assert!(s.done(), "a malformed ClientHello left the connection open");
    let Output::Bytes(out) = s.output() else {
        panic!("no alert");
    };
    assert_eq!(out[0], 0x15, "an alert record");
}

#[test]
fn a_handshake_not_finished_in_time_is_closed() {
    let pki = pki("slow");
    let now = Instant::now();
    let mut s = server(&files(&pki), now);
    s.on_read(b"\x16\x03\x01", now);
    let deadline = s.deadline().expect("a handshake deadline");
    assert_eq!(deadline, now + Duration::from_secs(10));
    s.on_deadline(now + Duration::from_secs(5));
    assert!(!s.done(), "closed before its deadline");
    s.on_deadline(deadline);
    assert!(s.done());
    assert!(s.inner().info.is_none());
}

#[test]
fn required_client_certificates_fail_a_client_without_one() {
    let pki = pki("mtls");
    let ca = rcgen::generate_simple_self_signed(vec!["client".to_string()]).unwrap();
    std::fs::write(pki.dir.join("ca.pem"), ca.cert.pem()).unwrap();
    let mut f = files(&pki);
    f.ca_certs = Some(pki.dir.join("ca.pem"));
    f.client_auth = ClientAuth::Required;
    let now = Instant::now();

    let mut s = server(&f, now);
    let mut c = client(client_config(&pki, None));
    c.writer().write_all(b"ping\n").unwrap();
    let mut wire = Vec::new();
    for _ in 0..10 {
        while c.wants_write() {
            c.write_tls(&mut wire).unwrap();
        }
        if !wire.is_empty() && s.wants_read() {
            s.on_read(&std::mem::take(&mut wire), now);
        }
        while let Output::Bytes(b) = s.output() {
            let b = b.to_vec();
            s.on_sent(b.len(), now);
            let mut rest = &b[..];
            let _ = c.read_tls(&mut rest);
            let _ = c.process_new_packets();
        }
    }
    assert!(s.done(), "served a client without a certificate");
    assert!(s.inner().got.is_empty());

    // The self-signed client certificate is its own CA here: accepted.
    let key = PrivateKeyDer::try_from(ca.signing_key.serialize_der()).unwrap();
    let mut s = server(&f, now);
    let mut c = client(client_config(&pki, Some((ca.cert.der().clone(), key))));
    c.writer().write_all(b"ping\n").unwrap();
    assert_eq!(shuttle(&mut c, &mut s, 1 << 20, now), b"pong\n");
    let info = s.inner().info.clone().unwrap();
    assert_eq!(info.client_chain.len(), 1);
    assert_eq!(
        info.client_name.as_deref(),
        Some("CN=rcgen self signed cert")
    );
}

#[test]
fn tls_1_2_is_refused_under_a_tls_1_3_minimum() {
    let pki = pki("min");
    let mut f = files(&pki);
    f.min_version = MinVersion::Tls13;
    let now = Instant::now();
    let mut s = server(&f, now);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .with_root_certificates(roots(&pki))
        .with_no_client_auth();
    let mut c = client(config);
    let wire = client_bytes(&mut c);
    s.on_read(&wire, now);
    assert!(
        s.done(),
        "a TLS 1.2 ClientHello was taken under a 1.3 minimum"
    );
}

#[test]
fn load_errors_name_the_file_and_the_reason() {
    let pki = pki("errors");
    let mut f = files(&pki);
    f.certfile = pki.dir.join("missing.pem");
    let e = f.load().unwrap_err().to_string();
    assert!(
        e.starts_with("--ssl-certfile ") && e.contains("missing.pem") && e.contains("No such file"),
        "{e}"
    );

    std::fs::write(pki.dir.join("junk.pem"), "not a certificate\n").unwrap();
    let mut f = files(&pki);
    f.certfile = pki.dir.join("junk.pem");
    let e = f.load().unwrap_err().to_string();
    assert!(
        e.contains("junk.pem") && e.contains("no PEM certificate"),
        "{e}"
    );

    let other = rcgen::generate_simple_self_signed(vec!["other".to_string()]).unwrap();
    std::fs::write(
        pki.dir.join("other-key.pem"),
        other.signing_key.serialize_pem(),
    )
    .unwrap();
    let mut f = files(&pki);
    f.keyfile = pki.dir.join("other-key.pem");
    let e = f.load().unwrap_err().to_string();
    assert!(
        e.starts_with("--ssl-keyfile ") && e.contains("does not match"),
        "{e}"
    );

    let mut f = files(&pki);
    f.client_auth = ClientAuth::Required;
    let e = f.load().unwrap_err().to_string();
    assert!(e.contains("--ssl-ca-certs"), "{e}");
}

#[test]
fn a_client_that_takes_no_output_is_dropped_after_the_send_timeout() {
    let pki = pki("stall");
    let now = Instant::now();
    let mut s = server(&files(&pki), now);
    let mut c = client(client_config(&pki, None));
    shuttle(&mut c, &mut s, 1 << 20, now); // the handshake
    c.writer().write_all(b"big\n").unwrap();
    let wire = client_bytes(&mut c);
    s.on_read(&wire, now);
    assert!(matches!(s.output(), Output::Bytes(_)), "nothing to send");
    // The client reads nothing from here on.
    let limit = s.deadline().expect("a send deadline");
    assert!(limit > now + Duration::from_secs(29), "{:?}", limit - now);
    s.on_deadline(limit - Duration::from_secs(1));
    assert!(!s.done(), "dropped before the send timeout");
    assert!(!s.aborted());
    s.on_deadline(limit);
    assert!(s.done(), "a stalled client held its connection");
    assert!(
        s.aborted(),
        "a write in flight to the stalled client is not cut"
    );
    assert!(matches!(s.output(), Output::None), "still asks to send");
}

#[test]
fn the_inner_sessions_own_deadline_runs_during_the_handshake() {
    // A drain shortens a fresh connection's wait through the inner session.
    let pki = pki("drain");
    let now = Instant::now();
    let mut s = server(&files(&pki), now);
    s.inner.timeout = Some(now + Duration::from_secs(1));
    assert_eq!(s.deadline(), Some(now + Duration::from_secs(1)));
    s.on_deadline(now + Duration::from_secs(1));
    assert!(
        s.done(),
        "the inner session's deadline did not close a fresh connection"
    );
}

#[test]
fn a_returning_client_resumes_its_session() {
    let pki = pki("resume");
    let f = files(&pki);
    let now = Instant::now();
    let server = shared(f.load().unwrap());
    let config = Arc::new(client_config(&pki, None));
    let kinds = [(); 2].map(|_| handshake_kind(&server, &config, now));
    use rustls::HandshakeKind::{Full, Resumed};
    assert_eq!(
        kinds,
        [Some(Full), Some(Resumed)],
        "no ticket, or not taken back"
    );
}

#[test]
fn the_servers_order_of_suites_puts_aes_128_gcm_first() {
    // A client that prefers AES-256-GCM-SHA384, as OpenSSL's do.
    use rustls::crypto::ring::cipher_suite::{TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384};
    let pki = pki("suites");
    let now = Instant::now();
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites = vec![TLS13_AES_256_GCM_SHA384, TLS13_AES_128_GCM_SHA256];
    let config = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots(&pki))
        .with_no_client_auth();
    let mut s = server(&files(&pki), now);
    let mut c = client(config);
    c.writer().write_all(b"ping\n").unwrap();
    assert_eq!(shuttle(&mut c, &mut s, 1 << 20, now), b"pong\n");
    assert_eq!(
        s.inner().info.as_ref().unwrap().cipher,
        0x1301,
        "TLS_AES_128_GCM_SHA256"
    );
}

#[test]
fn a_proxy_preamble_in_the_clear_goes_to_the_inner_session_then_tls_follows() {
    let pki = pki("preamble");
    let now = Instant::now();
    let preamble = b"PROXY TCP4 203.0.113.7 127.0.0.1 40123 8443\r\n";
    for piece in [1, 7, 1 << 20] {
        let mut s = server(&files(&pki), now);
        s.inner.preamble = true;
        let mut c = client(client_config(&pki, None));
        c.writer().write_all(b"ping\n").unwrap();
        // The preamble and the ClientHello in one stream, cut into pieces.
        let mut wire = preamble.to_vec();
        wire.extend(client_bytes(&mut c));
        for chunk in wire.chunks(piece) {
            s.on_read(chunk, now);
        }
        assert_eq!(
            s.inner().got_preamble,
            preamble,
            "split into {piece}-byte pieces"
        );
        assert_eq!(shuttle(&mut c, &mut s, piece, now), b"pong\n");
    }
}

#[test]
fn a_connection_without_the_preamble_it_owes_is_closed_unanswered() {
    let pki = pki("nopreamble");
    let now = Instant::now();
    let mut s = server(&files(&pki), now);
    s.inner.preamble = true;
    let mut c = client(client_config(&pki, None));
    s.on_read(&client_bytes(&mut c), now);
    assert!(s.done(), "a ClientHello was taken for a preamble");
    assert!(matches!(s.output(), Output::None), "answered");
}

/// Two workers' configurations: with the supervisor's ticket secret a
/// client resumes at the other one; each with keys of its own, it cannot.
#[test]
fn a_client_resumes_at_another_worker_only_with_the_shared_ticket_secret() {
    let pki = pki("shared-tickets");
    let f = files(&pki);
    let now = Instant::now();
    let seed = crate::tls::tickets::Seed::generate().unwrap();
    let worker = |shared_secret: bool| {
        let mut settings = f.load().unwrap();
        if shared_secret {
            settings.share_tickets(&seed);
        }
        shared(settings)
    };
    use rustls::HandshakeKind::{Full, Resumed};
    for (shared_secret, second) in [(true, Resumed), (false, Full)] {
        let workers = [worker(shared_secret), worker(shared_secret)];
        let config = Arc::new(client_config(&pki, None));
        let kinds = workers.map(|w| handshake_kind(&w, &config, now));
        assert_eq!(
            kinds,
            [Some(Full), Some(second)],
            "shared secret: {shared_secret}"
        );
    }
}

/// A server whose kernel takes `ciphers`, and a client that can give up
/// its own secrets to check the server's against.
fn kernel_pair(pki: &Pki, ciphers: Ciphers, now: Instant) -> (TlsSession<Lines>, ClientConnection) {
    let mut f = files(pki);
    f.kernel = kernel::Mode::Auto;
    let shared = Arc::new(TlsShared {
        kernel: Some(ciphers),
        ..Arc::into_inner(shared(f.load().unwrap())).unwrap()
    });
    let mut config = client_config(pki, None);
    config.enable_secret_extraction = true;
    (TlsSession::new(Lines::new(), shared, now), client(config))
}

fn all_ciphers() -> Ciphers {
    Cipher::ALL
        .into_iter()
        .fold(Ciphers::default(), Ciphers::with)
}

/// The handshake, with a `ping` sent after it, the server's records taken
/// by the client as they come but not reported sent: how many there are.
fn handshake_unsent(s: &mut TlsSession<Lines>, c: &mut ClientConnection, now: Instant) -> usize {
    c.writer().write_all(b"ping\n").unwrap();
    let mut unsent = 0;
    for _ in 0..10 {
        let wire = client_bytes(c);
        if !wire.is_empty() {
            s.on_read(&wire, now);
        }
        if let Output::Bytes(b) = s.output() {
            let mut rest = &b[unsent..];
            while !rest.is_empty() {
                c.read_tls(&mut rest).unwrap();
                c.process_new_packets().unwrap();
            }
            unsent = b.len();
        }
    }
    unsent
}

#[test]
fn the_kernel_takes_over_only_once_every_record_of_the_handshake_is_sent_with_the_clients_keys() {
    use crate::backend::ktls::Version;
    let pki = pki("kernel");
    let now = Instant::now();
    let (mut s, mut c) = kernel_pair(&pki, all_ciphers(), now);
    let unsent = handshake_unsent(&mut s, &mut c, now);
    assert!(unsent > 0 && !c.is_handshaking());
    assert_eq!(s.inner().got, b"", "the ping was taken whole as a line");
    assert!(
        !s.kernel_ready(),
        "ready while its records were still unsent"
    );
    assert!(!s.wants_read(), "reads on while bound for the kernel");
    s.on_sent(unsent, now);
    assert!(
        s.kernel_ready(),
        "not ready once everything was sent and read"
    );

    let mut either = Either::Tls(s);
    let keys = either.kernel_tls().expect("the keys");
    assert!(
        matches!(either, Either::Plain(_)),
        "not served plain after the handover"
    );
    assert!(either.kernel_tls().is_none(), "handed over twice");
    // The answer rustls had not encrypted yet goes to the kernel as it is.
    let Output::Bytes(pong) = either.output() else {
        panic!("the pong was lost in the handover");
    };
    assert_eq!(pong, b"pong\n");
    let theirs = c.dangerous_extract_secrets().unwrap();
    let client = kernel::keys(rustls::ProtocolVersion::TLSv1_3, theirs).unwrap();
    assert_eq!(keys.version, Version::Tls13);
    assert_eq!(keys.cipher, client.cipher);
    for (ours, theirs, what) in [
        (&keys.rx, &client.tx, "read"),
        (&keys.tx, &client.rx, "send"),
    ] {
        assert_eq!(&ours.key[..], &theirs.key[..], "{what} key");
        assert_eq!(&ours.iv[..], &theirs.iv[..], "{what} IV");
        assert_eq!(ours.seq, theirs.seq, "{what} sequence number");
    }
    assert!(keys.rx.seq >= 1, "the client's ping record is counted");
}

#[test]
fn a_record_begun_but_not_ended_keeps_the_connection_in_rustls_and_reading() {
    let pki = pki("kernel-partial");
    let now = Instant::now();
    let (mut s, mut c) = kernel_pair(&pki, all_ciphers(), now);
    let unsent = handshake_unsent(&mut s, &mut c, now);
    s.on_sent(unsent, now);
    assert_eq!(shuttle(&mut c, &mut s, 1 << 20, now), b"pong\n");
    c.writer().write_all(b"ping\n").unwrap();
    let wire = client_bytes(&mut c);
    s.on_read(&wire[..wire.len() - 1], now);
    assert!(!s.kernel_ready(), "ready with a record half read");
    assert!(s.wants_read(), "the record's last byte is never read");
    s.on_read(&wire[wire.len() - 1..], now);
    let Output::Bytes(b) = s.output() else {
        panic!("no pong for the whole record");
    };
    let n = b.len();
    s.on_sent(n, now);
    assert!(s.kernel_ready());
}

#[test]
fn a_cipher_the_kernel_lacks_and_a_server_without_kernel_tls_stay_in_rustls() {
    let pki = pki("kernel-lacks");
    let now = Instant::now();
    let lacking = Ciphers::default()
        .with(Cipher::Aes256Gcm)
        .with(Cipher::Chacha20Poly1305);
    for (ciphers, what) in [
        (lacking, "a cipher the kernel lacks"),
        (all_ciphers(), "--ssl-ktls off"),
    ] {
        let (mut s, _) = kernel_pair(&pki, ciphers, now);
        if what == "--ssl-ktls off" {
            s = server(&files(&pki), now);
        }
        // The client offers AES-128-GCM alone.
        let mut c = client(aes128_only(&pki));
        let unsent = handshake_unsent(&mut s, &mut c, now);
        s.on_sent(unsent, now);
        assert_eq!(shuttle(&mut c, &mut s, 1 << 20, now), b"pong\n", "{what}");
        assert!(!s.kernel_ready(), "{what}: handed to the kernel");
        assert!(s.wants_read(), "{what}: reads nothing more");
        c.writer().write_all(b"ping\n").unwrap();
        assert_eq!(shuttle(&mut c, &mut s, 1 << 20, now), b"pong\n", "{what}");
    }
}

/// A client that offers TLS 1.3's AES-128-GCM suite alone.
fn aes128_only(pki: &Pki) -> ClientConfig {
    let mut provider = rustls::crypto::ring::default_provider();
    provider
        .cipher_suites
        .retain(|s| s.suite() == rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
    let mut config = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots(pki))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

#[test]
fn the_record_edge_is_where_the_last_record_read_ends_however_the_bytes_come() {
    let record = |len: usize| {
        let mut r = vec![23, 3, 3];
        r.extend((len as u16).to_be_bytes());
        r.extend(std::iter::repeat_n(7, len));
        r
    };
    let two = [record(3), record(0), record(300)].concat();
    for piece in [1, 2, 4, 5, 6, 13, 1000] {
        let mut edge = RecordEdge::default();
        let mut read = 0;
        for chunk in two.chunks(piece) {
            edge.advance(chunk);
            read += chunk.len();
            let ends = [0, 8, 13, two.len()].contains(&read);
            assert_eq!(
                edge.at_edge(),
                ends,
                "{read} bytes read in {piece}-byte pieces"
            );
        }
    }
}
