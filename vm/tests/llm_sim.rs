//! The offline simulator: determinism, schema validity, labelling, delays.

use ais_testkit::llm::*;
use ais_vm::llm::jsonschema::validate;
use ais_vm::llm::sim::SimBackend;
use ais_vm::llm::{schema, CancelToken, LlmBackend, LlmErrorKind, LlmOpKind};
use serde_json::json;
use std::time::Duration;

fn sim() -> SimBackend {
    SimBackend::new().with_delay_scale(0.0)
}

#[test]
fn same_request_same_reply() {
    let r = with_context(request(LlmOpKind::Think, "Compare A and B"), "A", "first");
    let a = sim().complete(&r, &CancelToken::new()).expect("reply");
    let b = sim().complete(&r, &CancelToken::new()).expect("reply");
    assert_eq!(
        (&a.text, &a.json, a.usage, &a.model),
        (&b.text, &b.json, b.usage, &b.model)
    );
    let other = sim()
        .complete(
            &request(LlmOpKind::Think, "Compare A and C"),
            &CancelToken::new(),
        )
        .expect("reply");
    assert_ne!(a.text, other.text);
}

#[test]
fn text_replies_are_labelled_and_derived_from_the_prompt() {
    let r = with_context(
        request(LlmOpKind::Ask, "What is the capital of France?"),
        "notes",
        "n",
    );
    let resp = sim().complete(&r, &CancelToken::new()).expect("reply");
    assert!(resp.simulated);
    assert!(sim().is_simulated());
    assert!(resp.text.starts_with("[simulated ask #"), "{}", resp.text);
    assert!(
        resp.text
            .contains("Answer for: What is the capital of France?"),
        "{}",
        resp.text
    );
    assert!(resp.text.ends_with("(using notes)"), "{}", resp.text);
    assert_eq!(resp.model, "sim-ask");
    assert_eq!(resp.finish_reason, "stop");
    assert!(resp.usage.prompt_tokens > 0 && resp.usage.completion_tokens > 0);
    assert_eq!(resp.json, None);
}

#[test]
fn structured_replies_are_schema_valid() {
    for kind in [LlmOpKind::Plan, LlmOpKind::Verify, LlmOpKind::Reflect] {
        for prompt in ["Write a report on solar power", "", "x y z"] {
            let resp = sim()
                .complete(&request(kind, prompt), &CancelToken::new())
                .expect("reply");
            let s = schema::schema_for(kind).expect("schema");
            let v = resp.json.expect("json");
            assert_eq!(validate(&s, &v), Ok(()), "{kind:?} {v}");
            assert_eq!(
                serde_json::from_str::<serde_json::Value>(&resp.text).ok(),
                Some(v)
            );
        }
    }
}

#[test]
fn plan_steps_form_a_dag() {
    let resp = sim()
        .complete(&request(LlmOpKind::Plan, "Launch"), &CancelToken::new())
        .expect("reply");
    let steps = resp.json.expect("json")["steps"]
        .as_array()
        .cloned()
        .expect("steps");
    let mut seen = Vec::new();
    for s in &steps {
        for d in s["depends_on"].as_array().expect("deps") {
            assert!(seen.contains(d), "{d} used before defined");
        }
        seen.push(s["id"].clone());
    }
    assert_eq!(steps.len(), 4);
}

#[test]
fn arbitrary_schemas_on_any_kind() {
    let mut r = request(LlmOpKind::Ask, "Extract");
    let s = json!({
        "type": "object",
        "required": ["name", "tags", "level"],
        "properties": {
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "level": {"enum": ["low", "high"]},
            "n": {"type": "integer"}
        },
        "additionalProperties": false
    });
    r.json_schema = Some(s.clone());
    let v = sim()
        .complete(&r, &CancelToken::new())
        .expect("reply")
        .json
        .expect("json");
    assert_eq!(validate(&s, &v), Ok(()), "{v}");
}

#[test]
fn delays_scale_per_latency_class() {
    let s = SimBackend::new().with_delay_scale(0.5);
    assert_eq!(s.delay_for(LlmOpKind::Ask), Duration::from_millis(500));
    assert_eq!(s.delay_for(LlmOpKind::Plan), Duration::from_millis(1500));
    assert_eq!(s.delay_for(LlmOpKind::Reason), Duration::from_millis(5000));
    assert_eq!(sim().delay_for(LlmOpKind::Reason), Duration::ZERO);
    assert_eq!(
        SimBackend::new()
            .with_delay_scale(f64::NAN)
            .delay_for(LlmOpKind::Ask),
        Duration::ZERO
    );
}

#[test]
fn cancellation_interrupts_the_delay() {
    let s = SimBackend::new().with_delay_scale(100.0);
    let cancel = CancelToken::new();
    cancel.cancel();
    let e = s
        .complete(&request(LlmOpKind::Reason, "x"), &cancel)
        .expect_err("cancelled");
    assert_eq!(e.kind, LlmErrorKind::Cancelled);
}

#[test]
fn max_tokens_truncates_text() {
    let mut r = request(
        LlmOpKind::Ask,
        "a long prompt with many many words in it to be echoed back",
    );
    r.max_tokens = Some(3);
    let resp = sim().complete(&r, &CancelToken::new()).expect("reply");
    assert!(resp.text.len() <= 12, "{}", resp.text);
}
