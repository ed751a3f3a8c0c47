//! Inner plans: a plan a model wrote in AIS, checked by the same front end
//! as the developer's program before anything of it runs.
//!
//! The model writes the *body* of a flow. [`check_plan`] wraps it in an
//! agent that declares only the capabilities the enclosing op offered,
//! checks and lowers it like any source file, then checks what the front
//! end alone cannot know: which ops a plan may use (LLM calls and the
//! offered tools; no memory, beliefs, messages or output), and its size and
//! nesting bounds. An accepted plan is optimised and compiled to bytecode
//! for the VM to link into the running program. [`guide`] is the text the
//! planner is given: the grammar it may use and the tools' signatures.

use crate::driver;
use ais_ir::bytecode::{self, Program};
use ais_ir::{Diagnostic, Effect, Module, Opcode};
use serde_json::Value as Json;
use std::fmt;

mod flows;
pub use flows::{check_flows, FlowProblem};

/// What a plan may use, and within which bounds.
#[derive(Clone, Debug)]
pub struct PlanSpec {
    /// The agent the plan acts for (its LLM and tool calls are that agent's).
    pub agent: String,
    /// The capabilities the plan may call.
    pub tools: Vec<PlanTool>,
    pub limits: PlanLimits,
}

/// A capability offered to the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanTool {
    pub name: String,
    pub description: String,
    /// Parameters and their AIS types (`str`, `number`, `bool`, `json`,
    /// `list<...>`), in declaration order.
    pub params: Vec<(String, String)>,
    /// Declared `@read_only` (its calls are not ordered with each other).
    pub read_only: bool,
}

impl PlanTool {
    /// A tool from its JSON Schema: the object's required properties, in
    /// declared order (all of them when the schema lists none as
    /// required); a capability's parameters are all required, so optional
    /// ones are left to the tool's defaults. Types the language lacks
    /// become `json`.
    ///
    /// The order matters: a plan may call a tool positionally, and its
    /// arguments bind to the parameters in the order offered here. A schema
    /// held as a `serde_json::Value` has lost the text order of
    /// `properties` (its maps are sorted by key; the `preserve_order`
    /// feature would reorder every map of the workspace, goldens and
    /// journal hashes included, so it stays off). The order survives in
    /// `required`, an array: the compiler writes a capability's parameters
    /// there as declared, the standard library lists its tools' parameters
    /// there in order. So the rule is `required`'s order; properties no
    /// `required` names come after, by name (as a program's own positional
    /// calls of built-in tools bind them). A `required` name without a
    /// property is offered as `json`.
    pub fn from_schema(name: &str, description: &str, schema: &Json) -> PlanTool {
        let props = schema.get("properties").and_then(Json::as_object);
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Json::as_array)
            .map(|r| r.iter().filter_map(Json::as_str).collect())
            .unwrap_or_default();
        let mut names: Vec<&str> = Vec::new();
        for n in &required {
            if !names.contains(n) {
                names.push(n);
            }
        }
        if names.is_empty() {
            names.extend(props.into_iter().flat_map(|p| p.keys().map(String::as_str)));
        }
        let params = names
            .into_iter()
            .filter(|n| is_identifier(n))
            .map(|n| {
                let ty = props
                    .and_then(|p| p.get(n))
                    .map_or_else(|| "json".to_string(), ais_type);
                (n.to_string(), ty)
            })
            .collect();
        PlanTool {
            name: name.to_string(),
            description: description.to_string(),
            params,
            read_only: false,
        }
    }

    /// `name(a: str, b: number) -> json`.
    pub fn signature(&self) -> String {
        let ps: Vec<String> = self
            .params
            .iter()
            .map(|(n, t)| format!("{n}: {t}"))
            .collect();
        format!("{}({}) -> json", self.name, ps.join(", "))
    }
}

/// Bounds on a plan's size.
#[derive(Clone, Copy, Debug)]
pub struct PlanLimits {
    /// Characters of plan text.
    pub max_chars: usize,
    /// IR ops after lowering.
    pub max_ops: usize,
    /// Nesting of `if` / `switch` / `loop` / `try`.
    pub max_depth: usize,
}

