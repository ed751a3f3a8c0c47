//! `src/syntax/grammar.rs` is LALRPOP's output for `src/syntax/grammar.lalrpop`,
//! checked in so that a build never runs LALRPOP (issue 33). This test runs
//! LALRPOP on the grammar and fails if the checked-in file differs, so the two
//! cannot drift. After editing the grammar, `AIS_BLESS=1 cargo test -p
//! ais-compiler --test grammar_generated` rewrites the checked-in file.

use std::path::Path;

fn blessing() -> bool {
    std::env::var_os("AIS_BLESS").is_some_and(|v| v != "0")
}

#[test]
fn checked_in_parser_is_lalrpop_output_for_the_grammar() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/syntax");
    let out = tempfile::tempdir().expect("temporary directory");
    lalrpop::Configuration::new()
        .set_out_dir(out.path())
        // No cargo features: what the build script generated before.
        .set_features(Vec::<String>::new())
        .force_build(true)
        .log_quiet()
        .process_file(src.join("grammar.lalrpop"))
        .expect("LALRPOP rejected the grammar");
    let generated = std::fs::read_to_string(out.path().join("grammar.rs"))
        .expect("LALRPOP wrote no grammar.rs");
    let checked_in_path = src.join("grammar.rs");
    if blessing() {
        std::fs::write(&checked_in_path, &generated).expect("write src/syntax/grammar.rs");
    }
    let checked_in = std::fs::read_to_string(&checked_in_path).expect("read src/syntax/grammar.rs");
    // Both start with LALRPOP's version and the grammar's hash: comparing the
    // headers first gives a short message for the usual case (grammar edited).
    let header = |s: &str| s.lines().take(2).collect::<Vec<_>>().join("\n");
    assert_eq!(
        header(&checked_in),
        header(&generated),
        "src/syntax/grammar.rs is stale: run `AIS_BLESS=1 cargo test -p ais-compiler --test grammar_generated`"
    );
    assert!(
        checked_in == generated,
        "src/syntax/grammar.rs differs from LALRPOP's output ({} vs {} bytes): run `AIS_BLESS=1 cargo test -p ais-compiler --test grammar_generated`",
        checked_in.len(),
        generated.len()
    );
}
