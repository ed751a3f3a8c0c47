//! The offline simulator: the default backend when nothing is configured.
//!
//! Replies are a pure function of the request (same request, same reply),
//! derived from the prompt so that flows produce readable, traceable text.
//! Structured ops get JSON valid against their schema. Each call waits the
//! nominal delay of its latency class (ask 1 s, think 3 s, reason 10 s)
//! times `delay_scale` (0 in tests), so parallel speedups show up in runs.
//! Every reply is marked `simulated`. Offered tools, it calls each once
//! and then answers with what they returned (see `simulated_tool_calls`).

use super::jsonschema;
use super::prompt::{self, Instructions, ModelClass, Models};
use super::{
    schema, CancelToken, LlmBackend, LlmError, LlmErrorKind, LlmOpKind, LlmRequest, LlmResponse,
    ToolCall, Turn, Usage,
};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::time::{Duration, Instant};

/// Nominal delay per latency class, before scaling.
pub fn nominal_delay(class: ModelClass) -> Duration {
    match class {
        ModelClass::Ask => Duration::from_millis(1000),
        ModelClass::Think => Duration::from_millis(3000),
        ModelClass::Reason => Duration::from_millis(10_000),
    }
}

/// Default `delay_scale`: ask 10 ms, think 30 ms, reason 100 ms.
pub const DEFAULT_DELAY_SCALE: f64 = 0.01;

#[derive(Clone, Debug)]
pub struct SimBackend {
    name: String,
    delay_scale: f64,
    concurrency: usize,
    models: Models,
    instructions: Instructions,
}

impl SimBackend {
    /// A simulator named `sim` with the default delay scale.
    pub fn new() -> SimBackend {
        SimBackend::named("sim")
    }

    pub fn named(name: &str) -> SimBackend {
        SimBackend {
            name: name.to_string(),
            delay_scale: DEFAULT_DELAY_SCALE,
            concurrency: 64,
            models: Models::default(),
            instructions: Instructions::default(),
        }
    }

    /// Scales the per-class delays; 0 makes every call immediate.
    pub fn with_delay_scale(mut self, scale: f64) -> SimBackend {
        self.delay_scale = if scale.is_finite() && scale > 0.0 {
            scale
        } else {
            0.0
        };
        self
    }

    pub fn with_concurrency(mut self, n: usize) -> SimBackend {
        self.concurrency = n.max(1);
        self
    }

    pub fn with_models(mut self, models: Models) -> SimBackend {
        self.models = models;
        self
    }

    pub fn with_instructions(mut self, instructions: Instructions) -> SimBackend {
        self.instructions = instructions;
        self
    }

    pub fn delay_scale(&self) -> f64 {
        self.delay_scale
    }

    /// The delay a request of `kind` waits.
    pub fn delay_for(&self, kind: LlmOpKind) -> Duration {
        nominal_delay(ModelClass::of(kind)).mul_f64(self.delay_scale)
    }

    /// The reply to `request`, without waiting.
    pub fn reply(&self, request: &LlmRequest) -> LlmResponse {
        let p = prompt::prepare(
            request,
            &self.instructions,
            &self.models,
            "",
            None,
            None,
            None,
        );
        let class = ModelClass::of(request.kind);
        let model = if p.model.is_empty() {
            format!("sim-{}", class.name())
        } else {
            p.model.clone()
        };
        let user = p.messages.first().map(|m| m.1.clone()).unwrap_or_default();
        let digest = Sha256::digest(format!(
            "{}\u{0}{}\u{0}{}\u{0}{}",
            request.kind.name(),
            model,
            p.system,
            user
        ));
        let seed = u64::from_be_bytes([
            digest[0], digest[1], digest[2], digest[3], digest[4], digest[5], digest[6], digest[7],
        ]);
        let tag = format!("{seed:016x}")[..8].to_string();
        let topic = summarize(&request.prompt, 12);
        if let Some(calls) = simulated_tool_calls(request, &topic, seed) {
            let text = String::new();
            return LlmResponse {
                usage: Usage {
                    prompt_tokens: tokens(p.system.len() + user.len()),
                    completion_tokens: tokens(calls.iter().map(|c| c.arguments.len()).sum()),
                    ..Usage::default()
                },
                text,
                json: None,
                finish_reason: "tool_calls".into(),
                model,
                latency: self.delay_for(request.kind),
                simulated: true,
                tool_calls: calls,
            };
        }
        if request.kind == LlmOpKind::Solve {
            let text = simulated_plan(request, &topic);
            return LlmResponse {
                usage: Usage {
                    prompt_tokens: tokens(p.system.len() + user.len()),
                    completion_tokens: tokens(text.len()),
                    ..Usage::default()
                },
                text,
                json: None,
                finish_reason: "stop".into(),
                model,
                latency: self.delay_for(request.kind),
                simulated: true,
                tool_calls: Vec::new(),
            };
        }
        let (text, json) = match &request.json_schema {
            Some(s) => {
                let v = structured(request.kind, s, &topic, &request.context, seed);
                (v.to_string(), Some(v))
            }
            None => (prose(request, &topic, &tag), None),
        };
        let mut text = text;
        if let Some(max) = request.max_tokens.filter(|_| json.is_none()) {
            let limit = (max as usize).saturating_mul(4).max(1);
            if text.len() > limit {
                let cut = (0..=limit)
                    .rev()
                    .find(|i| text.is_char_boundary(*i))
                    .unwrap_or(0);
                text.truncate(cut);
            }
        }
        let prompt_chars = p.system.len() + user.len();
        LlmResponse {
            usage: Usage {
                prompt_tokens: tokens(prompt_chars),
                completion_tokens: tokens(text.len()),
                ..Usage::default()
            },
            text,
            json,
            finish_reason: "stop".into(),
            model,
            latency: self.delay_for(request.kind),
            simulated: true,
            tool_calls: Vec::new(),
        }
    }
}

