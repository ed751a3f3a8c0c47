//! From an [`LlmRequest`] to what a provider sees: the system prompt for the
//! op kind, the user message (prompt plus labelled context blocks), the model
//! for the op's latency class, and the JSON-schema instruction for
//! structured ops. Every protocol module builds its body from a [`Prepared`].

use super::tools::ToolNames;
use super::{CacheHints, CachePoint, LlmOpKind, LlmRequest, TextSink, ToolSpec, Turn};
use ais_ir::Latency;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Latency class of an op; each backend maps it to a model and the simulator
/// to a delay. Matches the IR op table (`plan`/`reflect`/`verify` are
/// `think`-class).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelClass {
    Ask,
    Think,
    Reason,
}

impl ModelClass {
    /// The op's latency class in the op table (an LLM op's is `ask`,
    /// `think` or `reason`).
    pub fn of(kind: LlmOpKind) -> ModelClass {
        match kind.latency() {
            Latency::Think => ModelClass::Think,
            Latency::Reason => ModelClass::Reason,
            Latency::Ask | Latency::None | Latency::Mem | Latency::Tool | Latency::Io => {
                ModelClass::Ask
            }
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ModelClass::Ask => "ask",
            ModelClass::Think => "think",
            ModelClass::Reason => "reason",
        }
    }
}

/// Model names per latency class.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Models {
    pub ask: Option<String>,
    pub think: Option<String>,
    pub reason: Option<String>,
}

impl Models {
    /// One model for every class.
    pub fn all(model: &str) -> Models {
        Models {
            ask: Some(model.into()),
            think: Some(model.into()),
            reason: Some(model.into()),
        }
    }

    /// The model for `class`, falling back to the nearest configured class
    /// (reason → think → ask and back).
    pub fn for_class(&self, class: ModelClass) -> Option<&str> {
        let order: [&Option<String>; 3] = match class {
            ModelClass::Ask => [&self.ask, &self.think, &self.reason],
            ModelClass::Think => [&self.think, &self.reason, &self.ask],
            ModelClass::Reason => [&self.reason, &self.think, &self.ask],
        };
        order.into_iter().flatten().map(String::as_str).next()
    }
}

/// The default system prompt of each op kind.
pub fn default_instruction(kind: LlmOpKind) -> &'static str {
    super::kinds::semantics(kind).instruction
}

/// System prompts per op kind: the defaults with `[instruction]` overrides.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instructions {
    /// Overrides keyed by op kind name (`ask`, `think`, `reason`, `llm`,
    /// `plan`, `reflect`, `verify`).
    pub overrides: BTreeMap<String, String>,
}

impl Instructions {
    pub fn system_for(&self, kind: LlmOpKind) -> &str {
        self.overrides
            .get(kind.name())
            .map(String::as_str)
            .unwrap_or_else(|| default_instruction(kind))
    }
}

/// `[max_tokens]` in the configuration: a completion limit per op kind,
/// replacing the built-in default of that kind
/// ([`kinds::Semantics::max_tokens`](super::kinds::Semantics)).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpLimits {
    /// Keyed by op kind name (`ask`, `think`, `reason`, `llm`, `plan`,
    /// `reflect`, `verify`, `solve`).
    pub overrides: BTreeMap<String, u32>,
}

impl OpLimits {
    /// The limit for `kind` and where it came from, when neither the op
    /// nor the backend sets one.
    pub fn for_kind(&self, kind: LlmOpKind) -> (u32, LimitSource) {
        match self.overrides.get(kind.name()) {
            Some(n) => (*n, LimitSource::Config),
            None => (
                super::kinds::semantics(kind).max_tokens,
                LimitSource::Default,
            ),
        }
    }
}

/// Where a call's completion limit came from, so a message about the
/// limit names the setting to change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitSource {
    /// The op's own `max_tokens:` argument.
    Op,
    /// The backend's `max_tokens`.
    Backend,
    /// `[max_tokens]` in the configuration.
    Config,
    /// The built-in default of the op kind.
    Default,
    /// Lowered to fit the server's context.
    Server,
}

