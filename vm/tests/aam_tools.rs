//! AAM tools: capability validation before the call, access control,
//! destructive confirmation, subprocess tools (timeouts, exit status, bad
//! JSON), per-tool concurrency, goals, messaging and `on` handlers.
#![allow(clippy::unwrap_used)]

mod aam_support;
mod ir_support;
use aam_support::{host, inv, toml_str};
use ir_support::program;

use ais_testkit::fake::FakeBackend;
use ais_vm::aam::config::AamConfig;
use ais_vm::aam::{AamHost, AamOptions, Confirm, Storage};
use ais_vm::llm::CancelToken;
use ais_vm::{Host, RunOptions};
use serde_json::{json, Value as Json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const CAPS: &str = r#"
agent @A {
  capability @calculator(expression: str) -> number
  capability @probe(n: number) -> str
  flow @main() -> void entry {
    return
  }
}
"#;

/// Keywords beyond the old hand-written subset are enforced, and a schema
/// that cannot be used stops the call before the tool runs.
#[test]
fn tool_schemas_are_checked_with_every_keyword() {
    let d = tempfile::tempdir().unwrap();
    let marker = d.path().join("called");
    let cfg = format!(
        r##"
[[tools.subprocess]]
name = "probe"
command = ["sh", "-c", "touch '{m}'; echo '\"ok\"'"]
input_schema = {{ type = "object", properties = {{ n = {{ type = "number", minimum = 1 }}, id = {{ type = "string", pattern = "^[a-z]+$" }} }} }}
[[tools.subprocess]]
name = "broken"
command = ["sh", "-c", "touch '{m}'; echo '\"ok\"'"]
input_schema = {{ type = "object", properties = {{ n = {{ "$ref" = "#/$defs/missing" }} }} }}
[access]
allow = {{ A = ["probe", "broken"] }}
"##,
        m = toml_str(&marker)
    );
    let h = host(&cfg, Confirm::Deny);
    h.load_program(&program(CAPS));
    let e = inv(&h, "A", "probe", json!({"n": 0})).unwrap_err();
    assert_eq!(e.code, "tool.invalid_args");
    assert_eq!(e.payload["path"], "$.n");
    let e = inv(&h, "A", "probe", json!({"id": "UPPER"})).unwrap_err();
    assert_eq!(e.code, "tool.invalid_args");
    assert_eq!(e.payload["path"], "$.id");
    let e = inv(&h, "A", "broken", json!({"n": 1})).unwrap_err();
    assert_eq!(e.code, "tool.invalid_schema");
    assert!(e.message.contains("tool `broken`"), "{}", e.message);
    assert!(!marker.exists(), "no tool ran");
    assert_eq!(
        inv(&h, "A", "probe", json!({"n": 2, "id": "abc"})).unwrap(),
        json!("ok")
    );
    assert!(marker.exists());
}

#[test]
fn arguments_are_validated_before_the_call() {
    let d = tempfile::tempdir().unwrap();
    let marker = d.path().join("called");
    // The tool leaves a marker when it runs.
    let cfg = format!(
        r#"
[[tools.subprocess]]
name = "probe"
command = ["sh", "-c", "touch '{}'; echo '\"ok\"'"]
input_schema = {{ type = "object", required = ["n"], properties = {{ n = {{ type = "number" }} }} }}
[access]
allow = {{ A = ["probe"] }}
"#,
        toml_str(&marker)
    );
    let h = host(&cfg, Confirm::Deny);
    h.load_program(&program(CAPS));
    // The tool's own schema.
    let e = inv(&h, "A", "probe", json!({})).unwrap_err();
    assert_eq!(e.code, "tool.invalid_args");
    assert!(e.message.contains("tool's schema"), "{}", e.message);
    assert!(!marker.exists());
    // Text arguments are JSON-parsed first.
    let e = inv(&h, "A", "calculator", json!("{\"expression\": 7}")).unwrap_err();
    assert_eq!(e.code, "tool.invalid_args");
    assert_eq!(e.payload["path"], "$.expression");
    // The capability the agent declared, for a tool without a schema.
    let calls = Arc::new(AtomicUsize::new(0));
    let c2 = calls.clone();
    h.register_tool("free", move |a| {
        c2.fetch_add(1, Ordering::SeqCst);
        Ok(a.clone())
    });
    h.load_program(&program(
        "agent @C {\n  capability @free(n: number) -> json\n  flow @main() -> void entry {\n    return\n  }\n}\n",
    ));
    let e = inv(&h, "C", "free", json!({"n": "seven"})).unwrap_err();
    assert_eq!(e.code, "tool.invalid_args");
    assert!(
        e.message.contains("capability declared by agent `C`"),
        "{}",
        e.message
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(
        inv(&h, "C", "free", json!({"n": 7})).unwrap(),
        json!({"n": 7})
    );
    assert_eq!(
        inv(&h, "A", "calculator", json!("{\"expression\": \"6*7\"}")).unwrap(),
        json!(42)
    );
    // Results are checked after the call: `probe` returns a str, as declared.
    assert_eq!(inv(&h, "A", "probe", json!({"n": 1})).unwrap(), json!("ok"));
    assert!(marker.exists());
    // A capability whose result type does not match.
    h.register_tool("liar", |_| Ok(json!("not a number")));
    let p = program(
        "agent @B {\n  capability @liar(x: str) -> number\n  flow @main() -> void entry {\n    return\n  }\n}\n",
    );
    h.load_program(&p);
    let e = inv(&h, "B", "liar", json!({"x": "y"})).unwrap_err();
    assert_eq!(e.code, "tool.invalid_result");
    // Unknown tools.
    let e = inv(&h, "A", "nope", json!({})).unwrap_err();
    assert_eq!(e.code, "tool.unknown");
    // Every call, failed or not, is in the episodic log.
    let invs = h
        .episodic_records()
        .iter()
        .filter(|r| r["op"] == "inv")
        .count();
    assert_eq!(invs, 8);
}

#[test]
fn access_is_denied_unless_allowed() {
    let d = tempfile::tempdir().unwrap();
    let cfg = format!(
        r#"
[tools]
workspace = "{}"
[access]
allow = {{ Writer = ["write_*"], "*" = ["now"] }}
deny = {{ Reader = ["calculator"] }}
"#,
        toml_str(d.path())
    );
    let h = host(&cfg, Confirm::Deny);
    let args = json!({"path": "out.txt", "content": "hi"});
    // Write tools need an explicit allow.
    let e = inv(&h, "Reader", "write_file", args.clone()).unwrap_err();
    assert_eq!(e.code, "tool.denied");
    assert!(e.message.contains("[access.allow]"), "{}", e.message);
    assert!(!d.path().join("out.txt").exists());
    assert_eq!(
        inv(&h, "Writer", "write_file", args).unwrap(),
        json!({"path": "out.txt", "bytes": 2})
    );
    // Read-only built-ins are allowed by default, unless denied.
    assert_eq!(
        inv(&h, "Writer", "read_file", json!({"path": "out.txt"})).unwrap(),
        json!("hi")
    );
    assert_eq!(
        inv(&h, "Reader", "calculator", json!({"expression": "1"}))
            .unwrap_err()
            .code,
        "tool.denied"
    );
    // Network tools too.
    assert_eq!(
        inv(
            &h,
            "Reader",
            "http_get",
            json!({"url": "http://127.0.0.1:9/"})
        )
        .unwrap_err()
        .code,
        "tool.denied"
    );
    // The workspace confines file tools even when allowed.
    assert_eq!(
        inv(
            &h,
            "Writer",
            "write_file",
            json!({"path": "../x", "content": ""})
        )
        .unwrap_err()
        .code,
        "fs.outside_workspace"
    );
    // readonly_default = false: nothing is allowed implicitly.
    let h = host("[access]\nreadonly_default = false", Confirm::Deny);
    assert_eq!(
        inv(&h, "A", "calculator", json!({"expression": "1"}))
            .unwrap_err()
            .code,
        "tool.denied"
    );
    // Goals are the agent's own state: always allowed.
    assert_eq!(inv(&h, "A", "goals_list", json!({})).unwrap(), json!([]));
}

#[test]
fn destructive_tools_need_confirmation() {
    let d = tempfile::tempdir().unwrap();
    let cfg = format!(
        "[tools]\nworkspace = \"{}\"\ndestructive = [\"write_file\"]\n[access]\nallow = {{ A = [\"write_file\"] }}\n",
        toml_str(d.path())
    );
    let args = json!({"path": "f", "content": "x"});
    let e = inv(&host(&cfg, Confirm::Deny), "A", "write_file", args.clone()).unwrap_err();
    assert_eq!(e.code, "tool.confirmation_required");
    assert!(e.message.contains("--yes"), "{}", e.message);
    assert!(!d.path().join("f").exists());
    inv(&host(&cfg, Confirm::Yes), "A", "write_file", args).unwrap();
    assert!(d.path().join("f").exists());
}

/// Answers with a fixed verdict and counts the questions.
struct Scripted {
    answer: bool,
    asked: AtomicUsize,
}

impl ais_vm::aam::Confirmer for Scripted {
    fn confirm(&self, agent: &str, tool: &str, args: &Json) -> bool {
        assert_eq!((agent, tool), ("A", "write_file"));
        assert_eq!(args["path"], "f");
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.answer
    }
}

#[test]
fn the_edge_is_asked_once_per_agent_and_tool_and_its_answer_holds() {
    for answer in [true, false] {
        let d = tempfile::tempdir().unwrap();
        let cfg = format!(
            "[tools]\nworkspace = \"{}\"\ndestructive = [\"write_file\"]\n[access]\nallow = {{ A = [\"write_file\"] }}\n",
            toml_str(d.path())
        );
        let asker = Arc::new(Scripted {
            answer,
            asked: AtomicUsize::new(0),
        });
        let h = host(&cfg, Confirm::Ask(asker.clone()));
        for _ in 0..2 {
            let r = inv(&h, "A", "write_file", json!({"path": "f", "content": "x"}));
            match answer {
                true => assert!(r.is_ok(), "{r:?}"),
                false => assert_eq!(r.unwrap_err().code, "tool.confirmation_required"),
            }
        }
        assert_eq!(asker.asked.load(Ordering::SeqCst), 1);
        assert_eq!(d.path().join("f").exists(), answer);
    }
}

fn sub(name: &str, script: &str, timeout: f64) -> String {
    format!(
        "[[tools.subprocess]]\nname = \"{name}\"\ncommand = [\"sh\", \"-c\", '''{script}''']\ntimeout_s = {timeout}\n"
    )
}

#[test]
fn subprocess_tools_structured_errors() {
    let mut cfg = String::new();
    cfg += &sub("upper", "tr a-z A-Z", 10.0);
    cfg += &sub("hang", "exec sleep 30", 0.3);
    cfg += &sub("crash", "echo boom >&2; exit 3", 10.0);
    cfg += &sub("garbage", "echo 'this is not json'", 10.0);
    cfg += &sub("silent", "true", 10.0);
    cfg += &sub("missing", "exec /nonexistent/tool", 10.0);
    cfg += "[access]\nallow = { A = [\"*\"] }\n";
    let h = host(&cfg, Confirm::Deny);
    // JSON on stdin, JSON on stdout.
    assert_eq!(
        inv(&h, "A", "upper", json!({"a": "b"})).unwrap(),
        json!({"A": "B"})
    );
    let e = inv(&h, "A", "hang", json!({})).unwrap_err();
    assert_eq!(e.code, "tool.timeout");
    assert_eq!(e.payload["tool"], "hang");
    let e = inv(&h, "A", "crash", json!({})).unwrap_err();
    assert_eq!(e.code, "tool.exit");
    assert_eq!(e.payload["status"], 3);
    assert!(e.message.contains("boom"), "{}", e.message);
    let e = inv(&h, "A", "garbage", json!({})).unwrap_err();
    assert_eq!(e.code, "tool.bad_output");
    assert!(e.payload["stdout"].as_str().unwrap().contains("not json"));
    assert_eq!(
        inv(&h, "A", "silent", json!({})).unwrap_err().code,
        "tool.bad_output"
    );
    assert_eq!(
        inv(&h, "A", "missing", json!({})).unwrap_err().code,
        "tool.exit"
    );
    // Cancellation stops a running tool.
    let c = CancelToken::new();
    c.cancel();
    assert_eq!(
        h.invoke_tool("A", "hang", &json!({}), &c).unwrap_err().code,
        "cancelled"
    );
}

#[test]
fn per_tool_concurrency_limits_hold() {
    let h = Arc::new(host("[tools]\nconcurrency = { slow = 2 }\n", Confirm::Deny));
    let now = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (n2, p2) = (now.clone(), peak.clone());
    h.register_tool("slow", move |_| {
        let c = n2.fetch_add(1, Ordering::SeqCst) + 1;
        p2.fetch_max(c, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(20));
        n2.fetch_sub(1, Ordering::SeqCst);
        Ok(Json::Null)
    });
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let h = h.clone();
            std::thread::spawn(move || inv(&h, "A", "slow", json!({})).unwrap())
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(
        peak.load(Ordering::SeqCst) <= 2,
        "{}",
        peak.load(Ordering::SeqCst)
    );
}

const GOALS: &str = r#"
agent @A {
  goal @speed priority 2 "be quick"
  goal @accuracy priority 1 "be right"
  flow @main() -> void entry {
    return
  }
}
"#;

#[test]
fn goals_are_a_priority_queue() {
    let h = host("", Confirm::Deny);
    h.load_program(&program(GOALS));
    assert_eq!(
        inv(&h, "A", "goals_next", json!({})).unwrap()["name"],
        "accuracy"
    );
    inv(
        &h,
        "A",
        "goals_add",
        json!({"name": "urgent", "priority": 0, "description": "now"}),
    )
    .unwrap();
    assert_eq!(
        inv(&h, "A", "goals_next", json!({})).unwrap()["name"],
        "urgent"
    );
    inv(&h, "A", "goals_complete", json!({"name": "urgent"})).unwrap();
    let names: Vec<Json> = inv(&h, "A", "goals_list", json!({}))
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].clone())
        .collect();
    assert_eq!(names, [json!("accuracy"), json!("speed")]);
    assert_eq!(
        inv(&h, "A", "goals_list", json!({"all": true}))
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        inv(&h, "A", "goals_complete", json!({"name": "urgent"}))
            .unwrap_err()
            .code,
        "goal.unknown"
    );
    assert_eq!(
        inv(&h, "A", "goals_add", json!({"priority": 1}))
            .unwrap_err()
            .code,
        "tool.invalid_args"
    );
}