impl Default for SimBackend {
    fn default() -> SimBackend {
        SimBackend::new()
    }
}

/// Rough token count: four characters a token.
fn tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(4).max(1)
}

/// The first `n` words of `text`, on one line.
fn summarize(text: &str, n: usize) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut s = words.iter().take(n).copied().collect::<Vec<_>>().join(" ");
    if words.len() > n {
        s.push('…');
    }
    if s.is_empty() {
        s.push_str("(empty prompt)");
    }
    s
}

fn prose(request: &LlmRequest, topic: &str, tag: &str) -> String {
    let lead = super::kinds::semantics(request.kind).sim_lead;
    let mut s = format!(
        "[simulated {} #{tag}] {lead} for: {topic}",
        request.kind.name()
    );
    if !request.context.is_empty() {
        let labels: Vec<&str> = request.context.iter().map(|c| c.label.as_str()).collect();
        s.push_str(&format!(" (using {})", labels.join(", ")));
    }
    let results: Vec<String> = request
        .turns
        .iter()
        .filter_map(|t| match t {
            Turn::ToolResult {
                name,
                content,
                is_error,
                ..
            } => Some(format!(
                "{name}{} → {}",
                if *is_error { " failed" } else { "" },
                summarize(content, 8)
            )),
            Turn::Assistant { .. } => None,
        })
        .collect();
    if !results.is_empty() {
        s.push_str(&format!(
            " (simulated tool results: {})",
            results.join("; ")
        ));
    }
    s
}

/// The simulator's inner plan for a `solve` op: it reads the tools' AIS
/// signatures from the planner's guide (lines `- name(p: type, ...) ->
/// json...` after `Tools:`), calls each once with arguments of the right
/// types (strings carry the goal), and asks for an answer from all the
/// results. The plan's `ask` is labelled simulated.
fn simulated_plan(request: &LlmRequest, topic: &str) -> String {
    let goal = request
        .prompt
        .lines()
        .find_map(|l| l.strip_prefix("Goal: "))
        .map_or_else(|| topic.to_string(), |g| summarize(g, 12));
    // A string literal of the language: no quotes, escapes or `{`
    // interpolation in it.
    let goal: String = goal
        .chars()
        .map(|c| match c {
            '"' | '\\' | '{' | '}' | '\n' | '\r' => ' ',
            c => c,
        })
        .collect();
    let quoted = format!("\"{goal}\"");
    let mut tools = Vec::new();
    let mut in_tools = false;
    for line in request.prompt.lines() {
        if line.trim() == "Tools:" {
            in_tools = true;
            continue;
        }
        if !in_tools {
            continue;
        }
        let Some(sig) = line.strip_prefix("- ") else {
            if line.trim().is_empty() {
                break;
            }
            continue;
        };
        let Some((name, rest)) = sig.split_once('(') else {
            continue;
        };
        let name = name.trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let Some((params, _)) = rest.split_once(')') else {
            continue;
        };
        let args: Vec<String> = params
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                let ty = p.split_once(':').map_or("json", |(_, t)| t.trim());
                match ty {
                    "str" => quoted.clone(),
                    "number" => "1".into(),
                    "bool" => "true".into(),
                    t if t.starts_with("list<str") => format!("[{quoted}]"),
                    t if t.starts_with("list<") => "[1]".into(),
                    _ => quoted.clone(),
                }
            })
            .collect();
        tools.push(format!("{name}({})", args.join(", ")));
    }
    let mut plan = String::from("```ais\n");
    let mut names = Vec::new();
    for (i, call) in tools.iter().enumerate() {
        plan.push_str(&format!("let r{i} = {call}\n"));
        names.push(format!("r{i}"));
    }
    let ctx = if names.is_empty() {
        String::new()
    } else {
        format!(", {}", names.join(", "))
    };
    plan.push_str(&format!(
        "let answer = ask(\"[simulated plan] Answer the goal from the results: {goal}\"{ctx})\nreturn answer\n```"
    ));
    plan
}