impl Default for PlanLimits {
    fn default() -> PlanLimits {
        PlanLimits {
            max_chars: 16 * 1024,
            max_ops: 400,
            max_depth: 4,
        }
    }
}

/// One reason a plan was refused, positioned in the plan's own text.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanProblem {
    /// 1-based line and column in the plan text; `None` when the problem
    /// is the plan as a whole.
    pub at: Option<(usize, usize)>,
    pub code: String,
    pub message: String,
    pub help: Option<String>,
}

impl fmt::Display for PlanProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at {
            Some((l, c)) => write!(f, "line {l}, column {c}: ")?,
            None => f.write_str("plan: ")?,
        }
        write!(f, "error[{}]: {}", self.code, self.message)?;
        if let Some(h) = &self.help {
            write!(f, " (help: {h})")?;
        }
        Ok(())
    }
}

/// An accepted plan.
#[derive(Clone, Debug)]
pub struct CheckedPlan {
    /// The whole program the plan became (the wrapper agent with the plan
    /// as its entry flow `plan`): what `aisc check` accepts.
    pub source: String,
    /// Its optimised IR.
    pub module: Module,
    /// Its bytecode; the entry flow is the plan.
    pub program: Program,
}

/// The name of the flow a plan becomes.
pub const PLAN_FLOW: &str = "plan";

/// Checks a plan body for `spec`.
pub fn check_plan(spec: &PlanSpec, body: &str) -> Result<CheckedPlan, Vec<PlanProblem>> {
    check(spec, body, true)
}

/// The statements of a plan the model is still writing that are complete
/// and check, as a plan of their own (ending `return ""`), compiled
/// without optimisation (so no call is dropped for its unused result):
/// what may start before the model has finished. `None` while nothing
/// complete checks, and once the reply holds a whole plan (a closing
/// fence or a `return`), which is checked as a whole.
pub fn check_prefix(spec: &PlanSpec, reply_so_far: &str) -> Option<CheckedPlan> {
    let prefix = statement_prefix(reply_so_far)?;
    check(spec, &format!("{prefix}\nreturn \"\""), false).ok()
}

/// The complete top-level statements at the start of a plan being written:
/// the text up to the last line break outside brackets and strings.
pub fn statement_prefix(reply_so_far: &str) -> Option<&str> {
    let body = match reply_so_far.find("```") {
        Some(open) => {
            let after = &reply_so_far[open + 3..];
            let start = after.find('\n')? + 1;
            let body = &after[start..];
            if body.contains("```") {
                return None;
            }
            body
        }
        None => reply_so_far,
    };
    let (mut depth, mut in_str, mut escaped) = (0i64, false, false);
    let mut cut = None;
    for (i, c) in body.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_str => escaped = true,
            '"' => in_str = !in_str,
            '(' | '[' | '{' if !in_str => depth += 1,
            ')' | ']' | '}' if !in_str => depth -= 1,
            '\n' if !in_str && depth == 0 => cut = Some(i),
            _ => {}
        }
    }
    let prefix = body[..cut?].trim();
    let ends = prefix.lines().any(|l| l.trim_start().starts_with("return"));
    (!prefix.is_empty() && !ends).then_some(prefix)
}

