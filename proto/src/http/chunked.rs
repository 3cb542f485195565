//! Chunked transfer coding (RFC 9112 §7.1): the request-side decoder and the
//! response-side encoder.
//!
//! The decoder is a byte-level state machine so that a chunk-size line, a CRLF
//! or a trailer may be split across reads at any byte; only data runs are
//! handed out as slices, never copied here.

use super::is_tchar;
use super::response::push_int;
use super::HttpError;

/// The last chunk with an empty trailer section: ends a chunked body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Appends `data` as one chunk. Empty data writes nothing: an empty chunk
/// (`0\r\n\r\n`) would end the body.
pub fn encode_chunk(data: &[u8], out: &mut Vec<u8>) {
    if data.is_empty() {
        return;
    }
    push_int(out, data.len() as u64, 16);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// What one [`ChunkedDecoder::decode`] call yielded.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A run of body data (part or all of one chunk's data).
    Data(&'a [u8]),
    /// The input ran out before any data: feed more.
    NeedMore,
    /// The last chunk and the trailer section have been read.
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Hex digits of a chunk size (`digits` read so far).
    Size {
        digits: u8,
    },
    /// Whitespace after the size: a `;` must follow.
    SizeWs,
    /// Inside a chunk extension, checked against its grammar and dropped.
    Ext(Ext),
    /// CR of the size line seen; LF must follow.
    SizeLf,
    Data,
    /// Chunk data ended; CR must follow.
    DataCr,
    DataLf,
    /// At the start of a trailer line, or of the final empty line.
    TrailerStart,
    /// In a trailer field's name (discarded, like the whole line).
    TrailerName,
    /// In a trailer field's value, after the colon.
    TrailerValue,
    TrailerLf,
    /// CR of the final empty line seen; LF must follow.
    EndLf,
    Done,
}

/// Where a chunk extension's parse is (RFC 9112 §7.1.1):
/// `*( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] )`.
/// Whitespace is taken only where that grammar has BWS: before a `;` or `=`,
/// after one. Anything else is a 400: a peer that skips extensions more
/// loosely (to the next CR, say) could read a different body boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ext {
    /// After `;`: whitespace, then a name.
    NameStart,
    Name,
    /// Whitespace after a name: `=` or `;` must follow.
    AfterName,
    /// After `=`: whitespace, then a token or a quoted string.
    ValueStart,
    Token,
    Quoted,
    /// After a backslash in a quoted string.
    QuotedPair,
    /// Right after a quoted string's closing quote.
    Closed,
    /// Whitespace after a value: `;` must follow.
    AfterValue,
}

/// Decodes a chunked request body, enforcing the body limit as chunk sizes
/// are announced (before their data arrives).
#[derive(Debug)]
pub struct ChunkedDecoder {
    state: State,
    /// Data bytes left in the current chunk (or the size being read).
    chunk_left: u64,
    /// Data bytes announced so far, against `max_body`.
    total: u64,
    max_body: u64,
    /// Extension and trailer bytes so far: they are dropped, but bounded so a
    /// peer cannot stream them forever.
    meta: usize,
    max_meta: usize,
    /// The trailer field name being read, lowercased, while it could still
    /// be one of [`FORBIDDEN_TRAILERS`] (`name_len` past the buffer: it cannot).
    name: [u8; LONGEST_FORBIDDEN],
    name_len: usize,
}

/// Fields a trailer must not carry (RFC 9110 §6.5.1): they frame the message
/// (Transfer-Encoding, Content-Length, Trailer, TE), route it (Host),
/// authenticate it (Authorization, Proxy-Authorization, §11.6-7) or say how
/// to read the content (Content-Type, Content-Encoding, Content-Range), all
/// of which must be known before the body. Trailers are dropped here, never
/// merged into the head, but a request that carries one of these was made by
/// a sender that breaks that MUST NOT, or to make a peer that merges
/// trailers read it otherwise: it is refused (400). gunicorn refuses the
/// framing, routing and authentication ones; the content ones are refused
/// here too, strictly (its corpus has a Content-Type trailer it accepts).
const FORBIDDEN_TRAILERS: [&[u8]; 10] = [
    b"transfer-encoding",
    b"content-length",
    b"trailer",
    b"te",
    b"host",
    b"authorization",
    b"proxy-authorization",
    b"content-type",
    b"content-encoding",
    b"content-range",
];
const LONGEST_FORBIDDEN: usize = "proxy-authorization".len();

