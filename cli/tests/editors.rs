//! The editor packages in `editors/`, checked with the tools editors use:
//!
//! - `editors/tree-sitter-ais`: the committed parser (`src/`) is what
//!   `tree-sitter generate` makes of `grammar.js`; `tree-sitter test` passes
//!   (corpus and highlight tests); every example and reference-style program
//!   parses with no ERROR or MISSING node.
//! - `editors/vscode`: its TextMate grammar tokenizes the cases in
//!   `test/cases/` as in the golden token files (vscode-textmate and
//!   vscode-oniguruma, the engine of VS Code), and leaves no rule open at the
//!   end of any example.
//!
//! The tools live in `$AIS_NPM_DIR` (default `target/npm`), where `./test`
//! installs them (`scripts/provision/`): the npm packages in
//! `node_modules/`, the tree-sitter CLI in `bin/` (from crates.io: the npm
//! package of the same CLI downloads its binary from outside the registry
//! at install time). The tests that use them are `#[ignore = "needs ...:
//! run ./test"]`; run without them, they fail, naming the fix.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const TREE_SITTER_VERSION: &str = "0.27.1";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ has a parent")
        .to_path_buf()
}

fn npm_dir() -> PathBuf {
    std::env::var_os("AIS_NPM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/npm"))
}

fn tree_sitter() -> PathBuf {
    let dir = npm_dir();
    let bin = dir.join("bin/tree-sitter");
    assert!(
        bin.is_file(),
        "needs the tree-sitter CLI {TREE_SITTER_VERSION}, which is not installed at `{}`.\n\
         Run ./test, which installs it into {} (scripts/provision/tree-sitter.sh), \
         or point AIS_NPM_DIR at the prefix where it is installed.",
        bin.display(),
        dir.display()
    );
    bin
}

fn node_modules() -> PathBuf {
    let dir = npm_dir();
    let modules = dir.join("node_modules");
    for package in ["vscode-textmate", "vscode-oniguruma"] {
        assert!(
            modules.join(package).join("package.json").is_file(),
            "needs the npm package `{package}`, which is not installed under `{}`.\n\
             Run ./test, which installs it into {} (scripts/provision/npm.sh), \
             or point AIS_NPM_DIR at the npm prefix where it is installed.",
            modules.display(),
            dir.display()
        );
    }
    modules
}

fn grammar_dir() -> PathBuf {
    workspace().join("editors/tree-sitter-ais")
}

/// Runs the tree-sitter CLI with its caches and configuration in `home`, so
/// tests share nothing with each other or with the user's setup.
fn run_tree_sitter(home: &Path, dir: &Path, args: &[&str]) -> Output {
    Command::new(tree_sitter())
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("TREE_SITTER_DIR", home.join("config"))
        .env("TREE_SITTER_LIBDIR", home.join("lib"))
        .env("NO_COLOR", "1")
        .output()
        .expect("the tree-sitter CLI runs")
}

