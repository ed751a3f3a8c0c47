//! Runs the verifier corpus in `tests/verifier/`: each file carries its
//! expected diagnostics inline (`//~ ERROR V0016 text`, the golden
//! dialect of `ais_testkit::golden`), and the verifier must report exactly
//! those.

use ais_ir::{parse_module, verifier};
use ais_testkit::golden::{compare, corpus, expectations, rel};

#[test]
fn verifier_corpus() {
    let files = corpus("tests/verifier", "aisir");
    assert!(files.len() >= 20, "verifier corpus missing: {files:?}");
    let mut failures = Vec::new();
    for path in files {
        let name = rel(&path);
        let src = std::fs::read_to_string(&path).unwrap_or_default();
        let m = match parse_module(&src) {
            Ok(m) => m,
            Err(errs) => {
                failures.push(format!("{name}: does not parse: {errs:?}"));
                continue;
            }
        };
        let expected = match expectations(&src) {
            Ok(e) if e.is_empty() => {
                failures.push(format!("{name}: no expectations"));
                continue;
            }
            Ok(e) => e,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        if let Err(e) = compare(&src, &verifier::verify_diagnostics(&m), &expected) {
            failures.push(format!("{name}:\n{e}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
