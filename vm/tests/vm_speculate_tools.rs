//! Speculation of read-only tool calls in `switch` arms (issue 36): a
//! classifier's reply decides the arm; with a budget, the arms' `inv`
//! calls of tools the catalogue declares read-only start with the
//! classifier, the taken arm adopts its call's result (the tool is called
//! once), the others are discarded and never journaled. Side-effecting
//! tools (`write_file`, `bash`, an MCP tool not declared read-only) never
//! start before the decision.
#![allow(clippy::unwrap_used)]

mod ir_support;
use ir_support::program;

use ais_ir::bytecode::{self, Program};
use ais_ir::catalogue::{Declarations, Effect, ToolDecl, WorkspaceUse};
use ais_testkit::fake::{text_reply, FakeBackend};
use ais_testkit::MemoryHost;
use ais_vm::host::HostError;
use ais_vm::journal::{self, Budget, Journal};
use ais_vm::llm::LlmRequest;
use ais_vm::{RunOptions, RunReport, Speculate};
use serde_json::{json, Value as Json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Two arms look a record up (`lookup`, read-only), the third writes a
/// file, runs a command and calls an MCP tool, all with inputs known
/// before the classifier answers.
const ROUTER: &str = r#"
agent @Router {
  flow @main(%ticket: str) -> json entry {
    %0 = template %ticket {template = "Classify this ticket: {0}"} : str
    %1 = ask %0 : str
    %2 = switch %1 : json {
      case "billing" {
        %3 = template %ticket {template = "billing/{0}"} : str
        %4 = inv %3 {tool = "lookup"} : json
        yield %4
      }
      case "technical" {
        %5 = template %ticket {template = "technical/{0}"} : str
        %6 = inv %5 {tool = "lookup"} : json
        yield %6
      }
      default {
        %7 = template %ticket {template = "escalate/{0}"} : str
        %8 = inv %7 {tool = "write_file"} : json
        %9 = inv %7 {tool = "bash"} : json
        %10 = inv %7 {tool = "srv.get"} : json
        yield %10
      }
    }
    return %2
  }
}
"#;

const TOOLS: [&str; 4] = ["lookup", "write_file", "bash", "srv.get"];

fn args() -> Vec<(String, Json)> {
    vec![("ticket".into(), json!("my printer is on fire"))]
}

/// The classifier answers `label` after `latency`.
fn backend(label: &'static str, latency: Duration) -> Arc<FakeBackend> {
    Arc::new(
        FakeBackend::new()
            .with_concurrency(16)
            .with_latency(latency)
            .with_script(move |r: &LlmRequest, _| {
                r.prompt
                    .starts_with("Classify")
                    .then(|| Ok(text_reply(label)))
            }),
    )
}

/// Every call each tool received (its argument), in order.
type Calls = Arc<Mutex<Vec<(String, Json)>>>;

fn calls_of(calls: &Calls, tool: &str) -> Vec<Json> {
    calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(t, _)| t == tool)
        .map(|(_, a)| a.clone())
        .collect()
}

/// A host whose tools record their calls; `lookup` takes `delay`, and
/// fails for billing records when `billing_down`.
fn host(delay: Duration, billing_down: bool) -> (Arc<MemoryHost>, Calls) {
    let host = Arc::new(MemoryHost::new());
    let calls: Calls = Arc::default();
    for tool in TOOLS {
        let c = calls.clone();
        host.register_tool(tool, move |a| {
            c.lock().unwrap().push((tool.to_string(), a.clone()));
            if tool != "lookup" {
                return Ok(json!({ "done": tool }));
            }
            std::thread::sleep(delay);
            if billing_down && a.as_str().is_some_and(|s| s.starts_with("billing")) {
                return Err(HostError::new("lookup.down", "the directory is down"));
            }
            Ok(json!({ "record": a }))
        });
    }
    (host, calls)
}

/// The catalogue: `lookup` declared read-only (when `read_only`), the
/// `srv.` namespace an MCP server's (side-effecting: not declared
/// otherwise); `write_file` and `bash` as built in.
fn catalogue(read_only: bool) -> Arc<Declarations> {
    let mut d = Declarations::default();
    let decl = |name: &str, provider: &str, effect| ToolDecl {
        name: name.into(),
        provider: provider.into(),
        aliases: Vec::new(),
        effect,
        trusted: true,
        leaves: Vec::new(),
        workspace: WorkspaceUse::None,
        local: true,
    };
    if read_only {
        d.declare(decl("lookup", "subprocess", Effect::ReadOnly));
    }
    d.declare(decl("srv.*", "mcp:srv", Effect::SideEffecting));
    Arc::new(d)
}