impl LimitSource {
    /// Where to change the limit, for a hint.
    pub fn describe(self, kind: LlmOpKind) -> String {
        let k = kind.name();
        match self {
            LimitSource::Op => "the op's `max_tokens:` argument".into(),
            LimitSource::Backend => "the backend's `max_tokens`".into(),
            LimitSource::Config => format!("`[max_tokens] {k}` in the configuration"),
            LimitSource::Default => format!(
                "the built-in default for `{k}`; set `[max_tokens] {k} = N` or the backend's `max_tokens`"
            ),
            LimitSource::Server => "lowered to the room left in the server's context".into(),
        }
    }
}

/// A request ready for a protocol: everything resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Prepared {
    pub kind: LlmOpKind,
    pub model: String,
    pub system: String,
    /// Conversation turns after the system prompt: `(role, text)` with role
    /// `user` or `assistant`. The first is the rendered prompt; a JSON repair
    /// adds the bad reply and a correction request.
    pub messages: Vec<(&'static str, String)>,
    pub temperature: Option<f64>,
    /// The completion limit sent (every HTTP call sends one; the
    /// simulator has none).
    pub max_tokens: Option<u32>,
    /// Where `max_tokens` came from.
    pub max_tokens_from: LimitSource,
    pub schema: Option<Value>,
    /// The op's completion/thinking token budget (`LlmRequest::budget_tokens`).
    pub budget_tokens: Option<u32>,
    /// Tools offered, with the names the provider sees (`tool_names`).
    pub tools: Vec<ToolSpec>,
    pub tool_names: ToolNames,
    /// Earlier tool-calling turns; protocols place them after
    /// `messages[0]` (the prompt) and before any repair turns.
    pub turns: Vec<Turn>,
    /// Where streamed text goes (`LlmRequest::on_text`).
    pub on_text: Option<TextSink>,
    /// The request's prompt-cache hints.
    pub cache: CacheHints,
    /// Byte offsets in `messages[0]` where a requested
    /// [`CachePoint::Context`] falls (ascending, within the text).
    pub cache_cuts: Vec<usize>,
}

impl Prepared {
    /// Whether the hints ask for a breakpoint at `point`.
    pub fn cache_at(&self, point: CachePoint) -> bool {
        self.cache.points.contains(&point)
    }
}

/// Renders the user message: the prompt, then each context block under a
/// `### label` header, its text in a code fence. The fence is longer than
/// any run of backticks in the text, so a value that itself contains
/// headings or fences cannot end its block early or look like another
/// block (CommonMark: a fence only closes with a run at least as long).
/// The blocks of the request's cache prefix (`CacheHints::prefix`) come
/// first, then the prompt, then the other blocks in order: the same prompt
/// and labelled blocks, laid out so calls that share the prefix blocks
/// share the message's first bytes.
pub fn render_user(request: &LlmRequest) -> String {
    render_user_cut(request).0
}

/// [`render_user`], with the byte offset after the first `n` blocks in
/// render order, for each `n` (see [`CachePoint::Context`]).
fn render_user_cut(request: &LlmRequest) -> (String, Vec<usize>) {
    let n = request.context.len();
    let mut lead: Vec<usize> = Vec::new();
    for &i in &request.cache.prefix {
        if i < n && !lead.contains(&i) {
            lead.push(i);
        }
    }
    if lead.is_empty() {
        let mut out = request.prompt.clone();
        let mut ends = vec![out.len()];
        for block in &request.context {
            out.push_str("\n\n");
            push_block(&mut out, block);
            ends.push(out.len());
        }
        return (out, ends);
    }
    let mut out = String::new();
    let mut ends = vec![0];
    for &i in &lead {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        push_block(&mut out, &request.context[i]);
        ends.push(out.len());
    }
    out.push_str("\n\n");
    out.push_str(&request.prompt);
    for (i, block) in request.context.iter().enumerate() {
        if !lead.contains(&i) {
            out.push_str("\n\n");
            push_block(&mut out, block);
            ends.push(out.len());
        }
    }
    // `context` (past the last block) means the whole message, the prompt
    // included even when every block leads.
    if ends.last() != Some(&out.len()) {
        ends.push(out.len());
    }
    (out, ends)
}

