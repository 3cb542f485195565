//! AFL++ target: see `m0serve_fuzz::proxy_split` for the property it checks.
fn main() {
    afl::fuzz!(|data: &[u8]| m0serve_fuzz::proxy_split(data));
}
