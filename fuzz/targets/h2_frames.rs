//! AFL++ target: see `m0serve_fuzz::h2_frames` for the property it checks.
fn main() {
    afl::fuzz!(|data: &[u8]| m0serve_fuzz::h2_frames(data));
}
