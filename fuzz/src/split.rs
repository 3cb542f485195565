//! Where the split-invariance targets cut their input: the fuzzer chooses.
//!
//! Input layout: byte 0's low nibble is the number of cuts `n`; the next `n`
//! bytes are the lengths of the first `n` pieces (0 read as 1); the rest is
//! the payload, and what the lengths leave of it is the last piece. A seed
//! taken from a test is its bytes behind a 0 byte (no cuts).

/// The payload and the pieces the fuzzer cut it into.
pub struct Split<'a> {
    pub payload: &'a [u8],
    pub pieces: Vec<&'a [u8]>,
}

impl<'a> Split<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        let Some((&first, rest)) = data.split_first() else {
            return Split {
                payload: data,
                pieces: Vec::new(),
            };
        };
        let n = usize::from(first & 0x0F).min(rest.len());
        let (lengths, payload) = rest.split_at(n);
        let mut pieces = Vec::with_capacity(n + 1);
        let mut left = payload;
        for &len in lengths {
            let (piece, tail) = left.split_at(usize::from(len.max(1)).min(left.len()));
            pieces.push(piece);
            left = tail;
        }
        pieces.push(left);
        Split { payload, pieces }
    }

    /// The ways of feeding the payload that must all give the same result:
    /// whole, in the fuzzer's pieces, and one byte at a time.
    pub fn feeds(&self) -> [Vec<&'a [u8]>; 3] {
        [
            vec![self.payload],
            self.pieces.clone(),
            self.payload.chunks(1).collect(),
        ]
    }
}
