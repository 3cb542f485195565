//! The user_data every operation carries: what it is and whose it is.
//!
//! A completion names its operation only by the 64 bits it was submitted
//! with, so those bits say the operation's [`Kind`], the connection slot it
//! belongs to and that slot's generation. A slot is reused once its
//! connection closes; the generation tells a late completion for the old
//! connection from one for the new.

/// What an operation is: the top 8 bits of its user_data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub(crate) enum Kind {
    Accept = 1,
    Recv = 2,
    Send = 3,
    Timer = 5,
    Wake = 6,
    /// A cancel request (AsyncCancel or TimeoutRemove): its own completion
    /// carries nothing; the cancelled operation completes on its own.
    Cancel = 7,
    /// A poll for the peer's hang-up ([`crate::Ring::watch_hangup`]).
    Poll = 8,
    /// A poll for room to write ([`crate::Ring::watch_writable`]).
    Writable = 9,
}

impl Kind {
    fn from_bits(bits: u8) -> Option<Kind> {
        Some(match bits {
            1 => Kind::Accept,
            2 => Kind::Recv,
            3 => Kind::Send,
            5 => Kind::Timer,
            6 => Kind::Wake,
            7 => Kind::Cancel,
            8 => Kind::Poll,
            9 => Kind::Writable,
            _ => return None,
        })
    }
}

/// Whose operation it is: a connection slot and the slot's generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Token {
    slot: u32,
    generation: u32,
}

impl Token {
    /// Bits of the generation that fit in the user_data (it wraps within them).
    pub const GENERATION_BITS: u32 = 24;
    const GENERATION_MASK: u32 = (1 << Self::GENERATION_BITS) - 1;

    /// The token of `slot` in its `generation` (kept modulo 2^24).
    pub fn new(slot: u32, generation: u32) -> Token {
        Token {
            slot,
            generation: generation & Self::GENERATION_MASK,
        }
    }

    pub fn slot(self) -> u32 {
        self.slot
    }

    pub fn generation(self) -> u32 {
        self.generation
    }

    /// The generation a slot takes when it is reused after `generation`.
    pub fn next_generation(generation: u32) -> u32 {
        generation.wrapping_add(1) & Self::GENERATION_MASK
    }
}

/// `kind` in bits 56..64, the generation in 32..56, the slot in 0..32.
pub(crate) fn encode(kind: Kind, token: Token) -> u64 {
    (kind as u64) << 56 | (token.generation as u64) << 32 | token.slot as u64
}

pub(crate) fn decode(user_data: u64) -> Option<(Kind, Token)> {
    let kind = Kind::from_bits((user_data >> 56) as u8)?;
    let token = Token::new(user_data as u32, (user_data >> 32) as u32);
    Some((kind, token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_round_trips_kind_slot_and_generation() {
        let t = Token::new(0xdead_beef, 0x00ab_cdef);
        let ud = encode(Kind::Send, t);
        assert_eq!(decode(ud), Some((Kind::Send, t)));
        assert_ne!(
            encode(Kind::Recv, t),
            ud,
            "the kind is part of the user_data"
        );
        assert_ne!(encode(Kind::Send, Token::new(0xdead_beef, 0x00ab_cdee)), ud);
    }

    #[test]
    fn generations_wrap_within_their_bits() {
        let last = (1 << Token::GENERATION_BITS) - 1;
        assert_eq!(Token::next_generation(last), 0);
        assert_eq!(Token::new(1, last + 1).generation(), 0);
        assert_eq!(Token::next_generation(7), 8);
    }

    #[test]
    fn unknown_kinds_are_not_decoded() {
        assert_eq!(decode(0), None);
        assert_eq!(decode(0xff << 56), None);
    }
}
