//! Calls: to flows (by name, `Agent.flow`, replies), to the built-in
//! operations (LLM operations, memory, guards, messages, pauses), to an
//! agent's capabilities and tools, and to the model backend.

use super::{fail, Eval, Frame, Interpreter, Unwind};
use crate::error::OracleError;
use crate::value::{self, text};
use crate::world::TIERS;
use ais_compiler::syntax::ast::{Agent, Expr, ExprKind, Flow, Member};
use ais_vm::llm::{schema::schema_for, CancelToken, ContextBlock, LlmOpKind, LlmRequest};
use serde_json::Value as Json;

/// `"stm"`, `"ltm"`, `"episodic"` in any case, `short_term`/`long_term`, or
/// a store declared in the agent's `memory {}` block.
fn resolve_tier(agent: &Agent, written: &str) -> Option<&'static str> {
    let lower = written.to_lowercase();
    let canonical = |t: &str| match t {
        "stm" | "short_term" => Some(TIERS[0]),
        "ltm" | "long_term" => Some(TIERS[1]),
        "episodic" => Some(TIERS[2]),
        _ => None,
    };
    canonical(&lower).or_else(|| {
        agent.members.iter().find_map(|m| match m {
            Member::Memory(decls, _) => decls
                .iter()
                .find(|d| d.name.name == written)
                .and_then(|d| canonical(&d.tier.name.to_lowercase())),
            _ => None,
        })
    })
}

/// What an LLM operation's named arguments set in its request.
#[derive(Default)]
struct CallOptions {
    model: Option<String>,
    system: Option<String>,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
    budget_tokens: Option<u32>,
    backend: Option<String>,
    /// `schema:`: the reply must be JSON of this schema, and is the value.
    schema: Option<serde_json::Value>,
}

/// A call's arguments in the callee's parameter order: the positional
/// ones, then each named one at its parameter's place (the checker has
/// rejected calls whose names do not fit).
fn in_parameter_order<'a>(params: &[&str], args: &'a [Expr]) -> Vec<&'a Expr> {
    let mut slots: Vec<Option<&Expr>> = Vec::new();
    for a in args {
        match &a.kind {
            ExprKind::Named(n, v) => {
                if let Some(i) = params.iter().position(|p| *p == n.name) {
                    if slots.len() <= i {
                        slots.resize(i + 1, None);
                    }
                    slots[i].get_or_insert(v);
                }
            }
            _ => slots.push(Some(a)),
        }
    }
    slots.into_iter().flatten().collect()
}

/// An LLM operation's operands: the prompt (by position, else `prompt:`),
/// then the positional context, then `context:` (a list literal, one
/// block per item).
fn llm_operands(args: &[Expr]) -> Vec<&Expr> {
    let mut out: Vec<&Expr> = args
        .iter()
        .filter(|a| !matches!(a.kind, ExprKind::Named(..)))
        .collect();
    let named = args.iter().filter_map(|a| match &a.kind {
        ExprKind::Named(n, v) => Some((n.name.as_str(), &**v)),
        _ => None,
    });
    if out.is_empty() {
        out.extend(named.clone().find(|(n, _)| *n == "prompt").map(|(_, v)| v));
    }
    for (n, v) in named {
        match (n, &v.kind) {
            ("context", ExprKind::List(items)) => out.extend(items.iter()),
            ("context", _) => out.push(v),
            _ => {}
        }
    }
    out
}

fn named_options(named: &[&Expr]) -> CallOptions {
    let mut o = CallOptions::default();
    for a in named {
        let ExprKind::Named(n, v) = &a.kind else {
            continue;
        };
        match (n.name.as_str(), &v.kind) {
            ("model", ExprKind::Str(s)) => o.model = Some(s.text()),
            ("system", ExprKind::Str(s)) => o.system = Some(s.text()),
            ("temperature", ExprKind::Number(x)) => o.temperature = Some(*x),
            ("max_tokens", ExprKind::Number(x)) => o.max_tokens = Some(*x as u32),
            ("budget" | "budget_tokens", ExprKind::Number(x)) => o.budget_tokens = Some(*x as u32),
            ("backend", ExprKind::Str(s)) => o.backend = Some(s.text()),
            ("schema", ExprKind::Str(s)) => o.schema = serde_json::from_str(&s.text()).ok(),
            _ => {}
        }
    }
    o
}

/// The LLM operation a built-in names (its op's mnemonic), from the op table.
fn llm_kind(name: &str) -> Option<LlmOpKind> {
    ais_ir::Opcode::from_mnemonic(name).and_then(|op| op.info().llm)
}

impl<'p> Interpreter<'p> {
    fn args(&mut self, frame: &mut Frame<'p>, args: &'p [Expr]) -> Eval<Vec<Json>> {
        let mut out = Vec::with_capacity(args.len());
        for a in args {
            out.push(self.eval(frame, a)?);
        }
        Ok(out)
    }

