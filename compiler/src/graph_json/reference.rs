//! The reference's attribute forms, expanded into our ops. A node written
//! the reference's way (its prompt in `template_str`, its tool in
//! `capability`, its memory key in `key`, its guard condition as text ...)
//! becomes the ops that compute the operands those attributes stand for.
//! Which names each op takes is [`reference_attrs`]; docs/graph-json.md
//! lists what each becomes. The reference's ops that have no counterpart
//! in our IR are `refonly.rs`.

use super::build::{Build, DataIn};
use ais_ir::{Attr, Opcode, Type, Value};
use serde_json::Value as Json;

type Attrs = indexmap::IndexMap<String, Json>;

/// What an expansion produced: either the op itself, with its operands and
/// attributes, or the node's values computed by other ops.
pub enum Expanded {
    Op {
        operands: Vec<Value>,
        attrs: Vec<(String, Attr)>,
    },
    Values(Vec<Value>),
}

/// Reference attribute names that are ours under another name (the op
/// table's).
pub fn renamed(name: &str) -> &str {
    ais_ir::ops::REFERENCE_LLM_RENAMES
        .iter()
        .find(|(r, _)| *r == name)
        .map_or(name, |(_, ours)| ours)
}

/// Attributes the reference's LLM nodes carry that configure its own
/// runtime (provider selection, retries, inner plans): read and not used
/// here, where the backend configuration decides (docs/graph-json.md).
pub const LLM_RUNTIME_ONLY: &[&str] = &[
    "provider",
    "api_key",
    "base_url",
    "max_retries",
    "max_schema_retries",
    "inner_plan_supported",
    "enable_inner_plan",
    "bind_inner_plan_outputs",
    "tools_enabled",
    "tools_config",
    "history_limit",
    "context_key",
    "handoff_targets",
];

/// The reference's attribute names of an op we have (the op table's).
pub fn reference_attrs(op: Opcode) -> &'static [&'static str] {
    op.reference_attrs()
}

/// Whether a node uses the reference's attribute forms.
pub fn applies(op: Opcode, attrs: &Attrs) -> bool {
    reference_attrs(op).iter().any(|k| attrs.contains_key(*k))
}

/// The first attribute the reference's op definitions require of a node
/// of op `written` that has none of its op's reference attributes.
pub fn missing_required(written: &str, attrs: &Attrs) -> Option<&'static str> {
    let op = Opcode::from_graph_name(written)?;
    if applies(op, attrs) {
        return None;
    }
    ais_ir::ops::reference_required(written)?
        .iter()
        .copied()
        .find(|k| !attrs.contains_key(*k))
}

/// A string attribute, or why it is not one.
pub fn text(attrs: &Attrs, k: &str) -> Result<Option<String>, String> {
    match attrs.get(k) {
        None => Ok(None),
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(format!("`{k}` must be a string, not {v}")),
    }
}

fn first_text(attrs: &Attrs, keys: &[&str]) -> Result<Option<String>, String> {
    for k in keys {
        if let Some(t) = text(attrs, k)? {
            return Ok(Some(t));
        }
    }
    Ok(None)
}

/// A non-negative integer attribute.
pub fn count(attrs: &Attrs, k: &str) -> Result<Option<f64>, String> {
    match attrs.get(k) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            .map(|n| Some(n as f64))
            .ok_or_else(|| format!("`{k}` must be a whole number, not {v}")),
    }
}

