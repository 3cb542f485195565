//! permessage-deflate (RFC 7692): its negotiation, and compressing and
//! decompressing one message's payload, sans IO.
//!
//! Negotiated without context takeover either way: we answer every accepted
//! offer with `server_no_context_takeover; client_no_context_takeover`
//! (§7.1.1: a server may add both to its response whether or not they were
//! offered), so each message is compressed on its own. A connection then
//! keeps no compression state between messages: the zlib streams live once
//! per core thread and are reset for each message, where context takeover
//! would hold a compressor and a 32 KiB window per connection (about 300 KiB
//! with miniz_oxide), which the server's 3 KiB per idle connection could not
//! afford. Messages compress a little less well, as each starts afresh.
//!
//! What is compressed is decided per message (the RSV1 bit of its first
//! frame, §6): ours only from [`MIN_COMPRESSED`] bytes up, where deflate's
//! framing is paid back; the client's are inflated whenever RSV1 says so,
//! never to more than the connection's message limit (a small compressed
//! message may stand for a huge one: it is refused with 1009 as soon as the
//! output passes the limit, not after).
//!
//! Compression runs on the core thread that frames the message, at zlib's
//! fastest level: for a small message nearly all of its cost is the fixed
//! one of starting afresh (the streams' reset clears their buffers).

use std::cell::RefCell;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// The extension's name in `Sec-WebSocket-Extensions`.
pub const NAME: &str = "permessage-deflate";

/// The smallest payload we compress: below it deflate's block framing and
/// the CPU are not paid back.
pub const MIN_COMPRESSED: usize = 128;

/// Where a deflate stream ends a message (§7.2.1): the empty stored block a
/// sync flush writes, removed by the sender and put back by the receiver.
const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// An accepted offer: what the `101` answers it with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Agreement {
    /// The offer limited our window to 15 bits: the answer must say so (§7.1.2.1).
    server_bits: bool,
}

impl Agreement {
    /// The `Sec-WebSocket-Extensions` value of the `101`.
    pub fn response(&self) -> &'static [u8] {
        if self.server_bits {
            b"permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=15"
        } else {
            b"permessage-deflate; server_no_context_takeover; client_no_context_takeover"
        }
    }
}

/// The first permessage-deflate offer among the `Sec-WebSocket-Extensions`
/// `values` that we can accept, in the client's order of preference (§5.1):
/// one whose parameters are all known, each at most once, with valid values
/// (§7.1). One that asks for a server window under 15 bits is declined: the
/// compressor cannot honour it (a client limited so offers another, or none).
pub fn negotiate<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Option<Agreement> {
    values
        .into_iter()
        .flat_map(extensions)
        .filter(|(name, _)| name.eq_ignore_ascii_case(NAME))
        .find_map(|(_, params)| accept(&params))
}

/// An extension's parameters, names lowercased, values unquoted.
type Params = Vec<(String, Option<String>)>;

/// Whether an offer's parameters are acceptable, and how to answer it.
fn accept(params: &Params) -> Option<Agreement> {
    let mut seen: Vec<&str> = Vec::new();
    let mut server_bits = false;
    for (name, value) in params {
        let name = name.as_str();
        if seen.contains(&name) {
            return None; // §7: a parameter at most once
        }
        seen.push(name);
        match (name, value.as_deref()) {
            ("server_no_context_takeover" | "client_no_context_takeover", None) => {}
            ("client_max_window_bits", None) => {}
            ("client_max_window_bits", Some(bits)) => {
                window_bits(bits)?;
            }
            ("server_max_window_bits", Some(bits)) => {
                if window_bits(bits)? != 15 {
                    return None;
                }
                server_bits = true;
            }
            _ => return None, // unknown, or a value where none belongs (or none where one must be)
        }
    }
    Some(Agreement { server_bits })
}

/// A window size parameter's value: 8 to 15, digits only, no leading zero (§7.1.2).
fn window_bits(value: &str) -> Option<u8> {
    let valid = !value.starts_with('0') && value.bytes().all(|b| b.is_ascii_digit());
    value
        .parse::<u8>()
        .ok()
        .filter(|b| valid && (8..=15).contains(b))
}

