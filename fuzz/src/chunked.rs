use m0serve_proto::http::chunked::{encode_chunk, ChunkedDecoder, Decoded, LAST_CHUNK};
use m0serve_proto::http::HttpError;

use crate::session::LIMITS;
use crate::split::Split;

/// The chunked-body decoder fed arbitrary bytes (see [`crate::split`] for the
/// layout): the data decoded, and how decoding ended (done after how many
/// bytes, which error, or wanting more), are the same whole, split where the
/// fuzzer chose and byte by byte. Then the decoded data, re-encoded as chunks
/// (cut where the fuzzer cut the input, a few with extensions, a trailer
/// after the last chunk), decodes back to itself, every byte consumed.
pub fn chunked(data: &[u8]) {
    let split = Split::new(data);
    let [whole, pieces, bytes] = split.feeds();
    let expected = decode(&whole);
    assert_eq!(decode(&pieces), expected, "split");
    assert_eq!(decode(&bytes), expected, "fed byte by byte");

    let encoded = encode(&expected.data, &split.pieces);
    let back = Outcome {
        data: expected.data,
        end: End::Done(encoded.len()),
    };
    assert_eq!(decode(&[&encoded]), back, "re-encoded as {encoded:?}");
    let bytes: Vec<&[u8]> = encoded.chunks(1).collect();
    assert_eq!(decode(&bytes), back, "re-encoded, byte by byte");
}

#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    data: Vec<u8>,
    end: End,
}

#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The body ended after this many bytes of input.
    Done(usize),
    Error(HttpError),
    /// The input ran out first.
    NeedMore,
}

/// Decodes `pieces` fed one after another, keeping what a call left unconsumed
/// for the next (as the connection's buffer does).
fn decode(pieces: &[&[u8]]) -> Outcome {
    let mut decoder = ChunkedDecoder::new(LIMITS.max_body, LIMITS.max_head);
    let (mut data, mut consumed, mut buf) = (Vec::new(), 0, Vec::new());
    for piece in pieces {
        buf.extend_from_slice(piece);
        let mut pos = 0;
        loop {
            let (n, decoded) = match decoder.decode(&buf[pos..]) {
                Ok(step) => step,
                Err(e) => {
                    return Outcome {
                        data,
                        end: End::Error(e),
                    }
                }
            };
            pos += n;
            consumed += n;
            match decoded {
                Decoded::Data(run) => {
                    assert!(!run.is_empty(), "an empty data run");
                    data.extend_from_slice(run);
                }
                Decoded::NeedMore => break,
                Decoded::Done => {
                    assert!(decoder.is_done());
                    return Outcome {
                        data,
                        end: End::Done(consumed),
                    };
                }
            }
        }
        buf.drain(..pos);
    }
    Outcome {
        data,
        end: End::NeedMore,
    }
}

/// `data` as a chunked body, in chunks as long as `cuts`' pieces (cycled).
fn encode(data: &[u8], cuts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut sizes = cuts.iter().map(|p| p.len().max(1)).cycle();
    let mut rest = data;
    let mut i = 0;
    while !rest.is_empty() {
        let n = sizes.next().unwrap_or(1).min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        if i < 4 && i % 2 == 1 {
            // A chunk with extensions, written out by hand: encode_chunk writes none.
            out.extend_from_slice(format!("{n:X};ext=1;q=\"a b\"\r\n").as_bytes());
            out.extend_from_slice(chunk);
            out.extend_from_slice(b"\r\n");
        } else {
            encode_chunk(chunk, &mut out);
        }
        rest = tail;
        i += 1;
    }
    if data.len() % 2 == 1 {
        out.extend_from_slice(b"0\r\nX-Trailer: 1\r\n\r\n");
    } else {
        out.extend_from_slice(LAST_CHUNK);
    }
    out
}
