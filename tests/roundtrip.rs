//! Textual IR round trips: canonical files print back byte-for-byte (they
//! are their own expected output: `AIS_BLESS=1` rewrites them), and
//! printing is a fixed point of parse∘print for every corpus file.

use ais_ir::{parse_module, print_module, verifier};
use ais_testkit::golden::{check_file, corpus};

#[test]
fn canonical_files_round_trip_exactly_and_verify() {
    let files = corpus("tests/ir-text", "aisir");
    assert!(!files.is_empty(), "no files under tests/ir-text");
    for path in files {
        let src = std::fs::read_to_string(&path).unwrap_or_default();
        let m = parse_module(&src).unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
        if let Err(e) = check_file(&path, &print_module(&m)) {
            panic!("not canonical: {e}");
        }
        let diags = verifier::verify(&m);
        assert!(diags.is_empty(), "{}: {diags:#?}", path.display());
    }
}

#[test]
fn printing_is_a_fixed_point() {
    let mut files = corpus("tests/ir-text", "aisir");
    files.extend(corpus("tests/verifier", "aisir"));
    for path in files {
        let src = std::fs::read_to_string(&path).unwrap_or_default();
        let m = parse_module(&src).unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
        let once = print_module(&m);
        let again = parse_module(&once)
            .unwrap_or_else(|e| panic!("{}: reparse: {e:?}\n{once}", path.display()));
        assert_eq!(print_module(&again), once, "{}", path.display());
    }
}
