//! Span building and the pipeline's queue. End to end (a run, a loopback
//! collector decoding what is sent) is `vm/tests/otlp_export.rs`.

use super::spans::{self, Attr, Outcome, RunContext, SpanKind};
use super::*;
use crate::telemetry::{
    AttemptRecord, Invocation, LlmInfo, MessageRecord, OpDetail, OpEvent, RunSummary, Status,
    ToolCallRecord, Track,
};
use ais_ir::Opcode;
use std::collections::BTreeMap;
use std::io::{Read, Write};

fn cx(capture: bool) -> RunContext {
    RunContext {
        trace_id: spans::trace_id("run-1"),
        run_id: "run-1".into(),
        attempt: 1,
        run_start_unix_ns: None,
        base_unix_ns: 1_000_000_000,
        providers: [("priced".to_string(), "openai".to_string())].into(),
        capture_content: capture,
    }
}

fn event(frame: u64, op: u32, inv: Invocation, track: Track, times: (u64, u64, u64)) -> OpEvent {
    OpEvent {
        frame,
        // Paths stand apart from ids here, as in a run.
        frame_key: frame + 1000,
        flow: 0,
        region: 0,
        op,
        opcode: Opcode::Ask,
        agent: 0,
        invocation: inv,
        track,
        worker: 0,
        ready_ns: times.0,
        start_ns: times.1,
        end_ns: times.2,
        status: Status::Ok,
        llm: None,
        detail: None,
    }
}

fn attempt(n: u32, error: Option<&str>, retry: Option<f64>) -> AttemptRecord {
    AttemptRecord {
        number: n,
        status: Some(if error.is_some() { 429 } else { 200 }),
        error: error.map(str::to_string),
        latency_ms: 2.0,
        retry_in_ms: retry,
        finish_reason: error.is_none().then(|| "stop".to_string()),
        first_token_ms: error.is_none().then_some(1.5),
        turn: None,
        provider: String::new(),
        hedge: None,
    }
}

fn llm(attempts: Vec<AttemptRecord>) -> Box<LlmInfo> {
    Box::new(LlmInfo {
        model: "gpt-x".into(),
        input_tokens: 11,
        output_tokens: 5,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        simulated: false,
        attempts,
        tool_calls: vec![ToolCallRecord {
            turn: 1,
            tool: "search".into(),
            status: "ok",
            code: None,
            replayed: false,
            arguments: Some("{\"q\":\"x\"}".into()),
            start_ns: 30,
            end_ns: 40,
        }],
        backend: "priced".into(),
        prompt: vec![MessageRecord {
            role: "user".into(),
            text: "hello".into(),
        }],
        reply: Some("world".into()),
        finish_reason: Some("stop".into()),
        cost_micro_usd: 250,
        plan_checks: Vec::new(),
    })
}

/// A flow call whose key (its identity across attempts) is its id.
fn inv(id: u64, caller: Option<u64>) -> Invocation {
    Invocation {
        id,
        caller,
        key: id,
        caller_key: caller,
    }
}

const ENTRY: Invocation = Invocation {
    id: 0,
    caller: None,
    key: 0,
    caller_key: None,
};

