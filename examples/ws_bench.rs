//! A WebSocket echo load client (bench/ws_echo.sh): CONNECTIONS clients, one
//! blocking thread each, send a message (text unless KIND is `binary`) and
//! wait for its echo, again and again, for SECONDS. Built on the crate's
//! sans-IO pieces: the accept key of [`handshake::accept_key`], and the
//! client side of [`frame`].
//!
//! Usage: `ws_bench URL CONNECTIONS SECONDS MESSAGE_BYTES [KIND]`, URL as
//! `ws://HOST:PORT/PATH`. Prints one JSON line: round trips per second and
//! the p50/p99/max round-trip latency, over all connections.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::process::ExitCode;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use m0serve::ws::frame::{self, OpCode};
use m0serve::ws::handshake;

/// What each connection measured: one round trip's latency in nanoseconds
/// per echoed message.
type Latencies = Vec<u64>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (url, conns, secs, size, kind) = match &args[..] {
        [url, conns, secs, size] => (url, conns, secs, size, "text"),
        [url, conns, secs, size, kind] => (url, conns, secs, size, kind.as_str()),
        _ => {
            eprintln!("usage: ws_bench ws://HOST:PORT/PATH CONNECTIONS SECONDS MESSAGE_BYTES [text|binary]");
            return ExitCode::from(2);
        }
    };
    let opcode = match kind {
        "text" => Some(OpCode::Text),
        "binary" => Some(OpCode::Binary),
        _ => None,
    };
    let (Some((addr, path)), Ok(conns), Ok(secs), Ok(size), Some(opcode)) = (
        parse_url(url),
        conns.parse::<usize>(),
        secs.parse::<f64>(),
        size.parse::<usize>(),
        opcode,
    ) else {
        eprintln!("ws_bench: bad arguments {args:?}");
        return ExitCode::from(2);
    };
    // Every connection is open and upgraded before the clock starts.
    let ready = Arc::new(Barrier::new(conns + 1));
    let threads: Vec<_> = (0..conns)
        .map(|i| {
            let (addr, path, ready) = (addr.clone(), path.clone(), ready.clone());
            thread::spawn(move || -> io::Result<Latencies> {
                let conn = Client::connect(&addr, &path, i as u32);
                ready.wait();
                let mut conn = conn?;
                let deadline = Instant::now() + Duration::from_secs_f64(secs);
                conn.run(size, opcode, deadline)
            })
        })
        .collect();
    ready.wait();
    let start = Instant::now();
    let mut all = Vec::new();
    let mut errors = Vec::new();
    for t in threads {
        match t.join().expect("client thread panicked") {
            Ok(lat) => all.extend(lat),
            Err(e) => errors.push(e.to_string()),
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct = |p: f64| all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)));
    // JSON has no NaN: no round trip at all gives nulls.
    let ms = |ns: Option<&u64>| ns.map_or("null".into(), |&ns| format!("{:.3}", ns as f64 / 1e6));
    println!(
        "{{\"connections\": {conns}, \"seconds\": {elapsed:.3}, \"message_bytes\": {size}, \
         \"messages\": {}, \"msgs_per_sec\": {:.1}, \"p50_ms\": {}, \"p99_ms\": {}, \
         \"max_ms\": {}, \"errors\": {}}}",
        all.len(),
        all.len() as f64 / elapsed,
        ms(pct(0.50)),
        ms(pct(0.99)),
        ms(all.last()),
        json_strings(&errors),
    );
    if errors.is_empty() && !all.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `ws://HOST:PORT/PATH` as (`HOST:PORT`, `/PATH`).
fn parse_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("ws://")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    authority
        .contains(':')
        .then(|| (authority.to_string(), path.to_string()))
}

fn json_strings(items: &[String]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|s| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    format!("[{}]", quoted.join(", "))
}

fn bad(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// One upgraded connection, and what has been read past the last frame.
struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
    mask: [u8; 4],
}

