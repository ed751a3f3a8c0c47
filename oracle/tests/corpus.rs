//! The golden corpus of the differential test: `tests/differential/*.ais`,
//! each with a header giving its entry arguments and expected outcome:
//!
//! ```text
//! // ARGS: {"which": "c"}        entry arguments as a JSON object
//! // EXPECT: "got c"             the entry's result as JSON
//! // PRINTS: line 1 | line 2     printed lines, separated by ` | ` (may be empty)
//! ```
//!
//! Each program runs on the oracle and on the VM at every level and worker
//! count (they must agree), and the agreed outcome must be the expected one.
#![allow(clippy::unwrap_used)]

mod support;

use ais_testkit::golden::directive as header;
use serde_json::Value as Json;
use std::path::Path;

#[test]
fn differential_corpus_agrees_with_expectations() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/differential");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ais"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "corpus missing in {}", dir.display());
    for path in files {
        let source = std::fs::read_to_string(&path).unwrap();
        let name = path.display();
        let args: Json = serde_json::from_str(header(&source, "ARGS").unwrap()).unwrap();
        let args: Vec<(String, Json)> = args
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let expected: Json = serde_json::from_str(header(&source, "EXPECT").unwrap()).unwrap();
        let prints: Vec<String> = match header(&source, "PRINTS").unwrap() {
            "" => Vec::new(),
            lines => lines.split(" | ").map(str::to_string).collect(),
        };
        let observed =
            support::differences(&source, &args).unwrap_or_else(|d| panic!("{name}: {d}"));
        assert_eq!(
            observed.result,
            Ok(support::normalize(&expected)),
            "{name}: result"
        );
        assert_eq!(observed.printed, prints, "{name}: printed lines");
    }
}
