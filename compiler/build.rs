fn main() {
    // Generates `syntax/grammar.rs` from `src/syntax/grammar.lalrpop` into OUT_DIR.
    lalrpop::Configuration::new()
        .use_cargo_dir_conventions()
        .emit_rerun_directives(true)
        .process()
        .expect("lalrpop grammar failed to compile");
}
