//! The executor's inbox: new requests and woken request ids, queued by core
//! threads (without the GIL) and drained by the event loop thread.
//!
//! One wake fd (a socket pair: its read end is registered with the loop with
//! `add_reader`) tells the loop there is something to drain. A flag,
//! `signalled`, keeps it to one write per drain: a producer writes only when
//! it flips the flag from false to true, and the loop clears the flag *before*
//! it drains, so whatever is queued after the clear writes again and nothing
//! queued is left behind until a later, unrelated wake.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_queue::SegQueue;

/// Queues filled on core threads and drained on the loop thread.
pub struct Inbox<T> {
    /// New work (requests), in arrival order.
    pub(super) new: SegQueue<T>,
    /// Ids of requests whose conduit may let them make progress.
    pub(super) woken: SegQueue<u64>,
    /// Ids of requests that ran past `--request-timeout`, to cancel.
    pub(super) timed_out: SegQueue<u64>,
    signalled: AtomicBool,
    /// The loop's end: readable while a wake is pending.
    reader: UnixStream,
    writer: UnixStream,
}

impl<T> Inbox<T> {
    pub fn new() -> std::io::Result<Self> {
        let (reader, writer) = UnixStream::pair()?;
        reader.set_nonblocking(true)?;
        writer.set_nonblocking(true)?;
        Ok(Inbox {
            new: SegQueue::new(),
            woken: SegQueue::new(),
            timed_out: SegQueue::new(),
            signalled: AtomicBool::new(false),
            reader,
            writer,
        })
    }

    /// The descriptor the loop watches for reading.
    pub fn fd(&self) -> RawFd {
        self.reader.as_raw_fd()
    }

    /// Queue new work and wake the loop if it has not been woken yet.
    pub fn push(&self, item: T) {
        self.new.push(item);
        self.signal();
    }

    /// Request `id` may make progress: wake the loop for it.
    pub fn wake(&self, id: u64) {
        self.woken.push(id);
        self.signal();
    }

    /// Request `id` ran past `--request-timeout`: wake the loop to cancel it.
    pub fn time_out(&self, id: u64) {
        self.timed_out.push(id);
        self.signal();
    }

    fn signal(&self) {
        // AcqRel pairs with the loop's swap in `begin_drain`: what was pushed
        // before a swap that found the flag set is seen by that drain.
        if !self.signalled.swap(true, Ordering::AcqRel) {
            // A full socket buffer (EAGAIN) already holds a pending wake.
            let _ = (&self.writer).write(&[1]);
        }
    }

    /// The loop is about to drain: consume the pending wake bytes, THEN clear
    /// the flag (a push after the clear writes again). In the other order a
    /// producer could set the flag and write between the clear and the read:
    /// the read would eat its byte and leave the flag set with no byte
    /// pending, and every later push would skip its write - the loop asleep
    /// with work queued (seen under wrk as a server that stopped answering).
    pub fn begin_drain(&self) {
        let mut buf = [0u8; 64];
        loop {
            match (&self.reader).read(&mut buf) {
                Ok(n) if n == buf.len() => continue,
                Ok(_) => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break, // WouldBlock: nothing pending
            }
        }
        self.signalled.swap(false, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Whether a wake byte is waiting on the loop's end.
    fn readable(inbox: &Inbox<u32>) -> bool {
        let mut fds = libc::pollfd {
            fd: inbox.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid, exclusively borrowed pollfd; a zero timeout.
        unsafe { libc::poll(&mut fds, 1, 0) == 1 }
    }

    #[test]
    fn one_write_per_drain_and_nothing_left_behind() {
        let inbox = Inbox::new().unwrap();
        assert!(!readable(&inbox));
        inbox.push(1);
        inbox.push(2);
        inbox.wake(7);
        assert!(readable(&inbox));
        // One byte, not three: read it all and look for more.
        let mut buf = [0u8; 8];
        assert_eq!((&inbox.reader).read(&mut buf).unwrap(), 1);
        assert!(!readable(&inbox));
        // Drain: the flag cleared first, so a push afterwards wakes again.
        inbox.begin_drain();
        assert_eq!(
            (inbox.new.pop(), inbox.new.pop(), inbox.woken.pop()),
            (Some(1), Some(2), Some(7))
        );
        inbox.push(3);
        assert!(
            readable(&inbox),
            "a push after the drain began must wake the loop"
        );
        inbox.begin_drain();
        assert!(!readable(&inbox), "the drain consumed the wake");
        assert_eq!(inbox.new.pop(), Some(3));
    }

    #[test]
    fn concurrent_producers_never_strand_an_item() {
        let inbox = Arc::new(Inbox::<u32>::new().unwrap());
        let producers: Vec<_> = (0..4)
            .map(|t| {
                let inbox = inbox.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000 {
                        inbox.push(t * 100_000 + i);
                        // Spread the pushes out so that they interleave with
                        // the drains rather than finish before the first.
                        std::thread::yield_now();
                    }
                })
            })
            .collect();
        let mut got = 0;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while got < 80_000 {
            assert!(std::time::Instant::now() < deadline, "stranded: got {got}");
            // Like the loop: drain only when the wake fd says so. A second
            // with nothing readable while items are missing is a stranded wake
            // (a drain that cleared the flag before reading the wake bytes
            // fails here).
            let mut fds = libc::pollfd {
                fd: inbox.fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, bounded timeout.
            let ready = unsafe { libc::poll(&mut fds, 1, 1000) } == 1;
            assert!(
                ready,
                "stranded: {got} of 80000 delivered and no wake pending"
            );
            inbox.begin_drain();
            while inbox.new.pop().is_some() {
                got += 1;
            }
        }
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(got, 80_000);
    }
}
