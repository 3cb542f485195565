//! Incremental UTF-8 validation of a text message as its bytes arrive
//! (RFC 6455 §8.1), so an invalid one fails at the byte that makes it invalid
//! rather than at the end of the message (Autobahn section 6, "fail fast").
//!
//! The check works on the message buffer itself: everything before `valid`
//! is complete, valid UTF-8; what follows is at most 3 bytes that begin a
//! character still being received. std's validator does the work: it already
//! tells "invalid here" (`error_len` is `Some`) from "ends in the middle of a
//! character" (`None`), and it checks the second byte's range (no overlongs,
//! surrogates or code points past U+10FFFF), so errors show at the first bad byte.

/// Where the validated part of a growing message ends.
#[derive(Debug, Default)]
pub struct Utf8Check {
    valid: usize,
}

/// The bytes can never be UTF-8, whatever follows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Invalid;

impl Utf8Check {
    /// `message` grew (its earlier bytes unchanged): checks what was added.
    pub fn feed(&mut self, message: &[u8]) -> Result<(), Invalid> {
        match std::str::from_utf8(&message[self.valid..]) {
            Ok(_) => self.valid = message.len(),
            Err(e) if e.error_len().is_none() => self.valid += e.valid_up_to(),
            Err(_) => return Err(Invalid),
        }
        Ok(())
    }

    /// Starts over for the next message.
    pub fn reset(&mut self) {
        self.valid = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `bytes` one at a time; the index of the byte that failed, if any.
    fn fails_at(bytes: &[u8]) -> Option<usize> {
        let mut check = Utf8Check::default();
        (1..=bytes.len()).find(|&end| check.feed(&bytes[..end]).is_err())
    }

    #[test]
    fn valid_text_passes_byte_by_byte() {
        let text = "Hello-µ@ßöäüàá-UTF-8!! κόσμε 𝄞 \u{10FFFF}";
        assert_eq!(fails_at(text.as_bytes()), None);
    }

    #[test]
    fn invalid_sequences_fail_at_their_first_bad_byte() {
        // A lone continuation byte.
        assert_eq!(fails_at(b"ab\x80cd"), Some(3));
        // A surrogate (U+D800): refused at its second byte.
        assert_eq!(fails_at(b"\xce\xba\xed\xa0\x80"), Some(4));
        // Past U+10FFFF: refused at the second byte.
        assert_eq!(fails_at(b"\xf4\x90\x80\x80"), Some(2));
        // Overlong encodings.
        assert_eq!(fails_at(b"\xc0\xaf"), Some(1));
        assert_eq!(fails_at(b"\xe0\x80\xaf"), Some(2));
        // Bytes that never appear in UTF-8.
        assert_eq!(fails_at(b"x\xfe"), Some(2));
        assert_eq!(fails_at(b"x\xf5"), Some(2));
        // A character cut short by the next one.
        assert_eq!(fails_at(b"\xe2\x82a"), Some(3));
    }

    #[test]
    fn an_incomplete_tail_is_not_an_error_yet() {
        let mut check = Utf8Check::default();
        assert_eq!(check.feed(b"a\xf0\x9d"), Ok(()));
        assert_eq!(check.valid, 1);
        assert_eq!(check.feed(b"a\xf0\x9d\x84\x9e"), Ok(()));
        assert_eq!(check.valid, 5);
        check.reset();
        assert_eq!(check.feed(b"\x80"), Err(Invalid));
    }
}
