//! AFL++ target: see `m0serve_fuzz::response_roundtrip` for the property it checks.
fn main() {
    afl::fuzz!(|data: &[u8]| m0serve_fuzz::response_roundtrip(data));
}