#[test]
fn an_llm_call_is_one_client_span_over_its_attempts_with_the_spec_names() {
    let mut e = event(0, 3, ENTRY, Track::Llm(0), (10, 2_000_010, 3_000_000));
    e.llm = Some(llm(vec![
        attempt(1, Some("rate_limited"), Some(5.0)),
        attempt(2, None, None),
    ]));
    let c = cx(false);
    let out = spans::op_spans(&c, &e, "A.main", "A");
    let names: Vec<&str> = out.iter().map(|s| s.name.as_str()).collect();
    // Waited 2 ms for the lane: a queue-wait span; the tool the model
    // called: a child of the chat span.
    assert_eq!(names, ["queue_wait", "execute_tool search", "chat gpt-x"]);
    let chat = &out[2];
    assert_eq!(chat.kind, SpanKind::Client);
    assert_eq!(chat.parent, Some(c.invocation_span(0)));
    assert_eq!(out[1].parent, Some(chat.span_id));
    assert_eq!(out[0].parent, Some(c.invocation_span(0)));
    assert_eq!(
        chat.attr("gen_ai.operation.name"),
        Some(&Attr::from("chat"))
    );
    assert_eq!(
        chat.attr("gen_ai.provider.name"),
        Some(&Attr::from("openai"))
    );
    assert_eq!(chat.attr("ais.backend"), Some(&Attr::from("priced")));
    assert_eq!(
        chat.attr("gen_ai.request.model"),
        Some(&Attr::from("gpt-x"))
    );
    assert_eq!(chat.attr("gen_ai.usage.input_tokens"), Some(&Attr::Int(11)));
    assert_eq!(chat.attr("gen_ai.usage.output_tokens"), Some(&Attr::Int(5)));
    assert_eq!(
        chat.attr("gen_ai.response.finish_reasons"),
        Some(&Attr::StrArray(vec!["stop".into()]))
    );
    assert_eq!(chat.attr("ais.llm.attempts"), Some(&Attr::Int(2)));
    assert_eq!(chat.attr("ais.llm.retries"), Some(&Attr::Int(1)));
    assert_eq!(chat.attr("ais.cost_usd"), Some(&Attr::F64(0.00025)));
    assert_eq!(
        chat.attr("ais.llm.time_to_first_token_ms"),
        Some(&Attr::F64(1.5))
    );
    // One event per attempt, in order, the second after the first's
    // latency and backoff.
    assert_eq!(chat.events.len(), 2);
    assert!(chat.events[0].time_unix_ns < chat.events[1].time_unix_ns);
    assert_eq!(chat.start_unix_ns, 1_000_000_000 + 2_000_010);
    // Content is opt-in.
    assert!(chat.attr("gen_ai.input.messages").is_none());
    assert!(chat.attr("gen_ai.output.messages").is_none());
    assert!(out[1].attr("gen_ai.tool.call.arguments").is_none());
    let with = spans::op_spans(&cx(true), &e, "A.main", "A");
    let Some(Attr::Str(input)) = with[2].attr("gen_ai.input.messages") else {
        panic!("no input messages");
    };
    assert!(input.contains("\"content\":\"hello\""), "{input}");
    let Some(Attr::Str(output)) = with[2].attr("gen_ai.output.messages") else {
        panic!("no output messages");
    };
    assert!(output.contains("\"finish_reason\":\"stop\""), "{output}");
    assert!(with[1].attr("gen_ai.tool.call.arguments").is_some());
}

#[test]
fn tool_ops_pauses_and_plain_ops_are_told_apart() {
    let c = cx(false);
    let mut tool = event(4, 1, ENTRY, Track::Tool(0), (5, 5, 9));
    tool.opcode = Opcode::Inv;
    tool.status = Status::Failed;
    tool.detail = Some(Box::new(OpDetail {
        tool: Some("echo".into()),
        arguments: None,
        error: Some("tool.failed".into()),
        sources: vec!["tool:echo".into(), "@input".into()],
        untrusted: true,
    }));
    assert!(spans::exported(&tool));
    let s = spans::op_spans(&c, &tool, "A.main", "A");
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].name, "execute_tool echo");
    assert_eq!(s[0].kind, SpanKind::Internal);
    assert_eq!(s[0].attr("gen_ai.tool.name"), Some(&Attr::from("echo")));
    assert_eq!(s[0].attr("error.type"), Some(&Attr::from("tool.failed")));
    assert_eq!(s[0].error.as_deref(), Some("tool.failed"));
    assert_eq!(
        s[0].attr("ais.ifc.sources"),
        Some(&Attr::StrArray(vec!["tool:echo".into(), "@input".into()]))
    );
    assert_eq!(s[0].attr("ais.ifc.untrusted"), Some(&Attr::Bool(true)));

    let mut pause = event(4, 2, ENTRY, Track::Worker(0), (5, 5, 6));
    pause.status = Status::Failed;
    pause.detail = Some(Box::new(OpDetail {
        error: Some(crate::exec::PAUSED.into()),
        ..Default::default()
    }));
    assert!(spans::exported(&pause));
    let s = spans::op_spans(&c, &pause, "A.main", "A");
    assert_eq!(s[0].name, "pause A.main");
    assert_eq!(s[0].error, None);
    assert_eq!(s[0].attr("ais.paused"), Some(&Attr::Bool(true)));

    // Pure ops and cancelled calls are not exported as they happen.
    assert!(!spans::exported(&event(
        4,
        3,
        ENTRY,
        Track::Worker(0),
        (1, 1, 2)
    )));
    let mut cancelled = event(4, 4, ENTRY, Track::Llm(0), (1, 1, 1));
    cancelled.status = Status::Cancelled;
    assert!(!spans::exported(&cancelled));
}

