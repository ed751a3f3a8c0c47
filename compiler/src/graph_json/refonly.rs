//! The reference's ops that have no op of their own here, as the ops that
//! do what they do (docs/graph-json.md, "Reference ops"):
//!
//! - `UPDATE_GOAL` and `CLAIM`: the AAM tools `update_goal` (with the
//!   reference's `action`) and `claim`, through `INV`;
//! - `RESUME`: the answer of the `PAUSE` with that `checkpoint_id`;
//! - `JUMP`, `BRANCH_ON_VALUE`, `LOOP_START`, `LOOP_END`, `ERR`: the values
//!   the reference's runtime gives them (markers whose labels name nodes,
//!   and `LOOP_START` ... `LOOP_END` pairs, were made regions first by
//!   `structure/`; what is left here is the flat value);
//! - `AGENT`: declarations of the graph's agent (`lower.rs`); no value.

use super::build::{Build, DataIn};
use super::reference::{count, text};
use ais_ir::{Attr, Opcode, Type, Value};
use serde_json::{json, Value as Json};
use std::collections::HashMap;

type Attrs = indexmap::IndexMap<String, Json>;

/// A node's values (with the result types they have).
pub fn lower(
    name: &str,
    attrs: &Attrs,
    b: &mut Build<'_>,
    inputs: DataIn,
    pauses: &HashMap<String, Value>,
) -> Result<Vec<Value>, String> {
    let DataIn { data, tokens } = inputs;
    let first = data.first().map(|d| d.value);
    Ok(match name {
        "AGENT" => Vec::new(),
        "JUMP" => vec![first.ok_or("`JUMP` passes its first input on, and has none")?],
        "BRANCH_ON_VALUE" => {
            let x = match (first, text(attrs, "token")?) {
                (Some(v), _) => v,
                (None, Some(t)) => b.text(&t, &data),
                (None, None) => return Err("`BRANCH_ON_VALUE` needs `token` or an input".into()),
            };
            let want = match attrs.get("value") {
                Some(Json::String(s)) => s.clone(),
                Some(v) => v.to_string(),
                None => "true".to_string(),
            };
            let s = b.op1(Opcode::ToStr, &[x], Type::Str, Vec::new());
            let k = b.konst(Attr::Str(want), Type::Str);
            vec![b.op1(Opcode::Eq, &[s, k], Type::Bool, Vec::new())]
        }
        // `count_token` names a token in the reference (not a number here
        // unless written as one); its runtime counts `max_iterations`.
        "LOOP_START" => {
            let n = match count(attrs, "max_iterations")? {
                Some(n) => n,
                None => match count(attrs, "count_token").unwrap_or(None) {
                    Some(n) => n,
                    None => count(attrs, "count")?.unwrap_or(100.0),
                },
            };
            vec![b.konst(Attr::Number(n), Type::Number)]
        }
        "LOOP_END" => match first {
            Some(x) => {
                let zero = b.konst(Attr::Number(0.0), Type::Number);
                vec![b.op1(Opcode::Gt, &[x, zero], Type::Bool, Vec::new())]
            }
            None => vec![b.konst(Attr::Bool(false), Type::Bool)],
        },
        // The reference's runtime gives an `ERR` the text `Error: {message}`
        // (its `err` handler; the scheduler, not the node, carries the
        // failure on). Its op definitions name the node's `error_handler`,
        // its graph lowering and guides a `recovery_template`: neither is
        // run by its runtime, so here either stands in for a missing
        // `message` (in that order). One of the three is needed: without
        // any the node says nothing (the reference's runtime fails it).
        "ERR" => {
            let m = match text(attrs, "message")? {
                Some(m) => m,
                None => text(attrs, "error_handler")?
                    .or(text(attrs, "recovery_template")?)
                    .ok_or(
                        "`ERR` needs `message`, `error_handler` or `recovery_template` (the reference's runtime reads `message`)",
                    )?,
            };
            vec![b.konst(Attr::Str(format!("Error: {m}")), Type::Str)]
        }
        "UPDATE_GOAL" => {
            let goal = text(attrs, "goal_id")?.ok_or("`UPDATE_GOAL` needs `goal_id`")?;
            let action = text(attrs, "action")?.unwrap_or_else(|| "set".into());
            if !matches!(
                action.to_ascii_lowercase().as_str(),
                "set" | "remove" | "clear"
            ) {
                return Err(format!("`action` is set, remove or clear, not `{action}`"));
            }
            let mut keys = vec![json!("goal_id"), json!("action")];
            let mut vals = vec![
                b.konst(Attr::Str(goal), Type::Str),
                b.konst(Attr::Str(action), Type::Str),
            ];
            if let Some(p) = count(attrs, "priority")? {
                keys.push(json!("priority"));
                vals.push(b.konst(Attr::Number(p), Type::Number));
            }
            if let Some(d) = first {
                keys.push(json!("description"));
                vals.push(b.op1(Opcode::ToStr, &[d], Type::Str, Vec::new()));
            }
            let args = b.object(keys, &vals);
            tool(b, "update_goal", args, &tokens)
        }
        "CLAIM" => {
            let queue = text(attrs, "queue")?.ok_or("`CLAIM` needs `queue`")?;
            let mut keys = vec![json!("queue")];
            let mut vals = vec![b.konst(Attr::Str(queue), Type::Str)];
            for k in ["lease_ms", "max_wait_ms"] {
                if let Some(n) = count(attrs, k)? {
                    keys.push(json!(k));
                    vals.push(b.konst(Attr::Number(n), Type::Number));
                }
            }
            let args = b.object(keys, &vals);
            tool(b, "claim", args, &tokens)
        }
        "RESUME" => {
            let c = text(attrs, "checkpoint")?.ok_or("`RESUME` needs `checkpoint`")?;
            match pauses.get(&c) {
                Some(v) => vec![*v],
                None => {
                    return Err(format!(
                        "`RESUME` names the checkpoint `{c}`, which no `PAUSE` before it in this graph has (its `checkpoint_id`)"
                    ))
                }
            }
        }
        other => return Err(format!("`{other}` is not a reference op")),
    })
}

fn tool(b: &mut Build<'_>, name: &str, args: Value, tokens: &[Value]) -> Vec<Value> {
    let mut operands = vec![args];
    operands.extend(tokens.iter().copied());
    b.op(
        Opcode::Inv,
        &operands,
        &[Type::Json, Type::Ord],
        vec![("tool".into(), Attr::Str(name.into()))],
    )
}
