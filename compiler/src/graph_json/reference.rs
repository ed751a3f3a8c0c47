//! The reference's attribute forms, expanded into our ops: an LLM node's
//! `template_str`/`prompt` (with `{0}`-style holes filled from its data
//! inputs) becomes a `template` or `const` feeding the prompt operand; an
//! `INV` node's `capability`/`params_json` becomes `tool` and a `const`
//! argument object; `QMEM`'s `query` and `space`/`memory_tier` become a
//! `const` query and `tier`. Our own graphs never use these forms.

use ais_ir::{Attr, FlowData, Opcode, Region, Span, Type, Value};
use serde_json::Value as Json;

/// What an expansion produced: the op's operands and attributes, and the
/// JSON attributes it consumed.
pub struct Expanded {
    pub operands: Vec<Value>,
    pub attrs: Vec<(String, Attr)>,
    pub consumed: &'static [&'static str],
}

/// Reference attribute names that are ours under another name.
const RENAMES: &[(&str, &str)] = &[
    ("system_prompt", "system"),
    ("token_budget", "budget_tokens"),
    ("budget", "budget_tokens"),
];

pub fn renamed(name: &str) -> &str {
    RENAMES
        .iter()
        .find(|(r, _)| *r == name)
        .map_or(name, |(_, ours)| ours)
}

/// Whether a node uses the reference's attribute forms.
pub fn applies(op: Opcode, attrs: &indexmap::IndexMap<String, Json>) -> bool {
    let has = |k: &str| attrs.contains_key(k);
    match op {
        _ if op.info().llm.is_some() => has("template_str") || has("prompt"),
        Opcode::Inv => has("capability"),
        Opcode::Qmem | Opcode::Umem => has("query") || has("space") || has("memory_tier"),
        _ => false,
    }
}

pub fn expand(
    op: Opcode,
    attrs: &indexmap::IndexMap<String, Json>,
    flow: &mut FlowData,
    region: Region,
    span: Span,
    inputs: Vec<Value>,
) -> Result<Expanded, String> {
    let (tokens, data): (Vec<Value>, Vec<Value>) = inputs
        .into_iter()
        .partition(|&v| *flow.dfg.value_type(v) == Type::Ord);
    let text = |k: &str| -> Result<Option<String>, String> {
        match attrs.get(k) {
            None => Ok(None),
            Some(Json::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(format!("`{k}` must be a string, not {v}")),
        }
    };
    let konst = |flow: &mut FlowData, value: Attr, ty: Type| -> Value {
        let c = flow.dfg.create_op(Opcode::Const, &[], &[ty]);
        flow.dfg.ops[c].attrs.set("value", value);
        flow.dfg.spans.insert(c, span);
        flow.dfg.append_op(region, c);
        flow.dfg.ops[c].results[0]
    };
    let mut out = Expanded {
        operands: Vec::new(),
        attrs: Vec::new(),
        consumed: &[],
    };
    if op.info().llm.is_some() {
        let prompt = match text("template_str")? {
            Some(t) => t,
            None => text("prompt")?.unwrap_or_default(),
        };
        out.consumed = &["template_str", "prompt"];
        if has_holes(&prompt) {
            let t = flow.dfg.create_op(Opcode::Template, &data, &[Type::Str]);
            flow.dfg.ops[t].attrs.set("template", Attr::Str(prompt));
            flow.dfg.spans.insert(t, span);
            flow.dfg.append_op(region, t);
            out.operands.push(flow.dfg.ops[t].results[0]);
        } else {
            // No holes: the inputs are context, as in the reference.
            out.operands.push(konst(flow, Attr::Str(prompt), Type::Str));
            out.operands.extend(data);
        }
    } else if op == Opcode::Inv {
        let tool = text("capability")?.unwrap_or_default();
        out.attrs.push(("tool".into(), Attr::Str(tool)));
        out.consumed = &["capability", "params_json"];
        if data.is_empty() {
            let args = match attrs.get("params_json") {
                None => serde_json::json!({}),
                Some(Json::String(s)) => serde_json::from_str(s)
                    .map_err(|e| format!("`params_json` is not JSON: {e}"))?,
                Some(v) => v.clone(),
            };
            out.operands.push(konst(flow, Attr::Json(args), Type::Json));
        } else {
            out.operands.extend(data);
        }
    } else {
        let space = match text("memory_tier")? {
            Some(s) => Some(s),
            None => text("space")?,
        };
        let tier = space.unwrap_or_else(|| "ltm".into());
        if ais_ir::Tier::parse(&tier).is_none() {
            return Err(format!(
                "`{tier}` is not a memory tier (stm, ltm or episodic)"
            ));
        }
        out.attrs.push(("tier".into(), Attr::Str(tier)));
        out.consumed = &["query", "space", "memory_tier"];
        match text("query")? {
            Some(q) if data.is_empty() && op == Opcode::Qmem => {
                out.operands.push(konst(flow, Attr::Str(q), Type::Str));
            }
            _ => out.operands.extend(data),
        }
    }
    out.operands.extend(tokens);
    Ok(out)
}

/// Whether a template has a `{N}` hole.
fn has_holes(t: &str) -> bool {
    let b = t.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'{' {
            let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits > 0 && b.get(i + 1 + digits) == Some(&b'}') {
                return true;
            }
        }
        i += 1;
    }
    false
}