/// The extensions one header value lists (RFC 6455 §9.1): each name with
/// its parameters, quoted values unquoted. An item that breaks the grammar
/// is left out (so it is never accepted).
fn extensions(value: &[u8]) -> Vec<(String, Params)> {
    let Ok(text) = std::str::from_utf8(value) else {
        return Vec::new();
    };
    split_outside_quotes(text, ',')
        .into_iter()
        .filter_map(|item| {
            let mut parts = split_outside_quotes(item, ';').into_iter();
            let name = parts.next()?.trim();
            if !is_token(name) {
                return None;
            }
            let params = parts
                .map(|p| {
                    let (name, value) = match p.split_once('=') {
                        Some((n, v)) => (n.trim(), Some(unquote(v.trim())?)),
                        None => (p.trim(), None),
                    };
                    is_token(name).then(|| (name.to_ascii_lowercase(), value))
                })
                .collect::<Option<Vec<_>>>()?;
            Some((name.to_owned(), params))
        })
        .collect()
}

/// `text` split at each `sep` that is not inside a quoted string.
fn split_outside_quotes(text: &str, sep: char) -> Vec<&str> {
    let (mut parts, mut start, mut quoted, mut escaped) = (Vec::new(), 0, false, false);
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            c if c == sep && !quoted => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// A parameter value: a token, or a quoted string whose content must be a
/// token too (§9.1).
fn unquote(value: &str) -> Option<String> {
    let inner = match value.strip_prefix('"') {
        Some(rest) => rest.strip_suffix('"')?.replace('\\', ""),
        None => value.to_owned(),
    };
    is_token(&inner).then_some(inner)
}

/// RFC 9110 §5.6.2's token.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Why a compressed message could not be inflated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InflateError {
    /// It inflates past the message limit (1009).
    TooBig,
    /// It is not a valid deflate stream (1007).
    Corrupt,
}

/// This thread's zlib streams, made on first use (a core thread that never
/// sees a compressed WebSocket pays nothing).
struct Codec {
    compress: Compress,
    decompress: Decompress,
}

thread_local! {
    static CODEC: RefCell<Option<Codec>> = const { RefCell::new(None) };
}

fn with_codec<R>(f: impl FnOnce(&mut Codec) -> R) -> R {
    CODEC.with(|codec| {
        let mut codec = codec.borrow_mut();
        f(codec.get_or_insert_with(|| Codec {
            // Raw deflate (no zlib header), as §7.2.1 sends it.
            compress: Compress::new(Compression::fast(), false),
            decompress: Decompress::new(false),
        }))
    })
}

/// One message's payload as received (RSV1 set), inflated, at most `max`
/// bytes of it.
pub fn inflate(compressed: &[u8], max: usize) -> Result<Vec<u8>, InflateError> {
    with_codec(|codec| {
        let d = &mut codec.decompress;
        // Also what keeps connections apart: the window is zeroed, so a
        // back-reference past this message's start (which the streaming
        // inflater does not refuse) reads zeros, never the message another
        // connection had inflated on this thread before.
        d.reset(false);
        let limit = max.saturating_add(1);
        let mut out = Vec::with_capacity(compressed.len().saturating_mul(4).max(64).min(limit));
        for input in [compressed, &TAIL[..]] {
            let mut pos = 0;
            loop {
                if out.len() == out.capacity() {
                    // Room for one byte past the limit, to see it passed.
                    let room = out.len().max(4096).min(limit - out.len());
                    out.reserve_exact(room);
                }
                let (before_in, before_out) = (d.total_in(), d.total_out());
                let status = d
                    .decompress_vec(&input[pos..], &mut out, FlushDecompress::Sync)
                    .map_err(|_| InflateError::Corrupt)?;
                pos += (d.total_in() - before_in) as usize;
                if out.len() > max {
                    return Err(InflateError::TooBig);
                }
                if status == Status::StreamEnd {
                    // A final block may end a message (§7.2.3.4), with a byte
                    // after it in the RFC's own example: what follows is
                    // ignored, as zlib-based receivers leave it unused.
                    return Ok(out);
                }
                let room_left = out.len() < out.capacity();
                if room_left && pos == input.len() {
                    break;
                }
                // Room to write and bytes to read, yet nothing moved.
                if room_left && (d.total_in(), d.total_out()) == (before_in, before_out) {
                    return Err(InflateError::Corrupt);
                }
            }
        }
        Ok(out)
    })
}

