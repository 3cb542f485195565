//! A session's output queue: what is to be written, in order, pipelined
//! answers and file bodies included, and how many bytes that is.
//!
//! Small writes are gathered into one buffer (one write for a small answer);
//! a big body piece is queued as it came and lent to the backend for its
//! write rather than copied ([`OutputQueue::lend`]).

use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::AsRawFd;

use bytes::Bytes;

use crate::app::piece::WHOLE_PIECE;
use crate::backend::Output;

/// Queued output past which a connection stops reading (and parsing pipelined
/// requests) until the client has taken some: a client that pipelines without
/// reading cannot make the server buffer without bound.
pub(super) const OUTPUT_HIGH_WATER: usize = 1 << 20;

/// A piece of queued output.
pub(super) enum Chunk {
    /// Bytes written here (heads, framing, small bodies, replies, WebSocket
    /// frames), gathered while the last one is short.
    Bytes { buf: Vec<u8>, pos: usize },
    /// A body piece of [`WHOLE_PIECE`] or more, queued as it came (the
    /// application's own bytes, [`crate::app::piece`]), never grown.
    Piece { buf: Bytes, pos: usize },
    /// A piece whose buffer is lent to the backend for a write in flight (a
    /// `Piece`, or `Bytes` of [`WHOLE_PIECE`] or more, which comes back a `Piece`).
    Lent { pos: usize },
    File {
        file: File,
        offset: u64,
        remaining: u64,
    },
}

/// The chunks to write and their bytes (file bodies counted too).
#[derive(Default)]
pub(super) struct OutputQueue {
    chunks: VecDeque<Chunk>,
    queued: u64,
}

impl OutputQueue {
    /// Bytes queued and not yet written.
    pub(super) fn queued(&self) -> u64 {
        self.queued
    }

    pub(super) fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// Whether enough is queued that the session stops reading.
    pub(super) fn full(&self) -> bool {
        self.queued >= OUTPUT_HIGH_WATER as u64
    }

    /// Queue `bytes`, gathered into the last chunk while that is short (a
    /// lent chunk, or one of [`WHOLE_PIECE`] or more, is never grown).
    pub(super) fn push_bytes(&mut self, bytes: Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        self.queued += bytes.len() as u64;
        match self.chunks.back_mut() {
            Some(Chunk::Bytes { buf, .. }) if buf.len() < WHOLE_PIECE => {
                buf.extend_from_slice(&bytes)
            }
            _ => self.chunks.push_back(Chunk::Bytes { buf: bytes, pos: 0 }),
        }
    }

    /// Queue a chunk of its own (a file or a piece) of `len` bytes.
    pub(super) fn push_whole(&mut self, len: u64, chunk: Chunk) {
        self.queued += len;
        self.chunks.push_back(chunk);
    }

    /// Drop everything queued (the connection closed).
    pub(super) fn clear(&mut self) {
        self.chunks.clear();
        self.queued = 0;
    }

    /// What the backend is to write next.
    pub(super) fn next(&self) -> Output<'_> {
        match self.chunks.front() {
            // The lent buffer's write is in flight: nothing more meanwhile.
            None | Some(Chunk::Lent { .. }) => Output::None,
            Some(Chunk::Bytes { buf, pos }) => Output::Bytes(&buf[*pos..]),
            Some(Chunk::Piece { buf, pos }) => Output::Bytes(&buf[*pos..]),
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

    /// Lend the front chunk's buffer for a write in flight, when it is a
    /// big one: the backend writes it without a copy.
    pub(super) fn lend(&mut self) -> Option<(Bytes, usize)> {
        // The rest of one too: a partial send leaves it lent as it was.
        let (buf, pos) = match self.chunks.front_mut() {
            Some(Chunk::Piece { buf, pos }) => (std::mem::take(buf), *pos),
            // Written here but as big (a WebSocket frame, a reply, gathered
            // output): lent the same way, the Vec handed over, not copied.
            Some(Chunk::Bytes { buf, pos }) if buf.len() >= WHOLE_PIECE => {
                (Bytes::from(std::mem::take(buf)), *pos)
            }
            _ => return None,
        };
        self.chunks[0] = Chunk::Lent { pos };
        Some((buf, pos))
    }

    /// A lent buffer came back; false if the queue was dropped meanwhile
    /// (then its write counts for nothing).
    pub(super) fn give_back(&mut self, buf: Bytes) -> bool {
        if let Some(&Chunk::Lent { pos }) = self.chunks.front() {
            self.chunks[0] = Chunk::Piece { buf, pos };
            return true;
        }
        false
    }

    /// `n` bytes of the front chunk were written.
    pub(super) fn sent(&mut self, n: usize) {
        self.queued -= n as u64;
        let finished = match self.chunks.front_mut() {
            None | Some(Chunk::Lent { .. }) => false,
            Some(Chunk::Bytes { buf, pos }) => {
                *pos += n;
                *pos >= buf.len()
            }
            Some(Chunk::Piece { buf, pos }) => {
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
            self.chunks.pop_front();
        }
    }
}
