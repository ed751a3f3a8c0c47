// mimalloc instead of glibc malloc: a large compile makes millions of small
// allocations and frees, and glibc's share of the CPU (merging freed chunks,
// page faults) grew faster than the program, so compile time per op rose
// with size; with mimalloc it does not (docs/architecture.md, issue 40).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    ais_cli::exit_quietly_when_stdout_closes();
    let code =
        ais_compiler::driver::with_deep_stack(|| ais_cli::main_with_args(std::env::args_os()));
    std::process::exit(code);
}