fn text(out: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

fn ais_files(dirs: &[&str]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in dirs {
        for entry in std::fs::read_dir(workspace().join(dir)).expect("read_dir") {
            let path = entry.expect("dir entry").path();
            if path.extension().is_some_and(|e| e == "ais") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[test]
#[ignore = "needs the tree-sitter CLI and a C compiler: run ./test"]
fn tree_sitter_parser_in_src_is_generated_from_grammar_js() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let copy = tmp.path().join("grammar");
    copy_dir(&grammar_dir(), &copy);
    for generated in ["parser.c", "grammar.json", "node-types.json"] {
        std::fs::remove_file(copy.join("src").join(generated)).expect("remove generated file");
    }
    let out = run_tree_sitter(tmp.path(), &copy, &["generate"]);
    assert!(
        out.status.success(),
        "tree-sitter generate failed\n{}",
        text(&out)
    );
    for generated in ["parser.c", "grammar.json", "node-types.json"] {
        let fresh = std::fs::read_to_string(copy.join("src").join(generated)).expect("generated");
        let committed =
            std::fs::read_to_string(grammar_dir().join("src").join(generated)).expect("committed");
        assert!(
            fresh == committed,
            "editors/tree-sitter-ais/src/{generated} is not what `tree-sitter generate` makes of \
             grammar.js; run `tree-sitter generate` in editors/tree-sitter-ais and commit src/"
        );
    }
}

#[test]
#[ignore = "needs the tree-sitter CLI and a C compiler: run ./test"]
fn tree_sitter_corpus_and_highlight_tests_pass() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = run_tree_sitter(
        tmp.path(),
        &grammar_dir(),
        &["test", "--config-path", "test/config.json"],
    );
    let report = text(&out);
    assert!(out.status.success(), "tree-sitter test failed\n{report}");
    // Both kinds of test ran: the corpus and the highlight assertions.
    assert!(report.contains("Interpolation holes"), "{report}");
    assert!(report.contains("basic.ais"), "{report}");
    assert!(!report.contains('✗'), "{report}");
}

#[test]
#[ignore = "needs the tree-sitter CLI and a C compiler: run ./test"]
fn tree_sitter_parses_every_example_without_error_nodes() {
    let files = ais_files(&["examples", "tests/reference-style"]);
    assert!(
        files.len() >= 20,
        "found only {} example files",
        files.len()
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let grammar = grammar_dir();
    let mut args = vec!["parse", "-p", grammar.to_str().expect("utf-8 path")];
    args.extend(files.iter().map(|f| f.to_str().expect("utf-8 path")));
    let out = run_tree_sitter(tmp.path(), tmp.path(), &args);
    let trees = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "tree-sitter parse failed\n{}",
        text(&out)
    );
    assert!(
        !trees.contains("ERROR") && !trees.contains("MISSING"),
        "error nodes in the parse trees\n{trees}"
    );
    // One tree per file, each with at least one agent.
    assert_eq!(
        trees.matches("(source_file").count(),
        files.len(),
        "{trees}"
    );
    assert!(trees.matches("(agent ").count() >= files.len(), "{trees}");
}

#[test]
#[ignore = "needs the tree-sitter CLI and a C compiler: run ./test"]
fn tree_sitter_reports_a_broken_program() {
    // The parse check above could pass by not looking: a program with a
    // syntax error must show an ERROR node.
    let tmp = tempfile::tempdir().expect("tempdir");
    let broken = tmp.path().join("broken.ais");
    std::fs::write(
        &broken,
        "agent A {\n    flow f() {\n        let = ask(\n    }\n}\n",
    )
    .expect("write");
    let grammar = grammar_dir();
    let out = run_tree_sitter(
        tmp.path(),
        tmp.path(),
        &[
            "parse",
            "-p",
            grammar.to_str().expect("utf-8 path"),
            broken.to_str().expect("utf-8 path"),
        ],
    );
    let trees = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        trees.contains("ERROR") || trees.contains("MISSING"),
        "{}",
        text(&out)
    );
}

#[test]
#[ignore = "needs node and the npm TextMate engine: run ./test"]
fn textmate_grammar_matches_golden_tokens_and_closes_every_rule() {
    let modules = node_modules();
    let vscode = workspace().join("editors/vscode");
    let files = ais_files(&[
        "examples",
        "tests/reference-style",
        "tests/parse",
        "tests/fmt",
    ]);
    let out = Command::new("node")
        .arg("test/run.js")
        .args(&files)
        .current_dir(&vscode)
        .env("NODE_PATH", &modules)
        .output()
        .expect("needs node: run ./test, which installs it (scripts/provision/apt.sh)");
    let report = text(&out);
    assert!(
        out.status.success(),
        "TextMate grammar test failed\n{report}"
    );
    let cases = std::fs::read_dir(vscode.join("test/cases"))
        .expect("cases")
        .count();
    let expected = format!("{} passed, 0 failed", cases + files.len());
    assert!(report.contains(&expected), "want `{expected}`\n{report}");
}

#[test]
fn vscode_extension_manifest_declares_language_grammar_and_client() {
    let vscode = workspace().join("editors/vscode");
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(vscode.join("package.json")).expect("package.json"),
    )
    .expect("package.json is JSON");
    let contributes = &manifest["contributes"];
    assert_eq!(contributes["languages"][0]["id"], "ais");
    assert_eq!(contributes["languages"][0]["extensions"][0], ".ais");
    let grammar = &contributes["grammars"][0];
    assert_eq!(grammar["scopeName"], "source.ais");
    // Every file the manifest names exists and is JSON where it should be.
    for file in [
        grammar["path"].as_str().expect("grammar path"),
        contributes["languages"][0]["configuration"]
            .as_str()
            .expect("configuration path"),
    ] {
        let body = std::fs::read_to_string(vscode.join(file)).expect("named file exists");
        serde_json::from_str::<serde_json::Value>(&body).expect("named file is JSON");
    }
    assert!(vscode
        .join(manifest["main"].as_str().expect("main"))
        .is_file());
    assert!(manifest["dependencies"]["vscode-languageclient"].is_string());
    let client = std::fs::read_to_string(vscode.join("extension.js")).expect("extension.js");
    assert!(client.contains("'lsp'") && client.contains("vscode-languageclient/node"));
}
