fn main() {
    ais_cli::exit_quietly_when_stdout_closes();
    let code =
        ais_compiler::driver::with_deep_stack(|| ais_cli::main_with_args(std::env::args_os()));
    std::process::exit(code);
}
