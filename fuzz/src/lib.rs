//! The fuzz targets' properties, one function per target. Each takes the
//! fuzzer's bytes and panics when a property fails; the AFL++ binaries in
//! `targets/` only call them, and `tests/replay.rs` runs every file of the
//! corpus and of `regressions/` through them without AFL.
//!
//! Beyond "no panic, no hang", each checks something that must hold for any
//! input (see each function): the same events however the input is split,
//! encode-then-decode giving back what was encoded, and what was accepted
//! obeying the grammar.

mod chunked;
mod conn_split;
mod h2_frames;
mod head;
mod proxy_split;
mod response_roundtrip;
mod session;
mod split;
mod ws_frames;
mod ws_handshake;

pub use chunked::chunked;
pub use conn_split::conn_split;
pub use h2_frames::h2_frames;
pub use head::head;
pub use proxy_split::proxy_split;
pub use response_roundtrip::response_roundtrip;
pub use ws_frames::ws_frames;
pub use ws_handshake::ws_handshake;

/// A target's property check: panics when the property fails for the input.
pub type Check = fn(&[u8]);

/// Every target by name, as the corpus and regression folders are named.
pub const TARGETS: &[(&str, Check)] = &[
    ("head", head),
    ("chunked", chunked),
    ("conn_split", conn_split),
    ("proxy_split", proxy_split),
    ("response_roundtrip", response_roundtrip),
    ("ws_frames", ws_frames),
    ("ws_handshake", ws_handshake),
    ("h2_frames", h2_frames),
];