    pub(super) fn call(
        &mut self,
        frame: &mut Frame<'p>,
        callee: &'p Expr,
        args: &'p [Expr],
    ) -> Eval<Json> {
        match &callee.kind {
            ExprKind::Member(base, flow_name) => {
                let ExprKind::Var(agent_name) = &base.kind else {
                    return fail("oracle.call", "callee is not `Agent.flow`");
                };
                let agent = self.agent(&agent_name.name)?;
                let values = self.ordered_args(frame, agent, &flow_name.name, args)?;
                self.call_named_flow(agent, &flow_name.name, values)
            }
            ExprKind::Var(name) => self.call_name(frame, &name.name, args),
            _ => fail("oracle.call", "callee is not a name"),
        }
    }

    /// The values of a flow's or capability's arguments, in parameter order.
    fn ordered_args(
        &mut self,
        frame: &mut Frame<'p>,
        agent: &'p Agent,
        callee: &str,
        args: &'p [Expr],
    ) -> Eval<Vec<Json>> {
        let params: Vec<&str> = agent
            .members
            .iter()
            .find_map(|m| match m {
                Member::Flow(f) if f.name.name == callee => {
                    Some(f.params.iter().map(|p| p.name.name.as_str()).collect())
                }
                Member::Capability(c) if c.name.name == callee => {
                    Some(c.params.iter().map(|p| p.name.name.as_str()).collect())
                }
                _ => None,
            })
            .unwrap_or_default();
        let mut out = Vec::with_capacity(args.len());
        for a in in_parameter_order(&params, args) {
            out.push(self.eval(frame, a)?);
        }
        Ok(out)
    }

    /// The reply flow of agent `to`: its flow `communicate`, else `main`,
    /// when every parameter can be given from a message (one parameter: the
    /// message, unless named `sender` or `protocol`; several: each
    /// named `message`/`content`/`msg`, `sender` or `protocol`).
    fn reply_flow(&self, to: &str) -> Option<(&'p Agent, &'p Flow, Vec<&'static str>)> {
        let agent = self.agents.iter().find(|a| a.name.name == to)?;
        let role = |name: &str, only: bool| match name {
            "sender" => Some("sender"),
            "protocol" => Some("protocol"),
            "message" | "content" | "msg" => Some("message"),
            _ if only => Some("message"),
            _ => None,
        };
        ["communicate", "main"].iter().find_map(|wanted| {
            let flow = agent.members.iter().find_map(|m| match m {
                Member::Flow(f) if f.name.name == *wanted => Some(f),
                _ => None,
            })?;
            let only = flow.params.len() == 1;
            let wants: Option<Vec<&'static str>> = flow
                .params
                .iter()
                .map(|p| role(&p.name.name, only))
                .collect();
            Some((agent, flow, wants?))
        })
    }

    fn call_named_flow(&mut self, agent: &'p Agent, name: &str, args: Vec<Json>) -> Eval<Json> {
        let flow = agent.members.iter().find_map(|m| match m {
            Member::Flow(f) if f.name.name == name => Some(f),
            _ => None,
        });
        match flow {
            Some(f) => Ok(self.call_flow(agent, f, args)?),
            None => fail("flow.unknown", format!("no flow `{name}`")),
        }
    }