/// Appends `payload` deflated as one message (§7.2.1: a sync flush, its
/// empty stored block's four bytes removed). The stream is reset first, so
/// the message never refers back to the one before (another connection's,
/// perhaps), as no context takeover requires, and its bytes depend on it
/// alone (a full flush instead, a little cheaper, left state behind that
/// made the fuzzer's persistent runs unstable).
pub fn deflate(payload: &[u8], out: &mut Vec<u8>) {
    with_codec(|codec| {
        let c = &mut codec.compress;
        c.reset();
        let start = out.len();
        // Deflate never grows data by more than a few bytes per 16 KiB block.
        out.reserve(payload.len() + payload.len() / 1000 + 64);
        let mut taken = 0;
        loop {
            if out.len() == out.capacity() {
                out.reserve(4096);
            }
            let before = c.total_in();
            c.compress_vec(&payload[taken..], out, FlushCompress::Sync)
                .expect("deflating into a growable buffer cannot fail");
            taken += (c.total_in() - before) as usize;
            // Done once all is in and the flush fitted (room left over).
            if taken == payload.len() && out.len() < out.capacity() {
                break;
            }
        }
        debug_assert!(out[start..].ends_with(&TAIL));
        out.truncate(out.len() - TAIL.len());
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(values: &[&str]) -> Option<Agreement> {
        negotiate(values.iter().map(|v| v.as_bytes()))
    }

    #[test]
    fn the_offers_browsers_and_libraries_send_are_accepted() {
        let plain = Some(Agreement { server_bits: false });
        // Chrome and Firefox; the `websockets` library; a bare offer.
        assert_eq!(
            offer(&["permessage-deflate; client_max_window_bits"]),
            plain
        );
        assert_eq!(
            offer(&["permessage-deflate; client_max_window_bits=12"]),
            plain
        );
        assert_eq!(offer(&["permessage-deflate"]), plain);
        assert_eq!(
            offer(&["permessage-deflate; server_no_context_takeover; client_no_context_takeover"]),
            plain
        );
        assert_eq!(
            offer(&["permessage-deflate; server_max_window_bits=15"]),
            Some(Agreement { server_bits: true })
        );
        assert_eq!(
            offer(&["Permessage-Deflate; Client_Max_Window_Bits=\"10\""]),
            plain
        );
    }

    #[test]
    fn bad_or_unmeetable_offers_are_declined_and_the_next_one_taken() {
        for bad in [
            "permessage-deflate; server_max_window_bits=10", // we cannot compress so
            "permessage-deflate; server_max_window_bits",    // a value is required
            "permessage-deflate; client_max_window_bits=16",
            "permessage-deflate; client_max_window_bits=7",
            "permessage-deflate; client_max_window_bits=010",
            "permessage-deflate; server_no_context_takeover=1",
            "permessage-deflate; unknown_param",
            "permessage-deflate; client_no_context_takeover; client_no_context_takeover",
            "permessage-deflate; client_max_window_bits=\"1 0\"",
            "x-webkit-deflate-frame",
            "",
        ] {
            assert_eq!(offer(&[bad]), None, "{bad:?}");
        }
        // Several offers, in one value or several: the first acceptable one.
        assert_eq!(
            offer(&["permessage-deflate; server_max_window_bits=10, permessage-deflate"]),
            Some(Agreement { server_bits: false })
        );
        assert_eq!(
            offer(&["foo", "permessage-deflate; server_max_window_bits=15"]),
            Some(Agreement { server_bits: true })
        );
    }

    #[test]
    fn the_rfc_examples_inflate_and_our_output_round_trips() {
        // RFC 7692 §7.2.3.1: "Hello" compressed with no context takeover.
        let hello = [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00];
        assert_eq!(inflate(&hello, 100).unwrap(), b"Hello");
        // §7.2.3.3: the same in an uncompressed (stored) block.
        let stored = [
            0x00, 0x05, 0x00, 0xfa, 0xff, 0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x00,
        ];
        assert_eq!(inflate(&stored, 100).unwrap(), b"Hello");
        // §7.2.3.4: a final block (BFINAL), with a byte after it.
        let last = [0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00];
        assert_eq!(inflate(&last, 100).unwrap(), b"Hello");
        // §7.2.3.5: two blocks in one message.
        let two = [
            0xf2, 0x48, 0x05, 0x00, 0x00, 0x00, 0xff, 0xff, 0xca, 0xc9, 0xc9, 0x07, 0x00,
        ];
        assert_eq!(inflate(&two, 100).unwrap(), b"Hello");
        // The same payload twice in a row: the second must not refer back to
        // the first (each is inflated afresh).
        for payload in [
            b"".to_vec(),
            b"Hello".to_vec(),
            "caf\u{e9} ".repeat(100_000).into_bytes(),
            "caf\u{e9} ".repeat(100_000).into_bytes(),
            (0..300_000u32).map(|i| (i * 7919 % 251) as u8).collect(),
        ] {
            let mut packed = Vec::new();
            deflate(&payload, &mut packed);
            assert!(!packed.ends_with(&TAIL) || payload.is_empty());
            assert_eq!(inflate(&packed, payload.len()).unwrap(), payload);
        }
    }

    #[test]
    fn a_message_inflating_past_the_limit_is_refused_at_the_limit() {
        let big = vec![b'a'; 10 << 20];
        let mut packed = Vec::new();
        deflate(&big, &mut packed);
        assert!(packed.len() < 64 << 10, "10 MiB of one byte packs small");
        assert_eq!(inflate(&packed, 10 << 20).unwrap().len(), 10 << 20);
        assert_eq!(inflate(&packed, (10 << 20) - 1), Err(InflateError::TooBig));
        // A bomb: one flushed segment (its own history only) a thousand
        // times over, about 10 GiB inflated; refused once past the limit.
        let mut segment = packed;
        segment.extend_from_slice(&TAIL);
        let bomb = segment.repeat(1000);
        assert_eq!(inflate(&bomb, 1000), Err(InflateError::TooBig));
    }

    /// A message that refers back before its own start (as a client that
    /// ignored `client_no_context_takeover` would send) never reads what this
    /// thread inflated for another connection.
    #[test]
    fn a_message_cannot_reach_the_one_inflated_before_it() {
        let secret = b"the other connection's secret, long enough to be matched".repeat(4);
        let mut c = Compress::new(Compression::fast(), false);
        let mut first = Vec::with_capacity(4096);
        c.compress_vec(&secret, &mut first, FlushCompress::Sync)
            .unwrap();
        // Compressed with the first as its history: back-references into it.
        let mut second = Vec::with_capacity(4096);
        c.compress_vec(&secret, &mut second, FlushCompress::Sync)
            .unwrap();
        assert!(
            second.len() * 3 < first.len(),
            "{} against {}: the second refers back",
            second.len(),
            first.len()
        );
        let strip = |v: &[u8]| v[..v.len() - TAIL.len()].to_vec();
        assert_eq!(inflate(&strip(&first), 1 << 20).unwrap(), secret);
        let leaked = inflate(&strip(&second), 1 << 20).unwrap_or_default();
        assert!(!leaked
            .windows(16)
            .any(|w| secret.windows(16).any(|s| s == w)));
    }

    #[test]
    fn what_is_not_deflate_is_corrupt() {
        assert_eq!(
            inflate(&[0xff, 0xff, 0xff], 100),
            Err(InflateError::Corrupt)
        );
    }
}