#[test]
fn flow_calls_nest_by_caller_and_cover_their_callees() {
    let c = cx(false);
    let callee = |id| inv(id, Some(0));
    let grand = inv(9, Some(5));
    // Entry 0 fans out to 5 and 6 (siblings); 5 calls 9; a branch frame
    // (12) of 9 still belongs to call 9.
    let events = vec![
        event(0, 0, ENTRY, Track::Worker(0), (0, 1, 2)),
        event(5, 0, callee(5), Track::Worker(0), (3, 3, 4)),
        event(6, 0, callee(6), Track::Worker(1), (3, 3, 50)),
        event(9, 0, grand, Track::Llm(0), (5, 6, 80)),
        event(12, 0, grand, Track::Worker(0), (81, 81, 90)),
        event(0, 9, ENTRY, Track::Worker(0), (91, 91, 95)),
    ];
    let summary = RunSummary {
        makespan_ms: 0.0001,
        ..RunSummary::default()
    };
    let name = |flow: u32, agent: u32| (format!("F{flow}"), format!("Agent{agent}"));
    let out = spans::invocation_spans(&c, &events, &summary, Outcome::Ok, &name);
    assert_eq!(out.len(), 4);
    let by = |id: u64| {
        out.iter()
            .find(|s| s.span_id == c.invocation_span(id))
            .expect("span")
    };
    assert_eq!(by(0).parent, None);
    assert_eq!(by(5).parent, Some(c.invocation_span(0)));
    assert_eq!(by(6).parent, Some(c.invocation_span(0)));
    assert_eq!(by(9).parent, Some(c.invocation_span(5)));
    assert_eq!(by(9).name, "invoke_agent Agent0");
    assert_eq!(
        by(9).attr("gen_ai.operation.name"),
        Some(&Attr::from("invoke_agent"))
    );
    // 9's ops end at 90: its caller 5 covers them though its own end at 4.
    assert_eq!(by(9).end_unix_ns, c.base_unix_ns + 90);
    assert_eq!(by(5).end_unix_ns, c.base_unix_ns + 90);
    assert_eq!(by(6).end_unix_ns, c.base_unix_ns + 50);
    // The root covers the run from its clock's 0 and says how it ended.
    assert_eq!(by(0).start_unix_ns, c.base_unix_ns);
    assert_eq!(by(0).end_unix_ns, c.base_unix_ns + 100);
    assert_eq!(by(0).attr("ais.run.outcome"), Some(&Attr::from("ok")));
    assert_eq!(by(0).attr("ais.run.id"), Some(&Attr::from("run-1")));
}

#[test]
fn flow_calls_folded_from_events_ask_each_name_once() {
    let c = cx(false);
    let call = inv;
    // Call 0 runs, calls 5, runs again: three stretches, two calls.
    let events = vec![
        event(0, 0, call(0, None), Track::Worker(0), (0, 1, 2)),
        event(1, 0, call(0, None), Track::Worker(0), (2, 2, 3)),
        event(5, 0, call(5, Some(0)), Track::Worker(0), (3, 4, 7)),
        event(2, 0, call(0, None), Track::Worker(0), (7, 8, 9)),
    ];
    let folded = crate::observe::fold_flow_calls(&events);
    assert_eq!(
        folded
            .iter()
            .map(|s| (s.id, s.caller, s.start_ns, s.end_ns))
            .collect::<Vec<_>>(),
        [(0, None, 0, 9), (5, Some(0), 3, 7)]
    );
    let summary = RunSummary {
        makespan_ms: 0.00001,
        ..RunSummary::default()
    };
    let asked = std::cell::Cell::new(0);
    let name = |flow: u32, agent: u32| {
        asked.set(asked.get() + 1);
        (format!("F{flow}"), format!("Agent{agent}"))
    };
    let end = spans::RunEnd::new(&events, &summary, Outcome::Ok, &name);
    // Events 0 and 5 share flow and agent here: one pair, one question.
    assert_eq!(asked.get(), 1);
    assert_eq!(end.calls(), 2);
    // The same calls handed over as records give the same spans.
    assert_eq!(
        spans::RunEnd::of_calls(folded, &summary, Outcome::Ok, &name).spans(&c),
        end.spans(&c)
    );
}

