//! The analysis never panics: every corpus file (most of `tests/ui/` does
//! not parse or does not check) is analysed and queried at every offset.

use ais_lsp::analysis::Analysis;
use std::path::Path;

#[test]
fn every_query_at_every_offset_of_every_corpus_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in [
        "tests/ui",
        "tests/type-verification",
        "tests/fmt",
        "examples",
    ] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        files.extend(entries.flatten().map(|e| e.path()));
    }
    files.retain(|p| p.extension().is_some_and(|x| x == "ais"));
    files.sort();
    assert!(files.len() > 50, "corpus not found");
    let mut answered = 0usize;
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let a = Analysis::new(&text);
        for offset in 0..=text.len() {
            if let Some((_, sym)) = a.symbol_at(offset) {
                let sym = sym.clone();
                let _ = a.hover(&sym);
                let _ = a.definition(&sym);
                assert!(!a.references(&sym).is_empty());
                answered += 1;
            }
            let _ = a.visible(offset);
            let _ = a.agent_at(offset);
        }
    }
    assert!(answered > 1000, "only {answered} symbols found");
}
