//! IR attributes ↔ JSON attribute values. A value is written plainly and
//! read back by the kind the op table gives the attribute; where the plain
//! form would read back differently (a `json` string, a `bool` where a flag
//! is expected, ...) it is written tagged: `{"$kind": "json", "value": ...}`.

use super::errors::GraphError;
use ais_ir::ops::AttrKind;
use ais_ir::{Attr, Opcode, Type};
use serde_json::Value;

pub fn encode(op: Opcode, name: &str, a: &Attr) -> Result<Value, GraphError> {
    let plain = match a {
        Attr::Str(s) => Value::String(s.clone()),
        Attr::Number(n) => match serde_json::Number::from_f64(*n) {
            Some(n) => Value::Number(n),
            None => {
                return Err(GraphError::NotRepresentable {
                    message: format!("attribute `{name}` of `{op}` is {n}, which JSON cannot hold"),
                })
            }
        },
        Attr::Bool(b) => Value::Bool(*b),
        Attr::Flag => Value::Bool(true),
        Attr::Symbol { agent, flow } => Value::String(format!("@{agent}.{flow}")),
        Attr::Type(t) => Value::String(t.to_string()),
        Attr::Json(j) => j.clone(),
    };
    if decode(op, name, &plain).ok().as_ref() == Some(a) {
        return Ok(plain);
    }
    Ok(serde_json::json!({"$kind": a.kind_name(), "value": plain}))
}

/// The attribute a JSON value denotes, or a message saying why it is none.
pub fn decode(op: Opcode, name: &str, v: &Value) -> Result<Attr, String> {
    if name == "tools" && op.info().llm.is_some() {
        let inner = match v.get("$kind") {
            Some(Value::String(k)) if k == "json" => v.get("value").unwrap_or(v),
            _ => v,
        };
        return offered_tools(inner).map(Attr::Json);
    }
    if let Some(obj) = v.as_object() {
        if obj.len() == 2 {
            if let (Some(Value::String(kind)), Some(inner)) = (obj.get("$kind"), obj.get("value")) {
                return tagged(kind, inner);
            }
        }
    }
    let kind = op.info().attr(name).map(|s| s.kind);
    let want = |what: &str| format!("`{name}` of `{}` must be {what}", op.graph_name());
    match kind {
        Some(AttrKind::Flag) => match v {
            Value::Bool(true) => Ok(Attr::Flag),
            _ => Err(want("`true` (a flag)")),
        },
        Some(AttrKind::Symbol) => v
            .as_str()
            .and_then(symbol)
            .ok_or_else(|| want("a flow reference `@Agent.flow`")),
        Some(AttrKind::Type) => v
            .as_str()
            .and_then(Type::parse)
            .map(Attr::Type)
            .ok_or_else(|| want("a type name")),
        Some(AttrKind::Str | AttrKind::NonEmptyStr | AttrKind::Tier) => v
            .as_str()
            .map(|s| Attr::Str(s.to_string()))
            .ok_or_else(|| want("a string")),
        Some(AttrKind::Number) => v.as_f64().map(Attr::Number).ok_or_else(|| want("a number")),
        Some(AttrKind::Bool) => v.as_bool().map(Attr::Bool).ok_or_else(|| want("a bool")),
        Some(AttrKind::Json) => Ok(Attr::Json(v.clone())),
        Some(AttrKind::Literal) | None => Ok(literal(v)),
    }
}

/// An LLM op's `tools`: our declarations (`name`, `description`,
/// `parameters`, `read_only`) as written, or the reference's tool names
/// (`"tools": ["bash", "read"]`), declared as the source front end declares
/// a built-in it offers (its own schema; any other name takes an object).
fn offered_tools(v: &Value) -> Result<Value, String> {
    let bad =
        |what: String| format!("`tools` must be a list of tool names or declarations: {what}");
    let Value::Array(items) = v else {
        return Err(bad(format!("not {v}")));
    };
    let mut out = Vec::with_capacity(items.len());
    for t in items {
        out.push(match t {
            Value::String(name) if !name.is_empty() => crate::lower::builtin_offer(name),
            Value::Object(o) => {
                let ok = o.get("name").and_then(Value::as_str).is_some_and(|n| !n.is_empty())
                    && o.get("description").is_none_or(Value::is_string)
                    && o.get("parameters").is_none_or(Value::is_object)
                    && o.get("read_only").is_none_or(Value::is_boolean);
                if !ok {
                    return Err(bad(format!(
                        "{t} needs a non-empty `name`, and `description` text, `parameters` an object, `read_only` a bool when given"
                    )));
                }
                t.clone()
            }
            other => return Err(bad(format!("{other} is neither"))),
        });
    }
    Ok(Value::Array(out))
}

fn literal(v: &Value) -> Attr {
    match v {
        Value::String(s) => Attr::Str(s.clone()),
        Value::Bool(b) => Attr::Bool(*b),
        Value::Number(n) => n
            .as_f64()
            .map_or_else(|| Attr::Json(v.clone()), Attr::Number),
        _ => Attr::Json(v.clone()),
    }
}

fn symbol(s: &str) -> Option<Attr> {
    let (agent, flow) = s.strip_prefix('@').unwrap_or(s).split_once('.')?;
    (!agent.is_empty() && !flow.is_empty()).then(|| Attr::Symbol {
        agent: agent.to_string(),
        flow: flow.to_string(),
    })
}

fn tagged(kind: &str, v: &Value) -> Result<Attr, String> {
    let bad = || format!("a `{kind}` attribute cannot hold {v}");
    Ok(match kind {
        "string" => Attr::Str(v.as_str().ok_or_else(bad)?.to_string()),
        "number" => Attr::Number(v.as_f64().ok_or_else(bad)?),
        "bool" => Attr::Bool(v.as_bool().ok_or_else(bad)?),
        "flag" => Attr::Flag,
        "symbol" => v.as_str().and_then(symbol).ok_or_else(bad)?,
        "type" => Attr::Type(v.as_str().and_then(Type::parse).ok_or_else(bad)?),
        "json" => Attr::Json(v.clone()),
        _ => return Err(format!("unknown attribute kind `{kind}`")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ambiguous_values_are_tagged_and_read_back() {
        let cases = [
            (
                Opcode::Const,
                "value",
                Attr::Json(Value::String("x".into())),
            ),
            (Opcode::Const, "value", Attr::Str("x".into())),
            (Opcode::Const, "value", Attr::Number(2.5)),
            (Opcode::Ask, "no_fuse", Attr::Flag),
            (
                Opcode::Ask,
                "context",
                Attr::Json(serde_json::json!(["a", ""])),
            ),
        ];
        for (op, name, a) in cases {
            let v = encode(op, name, &a).expect("encodable");
            assert_eq!(decode(op, name, &v), Ok(a), "{v}");
        }
        let tagged = encode(Opcode::Const, "value", &Attr::Json("x".into())).expect("encodable");
        assert!(tagged.get("$kind").is_some(), "{tagged}");
    }
}
