//! Control ops: the branch an `if` or `switch` takes (with loose matching
//! of model text against cases), a loop's items, a call's results, and
//! an entry flow's arguments.

use super::{boolean, short, OpError, Results};
use crate::value::Val;
use ais_ir::bytecode::{FlowCode, Imm, Instr, Program, RegionKind};
use ais_ir::Opcode;
use serde_json::{json, Value as Json};

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
