//! `aisc lsp` on a program of several files: the open document's imports
//! are analysed with it (from disk, or from the editor when open there);
//! definitions, references and hover reach into imported files; problems
//! located in an imported file are published to that file's URI.

mod lsp_support;

use lsp_support::Session;
use serde_json::{json, Value};

const MAIN: &str = "import \"lib/helper.ais\"\n\nagent Main {\n    @entry flow main() -> str {\n        return Helper.help(\"x\")\n    }\n}\n";
const HELPER: &str = "agent Helper {\n    flow help(topic: str) -> str {\n        let n: number = \"not a number\"\n        return ask(\"Help with {topic} {n}\")\n    }\n}\n";
const HELPER_FIXED: &str = "agent Helper {\n    flow help(topic: str) -> str {\n        return ask(\"Help with {topic}\")\n    }\n}\n";

/// The next `count` publishDiagnostics notifications, by URI.
fn published(s: &mut Session, count: usize) -> Vec<(String, Vec<Value>)> {
    let mut out = Vec::new();
    while out.len() < count {
        let m = s.recv();
        if m["method"] == "textDocument/publishDiagnostics" {
            let uri = m["params"]["uri"].as_str().unwrap_or("").to_string();
            let diags = m["params"]["diagnostics"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            out.push((uri, diags));
        }
    }
    out
}

fn at(s: &mut Session, method: &str, uri: &str, line: u32, character: u32) -> Value {
    let mut params =
        json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character}});
    if method == "textDocument/references" {
        params["context"] = json!({"includeDeclaration": true});
    }
    s.request(method, params)["result"].clone()
}

#[test]
fn imports_are_analysed_and_their_problems_go_to_their_own_uri() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    std::fs::create_dir(root.join("lib")).expect("mkdir");
    std::fs::write(root.join("main.ais"), MAIN).expect("write");
    std::fs::write(root.join("lib/helper.ais"), HELPER).expect("write");
    let main_uri = format!("file://{}/main.ais", root.display());
    let helper_uri = format!("file://{}/lib/helper.ais", root.display());

    let mut s = Session::start();
    s.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": main_uri, "languageId": "ais", "version": 1, "text": MAIN}}),
    );
    let got = published(&mut s, 2);
    assert_eq!(got[0].0, main_uri);
    assert_eq!(got[0].1, Vec::<Value>::new(), "main itself is clean");
    assert_eq!(got[1].0, helper_uri);
    let e = got[1]
        .1
        .iter()
        .find(|d| d["code"] == "E0109")
        .expect("E0109 in helper");
    assert_eq!(e["range"]["start"]["line"], 2);

    // `Helper.help` in main (line 4) is defined in the imported file.
    let def = at(&mut s, "textDocument/definition", &main_uri, 4, 23);
    assert_eq!(def["uri"], helper_uri.as_str(), "{def}");
    assert_eq!(def["range"]["start"]["line"], 1);
    let refs = at(&mut s, "textDocument/references", &main_uri, 4, 23);
    let uris: Vec<&str> = refs
        .as_array()
        .map(|a| a.iter().filter_map(|l| l["uri"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        uris.contains(&main_uri.as_str()) && uris.contains(&helper_uri.as_str()),
        "{refs}"
    );
    let hover = at(&mut s, "textDocument/hover", &main_uri, 4, 23);
    let text = hover["contents"]["value"].as_str().unwrap_or("");
    assert!(text.contains("help(topic: str) -> str"), "{hover}");

    // The helper fixed in the editor (not on disk): main's analysis reads
    // the editor's text, and the helper's old problems are cleared.
    s.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": helper_uri, "languageId": "ais", "version": 1, "text": HELPER_FIXED}}),
    );
    let got = published(&mut s, 1);
    assert_eq!(got[0].0, helper_uri);
    s.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": main_uri, "version": 2}, "contentChanges": [{"text": MAIN}]}),
    );
    let got = published(&mut s, 2);
    assert_eq!(got[0], (main_uri.clone(), Vec::new()));
    assert_eq!(got[1], (helper_uri.clone(), Vec::new()), "cleared");
    s.finish();
}

/// `text` with LSP `edits` applied (ASCII text: characters are bytes).
fn apply(text: &str, edits: &[Value]) -> String {
    let offset = |p: &Value| {
        let line = p["line"].as_u64().expect("line") as usize;
        let ch = p["character"].as_u64().expect("character") as usize;
        text.split_inclusive('\n')
            .take(line)
            .map(str::len)
            .sum::<usize>()
            + ch
    };
    let mut spans: Vec<(usize, usize, &str)> = edits
        .iter()
        .map(|e| {
            (
                offset(&e["range"]["start"]),
                offset(&e["range"]["end"]),
                e["newText"].as_str().expect("newText"),
            )
        })
        .collect();
    spans.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut out = text.to_string();
    for (start, end, new) in spans {
        out.replace_range(start..end, new);
    }
    out
}

#[test]
fn renaming_a_flow_defined_in_an_imported_file_edits_both_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    std::fs::create_dir(root.join("lib")).expect("mkdir");
    std::fs::write(root.join("main.ais"), MAIN).expect("write");
    std::fs::write(root.join("lib/helper.ais"), HELPER_FIXED).expect("write");
    let main_uri = format!("file://{}/main.ais", root.display());
    let helper_uri = format!("file://{}/lib/helper.ais", root.display());

    let mut s = Session::start();
    s.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": main_uri, "languageId": "ais", "version": 1, "text": MAIN}}),
    );
    published(&mut s, 1);
    let edit = s.request(
        "textDocument/rename",
        json!({"textDocument": {"uri": main_uri}, "position": {"line": 4, "character": 23}, "newName": "assist"}),
    )["result"]
        .clone();
    let changes = edit["changes"].as_object().expect("changes").clone();
    assert_eq!(changes.len(), 2, "{edit}");
    let main_edits = changes[&main_uri].as_array().expect("main edits").clone();
    let helper_edits = changes[&helper_uri]
        .as_array()
        .expect("helper edits")
        .clone();
    assert_eq!(main_edits.len(), 1, "{edit}");
    assert_eq!(helper_edits.len(), 1, "{edit}");
    s.finish();

    let main = apply(MAIN, &main_edits);
    let helper = apply(HELPER_FIXED, &helper_edits);
    assert!(main.contains("Helper.assist(\"x\")"), "{main}");
    assert!(helper.contains("flow assist(topic: str)"), "{helper}");
    std::fs::write(root.join("main.ais"), &main).expect("write");
    std::fs::write(root.join("lib/helper.ais"), &helper).expect("write");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_aisc"))
        .args(["check", "main.ais"])
        .current_dir(&root)
        .env("HOME", &root)
        .output()
        .expect("aisc runs");
    assert!(
        o.status.success(),
        "the renamed program does not check: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}
