//! Fan-out warm-up of the provider's prompt cache (`scheduler/warmup.rs`):
//! calls that share a long prefix wait for the first one's reply to start,
//! so they read what it wrote. Asserted on the mock server's arrival log
//! (which replies had started or ended when each request arrived), never
//! on clocks.

use ais_testkit::llm::{mock, options};
use ais_testkit::mock::{Arrival, MockServer};
use ais_vm::llm::cache::WarmupMode;
use ais_vm::llm::http::{HttpBackend, Protocol};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const PROMPTS: [&str; 3] = ["List the risks", "List the costs", "List the dates"];

/// Three calls over one document (hinted as the `cache-layout` pass
/// does), beside a chain of `chain` calls that do not share it: with a
/// chain of three the fan-out has slack (off the critical path), with
/// none it is the critical path.
fn program(chain: usize) -> ais_ir::bytecode::Program {
    let mut ir = String::from("agent @A {\n  flow @main(%doc: str, %q: str) -> str entry {\n");
    for (i, p) in PROMPTS.iter().enumerate() {
        ir.push_str(&format!(
            "    %p{i} = const {{value = \"{p}\"}} : str\n    %f{i} = ask %p{i}, %doc {{context = json [\"doc\"], cache_key = \"A.main#0\", cache_prefix = json [1], cache_points = json [\"context:1\"]}} : str\n"
        ));
    }
    let mut last = "%q".to_string();
    for i in 0..chain {
        ir.push_str(&format!(
            "    %t{i} = template {last} {{template = \"Step {i} after: {{0}}\"}} : str\n    %c{i} = ask %t{i} : str\n"
        ));
        last = format!("%c{i}");
    }
    let joined = if chain > 0 {
        format!("%f0, %f1, %f2, {last}")
    } else {
        "%f0, %f1, %f2".to_string()
    };
    let holes = if chain > 0 {
        "{0}|{1}|{2}|{3}"
    } else {
        "{0}|{1}|{2}"
    };
    ir.push_str(&format!(
        "    %all = template {joined} {{template = \"{holes}\"}} : str\n    return %all\n  }}\n}}\n"
    ));
    let m = ais_ir::parse_module(&ir).expect("valid IR");
    ais_ir::bytecode::compile(&m).expect("codegen")
}

struct Outcome {
    value: Value,
    holds: u64,
    /// The run summary as `aisc run` prints it.
    rendered: String,
    /// (request number, its arrival) of the fan-out's requests.
    fan: Vec<(usize, Arrival)>,
}

fn run(
    server: &MockServer,
    protocol: Protocol,
    mode: WarmupMode,
    stream: bool,
    doc_words: usize,
    chain: usize,
) -> Outcome {
    let mut o = options(server, protocol);
    o.cache_warmup = mode;
    o.stream = stream;
    o.retry.max_retries = 0;
    let backend = Arc::new(HttpBackend::new(o));
    let opts = ais_vm::RunOptions {
        args: vec![
            ("doc".into(), json!("contract clause ".repeat(doc_words))),
            ("q".into(), json!("begin")),
        ],
        ..ais_vm::RunOptions::default()
    };
    let report = ais_vm::run(
        &program(chain),
        &opts,
        backend,
        Arc::new(ais_testkit::MemoryHost::new()),
    );
    let value = report.outcome.expect("the run succeeds");
    let arrivals = server.arrivals();
    let fan = server
        .requests()
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            let body = r.body.to_string();
            PROMPTS.iter().any(|p| body.contains(p))
        })
        .map(|(i, _)| (i, arrivals[i].clone()))
        .collect();
    Outcome {
        value,
        holds: report.summary.cache_warmup_holds,
        rendered: report.summary.render(),
        fan,
    }
}

/// A server whose streamed replies start after 150 ms and end well
/// after (events 400 ms apart).
fn slow_stream() -> MockServer {
    let server = mock();
    server.set_latency(Duration::from_millis(150));
    server.set_stream_interval(Duration::from_millis(400));
    server
}

