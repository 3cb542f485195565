//! `cargo run --bin replay -- TARGET FILE...`: each file through TARGET's
//! property check, without AFL; a failing check panics with its message.
fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_default();
    let Some(&(_, check)) = m0serve_fuzz::TARGETS.iter().find(|(n, _)| *n == name) else {
        let names: Vec<_> = m0serve_fuzz::TARGETS.iter().map(|(n, _)| *n).collect();
        eprintln!(
            "usage: replay TARGET FILE... (TARGET: {})",
            names.join(", ")
        );
        std::process::exit(2);
    };
    for path in args {
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        eprintln!("{path}: {} bytes", data.len());
        check(&data);
    }
}