    /// `name(args)`: an operation, a flow of the agent or a capability.
    fn call_name(&mut self, frame: &mut Frame<'p>, name: &str, args: &'p [Expr]) -> Eval<Json> {
        let agent = frame.agent;
        let agent_name = agent.name.name.as_str();
        // The agent's own flows and capabilities shadow the built-ins (a
        // flow may be called `plan`).
        let declared = agent.members.iter().any(|m| match m {
            Member::Flow(f) => f.name.name == name,
            Member::Capability(c) => c.name.name == name,
            _ => false,
        });
        if declared {
            let values = self.ordered_args(frame, agent, name, args)?;
            let is_flow = agent
                .members
                .iter()
                .any(|m| matches!(m, Member::Flow(f) if f.name.name == name));
            return if is_flow {
                self.call_named_flow(agent, name, values)
            } else {
                self.capability(agent, name, values)
            };
        }
        if let Some(kind) = llm_kind(name) {
            // Named arguments configure the call; the rest are the prompt
            // and context. (`tools:` is not modelled: the oracle's tests
            // use backends that never call tools.)
            let named: Vec<&'p Expr> = args
                .iter()
                .filter(|a| matches!(a.kind, ExprKind::Named(..)))
                .collect();
            let mut options = named_options(&named);
            // The agent's standing `context: "..."` when the op sets no
            // system prompt.
            if options.system.is_none() {
                options.system = agent.members.iter().find_map(|m| match m {
                    Member::Context(text, _) => Some(text.text()),
                    _ => None,
                });
            }
            let args = llm_operands(args);
            let mut values = Vec::with_capacity(args.len());
            for a in &args {
                values.push(self.eval(frame, a)?);
            }
            // The oracle has no plan compiler: like the VM without one.
            if kind == LlmOpKind::Solve {
                return fail(
                    "plan.unavailable",
                    "this run has no plan compiler: `solve` needs one",
                );
            }
            let labels = args.iter().skip(1).map(|a| context_label(a)).collect();
            return self.llm(agent_name, kind, values, labels, options);
        }
        match name {
            "inv" | "tool" | "invoke" => {
                let values = self.args(frame, args)?;
                let tool = values.first().map(text).unwrap_or_default();
                let tool_args = values.get(1).cloned().unwrap_or(Json::Null);
                self.tool(agent_name, &tool, &tool_args)
            }
            "qmem" | "mem" | "query_memory" | "umem" | "update_memory" => {
                let values = self.args(frame, args)?;
                let written = values.get(1).map(text).unwrap_or_default();
                let Some(tier) = resolve_tier(agent, &written) else {
                    return fail("mem.tier", format!("invalid memory tier {written:?}"));
                };
                let first = values.first().cloned().unwrap_or(Json::Null);
                if matches!(name, "umem" | "update_memory") {
                    self.world
                        .mem_update(agent_name, tier, first, values.get(2));
                    Ok(Json::Null)
                } else {
                    let limit = values.get(2).and_then(Json::as_f64).map(|n| n as usize);
                    Ok(self.world.mem_query(agent_name, tier, &first, limit))
                }
            }
            "fence" => Ok(Json::Null),
            // Text read as a number (a numeric guard over an LLM reply).
            "to_num" => {
                let values = self.args(frame, args)?;
                let v = values.first().cloned().unwrap_or(Json::Null);
                let n = match &v {
                    Json::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
                    Json::String(s) => s.trim().parse::<f64>().ok().filter(|n| n.is_finite()),
                    other => other.as_f64(),
                };
                match n.and_then(serde_json::Number::from_f64) {
                    Some(n) => Ok(Json::Number(n)),
                    None => {
                        let what = values.get(1).map(text).unwrap_or_else(|| "to_num".into());
                        fail(
                            "type.not_a_number",
                            format!("{what}: `{}` is not a number", text(&v)),
                        )
                    }
                }
            }
            "guard" => {
                let values = self.args(frame, args)?;
                let holds = values.first().is_some_and(value::truthy);
                if holds {
                    Ok(Json::Null)
                } else {
                    fail("guard.failed", values.get(1).map(text).unwrap_or_default())
                }
            }
            // The oracle keeps no journal: a pause always stops the run.
            "pause" => {
                let values = self.args(frame, args)?;
                let message = values.first().map(text).unwrap_or_default();
                fail("run.paused", format!("paused: {message}"))
            }
            "merge" => {
                let values = self.args(frame, args)?;
                Ok(Json::String(
                    values.iter().map(text).collect::<Vec<_>>().join("\n\n"),
                ))
            }
            "wait_all" | "wait" => Ok(Json::Array(self.args(frame, args)?)),
            "print" => {
                let values = self.args(frame, args)?;
                self.world
                    .printed
                    .push(values.iter().map(text).collect::<Vec<_>>().join(" "));
                Ok(Json::Null)
            }
            "communicate" | "talk" => {
                let ordered = in_parameter_order(&["recipient", "message", "protocol"], args);
                let mut values = Vec::with_capacity(ordered.len());
                for a in &ordered {
                    values.push(self.eval(frame, a)?);
                }
                let to = values.first().map(text).unwrap_or_default();
                // Request and reply (docs/language.md, `communicate`): a
                // literal recipient other than the sender with a reply flow
                // runs it and answers with its result.
                let literal = matches!(ordered.first().map(|a| &a.kind), Some(ExprKind::Str(s)) if !s.has_holes());
                if literal && to != agent_name {
                    if let Some((recipient, flow, wants)) = self.reply_flow(&to) {
                        let call_args = wants
                            .iter()
                            .map(|w| match *w {
                                "message" => values
                                    .get(1)
                                    .cloned()
                                    .unwrap_or(Json::String(String::new())),
                                "sender" => Json::String(agent_name.to_string()),
                                _ => values
                                    .get(2)
                                    .cloned()
                                    .unwrap_or(Json::String("message".into())),
                            })
                            .collect();
                        return Ok(self.call_flow(recipient, flow, call_args)?);
                    }
                }
                let body = values.get(1).cloned().unwrap_or(Json::Null);
                let protocol = values.get(2).map(text).unwrap_or_default();
                self.world
                    .outbox
                    .push((agent_name.to_string(), to, body, protocol));
                Ok(Json::Null)
            }
            "exec" | "exc" => {
                let values = self.args(frame, args)?;
                self.host
                    .exec(agent_name, &values, &CancelToken::new())
                    .map_err(|e| Unwind::Fail(OracleError::new(e.code, e.message)))
            }
            // A built-in tool called by name (the reference's style): its
            // arguments keyed by the tool schema's parameters.
            _ if ais_compiler::sema::builtins::builtin_tool_params(name).is_some() => {
                let params =
                    ais_compiler::sema::builtins::builtin_tool_params(name).unwrap_or_default();
                let mut object = serde_json::Map::new();
                let mut k = 0;
                for a in args {
                    match &a.kind {
                        ExprKind::Named(n, v) => {
                            object.insert(n.name.clone(), self.eval(frame, v)?);
                        }
                        _ => {
                            let key = params.get(k).cloned().unwrap_or_default();
                            k += 1;
                            object.insert(key, self.eval(frame, a)?);
                        }
                    }
                }
                self.tool(agent_name, name, &Json::Object(object))
            }
            _ => {
                let values = self.ordered_args(frame, agent, name, args)?;
                let is_flow = agent
                    .members
                    .iter()
                    .any(|m| matches!(m, Member::Flow(f) if f.name.name == name));
                if is_flow {
                    self.call_named_flow(agent, name, values)
                } else {
                    self.capability(agent, name, values)
                }
            }
        }
    }

