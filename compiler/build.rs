fn main() {
    // Generates `grammar.rs` from `src/syntax/grammar.lalrpop` into OUT_DIR.
    lalrpop::Configuration::new()
        .use_cargo_dir_conventions()
        .process_file("src/syntax/grammar.lalrpop")
        .expect("lalrpop grammar failed to compile");
}