pub fn expand(
    op: Opcode,
    attrs: &Attrs,
    b: &mut Build<'_>,
    inputs: DataIn,
) -> Result<Expanded, String> {
    use Opcode as O;
    let DataIn { data, tokens } = inputs;
    let with_tokens = |mut v: Vec<Value>| {
        v.extend(tokens.iter().copied());
        v
    };
    let plain = |operands: Vec<Value>| Expanded::Op {
        operands,
        attrs: Vec::new(),
    };
    Ok(match op {
        _ if op.info().llm.is_some() => {
            let (prompt, extra) = llm_prompt(op, attrs)?;
            // Only `template_str`/`prompt` are the reference's prompt form;
            // `goal`, `claim`, ... are texts whose `{{node_N}}` name inputs.
            let mut operands = if first_text(attrs, &["template_str", "prompt"])?.is_some() {
                b.prompt(&prompt, &data)
            } else {
                let mut v = vec![b.text(&prompt, &data)];
                v.extend(data.iter().filter(|d| !b.used(d)).map(|d| d.value));
                v
            };
            for e in extra {
                let v = b.text(&e, &data);
                operands.push(v);
            }
            let mut out = Vec::new();
            if op == O::Reason && attrs.get("structured") == Some(&Json::Bool(true)) {
                out.push((
                    "schema".to_string(),
                    Attr::Json(serde_json::json!({"type": "object"})),
                ));
            }
            Expanded::Op {
                operands: with_tokens(operands),
                attrs: out,
            }
        }
        O::Inv => {
            let tool = text(attrs, "capability")?.unwrap_or_default();
            let args = tool_args(attrs, b, &data)?;
            // `timeout_ms` is ours per tool, in the configuration.
            let out = vec![("tool".to_string(), Attr::Str(tool))];
            Expanded::Op {
                operands: with_tokens(vec![args]),
                attrs: out,
            }
        }
        O::Exec => match text(attrs, "code")? {
            // The reference's `EXC` runs `code` in its sandbox: here the
            // confined `bash` tool (denied unless allowed), the code its
            // command; the value is bash's `{exit_code, stdout, stderr,
            // truncated}`. Without `code`, ours: the tool its input names.
            Some(c) => {
                let code = b.text(&c, &data);
                let args = b.object(vec![Json::String("command".into())], &[code]);
                let vs = b.op(
                    Opcode::Inv,
                    &with_tokens(vec![args]),
                    &[Type::Json, Type::Ord],
                    vec![("tool".to_string(), Attr::Str("bash".into()))],
                );
                Expanded::Values(vs)
            }
            None => match data.first() {
                Some(d) => plain(with_tokens(vec![d.value])),
                None => return Err("`EXC` needs `code` or an input".into()),
            },
        },
        O::Qmem | O::Umem => {
            let tier = first_text(attrs, &["memory_tier", "space"])?
                .map(|t| t.to_ascii_lowercase())
                .unwrap_or_else(|| "stm".into());
            if ais_ir::Tier::parse(&tier).is_none() {
                return Err(format!(
                    "`{tier}` is not a memory tier (stm, ltm or episodic)"
                ));
            }
            let operands = if op == O::Qmem {
                match text(attrs, "query")? {
                    Some(q) => vec![b.text(&q, &data)],
                    None => data.iter().map(|d| d.value).take(1).collect(),
                }
            } else {
                let value = match (data.first(), attrs.get("value")) {
                    (Some(d), _) => d.value,
                    (None, Some(Json::String(s))) => b.text(s, &data),
                    (None, Some(v)) => b.konst(Attr::Json(v.clone()), Type::Json),
                    (None, None) => return Err("`UMEM` needs `value` or an input".into()),
                };
                let mut v = vec![value];
                if let Some(k) = text(attrs, "key")? {
                    v.push(b.konst(Attr::Str(k), Type::Str));
                }
                v
            };
            Expanded::Op {
                operands: with_tokens(operands),
                attrs: vec![("tier".to_string(), Attr::Str(tier))],
            }
        }
        O::Print => {
            let mut operands = Vec::new();
            if let Some(m) = text(attrs, "message")? {
                operands.push(b.text(&m, &data));
            }
            operands.extend(data.iter().filter(|d| !b.used(d)).map(|d| d.value));
            plain(with_tokens(operands))
        }
        O::Return | O::Yield | O::WaitAll | O::Fence => {
            // `token`/`value`/`tokens` name what the edges carry; `ordering`
            // is at most what our fence does (it orders everything).
            let operands: Vec<Value> = data.iter().map(|d| d.value).collect();
            if op == O::WaitAll && operands.is_empty() {
                // The reference's merge node: only `Control` edges in.
                let v = b.konst(Attr::Json(Json::Array(Vec::new())), Type::Json);
                return Ok(Expanded::Values(vec![v]));
            }
            plain(with_tokens(operands))
        }
        O::Merge => merge(attrs, b, &data)?,
        O::Communicate => {
            let to = first_text(attrs, &["target_agent", "recipient", "target"])?
                .ok_or("`COMMUNICATE` needs `target_agent` (or `recipient`)")?;
            let to = b.konst(Attr::Str(to), Type::Str);
            let message = match text(attrs, "message")? {
                Some(m) => b.text(&m, &data),
                None => match data.first() {
                    Some(d) => d.value,
                    None => b.konst(Attr::Str(String::new()), Type::Str),
                },
            };
            let protocol = text(attrs, "protocol")?.unwrap_or_else(|| "message".into());
            let protocol = b.konst(Attr::Str(protocol), Type::Str);
            plain(with_tokens(vec![to, message, protocol]))
        }
        O::Guard => guard(attrs, b, &data, &tokens)?,
        O::Pause => {
            let message = text(attrs, "message")?.unwrap_or_default();
            let mut t = super::build::escape(&message);
            let holes = b.holes(&message, &data);
            if holes.is_none() {
                for k in 0..data.len() {
                    t.push_str(&format!("\n\n{{{k}}}"));
                }
            }
            let m = match holes {
                Some(v) => v,
                None if data.is_empty() => b.konst(Attr::Str(message), Type::Str),
                None => {
                    let vs: Vec<Value> = data.iter().map(|d| d.value).collect();
                    b.template(t, &vs)
                }
            };
            plain(with_tokens(vec![m]))
        }
        O::FlowCall => {
            let agent = text(attrs, "agent_name")?.ok_or("`FLOW_CALL` needs `agent_name`")?;
            let flow = text(attrs, "flow_name")?.ok_or("`FLOW_CALL` needs `flow_name`")?;
            // `args` (the callee's arguments in order; `{{node_N}}` is that
            // input) says what the call passes when it is given; else the
            // data inputs are the arguments. (The reference's runtime
            // passes its inputs; its generator writes `args` beside the
            // edges that carry them.)
            let operands: Vec<Value> = match attrs.get("args") {
                Some(Json::Object(args)) if !args.is_empty() => {
                    args.values().map(|v| b.json(v, &data)).collect()
                }
                _ => data.iter().map(|d| d.value).collect(),
            };
            Expanded::Op {
                operands: with_tokens(operands),
                attrs: vec![("callee".to_string(), Attr::Symbol { agent, flow })],
            }
        }
        O::TryCatch => {
            // Without `regions`: the reference runs the named subgraphs as
            // ordinary nodes; its TRY_CATCH passes its first input on.
            let v = match data.first() {
                Some(d) => d.value,
                None => b.konst(Attr::Json(Json::Null), Type::Null),
            };
            Expanded::Values(vec![v])
        }
        _ => plain(with_tokens(data.iter().map(|d| d.value).collect())),
    })
}

