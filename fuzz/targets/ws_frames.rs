//! AFL++ target: see `m0serve_fuzz::ws_frames` for the property it checks.
fn main() {
    afl::fuzz!(|data: &[u8]| m0serve_fuzz::ws_frames(data));
}
