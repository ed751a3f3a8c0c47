//! `aisc` with fault injection: the product's command line, plus the
//! [`FAULT_ENV`](ais_testkit::fault::FAULT_ENV) switch. Test-only: the
//! process-level journal tests crash it at every write.

fn main() {
    ais_testkit::fault::install_from_env();
    let code =
        ais_compiler::driver::with_deep_stack(|| ais_cli::main_with_args(std::env::args_os()));
    std::process::exit(code);
}
