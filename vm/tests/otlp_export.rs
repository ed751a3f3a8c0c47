//! OpenTelemetry export end to end: a run's spans reach a loopback OTLP
//! collector (`ais_testkit::otlp`, which decodes the protobuf apart from
//! the VM's encoder) with the GenAI conventions' names, parents and
//! attributes; a collector that is down costs the spans, not the run.
#![allow(clippy::unwrap_used)]

mod ir_support;
use ir_support::program;

use ais_testkit::fake::FakeBackend;
use ais_testkit::otlp::{Collector, ReceivedSpan};
use ais_testkit::MemoryHost;
use ais_vm::observe::otlp::{spans, OtlpSettings, Pipeline, RunTrace};
use ais_vm::observe::Observer;
use ais_vm::telemetry::TextPolicy;
use ais_vm::RunOptions;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// A fan-out of two flow calls, a recursive call inside a branch, and a
/// tool call.
const PROGRAM: &str = r#"
agent @Researcher {
  flow @research(%q: str) -> str {
    %0 = template %q {template = "Findings on {0}"} : str
    %1 = ask %0 : str
    return %1
  }
}
agent @Critic {
  flow @critique(%q: str) -> str {
    %0 = const {value = true} : bool
    %1 = if %0 : str {
      then {
        %2 = flow.call %q {callee = @Researcher.research} : str
        yield %2
      }
      else {
        yield %q
      }
    }
    return %1
  }
}
agent @Coordinator {
  flow @main(%topic: str) -> json entry {
    %0 = template %topic {template = "Sharpen: {0}"} : str
    %1 = ask %0 : str
    %2 = flow.call %1 {callee = @Researcher.research} : str
    %3 = flow.call %1 {callee = @Critic.critique} : str
    %4 = const {value = json {"a":1}} : json
    %5 = inv %4 {tool = "echo"} : json
    %6 = wait_all %2, %3, %5 : json
    return %6
  }
}
"#;

const SECRET: &str = "sk-TOPSECRET-123456";

fn settings(endpoint: &str, capture: bool) -> OtlpSettings {
    OtlpSettings {
        traces_url: format!("{endpoint}/v1/traces"),
        headers: vec![("x-test".into(), "yes".into())],
        capture_content: capture,
        sample_ratio: 1.0,
        queue_size: 1024,
        service_name: "ais-test".into(),
        timeout: Duration::from_secs(30),
    }
}

/// Runs the program with its trace exported through `pipeline`.
fn traced_run(pipeline: Arc<Pipeline>, run_id: &str) -> ais_vm::RunReport {
    let p = program(PROGRAM);
    let trace = Arc::new(RunTrace::new(
        pipeline,
        run_id,
        1,
        [("fake".to_string(), "ais.simulator".to_string())].into(),
    ));
    let o = RunOptions {
        workers: Some(2),
        args: vec![("topic".into(), json!(format!("batteries {SECRET}")))],
        observer: Some(Observer(trace.clone())),
        telemetry_text: TextPolicy {
            secrets: vec![SECRET.into()],
            ..TextPolicy::default()
        },
        ..RunOptions::default()
    };
    let report = ais_vm::run(
        &p,
        &o,
        Arc::new(FakeBackend::new()),
        Arc::new(MemoryHost::new()),
    );
    trace.finish_report(&p, &report);
    report
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn a_runs_spans_reach_the_collector_with_the_genai_names_and_parents() {
    let collector = Collector::start();
    let pipeline = Pipeline::start(settings(&collector.endpoint(), true)).unwrap();
    let report = traced_run(pipeline.clone(), "run-otlp-1");
    assert!(report.outcome.is_ok(), "{:?}", report.outcome);
    assert!(pipeline.flush(Duration::from_secs(60)), "flushed");
    let stats = pipeline.stats();
    assert_eq!((stats.failed, stats.dropped), (0, 0), "{stats:?}");

    let reqs = collector.requests();
    assert!(!reqs.is_empty());
    for r in &reqs {
        assert_eq!(r.path, "/v1/traces");
        assert_eq!(r.error, None);
        assert!(r
            .headers
            .contains(&("content-type".into(), "application/x-protobuf".into())));
        assert!(r.headers.contains(&("x-test".into(), "yes".into())));
    }
    let spans = collector.spans();
    assert_eq!(stats.sent, spans.len() as u64);
    // One trace, named after the run.
    let trace = hex(&spans::trace_id("run-otlp-1"));
    assert!(spans
        .iter()
        .all(|s| s.trace_id == trace && s.service == "ais-test"));

    let named = |prefix: &str| -> Vec<&ReceivedSpan> {
        spans
            .iter()
            .filter(|s| s.name.starts_with(prefix))
            .collect()
    };
    let by_id = |id: &str| spans.iter().find(|s| s.span_id == id);
    // Flow calls: the entry (root), Researcher twice (once from the entry,
    // once from Critic's branch), Critic once.
    let agents = named("invoke_agent ");
    let mut names: Vec<&str> = agents.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "invoke_agent Coordinator",
            "invoke_agent Critic",
            "invoke_agent Researcher",
            "invoke_agent Researcher"
        ]
    );
    let root = agents
        .iter()
        .find(|s| s.name == "invoke_agent Coordinator")
        .unwrap();
    assert_eq!(root.parent, None);
    assert_eq!(root.kind, 1);
    assert_eq!(root.attr("ais.run.outcome"), "ok");
    assert_eq!(root.attr("gen_ai.operation.name"), "invoke_agent");
    let critic = agents
        .iter()
        .find(|s| s.name == "invoke_agent Critic")
        .unwrap();
    assert_eq!(critic.parent.as_deref(), Some(root.span_id.as_str()));
    let parents: Vec<Option<&str>> = agents
        .iter()
        .filter(|s| s.name == "invoke_agent Researcher")
        .map(|s| s.parent.as_deref())
        .collect();
    assert!(parents.contains(&Some(root.span_id.as_str())));
    assert!(
        parents.contains(&Some(critic.span_id.as_str())),
        "the call from Critic's branch is Critic's child: {parents:?}"
    );
    // Each span lies within its parent.
    for s in &spans {
        if let Some(p) = s.parent.as_deref().and_then(by_id) {
            if s.name.starts_with("invoke_agent") {
                assert!(p.start_unix_ns <= s.start_unix_ns && s.end_unix_ns <= p.end_unix_ns);
            }
        }
    }

    // LLM calls: one CLIENT span each, under its flow call's span.
    let chats = named("chat ");
    let llm_ops = report.events.iter().filter(|e| e.llm.is_some()).count();
    assert_eq!(chats.len(), llm_ops);
    assert_eq!(chats.len(), 3);
    for c in &chats {
        assert_eq!(c.kind, 3);
        assert_eq!(c.attr("gen_ai.operation.name"), "chat");
        assert_eq!(c.attr("gen_ai.provider.name"), "ais.simulator");
        let model = c.attr("gen_ai.request.model").as_str().unwrap();
        assert_eq!(c.name, format!("chat {model}"));
        assert!(c.attr("gen_ai.usage.input_tokens").as_i64().unwrap() > 0);
        assert!(c.attr("gen_ai.usage.output_tokens").is_i64());
        assert_eq!(c.attr("gen_ai.response.finish_reasons"), &json!(["stop"]));
        assert_eq!(c.attr("ais.llm.attempts"), 1);
        let parent = by_id(c.parent.as_deref().unwrap()).expect("parent sent");
        assert!(parent.name.starts_with("invoke_agent "));
        assert_eq!(parent.attr("ais.flow"), c.attr("ais.flow"));
        // Content was asked for, and comes scrubbed like the report's.
        let input = c.attr("gen_ai.input.messages").as_str().unwrap();
        assert!(input.contains("\"role\":\"user\""), "{input}");
        assert!(c.attr("gen_ai.output.messages").is_string());
    }
    // The tool call.
    let tools = named("execute_tool ");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "execute_tool echo");
    assert_eq!(tools[0].attr("gen_ai.tool.name"), "echo");
    assert_eq!(tools[0].parent.as_deref(), Some(root.span_id.as_str()));
    // No secret anywhere, though the prompts held it.
    let all = format!("{spans:?}");
    assert!(all.contains("[secret]"));
    assert!(!all.contains(SECRET));
}

