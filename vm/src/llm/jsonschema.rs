//! A small JSON-schema validator and instance generator for the subset the
//! structured ops use: `type` (one name or a list), `required`,
//! `properties`, `additionalProperties: false`, `items`, `enum`, plus
//! `minItems`/`maxItems`. Unknown keywords are ignored, as the spec says.

use serde_json::{Map, Value};
use std::fmt;

/// The first place where an instance does not match its schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaError {
    /// JSON path of the offending value, e.g. `$.steps[1].id`.
    pub path: String,
    pub message: String,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for SchemaError {}

/// Checks `value` against `schema`, returning the first mismatch.
pub fn validate(schema: &Value, value: &Value) -> Result<(), SchemaError> {
    check(schema, value, "$")
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(want: &str, v: &Value) -> bool {
    match want {
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        other => type_name(v) == other,
    }
}

fn err(path: &str, message: String) -> SchemaError {
    SchemaError {
        path: path.to_string(),
        message,
    }
}

fn check(schema: &Value, value: &Value, path: &str) -> Result<(), SchemaError> {
    let Some(s) = schema.as_object() else {
        // `true`/`{}` accept everything; `false` nothing.
        return if schema == &Value::Bool(false) {
            Err(err(path, "no value is allowed here".into()))
        } else {
            Ok(())
        };
    };
    if let Some(t) = s.get("type") {
        let wanted: Vec<&str> = match t {
            Value::String(one) => vec![one.as_str()],
            Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !wanted.is_empty() && !wanted.iter().any(|w| type_matches(w, value)) {
            return Err(err(
                path,
                format!(
                    "expected {}, found {}",
                    wanted.join(" or "),
                    type_name(value)
                ),
            ));
        }
    }
    if let Some(Value::Array(options)) = s.get("enum") {
        if !options.contains(value) {
            let list: Vec<String> = options.iter().map(Value::to_string).collect();
            return Err(err(
                path,
                format!("{value} is not one of {}", list.join(", ")),
            ));
        }
    }
    if let Value::Object(obj) = value {
        if let Some(Value::Array(req)) = s.get("required") {
            for name in req.iter().filter_map(Value::as_str) {
                if !obj.contains_key(name) {
                    return Err(err(path, format!("missing required property `{name}`")));
                }
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        for (k, v) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(sub) => check(sub, v, &format!("{path}.{k}"))?,
                None => {
                    if s.get("additionalProperties") == Some(&Value::Bool(false)) {
                        return Err(err(path, format!("unexpected property `{k}`")));
                    }
                    if let Some(extra @ Value::Object(_)) = s.get("additionalProperties") {
                        check(extra, v, &format!("{path}.{k}"))?;
                    }
                }
            }
        }
    }
    if let Value::Array(items) = value {
        if let Some(min) = s.get("minItems").and_then(Value::as_u64) {
            if (items.len() as u64) < min {
                return Err(err(
                    path,
                    format!("expected at least {min} items, found {}", items.len()),
                ));
            }
        }
        if let Some(max) = s.get("maxItems").and_then(Value::as_u64) {
            if (items.len() as u64) > max {
                return Err(err(
                    path,
                    format!("expected at most {max} items, found {}", items.len()),
                ));
            }
        }
        if let Some(item_schema) = s.get("items") {
            for (i, v) in items.iter().enumerate() {
                check(item_schema, v, &format!("{path}[{i}]"))?;
            }
        }
    }
    Ok(())
}

/// Finds the JSON value in a model reply: the whole text, else the body of a
/// ```` ```json ```` fence, else the outermost `{...}` or `[...]` span.
pub fn extract_json(text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    let first_err = match serde_json::from_str::<Value>(trimmed) {
        Ok(v) => return Ok(v),
        Err(e) => e.to_string(),
    };
    if let Some(start) = trimmed.find("```") {
        let after = &trimmed[start + 3..];
        let body_start = after.find('\n').map(|i| i + 1).unwrap_or(0);
        let body = &after[body_start..];
        if let Some(end) = body.find("```") {
            if let Ok(v) = serde_json::from_str::<Value>(body[..end].trim()) {
                return Ok(v);
            }
        }
    }
    for (open, close) in [('{', '}'), ('[', ']')] {
        if let (Some(a), Some(b)) = (trimmed.find(open), trimmed.rfind(close)) {
            if a < b {
                if let Ok(v) = serde_json::from_str::<Value>(&trimmed[a..=b]) {
                    return Ok(v);
                }
            }
        }
    }
    Err(first_err)
}

/// Builds a value valid against `schema`, filling strings through `text`
/// (called with the property path, e.g. `steps[0].description`).
pub fn generate(schema: &Value, text: &mut dyn FnMut(&str) -> String) -> Value {
    gen_at(schema, "", text)
}

fn gen_at(schema: &Value, path: &str, text: &mut dyn FnMut(&str) -> String) -> Value {
    let Some(s) = schema.as_object() else {
        return Value::Null;
    };
    if let Some(Value::Array(options)) = s.get("enum") {
        if let Some(first) = options.first() {
            return first.clone();
        }
    }
    let ty = match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if s.contains_key("properties") => "object",
        _ if s.contains_key("items") => "array",
        _ => "string",
    };
    match ty {
        "object" => {
            let mut obj = Map::new();
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (k, sub) in props {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    obj.insert(k.clone(), gen_at(sub, &p, text));
                }
            }
            Value::Object(obj)
        }
        "array" => {
            let min = s
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .max(1);
            let max = s
                .get("maxItems")
                .and_then(Value::as_u64)
                .unwrap_or(u64::MAX);
            let n = min.min(max);
            let item = s.get("items").cloned().unwrap_or(Value::Bool(true));
            Value::Array(
                (0..n)
                    .map(|i| gen_at(&item, &format!("{path}[{i}]"), text))
                    .collect(),
            )
        }
        "number" => Value::from(0.5),
        "integer" => Value::from(1),
        "boolean" => Value::Bool(true),
        "null" => Value::Null,
        _ => Value::String(text(path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_path_of_first_mismatch() {
        let schema = crate::llm::schema::plan();
        let bad = json!({"steps": [{"id": "a", "description": "x", "depends_on": [1]}]});
        let e = validate(&schema, &bad).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("$.steps[0].depends_on[0]: expected string, found integer")
        );
    }

    #[test]
    fn generated_instances_validate() {
        for s in [
            crate::llm::schema::plan(),
            crate::llm::schema::verify(),
            crate::llm::schema::reflect(),
        ] {
            let v = generate(&s, &mut |p| format!("<{p}>"));
            assert_eq!(validate(&s, &v), Ok(()));
        }
    }

    #[test]
    fn extracts_fenced_json() {
        assert_eq!(
            extract_json("Sure:\n```json\n{\"a\": 1}\n```"),
            Ok(json!({"a": 1}))
        );
        assert!(extract_json("no json").is_err());
    }
}