const BAD_SIZE: HttpError = HttpError::BadRequest("invalid chunk size");
const BAD_CRLF: HttpError = HttpError::BadRequest("missing CRLF in chunked body");
const BAD_EXT: HttpError = HttpError::BadRequest("invalid chunk extension");
const BAD_META: HttpError = HttpError::BadRequest("invalid chunk extension or trailer");
const BAD_TRAILER: HttpError = HttpError::BadRequest("invalid trailer field");
const LONG_META: HttpError = HttpError::BadRequest("chunk extensions or trailers too long");
const FORBIDDEN_TRAILER: HttpError =
    HttpError::BadRequest("forbidden trailer field (framing, routing or content metadata)");

impl ChunkedDecoder {
    /// `max_body` bounds the decoded data (413 beyond); `max_meta` bounds the
    /// extension and trailer bytes together (400 beyond).
    pub fn new(max_body: u64, max_meta: usize) -> Self {
        ChunkedDecoder {
            state: State::Size { digits: 0 },
            chunk_left: 0,
            total: 0,
            max_body,
            meta: 0,
            max_meta,
            name: [0; LONGEST_FORBIDDEN],
            name_len: 0,
        }
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes framing from `input` up to the next data run, and returns how
    /// many bytes were consumed (data included) with what they yielded.
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Decoded<'a>), HttpError> {
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            self.state = match self.state {
                State::Data => {
                    let n = self.chunk_left.min((input.len() - i) as u64) as usize;
                    self.chunk_left -= n as u64;
                    if self.chunk_left == 0 {
                        self.state = State::DataCr;
                    }
                    return Ok((i + n, Decoded::Data(&input[i..i + n])));
                }
                State::Size { digits } => match (b as char).to_digit(16) {
                    Some(d) => {
                        // A size that does not fit in 64 bits is refused, not wrapped.
                        if self.chunk_left > u64::MAX >> 4 {
                            return Err(BAD_SIZE);
                        }
                        self.chunk_left = self.chunk_left << 4 | u64::from(d);
                        State::Size {
                            digits: digits.saturating_add(1),
                        }
                    }
                    None if digits == 0 => return Err(BAD_SIZE),
                    None => Self::after_size(b)?,
                },
                State::SizeWs => match b {
                    b' ' | b'\t' => State::SizeWs,
                    b';' => State::Ext(Ext::NameStart),
                    _ => return Err(BAD_SIZE),
                },
                State::Ext(ext) => match Self::extension(ext, b)? {
                    Some(ext) => {
                        self.count_meta(b)?;
                        State::Ext(ext)
                    }
                    None => State::SizeLf,
                },
                State::SizeLf => {
                    if b != b'\n' {
                        return Err(BAD_CRLF);
                    }
                    if self.chunk_left == 0 {
                        State::TrailerStart
                    } else {
                        self.total = self
                            .total
                            .checked_add(self.chunk_left)
                            .filter(|&t| t <= self.max_body)
                            .ok_or(HttpError::PayloadTooLarge)?;
                        State::Data
                    }
                }
                State::DataCr if b == b'\r' => State::DataLf,
                State::DataLf if b == b'\n' => State::Size { digits: 0 },
                State::DataCr | State::DataLf => return Err(BAD_CRLF),
                // A trailer line is a field line (RFC 9112 §7.1.2, §5): a
                // token, a colon, a value. Anything else (a line without a
                // colon, obs-fold, a space before the colon) is a 400: a peer
                // that reads it as the end of the body sees another request.
                State::TrailerStart if b == b'\r' => State::EndLf,
                State::TrailerStart | State::TrailerName if is_tchar(b) => {
                    self.count_meta(b)?;
                    if self.state == State::TrailerStart {
                        self.name_len = 0;
                    }
                    if let Some(slot) = self.name.get_mut(self.name_len) {
                        *slot = b.to_ascii_lowercase();
                    }
                    self.name_len = self.name_len.saturating_add(1);
                    State::TrailerName
                }
                State::TrailerName if b == b':' => {
                    let name = self.name.get(..self.name_len).unwrap_or_default();
                    if FORBIDDEN_TRAILERS.contains(&name) {
                        return Err(FORBIDDEN_TRAILER);
                    }
                    State::TrailerValue
                }
                State::TrailerStart | State::TrailerName => return Err(BAD_TRAILER),
                State::TrailerValue => match b {
                    b'\r' => State::TrailerLf,
                    _ => {
                        self.count_meta(b)?;
                        State::TrailerValue
                    }
                },
                State::TrailerLf if b == b'\n' => State::TrailerStart,
                State::EndLf if b == b'\n' => {
                    self.state = State::Done;
                    return Ok((i + 1, Decoded::Done));
                }
                State::TrailerLf | State::EndLf => return Err(BAD_CRLF),
                State::Done => return Ok((i, Decoded::Done)),
            };
            i += 1;
        }
        match self.state {
            State::Done => Ok((i, Decoded::Done)),
            _ => Ok((i, Decoded::NeedMore)),
        }
    }

    /// The byte after a chunk size's digits: whitespace, extensions, or the CRLF.
    fn after_size(b: u8) -> Result<State, HttpError> {
        match b {
            b' ' | b'\t' => Ok(State::SizeWs),
            b';' => Ok(State::Ext(Ext::NameStart)),
            b'\r' => Ok(State::SizeLf),
            b'\n' => Err(BAD_CRLF),
            _ => Err(BAD_SIZE),
        }
    }

    /// The next step of an extension's grammar for byte `b`: the new state,
    /// or None for the CR that ends the size line.
    fn extension(ext: Ext, b: u8) -> Result<Option<Ext>, HttpError> {
        let ws = b == b' ' || b == b'\t';
        let tchar = is_tchar(b);
        Ok(Some(match (ext, b) {
            (Ext::NameStart, _) if ws => Ext::NameStart,
            (Ext::NameStart | Ext::Name, _) if tchar => Ext::Name,
            (Ext::Name | Ext::Token | Ext::Closed, b'\r') => return Ok(None),
            (Ext::Name | Ext::AfterName, _) if ws => Ext::AfterName,
            (Ext::Name | Ext::AfterName, b'=') => Ext::ValueStart,
            (Ext::ValueStart, _) if ws => Ext::ValueStart,
            (Ext::ValueStart, b'"') => Ext::Quoted,
            (Ext::ValueStart | Ext::Token, _) if tchar => Ext::Token,
            (Ext::Quoted, b'"') => Ext::Closed,
            (Ext::Quoted, b'\\') => Ext::QuotedPair,
            // qdtext, and what a quoted-pair may escape: HTAB, SP, VCHAR, obs-text.
            (Ext::Quoted | Ext::QuotedPair, b'\t' | b' ' | 0x21..=0x7e | 0x80..) => Ext::Quoted,
            (Ext::Token | Ext::Closed | Ext::AfterValue, _) if ws => Ext::AfterValue,
            (Ext::Name | Ext::AfterName | Ext::Token | Ext::Closed | Ext::AfterValue, b';') => {
                Ext::NameStart
            }
            _ => return Err(BAD_EXT),
        }))
    }

    /// Accounts one extension or trailer byte: control characters (a bare LF,
    /// NUL) are refused, as in a head.
    fn count_meta(&mut self, b: u8) -> Result<(), HttpError> {
        if (b < 0x20 && b != b'\t') || b == 0x7f {
            return Err(BAD_META);
        }
        self.meta += 1;
        if self.meta > self.max_meta {
            return Err(LONG_META);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes all of `input` fed in pieces of `step` bytes; returns the data
    /// and whether the body ended.
    fn decode_all(input: &[u8], step: usize) -> Result<(Vec<u8>, bool), HttpError> {
        let mut dec = ChunkedDecoder::new(1 << 20, 1024);
        let mut data = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        for piece in input.chunks(step) {
            pending.extend_from_slice(piece);
            loop {
                let (n, d) = dec.decode(&pending)?;
                let stop = match d {
                    Decoded::Data(s) => {
                        data.extend_from_slice(s);
                        false
                    }
                    Decoded::NeedMore => true,
                    Decoded::Done => return Ok((data, true)),
                };
                pending.drain(..n);
                if stop {
                    break;
                }
            }
        }
        Ok((data, dec.is_done()))
    }

    #[test]
    fn decodes_chunks_in_any_split() {
        let body = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
        for step in 1..body.len() {
            assert_eq!(
                decode_all(body, step).unwrap(),
                (b"hello world".to_vec(), true),
                "step {step}"
            );
        }
    }

    #[test]
    fn extensions_and_trailers_are_skipped() {
        let body = b"5;name=value;q=\"a b\"\r\nhello\r\nA ; x\r\n0123456789\r\n0;last\r\nX-Sum: 1\r\nY: 2\r\n\r\n";
        for step in [1, 3, body.len()] {
            assert_eq!(
                decode_all(body, step).unwrap(),
                (b"hello0123456789".to_vec(), true)
            );
        }
    }

    #[test]
    fn uppercase_hex_and_leading_zeros() {
        let mut body = b"0000A\r\n".to_vec();
        body.extend_from_slice(&[b'x'; 10]);
        body.extend_from_slice(b"\r\n0\r\n\r\n");
        assert_eq!(decode_all(&body, 4).unwrap(), (vec![b'x'; 10], true));
    }

    #[test]
    fn stops_at_the_end_of_the_body() {
        let mut dec = ChunkedDecoder::new(100, 100);
        let input = b"0\r\n\r\nGET / HTTP/1.1\r\n";
        assert_eq!(dec.decode(input).unwrap(), (5, Decoded::Done));
        assert_eq!(dec.decode(&input[5..]).unwrap(), (0, Decoded::Done));
    }

    #[test]
    fn refuses_bad_sizes() {
        for bad in [
            &b"x\r\n"[..],
            b"\r\n",
            b"-1\r\n",
            b"5 x\r\n",
            b"5 \r\n",
            b"0x5\r\n",
            b"+5\r\n",
        ] {
            assert_eq!(
                decode_all(bad, 1),
                Err(BAD_SIZE),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // 17 significant hex digits overflow 64 bits.
        assert_eq!(decode_all(b"10000000000000000\r\n", 3), Err(BAD_SIZE));
    }

    #[test]
    fn refuses_missing_crlf() {
        for bad in [
            &b"5\nhello\r\n0\r\n\r\n"[..],
            b"5\r\nhelloX\r\n0\r\n\r\n",
            b"5\r\nhello\rX0\r\n\r\n",
            b"5\r\nhello\r\n0\r\n\rX",
            b"5\r\nhello\r\n0\r\nX: y\rZ",
        ] {
            assert_eq!(
                decode_all(bad, 2),
                Err(BAD_CRLF),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    /// RFC 9112 §7.1.1: `;` name [ `=` token / quoted-string ], with BWS
    /// only around `;` and `=`.
    #[test]
    fn extensions_follow_their_grammar() {
        for ext in [
            ";a",
            ";a=b",
            " ; a = b ;c",
            "\t;a=\"\"",
            ";a=\"q \\\" ;\\\\ \"",
            ";a=\"x\";b",
            ";!#$%&'*+-.^_`|~=!#$%&'*+-.^_`|~",
        ] {
            let body = format!("5{ext}\r\nhello\r\n0\r\n\r\n");
            for step in [1, 3, body.len()] {
                assert_eq!(
                    decode_all(body.as_bytes(), step),
                    Ok((b"hello".to_vec(), true)),
                    "{ext:?} step {step}"
                );
            }
        }
        // obs-text is allowed in a quoted string.
        assert_eq!(
            decode_all(b"5;a=\"\x80\xff\"\r\nhello\r\n0\r\n\r\n", 1),
            Ok((b"hello".to_vec(), true))
        );
        for ext in [
            ";invalid=",
            ";",
            ";;a",
            ";=b",
            ";a==b",
            ";a=b=c",
            ";a=\"open",
            ";a=\"x\"y",
            ";a b",
            ";a=b c",
            ";a ",
            ";a=b ",
            ";a=(b)",
            ";a=\"\x01\"",
            ";a\x01",
            ";a\nb",
        ] {
            let body = format!("20{ext}\r\n{}\r\n0\r\n\r\n", "x".repeat(32));
            assert_eq!(decode_all(body.as_bytes(), 1), Err(BAD_EXT), "{ext:?}");
        }
    }

    #[test]
    fn framing_routing_and_content_fields_are_refused_in_trailers() {
        for name in FORBIDDEN_TRAILERS {
            let name = String::from_utf8_lossy(name).to_uppercase();
            for step in [1, 64] {
                let body = format!("5\r\nhello\r\n0\r\nX: 1\r\n{name}: 9\r\n\r\n");
                assert_eq!(
                    decode_all(body.as_bytes(), step),
                    Err(FORBIDDEN_TRAILER),
                    "{name} step {step}"
                );
            }
        }
        // Names that only begin or end like one, or are longer, are fields like any.
        for name in [
            "Content-Lengths",
            "X-Host",
            "Hos",
            "T",
            "TEE",
            "Proxy-Authorization-X",
        ] {
            let body = format!("0\r\n{name}: 1\r\n\r\n");
            assert_eq!(decode_all(body.as_bytes(), 1), Ok((vec![], true)), "{name}");
        }
    }

    #[test]
    fn trailer_lines_are_field_lines() {
        for trailer in [
            "XYZ",
            "X y: z",
            "X : y",
            ": y",
            " y: z",
            "X: y\r\n z",
            "GET / HTTP/1.1",
        ] {
            let body = format!("0\r\n{trailer}\r\n\r\n");
            assert_eq!(
                decode_all(body.as_bytes(), 1),
                Err(BAD_TRAILER),
                "{trailer:?}"
            );
        }
        for trailer in ["X: y", "A:", "Expires: 0\r\nX-Y:\tz z"] {
            let body = format!("0\r\n{trailer}\r\n\r\n");
            assert_eq!(
                decode_all(body.as_bytes(), 1),
                Ok((vec![], true)),
                "{trailer:?}"
            );
        }
    }

    #[test]
    fn refuses_control_bytes_in_trailers() {
        assert_eq!(decode_all(b"0\r\nX: a\0b\r\n\r\n", 1), Err(BAD_META));
    }

    #[test]
    fn bounds_metadata() {
        let mut dec = ChunkedDecoder::new(100, 8);
        assert_eq!(dec.decode(b"1;12345678").unwrap(), (10, Decoded::NeedMore));
        assert_eq!(dec.decode(b"9"), Err(LONG_META));
    }

    #[test]
    fn enforces_the_body_limit_when_a_size_is_announced() {
        let mut dec = ChunkedDecoder::new(10, 100);
        let (n, d) = dec.decode(b"6\r\nabcdef\r\n").unwrap();
        assert_eq!((n, d), (9, Decoded::Data(b"abcdef")));
        // 6 + 5 > 10: refused on the size line, before any of its data.
        assert_eq!(dec.decode(b"\r\n5\r\n"), Err(HttpError::PayloadTooLarge));
        let mut dec = ChunkedDecoder::new(10, 100);
        assert_eq!(dec.decode(b"a\r\n").unwrap(), (3, Decoded::NeedMore));
    }

    #[test]
    fn encodes_chunks() {
        let mut out = Vec::new();
        encode_chunk(b"hello", &mut out);
        encode_chunk(b"", &mut out);
        encode_chunk(&[b'x'; 26], &mut out);
        out.extend_from_slice(LAST_CHUNK);
        let mut expected = b"5\r\nhello\r\n1a\r\n".to_vec();
        expected.extend_from_slice(&[b'x'; 26]);
        expected.extend_from_slice(b"\r\n0\r\n\r\n");
        assert_eq!(out, expected);
        // What the encoder writes, the decoder reads back.
        assert_eq!(
            decode_all(&out, 7).unwrap(),
            ([&b"hello"[..], &[b'x'; 26]].concat(), true)
        );
    }
}
