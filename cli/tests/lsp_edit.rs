//! `aisc lsp` over stdio: rename (with prepareRename), signature help,
//! quick fixes for "did you mean" and completion of named arguments. Every
//! edit the server proposes is applied and the result re-checked by the
//! server itself: it must be free of diagnostics.

mod lsp_support;

use lsp_support::{Session, URI};
use serde_json::{json, Value};

const PROGRAM: &str = r#"agent Catalogue {
    discoverable: [find]
    memory shelf: STM

    flow find(title: str) -> str {
        umem(title, "shelf")
        let hits = qmem(title, "shelf")
        return ask("Where is {title}?", hits, temperature: 0.2)
    }
}

agent Desk {
    @read_only capability lookup(q: str) -> json;
    @entry flow main() -> str {
        let where = Catalogue.find(title: "Dune")
        let facts = inv("lookup", "{}")
        return think("Say {where}", facts)
    }
}
"#;

/// (line, character) of the `nth` occurrence of `needle`, plus `shift`
/// characters (the texts here are ASCII).
fn pos(text: &str, needle: &str, nth: usize, shift: usize) -> (u32, u32) {
    let at = text
        .match_indices(needle)
        .nth(nth)
        .map(|(i, _)| i + shift)
        .unwrap_or_else(|| panic!("`{needle}` #{nth} not in the text"));
    let line = text[..at].matches('\n').count();
    let col = at - text[..at].rfind('\n').map_or(0, |i| i + 1);
    (line as u32, col as u32)
}

fn offset(text: &str, p: &Value) -> usize {
    let line = p["line"].as_u64().expect("line") as usize;
    let ch = p["character"].as_u64().expect("character") as usize;
    text.split_inclusive('\n')
        .take(line)
        .map(str::len)
        .sum::<usize>()
        + ch
}

/// Applies a list of LSP text edits (non-overlapping) to `text`.
fn apply(text: &str, edits: &Value) -> String {
    let mut edits: Vec<(usize, usize, String)> = edits
        .as_array()
        .expect("edits")
        .iter()
        .map(|e| {
            (
                offset(text, &e["range"]["start"]),
                offset(text, &e["range"]["end"]),
                e["newText"].as_str().expect("newText").to_string(),
            )
        })
        .collect();
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    let mut out = text.to_string();
    for (s, e, new) in edits {
        out.replace_range(s..e, &new);
    }
    out
}

fn rename(s: &mut Session, at: (u32, u32), new_name: &str) -> Value {
    s.request(
        "textDocument/rename",
        json!({"textDocument": {"uri": URI}, "position": {"line": at.0, "character": at.1}, "newName": new_name}),
    )
}

/// Renames the symbol at `at`, checks the edit count, applies the edits and
/// returns the new text (which the server must find clean).
fn rename_and_check(s: &mut Session, at: (u32, u32), new_name: &str, edits: usize) -> String {
    let r = rename(s, at, new_name);
    let changes = &r["result"]["changes"][URI];
    assert_eq!(
        changes.as_array().map(Vec::len),
        Some(edits),
        "rename to `{new_name}`: {r}"
    );
    let renamed = apply(PROGRAM, changes);
    let diags = s.change(&renamed);
    assert_eq!(diags, Vec::<Value>::new(), "after rename:\n{renamed}");
    s.change(PROGRAM);
    renamed
}

#[test]
fn rename_variables_flows_agents_capabilities_and_memories() {
    let mut s = Session::start();
    assert_eq!(s.open(PROGRAM), Vec::<Value>::new());
    // A parameter: its definition, two op arguments, the template hole and
    // the named argument of the cross-agent call.
    let out = rename_and_check(&mut s, pos(PROGRAM, "title", 1, 2), "book", 5);
    assert!(out.contains("flow find(book: str)") && out.contains("Catalogue.find(book: \"Dune\")"));
    assert!(out.contains("\"Where is {book}?\""), "{out}");
    // A flow: declaration, `discoverable` entry, the call.
    let out = rename_and_check(&mut s, pos(PROGRAM, "find", 0, 0), "locate", 3);
    assert!(out.contains("discoverable: [locate]") && out.contains("Catalogue.locate("));
    // An agent, from a use.
    let out = rename_and_check(&mut s, pos(PROGRAM, "Catalogue.find", 0, 3), "Library", 2);
    assert!(out.starts_with("agent Library {") && out.contains("Library.find("));
    // A capability: declaration and the tool name string of `inv`.
    let out = rename_and_check(&mut s, pos(PROGRAM, "\"lookup\"", 0, 2), "search", 2);
    assert!(out.contains("capability search(") && out.contains("inv(\"search\""));
    // A memory: its declaration and the tier strings naming it.
    let out = rename_and_check(&mut s, pos(PROGRAM, "shelf", 0, 0), "rack", 3);
    assert!(out.contains("memory rack: STM") && out.contains("qmem(title, \"rack\")"));
    s.finish();
}

