//! A scripted planner model for the inner-plan tests: round `n` of a
//! `solve` op is answered with `plans[n-1]` (the last one again after
//! that); other LLM ops get `answer: <prompt> | <context>`, or fail with
//! [`failing_planner`]. It is the scriptable [`FakeBackend`], called as a
//! remote provider is (blocking); [`rounds_of`] and [`prompts_of`] read back the
//! planning requests it got.
#![allow(dead_code)]

use ais_testkit::fake::FakeBackend;
use ais_vm::llm::{LlmError, LlmErrorKind, LlmOpKind, LlmRequest, LlmResponse, Usage};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The planner: `plans` by round, text answers to other ops.
pub fn planner_model(plans: &[&str]) -> Arc<FakeBackend> {
    scripted(plans, false)
}

/// The planner whose answers to other ops fail (`llm.auth`).
pub fn failing_planner(plans: &[&str]) -> Arc<FakeBackend> {
    scripted(plans, true)
}

fn scripted(plans: &[&str], fail_answers: bool) -> Arc<FakeBackend> {
    let plans: Vec<String> = plans.iter().map(|p| p.to_string()).collect();
    let round = AtomicUsize::new(0);
    Arc::new(
        FakeBackend::new()
            .named("planner")
            .blocking()
            .with_script(move |r, _| {
                if r.kind == LlmOpKind::Solve {
                    let n = round.fetch_add(1, Ordering::SeqCst);
                    let plan = plans.get(n).or(plans.last()).cloned().unwrap_or_default();
                    return Some(Ok(text(&plan)));
                }
                if fail_answers {
                    return Some(Err(LlmError::new(
                        "planner",
                        LlmErrorKind::Auth,
                        "key revoked",
                    )));
                }
                Some(Ok(answer(r)))
            }),
    )
}

/// The planning requests `fake` got, in order.
pub fn planning_requests(fake: &FakeBackend) -> Vec<LlmRequest> {
    fake.requests()
        .into_iter()
        .filter(|r| r.kind == LlmOpKind::Solve)
        .collect()
}

/// Planning rounds asked so far.
pub fn rounds_of(fake: &FakeBackend) -> usize {
    planning_requests(fake).len()
}

/// The prompts of the planning rounds, in order.
pub fn prompts_of(fake: &FakeBackend) -> Vec<String> {
    planning_requests(fake)
        .into_iter()
        .map(|r| r.prompt)
        .collect()
}

/// `answer: <prompt> | <context>`.
pub fn answer(r: &LlmRequest) -> LlmResponse {
    let ctx: Vec<&str> = r.context.iter().map(|c| c.text.as_str()).collect();
    text(&format!("answer: {} | {}", r.prompt, ctx.join(", ")))
}

/// A finished reply with `t` as its text.
pub fn text(t: &str) -> LlmResponse {
    LlmResponse {
        text: t.into(),
        json: None,
        usage: Usage {
            prompt_tokens: 10,
            completion_tokens: 10,
            ..Default::default()
        },
        finish_reason: "stop".into(),
        model: "planner-1".into(),
        latency: Duration::ZERO,
        simulated: false,
        tool_calls: Vec::new(),
    }
}
