//! How an io_uring core writes a connection's output.
//!
//! The ring owns a buffer while the kernel sends from it. A large piece of
//! output (the application's own bytes, or 16 KiB or more the session wrote)
//! is lent by the session for that long ([`Session::lend_output`]) and sent
//! straight from it, whole: a 256 KiB answer is then one send and no copy in user space,
//! where copying it 16 KiB at a time cost a copy, a send and a pass per
//! 16 KiB (half of the portable backend's throughput). Other writes copy
//! the session's bytes into a write buffer, taken from the core's spares
//! for each response and returned once the output is drained, so an idle
//! connection holds none.
//! [`Output::File`] goes out by `sendfile(2)`, made on the core thread
//! outside the ring as the portable backend makes it: the page cache's
//! bytes go to the socket with no copy through user space and no buffer
//! held. When the socket is full, a writable poll
//! ([`Ring::watch_writable`]) stands in for the write in flight. A read
//! through the ring into a 16 KiB buffer and a send of it, as before, served
//! a 1 MiB file at half the portable backend's rate (two copies and a pass
//! per 16 KiB). Like the portable backend, a file not in the page cache
//! makes the core wait for the disk; static files are small and hot, and
//! splice through the ring would need a pipe per connection and two linked
//! operations per chunk.

use std::io;
use std::os::fd::AsFd;
use std::time::Instant;

use bytes::Bytes;
use m0serve_uring::Ring;

use super::{token, Conn, Core};
use crate::backend::slab::Key;
use crate::backend::{sendfile, Output, Service, Session};

/// What a finished send hands back.
pub(super) enum SentBuf {
    /// The core's own write buffer, for the next copied send.
    Own(Vec<u8>),
    /// The buffer the session lent ([`Session::lend_output`]).
    Lent(Bytes),
}

/// The most one send of copied bytes moves.
const WRITE_BUF: usize = 16 * 1024;
/// File bytes one connection may `sendfile` in one write before the pass
/// moves on to other connections (its writable poll brings it back).
const FILE_TURN: usize = 1 << 20;
/// Freed buffers kept for the next connections.
const SPARE_BUFS: usize = 64;

impl<S: Service> Core<S> {
    /// A send finished: `buf` is the core's write buffer back, or the
    /// session's lent one (which goes back to the session).
    pub(super) fn on_sent(
        &mut self,
        key: Key,
        buf: SentBuf,
        result: io::Result<usize>,
        now: Instant,
    ) {
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        let lent = match buf {
            SentBuf::Own(buf) => {
                conn.wbuf = Some(buf);
                None
            }
            SentBuf::Lent(buf) => {
                conn.wbuf = Some(Vec::new());
                Some(buf)
            }
        };
        if !conn.closing {
            match result {
                Ok(n) if n > 0 => match lent {
                    Some(buf) => conn.session.on_sent_lent(buf, n, now),
                    None => conn.session.on_sent(n, now),
                },
                // A send of a non-empty buffer that moves nothing would repeat forever.
                Ok(_) => self.close(key),
                Err(e) => {
                    tracing::debug!(core = self.ctx.index, "send failed: {e}");
                    self.close(key);
                }
            }
        }
        self.drive(key);
    }

    /// The socket a file's `sendfile` found full has room again (a failed
    /// poll closes the connection).
    pub(super) fn on_writable(&mut self, key: Key, result: io::Result<()>) {
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        conn.wbuf = Some(Vec::new());
        if result.is_err() && !conn.closing {
            tracing::debug!(core = self.ctx.index, "writable poll failed");
            self.close(key);
        }
        self.drive(key);
    }
}

/// Keep a write buffer no longer in use for the next response (up to [`SPARE_BUFS`]).
pub(super) fn recycle(spare: &mut Vec<Vec<u8>>, buf: Option<Vec<u8>>) {
    if let Some(buf) = buf {
        if spare.len() < SPARE_BUFS && buf.capacity() >= WRITE_BUF {
            spare.push(buf);
        }
    }
}

/// Start the next write of `conn`'s output if none is in flight: a send
/// from the buffer the session lends, or of a copy in a buffer from `spare`;
/// a file is written by `sendfile` until it ends or the socket is full (then
/// a writable poll stands in for the write). With nothing to write, the
/// buffer goes back to `spare`.
pub(super) fn start_write<T: Session>(
    ring: &mut Ring,
    spare: &mut Vec<Vec<u8>>,
    key: Key,
    conn: &mut Conn<T>,
) -> io::Result<()> {
    let mut from_files = 0;
    loop {
        let Some(held) = conn.wbuf.take() else {
            return Ok(()); // one write at a time
        };
        if let Some((buf, from)) = conn.session.lend_output() {
            // Sent straight from the session's buffer, not copied into ours.
            // Refused, the buffer is lost with the operation; the caller
            // closes the connection, whose session is then dropped lent.
            recycle(spare, Some(held));
            let started = ring.send_lent(token(key), conn.fd.as_fd(), buf, from);
            if started.is_err() {
                conn.wbuf = Some(Vec::new());
            }
            return started;
        }
        let started = match conn.session.output() {
            Output::Bytes(bytes) if !bytes.is_empty() => {
                let mut buf = write_buf(held, spare);
                buf.extend_from_slice(&bytes[..bytes.len().min(WRITE_BUF)]);
                ring.send(token(key), conn.fd.as_fd(), buf)
            }
            Output::File { fd, offset, len } if len > 0 => {
                conn.wbuf = Some(held);
                // A turn's worth written (a fast client on a big file): the
                // poll, which fires at once while there is room, lets the
                // pass serve the other connections first.
                let sent = if from_files < FILE_TURN {
                    sendfile::send_file(conn.fd.as_fd(), fd, offset, len)
                } else {
                    Err(io::ErrorKind::WouldBlock.into())
                };
                match sent {
                    // A file shorter than the length the session promised.
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    // Written: go on with what follows.
                    Ok(n) => {
                        from_files += n;
                        conn.session.on_sent(n, Instant::now());
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        recycle(spare, conn.wbuf.take());
                        let watched = ring.watch_writable(token(key), conn.fd.as_fd());
                        if watched.is_err() {
                            conn.wbuf = Some(Vec::new());
                        }
                        return watched;
                    }
                    Err(e) => return Err(e),
                }
                continue;
            }
            _ => {
                // Drained: an idle connection keeps no write buffer.
                recycle(spare, Some(held));
                conn.wbuf = Some(Vec::new());
                return Ok(());
            }
        };
        if started.is_err() {
            // The buffer went with the refused operation.
            conn.wbuf = Some(Vec::new());
        }
        return started;
    }
}

/// An empty buffer for the next write: the one a response in progress holds,
/// else a spare (or a new one).
fn write_buf(held: Vec<u8>, spare: &mut Vec<Vec<u8>>) -> Vec<u8> {
    let mut buf = if held.capacity() > 0 {
        held
    } else {
        spare.pop().unwrap_or_else(|| Vec::with_capacity(WRITE_BUF))
    };
    buf.clear();
    buf
}
