//! Frames (RFC 6455 §5.2): headers parsed from what a client sent, headers
//! written for what the server sends, and payload masking (§5.3).
//!
//! A server sees only client frames, so parsing enforces the client's rules:
//! every frame masked (§5.1), no RSV2 or RSV3 (no extension we negotiate
//! gives them a meaning; RSV1 is reported, for the connection to judge by
//! permessage-deflate's rules), a known opcode, control frames final and at most 125 bytes
//! (§5.5), and a 64-bit length with its top bit clear. Lengths in a longer
//! form than needed are accepted: the RFC says "minimal number of bytes MUST
//! be used" but receivers gain nothing by refusing them. Each violation is a
//! [`FrameError`], answered with close code 1002. Server frames are never
//! masked (§5.1), and always final here: messages go out in one frame
//! (RSV1 set on one that is compressed, [`write_compressed_frame`]).

use super::close::{ProtocolError, PROTOCOL_ERROR};

/// The most payload a control frame may carry (§5.5).
pub const MAX_CONTROL_PAYLOAD: usize = 125;

/// The opcodes' values on the wire (§5.2). [`OpCode`] reads and writes
/// them; [`client_frame`] takes any byte, a reserved one included.
pub mod opcode {
    pub const CONTINUATION: u8 = 0x0;
    pub const TEXT: u8 = 0x1;
    pub const BINARY: u8 = 0x2;
    pub const CLOSE: u8 = 0x8;
    pub const PING: u8 = 0x9;
    pub const PONG: u8 = 0xA;
}

/// A frame's opcode (§5.2); the reserved ones are refused when parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpCode {
    Continuation,
    Text,
    Binary,
    Close,
    Ping,
    Pong,
}

impl OpCode {
    fn from_bits(bits: u8) -> Option<OpCode> {
        Some(match bits {
            opcode::CONTINUATION => OpCode::Continuation,
            opcode::TEXT => OpCode::Text,
            opcode::BINARY => OpCode::Binary,
            opcode::CLOSE => OpCode::Close,
            opcode::PING => OpCode::Ping,
            opcode::PONG => OpCode::Pong,
            _ => return None,
        })
    }

    /// The 4-bit value on the wire.
    pub fn bits(self) -> u8 {
        match self {
            OpCode::Continuation => opcode::CONTINUATION,
            OpCode::Text => opcode::TEXT,
            OpCode::Binary => opcode::BINARY,
            OpCode::Close => opcode::CLOSE,
            OpCode::Ping => opcode::PING,
            OpCode::Pong => opcode::PONG,
        }
    }

    /// Close, Ping and Pong: they may arrive between the fragments of a message.
    pub fn is_control(self) -> bool {
        matches!(self, OpCode::Close | OpCode::Ping | OpCode::Pong)
    }
}

/// A client frame's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// The last frame of its message.
    pub fin: bool,
    pub opcode: OpCode,
    /// The masking key the payload is XORed with.
    pub mask: [u8; 4],
    /// The payload's length (below 2^63).
    pub len: u64,
    /// RSV1: with permessage-deflate, the first frame of a compressed message.
    pub rsv1: bool,
}

/// A client frame that breaks the framing rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// RSV2 or RSV3 set (no extension gives them a meaning), or RSV1 where
    /// permessage-deflate was not negotiated or does not allow it.
    ReservedBits,
    /// One of the reserved opcodes (3-7, B-F).
    UnknownOpcode(u8),
    /// The MASK bit is clear: clients must mask every frame.
    Unmasked,
    /// A 64-bit length with its most significant bit set.
    LengthOverflow,
    /// A control frame with more than 125 bytes of payload.
    ControlTooLong,
    /// A control frame without FIN.
    ControlFragmented,
}

impl FrameError {
    pub fn reason(self) -> &'static str {
        match self {
            FrameError::ReservedBits => "reserved bits set",
            FrameError::UnknownOpcode(_) => "unknown opcode",
            FrameError::Unmasked => "unmasked client frame",
            FrameError::LengthOverflow => "frame length out of range",
            FrameError::ControlTooLong => "control frame longer than 125 bytes",
            FrameError::ControlFragmented => "fragmented control frame",
        }
    }
}

