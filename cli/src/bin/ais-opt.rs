//! `ais-opt`: run AIS IR passes on textual IR or source (see `ais_cli::opt`).

fn main() {
    let code =
        ais_compiler::driver::with_deep_stack(|| ais_cli::opt::main_with_args(std::env::args_os()));
    std::process::exit(code);
}