/// An LLM node's prompt text and further text operands.
fn llm_prompt(op: Opcode, attrs: &Attrs) -> Result<(String, Vec<String>), String> {
    use Opcode as O;
    let given = first_text(attrs, &["template_str", "prompt"])?;
    Ok(match op {
        O::Plan => {
            let goal = text(attrs, "goal")?;
            let prompt = match (given, goal) {
                (Some(p), _) => p,
                (None, Some(g)) => format!("Goal: {g}"),
                (None, None) => String::new(),
            };
            let extra = text(attrs, "constraints")?
                .map(|c| format!("Constraints: {c}"))
                .into_iter()
                .collect();
            (prompt, extra)
        }
        O::Reflect => {
            let prompt = match (given, text(attrs, "reflection_prompt")?) {
                (Some(p), _) | (None, Some(p)) => p,
                (None, None) => "Reflect on this execution trace".to_string(),
            };
            let trace = first_text(attrs, &["trace_query", "trace_id", "trace"])?;
            (
                prompt,
                trace.map(|t| format!("Trace: {t}")).into_iter().collect(),
            )
        }
        O::Verify => {
            let claim = text(attrs, "claim")?;
            let evidence = text(attrs, "evidence")?;
            match (given, claim) {
                (Some(p), c) => (p, c.into_iter().chain(evidence).collect()),
                (None, Some(c)) => (c, evidence.into_iter().collect()),
                (None, None) => (String::new(), evidence.into_iter().collect()),
            }
        }
        _ => (given.unwrap_or_default(), Vec::new()),
    })
}

