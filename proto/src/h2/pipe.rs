//! The in-memory transport the `h2` crate is driven over: what the socket
//! gave goes in with [`Pipe::push`], what h2 wrote comes out with
//! [`Pipe::take_output`]. h2 owns one handle (its I/O object); the
//! connection keeps the other. A read with nothing buffered is `Pending`
//! (more comes with the next `push`, and the connection polls again then),
//! so no waker is ever needed: the core thread polls after every change.

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

#[derive(Default)]
struct Buffers {
    input: BytesMut,
    eof: bool,
    output: Vec<u8>,
}

/// One end of the transport; clones share the buffers (one thread only).
#[derive(Clone, Default)]
pub(crate) struct Pipe(Rc<RefCell<Buffers>>);

impl Pipe {
    /// Bytes from the peer.
    pub(crate) fn push(&self, data: &[u8]) {
        self.0.borrow_mut().input.extend_from_slice(data);
    }

    /// The peer ended its side: reads end once the input is taken.
    pub(crate) fn push_eof(&self) {
        self.0.borrow_mut().eof = true;
    }

    /// What h2 wrote since the last take.
    pub(crate) fn take_output(&self) -> Vec<u8> {
        std::mem::take(&mut self.0.borrow_mut().output)
    }

    pub(crate) fn has_output(&self) -> bool {
        !self.0.borrow().output.is_empty()
    }

    /// Bytes h2 wrote that are still to take.
    pub(crate) fn output_len(&self) -> usize {
        self.0.borrow().output.len()
    }

    /// Input bytes h2 has not read yet.
    pub(crate) fn unread(&self) -> usize {
        self.0.borrow().input.len()
    }
}

impl AsyncRead for Pipe {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut b = self.0.borrow_mut();
        if b.input.is_empty() {
            return if b.eof {
                Poll::Ready(Ok(())) // end of input: nothing filled
            } else {
                Poll::Pending
            };
        }
        let n = b.input.len().min(buf.remaining());
        buf.put_slice(&b.input[..n]);
        b.input.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Pipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.0.borrow_mut().output.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    fn read(pipe: &mut Pipe, room: usize) -> Poll<Vec<u8>> {
        let mut space = vec![0; room];
        let mut buf = ReadBuf::new(&mut space);
        let mut cx = Context::from_waker(Waker::noop());
        Pin::new(pipe)
            .poll_read(&mut cx, &mut buf)
            .map(|r| r.map(|()| buf.filled().to_vec()).unwrap())
    }

    #[test]
    fn reads_what_was_pushed_then_waits_then_ends() {
        let mut pipe = Pipe::default();
        assert!(read(&mut pipe, 8).is_pending());
        pipe.push(b"hello world");
        assert_eq!(read(&mut pipe, 5), Poll::Ready(b"hello".to_vec()));
        assert_eq!(pipe.unread(), 6);
        assert_eq!(read(&mut pipe, 64), Poll::Ready(b" world".to_vec()));
        assert!(read(&mut pipe, 8).is_pending());
        pipe.push_eof();
        assert_eq!(read(&mut pipe, 8), Poll::Ready(Vec::new()));
    }

    #[test]
    fn writes_are_taken_once() {
        let mut pipe = Pipe::default();
        let mut cx = Context::from_waker(Waker::noop());
        let n = Pin::new(&mut pipe).poll_write(&mut cx, b"abc");
        assert!(matches!(n, Poll::Ready(Ok(3))));
        assert!(pipe.has_output());
        assert_eq!(pipe.take_output(), b"abc");
        assert!(!pipe.has_output());
    }
}