impl From<FrameError> for ProtocolError {
    fn from(e: FrameError) -> Self {
        ProtocolError::new(PROTOCOL_ERROR, e.reason())
    }
}

/// Parses the header of a client frame at the start of `buf`: the header and
/// its size in bytes, or `None` until enough bytes have arrived. Errors are
/// reported as soon as the bytes that show them are there (fail fast).
pub fn parse_client_header(buf: &[u8]) -> Result<Option<(FrameHeader, usize)>, FrameError> {
    let [b0, b1, ref rest @ ..] = *buf else {
        return Ok(None);
    };
    if b0 & 0x30 != 0 {
        return Err(FrameError::ReservedBits);
    }
    let opcode = OpCode::from_bits(b0 & 0x0F).ok_or(FrameError::UnknownOpcode(b0 & 0x0F))?;
    let fin = b0 & 0x80 != 0;
    let short = b1 & 0x7F;
    if opcode.is_control() {
        if !fin {
            return Err(FrameError::ControlFragmented);
        }
        if usize::from(short) > MAX_CONTROL_PAYLOAD {
            return Err(FrameError::ControlTooLong);
        }
    }
    if b1 & 0x80 == 0 {
        return Err(FrameError::Unmasked);
    }
    let (len, rest) = match short {
        126 => match *rest {
            [a, b, ref rest @ ..] => (u64::from(u16::from_be_bytes([a, b])), rest),
            _ => return Ok(None),
        },
        127 => {
            if rest.first().is_some_and(|&b| b & 0x80 != 0) {
                return Err(FrameError::LengthOverflow);
            }
            match *rest {
                [a, b, c, d, e, f, g, h, ref rest @ ..] => {
                    (u64::from_be_bytes([a, b, c, d, e, f, g, h]), rest)
                }
                _ => return Ok(None),
            }
        }
        n => (u64::from(n), rest),
    };
    let [m0, m1, m2, m3, ref payload @ ..] = *rest else {
        return Ok(None);
    };
    let header = FrameHeader {
        fin,
        opcode,
        mask: [m0, m1, m2, m3],
        len,
        rsv1: b0 & 0x40 != 0,
    };
    Ok(Some((header, buf.len() - payload.len())))
}

/// XORs `data` with `mask` (§5.3), where `data` starts `offset` bytes into
/// the frame's payload (a payload unmasked piece by piece as it arrives).
/// Eight bytes at a time: this runs over every byte a client sends.
pub fn apply_mask(data: &mut [u8], mask: [u8; 4], offset: u64) {
    let mut m = mask;
    m.rotate_left((offset % 4) as usize);
    let wide = u64::from_ne_bytes([m[0], m[1], m[2], m[3], m[0], m[1], m[2], m[3]]);
    let mut chunks = data.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        chunk.copy_from_slice(&(u64::from_ne_bytes(word) ^ wide).to_ne_bytes());
    }
    // Whole words consumed a multiple of 4 bytes, so the key's phase is unchanged.
    for (b, k) in chunks.into_remainder().iter_mut().zip(m.iter().cycle()) {
        *b ^= k;
    }
}

/// Appends an unmasked (server) frame header for a payload of `len` bytes,
/// in the shortest length form.
pub fn write_header(out: &mut Vec<u8>, fin: bool, opcode: OpCode, len: usize) {
    put_header(out, (u8::from(fin) << 7) | opcode.bits(), 0, len);
}

/// The length of an unmasked (server) frame's header for a `len`-byte
/// payload: the length's shortest form decides it (see [`put_header`]).
pub fn header_len(len: usize) -> usize {
    match len {
        0..=125 => 2,
        126..=0xffff => 4,
        _ => 10,
    }
}