/// The fan-out's first request went alone; each other one arrived after
/// its reply started, and (streamed) before it ended.
fn assert_held(out: &Outcome, before_end: bool) {
    assert_eq!(out.fan.len(), 3, "three fan-out requests");
    let (lead, lead_arrival) = &out.fan[0];
    for (other, _) in &out.fan[1..] {
        assert!(
            !lead_arrival.replies_started.contains(other),
            "the leader was sent before the others' replies"
        );
    }
    for (n, a) in &out.fan[1..] {
        assert!(
            a.replies_started.contains(lead),
            "request {n} was sent before the leader's reply started: {a:?}"
        );
        if before_end {
            assert!(
                !a.replies_ended.contains(lead),
                "request {n} waited for the leader's whole reply, not its first byte: {a:?}"
            );
        }
    }
    assert_eq!(out.holds, 2);
}

/// No fan-out request waited for another's reply.
fn assert_not_held(out: &Outcome) {
    assert_eq!(out.fan.len(), 3, "three fan-out requests");
    let ids: Vec<usize> = out.fan.iter().map(|(n, _)| *n).collect();
    for (n, a) in &out.fan {
        assert!(
            !a.replies_started.iter().any(|s| ids.contains(s)),
            "request {n} waited for a fan-out reply: {a:?}"
        );
    }
    assert_eq!(out.holds, 0);
}

#[test]
fn a_fan_out_with_slack_waits_for_the_first_calls_first_byte() {
    let server = slow_stream();
    // ~1500 tokens of shared document: above OpenAI's 1024.
    let out = run(&server, Protocol::OpenAi, WarmupMode::Auto, true, 400, 3);
    assert_held(&out, true);
    assert!(
        out.rendered
            .contains("0 retries, 2 held for cache warm-up;"),
        "{}",
        out.rendered
    );
}

#[test]
fn a_whole_reply_releases_the_others_when_it_arrives() {
    let server = mock();
    server.set_latency(Duration::from_millis(100));
    let out = run(&server, Protocol::OpenAi, WarmupMode::Auto, false, 400, 3);
    assert_held(&out, false);
    let lead = out.fan[0].0;
    for (_, a) in &out.fan[1..] {
        assert!(a.replies_ended.contains(&lead), "{a:?}");
    }
}

#[test]
fn anthropic_holds_calls_that_carry_a_breakpoint() {
    let server = slow_stream();
    let out = run(&server, Protocol::Anthropic, WarmupMode::Auto, true, 400, 3);
    assert_held(&out, true);
}

#[test]
fn no_hold_below_the_providers_minimum() {
    let server = slow_stream();
    // ~200 tokens: nothing to cache.
    let out = run(&server, Protocol::OpenAi, WarmupMode::Auto, true, 50, 3);
    assert_not_held(&out);
}

#[test]
fn off_disables_the_warm_up() {
    let server = slow_stream();
    let out = run(&server, Protocol::OpenAi, WarmupMode::Off, true, 400, 3);
    assert_not_held(&out);
}

#[test]
fn on_the_critical_path_auto_holds_only_when_a_hit_pays_for_the_wait() {
    // The fan-out is the whole run and nothing has been observed yet: a
    // hold would lengthen the run by the leader's time to first token.
    let server = slow_stream();
    let out = run(&server, Protocol::OpenAi, WarmupMode::Auto, true, 400, 0);
    assert_not_held(&out);
    // `always` holds regardless.
    let server = slow_stream();
    let out = run(&server, Protocol::OpenAi, WarmupMode::Always, true, 400, 0);
    assert_held(&out, true);
}

/// What the model reads of a request: its system text and its messages'
/// text, whatever blocks a protocol splits them into (Anthropic's cache
/// breakpoints split the message; the mock echoes one block).
fn read_text(body: &Value) -> String {
    fn text(v: &Value) -> String {
        match v {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks.iter().map(text).collect(),
            Value::Object(o) => o.get("text").map(text).unwrap_or_default(),
            _ => String::new(),
        }
    }
    let mut out = text(&body["system"]);
    for m in body["messages"].as_array().into_iter().flatten() {
        out.push_str(&text(&m["content"]));
    }
    out
}

