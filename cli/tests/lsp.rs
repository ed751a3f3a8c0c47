//! End-to-end tests of `aisc lsp`: scripted JSON-RPC sessions with the
//! binary over stdio.

mod lsp_support;

use lsp_support::{range, Session, URI};
use serde_json::{json, Value};

const PROGRAM: &str = r#"agent Researcher {
    flow research(topic: str) -> str {
        return ask("List questions about {topic}.")
    }
}

agent Coordinator {
    @read_only capability lookup(q: str) -> json;
    @entry flow main(topic: str) -> str {
        let questions = Researcher.research(topic)
        let facts = inv("lookup", "{}")
        return think("Write a brief on {topic}.", questions, facts)
    }
}
"#;

#[test]
fn diagnostics_on_open_and_change_with_codes_and_related_locations() {
    let mut s = Session::start();
    assert_eq!(s.open(PROGRAM), Vec::<Value>::new());
    // An undefined variable and a duplicate flow (related: the first one).
    let broken = PROGRAM
        .replace("questions, facts)", "questions, factz)")
        .replace(
            "    @entry flow main",
            "    flow helper() { }\n    flow helper() { }\n    @entry flow main",
        );
    let diags = s.change(&broken);
    let codes: Vec<&str> = diags.iter().filter_map(|d| d["code"].as_str()).collect();
    assert!(codes.contains(&"E0100"), "{diags:?}");
    assert!(codes.contains(&"E0111"), "{diags:?}");
    let undefined = diags.iter().find(|d| d["code"] == "E0100").expect("E0100");
    assert_eq!(undefined["severity"], 1);
    assert!(undefined["message"]
        .as_str()
        .is_some_and(|m| m.contains("`factz`") && m.contains("did you mean `facts`")));
    let dup = diags.iter().find(|d| d["code"] == "E0111").expect("E0111");
    assert_eq!(dup["range"], range(9, 9, 15));
    assert_eq!(
        dup["relatedInformation"][0]["location"]["range"],
        range(8, 9, 15)
    );
    // A syntax error is reported, and the server keeps answering.
    let diags = s.change("agent A { flow f( { }");
    assert!(diags
        .iter()
        .any(|d| d["code"] == "E0004" || d["code"] == "E0005"));
    assert_eq!(s.at("textDocument/hover", 0, 3), Value::Null);
    s.finish();
}

#[test]
fn hover_shows_types_signatures_and_op_documentation() {
    let mut s = Session::start();
    s.open(PROGRAM);
    let hover = |v: &Value| v["contents"]["value"].as_str().unwrap_or("").to_string();
    // A variable's use: its type.
    let h = s.at("textDocument/hover", 11, 52);
    assert_eq!(hover(&h), "```ais\nquestions: str\n```");
    assert_eq!(h["range"], range(11, 50, 59));
    // A flow called across agents: its signature.
    let h = s.at("textDocument/hover", 9, 38);
    assert_eq!(
        hover(&h),
        "```ais\nflow Researcher.research(topic: str) -> str\n```"
    );
    // A capability, also where `inv` names it in a string.
    let h = s.at("textDocument/hover", 10, 29);
    assert!(
        hover(&h).contains("@read_only capability lookup(q: str) -> json"),
        "{h}"
    );
    // An op: signature, summary, named arguments, the op table's classes.
    let h = s.at("textDocument/hover", 11, 16);
    let text = hover(&h);
    assert!(
        text.starts_with("```ais\nthink(prompt, value...) -> str\n```"),
        "{text}"
    );
    assert!(
        text.contains("named arguments: prompt, context, tools"),
        "{text}"
    );
    assert!(text.contains("latency Think"), "{text}");
    s.finish();
}

#[test]
fn definitions_and_references_of_variables_flows_agents_and_capabilities() {
    let mut s = Session::start();
    s.open(PROGRAM);
    let def = s.at("textDocument/definition", 11, 52);
    assert_eq!(def["range"], range(9, 12, 21));
    assert_eq!(def["uri"], URI);
    let def = s.at("textDocument/definition", 9, 38);
    assert_eq!(def["range"], range(1, 9, 17));
    let def = s.at("textDocument/definition", 9, 25);
    assert_eq!(def["range"], range(0, 6, 16));
    let ranges = |v: &Value| -> Vec<Value> {
        v.as_array()
            .map(|a| a.iter().map(|l| l["range"].clone()).collect())
            .unwrap_or_default()
    };
    // `topic` in `main`: the parameter, the call argument, the template hole.
    let refs = s.at("textDocument/references", 8, 22);
    assert_eq!(
        ranges(&refs),
        vec![range(8, 21, 26), range(9, 44, 49), range(11, 40, 45)]
    );
    // The capability: its declaration and the `inv` string.
    let refs = s.at("textDocument/references", 7, 30);
    assert_eq!(ranges(&refs), vec![range(7, 26, 32), range(10, 24, 32)]);
    // The flow: its declaration and the cross-agent call.
    let refs = s.at("textDocument/references", 1, 10);
    assert_eq!(ranges(&refs), vec![range(1, 9, 17), range(9, 35, 43)]);
    s.finish();
}

#[test]
fn completion_offers_variables_in_scope_flows_capabilities_agents_and_ops() {
    let mut s = Session::start();
    s.open(PROGRAM);
    let labels = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|i| i["label"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let items = s.at("textDocument/completion", 11, 15);
    let l = labels(&items);
    for want in [
        "questions",
        "facts",
        "topic",
        "main",
        "lookup",
        "Researcher",
        "ask",
        "qmem",
        "tool",
    ] {
        assert!(l.contains(&want.to_string()), "no `{want}` in {l:?}");
    }
    // Before its definition a variable is not offered.
    let l = labels(&s.at("textDocument/completion", 9, 8));
    assert!(!l.contains(&"facts".to_string()), "{l:?}");
    // After `Agent.`: that agent's flows only.
    let l = labels(&s.at("textDocument/completion", 9, 35));
    assert_eq!(l, vec!["research".to_string()]);
    s.finish();
}

#[test]
fn document_symbols_and_formatting() {
    let mut s = Session::start();
    s.open("agent A {\n  memory { notes: LTM }\n  flow f(x:str)->str{ return x }\n  on tick => print(\"t\")\n}\n");
    let syms = s.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": URI}}),
    )["result"]
        .clone();
    assert_eq!(syms[0]["name"], "A");
    let children: Vec<&str> = syms[0]["children"]
        .as_array()
        .map(|c| c.iter().filter_map(|x| x["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(children, vec!["notes", "f", "on tick"]);
    let edits = s.request(
        "textDocument/formatting",
        json!({"textDocument": {"uri": URI}, "options": {"tabSize": 4, "insertSpaces": true}}),
    )["result"]
        .clone();
    assert_eq!(
        edits[0]["newText"],
        "agent A {\n    memory { notes: LTM }\n    flow f(x: str) -> str {\n        return x\n    }\n    on tick => print(\"t\")\n}\n"
    );
    assert_eq!(
        edits[0]["range"]["start"],
        json!({"line": 0, "character": 0})
    );
    // A document that does not parse is not formatted (and nothing breaks).
    s.change("agent A { flow f( }");
    let r = s.request(
        "textDocument/formatting",
        json!({"textDocument": {"uri": URI}, "options": {"tabSize": 4, "insertSpaces": true}}),
    );
    assert_eq!(r["result"], Value::Null);
    assert!(r.get("error").is_none(), "{r}");
    s.finish();
}