#[test]
fn every_attempt_of_a_run_gives_its_spans_the_same_ids() {
    // Two executions of one run (as a resumed attempt re-executes it):
    // frame ids are counted anew and the workers interleave differently,
    // but each span keeps its id and its parent.
    let shape = |run: &str| {
        let collector = Collector::start();
        let pipeline = Pipeline::start(settings(&collector.endpoint(), false)).unwrap();
        assert!(traced_run(pipeline.clone(), run).outcome.is_ok());
        assert!(pipeline.flush(Duration::from_secs(60)));
        // A `queue_wait` span is sent only for an op that waited 1 ms or
        // more for a lane, which a loaded machine decides: left out.
        let mut v: Vec<(String, Option<String>, String)> = collector
            .spans()
            .into_iter()
            .filter(|s| s.name != "queue_wait")
            .map(|s| (s.span_id, s.parent, s.name))
            .collect();
        v.sort();
        v
    };
    let first = shape("run-otlp-3");
    assert_eq!(first.len(), 8, "{first:#?}");
    assert_eq!(shape("run-otlp-3"), first);
    // Unique, and every parent is in the trace.
    let ids: std::collections::HashSet<&str> = first.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(ids.len(), first.len());
    assert!(first
        .iter()
        .all(|s| s.1.as_deref().is_none_or(|p| ids.contains(p))));
    // Another run: other ids.
    let other = shape("run-otlp-4");
    assert!(other.iter().all(|s| !ids.contains(s.0.as_str())));
}

#[test]
fn content_is_not_exported_unless_asked() {
    let collector = Collector::start();
    let pipeline = Pipeline::start(settings(&collector.endpoint(), false)).unwrap();
    let report = traced_run(pipeline.clone(), "run-otlp-2");
    assert!(report.outcome.is_ok());
    assert!(pipeline.flush(Duration::from_secs(60)));
    let spans = collector.spans();
    assert!(spans.iter().any(|s| s.name.starts_with("chat ")));
    assert!(spans
        .iter()
        .all(|s| s.attr("gen_ai.input.messages").is_null()
            && s.attr("gen_ai.output.messages").is_null()
            && s.attr("gen_ai.tool.call.arguments").is_null()));
}

#[test]
fn a_collector_that_is_down_costs_the_spans_not_the_run() {
    // A port nothing listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let pipeline = Pipeline::start(settings(&format!("http://127.0.0.1:{port}"), false)).unwrap();
    let report = traced_run(pipeline.clone(), "run-otlp-3");
    assert!(report.outcome.is_ok(), "{:?}", report.outcome);
    assert!(pipeline.flush(Duration::from_secs(60)));
    let s = pipeline.stats();
    assert_eq!(s.sent, 0);
    assert!(s.failed > 0, "{s:?}");
    assert!(s.last_error.is_some());
}