#[test]
fn requests_and_results_are_the_same_with_and_without_the_warm_up() {
    for protocol in [Protocol::OpenAi, Protocol::Anthropic] {
        let off_server = mock();
        let off = run(&off_server, protocol, WarmupMode::Off, true, 400, 3);
        let on_server = mock();
        let on = run(&on_server, protocol, WarmupMode::Always, true, 400, 3);
        assert_eq!(on.holds, 2);
        assert_eq!(off.holds, 0);
        let mut sent_off: Vec<String> = off_server
            .requests()
            .iter()
            .map(|r| read_text(&r.body))
            .collect();
        let mut sent_on: Vec<String> = on_server
            .requests()
            .iter()
            .map(|r| read_text(&r.body))
            .collect();
        sent_off.sort();
        sent_on.sort();
        assert_eq!(sent_off.len(), 6);
        assert_eq!(sent_on, sent_off, "{protocol:?}: the model reads the same");
        assert!(on
            .value
            .as_str()
            .is_some_and(|s| s.matches('|').count() == 3));
        if protocol == Protocol::OpenAi {
            // One text per message: the mock's echo is the same too.
            assert_eq!(on.value, off.value);
        }
    }
}

#[test]
fn anthropic_calls_sent_beside_their_leader_carry_no_breakpoint() {
    // Critical fan-out, nothing observed: not held, so the two calls that
    // go beside the leader cannot read its prefix and must not pay a
    // cache write for it.
    let server = slow_stream();
    let out = run(&server, Protocol::Anthropic, WarmupMode::Auto, true, 400, 0);
    assert_not_held(&out);
    let requests = server.requests();
    let marked = |n: usize| requests[n].body.to_string().contains("cache_control");
    // Exactly one of the fan-out's requests (the leader: whichever the
    // scheduler sent first, which the mock may receive second) writes the
    // prefix; the others carry no breakpoint.
    let marked_ones: Vec<usize> = out
        .fan
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| marked(*n))
        .collect();
    assert_eq!(
        marked_ones.len(),
        1,
        "one leader writes the prefix, the others carry no breakpoint: {marked_ones:?} of {:?}",
        out.fan
    );
}

#[test]
fn a_call_that_waits_for_its_leaders_value_finds_the_class_warm() {
    // The second call uses the first one's reply: it starts after it, so
    // it is neither held nor sent without its breakpoint.
    let hint = "context = json [\"doc\"], cache_key = \"A.main#0\", cache_prefix = json [1], cache_points = json [\"context:1\"]";
    let ir = format!(
        "agent @A {{\n  flow @main(%doc: str) -> str entry {{\n    %0 = const {{value = \"Draft\"}} : str\n    %1 = ask %0, %doc {{{hint}}} : str\n    %2 = template %1 {{template = \"Review: {{0}}\"}} : str\n    %3 = ask %2, %doc {{{hint}}} : str\n    return %3\n  }}\n}}\n"
    );
    let program =
        ais_ir::bytecode::compile(&ais_ir::parse_module(&ir).expect("IR")).expect("codegen");
    for stream in [false, true] {
        let server = mock();
        let mut o = options(&server, Protocol::Anthropic);
        o.cache_warmup = WarmupMode::Always;
        o.stream = stream;
        let opts = ais_vm::RunOptions {
            args: vec![("doc".into(), json!("contract clause ".repeat(400)))],
            ..ais_vm::RunOptions::default()
        };
        let report = ais_vm::run(
            &program,
            &opts,
            Arc::new(HttpBackend::new(o)),
            Arc::new(ais_testkit::MemoryHost::new()),
        );
        assert!(report.outcome.is_ok(), "{:?}", report.outcome);
        assert_eq!(report.summary.cache_warmup_holds, 0);
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        for r in &requests {
            assert!(
                r.body.to_string().contains("cache_control"),
                "stream {stream}"
            );
        }
    }
}

