//! The receive buffers a ring lends its recvs: a provided-buffer ring
//! (IORING_REGISTER_PBUF_RING, Linux 5.19).
//!
//! A recv armed with buffer selection holds no memory while it waits: the
//! kernel takes a buffer from this ring only when bytes arrive, and the
//! completion says which. An idle keep-alive connection with its recv armed
//! therefore costs no receive buffer at all (it cost 16 KiB when each recv
//! carried its own); a buffer is out only between the completion that filled
//! it and [`Pool::give_back`], which the caller does as soon as the bytes
//! are consumed.
//!
//! The pool starts small and doubles when a recv finds it empty (ENOBUFS),
//! up to the ring's size: it holds as many buffers as the most receives one
//! pass has had to hold at once, not one per connection.
//!
//! Memory rule: the entries and the buffers are heap blocks owned here and
//! never moved or freed while the ring is registered with the kernel. The
//! kernel writes into a buffer only after it was published at the tail and
//! before its completion hands it back; a buffer handed back by a completion
//! is the caller's alone (read through [`Pool::bytes`]) until given back.

use std::alloc::{self, Layout};
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;
use io_uring::IoUring;

/// The buffer group the ring's recvs select from (one pool per ring).
pub(crate) const GROUP: u16 = 0;

/// Bytes received into one of the pool's buffers (`len` may be 0: end of
/// stream). It must go back with [`crate::Ring::give_back`]; one dropped
/// instead leaves the pool one buffer short until the ring is dropped.
#[derive(Debug)]
#[must_use = "a received buffer must be given back to the ring"]
pub struct Received {
    /// None: nothing arrived (end of stream) and no buffer was taken.
    pub(crate) bid: Option<u16>,
    pub(crate) len: usize,
}

impl Received {
    /// How many bytes arrived (0: the peer closed its sending side).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The registered ring of entries and the buffers published in it.
pub(crate) struct Pool {
    /// `entries` ring slots, page-aligned (the kernel maps them by address).
    ring: *mut BufRingEntry,
    entries: u16,
    /// Where the next buffer is published (the kernel reads it from the
    /// ring's shared tail field).
    tail: u16,
    size: usize,
    /// The buffers, by id; each a heap block that never moves.
    bufs: Vec<Box<[u8]>>,
    registered: bool,
}

impl Pool {
    /// Register a pool of up to `entries` buffers (a power of two, at most
    /// 32768) of `size` bytes, `initial` of them published at once.
    pub(crate) fn register(
        ring: &IoUring,
        entries: u16,
        initial: u16,
        size: usize,
    ) -> io::Result<Pool> {
        if !entries.is_power_of_two() || entries > 1 << 15 || initial == 0 || initial > entries {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a buffer ring has a power of two entries (at most 32768)",
            ));
        }
        let layout = Self::layout(entries);
        // SAFETY: the layout has a non-zero size; zeroed memory is a valid
        // ring (tail 0, no entries published).
        let mem = unsafe { alloc::alloc_zeroed(layout) }.cast::<BufRingEntry>();
        if mem.is_null() {
            alloc::handle_alloc_error(layout);
        }
        let mut pool = Pool {
            ring: mem,
            entries,
            tail: 0,
            size,
            bufs: Vec::new(),
            registered: false,
        };
        // SAFETY: `mem` is a page-aligned block of `entries` entries that
        // this pool owns and frees only after unregistering (Drop).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(mem as u64, entries, GROUP, 0)
        }
        .map_err(|e| match e.raw_os_error() {
            // The first thing a kernel older than 5.19 refuses: say so, not "Invalid argument".
            Some(libc::EINVAL) => io::Error::new(
                io::ErrorKind::Unsupported,
                "the kernel lacks provided buffer rings (IORING_REGISTER_PBUF_RING, Linux 5.19)",
            ),
            _ => e,
        })?;
        pool.registered = true;
        pool.grow_by(initial);
        Ok(pool)
    }

    fn layout(entries: u16) -> Layout {
        let size = usize::from(entries) * std::mem::size_of::<BufRingEntry>();
        Layout::from_size_align(size, 4096).expect("a valid ring layout")
    }

    /// Buffers made so far.
    pub(crate) fn len(&self) -> usize {
        self.bufs.len()
    }

    /// The pool ran dry: double it (up to the ring's size).
    pub(crate) fn grow(&mut self) {
        let room = usize::from(self.entries) - self.bufs.len();
        self.grow_by(self.bufs.len().min(room) as u16);
    }

    fn grow_by(&mut self, n: u16) {
        for _ in 0..n {
            let bid = self.bufs.len() as u16;
            self.bufs.push(vec![0; self.size].into_boxed_slice());
            self.publish(bid);
        }
        self.commit();
    }

    /// The bytes a completion received into buffer `r.bid`.
    pub(crate) fn bytes(&self, r: &Received) -> &[u8] {
        match r.bid {
            Some(bid) => &self.bufs[usize::from(bid)][..r.len],
            None => &[],
        }
    }

    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Publish a buffer again once its bytes are consumed.
    pub(crate) fn give_back(&mut self, bid: u16) {
        self.publish(bid);
        self.commit();
    }

    /// Write buffer `bid` into the next ring slot (seen by the kernel at [`Pool::commit`]).
    fn publish(&mut self, bid: u16) {
        let buf = &mut self.bufs[usize::from(bid)];
        let slot = usize::from(self.tail & (self.entries - 1));
        // SAFETY: `slot` < `entries`, inside the block this pool owns. The
        // kernel reads only slots between its head and the published tail,
        // and this one is past the tail until `commit`: at most `entries`
        // buffers exist, so the slot's previous buffer has been taken.
        let entry = unsafe { &mut *self.ring.add(slot) };
        entry.set_addr(buf.as_mut_ptr() as u64);
        entry.set_len(buf.len() as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Make the published slots visible to the kernel.
    fn commit(&mut self) {
        // SAFETY: the tail field is the 16 bits at offset 14 of slot 0, in the
        // block this pool owns; the kernel reads it concurrently, so it is
        // written atomically, after the entries (release).
        let tail = unsafe { &*(BufRingEntry::tail(self.ring) as *const AtomicU16) };
        tail.store(self.tail, Ordering::Release);
    }

    /// Unregister from `ring` (no operation that selects a buffer may be in
    /// flight): the memory may then be freed.
    pub(crate) fn unregister(&mut self, ring: &IoUring) {
        if self.registered && ring.submitter().unregister_buf_ring(GROUP).is_ok() {
            self.registered = false;
        }
    }
}

impl Drop for Pool {
    /// Freed only once the kernel let go of it; still registered (a ring
    /// dropped with a recv it could not cancel), it is leaked instead.
    fn drop(&mut self) {
        if self.registered {
            std::mem::forget(std::mem::take(&mut self.bufs));
            return;
        }
        // SAFETY: allocated in `register` with this very layout; unregistered.
        unsafe { alloc::dealloc(self.ring.cast(), Self::layout(self.entries)) };
    }
}