const MESSAGES: &str = r#"
agent @Sender {
  flow @main(%x: str) -> str entry {
    %0 = const {value = "Receiver"} : str
    %1 = template %x {template = "{{\"event\": \"job.done\", \"id\": \"{0}\"}}"} : str
    %2 = const {value = "direct"} : str
    %3 = communicate %0, %1, %2 : ord
    %4 = const {value = "plain hello"} : str
    %5 = communicate %0, %4, %2, %3 : ord
    %6 = const {value = "outside"} : str
    %7 = communicate %6, %4, %2, %5 : ord
    return %x
  }
}

agent @Receiver {
  on "job.done" @on_job_done
  on "message.received" @on_message_received
  flow @on_job_done(%id: str) -> void {
    %0 = template %id {template = "job {0}"} : str
    %1 = const {value = "job"} : str
    %2 = umem %0, %1 {tier = "stm"} : ord
    return
  }
  flow @on_message_received(%sender: str, %content: str) -> void {
    %0 = template %sender, %content {template = "{0}: {1}"} : str
    %1 = const {value = "msg"} : str
    %2 = umem %0, %1 {tier = "stm"} : ord
    return
  }
}
"#;

#[test]
fn communicate_delivers_and_runs_the_matching_handler() {
    let p = program(MESSAGES);
    for workers in [1, 3] {
        let h = Arc::new(host("", Confirm::Deny));
        h.load_program(&p);
        let o = RunOptions {
            workers: Some(workers),
            args: vec![("x".into(), json!("42"))],
            ..RunOptions::default()
        };
        let r = ais_vm::run(&p, &o, Arc::new(FakeBackend::new()), h.clone());
        assert_eq!(r.outcome.unwrap(), json!("42"));
        // Both handlers ran before the run ended. (They keep the message
        // in STM: a message is untrusted data, which the default policy
        // keeps out of long-term memory, a sink; see docs/security.md.)
        assert_eq!(
            h.mem_query("Receiver", ais_ir::Tier::Stm, &json!("job"))
                .unwrap(),
            json!("job 42")
        );
        assert_eq!(
            h.mem_query("Receiver", ais_ir::Tier::Stm, &json!("msg"))
                .unwrap(),
            json!("Sender: plain hello")
        );
        // Mailbox and both agents' logs.
        assert_eq!(h.received("Receiver").len(), 2);
        assert_eq!(h.received("outside").len(), 1);
        let recs = h.episodic_records();
        let count = |agent: &str, op: &str| {
            recs.iter()
                .filter(|r| r["agent"] == agent && r["op"] == op)
                .count()
        };
        assert_eq!(count("Sender", "send"), 3);
        assert_eq!(count("Receiver", "receive"), 2);
        // The inbox tool.
        assert_eq!(
            inv(&h, "Receiver", "inbox", json!({}))
                .unwrap()
                .as_array()
                .unwrap()
                .len(),
            2
        );
        // The agent's own trace is readable from the episodic tier.
        let trace = h
            .mem_query("Receiver", ais_ir::Tier::Episodic, &json!("@trace"))
            .unwrap();
        assert!(trace
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["op"] == "receive"));
    }
}