#[test]
fn a_run_is_one_trace_in_every_process_and_a_span_has_one_id_in_every_attempt() {
    assert_eq!(spans::trace_id("r-7"), spans::trace_id("r-7"));
    assert_ne!(spans::trace_id("r-7"), spans::trace_id("r-8"));
    let first = cx(false);
    // A worker taking the run over: its second attempt, another clock.
    let second = RunContext {
        attempt: 2,
        base_unix_ns: 9_000_000_000,
        run_start_unix_ns: Some(first.base_unix_ns),
        ..cx(false)
    };
    let other_run = RunContext {
        trace_id: spans::trace_id("run-2"),
        run_id: "run-2".into(),
        ..cx(false)
    };
    // One op of one flow call, as each attempt reports it (frame ids are
    // counted anew in every attempt; the frame's path is the same).
    let mut e = event(4, 2, inv(3, Some(0)), Track::Llm(0), (1, 1, 2));
    e.llm = Some(llm(vec![attempt(1, None, None)]));
    let mut again = e.clone();
    again.frame = 17;
    again.invocation.id = 11;
    let a = spans::op_spans(&first, &e, "A.main", "A");
    let b = spans::op_spans(&second, &again, "A.main", "A");
    let ids = |s: &[spans::Span]| -> Vec<([u8; 8], Option<[u8; 8]>)> {
        s.iter().map(|s| (s.span_id, s.parent)).collect()
    };
    assert_eq!(ids(&a), ids(&b));
    assert_eq!(
        a.last().map(|s| s.parent),
        Some(Some(first.invocation_span(3)))
    );
    // Which attempt executed it.
    assert_eq!(a[1].attr("ais.run.attempt"), Some(&Attr::Int(1)));
    assert_eq!(b[1].attr("ais.run.attempt"), Some(&Attr::Int(2)));
    // Another run's same op: another id (and another trace).
    let c = spans::op_spans(&other_run, &e, "A.main", "A");
    assert_ne!(ids(&a), ids(&c));
    assert_ne!(first.invocation_span(3), other_run.invocation_span(3));
    // Different ops and frames of one run never share an id.
    let mut seen = std::collections::HashSet::new();
    for frame in 0..50 {
        for op in 0..50 {
            assert!(seen.insert(first.op_span_id(frame, op)));
        }
        assert!(seen.insert(first.invocation_span(frame)));
    }
    // The root the second attempt sends covers the run from its start, in
    // the first attempt, and says which attempt ended it.
    let summary = RunSummary {
        makespan_ms: 1.0,
        ..RunSummary::default()
    };
    let name = |_: u32, _: u32| ("F".to_string(), "A".to_string());
    let events = [event(0, 0, ENTRY, Track::Worker(0), (5, 5, 6))];
    let roots = spans::invocation_spans(&second, &events, &summary, Outcome::Ok, &name);
    assert_eq!(roots.len(), 1);
    assert_eq!(roots[0].span_id, first.invocation_span(0));
    assert_eq!(roots[0].start_unix_ns, first.base_unix_ns);
    assert_eq!(roots[0].attr("ais.run.attempt"), Some(&Attr::Int(2)));
    assert_eq!(roots[0].attr("ais.run.resumed"), Some(&Attr::Bool(true)));
    // Sampling by trace id: all or nothing at the ends, about half at 0.5.
    let ids: Vec<[u8; 16]> = (0..400)
        .map(|i| spans::trace_id(&format!("r{i}")))
        .collect();
    assert!(ids.iter().all(|t| spans::sampled(t, 1.0)));
    assert!(!ids.iter().any(|t| spans::sampled(t, 0.0)));
    let half = ids.iter().filter(|t| spans::sampled(t, 0.5)).count();
    assert!((120..280).contains(&half), "{half}");
}

