use m0serve_proto::http::proxy_protocol::{self, Preamble};

use crate::session::Session;
use crate::split::Split;

/// A connection from a trusted proxy fed arbitrary bytes (see
/// [`crate::split`]): a PROXY protocol preamble, then HTTP whose heads'
/// forwarding headers are resolved. The transcript (preamble, heads,
/// forwarded facts, bodies, errors, output, must-close) is the same whole,
/// split and byte by byte. And the preamble parser decides once: every
/// prefix of the payload waits until the first that decides, and every
/// longer one decides the same (a client address, with the same length).
pub fn proxy_split(data: &[u8]) {
    let split = Split::new(data);
    let [whole, pieces, bytes] = split.feeds();
    let expected = Session::run_with(&whole, true);
    assert_eq!(Session::run_with(&pieces, true), expected, "split");
    assert_eq!(
        Session::run_with(&bytes, true),
        expected,
        "fed byte by byte"
    );

    let payload = split.payload;
    let mut decided: Option<Result<(Preamble, usize), proxy_protocol::Malformed>> = None;
    // Prefixes up to a v1 line's length and a small v2 header, then the whole.
    let lengths = (0..=payload.len().min(300)).chain([payload.len()]);
    for n in lengths {
        let got = proxy_protocol::parse(&payload[..n]);
        match (&decided, got) {
            (None, Ok(None)) => {}
            (None, Ok(Some((p, len)))) => {
                assert!(len <= n, "consumed {len} of {n}");
                decided = Some(Ok((p, len)));
            }
            (None, Err(e)) => decided = Some(Err(e)),
            (Some(first), got) => {
                assert_eq!(got.map(|r| r.expect("decided")), *first, "at {n}");
            }
        }
    }
}
