//! A scripted planner model for the inner-plan tests: round `n` of a
//! `solve` op is answered with `plans[n-1]` (the last one again after
//! that), its prompts are recorded; other LLM ops get `answer: <prompt> |
//! <context>`, or fail with `fail_answers`.
#![allow(dead_code)]

use ais_vm::llm::{
    CancelToken, LlmBackend, LlmError, LlmErrorKind, LlmOpKind, LlmRequest, LlmResponse, Usage,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct Planner {
    pub plans: Vec<String>,
    pub rounds: AtomicUsize,
    pub prompts: Mutex<Vec<String>>,
    pub fail_answers: bool,
}

impl Planner {
    pub fn new(plans: &[&str]) -> Arc<Planner> {
        Arc::new(Planner {
            plans: plans.iter().map(|p| p.to_string()).collect(),
            rounds: AtomicUsize::new(0),
            prompts: Mutex::new(Vec::new()),
            fail_answers: false,
        })
    }

    /// Planning rounds asked so far.
    pub fn rounds(&self) -> usize {
        self.rounds.load(Ordering::SeqCst)
    }
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

impl LlmBackend for Planner {
    fn name(&self) -> &str {
        "planner"
    }
    fn complete(&self, r: &LlmRequest, _: &CancelToken) -> Result<LlmResponse, LlmError> {
        if r.kind == LlmOpKind::Solve {
            let n = self.rounds.fetch_add(1, Ordering::SeqCst);
            self.prompts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(r.prompt.clone());
            let plan = self
                .plans
                .get(n)
                .or(self.plans.last())
                .cloned()
                .unwrap_or_default();
            return Ok(text(&plan));
        }
        if self.fail_answers {
            return Err(LlmError::new("planner", LlmErrorKind::Auth, "key revoked"));
        }
        let ctx: Vec<&str> = r.context.iter().map(|c| c.text.as_str()).collect();
        Ok(text(&format!("answer: {} | {}", r.prompt, ctx.join(", "))))
    }
}
