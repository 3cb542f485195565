//! A flood meter over the client's raw frames, beside h2 (which parses them
//! for real). Frames that cost the server work but carry nothing for an
//! application — SETTINGS, PING, PRIORITY, WINDOW_UPDATE, RST_STREAM, empty
//! DATA, unknown types (the 2019 floods, CVE-2019-9512/9515/9518) — are
//! allowed in proportion to those that do, as nginx allows them: the bytes
//! of all frames, over 8, may exceed the payload of HEADERS, CONTINUATION
//! and DATA frames (plus what the server sent, which window updates follow)
//! by at most a budget. h2 bounds each kind's memory; this bounds the CPU a
//! connection can make the server spend on nothing.

/// The client's connection preface, which is not a frame.
const PREFACE_LEN: usize = 24;
const FRAME_HEADER: usize = 9;

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;

/// The meter: fed every byte the client sends, in order.
#[derive(Debug, Clone)]
pub struct FloodMeter {
    /// Bytes beyond the useful ones allowed before it trips (None: never).
    budget: Option<u64>,
    preface_left: usize,
    header: [u8; FRAME_HEADER],
    header_len: usize,
    payload_left: usize,
    total: u64,
    useful: u64,
}

impl FloodMeter {
    pub fn new(budget: Option<u64>) -> FloodMeter {
        FloodMeter {
            budget,
            preface_left: PREFACE_LEN,
            header: [0; FRAME_HEADER],
            header_len: 0,
            payload_left: 0,
            total: 0,
            useful: 0,
        }
    }

    /// The server sent `n` answer bytes: the client's WINDOW_UPDATEs for
    /// them are useful.
    pub fn sent(&mut self, n: usize) {
        self.useful = self.useful.saturating_add(n as u64 / 16);
    }

    /// Count `data`; true once the connection is a flood.
    pub fn feed(&mut self, mut data: &[u8]) -> bool {
        let skip = self.preface_left.min(data.len());
        self.preface_left -= skip;
        data = &data[skip..];
        while !data.is_empty() {
            if self.payload_left > 0 {
                let n = self.payload_left.min(data.len());
                self.payload_left -= n;
                data = &data[n..];
                continue;
            }
            let n = (FRAME_HEADER - self.header_len).min(data.len());
            self.header[self.header_len..self.header_len + n].copy_from_slice(&data[..n]);
            self.header_len += n;
            data = &data[n..];
            if self.header_len == FRAME_HEADER {
                self.header_len = 0;
                self.frame();
            }
        }
        self.flooded()
    }

    /// One frame's header is whole: count it.
    fn frame(&mut self) {
        let h = &self.header;
        let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
        let (kind, flags) = (h[3], h[4]);
        self.payload_left = len;
        self.total += (FRAME_HEADER + len) as u64;
        self.useful += match kind {
            HEADERS | CONTINUATION => len as u64,
            DATA if len > 0 => len as u64,
            // An empty DATA that ends a body is how many clients end one.
            DATA if flags & END_STREAM != 0 => FRAME_HEADER as u64,
            _ => 0,
        };
    }

    pub fn flooded(&self) -> bool {
        self.budget
            .is_some_and(|budget| self.total / 8 > self.useful.saturating_add(budget))
    }

    /// For the log: every frame's bytes, and the useful ones'.
    pub fn counts(&self) -> (u64, u64) {
        (self.total, self.useful)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn preface() -> Vec<u8> {
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec()
    }

    #[test]
    fn frames_that_carry_nothing_trip_it_past_the_budget() {
        for (kind, payload) in [
            (0x4u8, vec![]),         // SETTINGS
            (0x6, vec![0; 8]),       // PING
            (0x2, vec![0; 5]),       // PRIORITY
            (0x8, vec![0, 0, 0, 1]), // WINDOW_UPDATE
            (DATA, vec![]),          // empty DATA
            (0xFA, vec![1, 2, 3]),   // unknown
        ] {
            let mut m = FloodMeter::new(Some(1024));
            assert!(!m.feed(&preface()));
            let one = frame(kind, 0, 1, &payload);
            let mut sent = 0;
            while !m.feed(&one) {
                sent += 1;
                assert!(sent < 10_000, "kind {kind:#x} never tripped");
            }
            // Past 8 x 1 KiB of them, not before.
            assert!(
                (sent + 1) * one.len() > 8 * 1024,
                "kind {kind:#x} tripped at {sent}"
            );
            assert!(sent * one.len() <= 8 * 1024 + one.len() * 8);
        }
    }

    #[test]
    fn requests_bodies_and_what_was_sent_pay_for_the_overhead() {
        let mut m = FloodMeter::new(Some(1024));
        m.feed(&preface());
        for i in 0..10_000u32 {
            // A request, its body ending with an empty DATA, a window update.
            let mut bytes = frame(HEADERS, 0x4, 2 * i + 1, &[0x82; 20]);
            bytes.extend(frame(DATA, 0, 2 * i + 1, &[7; 100]));
            bytes.extend(frame(DATA, END_STREAM, 2 * i + 1, &[]));
            bytes.extend(frame(0x8, 0, 0, &[0, 0, 0x40, 0]));
            // Fed a byte at a time now and then: headers split across reads.
            if i % 100 == 0 {
                for b in &bytes {
                    assert!(!m.feed(std::slice::from_ref(b)));
                }
            } else {
                assert!(!m.feed(&bytes));
            }
        }
        // Window updates alone, paid for by a large answer.
        let mut m = FloodMeter::new(Some(1024));
        m.feed(&preface());
        for _ in 0..100_000 {
            m.sent(16 * 1024);
            assert!(!m.feed(&frame(0x8, 0, 0, &[0, 0, 0x40, 0])));
        }
    }

    #[test]
    fn without_a_budget_it_never_trips() {
        let mut m = FloodMeter::new(None);
        m.feed(&preface());
        for _ in 0..100_000 {
            assert!(!m.feed(&frame(0x4, 0, 0, &[])));
        }
        assert_eq!(m.counts(), (900_000, 0));
    }
}