#[test]
fn a_failing_handler_fails_the_run() {
    let src = MESSAGES.replace(
        "%2 = umem %0, %1 {tier = \"stm\"} : ord\n    return\n  }\n  flow @on_message_received",
        "%2 = inv %0 {tool = \"nope\"} : json\n    return\n  }\n  flow @on_message_received",
    );
    let p = program(&src);
    let h = Arc::new(host("", Confirm::Deny));
    h.load_program(&p);
    let o = RunOptions {
        args: vec![("x".into(), json!("1"))],
        ..RunOptions::default()
    };
    let r = ais_vm::run(&p, &o, Arc::new(FakeBackend::new()), h);
    let e = r.outcome.unwrap_err().to_string();
    assert!(e.contains("tool.unknown") || e.contains("nope"), "{e}");
}

#[test]
fn every_tool_the_front_end_treats_as_built_in_is_registered() {
    let host = ais_vm::aam::AamHost::ephemeral();
    let names: Vec<String> = host
        .tool_list()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect();
    let stdlib = ais_stdlib::builtins();
    let expected = ais_vm::aam::AAM_TOOL_NAMES
        .iter()
        .copied()
        .chain(stdlib.iter().map(|b| b.name));
    for name in expected {
        assert!(
            names.iter().any(|n| n == name),
            "`{name}` missing from {names:?}"
        );
    }
}