fn check(spec: &PlanSpec, body: &str, optimise: bool) -> Result<CheckedPlan, Vec<PlanProblem>> {
    let whole = |code: &str, message: String, help: Option<&str>| {
        vec![PlanProblem {
            at: None,
            code: code.into(),
            message,
            help: help.map(str::to_string),
        }]
    };
    if body.trim().is_empty() {
        return Err(whole(
            "P0001",
            "the plan is empty".into(),
            Some("write the statements of the flow body, ending with `return`"),
        ));
    }
    if body.chars().count() > spec.limits.max_chars {
        return Err(whole(
            "P0002",
            format!(
                "the plan has {} characters; at most {} are accepted",
                body.chars().count(),
                spec.limits.max_chars
            ),
            Some("write a shorter plan"),
        ));
    }
    // Model-written text must not pull files from the disk into the run.
    if let Some(refused) = crate::program::refuse_in_plan(body) {
        let d = ais_ir::IntoDiagnostic::into_diagnostic(refused);
        return Err(vec![locate(body, 0, &d)]);
    }
    let (source, body_start) = wrap(spec, body);
    let located = |d: &Diagnostic| locate(&source, body_start, d);
    let compiled = driver::with_deep_stack(|| driver::compile_source(&source));
    let mut module = match compiled {
        Ok(c) => c.module,
        Err(ds) => return Err(ds.iter().filter(|d| d.is_error()).map(located).collect()),
    };
    let offered: Vec<&str> = spec.tools.iter().map(|t| t.name.as_str()).collect();
    let mut problems = Vec::new();
    let mut ops = 0usize;
    for (_, agent) in module.agents.iter() {
        for (_, flow) in agent.flows.iter() {
            for op in flow.walk() {
                ops += 1;
                let data = &flow.dfg.ops[op];
                let span = flow.dfg.spans.get(&op).copied();
                let refuse = |message: String, help: &str| {
                    let d =
                        Diagnostic::error("P0003", message, span.unwrap_or(ais_ir::Span::DUMMY))
                            .with_help(help.to_string());
                    located(&d)
                };
                let info = data.opcode.info();
                match (data.opcode, info.effect) {
                    (Opcode::Solve, _) => problems.push(refuse(
                        "a plan may not itself call `solve`".into(),
                        "call the tools and LLM operations directly",
                    )),
                    (Opcode::Inv, _) => {
                        let tool = data.attrs.get("tool").and_then(ais_ir::Attr::as_str).unwrap_or("");
                        if !offered.contains(&tool) {
                            problems.push(refuse(
                                format!("the plan calls `{tool}`, which is not one of its tools"),
                                &format!("the tools are: {}", offered.join(", ")),
                            ));
                        }
                    }
                    (Opcode::Fence, _) => {}
                    (_, Effect::Pure | Effect::Llm | Effect::Control) => {}
                    (op, _) => problems.push(refuse(
                        format!("a plan may not use `{}`", op.mnemonic()),
                        "a plan may call its tools and LLM operations only (no memory, beliefs, messages, output or other flows)",
                    )),
                }
            }
            let depth = nesting(flow, flow.body);
            if depth > spec.limits.max_depth {
                problems.push(PlanProblem {
                    at: None,
                    code: "P0004".into(),
                    message: format!(
                        "the plan nests `if`/`switch`/`loop`/`try` {depth} deep; at most {} is accepted",
                        spec.limits.max_depth
                    ),
                    help: Some("flatten the plan".into()),
                });
            }
        }
    }
    if ops > spec.limits.max_ops {
        problems.push(PlanProblem {
            at: None,
            code: "P0002".into(),
            message: format!(
                "the plan has {ops} operations; at most {} are accepted",
                spec.limits.max_ops
            ),
            help: Some("write a shorter plan".into()),
        });
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let internal = |m: String| {
        vec![PlanProblem {
            at: None,
            code: "E9999".into(),
            message: format!("internal compiler error on an accepted plan: {m}"),
            help: None,
        }]
    };
    if optimise {
        driver::optimize(
            &mut module,
            &driver::OptOptions {
                verify_each: true,
                ..driver::OptOptions::default()
            },
        )
        .map_err(internal)?;
    }
    let program = bytecode::compile(&module).map_err(|e| internal(e.to_string()))?;
    Ok(CheckedPlan {
        source,
        module,
        program,
    })
}

/// The plan body as the entry flow of an agent declaring only the offered
/// capabilities; returns the program text and where the body starts.
fn wrap(spec: &PlanSpec, body: &str) -> (String, usize) {
    let mut s = format!("agent {} {{\n", identifier_or(&spec.agent, "Planner"));
    for t in &spec.tools {
        if is_identifier(&t.name) {
            let ro = if t.read_only { "@read_only " } else { "" };
            s.push_str(&format!("    {ro}capability {};\n", t.signature()));
        }
    }
    s.push_str(&entry_header());
    let start = s.len();
    s.push_str(body.trim_end());
    s.push_str("\n    }\n}\n");
    (s, start)
}

/// The line that opens the plan's flow in the wrapped program: the body
/// starts right after it.
fn entry_header() -> String {
    format!("    @entry flow {PLAN_FLOW}() -> str {{\n")
}

/// 1-based line and column of `span` in the plan text starting at
/// `body_start` of `source` (`None`: outside the plan text).
fn position(source: &str, body_start: usize, span: ais_ir::Span) -> Option<(usize, usize)> {
    (!span.is_dummy() && span.start as usize >= body_start).then(|| {
        let before = source.get(body_start..span.start as usize).unwrap_or("");
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, col)
    })
}