/// A classifier over the document decides which of three arms runs; each
/// arm asks about the same document (one prefix class with the
/// classifier).
fn routed() -> ais_ir::bytecode::Program {
    let hint = "context = json [\"doc\"], cache_key = \"R.main#0\", cache_prefix = json [1], cache_points = json [\"context:1\"]";
    let arm = |n: usize, label: &str| {
        format!(
            "      %p{n} = const {{value = \"{label} answer\"}} : str\n      %a{n} = ask %p{n}, %doc {{{hint}}} : str\n      yield %a{n}\n"
        )
    };
    let ir = format!(
        "agent @R {{\n  flow @main(%doc: str) -> str entry {{\n    %q = const {{value = \"Classify the document\"}} : str\n    %c = ask %q, %doc {{{hint}}} : str\n    %r = switch %c : str {{\n      case \"billing\" {{\n{}      }}\n      case \"technical\" {{\n{}      }}\n      default {{\n{}      }}\n    }}\n    return %r\n  }}\n}}\n",
        arm(1, "Billing"),
        arm(2, "Technical"),
        arm(3, "Escalation")
    );
    let m = ais_ir::parse_module(&ir).expect("valid IR");
    ais_ir::bytecode::compile(&m).expect("codegen")
}

/// Runs [`routed`] with speculation; the classifier's request number, and
/// the arms' requests (number, arrival, body).
fn run_routed(
    server: &MockServer,
    mode: WarmupMode,
) -> (ais_vm::RunReport, usize, Vec<(usize, Arrival, Value)>) {
    let mut o = options(server, Protocol::OpenAi);
    o.cache_warmup = mode;
    o.stream = true;
    o.retry.max_retries = 0;
    let opts = ais_vm::RunOptions {
        args: vec![("doc".into(), json!("contract clause ".repeat(400)))],
        speculate: Some(ais_vm::Speculate {
            max_extra_calls: 3,
            max_extra_cost_usd: 1.0,
        }),
        ..ais_vm::RunOptions::default()
    };
    let report = ais_vm::run(
        &routed(),
        &opts,
        Arc::new(HttpBackend::new(o)),
        Arc::new(ais_testkit::MemoryHost::new()),
    );
    let arrivals = server.arrivals();
    let requests = server.requests();
    let classifier = requests
        .iter()
        .position(|r| r.body.to_string().contains("Classify the document"))
        .expect("the classifier was sent");
    let arms = requests
        .iter()
        .enumerate()
        .filter(|(_, r)| r.body.to_string().contains(" answer"))
        .map(|(i, r)| (i, arrivals[i].clone(), r.body.clone()))
        .collect();
    (report, classifier, arms)
}

#[test]
fn speculated_arms_wait_for_the_classifiers_prefix_to_be_cached() {
    let server = slow_stream();
    let (report, classifier, arms) = run_routed(&server, WarmupMode::Auto);
    assert!(report.outcome.is_ok(), "{:?}", report.outcome);
    let s = report.summary.speculation.expect("speculation ran");
    assert_eq!((s.speculated, s.adopted, s.discarded), (3, 1, 2), "{s:?}");
    // Every arm's request went once (the taken one adopted), after the
    // classifier's reply started (its prefix was cached: the provider
    // answers it at the cached price) and before it ended (speculation
    // still ran ahead of the decision), carrying the class's cache key.
    assert_eq!(arms.len(), 3, "{arms:?}");
    for (n, a, body) in &arms {
        assert!(
            a.replies_started.contains(&classifier),
            "speculated request {n} was sent before the classifier's reply started: {a:?}"
        );
        assert!(
            !a.replies_ended.contains(&classifier),
            "speculated request {n} waited for the whole classifier reply: {a:?}"
        );
        assert!(body.get("prompt_cache_key").is_some(), "{body}");
    }
    assert_eq!(report.summary.cache_warmup_holds, 3);

    // With the warm-up off, the same speculated calls go at once, beside
    // the classifier: none could read its prefix.
    let server = slow_stream();
    let (report, classifier, arms) = run_routed(&server, WarmupMode::Off);
    assert!(report.outcome.is_ok());
    assert_eq!(arms.len(), 3, "{arms:?}");
    for (n, a, _) in &arms {
        assert!(
            !a.replies_started.contains(&classifier),
            "request {n} waited with the warm-up off: {a:?}"
        );
    }
    assert_eq!(report.summary.cache_warmup_holds, 0);
}