fn settings(url: String, queue: usize) -> OtlpSettings {
    OtlpSettings {
        traces_url: url,
        headers: Vec::new(),
        capture_content: false,
        sample_ratio: 1.0,
        queue_size: queue,
        service_name: "test".into(),
        timeout: Duration::from_secs(600),
    }
}

#[test]
fn a_stuck_collector_fills_the_queue_and_later_spans_are_dropped_not_waited_for() {
    // A collector that takes the request and never answers (until the
    // test lets it go).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1/traces", listener.local_addr().expect("addr"));
    let (got, request_in) = mpsc::channel();
    let (release, let_go) = mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().expect("accept");
        let mut buf = [0u8; 4096];
        let _ = conn.read(&mut buf);
        got.send(()).expect("signal");
        let _ = let_go.recv();
        let _ = conn.write_all(b"HTTP/1.1 503 Busy\r\ncontent-length: 0\r\n\r\n");
    });
    let p = Pipeline::start(settings(url, 4)).expect("start");
    let trace = RunTrace::new(p.clone(), "stuck", 1, BTreeMap::new());
    let ev = |op| {
        let mut e = event(0, op, ENTRY, Track::Llm(0), (0, 0, 1));
        e.llm = Some(llm(vec![attempt(1, None, None)]));
        e
    };
    let offer = |op| {
        let e = ev(op);
        trace.call(&crate::observe::OpUpdate {
            event: &e,
            flow: "A.main",
            agent: "A",
        });
    };
    offer(0);
    // The first span's batch is now in flight and stuck.
    request_in.recv().expect("request");
    for op in 1..=14 {
        offer(op);
    }
    // The queue holds 4; the other 10 were dropped at once.
    assert_eq!(p.stats().dropped, 10);
    assert_eq!(p.stats().sent, 0);
    release.send(()).expect("release");
    server.join().expect("server");
    assert!(p.flush(Duration::from_secs(600)));
    let s = p.stats();
    // The stuck request failed (503: its event's two spans, the chat span
    // and its tool call's); the 4 queued events arrived while the thread
    // backed off from that failure: counted failed, one per call, without
    // building or sending anything.
    assert_eq!(s.sent, 0);
    assert_eq!(s.failed, 2 + 4);
    assert_eq!(s.requests, 1);
    assert!(s.last_error.is_some());
}

#[test]
fn only_the_attempt_that_ends_the_run_sends_its_flow_calls_and_root() {
    // A collector that is not there: every request made fails, and is
    // counted; an attempt that sends nothing makes none.
    let url = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}/v1/traces", l.local_addr().expect("addr"))
    };
    let p = Pipeline::start(settings(url, 16)).expect("start");
    let events = [event(0, 0, ENTRY, Track::Worker(0), (0, 1, 2))];
    let summary = RunSummary::default();
    let name = |_: u32, _: u32| ("F".to_string(), "A".to_string());
    // Paused: the attempt that resumes the run sends them.
    let paused = RunTrace::new(p.clone(), "r", 1, BTreeMap::new());
    paused.finish(&events, &summary, Outcome::Paused, &name);
    assert!(p.flush(Duration::from_secs(600)));
    assert_eq!(p.stats().requests, 0);
    assert_eq!(p.stats().failed, 0);
    // Ended (here: failed): its one flow call, the root, is sent.
    let ended = RunTrace::new(p.clone(), "r", 2, BTreeMap::new());
    ended.finish(&events, &summary, Outcome::Failed, &name);
    assert!(p.flush(Duration::from_secs(600)));
    assert_eq!(p.stats().requests, 1);
    assert_eq!(p.stats().failed, 1);
}