/// A diagnostic positioned in the plan's own text.
fn locate(source: &str, body_start: usize, d: &Diagnostic) -> PlanProblem {
    PlanProblem {
        at: position(source, body_start, d.primary.span),
        code: d.code.to_string(),
        message: d.message.clone(),
        help: d.help.clone(),
    }
}

/// The deepest nesting of region-carrying ops under `region`.
fn nesting(flow: &ais_ir::FlowData, region: ais_ir::Region) -> usize {
    flow.dfg.regions[region]
        .ops
        .iter()
        .map(|&op| {
            let regions = &flow.dfg.ops[op].regions;
            if regions.is_empty() {
                0
            } else {
                1 + regions.iter().map(|&r| nesting(flow, r)).max().unwrap_or(0)
            }
        })
        .max()
        .unwrap_or(0)
}

/// The planner's instructions beyond its system prompt: what to write, the
/// subset of the language, and the tools.
pub fn guide(spec: &PlanSpec) -> String {
    let mut s = String::from(
        "Write the plan as the body of an AIS flow (no `agent` or `flow` header), ending with `return` of a string. Independent statements run in parallel.\n\
         \n\
         The language:\n\
         - `let x = expr` binds a value; `\"text {x}\"` interpolates a variable.\n\
         - Tools are called like functions, by the names listed below: `let r = TOOL(ARG: \"...\")` or positionally; each returns json.\n\
         - LLM operations: `ask(prompt, context...)` (quick), `think(...)` (careful), `reason(...)` (deep); each returns str.\n\
         - `merge(a, b)` joins values; `if (cond) { ... } else { ... }`; `loop (item in [a, b, c]) { ... }`; `switch (x) { case \"a\" => ... default => ... }`.\n\
         - Only the tools below may be called; memory, messages and printing are not available.\n\
         \n\
         Tools:\n",
    );
    if spec.tools.is_empty() {
        s.push_str("- (none: use LLM operations only)\n");
    }
    for t in &spec.tools {
        s.push_str(&format!("- {}", t.signature()));
        if !t.description.is_empty() {
            s.push_str(&format!(": {}", t.description));
        }
        s.push('\n');
    }
    // The example uses no tool: a small model copies an example's tool
    // names, and a name that was not offered fails the check.
    s.push_str(
        "\nExample (it calls no tool; call only the tools listed above):\n```ais\nlet a = ask(\"First part of the goal\")\nlet b = ask(\"Second part of the goal\")\nlet answer = think(\"Answer the goal using both results.\", a, b)\nreturn answer\n```\nReply with the plan only, in one ```ais block.",
    );
    s
}

/// The plan in a model's reply: the first fenced block if there is one,
/// else the whole text.
pub fn extract_plan(reply: &str) -> String {
    let Some(open) = reply.find("```") else {
        return reply.trim().to_string();
    };
    let after = &reply[open + 3..];
    // Skip the info string (`ais`, `rust`, ...).
    let body_start = after.find('\n').map_or(after.len(), |i| i + 1);
    let body = &after[body_start..];
    let end = body.find("```").unwrap_or(body.len());
    body[..end].trim().to_string()
}

fn is_identifier(s: &str) -> bool {
    let mut cs = s.chars();
    cs.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn identifier_or<'a>(s: &'a str, fallback: &'a str) -> &'a str {
    if is_identifier(s) {
        s
    } else {
        fallback
    }
}

/// The AIS type of a JSON Schema.
fn ais_type(schema: &Json) -> String {
    match schema.get("type").and_then(Json::as_str) {
        Some("string") => "str".into(),
        Some("number" | "integer") => "number".into(),
        Some("boolean") => "bool".into(),
        Some("array") => match schema.get("items").map(ais_type) {
            Some(t) if t != "json" => format!("list<{t}>"),
            _ => "json".into(),
        },
        _ => "json".into(),
    }
}

#[cfg(test)]
mod tests;