/// An `INV` node's argument object.
fn tool_args(
    attrs: &Attrs,
    b: &mut Build<'_>,
    data: &[super::build::Data],
) -> Result<Value, String> {
    if let Some(p) = attrs.get("parameters") {
        return match p {
            Json::Object(map) => {
                let mut keys = Vec::new();
                let mut vals = Vec::new();
                for (k, v) in map {
                    keys.push(Json::String(k.clone()));
                    vals.push(b.json(v, data));
                }
                Ok(b.object(keys, &vals))
            }
            Json::String(s) => parsed_args(s, b),
            other => Err(format!("`parameters` must be an object, not {other}")),
        };
    }
    match attrs.get("params_json") {
        Some(Json::String(s)) => return parsed_args(s, b),
        Some(v @ Json::Object(_)) => return Ok(b.konst(Attr::Json(v.clone()), Type::Json)),
        Some(v) => return Err(format!("`params_json` must be a JSON object, not {v}")),
        None => {}
    }
    Ok(match data {
        [] => b.konst(Attr::Json(serde_json::json!({})), Type::Json),
        [one] => one.value,
        many => {
            // The reference's positional form: `arg0`, `arg1`, ...
            let keys = (0..many.len())
                .map(|i| Json::String(format!("arg{i}")))
                .collect();
            let vals: Vec<Value> = many.iter().map(|d| d.value).collect();
            b.object(keys, &vals)
        }
    })
}

fn parsed_args(s: &str, b: &mut Build<'_>) -> Result<Value, String> {
    let v: Json = serde_json::from_str(s).map_err(|e| format!("`params_json` is not JSON: {e}"))?;
    Ok(b.konst(Attr::Json(v), Type::Json))
}

/// `MERGE` by `strategy`: `array` (the reference's default) a list of the
/// inputs, `concat` their texts joined, `sum` their total; `join` is ours
/// (`merge(...)` in source: texts joined by blank lines).
fn merge(
    attrs: &Attrs,
    b: &mut Build<'_>,
    data: &[super::build::Data],
) -> Result<Expanded, String> {
    let vals: Vec<Value> = data.iter().map(|d| d.value).collect();
    let strategy = text(attrs, "strategy")?.unwrap_or_else(|| "array".into());
    Ok(match strategy.as_str() {
        "join" => Expanded::Op {
            operands: vals,
            attrs: Vec::new(),
        },
        "array" => Expanded::Values(vec![b.op1(
            Opcode::List,
            &vals,
            Type::list(Type::Json),
            Vec::new(),
        )]),
        "concat" if !vals.is_empty() => {
            Expanded::Values(vec![b.op1(Opcode::Concat, &vals, Type::Str, Vec::new())])
        }
        "sum" => {
            let mut acc = b.konst(Attr::Number(0.0), Type::Number);
            for v in vals {
                acc = b.op1(Opcode::Add, &[acc, v], Type::Number, Vec::new());
            }
            Expanded::Values(vec![acc])
        }
        "concat" => Expanded::Values(vec![b.konst(Attr::Str(String::new()), Type::Str)]),
        other => {
            return Err(format!(
                "`{other}` is not a merge strategy (array, concat, sum or join)"
            ))
        }
    })
}

/// `GUARD` with the reference's condition language over its first input:
/// `not_empty`, `is_empty`, `is_null`, `not_null`, `is_true`/`true`,
/// `is_false`/`false`, or a comparison (`> 0.8`, `!= null`, `== "done"`).
/// `on_fail: halt` (default) stops the run with `error_message`; `skip`
/// makes the node's value `false` instead. A passing guard's value is `true`.
fn guard(
    attrs: &Attrs,
    b: &mut Build<'_>,
    data: &[super::build::Data],
    tokens: &[Value],
) -> Result<Expanded, String> {
    let condition = text(attrs, "condition")?.ok_or("`GUARD` needs `condition`")?;
    let on_fail = text(attrs, "on_fail")?
        .unwrap_or_else(|| "halt".into())
        .to_ascii_lowercase();
    // Without an input the guard checks the graph's first parameter: the
    // run's input (an entry graph without parameters gets `input` for it,
    // `lower.rs`) or a call's first argument; the reference's runtime
    // gives such a guard `null`, so its guides' guard could never pass.
    let x = match (data.first(), b.flow.params.first()) {
        (Some(d), _) => d.value,
        (None, Some(&(_, p))) => p,
        (None, None) => b.konst(Attr::Json(Json::Null), Type::Null),
    };
    let cond = condition_value(&condition, x, b)?;
    match on_fail.as_str() {
        "skip" => Ok(Expanded::Values(vec![cond])),
        "halt" => {
            let message = text(attrs, "error_message")?
                .unwrap_or_else(|| format!("GUARD condition failed: '{condition}'"));
            let m = b.konst(Attr::Str(message), Type::Str);
            let mut operands = vec![cond, m];
            operands.extend(tokens.iter().copied());
            let t = b.op1(Opcode::Guard, &operands, Type::Ord, Vec::new());
            let ok = b.konst(Attr::Bool(true), Type::Bool);
            Ok(Expanded::Values(vec![ok, t]))
        }
        other => Err(format!("`on_fail` is `halt` or `skip`, not `{other}`")),
    }
}

