//! The scrape listener: one small thread of the supervisor (not a core
//! thread) that answers `GET /metrics` one connection at a time, each
//! bounded in time, and closes it.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};

use socket2::{Domain, Socket, Type};
use std::sync::Arc;
use std::time::Duration;

use super::counters::Region;
use super::render::{render, CONTENT_TYPE};
use super::Restarts;

/// How long a scraper may take to send its request or read the answer: a
/// slow one holds the next scrape back no longer than this.
const IO_TIMEOUT: Duration = Duration::from_secs(1);
/// The longest request head read.
const MAX_HEAD: usize = 8 << 10;

/// Bind `addr` for scrapes (an error names it). With SO_REUSEADDR, as the
/// server's own listener: the connections of the last scrapes before a
/// restart sit in TIME_WAIT on this port, and must not make the bind fail.
pub fn bind(addr: &str) -> io::Result<TcpListener> {
    let bound = || -> io::Result<TcpListener> {
        let at = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address"))?;
        let sock = Socket::new(Domain::for_address(at), Type::STREAM, None)?;
        sock.set_reuse_address(true)?;
        sock.bind(&at.into())?;
        sock.listen(128)?;
        Ok(sock.into())
    };
    bound().map_err(|e| io::Error::new(e.kind(), format!("--metrics-address {addr}: {e}")))
}

/// Serve scrapes on `listener` from a thread of its own, for the life of
/// the process.
pub fn spawn(listener: TcpListener, region: Region, restarts: Arc<Restarts>) -> io::Result<()> {
    let addr = listener.local_addr()?;
    tracing::info!("metrics on http://{addr}/metrics");
    std::thread::Builder::new()
        .name("m0-metrics".into())
        .spawn(move || {
            for stream in listener.incoming() {
                match stream {
                    Ok(stream) => {
                        if let Err(e) = answer(stream, &region, &restarts) {
                            tracing::debug!("metrics scrape: {e}");
                        }
                    }
                    Err(e) => {
                        tracing::debug!("metrics accept: {e}");
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
            }
        })?;
    Ok(())
}

fn answer(mut stream: TcpStream, region: &Region, restarts: &Restarts) -> io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let _ = stream.set_nodelay(true);
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_HEAD {
            return reply(&mut stream, "431 Request Header Fields Too Large", "", b"");
        }
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    let (method, target) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let path = target.split(|b| *b == b'?').next().unwrap_or_default();
    match (method, path) {
        (b"GET", b"/metrics") => {
            // Restarts first: the supervisor frees a dead worker's shards, then
            // counts its restart, so a scrape showing the restart shows the
            // shards freed too.
            let restarts = restarts.snapshot();
            let body = render(&region.totals(), &region.figures(), &restarts);
            reply(&mut stream, "200 OK", CONTENT_TYPE, body.as_bytes())
        }
        (b"GET", _) => reply(&mut stream, "404 Not Found", "text/plain", b"not found\n"),
        _ => reply(
            &mut stream,
            "405 Method Not Allowed",
            "text/plain",
            b"GET only\n",
        ),
    }
}

fn reply(stream: &mut TcpStream, status: &str, content_type: &str, body: &[u8]) -> io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if !content_type.is_empty() {
        out.push_str(&format!("Content-Type: {content_type}\r\n"));
    }
    out.push_str("\r\n");
    let mut all = out.into_bytes();
    all.extend_from_slice(body);
    stream.write_all(&all)?;
    stream.flush()
}
