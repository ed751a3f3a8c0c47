fn main() {
    std::process::exit(ais_compiler::cli::main_with_args(std::env::args_os()));
}