/// `x` as a number constant when it is a text constant that reads as one.
fn numeric_const(b: &mut Build<'_>, x: Value) -> Option<Value> {
    let ais_ir::ValueDef::Result(op, 0) = b.flow.dfg.values.get(x)?.def else {
        return None;
    };
    let o = &b.flow.dfg.ops[op];
    if o.opcode != Opcode::Const {
        return None;
    }
    let n = match o.attrs.get("value")? {
        Attr::Str(s) => s.trim().parse::<f64>().ok().filter(|n| n.is_finite())?,
        _ => return None,
    };
    Some(b.konst(Attr::Number(n), Type::Number))
}

/// The reference's condition language (shared with source `guard`), as
/// pure ops over `x`.
pub fn condition_value(condition: &str, x: Value, b: &mut Build<'_>) -> Result<Value, String> {
    use crate::guard_cond::{Cond, Rhs};
    let c = crate::guard_cond::parse(condition);
    let null = |b: &mut Build<'_>| b.konst(Attr::Json(Json::Null), Type::Null);
    let cmp =
        |b: &mut Build<'_>, op: Opcode, rhs: Value| b.op1(op, &[x, rhs], Type::Bool, Vec::new());
    Ok(match c {
        Cond::NotNull => {
            let n = null(b);
            cmp(b, Opcode::Ne, n)
        }
        Cond::IsNull => {
            let n = null(b);
            cmp(b, Opcode::Eq, n)
        }
        Cond::Is(v) => {
            let k = b.konst(Attr::Bool(v), Type::Bool);
            cmp(b, Opcode::Eq, k)
        }
        Cond::Empty(want_empty) => {
            let mut acc: Option<Value> = None;
            for e in [
                Json::Null,
                Json::String(String::new()),
                serde_json::json!([]),
                serde_json::json!({}),
            ] {
                let k = b.konst(Attr::Json(e), Type::Json);
                let ne = cmp(b, Opcode::Ne, k);
                acc = Some(match acc {
                    None => ne,
                    Some(a) => b.op1(Opcode::And, &[a, ne], Type::Bool, Vec::new()),
                });
            }
            let not_empty = acc.ok_or("empty condition")?;
            if want_empty {
                b.op1(Opcode::Not, &[not_empty], Type::Bool, Vec::new())
            } else {
                not_empty
            }
        }
        Cond::Compare(op, Rhs::Number(n)) => {
            // The reference compares text that reads as a number as that
            // number: a constant input (`CONST_STR "0.9"`) is folded here,
            // text computed at run time (an LLM reply "0.93") is read by
            // `to_num`, which fails naming the guard when it is not a
            // number (the reference would take the condition as failed,
            // silently for `skip`). `==`/`!=` compare as they are.
            let ordering = matches!(op, ">" | ">=" | "<" | "<=");
            let x = match numeric_const(b, x) {
                Some(n) => n,
                None if !ordering || *b.flow.dfg.value_type(x) == Type::Number => x,
                None => {
                    let who = if b.node.is_empty() {
                        format!("GUARD `{condition}`")
                    } else {
                        format!("GUARD `{}` (`{condition}`)", b.node)
                    };
                    let w = b.konst(Attr::Str(who), Type::Str);
                    b.op1(Opcode::ToNum, &[x, w], Type::Number, Vec::new())
                }
            };
            let k = b.konst(Attr::Number(n), Type::Number);
            let opcode = match op {
                ">" => Opcode::Gt,
                ">=" => Opcode::Ge,
                "<" => Opcode::Lt,
                "<=" => Opcode::Le,
                "==" => Opcode::Eq,
                _ => Opcode::Ne,
            };
            b.op1(opcode, &[x, k], Type::Bool, Vec::new())
        }
        Cond::Compare(op, Rhs::Text(t)) => {
            let s = b.op1(Opcode::ToStr, &[x], Type::Str, Vec::new());
            let k = b.konst(Attr::Str(t), Type::Str);
            match op {
                "==" => b.op1(Opcode::Eq, &[s, k], Type::Bool, Vec::new()),
                "!=" => b.op1(Opcode::Ne, &[s, k], Type::Bool, Vec::new()),
                // An ordering against text never holds (as in the reference).
                _ => b.konst(Attr::Bool(false), Type::Bool),
            }
        }
    })
}
