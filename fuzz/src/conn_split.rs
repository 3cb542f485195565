use crate::session::Session;
use crate::split::Split;

/// The whole server connection fed arbitrary bytes (see [`crate::split`] for
/// the layout): whole, split where the fuzzer chose, and byte by byte, driven
/// as a session drives it (every request answered, pipelined ones included,
/// an upgrade carried on as WebSocket, then the end of input). The heads,
/// bodies, ends, errors, WebSocket events, the bytes written back and whether
/// the connection must close are the same for every feed.
pub fn conn_split(data: &[u8]) {
    let split = Split::new(data);
    let [whole, pieces, bytes] = split.feeds();
    let expected = Session::run(&whole);
    assert_eq!(
        Session::run(&pieces),
        expected,
        "split at {:?}",
        lengths(&pieces)
    );
    assert_eq!(Session::run(&bytes), expected, "fed byte by byte");
}

fn lengths(pieces: &[&[u8]]) -> Vec<usize> {
    pieces.iter().map(|p| p.len()).collect()
}