/// The compiler orders tool calls from the effect facts in `ais-stdlib`;
/// they must cover exactly the tools the AAM provides.
#[test]
fn the_stdlib_knows_the_effect_of_every_aam_tool() {
    let mut facts: Vec<&str> = ais_stdlib::HOST_TOOLS.iter().map(|h| h.name).collect();
    let mut aam = ais_vm::aam::AAM_TOOL_NAMES.to_vec();
    facts.sort_unstable();
    aam.sort_unstable();
    assert_eq!(facts, aam);
}

/// `store_fact` keeps a fact with its tags and source in LTM (one entry per
/// fact, however often it is stored) and `memory_search` finds it by words
/// and by tags.
#[test]
fn facts_are_stored_with_tags_and_found_by_them() {
    let h = host("", Confirm::Deny);
    let a = inv(
        &h,
        "A",
        "store_fact",
        json!({"text": "Oslo is the capital of Norway", "tags": ["geo"], "source": "atlas"}),
    )
    .unwrap();
    let again = inv(
        &h,
        "A",
        "store_fact",
        json!({"text": "Oslo is the capital of Norway", "tags": ["geo"], "source": "atlas"}),
    )
    .unwrap();
    assert_eq!(a, again);
    inv(
        &h,
        "A",
        "store_fact",
        json!({"text": "The capital of rain is Bergen", "tags": ["weather"]}),
    )
    .unwrap();
    let by_word = inv(&h, "A", "memory_search", json!({"query": "capital"})).unwrap();
    assert_eq!(by_word.as_array().unwrap().len(), 2, "{by_word}");
    let by_tag = inv(
        &h,
        "A",
        "memory_search",
        json!({"query": "capital", "tags": ["geo"]}),
    )
    .unwrap();
    assert_eq!(by_tag.as_array().unwrap().len(), 1, "{by_tag}");
    assert_eq!(by_tag[0]["value"]["source"], "atlas");
    let tag_only = inv(
        &h,
        "A",
        "memory_search",
        json!({"query": "", "tags": ["weather"]}),
    )
    .unwrap();
    assert_eq!(
        tag_only[0]["value"]["text"],
        "The capital of rain is Bergen"
    );
    // Another agent's facts are its own.
    let other = inv(&h, "B", "memory_search", json!({"query": "capital"})).unwrap();
    assert_eq!(other, json!([]));
    // A fact needs text.
    let e = inv(&h, "A", "store_fact", json!({"tags": ["x"]})).unwrap_err();
    assert_eq!(e.code, "tool.invalid_args", "{e:?}");
}