fn options(speculate: Option<Speculate>, read_only: bool) -> RunOptions {
    let mut o = RunOptions {
        args: args(),
        workers: Some(2),
        speculate,
        budget: Budget {
            prices: vec![("*".into(), 1.0, 2.0)],
            ..Budget::default()
        },
        ..RunOptions::default()
    };
    o.flow_policy.catalogue = catalogue(read_only);
    o
}

fn budget(calls: u32) -> Option<Speculate> {
    Some(Speculate {
        max_extra_calls: calls,
        max_extra_cost_usd: 1.0,
    })
}

fn run(p: &Program, o: &RunOptions, label: &'static str, delay: Duration) -> (RunReport, Calls) {
    let (h, calls) = host(delay, false);
    let b = backend(label, Duration::from_millis(150));
    (ais_vm::run(p, o, b, h), calls)
}

fn record(label: &str) -> Json {
    json!({ "record": format!("{label}/my printer is on fire") })
}

#[test]
fn a_read_only_tool_is_adopted_in_the_taken_arm_and_discarded_in_the_others() {
    let p = program(ROUTER);
    let delay = Duration::from_millis(150);
    for label in ["billing", "technical"] {
        let (want, want_calls) = run(&p, &options(None, true), label, delay);
        assert_eq!(want.outcome.clone().unwrap(), record(label));
        assert_eq!(calls_of(&want_calls, "lookup").len(), 1);

        let (got, calls) = run(&p, &options(budget(4), true), label, delay);
        assert_eq!(
            got.outcome.clone().unwrap(),
            record(label),
            "{label}: same result"
        );
        // Both lookups started with the classifier; the taken arm's op
        // did not call again: the tool saw its request exactly once.
        let lookups = calls_of(&calls, "lookup");
        assert_eq!(lookups.len(), 2, "{label}: {lookups:?}");
        let taken = json!(format!("{label}/my printer is on fire"));
        assert_eq!(lookups.iter().filter(|a| **a == taken).count(), 1);
        // No side-effecting tool was ever started.
        for t in ["write_file", "bash", "srv.get"] {
            assert!(calls_of(&calls, t).is_empty(), "{label}: {t} called");
        }
        let s = got.summary.speculation.clone().unwrap();
        assert_eq!(
            (s.tool_speculated, s.tool_adopted, s.tool_discarded),
            (2, 1, 1),
            "{label}: {s:?}"
        );
        assert_eq!((s.speculated, s.adopted, s.discarded), (2, 1, 1));
        // A tool has no price: the discarded call cost nothing.
        assert_eq!(s.extra_cost_usd, 0.0);
        assert_eq!(got.summary.cost_usd, want.summary.cost_usd);
        // The lookup ran beside the classifier: most of it was behind it
        // when its op started, and the run was shorter.
        assert!(s.saved_ms >= 100.0, "{s:?}");
        assert!(
            got.summary.makespan_ms < want.summary.makespan_ms,
            "{} vs {}",
            got.summary.makespan_ms,
            want.summary.makespan_ms
        );
        // The op's event is the tool call, as without speculation; the
        // discarded call has none.
        let invs = |r: &RunReport| {
            r.events
                .iter()
                .filter(|e| e.opcode == ais_ir::Opcode::Inv)
                .count()
        };
        assert_eq!(invs(&got), invs(&want));
        assert_eq!(invs(&got), 1);
    }
}

#[test]
fn side_effecting_tools_start_only_in_the_taken_arm() {
    let p = program(ROUTER);
    let (r, calls) = run(
        &p,
        &options(budget(8), true),
        "something else",
        Duration::from_millis(20),
    );
    assert_eq!(r.outcome.unwrap(), json!({ "done": "srv.get" }));
    // The default arm's tools ran once each, after the decision; the two
    // lookups were speculated and discarded.
    for t in ["write_file", "bash", "srv.get"] {
        assert_eq!(calls_of(&calls, t).len(), 1, "{t}");
    }
    assert_eq!(calls_of(&calls, "lookup").len(), 2);
    let s = r.summary.speculation.unwrap();
    assert_eq!(
        (s.tool_speculated, s.tool_adopted, s.tool_discarded),
        (2, 0, 2)
    );
}

#[test]
fn a_tool_the_catalogue_does_not_declare_read_only_is_never_speculated() {
    let p = program(ROUTER);
    // Same name, same host: only the declaration differs.
    let (r, calls) = run(
        &p,
        &options(budget(8), false),
        "billing",
        Duration::from_millis(20),
    );
    assert_eq!(r.outcome.unwrap(), record("billing"));
    assert_eq!(calls_of(&calls, "lookup").len(), 1);
    let s = r.summary.speculation.unwrap();
    assert_eq!(s.tool_speculated, 0, "{s:?}");
}