/// The simulator's tool-calling turn: when tools are offered and none has
/// been called yet, it calls each offered tool once, all in one turn, with
/// arguments valid against the tool's schema (its string arguments carry
/// the prompt's topic); once results are in, it answers. Deterministic, and
/// the ids say the calls are simulated.
fn simulated_tool_calls(request: &LlmRequest, topic: &str, seed: u64) -> Option<Vec<ToolCall>> {
    if request.tools.is_empty() || !request.turns.is_empty() {
        return None;
    }
    let calls = request
        .tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let args = jsonschema::generate(&t.parameters, &mut |_path| topic.to_string());
            let args = match args {
                Value::Object(_) => args,
                _ => json!({}),
            };
            ToolCall {
                id: format!("sim-call-{:08x}-{i}", seed as u32),
                name: t.name.clone(),
                arguments: args.to_string(),
            }
        })
        .collect();
    Some(calls)
}

fn structured(
    kind: LlmOpKind,
    s: &Value,
    topic: &str,
    context: &[super::ContextBlock],
    seed: u64,
) -> Value {
    let v = match kind {
        LlmOpKind::Plan if *s == schema::plan() => json!({
            "goal": topic,
            "steps": [
                {"id": "s1", "description": format!("Gather information about: {topic}"), "depends_on": []},
                {"id": "s2", "description": format!("Analyse the findings on: {topic}"), "depends_on": ["s1"]},
                {"id": "s3", "description": format!("Draft the result for: {topic}"), "depends_on": ["s1"]},
                {"id": "s4", "description": "Combine analysis and draft into the final answer", "depends_on": ["s2", "s3"]}
            ]
        }),
        LlmOpKind::Verify if *s == schema::verify() => {
            let verdict = seed & 3 != 0;
            json!({
                "verdict": verdict,
                "reason": format!(
                    "[simulated] The claim \"{topic}\" {} by {} evidence block(s).",
                    if verdict { "is supported" } else { "is not supported" },
                    context.len()
                ),
                "confidence": if verdict { 0.8 } else { 0.6 }
            })
        }
        LlmOpKind::Reflect if *s == schema::reflect() => json!({
            "critique": format!("[simulated] The content on \"{topic}\" is clear but could be more specific."),
            "suggestions": ["Add a concrete example.", "State the main conclusion first."],
            "score": 0.7
        }),
        _ => Value::Null,
    };
    if !v.is_null() && jsonschema::validate(s, &v).is_ok() {
        return v;
    }
    jsonschema::generate(s, &mut |path| {
        if path.is_empty() {
            format!("[simulated] {topic}")
        } else {
            format!("[simulated {path}] {topic}")
        }
    })
}

impl LlmBackend for SimBackend {
    fn name(&self) -> &str {
        &self.name
    }

    fn concurrency(&self) -> usize {
        self.concurrency
    }

    fn is_simulated(&self) -> bool {
        true
    }

    fn complete(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
    ) -> Result<LlmResponse, LlmError> {
        let started = Instant::now();
        let response = self.reply(request);
        let delay = self.delay_for(request.kind);
        if !delay.is_zero() && !super::http::sleep_cancellable(delay, cancel) {
            return Err(LlmError::new(
                &self.name,
                LlmErrorKind::Cancelled,
                "cancelled",
            ));
        }
        if cancel.is_cancelled() {
            return Err(LlmError::new(
                &self.name,
                LlmErrorKind::Cancelled,
                "cancelled",
            ));
        }
        Ok(LlmResponse {
            latency: started.elapsed(),
            ..response
        })
    }

    fn starts_without_waiting(&self) -> bool {
        true
    }

    /// The reply is made at once; the class's delay is only a wait.
    fn scheduled_reply(
        &self,
        request: &LlmRequest,
    ) -> Option<(Duration, Result<LlmResponse, LlmError>)> {
        let delay = self.delay_for(request.kind);
        Some((
            delay,
            Ok(LlmResponse {
                latency: delay,
                ..self.reply(request)
            }),
        ))
    }
}
