fn main() {
    std::process::exit(m0serve::cli::main(std::env::args_os()));
}
