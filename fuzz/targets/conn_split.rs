//! AFL++ target: see `m0serve_fuzz::conn_split` for the property it checks.
fn main() {
    afl::fuzz!(|data: &[u8]| m0serve_fuzz::conn_split(data));
}