    /// A declared capability called directly: the tool gets an object of
    /// the declared parameter names.
    fn capability(&mut self, agent: &'p Agent, name: &str, values: Vec<Json>) -> Eval<Json> {
        let Some(cap) = agent.members.iter().find_map(|m| match m {
            Member::Capability(c) if c.name.name == name => Some(c),
            _ => None,
        }) else {
            return fail("oracle.call", format!("unknown operation `{name}`"));
        };
        let object: serde_json::Map<String, Json> = cap
            .params
            .iter()
            .map(|p| p.name.name.clone())
            .zip(values)
            .collect();
        self.tool(&agent.name.name, name, &Json::Object(object))
    }

    fn tool(&mut self, agent: &str, tool: &str, args: &Json) -> Eval<Json> {
        self.host
            .invoke_tool(agent, tool, args, &CancelToken::new())
            .map_err(|e| Unwind::Fail(OracleError::new(e.code, e.message)))
    }

    /// An LLM op: the first value is the prompt, the others context blocks
    /// labelled with the variable or field each context argument names
    /// (`labels`, `None` for another expression: then `context N` by
    /// position); structured ops ask for their schema.
    fn llm(
        &mut self,
        agent: &str,
        kind: LlmOpKind,
        values: Vec<Json>,
        labels: Vec<Option<String>>,
        options: CallOptions,
    ) -> Eval<Json> {
        let mut values = values.into_iter();
        let prompt = values.next().map(|v| text(&v)).unwrap_or_default();
        let context = values
            .enumerate()
            .map(|(i, v)| ContextBlock {
                label: labels
                    .get(i)
                    .cloned()
                    .flatten()
                    .unwrap_or_else(|| format!("context {}", i + 1)),
                text: text(&v),
            })
            .collect();
        let request = LlmRequest {
            cache: Default::default(),
            kind,
            agent: agent.to_string(),
            system: options.system,
            prompt,
            context,
            model: options.model,
            temperature: options.temperature,
            max_tokens: options.max_tokens,
            json_schema: options.schema.or_else(|| schema_for(kind)),
            budget_tokens: options.budget_tokens,
            backend: options.backend,
            tools: Vec::new(),
            turns: Vec::new(),
            on_text: None,
            critical: false,
            attained: Default::default(),
        };
        let response = self
            .backend
            .complete(&request, &CancelToken::new())
            .map_err(|e| {
                Unwind::Fail(OracleError::new(
                    format!("llm.{}", kind_code(&e)),
                    e.to_string(),
                ))
            })?;
        if request.json_schema.is_none() {
            return Ok(Json::String(response.text));
        }
        match response.json {
            Some(j) => Ok(j),
            None => serde_json::from_str(&response.text)
                .map_err(|e| Unwind::Fail(OracleError::new("llm.invalid_response", e.to_string()))),
        }
    }
}

fn kind_code(e: &ais_vm::llm::LlmError) -> String {
    serde_json::to_value(e.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "error".into())
}

/// docs/language.md: a context argument that is a variable or a field of
/// one (`report`, `r.summary`) labels its block with that name.
fn context_label(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Var(id) => Some(id.name.clone()),
        ExprKind::Member(base, field) => context_label(base).map(|b| format!("{b}.{}", field.name)),
        _ => None,
    }
}
