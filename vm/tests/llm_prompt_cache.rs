//! Provider prompt caching: the request's cache hints in each protocol's
//! form (Anthropic `cache_control` breakpoints in render order, at most
//! four; OpenAI `prompt_cache_key`; nothing when there are no hints), the
//! cached tokens each protocol reports, read into `Usage`, and their
//! price.

use ais_testkit::llm::*;
use ais_testkit::mock::MockReply;
use ais_vm::llm::http::Protocol;
use ais_vm::llm::{
    CacheHints, CachePoint, CancelToken, ContextBlock, LlmBackend, LlmOpKind, LlmRequest, ToolSpec,
    Usage,
};
use serde_json::{json, Value};

fn hinted(points: Vec<CachePoint>) -> LlmRequest {
    let mut r = request(LlmOpKind::Ask, "Answer from the shared context");
    r.json_schema = None;
    for (label, text) in [("manual", "a long stable manual"), ("faq", "questions")] {
        r.context.push(ContextBlock {
            label: label.into(),
            text: text.into(),
        });
    }
    r.tools = vec![ToolSpec {
        name: "lookup".into(),
        description: "Look up".into(),
        parameters: json!({"type": "object"}),
    }];
    r.cache = CacheHints {
        key: Some("shared-manual-v1".into()),
        points,
        prefix: Vec::new(),
    };
    r
}

fn sent(protocol: Protocol, r: &LlmRequest) -> Value {
    let server = mock();
    backend(&server, protocol)
        .complete(r, &CancelToken::new())
        .expect("reply");
    server.last_request().expect("a request").body
}

