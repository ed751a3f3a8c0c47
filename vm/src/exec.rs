//! Op semantics, shared by the dataflow VM and the reference interpreter so
//! that both compute the same thing; only the scheduling differs.

use crate::host::{Host, Message};
use crate::llm::{schema, CancelToken, ContextBlock, LlmError, LlmOpKind, LlmRequest, LlmResponse};
use crate::value::Val;
use ais_ir::bytecode::{FlowCode, Imm, Instr, Program, RegionKind};
use ais_ir::Opcode;
use serde_json::{json, Value as Json};
use smallvec::{smallvec, SmallVec};
use std::sync::Arc;

/// Results of one op.
pub type Results = SmallVec<[Val; 2]>;

/// A failed op, before it is located (flow, op, span) by the caller.
#[derive(Clone, Debug, PartialEq)]
pub struct OpError {
    /// Dotted code: `llm.server`, `tool.unknown`, `type.not_number`, ...
    pub code: String,
    pub message: String,
    pub payload: Json,
}

impl OpError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> OpError {
        OpError {
            code: code.into(),
            message: message.into(),
            payload: Json::Null,
        }
    }

    fn ty(what: &str, v: &Val) -> OpError {
        OpError::new(
            format!("type.not_{what}"),
            format!("expected {what}, got {} `{}`", v.kind(), short(&v.text())),
        )
    }

    /// The structured error value a `catch` region receives.
    pub fn to_value(&self, program: &Program, flow: u32, instr: &Instr) -> Val {
        Val::from_json(json!({
            "code": self.code,
            "message": self.message,
            "op": instr.opcode.mnemonic(),
            "flow": program.flow_name(flow),
            "span": {"start": instr.span.start, "end": instr.span.end},
            "payload": self.payload,
            "hint": crate::error::hint_for(&self.code),
        }))
    }
}

impl From<LlmError> for OpError {
    fn from(e: LlmError) -> OpError {
        let kind = serde_json::to_value(e.kind)
            .ok()
            .and_then(|k| k.as_str().map(str::to_string))
            .unwrap_or_else(|| "error".into());
        OpError {
            code: format!("llm.{kind}"),
            message: e.to_string(),
            payload: serde_json::to_value(&e).unwrap_or(Json::Null),
        }
    }
}

impl From<crate::host::HostError> for OpError {
    fn from(e: crate::host::HostError) -> OpError {
        OpError {
            code: e.code,
            message: e.message,
            payload: e.payload,
        }
    }
}

fn short(s: &str) -> String {
    if s.chars().count() > 60 {
        let head: String = s.chars().take(57).collect();
        format!("{head}...")
    } else {
        s.to_string()
    }
}

/// Where an op runs: the op table's [`ais_ir::ExecClass`].
pub use ais_ir::ExecClass as Class;

pub fn class(op: Opcode) -> Class {
    op.info().exec
}

/// The LLM operation `op` is (`None` for any other op); from the op table.
pub fn llm_kind(op: Opcode) -> Option<LlmOpKind> {
    op.info().llm
}

fn num(v: &Val) -> Result<f64, OpError> {
    v.as_num().ok_or_else(|| OpError::ty("number", v))
}

fn boolean(v: &Val) -> Result<bool, OpError> {
    v.as_bool().ok_or_else(|| OpError::ty("bool", v))
}

fn arg(args: &[Val], i: usize) -> Result<&Val, OpError> {
    args.get(i)
        .ok_or_else(|| OpError::new("internal.operand", format!("missing operand {i}")))
}