/// The header's first byte as given, then the length in the shortest form
/// with `mask_bit` (0x80 for a client frame, 0 for a server's) on its byte.
fn put_header(out: &mut Vec<u8>, b0: u8, mask_bit: u8, len: usize) {
    match header_len(len) {
        2 => out.extend_from_slice(&[b0, mask_bit | len as u8]),
        4 => {
            let [a, b] = (len as u16).to_be_bytes();
            out.extend_from_slice(&[b0, mask_bit | 126, a, b]);
        }
        _ => {
            out.extend_from_slice(&[b0, mask_bit | 127]);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
}

/// Appends a whole, final, unmasked frame.
pub fn write_frame(out: &mut Vec<u8>, opcode: OpCode, payload: &[u8]) {
    out.reserve(10 + payload.len());
    write_header(out, true, opcode, payload.len());
    out.extend_from_slice(payload);
}

/// Appends a whole, final, unmasked data frame whose payload is `payload`
/// deflated (permessage-deflate, RSV1 set), or the plain frame where
/// deflating did not make it smaller (§6: each message chooses).
pub fn write_compressed_frame(out: &mut Vec<u8>, opcode: OpCode, payload: &[u8]) {
    let mut packed = Vec::new();
    super::deflate::deflate(payload, &mut packed);
    if packed.len() >= payload.len() {
        return write_frame(out, opcode, payload);
    }
    out.reserve(10 + packed.len());
    put_header(out, 0x80 | 0x40 | opcode.bits(), 0, packed.len());
    out.extend_from_slice(&packed);
}

/// The client side, for test peers and load clients (`examples/ws_bench.rs`):
/// appends a whole, final frame masked with `mask` (§5.3; a client must mask).
pub fn write_client_frame(out: &mut Vec<u8>, opcode: OpCode, payload: &[u8], mask: [u8; 4]) {
    put_masked(out, 0x80 | opcode.bits(), payload, mask);
}

/// A masked frame whose first byte is `b0` (any FIN/RSV/opcode bits).
fn put_masked(out: &mut Vec<u8>, b0: u8, payload: &[u8], mask: [u8; 4]) {
    out.reserve(14 + payload.len());
    put_header(out, b0, 0x80, payload.len());
    out.extend_from_slice(&mask);
    let start = out.len();
    out.extend_from_slice(payload);
    apply_mask(&mut out[start..], mask, 0);
}

/// A server frame's header, as a client reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerHeader {
    pub fin: bool,
    /// The 4-bit opcode as sent (unchecked: the reader decides).
    pub opcode: u8,
    /// Set on a frame no server may send (§5.1); the reader refuses it.
    pub masked: bool,
    pub len: u64,
}

/// The client side: parses the header of a server frame at the start of
/// `buf`, with its size in bytes, or `None` until enough bytes have arrived.
pub fn parse_server_header(buf: &[u8]) -> Option<(ServerHeader, usize)> {
    let (&b0, &b1) = (buf.first()?, buf.get(1)?);
    let (len, start) = match b1 & 0x7F {
        126 => (
            u64::from(u16::from_be_bytes(buf.get(2..4)?.try_into().ok()?)),
            4,
        ),
        127 => (u64::from_be_bytes(buf.get(2..10)?.try_into().ok()?), 10),
        n => (u64::from(n), 2),
    };
    let masked = b1 & 0x80 != 0;
    let header = ServerHeader {
        fin: b0 & 0x80 != 0,
        opcode: b0 & 0x0F,
        masked,
        len,
    };
    Some((header, if masked { start + 4 } else { start }))
}

/// The client side: a whole client frame (FIN as given), masked, its length
/// in the shortest form, as a test peer or a tool sends it.
pub fn client_frame(fin: bool, opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut out = Vec::new();
    put_masked(&mut out, (u8::from(fin) << 7) | opcode, payload, mask);
    out
}

/// The client side: a whole server frame read off the front of `buf`, as a
/// test peer or a tool reads it: `(fin, opcode, payload, bytes taken)`, or
/// `None` until it is all there. Panics on a masked frame (a server never masks).
pub fn parse_server_frame(buf: &[u8]) -> Option<(bool, u8, Vec<u8>, usize)> {
    let (h, start) = parse_server_header(buf)?;
    assert!(!h.masked, "a server frame is not masked");
    let end = start + h.len as usize;
    let payload = buf.get(start..end)?.to_vec();
    Some((h.fin, h.opcode, payload, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MASK: [u8; 4] = [0x37, 0xFA, 0x21, 0x3D];

    fn parse(buf: &[u8]) -> Result<Option<(FrameHeader, usize)>, FrameError> {
        parse_client_header(buf)
    }

    #[test]
    fn parses_the_rfc_masked_hello() {
        // RFC 6455 §5.7: a single-frame masked text message "Hello".
        let frame = [
            0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
        ];
        let (h, n) = parse(&frame).unwrap().unwrap();
        assert_eq!(
            h,
            FrameHeader {
                fin: true,
                opcode: OpCode::Text,
                mask: MASK,
                len: 5,
                rsv1: false,
            }
        );
        assert_eq!(n, 6);
        let mut payload = frame[n..].to_vec();
        apply_mask(&mut payload, h.mask, 0);
        assert_eq!(payload, b"Hello");
    }

    #[test]
    fn a_header_split_anywhere_waits_for_the_rest() {
        for payload_len in [5, 300, 70_000] {
            let frame = client_frame(false, 2, &vec![7; payload_len], MASK);
            let header_len = frame.len() - payload_len;
            for end in 0..header_len {
                assert_eq!(parse(&frame[..end]), Ok(None), "{payload_len} at {end}");
            }
            let (h, n) = parse(&frame[..header_len]).unwrap().unwrap();
            assert_eq!((h.len, n, h.fin), (payload_len as u64, header_len, false));
            assert_eq!(h.opcode, OpCode::Binary);
        }
    }

    #[test]
    fn sixteen_and_sixty_four_bit_lengths() {
        let mut f = vec![0x82, 0x80 | 126, 0x01, 0x00];
        f.extend_from_slice(&MASK);
        assert_eq!(parse(&f).unwrap().unwrap().0.len, 256);
        assert_eq!(parse(&f).unwrap().unwrap().1, 8);

        let mut f = vec![0x82, 0x80 | 127, 0, 0, 0, 1, 0, 0, 0, 5];
        f.extend_from_slice(&MASK);
        let (h, n) = parse(&f).unwrap().unwrap();
        assert_eq!((h.len, n), ((1 << 32) + 5, 14));

        // The largest length allowed: top bit clear, all others set.
        let mut f = vec![
            0x82,
            0x80 | 127,
            0x7F,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
        ];
        f.extend_from_slice(&MASK);
        assert_eq!(parse(&f).unwrap().unwrap().0.len, u64::MAX >> 1);
    }

    #[test]
    fn non_minimal_lengths_are_accepted() {
        let mut f = vec![0x81, 0x80 | 126, 0, 5];
        f.extend_from_slice(&MASK);
        assert_eq!(parse(&f).unwrap().unwrap().0.len, 5);
        let mut f = vec![0x81, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0, 5];
        f.extend_from_slice(&MASK);
        assert_eq!(parse(&f).unwrap().unwrap().0.len, 5);
    }

    #[test]
    fn sixty_four_bit_length_with_top_bit_is_refused_at_its_first_byte() {
        assert_eq!(
            parse(&[0x82, 0x80 | 127, 0x80]),
            Err(FrameError::LengthOverflow)
        );
        assert_eq!(
            parse(&[0x82, 0x80 | 127, 0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4]),
            Err(FrameError::LengthOverflow)
        );
    }

    #[test]
    fn reserved_bits_are_refused() {
        for rsv in [0x20, 0x10, 0x70] {
            assert_eq!(parse(&[0x81 | rsv, 0x80]), Err(FrameError::ReservedBits));
        }
        // RSV1 is the connection's to judge (permessage-deflate).
        let (h, _) = parse(&[0xc1, 0x80, 0, 0, 0, 0]).unwrap().unwrap();
        assert!(h.rsv1);
    }

    #[test]
    fn reserved_opcodes_are_refused() {
        for op in [3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF] {
            assert_eq!(
                parse(&[0x80 | op, 0x80]),
                Err(FrameError::UnknownOpcode(op))
            );
        }
        for op in [0, 1, 2, 8, 9, 0xA] {
            let f = client_frame(true, op, b"", MASK);
            assert_eq!(parse(&f).unwrap().unwrap().0.opcode.bits(), op);
        }
    }

    #[test]
    fn unmasked_frames_are_refused() {
        assert_eq!(parse(&[0x81, 0x05]), Err(FrameError::Unmasked));
        assert_eq!(parse(&[0x89, 0x00]), Err(FrameError::Unmasked));
    }

    #[test]
    fn control_frames_must_be_short_and_final() {
        for op in [8, 9, 0xA] {
            assert_eq!(
                parse(&[op, 0x80]),
                Err(FrameError::ControlFragmented),
                "{op}"
            );
            assert_eq!(
                parse(&[0x80 | op, 0x80 | 126, 0, 126]),
                Err(FrameError::ControlTooLong)
            );
            let f = client_frame(true, op, &[0; 125], MASK);
            assert_eq!(parse(&f).unwrap().unwrap().0.len, 125);
        }
        // A long length form is judged by its 7-bit marker: 126 is too long already.
        assert_eq!(parse(&[0x89, 0x80 | 126]), Err(FrameError::ControlTooLong));
    }

    #[test]
    fn unmasking_matches_bytewise_xor_at_every_offset_and_length() {
        let data: Vec<u8> = (0..=255u8).cycle().take(100).collect();
        let expected: Vec<u8> = data
            .iter()
            .zip(MASK.iter().cycle())
            .map(|(b, k)| b ^ k)
            .collect();
        for start in 0..data.len() {
            for end in start..=data.len().min(start + 20) {
                let mut piece = data[start..end].to_vec();
                apply_mask(&mut piece, MASK, start as u64);
                assert_eq!(piece, expected[start..end], "{start}..{end}");
            }
        }
        // Whole buffer at once (the 8-byte path plus a remainder).
        let mut all = data.clone();
        apply_mask(&mut all, MASK, 0);
        assert_eq!(all, expected);
    }

    #[test]
    fn server_headers_use_the_shortest_length_form() {
        let header = |len| {
            let mut out = Vec::new();
            write_header(&mut out, true, OpCode::Binary, len);
            out
        };
        assert_eq!(header(0), [0x82, 0]);
        assert_eq!(header(125), [0x82, 125]);
        assert_eq!(header(126), [0x82, 126, 0, 126]);
        assert_eq!(header(65535), [0x82, 126, 0xFF, 0xFF]);
        assert_eq!(header(65536), [0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0]);
        let mut out = Vec::new();
        write_header(&mut out, false, OpCode::Text, 3);
        assert_eq!(out, [0x01, 3]);
    }

    #[test]
    fn server_frames_are_unmasked_and_final() {
        let mut out = Vec::new();
        write_frame(&mut out, OpCode::Text, b"Hello");
        // RFC 6455 §5.7: a single-frame unmasked text message.
        assert_eq!(out, [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]);
        out.clear();
        write_frame(&mut out, OpCode::Pong, b"");
        assert_eq!(out, [0x8A, 0x00]);
    }

    #[test]
    fn client_frames_are_the_rfc_masked_hello_and_parse_back() {
        let mut out = Vec::new();
        write_client_frame(&mut out, OpCode::Text, b"Hello", MASK);
        // RFC 6455 §5.7: the same masked "Hello" the parser is tested on.
        let rfc = [
            0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
        ];
        assert_eq!(out, rfc);
        let payload = vec![b'x'; 300];
        out.clear();
        write_client_frame(&mut out, OpCode::Binary, &payload, MASK);
        let (h, n) = parse(&out).unwrap().unwrap();
        assert_eq!((h.opcode, h.len, n), (OpCode::Binary, 300, 8));
        let mut body = out[n..].to_vec();
        apply_mask(&mut body, h.mask, 0);
        assert_eq!(body, payload);
    }

    #[test]
    fn server_headers_parse_on_the_client_side() {
        let mut out = Vec::new();
        write_header(&mut out, true, OpCode::Text, 70_000);
        let (h, n) = parse_server_header(&out).unwrap();
        let want = ServerHeader {
            fin: true,
            opcode: 0x1,
            masked: false,
            len: 70_000,
        };
        assert_eq!((h, n), (want, 10));
        for cut in 0..out.len() {
            assert_eq!(parse_server_header(&out[..cut]), None, "cut at {cut}");
        }
        // A masked frame parses (header length includes the key) but says so.
        let (h, n) = parse_server_header(&[0x81, 0x85, 1, 2, 3, 4]).unwrap();
        assert!(h.masked);
        assert_eq!((h.len, n), (5, 6));
    }
}