/// Every object in `v` carrying `cache_control`, as JSON pointers.
fn marks(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            if o.contains_key("cache_control") {
                assert_eq!(o["cache_control"], json!({"type": "ephemeral"}));
                out.push(at.clone());
            }
            for (k, x) in o {
                marks(x, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                marks(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn anthropic_breakpoints_follow_the_hints_in_render_order() {
    let r = hinted(vec![
        CachePoint::Tools,
        CachePoint::System,
        CachePoint::Context(1),
    ]);
    let b = sent(Protocol::Anthropic, &r);
    let mut found = Vec::new();
    marks(&b, String::new(), &mut found);
    assert_eq!(
        found,
        ["/messages/0/content/0", "/system/0", "/tools/0"],
        "{b:#}"
    );
    // The first block ends right after the first context block; the
    // rest of the message follows unmarked, and the text is unchanged.
    let blocks = b["messages"][0]["content"].as_array().expect("blocks");
    let first = blocks[0]["text"].as_str().unwrap_or("");
    assert!(first.ends_with("a long stable manual\n```"), "{first}");
    let whole: String = blocks.iter().filter_map(|x| x["text"].as_str()).collect();
    let mut plain = r.clone();
    plain.cache = CacheHints::default();
    assert_eq!(whole, ais_vm::llm::prompt::render_user(&plain));
    // No OpenAI key in an Anthropic request.
    assert!(b.get("prompt_cache_key").is_none());
}

#[test]
fn at_most_four_breakpoints_are_sent() {
    let r = hinted(vec![
        CachePoint::Context(0),
        CachePoint::Context(1),
        CachePoint::Context(2),
        CachePoint::Tools,
        CachePoint::System,
    ]);
    let b = sent(Protocol::Anthropic, &r);
    let mut found = Vec::new();
    marks(&b, String::new(), &mut found);
    // Render order: tools, system, then the message's first two blocks.
    assert_eq!(
        found,
        [
            "/messages/0/content/0",
            "/messages/0/content/1",
            "/system/0",
            "/tools/0"
        ]
    );
}

#[test]
fn without_hints_nothing_changes() {
    let mut r = hinted(Vec::new());
    r.cache = CacheHints::default();
    let b = sent(Protocol::Anthropic, &r);
    let mut found = Vec::new();
    marks(&b, String::new(), &mut found);
    assert!(found.is_empty());
    assert!(b["system"].is_string());
    assert!(b["messages"][0]["content"].is_string());
    let o = sent(Protocol::OpenAi, &r);
    assert!(o.get("prompt_cache_key").is_none());
}

#[test]
fn openai_sends_the_key() {
    let b = sent(Protocol::OpenAi, &hinted(vec![CachePoint::System]));
    assert_eq!(b["prompt_cache_key"], "shared-manual-v1");
    let mut found = Vec::new();
    marks(&b, String::new(), &mut found);
    assert!(found.is_empty(), "no breakpoints in OpenAI's form");
}

fn usage_of(protocol: Protocol, reply: Value) -> Usage {
    let server = mock();
    server.push(MockReply::json(reply));
    let mut r = request(LlmOpKind::Ask, "x");
    r.json_schema = None;
    backend(&server, protocol)
        .complete(&r, &CancelToken::new())
        .expect("reply")
        .usage
}

#[test]
fn cached_tokens_are_read_from_each_protocols_usage() {
    let u = usage_of(
        Protocol::OpenAi,
        json!({"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 2000, "completion_tokens": 10,
                         "prompt_tokens_details": {"cached_tokens": 1536}}}),
    );
    assert_eq!(
        (
            u.prompt_tokens,
            u.completion_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens
        ),
        (2000, 10, 1536, 0)
    );
    // Anthropic's input_tokens excludes both cache counts.
    let u = usage_of(
        Protocol::Anthropic,
        json!({"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
               "usage": {"input_tokens": 100, "output_tokens": 10,
                         "cache_read_input_tokens": 1500, "cache_creation_input_tokens": 400}}),
    );
    assert_eq!(
        (u.prompt_tokens, u.cache_read_tokens, u.cache_write_tokens),
        (2000, 1500, 400)
    );
    let Some(gemini) = Protocol::named("gemini") else {
        panic!("registered");
    };
    let u = usage_of(
        gemini,
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
               "usageMetadata": {"promptTokenCount": 2000, "candidatesTokenCount": 10,
                                 "cachedContentTokenCount": 1200}}),
    );
    assert_eq!((u.prompt_tokens, u.cache_read_tokens), (2000, 1200));
    // llama.cpp's own count when it sends no details.
    let u = usage_of(
        Protocol::OpenAi,
        json!({"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 300, "completion_tokens": 1},
               "timings": {"cache_n": 256}}),
    );
    assert_eq!(u.cache_read_tokens, 256);
}

#[test]
fn cached_input_is_priced_by_the_protocols_multipliers() {
    let text = "[[llm_backends]]\nname = \"c\"\nprotocol = \"anthropic\"\n[llm_backends.prices]\ninput_per_mtok = 3.0\noutput_per_mtok = 15.0\n";
    let c = ais_vm::config::Config::parse(text, std::path::Path::new("cfg.toml")).expect("parses");
    let p = c.backend("c").and_then(|b| b.prices).expect("prices");
    assert_eq!(p.cache_multipliers(), (0.1, 1.25));
    let usage = Usage {
        prompt_tokens: 1_000_000,
        completion_tokens: 0,
        cache_read_tokens: 800_000,
        cache_write_tokens: 100_000,
    };
    // 100k plain at 3 + 800k at 0.3 + 100k at 3.75 per million.
    let cost = p.cost(usage);
    assert!((cost - (0.3 + 0.24 + 0.375)).abs() < 1e-9, "{cost}");
    let budget = ais_vm::journal::Budget {
        prices: vec![("*".into(), 3.0, 15.0)],
        cache_multipliers: Some(p.cache_multipliers()),
        ..Default::default()
    };
    assert_eq!(budget.cost_of("m", &usage), 915_000);
    // Unset multipliers price cached input as input.
    let flat = ais_vm::journal::Budget {
        prices: vec![("*".into(), 3.0, 15.0)],
        ..Default::default()
    };
    assert_eq!(flat.cost_of("m", &usage), 3_000_000);
}

#[test]
fn op_attributes_set_the_hints() {
    let mut a = ais_ir::bytecode::LlmAttrs {
        cache_key: Some("k1".into()),
        cache_points: vec![
            "tools".into(),
            "system".into(),
            "context:2".into(),
            "context".into(),
        ],
        cache_prefix: vec![2, 1],
        ..Default::default()
    };
    a.model = None;
    let instr = ais_ir::bytecode::Instr {
        opcode: ais_ir::Opcode::Ask,
        first_operand: 0,
        n_data: 1,
        n_tokens: 0,
        n_deps: 0,
        result: 0,
        n_results: 1,
        regions: Vec::new(),
        imm: ais_ir::bytecode::Imm::Llm(Box::new(a)),
        span: ais_ir::Span::DUMMY,
        est_ms: 0,
        rem_ms: 0,
    };
    let r = ais_vm::exec::llm_request("A", &instr, &[]).expect("request");
    assert_eq!(r.cache.key.as_deref(), Some("k1"));
    assert_eq!(
        r.cache.points,
        [
            CachePoint::Tools,
            CachePoint::System,
            CachePoint::Context(2),
            CachePoint::Context(usize::MAX)
        ]
    );
    // `cache_prefix` numbers blocks from 1; the request indexes them from 0.
    assert_eq!(r.cache.prefix, [1, 0]);
}

#[test]
fn a_cache_prefix_leads_the_user_message_in_every_protocol() {
    let mut r = hinted(vec![CachePoint::Context(1)]);
    r.cache.prefix = vec![1];
    for protocol in [Protocol::OpenAi, Protocol::Anthropic] {
        let b = sent(protocol, &r);
        let text = b.to_string();
        let faq = text.find("### faq").expect("the faq block");
        let prompt = text
            .find("Answer from the shared context")
            .expect("the prompt");
        let manual = text.find("### manual").expect("the manual block");
        assert!(faq < prompt && prompt < manual, "{protocol:?}: {text}");
    }
}

#[test]
fn cached_tokens_reach_the_event_the_summary_and_the_jsonl() {
    let server = mock();
    server.push(MockReply::json(
        json!({"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "model": "m",
               "usage": {"input_tokens": 100, "output_tokens": 10,
                         "cache_read_input_tokens": 1500, "cache_creation_input_tokens": 400}}),
    ));
    let backend = std::sync::Arc::new(backend(&server, Protocol::Anthropic));
    // The hints come from the op's attributes, through codegen.
    let m = ais_ir::parse_module(
        "agent @A {\n  flow @main(%q: str) -> str entry {\n    %0 = ask %q {cache_key = \"k1\", cache_points = json [\"system\"]} : str\n    return %0\n  }\n}\n",
    )
    .expect("valid IR");
    let program = ais_ir::bytecode::compile(&m).expect("codegen");
    let options = ais_vm::RunOptions {
        args: vec![("q".into(), json!("hello"))],
        ..ais_vm::RunOptions::default()
    };
    let report = ais_vm::run(
        &program,
        &options,
        backend,
        std::sync::Arc::new(ais_testkit::MemoryHost::new()),
    );
    assert!(report.outcome.is_ok(), "{:?}", report.outcome);
    let sent = server.last_request().expect("a request").body;
    assert_eq!(
        sent["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(report.summary.input_tokens, 2000);
    assert_eq!(report.summary.cache_read_tokens, 1500);
    assert_eq!(report.summary.cache_write_tokens, 400);
    assert!(
        report
            .summary
            .render()
            .contains("2000 (1500 cached, 400 written to cache) in"),
        "{}",
        report.summary.render()
    );
    let event = report
        .events
        .iter()
        .find(|e| e.llm.is_some())
        .expect("an LLM event");
    let line = ais_vm::telemetry::event_json(&program, &report.summary, event);
    assert_eq!(line["gen_ai.usage.input_tokens"], 2000);
    assert_eq!(line["gen_ai.usage.cache_read.input_tokens"], 1500);
    assert_eq!(line["gen_ai.usage.cache_creation.input_tokens"], 400);
}
