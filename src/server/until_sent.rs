//! What waits for a connection's output to be sent up to a point: a response
//! is done (its access log line written, its duration counted in the
//! metrics) when its last byte is handed to the kernel, not when it is
//! queued behind a client that reads slowly.

use std::collections::VecDeque;

/// Items in output order, each with the output offset just past its last
/// byte, and the count of bytes sent so far.
pub struct UntilSent<T> {
    sent: u64,
    waiting: VecDeque<(u64, T)>,
}

impl<T> Default for UntilSent<T> {
    fn default() -> Self {
        UntilSent {
            sent: 0,
            waiting: VecDeque::new(),
        }
    }
}

impl<T> UntilSent<T> {
    /// `item` is done once the byte `queued` bytes past what has been sent
    /// (what is queued now, its own bytes last) is sent.
    pub fn push(&mut self, queued: u64, item: T) {
        self.waiting.push_back((self.sent + queued, item));
    }

    /// `n` more bytes were sent.
    pub fn sent(&mut self, n: u64) {
        self.sent += n;
    }

    /// The oldest item whose last byte has been sent.
    pub fn pop_done(&mut self) -> Option<T> {
        match self.waiting.front() {
            Some((end, _)) if *end <= self.sent => self.waiting.pop_front().map(|(_, t)| t),
            _ => None,
        }
    }

    /// Everything still waiting (the connection ended), oldest first.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.waiting.drain(..).map(|(_, t)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_is_done_when_the_sends_pass_its_last_byte() {
        let mut u = UntilSent::default();
        u.push(10, "first");
        u.sent(4);
        u.push(6 + 5, "second"); // queued: the first's 6 bytes left, then 5
        u.sent(5);
        assert_eq!(u.pop_done(), None, "one byte of the first is still queued");
        u.sent(1);
        assert_eq!(u.pop_done(), Some("first"));
        assert_eq!(u.pop_done(), None);
        u.sent(4);
        assert_eq!(u.pop_done(), None);
        u.sent(1);
        assert_eq!(u.pop_done(), Some("second"));
        u.push(3, "third");
        assert_eq!(u.drain().collect::<Vec<_>>(), ["third"]);
    }
}