/// Appends one context block: the `### label` header and the text in a
/// fence.
fn push_block(out: &mut String, block: &super::ContextBlock) {
    let label = if block.label.trim().is_empty() {
        "context"
    } else {
        block.label.trim()
    };
    let fence = "`".repeat(longest_backtick_run(&block.text).max(2) + 1);
    out.push_str("### ");
    out.push_str(label);
    out.push('\n');
    out.push_str(&fence);
    out.push('\n');
    out.push_str(&block.text);
    out.push('\n');
    out.push_str(&fence);
}

/// Where `hints`' context points fall in the rendered user message.
fn cache_cuts(hints: &CacheHints, ends: &[usize]) -> Vec<usize> {
    let mut cuts: Vec<usize> = hints
        .points
        .iter()
        .filter_map(|p| match p {
            CachePoint::Context(n) => ends.get((*n).min(ends.len().saturating_sub(1))).copied(),
            _ => None,
        })
        .filter(|&c| c > 0)
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

fn longest_backtick_run(text: &str) -> usize {
    let (mut longest, mut run) = (0, 0);
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    longest
}

/// The system-prompt suffix asking for JSON valid against `schema`. The
/// schema sits in a ```` ```json ```` fence so tools (and the mock server)
/// can find it.
pub fn schema_instruction(schema: &Value) -> String {
    let text = serde_json::to_string_pretty(schema).unwrap_or_else(|_| schema.to_string());
    format!(
        "\n\nReply with a single JSON value and nothing else (no prose, no code fence). It must be valid against this JSON schema:\n```json\n{text}\n```"
    )
}

/// The completion limit of a call: the op's own, else the backend's, else
/// the configuration's `[max_tokens]` for the op kind, else the kind's
/// built-in default. `None` for `limits`: no default (the simulator).
fn max_tokens_of(
    request: &LlmRequest,
    backend: Option<u32>,
    limits: Option<&OpLimits>,
) -> (Option<u32>, LimitSource) {
    match (request.max_tokens, backend, limits) {
        (Some(n), _, _) => (Some(n), LimitSource::Op),
        (None, Some(n), _) => (Some(n), LimitSource::Backend),
        (None, None, Some(l)) => {
            let (n, from) = l.for_kind(request.kind);
            (Some(n), from)
        }
        (None, None, None) => (None, LimitSource::Default),
    }
}

/// Resolves `request` against a backend's models and defaults.
/// `limits`: the per-kind completion limits when the backend sends one on
/// every call (HTTP backends).
pub fn prepare(
    request: &LlmRequest,
    instructions: &Instructions,
    models: &Models,
    fallback_model: &str,
    default_temperature: Option<f64>,
    default_max_tokens: Option<u32>,
    limits: Option<&OpLimits>,
) -> Prepared {
    let (max_tokens, max_tokens_from) = max_tokens_of(request, default_max_tokens, limits);
    let model = request
        .model
        .clone()
        .or_else(|| {
            models
                .for_class(ModelClass::of(request.kind))
                .map(str::to_string)
        })
        .unwrap_or_else(|| fallback_model.to_string());
    let mut system = request
        .system
        .clone()
        .unwrap_or_else(|| instructions.system_for(request.kind).to_string());
    if let Some(schema) = &request.json_schema {
        system.push_str(&schema_instruction(schema));
    }
    let (user, ends) = render_user_cut(request);
    Prepared {
        kind: request.kind,
        model,
        system,
        cache_cuts: cache_cuts(&request.cache, &ends),
        cache: request.cache.clone(),
        messages: vec![("user", user)],
        temperature: request.temperature.or(default_temperature),
        max_tokens,
        max_tokens_from,
        schema: request.json_schema.clone(),
        budget_tokens: request.budget_tokens,
        tool_names: ToolNames::new(&request.tools),
        tools: request.tools.clone(),
        turns: request.turns.clone(),
        on_text: request.on_text.clone(),
    }
}

/// The user turn that asks the model to fix an invalid structured reply.
pub fn repair_message(problem: &str) -> String {
    format!(
        "Your previous reply was not valid: {problem}. Reply again with only the corrected JSON value, valid against the schema in the instructions."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{ContextBlock, LlmOpKind};

    fn request(context: &[(&str, &str)]) -> LlmRequest {
        LlmRequest {
            kind: LlmOpKind::Ask,
            agent: "A".into(),
            system: None,
            prompt: "Summarise the report".into(),
            context: context
                .iter()
                .map(|(l, t)| ContextBlock {
                    label: l.to_string(),
                    text: t.to_string(),
                })
                .collect(),
            model: None,
            temperature: None,
            max_tokens: None,
            json_schema: None,
            budget_tokens: None,
            backend: None,
            tools: Vec::new(),
            turns: Vec::new(),
            cache: Default::default(),
            on_text: None,
            critical: false,
            attained: Default::default(),
        }
    }

    #[test]
    fn context_blocks_are_labelled_and_fenced() {
        let r = request(&[("report", "Sales grew 5%."), ("context 2", "Q3")]);
        assert_eq!(
            render_user(&r),
            "Summarise the report\n\n### report\n```\nSales grew 5%.\n```\n\n### context 2\n```\nQ3\n```"
        );
    }

    #[test]
    fn prefix_blocks_lead_and_cuts_follow_render_order() {
        let mut r = request(&[("notes", "N"), ("manual", "M"), ("faq", "F")]);
        r.cache.prefix = vec![1, 2];
        r.cache.points = vec![CachePoint::Context(2), CachePoint::Context(usize::MAX)];
        let (out, ends) = render_user_cut(&r);
        let shared = "### manual\n```\nM\n```\n\n### faq\n```\nF\n```";
        assert_eq!(
            out,
            format!("{shared}\n\nSummarise the report\n\n### notes\n```\nN\n```")
        );
        // `context:2` ends after the two shared blocks, before the prompt;
        // `context` is the whole message.
        assert_eq!(cache_cuts(&r.cache, &ends), vec![shared.len(), out.len()]);
        // Two requests that differ in prompt and unshared block share the
        // prefix byte for byte.
        let mut other = request(&[("notes", "other"), ("manual", "M"), ("faq", "F")]);
        other.prompt = "Another question".into();
        other.cache.prefix = vec![1, 2];
        assert!(render_user(&other).starts_with(&format!("{shared}\n\n")));
        // Out-of-range and repeated numbers are ignored; no prefix: as before.
        r.cache.prefix = vec![7, 1, 1];
        assert!(render_user(&r).starts_with("### manual\n```\nM\n```\n\nSummarise"));
        r.cache.prefix.clear();
        assert!(render_user(&r).starts_with("Summarise the report\n\n### notes"));
    }

    #[test]
    fn a_value_with_headings_and_fences_stays_inside_its_block() {
        let tricky = "intro\n\n### notes\n```\nfake block\n```\n````";
        let r = request(&[("report", tricky), ("notes", "real")]);
        let out = render_user(&r);
        // The fence is longer than the longest backtick run in the value.
        let fence = "`````";
        assert!(out.contains(&format!("### report\n{fence}\n{tricky}\n{fence}")));
        // Only the real blocks open at the start of a line with that fence.
        assert_eq!(out.matches(&format!("\n{fence}\n")).count(), 2);
        assert!(out.ends_with("### notes\n```\nreal\n```"));
    }
}