/// `update_goal` adds, re-prioritises, completes and drops goals.
#[test]
fn update_goal_changes_the_goal_queue() {
    let h = host("", Confirm::Deny);
    inv(&h, "A", "goals_add", json!({"name": "ship", "priority": 2})).unwrap();
    let g = inv(&h, "A", "update_goal", json!({"name": "triage"})).unwrap();
    assert_eq!(
        (g["priority"].as_i64(), g["status"].as_str()),
        (Some(3), Some("active"))
    );
    inv(
        &h,
        "A",
        "update_goal",
        json!({"name": "triage", "priority": 1}),
    )
    .unwrap();
    assert_eq!(
        inv(&h, "A", "goals_next", json!({})).unwrap()["name"],
        "triage"
    );
    inv(
        &h,
        "A",
        "update_goal",
        json!({"name": "triage", "status": "done"}),
    )
    .unwrap();
    assert_eq!(
        inv(&h, "A", "goals_next", json!({})).unwrap()["name"],
        "ship"
    );
    let dropped = inv(
        &h,
        "A",
        "update_goal",
        json!({"name": "ship", "status": "dropped"}),
    )
    .unwrap();
    assert_eq!(dropped["status"], "dropped");
    assert_eq!(inv(&h, "A", "goals_next", json!({})).unwrap(), Json::Null);
    let e = inv(
        &h,
        "A",
        "update_goal",
        json!({"name": "ship", "status": "dropped"}),
    )
    .unwrap_err();
    assert_eq!(e.code, "goal.unknown");
    let e = inv(
        &h,
        "A",
        "update_goal",
        json!({"name": "x", "status": "paused"}),
    )
    .unwrap_err();
    assert_eq!(e.code, "tool.invalid_args", "{e:?}");
}

/// Jobs put on a named queue are claimed once each, oldest first, also by
/// a second host on the same memory directory (another run).
#[test]
fn queued_jobs_are_claimed_once_across_hosts() {
    let d = tempfile::tempdir().unwrap();
    let open = || {
        AamHost::open(AamOptions {
            storage: Storage::Dir(d.path().to_path_buf()),
            config: AamConfig::default(),
            confirm: Confirm::Deny,
            console: None,
        })
        .unwrap()
    };
    let producer = open();
    for n in 0..4 {
        inv(
            &producer,
            "P",
            "enqueue",
            json!({"queue": "work", "job": {"n": n}}),
        )
        .unwrap();
    }
    let consumer = open();
    let mut seen = Vec::new();
    for h in [&producer, &consumer, &consumer, &producer, &consumer] {
        let j = inv(h, "W", "claim", json!({"queue": "work"})).unwrap();
        seen.push(j.get("job").and_then(|j| j.get("n")).and_then(Json::as_i64));
    }
    assert_eq!(seen, vec![Some(0), Some(1), Some(2), Some(3), None]);
}
