//! The analysis never panics: every corpus file (most of `tests/ui/` does
//! not parse or does not check) is analysed and queried at every offset.
//! Renames are consistent: every span a rename replaces holds the old name.

use ais_lsp::analysis::{Analysis, Symbol};
use ais_lsp::{actions, calls, completion, rename, signature};
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
    let mut renamed = 0usize;
    let mut signatures = 0usize;
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
                match rename::rename(&a, &text, offset, "renamed") {
                    Ok(spans) => {
                        let (_, old) = rename::prepare(&a, &text, offset).expect("prepared");
                        for s in &spans {
                            assert_eq!(
                                text.get(s.range()),
                                Some(old.as_str()),
                                "{}: renaming `{old}` at {offset} would replace {s:?}",
                                path.display()
                            );
                        }
                        renamed += 1;
                    }
                    Err(e) => assert!(matches!(sym, Symbol::Op(_)), "{e}"),
                }
            }
            let _ = a.visible(offset);
            let _ = a.agent_at(offset);
            // Completion lists every operation with its docs: sampled.
            if offset % 8 == 0 {
                let _ = completion::items(&a, &text, offset);
            }
            if let Some(site) = calls::call_at(&text, offset) {
                if signature::signature_help(&a, &site, offset).is_some() {
                    signatures += 1;
                }
            }
        }
        let _ = actions::fixes(&a.diagnostics, &text, ais_ir::Span::new(0, text.len()));
    }
    assert!(answered > 1000, "only {answered} symbols found");
    assert!(renamed > 1000, "only {renamed} renames");
    assert!(signatures > 1000, "only {signatures} signature helps");
}