/// Fills `{N}` placeholders with the text of operand `N`; `{{` and `}}` are
/// literal braces; anything else (including `{name}` or an out-of-range
/// `{N}`) stays literal.
pub fn fill_template(t: &str, args: &[Val]) -> String {
    let mut out = String::with_capacity(t.len());
    let mut rest = t;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
            continue;
        }
        if let Some(r) = tail.strip_prefix('}') {
            out.push('}');
            rest = r;
            continue;
        }
        let after = &tail[1..];
        let hole = after.find('}').and_then(|j| {
            let digits = &after[..j];
            let ok = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
            ok.then(|| digits.parse::<usize>().ok().and_then(|n| args.get(n)))
                .flatten()
                .map(|v| (v, j))
        });
        match hole {
            Some((v, j)) => {
                out.push_str(&v.text());
                rest = &after[j + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Truthiness: `false`, `null`, `0`, `""`, `[]` and `{}` are false.
pub fn truthy(v: &Val) -> bool {
    match v {
        Val::Null | Val::Ord => false,
        Val::Bool(b) => *b,
        Val::Num(n) => *n != 0.0,
        Val::Str(s) => !s.is_empty(),
        Val::List(xs) => !xs.is_empty(),
        Val::Json(j) => match &**j {
            Json::Null => false,
            Json::Bool(b) => *b,
            Json::Number(n) => n.as_f64() != Some(0.0),
            Json::String(s) => !s.is_empty(),
            Json::Array(a) => !a.is_empty(),
            Json::Object(o) => !o.is_empty(),
        },
    }
}

/// Does `v` have type `t`? (`null` fits everything; dynamic types accept all.)
pub fn fits(v: &Val, t: &ais_ir::Type) -> bool {
    use ais_ir::Type;
    match (t, v) {
        (_, Val::Null) => true,
        (Type::Json | Type::Opaque(_), _) => !matches!(v, Val::Ord),
        (Type::Str, Val::Str(_)) | (Type::Number, Val::Num(_)) | (Type::Bool, Val::Bool(_)) => true,
        (Type::Ord, Val::Ord) => true,
        (Type::List(e), _) => v.items().is_some_and(|xs| xs.iter().all(|x| fits(x, e))),
        _ => false,
    }
}

fn compare(a: &Val, b: &Val) -> Result<std::cmp::Ordering, OpError> {
    if let (Some(x), Some(y)) = (a.as_num(), b.as_num()) {
        return x
            .partial_cmp(&y)
            .ok_or_else(|| OpError::new("type.nan", "cannot compare NaN"));
    }
    match (a, b) {
        (Val::Str(x), Val::Str(y)) => Ok(x.cmp(y)),
        _ => Err(OpError::new(
            "type.not_comparable",
            format!(
                "cannot order {} `{}` and {} `{}` (numbers with numbers, text with text)",
                a.kind(),
                short(&a.text()),
                b.kind(),
                short(&b.text())
            ),
        )),
    }
}

/// Evaluates a pure op on its data operands.
pub fn eval_pure(program: &Program, instr: &Instr, args: &[Val]) -> Result<Val, OpError> {
    use Opcode as O;
    let bin = |f: fn(f64, f64) -> Result<f64, OpError>| -> Result<Val, OpError> {
        Ok(Val::Num(f(num(arg(args, 0)?)?, num(arg(args, 1)?)?)?))
    };
    let cmp = |f: fn(std::cmp::Ordering) -> bool| -> Result<Val, OpError> {
        Ok(Val::Bool(f(compare(arg(args, 0)?, arg(args, 1)?)?)))
    };
    Ok(match instr.opcode {
        O::Const => match &instr.imm {
            Imm::Const(c) => program
                .consts
                .get(*c as usize)
                .and_then(|c| c.to_json())
                .map(Val::from_json)
                .ok_or_else(|| OpError::new("internal.const", "bad constant"))?,
            _ => return Err(OpError::new("internal.const", "bad constant")),
        },
        O::Template => match &instr.imm {
            Imm::Template(t) => Val::str(fill_template(t, args)),
            _ => return Err(OpError::new("internal.template", "bad template")),
        },
        O::Concat => {
            let mut s = String::new();
            for a in args {
                s.push_str(&a.text());
            }
            Val::str(s)
        }
        O::Merge => Val::str(args.iter().map(Val::text).collect::<Vec<_>>().join("\n\n")),
        // A list of the values themselves (shared, not copied into JSON):
        // it reads, prints and indexes like the JSON array it stands for.
        O::WaitAll => Val::List(Arc::from(args.to_vec())),
        O::List => Val::List(Arc::from(args.to_vec())),
        O::Index => {
            let c = arg(args, 0)?;
            let i = arg(args, 1)?;
            index(c, i)?
        }
        O::Member => {
            let Imm::Field(f) = &instr.imm else {
                return Err(OpError::new("internal.member", "bad field"));
            };
            member(arg(args, 0)?, f)?
        }
        O::Add => bin(|a, b| Ok(a + b))?,
        O::Sub => bin(|a, b| Ok(a - b))?,
        O::Mul => bin(|a, b| Ok(a * b))?,
        O::Div => bin(|a, b| {
            if b == 0.0 {
                Err(OpError::new("arith.div_by_zero", "division by zero"))
            } else {
                Ok(a / b)
            }
        })?,
        O::Mod => bin(|a, b| {
            if b == 0.0 {
                Err(OpError::new("arith.div_by_zero", "remainder by zero"))
            } else {
                Ok(a % b)
            }
        })?,
        O::Neg => Val::Num(-num(arg(args, 0)?)?),
        O::Eq => Val::Bool(arg(args, 0)?.same(arg(args, 1)?)),
        O::Ne => Val::Bool(!arg(args, 0)?.same(arg(args, 1)?)),
        O::Lt => cmp(|o| o.is_lt())?,
        O::Le => cmp(|o| o.is_le())?,
        O::Gt => cmp(|o| o.is_gt())?,
        O::Ge => cmp(|o| o.is_ge())?,
        O::And => Val::Bool(boolean(arg(args, 0)?)? && boolean(arg(args, 1)?)?),
        O::Or => Val::Bool(boolean(arg(args, 0)?)? || boolean(arg(args, 1)?)?),
        O::Not => Val::Bool(!boolean(arg(args, 0)?)?),
        O::ToStr => Val::str(arg(args, 0)?.text()),
        O::ToBool => Val::Bool(truthy(arg(args, 0)?)),
        O::Object => {
            let Imm::Keys(keys) = &instr.imm else {
                return Err(OpError::new("internal.object", "bad keys"));
            };
            let m: serde_json::Map<String, Json> = keys
                .iter()
                .zip(args)
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect();
            Val::Json(Arc::new(Json::Object(m)))
        }
        O::Cast => {
            let Imm::Cast(t) = &instr.imm else {
                return Err(OpError::new("internal.cast", "bad cast"));
            };
            let ty = program.type_of(*t);
            let v = arg(args, 0)?;
            if !fits(v, &ty) {
                return Err(OpError::new(
                    "type.cast",
                    format!("expected {ty}, got {} `{}`", v.kind(), short(&v.text())),
                )
                .with_payload(json!({"expected": ty.to_string(), "value": v.to_json()})));
            }
            v.clone()
        }
        other => {
            return Err(OpError::new(
                "internal.not_pure",
                format!("`{other}` is not a pure op"),
            ))
        }
    })
}

fn index(c: &Val, i: &Val) -> Result<Val, OpError> {
    let oob = |n: f64, len: usize| {
        OpError::new(
            "index.out_of_range",
            format!("index {n} out of range (length {len})"),
        )
    };
    match (c, i) {
        (Val::List(xs), _) => {
            let n = num(i)?;
            if n < 0.0 || n.fract() != 0.0 || n as usize >= xs.len() {
                return Err(oob(n, xs.len()));
            }
            Ok(xs[n as usize].clone())
        }
        (Val::Json(j), _) => match (&**j, i) {
            (Json::Array(xs), _) => {
                let n = num(i)?;
                if n < 0.0 || n.fract() != 0.0 || n as usize >= xs.len() {
                    return Err(oob(n, xs.len()));
                }
                Ok(Val::from_json(xs[n as usize].clone()))
            }
            (Json::Object(m), key) => Ok(m
                .get(&key.text())
                .cloned()
                .map(Val::from_json)
                .unwrap_or(Val::Null)),
            _ => Err(OpError::ty("list", c)),
        },
        (Val::Str(s), _) => {
            // Strings index by character.
            let n = num(i)?;
            let len = s.chars().count();
            if n < 0.0 || n.fract() != 0.0 || n as usize >= len {
                return Err(oob(n, len));
            }
            Ok(Val::str(
                s.chars()
                    .nth(n as usize)
                    .map(String::from)
                    .unwrap_or_default(),
            ))
        }
        _ => Err(OpError::ty("list", c)),
    }
}

fn member(v: &Val, field: &str) -> Result<Val, OpError> {
    match v {
        Val::Json(j) => match &**j {
            Json::Object(m) => Ok(m
                .get(field)
                .cloned()
                .map(Val::from_json)
                .unwrap_or(Val::Null)),
            _ => Err(OpError::ty("object", v)),
        },
        // An LLM reply may hold JSON text.
        Val::Str(s) => match serde_json::from_str::<Json>(s) {
            Ok(Json::Object(m)) => Ok(m
                .get(field)
                .cloned()
                .map(Val::from_json)
                .unwrap_or(Val::Null)),
            _ => Err(OpError::ty("object", v)),
        },
        _ => Err(OpError::ty("object", v)),
    }
}

/// The message a `communicate` op's operands `(to, body, protocol)` make.
pub fn message_of(from: &str, args: &[Val]) -> Message {
    let text = |i: usize| args.get(i).map(Val::text).unwrap_or_default();
    Message {
        from: from.to_string(),
        to: text(0),
        body: args.get(1).map_or(Json::Null, Val::to_json),
        protocol: text(2),
    }
}

/// The code a run stops with at a `pause` (not catchable: see
/// `scheduler::limits::is_fatal`).
pub const PAUSED: &str = "run.paused";

/// Runs a quick host effect.
pub fn exec_inline(
    host: &dyn Host,
    agent: &str,
    instr: &Instr,
    args: &[Val],
) -> Result<Results, OpError> {
    use Opcode as O;
    let tier = || match &instr.imm {
        Imm::Tier(t) | Imm::Query { tier: t, .. } => Ok(t.tier()),
        _ => Err(OpError::new("internal.tier", "bad tier")),
    };
    let belief = || match &instr.imm {
        Imm::Belief(n) => Ok(n.as_str()),
        _ => Err(OpError::new("internal.belief", "bad belief")),
    };
    Ok(match instr.opcode {
        O::Qmem => {
            let mut r = host.mem_query(agent, tier()?, &arg(args, 0)?.to_json())?;
            if let (Imm::Query { limit: Some(l), .. }, Json::Array(xs)) = (&instr.imm, &mut r) {
                let keep = usize::try_from(*l).unwrap_or(usize::MAX);
                let cut = xs.len().saturating_sub(keep);
                xs.drain(..cut);
            }
            smallvec![Val::from_json(r), Val::Ord]
        }
        O::Umem => {
            let key = args.get(1).map(Val::to_json);
            host.mem_update(agent, tier()?, &arg(args, 0)?.to_json(), key.as_ref())?;
            smallvec![Val::Ord]
        }
        O::BeliefGet => smallvec![Val::from_json(host.belief_get(agent, belief()?)?), Val::Ord],
        O::BeliefSet => {
            host.belief_set(agent, belief()?, &arg(args, 0)?.to_json())?;
            smallvec![Val::Ord]
        }
        O::Print => {
            let line = args.iter().map(Val::text).collect::<Vec<_>>().join(" ");
            host.print(agent, &line);
            smallvec![Val::Ord]
        }
        O::Communicate => {
            host.communicate(Message {
                from: agent.to_string(),
                to: arg(args, 0)?.text(),
                body: arg(args, 1)?.to_json(),
                protocol: arg(args, 2)?.text(),
            })?;
            smallvec![Val::Ord]
        }
        O::Fence => smallvec![Val::Ord],
        O::Guard => {
            if !truthy(arg(args, 0)?) {
                return Err(OpError::new("guard.failed", arg(args, 1)?.text()));
            }
            smallvec![Val::Ord]
        }
        // Reached only when no input was journaled for it (a resumed run
        // replays the input instead): the run stops here.
        O::Pause => {
            let message = arg(args, 0)?.text();
            match host.pause(agent, &message) {
                Some(answer) => smallvec![Val::from_json(answer), Val::Ord],
                None => {
                    return Err(OpError::new(PAUSED, format!("paused: {message}"))
                        .with_payload(serde_json::json!({ "message": message })))
                }
            }
        }
        other => {
            return Err(OpError::new(
                "internal.not_inline",
                format!("`{other}` is not an inline effect"),
            ))
        }
    })
}

/// The request an LLM op sends: the first operand is the prompt, the others
/// are context blocks, each labelled with the name of the variable it came
/// from, else `context 1`, `context 2`, ... by position.
pub fn llm_request(agent: &str, instr: &Instr, args: &[Val]) -> Result<LlmRequest, OpError> {
    let kind = llm_kind(instr.opcode).ok_or_else(|| {
        OpError::new(
            "internal.not_llm",
            format!("`{}` is not an LLM op", instr.opcode),
        )
    })?;
    let attrs = match &instr.imm {
        Imm::Llm(a) => Some(&**a),
        _ => None,
    };
    // Parsed once per program; an unreadable schema fails the op.
    let own_schema = match attrs.map(|a| a.schema_value()) {
        Some(Err(e)) => {
            return Err(OpError::new(
                "llm.invalid_schema",
                format!("`{}`'s schema: {e}", instr.opcode),
            ))
        }
        Some(Ok(s)) => s.cloned(),
        None => None,
    };
    Ok(LlmRequest {
        kind,
        agent: agent.to_string(),
        system: attrs.and_then(|a| a.system.clone()),
        prompt: args.first().map(Val::text).unwrap_or_default(),
        context: args
            .iter()
            .skip(1)
            .enumerate()
            .map(|(i, v)| ContextBlock {
                label: attrs
                    .and_then(|a| a.context.get(i))
                    .filter(|l| !l.is_empty())
                    .cloned()
                    .unwrap_or_else(|| format!("context {}", i + 1)),
                text: v.text(),
            })
            .collect(),
        model: attrs.and_then(|a| a.model.clone()),
        temperature: attrs.and_then(|a| a.temperature),
        max_tokens: attrs.and_then(|a| a.max_tokens),
        json_schema: own_schema.or_else(|| schema::schema_for(kind)),
        budget_tokens: attrs.and_then(|a| a.budget_tokens),
        backend: attrs.and_then(|a| a.backend.clone()),
        tools: attrs
            .map(|a| a.tools.iter().map(tool_spec).collect())
            .unwrap_or_default(),
        turns: Vec::new(),
        cache: attrs.map(cache_hints).unwrap_or_default(),
        on_text: None,
        critical: false,
    })
}

/// The op's prompt-cache hints (`cache_key:`, `cache_points:`; codegen
/// has checked the points' spelling).
fn cache_hints(a: &ais_ir::bytecode::LlmAttrs) -> crate::llm::CacheHints {
    crate::llm::CacheHints {
        key: a.cache_key.clone(),
        points: a
            .cache_points
            .iter()
            .filter_map(|p| crate::llm::CachePoint::parse(p))
            .collect(),
        prefix: a
            .cache_prefix
            .iter()
            .filter_map(|&n| usize::try_from(n).ok()?.checked_sub(1))
            .collect(),
    }
}

/// A tool as offered to the model. Parameters that are not valid JSON
/// (a hand-edited artifact) offer any object.
fn tool_spec(t: &ais_ir::bytecode::ToolDecl) -> crate::llm::ToolSpec {
    crate::llm::ToolSpec {
        name: t.name.clone(),
        description: t.description.clone(),
        parameters: serde_json::from_str(&t.parameters)
            .unwrap_or_else(|_| serde_json::json!({"type": "object"})),
    }
}

/// The most model turns an LLM op's tool-calling exchange may take.
pub fn max_steps(instr: &Instr) -> u32 {
    match &instr.imm {
        Imm::Llm(a) => a.max_steps.unwrap_or(DEFAULT_MAX_STEPS),
        _ => DEFAULT_MAX_STEPS,
    }
}

/// Rounds of repair a `solve` op gives a plan that fails to check.
pub fn repairs(instr: &Instr) -> u32 {
    match &instr.imm {
        Imm::Llm(a) => a.repairs.unwrap_or(DEFAULT_REPAIRS),
        _ => DEFAULT_REPAIRS,
    }
}

/// Repair rounds when a `solve` op sets no `repairs`.
pub const DEFAULT_REPAIRS: u32 = 2;

/// Model turns of a tool-calling exchange when the op sets no `max_steps`.
pub const DEFAULT_MAX_STEPS: u32 = 8;

/// Whether an LLM op offers its model tools (it then runs its exchange on
/// the agent lane, see `scheduler::tool_loop`).
pub fn offers_tools(instr: &Instr) -> bool {
    matches!(&instr.imm, Imm::Llm(a) if !a.tools.is_empty())
}

/// Whether an op asks the model for an inner plan (`solve`, see
/// `scheduler::inner_plan`).
pub fn plans(instr: &Instr) -> bool {
    instr.opcode.info().llm == Some(ais_ir::LlmKind::Solve)
}

/// Whether an LLM op holds an agent-lane thread for a multi-turn exchange
/// (tools, or an inner plan) instead of being one call.
pub fn on_agent_lane(instr: &Instr) -> bool {
    offers_tools(instr) || plans(instr)
}

/// The value of a finished LLM op.
pub fn llm_value(request: &LlmRequest, response: &LlmResponse) -> Result<Val, OpError> {
    if request.json_schema.is_none() {
        return Ok(Val::str(&response.text));
    }
    let value = match &response.json {
        Some(j) => j.clone(),
        None => serde_json::from_str::<Json>(&response.text).map_err(|e| {
            OpError::new(
                "llm.invalid_response",
                format!("the reply to `{}` is not JSON: {e}", request.kind.name()),
            )
        })?,
    };
    // A program's own `schema:` is checked here whatever the backend (the
    // quarantine relies on it: `ais_ir::ifc::Quarantine`); the built-in
    // ops' schemas are the backends' concern.
    if let Some(s) = request
        .json_schema
        .as_ref()
        .filter(|_| schema::schema_for(request.kind).is_none())
    {
        if let Err(e) = crate::llm::jsonschema::validate(s, &value) {
            return Err(OpError::new(
                "llm.invalid_response",
                format!(
                    "the reply to `{}` does not match its schema at {e}",
                    request.kind.name()
                ),
            ));
        }
    }
    Ok(Val::from_json(value))
}

/// A tool op's results: its value, then the `ord` token that orders it on
/// its provider's chain (the journal records only the value).
pub fn tool_results(instr: &Instr, v: Val) -> Results {
    let mut r: Results = smallvec![v];
    pad_ord(instr, &mut r);
    r
}

/// Appends the `ord` results an op has beyond the values it computed.
pub fn pad_ord(instr: &Instr, r: &mut Results) {
    while r.len() < instr.n_results as usize {
        r.push(Val::Ord);
    }
}

/// Runs a tool op (blocking; called on an I/O thread).
pub fn exec_tool(
    host: &dyn Host,
    agent: &str,
    instr: &Instr,
    args: &[Val],
    cancel: &CancelToken,
    idempotency_key: Option<&str>,
) -> Result<Val, OpError> {
    let r = match (&instr.opcode, &instr.imm) {
        (Opcode::Inv, Imm::Tool(t)) => {
            host.invoke_tool_keyed(agent, t, &arg(args, 0)?.to_json(), cancel, idempotency_key)?
        }
        (Opcode::Exec, _) => {
            let js: Vec<Json> = args.iter().map(Val::to_json).collect();
            host.exec(agent, &js, cancel)?
        }
        _ => return Err(OpError::new("internal.tool", "bad tool op")),
    };
    Ok(Val::from_json(r))
}

/// The region an `if` / `switch` takes (index into the flow's regions).
pub fn select_branch(flow: &FlowCode, instr: &Instr, cond: &Val) -> Result<u32, OpError> {
    let regions = &instr.regions;
    let pick = |i: usize| {
        regions
            .get(i)
            .copied()
            .ok_or_else(|| OpError::new("internal.region", "missing region"))
    };
    match instr.opcode {
        Opcode::If => pick(if boolean(cond)? { 0 } else { 1 }),
        Opcode::Switch => {
            let key = cond.text();
            let mut default = None;
            // An exact match wins; otherwise the first case the value
            // matches loosely (an LLM's "Billing." picks case "billing").
            let mut loose = None;
            for (i, &r) in regions.iter().enumerate() {
                match flow.regions.get(r as usize).map(|c| &c.kind) {
                    Some(RegionKind::Case(k)) if *k == key => return Ok(r),
                    Some(RegionKind::Case(k)) if loose.is_none() && case_matches(k, &key) => {
                        loose = Some(r)
                    }
                    Some(RegionKind::Default) => default = Some(i),
                    _ => {}
                }
            }
            if let Some(r) = loose {
                return Ok(r);
            }
            match default {
                Some(i) => pick(i),
                None => Err(OpError::new(
                    "switch.no_match",
                    format!(
                        "no case matches \"{}\" and there is no default",
                        short(&key)
                    ),
                )
                .with_payload(json!({"value": cond.to_json()}))),
            }
        }
        other => Err(OpError::new(
            "internal.branch",
            format!("`{other}` does not branch"),
        )),
    }
}

/// Loose case matching for text produced by models: ignoring case, surrounding
/// whitespace, quotes, markdown emphasis and trailing punctuation, the value
/// equals the case, or starts with it followed by a non-word character
/// (`"bug: crash on save"` matches `bug`).
pub fn case_matches(case: &str, value: &str) -> bool {
    fn norm(s: &str) -> String {
        s.trim()
            .trim_matches(|c: char| {
                c.is_whitespace()
                    || matches!(
                        c,
                        '"' | '\'' | '`' | '*' | '_' | '.' | '!' | '?' | ',' | ';' | ':'
                    )
            })
            .to_lowercase()
    }
    let (c, v) = (norm(case), norm(value));
    if c.is_empty() {
        return v.is_empty();
    }
    v == c
        || v.strip_prefix(c.as_str())
            .is_some_and(|rest| rest.starts_with(|ch: char| !ch.is_alphanumeric() && ch != '_'))
}

impl OpError {
    pub fn with_payload(mut self, payload: Json) -> OpError {
        self.payload = payload;
        self
    }
}

/// The items a `loop` iterates over, bounded by `max_iters`. A string is
/// iterated as the JSON array it holds, else as its non-empty lines.
pub fn loop_items(instr: &Instr, list: &Val) -> Result<Vec<Val>, OpError> {
    let text = match list {
        Val::Str(s) => Some(s.as_ref()),
        Val::Json(j) => j.as_str(),
        _ => None,
    };
    let mut items = match text {
        Some(s) => match serde_json::from_str::<Json>(s) {
            Ok(Json::Array(a)) => a.into_iter().map(Val::from_json).collect(),
            _ => s
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| Val::Str(l.into()))
                .collect(),
        },
        None => list.items().ok_or_else(|| OpError::ty("list", list))?,
    };
    if let Imm::Loop { max_iters: Some(m) } = instr.imm {
        items.truncate(usize::try_from(m).unwrap_or(usize::MAX));
    }
    Ok(items)
}

/// Results of a `flow.call` from the callee's returned value.
pub fn call_results(instr: &Instr, returned: Option<Val>) -> Results {
    let mut out = Results::new();
    let n = instr.n_results as usize;
    if let Some(v) = returned {
        if out.len() < n {
            out.push(v);
        }
    }
    while out.len() < n {
        out.push(Val::Ord);
    }
    out
}

/// Entry-flow arguments by parameter name, converted to the parameter types:
/// a `number` parameter accepts a number or numeric text, `bool` a boolean or
/// `true`/`false`, `str` any scalar (as text), `list<T>` an array or JSON
/// array text, `json` and named types anything (text that parses as JSON is
/// parsed).
pub fn entry_args(
    program: &Program,
    flow: u32,
    args: &[(String, Json)],
) -> Result<Vec<Val>, crate::RunError> {
    use ais_ir::Type;
    let bad = |m: String| crate::RunError::Argument(m);
    let f = program
        .flows
        .get(flow as usize)
        .ok_or_else(|| bad(format!("no flow {flow}")))?;
    for (name, _) in args {
        if !f.params.iter().any(|(p, _)| p == name) {
            let known: Vec<&str> = f.params.iter().map(|(p, _)| p.as_str()).collect();
            return Err(bad(format!(
                "@{} has no parameter `{name}` (parameters: {})",
                program.flow_name(flow),
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )));
        }
    }
    let mut out = Vec::with_capacity(f.params.len());
    for (name, t) in &f.params {
        let ty = program.type_of(*t);
        let Some((_, v)) = args.iter().rev().find(|(n, _)| n == name) else {
            return Err(bad(format!(
                "missing argument `{name}: {ty}` for @{} (pass --arg {name}=VALUE)",
                program.flow_name(flow)
            )));
        };
        let mismatch = || bad(format!("argument `{name}` must be {ty}, got {v}"));
        let parsed = |s: &str| serde_json::from_str::<Json>(s).ok();
        let val = match (&ty, v) {
            (Type::Str, Json::String(s)) => Val::str(s),
            (Type::Str, Json::Number(_) | Json::Bool(_)) => Val::str(v.to_string()),
            (Type::Number, Json::Number(n)) => Val::Num(n.as_f64().unwrap_or(0.0)),
            (Type::Number, Json::String(s)) => Val::Num(
                s.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(mismatch)?,
            ),
            (Type::Bool, Json::Bool(b)) => Val::Bool(*b),
            (Type::Bool, Json::String(s)) if s == "true" || s == "false" => Val::Bool(s == "true"),
            (Type::Null, Json::Null) => Val::Null,
            (Type::List(_), Json::Array(_)) => Val::from_json(v.clone()),
            (Type::List(_), Json::String(s)) => match parsed(s) {
                Some(j @ Json::Array(_)) => Val::from_json(j),
                _ => return Err(mismatch()),
            },
            (Type::Json | Type::Opaque(_), Json::String(s)) => {
                Val::from_json(parsed(s).unwrap_or_else(|| v.clone()))
            }
            (Type::Json | Type::Opaque(_), _) => Val::from_json(v.clone()),
            _ => return Err(mismatch()),
        };
        out.push(val);
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {

    #[test]
    fn loose_case_matching_for_model_text() {
        assert!(case_matches("billing", "Billing."));
        assert!(case_matches("billing", "  **billing**\n"));
        assert!(case_matches("bug", "bug: crash on save"));
        assert!(case_matches("short", "\"Short\""));
        assert!(!case_matches("bug", "debugging"));
        assert!(!case_matches("bug", "bugfix"));
        assert!(!case_matches("billing", "other"));
        assert!(case_matches("", "  "));
    }
    use super::*;

    #[test]
    fn templates_fill_numbered_holes_only() {
        let args = [Val::str("x"), Val::Num(2.0)];
        assert_eq!(
            fill_template("a {0} b {1} {2} {x} {", &args),
            "a x b 2 {2} {x} {"
        );
        assert_eq!(fill_template("{{\"k\": {0}}}", &args), "{\"k\": x}");
        assert_eq!(fill_template("}} {{0}} {1}", &args), "} {0} 2");
    }

    #[test]
    fn index_and_member() {
        let j = Val::from_json(json!({"a": [1, 2], "b": "t"}));
        assert_eq!(member(&j, "b").unwrap(), Val::str("t"));
        assert_eq!(member(&j, "zz").unwrap(), Val::Null);
        let a = member(&j, "a").unwrap();
        assert_eq!(index(&a, &Val::Num(1.0)).unwrap(), Val::Num(2.0));
        assert_eq!(
            index(&a, &Val::Num(5.0)).unwrap_err().code,
            "index.out_of_range"
        );
        assert_eq!(
            member(&Val::Num(1.0), "a").unwrap_err().code,
            "type.not_object"
        );
    }
}