#[test]
fn speculated_tool_calls_stay_within_max_extra_calls() {
    let p = program(ROUTER);
    // The default arm has nothing to speculate, so either lookup may be
    // extra: with room for 1, only the first arm's starts.
    for (max, label, started, lookups) in [
        (1, "billing", 1, 1),
        (1, "technical", 1, 2),
        (2, "technical", 2, 2),
    ] {
        let (r, calls) = run(
            &p,
            &options(budget(max), true),
            label,
            Duration::from_millis(20),
        );
        assert_eq!(r.outcome.unwrap(), record(label));
        let s = r.summary.speculation.unwrap();
        assert_eq!(s.tool_speculated, started, "max {max}, {label}: {s:?}");
        assert!(s.discarded <= u64::from(max), "max {max}: {s:?}");
        assert_eq!(
            calls_of(&calls, "lookup").len(),
            lookups,
            "max {max}, {label}"
        );
    }
}

fn inv_steps(dir: &std::path::Path, id: &str) -> Vec<String> {
    journal::load_record(dir, id)
        .unwrap()
        .steps
        .iter()
        .filter(|s| s.op == "inv")
        .map(|s| s.kind.clone())
        .collect()
}

#[test]
fn a_discarded_result_is_never_journaled_and_a_resumed_run_speculates_nothing() {
    let p = program(ROUTER);
    let dir = tempfile::tempdir().unwrap();
    let bytes = bytecode::encode(&p).unwrap();
    let j =
        Arc::new(Journal::begin(Some(dir.path()), "r1", "test", &bytes, None, &args()).unwrap());
    // Attempt 1: both lookups are speculated; the taken arm's fails (the
    // directory is down), so the run fails after the branch was decided.
    let (h, calls) = host(Duration::from_millis(50), true);
    let mut o = options(budget(4), true);
    o.journal = Some(j);
    let r = ais_vm::run(&p, &o, backend("billing", Duration::from_millis(150)), h);
    assert!(r.outcome.is_err());
    assert_eq!(calls_of(&calls, "lookup").len(), 2);
    let s = r.summary.speculation.unwrap();
    assert_eq!(
        (s.tool_speculated, s.tool_adopted, s.tool_discarded),
        (2, 1, 1)
    );
    // The discarded lookup left nothing in the journal; the adopted one's
    // op recorded its intent (and no result: it failed).
    assert!(
        !inv_steps(dir.path(), "r1").iter().any(|k| k == "done"),
        "{:?}",
        inv_steps(dir.path(), "r1")
    );

    // Attempt 2 (resume): the classifier's reply is replayed, so nothing
    // is speculated; the taken arm's lookup is made once, by its op.
    let j = Arc::new(Journal::resume(dir.path(), "r1").unwrap());
    let (h, calls) = host(Duration::from_millis(50), false);
    let mut o = options(budget(4), true);
    o.journal = Some(j);
    let b = backend("billing", Duration::from_millis(150));
    let r = ais_vm::run(&p, &o, b.clone(), h);
    assert_eq!(r.outcome.unwrap(), record("billing"));
    assert_eq!(b.calls(), 0, "the classifier was replayed");
    assert_eq!(
        calls_of(&calls, "lookup"),
        vec![json!("billing/my printer is on fire")]
    );
    let s = r.summary.speculation.unwrap();
    assert_eq!((s.speculated, s.tool_speculated), (0, 0), "{s:?}");
    assert_eq!(
        inv_steps(dir.path(), "r1")
            .iter()
            .filter(|k| *k == "done")
            .count(),
        1
    );
}

/// The ticket comes from a tool whose results are untrusted (a web page,
/// an email): the classifier and both lookups get it.
const ROUTER_UNTRUSTED: &str = r#"
agent @Router {
  flow @main(%ticket: str) -> json entry {
    %0 = inv %ticket {tool = "fetch"} : json
    %1 = template %0 {template = "Classify this ticket: {0}"} : str
    %2 = ask %1 : str
    %3 = switch %2 : json {
      case "billing" {
        %4 = inv %0 {tool = "lookup"} : json
        yield %4
      }
      default {
        %5 = inv %0 {tool = "lookup"} : json
        yield %5
      }
    }
    return %3
  }
}
"#;