impl Client {
    /// Connects and upgrades: the 101 and its `Sec-WebSocket-Accept` checked.
    fn connect(addr: &str, path: &str, id: u32) -> io::Result<Client> {
        let mut stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        // A key unique per connection is all §4.1 asks of a test client; no
        // need for randomness the server cannot tell apart.
        let seed = (u64::from(id) << 32) ^ u64::from(std::process::id());
        let key = STANDARD.encode(seed.to_le_bytes().repeat(2));
        let host = addr;
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )?;
        let mut buf = Vec::with_capacity(4096);
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if read_more(&mut stream, &mut buf)? == 0 {
                return Err(bad("closed during the handshake".into()));
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        if !head.starts_with("HTTP/1.1 101") {
            return Err(bad(format!(
                "not upgraded: {}",
                head.lines().next().unwrap_or("")
            )));
        }
        let want = handshake::accept_key(key.as_bytes());
        let accepted = head.lines().any(|line| {
            line.split_once(':').is_some_and(|(name, value)| {
                name.eq_ignore_ascii_case("sec-websocket-accept") && value.trim().as_bytes() == want
            })
        });
        if !accepted {
            return Err(bad("wrong or missing Sec-WebSocket-Accept".into()));
        }
        buf.drain(..head_end);
        let mask = (seed as u32 ^ 0x5bd1_e995).to_be_bytes();
        Ok(Client { stream, buf, mask })
    }

    /// Echo round trips of `opcode` messages until `deadline`, then a clean close.
    fn run(&mut self, size: usize, opcode: OpCode, deadline: Instant) -> io::Result<Latencies> {
        let message: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
        // The message never changes, so it is framed (and masked) once.
        let mut framed = Vec::new();
        frame::write_client_frame(&mut framed, opcode, &message, self.mask);
        let mut latencies = Vec::with_capacity(1 << 16);
        loop {
            let sent = Instant::now();
            if sent >= deadline {
                break;
            }
            self.stream.write_all(&framed)?;
            let (echoed, payload) = self.next_message()?;
            latencies.push(sent.elapsed().as_nanos() as u64);
            if echoed != opcode.bits() || payload != message {
                return Err(bad(format!(
                    "echo differs (opcode {echoed:#x}, {} bytes)",
                    payload.len()
                )));
            }
        }
        self.close()?;
        Ok(latencies)
    }

    /// The next data frame's opcode and payload; pings are answered on the way.
    fn next_message(&mut self) -> io::Result<(u8, Vec<u8>)> {
        loop {
            if let Some((h, start)) = frame::parse_server_header(&self.buf) {
                if h.masked || !h.fin {
                    return Err(bad(format!("unexpected frame {h:?}")));
                }
                let end = start + h.len as usize;
                if self.buf.len() >= end {
                    let payload = self.buf[start..end].to_vec();
                    self.buf.drain(..end);
                    if h.opcode == OpCode::Ping.bits() {
                        let mut pong = Vec::new();
                        frame::write_client_frame(&mut pong, OpCode::Pong, &payload, self.mask);
                        self.stream.write_all(&pong)?;
                        continue;
                    }
                    return Ok((h.opcode, payload));
                }
            }
            if read_more(&mut self.stream, &mut self.buf)? == 0 {
                return Err(bad("server closed the connection".into()));
            }
        }
    }

    /// Sends Close 1000 and waits (briefly) for the server's Close.
    fn close(&mut self) -> io::Result<()> {
        let mut close = Vec::new();
        frame::write_client_frame(&mut close, OpCode::Close, &1000u16.to_be_bytes(), self.mask);
        self.stream.write_all(&close)?;
        self.stream.set_read_timeout(Some(Duration::from_secs(2)))?;
        loop {
            match self.next_message() {
                Ok((op, _)) if op == OpCode::Close.bits() => return Ok(()),
                Ok(_) => continue,
                // A server that drops the connection instead is not the load's concern.
                Err(_) => return Ok(()),
            }
        }
    }
}

/// Appends what one read gives; the count (0: end of stream).
fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut chunk = [0u8; 16 * 1024];
    let n = stream.read(&mut chunk)?;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n)
}