#[test]
fn prepare_rename_gives_the_name_and_refuses_builtins_and_bad_names() {
    let mut s = Session::start();
    s.open(PROGRAM);
    let at = pos(PROGRAM, "\"shelf\"", 0, 3);
    let r = s.request(
        "textDocument/prepareRename",
        json!({"textDocument": {"uri": URI}, "position": {"line": at.0, "character": at.1}}),
    );
    // The range is inside the quotes.
    let start = pos(PROGRAM, "\"shelf\"", 0, 1);
    assert_eq!(r["result"]["placeholder"], "shelf", "{r}");
    assert_eq!(
        r["result"]["range"]["start"],
        json!({"line": start.0, "character": start.1})
    );
    let at = pos(PROGRAM, "ask(", 0, 1);
    let r = s.request(
        "textDocument/prepareRename",
        json!({"textDocument": {"uri": URI}, "position": {"line": at.0, "character": at.1}}),
    );
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("built-in")),
        "{r}"
    );
    let title = pos(PROGRAM, "title", 1, 0);
    for bad in ["let", "9lives", "two words", ""] {
        let r = rename(&mut s, title, bad);
        assert!(r["error"]["message"].is_string(), "`{bad}`: {r}");
    }
    // Names already taken where the symbol lives: refused, with the reason.
    for (at, taken, what) in [
        (title, "hits", "a variable"),
        (pos(PROGRAM, "agent Desk", 0, 6), "Catalogue", "an agent"),
        (pos(PROGRAM, "lookup(", 0, 0), "main", "a flow"),
    ] {
        let r = rename(&mut s, at, taken);
        let msg = r["error"]["message"].as_str().unwrap_or("");
        assert!(msg.contains(what), "`{taken}`: {r}");
    }
    // The same name in another flow's scope is free.
    assert!(rename(&mut s, pos(PROGRAM, "where =", 0, 0), "hits")["result"].is_object());
    // Nowhere to rename: no result, no error.
    let r = s.request(
        "textDocument/prepareRename",
        json!({"textDocument": {"uri": URI}, "position": {"line": 3, "character": 0}}),
    );
    assert_eq!(r["result"], Value::Null, "{r}");
    s.finish();
}

fn signature(s: &mut Session, at: (u32, u32)) -> Value {
    s.at("textDocument/signatureHelp", at.0, at.1)
}

#[test]
fn signature_help_for_ops_flows_and_capabilities_with_the_active_parameter() {
    let mut s = Session::start();
    s.open(PROGRAM);
    // `ask("...", hits|`: the second argument is a context value.
    let h = signature(&mut s, pos(PROGRAM, "hits,", 0, 4));
    let sig = &h["signatures"][0];
    let label = sig["label"].as_str().expect("label");
    assert!(
        label.starts_with("ask(prompt, value..., prompt:, context:, tools:"),
        "{label}"
    );
    assert!(label.ends_with(") -> str"), "{label}");
    assert_eq!(h["activeParameter"], 1);
    let active = &sig["parameters"][1]["label"];
    let (a, b) = (
        active[0].as_u64().expect("start") as usize,
        active[1].as_u64().expect("end") as usize,
    );
    assert_eq!(&label[a..b], "value...");
    // Inside a named argument: that parameter, by name.
    let h = signature(&mut s, pos(PROGRAM, "\"Dune\"", 0, 3));
    assert_eq!(
        h["signatures"][0]["label"],
        "flow Catalogue.find(title: str) -> str"
    );
    assert_eq!(h["activeParameter"], 0);
    let h = signature(&mut s, pos(PROGRAM, "temperature: 0.2", 0, 14));
    let label = h["signatures"][0]["label"]
        .as_str()
        .expect("label")
        .to_string();
    let n = h["activeParameter"].as_u64().expect("active") as usize;
    let p = &h["signatures"][0]["parameters"][n]["label"];
    assert_eq!(
        &label[p[0].as_u64().expect("s") as usize..p[1].as_u64().expect("e") as usize],
        "temperature:"
    );
    // A capability of the agent, while the call is still being typed (the
    // document does not parse).
    let typing = PROGRAM.replace(
        "let facts = inv(\"lookup\", \"{}\")",
        "let facts = lookup(\"x\", ",
    );
    s.change(&typing);
    let h = signature(&mut s, pos(&typing, "lookup(\"x\", ", 0, 12));
    assert_eq!(
        h["signatures"][0]["label"],
        "capability lookup(q: str) -> json"
    );
    // Past its only parameter: none active.
    assert_eq!(h["activeParameter"], Value::Null, "{h}");
    // Outside any call: nothing.
    assert_eq!(
        signature(&mut s, pos(&typing, "agent Desk", 0, 2)),
        Value::Null
    );
    s.finish();
}