#[test]
fn a_tool_call_carrying_untrusted_data_is_never_speculated() {
    let p = program(ROUTER_UNTRUSTED);
    let go = |trusted: bool| {
        let (h, calls) = host(Duration::from_millis(20), false);
        h.register_tool("fetch", |a| Ok(a.clone()));
        let mut o = options(budget(8), true);
        let mut d = (*o.flow_policy.catalogue).clone();
        d.declare(ToolDecl {
            name: "fetch".into(),
            provider: "subprocess".into(),
            aliases: Vec::new(),
            effect: Effect::ReadOnly,
            trusted,
            leaves: Vec::new(),
            workspace: WorkspaceUse::None,
            local: true,
        });
        o.flow_policy.catalogue = Arc::new(d);
        let r = ais_vm::run(&p, &o, backend("billing", Duration::from_millis(50)), h);
        assert_eq!(
            r.outcome.unwrap(),
            json!({ "record": "my printer is on fire" })
        );
        (
            r.summary.speculation.unwrap(),
            calls_of(&calls, "lookup").len(),
        )
    };
    // Trusted: both lookups start with the classifier.
    let (s, lookups) = go(true);
    assert_eq!((s.tool_speculated, lookups), (2, 2), "{s:?}");
    // Untrusted: the lookups' inputs (and the arms' condition) would be
    // checked at the sink: neither starts before the decision.
    let (s, lookups) = go(false);
    assert_eq!((s.tool_speculated, lookups), (0, 1), "{s:?}");
}

/// Four arms, each one subprocess tool call with a known argument.
const ROUTER_AAM: &str = r#"
agent @Router {
  flow @main(%ticket: str) -> json entry {
    %0 = template %ticket {template = "Classify this ticket: {0}"} : str
    %1 = ask %0 : str
    %2 = switch %1 : json {
      case "allowed" {
        %3 = object %ticket {keys = json ["q"]} : json
        %4 = inv %3 {tool = "kb"} : json
        yield %4
      }
      case "denied" {
        %5 = object %ticket {keys = json ["q"]} : json
        %6 = inv %5 {tool = "kb_denied"} : json
        yield %6
      }
      case "destructive" {
        %7 = object %ticket {keys = json ["q"]} : json
        %8 = inv %7 {tool = "kb_destructive"} : json
        yield %8
      }
      default {
        %9 = object %ticket {keys = json ["q"]} : json
        %10 = inv %9 {tool = "kb_other"} : json
        yield %10
      }
    }
    return %2
  }
}
"#;

#[test]
fn the_host_s_access_policy_and_confirmations_bound_what_is_speculated() {
    let p = program(ROUTER_AAM);
    let dir = tempfile::tempdir().unwrap();
    let tools = ["kb", "kb_denied", "kb_destructive", "kb_other"];
    let mut config = String::new();
    for t in tools {
        // Each tool logs the calls it receives, then answers.
        let script = dir.path().join(format!("{t}.sh"));
        let log = dir.path().join(format!("{t}.log"));
        std::fs::write(
            &script,
            format!(
                "cat >> '{}'\necho >> '{}'\nsleep 0.05\necho '{{\"tool\": \"{t}\"}}'\n",
                log.display(),
                log.display()
            ),
        )
        .unwrap();
        config.push_str(&format!(
            "[[tools.subprocess]]\nname = \"{t}\"\ncommand = [\"sh\", \"{}\"]\neffect = \"read-only\"\ndestructive = {}\n",
            script.display(),
            t == "kb_destructive"
        ));
    }
    config.push_str("[access.allow]\nRouter = [\"kb\", \"kb_destructive\", \"kb_other\"]\n");
    let received = |t: &str| {
        std::fs::read_to_string(dir.path().join(format!("{t}.log")))
            .map_or(0, |s| s.lines().filter(|l| !l.trim().is_empty()).count())
    };
    let aam = ais_vm::aam::config::AamConfig::parse(&config, None).unwrap();
    let mut o = options(budget(8), true);
    o.flow_policy.catalogue = Arc::new(aam.declarations());
    let host = Arc::new(
        ais_vm::aam::AamHost::open(ais_vm::aam::AamOptions {
            storage: ais_vm::aam::Storage::Ephemeral,
            config: aam,
            confirm: ais_vm::aam::Confirm::Deny,
            console: None,
        })
        .unwrap(),
    );
    let r = ais_vm::run(&p, &o, backend("allowed", Duration::from_millis(150)), host);
    assert_eq!(r.outcome.unwrap(), json!({ "tool": "kb" }));
    // Speculated: the two tools the agent may call unasked; the taken
    // one's call was adopted (received once), the other discarded. The
    // tool `[access]` denies and the destructive one (it would need
    // `--yes`) were never started.
    let s = r.summary.speculation.unwrap();
    assert_eq!(received("kb"), 1, "{s:?}");
    assert_eq!(received("kb_other"), 1, "{s:?}");
    assert_eq!(received("kb_denied"), 0);
    assert_eq!(received("kb_destructive"), 0);
    assert_eq!(
        (s.tool_speculated, s.tool_adopted, s.tool_discarded),
        (2, 1, 1),
        "{s:?}"
    );
}
