//! Multi-file programs (`import`): each file is loaded once, diagnostics
//! point into the file they are about (text and JSON), and the reports are
//! reviewed goldens in `tests/multi-file/*/expected.txt`.

use ais_compiler::diagnostics::{render_human_map, render_json_map};
use ais_compiler::driver::{check_file, FrontEnd};
use ais_compiler::program::FsLoader;
use ais_testkit::golden::{check_file as golden, root};
use std::path::PathBuf;

/// Checks `tests/multi-file/CASE/main.ais` with its imports; file names are
/// shown relative to the repository, as `aisc check` run there shows them.
fn check(case: &str) -> FrontEnd {
    let name = format!("tests/multi-file/{case}/main.ais");
    let path: PathBuf = root().join(&name);
    let source = std::fs::read_to_string(&path).expect("fixture exists");
    check_file(&name, &path, &source, &FsLoader, &Default::default())
}

fn rendered(fe: &FrontEnd) -> String {
    fe.diagnostics
        .iter()
        .map(|d| render_human_map(d, &fe.sources, false))
        .collect()
}

fn names(fe: &FrontEnd) -> Vec<String> {
    fe.sources
        .files()
        .iter()
        .map(|f| {
            f.name
                .rsplit("multi-file/")
                .next()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

#[test]
fn diamond_and_cycle_load_each_file_once() {
    let fe = check("diamond");
    assert!(fe.diagnostics.is_empty(), "{}", rendered(&fe));
    assert_eq!(
        names(&fe),
        [
            "diamond/main.ais",
            "diamond/a.ais",
            "diamond/b.ais",
            "diamond/shared.ais"
        ]
    );
    assert_eq!(fe.index.agents.len(), 4);
    // Ranges are disjoint and in load order.
    let files = fe.sources.files();
    for w in files.windows(2) {
        assert!(w[0].end() < w[1].base);
    }
}

#[test]
fn a_name_declared_in_two_files_shows_both() {
    let fe = check("duplicate");
    let dup = fe
        .diagnostics
        .iter()
        .find(|d| d.code == "E0111")
        .expect("duplicate reported");
    let file = |s| {
        fe.sources
            .file_of(s)
            .map(|f| f.name.clone())
            .unwrap_or_default()
    };
    assert!(file(dup.primary.span).ends_with("duplicate/other.ais"));
    assert!(file(dup.secondary[0].span).ends_with("duplicate/main.ais"));
    let text = rendered(&fe);
    assert!(text.contains("duplicate/other.ais:1:7") && text.contains("duplicate/main.ais:3:7"));
    golden(
        &root().join("tests/multi-file/duplicate/expected.txt"),
        &text,
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_missing_import_is_reported_at_its_string() {
    let fe = check("missing");
    assert_eq!(fe.diagnostics.len(), 1, "{}", rendered(&fe));
    let d = &fe.diagnostics[0];
    assert_eq!(d.code, "E0010");
    let main = &fe.sources.files()[0];
    assert_eq!(
        &main.text[main.local(d.primary.span)],
        "\"agents/nowhere.ais\""
    );
    assert!(
        d.message.contains("No such file or directory"),
        "{}",
        d.message
    );
    assert!(d.help.as_deref().is_some_and(|h| h.contains("relative")));
    golden(
        &root().join("tests/multi-file/missing/expected.txt"),
        &rendered(&fe),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_type_error_in_an_imported_file_is_reported_in_that_file() {
    let fe = check("type_error");
    let d = fe
        .diagnostics
        .iter()
        .find(|d| d.code == "E0109")
        .expect("type error reported");
    let text = render_human_map(d, &fe.sources, false);
    assert!(text.contains("type_error/lib/helper.ais:3:25"), "{text}");
    let j = render_json_map(d, &fe.sources);
    let file = j["spans"][0]["file"].as_str().unwrap_or("");
    assert!(file.ends_with("type_error/lib/helper.ais"), "{j}");
    assert_eq!(j["spans"][0]["line_start"], 3);
    assert_eq!(j["spans"][0]["column_start"], 25);
    golden(
        &root().join("tests/multi-file/type_error/expected.txt"),
        &rendered(&fe),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn formatting_a_file_with_imports_is_idempotent() {
    let src = "import   \"a.ais\" // the helpers\n\n\nimport \"std/text\"\nagent A {\n  flow f() -> str { return \"x\" }\n}\n";
    let once = ais_compiler::format::format_source(src).expect("formats");
    assert!(
        once.starts_with("import \"a.ais\" // the helpers\n\nimport \"std/text\"\n\nagent A {"),
        "{once}"
    );
    let twice = ais_compiler::format::format_source(&once).expect("formats");
    assert_eq!(once, twice);
}

#[test]
fn an_import_after_an_agent_is_a_syntax_error() {
    let parsed = ais_compiler::syntax::parse("agent A {}\nimport \"b.ais\"\n");
    assert_eq!(parsed.errors.len(), 1);
    assert!(parsed.errors[0]
        .to_string()
        .contains("import after an agent"));
}