#[test]
fn quick_fixes_apply_every_did_you_mean_suggestion() {
    let mut s = Session::start();
    let broken = PROGRAM
        .replace("qmem(title, \"shelf\")", "qmem(titl, \"shelf\")")
        .replace("return think(", "return thnk(")
        .replace("Catalogue.find(title:", "Catalog.find(title:")
        .replace("temperature: 0.2", "temprature: 0.2");
    let diags = s.open(&broken);
    // Four misspellings, and the named argument of the call to the unknown
    // agent, which has no suggestion.
    assert_eq!(diags.len(), 5, "{diags:#?}");
    let mut fixed = broken.clone();
    let mut titles = Vec::new();
    for d in &diags {
        let r = s.request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": URI}, "range": d["range"], "context": {"diagnostics": [d]}}),
        );
        let actions = r["result"].as_array().cloned().unwrap_or_default();
        let suggests = d["message"]
            .as_str()
            .is_some_and(|m| m.contains("did you mean"));
        if !suggests {
            assert_eq!(actions.len(), 0, "{d}\n{r}");
            continue;
        }
        assert_eq!(actions.len(), 1, "{d}\n{r}");
        let a = &actions[0];
        assert_eq!(a["kind"], "quickfix");
        assert_eq!(a["diagnostics"][0]["code"], d["code"]);
        titles.push(a["title"].as_str().unwrap_or("").to_string());
        // Each fix on the broken text; apply them one at a time.
        fixed = apply(&fixed, &a["edit"]["changes"][URI]);
        s.change(&fixed);
    }
    titles.sort();
    assert_eq!(
        titles,
        vec![
            "Change `Catalog` to `Catalogue`",
            "Change `temprature` to `temperature`",
            "Change `thnk` to `think`",
            "Change `titl` to `title`",
        ]
    );
    assert_eq!(fixed, PROGRAM);
    assert_eq!(s.change(&fixed), Vec::<Value>::new());
    // No diagnostic in the range: no action.
    let r = s.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": URI}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}, "context": {"diagnostics": []}}),
    );
    assert_eq!(r["result"], json!([]));
    s.finish();
}

fn labels(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["label"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn completion_of_named_arguments_inside_calls() {
    let mut s = Session::start();
    let typing = PROGRAM.replace(
        "ask(\"Where is {title}?\", hits, temperature: 0.2)",
        "ask(\"Where?\", hits, te)",
    );
    s.open(&typing);
    let items = s.at(
        "textDocument/completion",
        pos(&typing, "te)", 0, 2).0,
        pos(&typing, "te)", 0, 2).1,
    );
    let l = labels(&items);
    // The op's named arguments come first, as `name: ` insertions.
    assert!(l.contains(&"temperature:".to_string()), "{l:?}");
    assert!(
        l.contains(&"model:".to_string()) && l.contains(&"system:".to_string()),
        "{l:?}"
    );
    let t = items
        .as_array()
        .and_then(|a| a.iter().find(|i| i["label"] == "temperature:"))
        .expect("temperature");
    assert_eq!(t["insertText"], "temperature: ");
    assert!(t["sortText"].as_str().is_some_and(|s| s.starts_with('0')));
    // The rest is still offered.
    assert!(
        l.contains(&"hits".to_string()) && l.contains(&"ask".to_string()),
        "{l:?}"
    );
    // A flow's parameters; a name already written is not offered again.
    let typing = PROGRAM.replace("Catalogue.find(title: \"Dune\")", "Catalogue.find(t)");
    s.change(&typing);
    let at = pos(&typing, "find(t)", 0, 6);
    let l = labels(&s.at("textDocument/completion", at.0, at.1));
    assert!(l.contains(&"title:".to_string()), "{l:?}");
    let typing = PROGRAM.replace("temperature: 0.2)", "temperature: 0.2, m)");
    s.change(&typing);
    let at = pos(&typing, ", m)", 0, 3);
    let l = labels(&s.at("textDocument/completion", at.0, at.1));
    assert!(
        !l.contains(&"temperature:".to_string()) && l.contains(&"model:".to_string()),
        "{l:?}"
    );
    s.change(PROGRAM);
    // In an argument's value: no argument names.
    let at = pos(PROGRAM, "\"Dune\"", 0, 0);
    let l = labels(&s.at("textDocument/completion", at.0, at.1));
    assert!(!l.iter().any(|x| x.ends_with(':')), "{l:?}");
    s.finish();
}
