//! JSON Schema for the structured ops and tool schemas: validation with
//! the `jsonschema` crate (every keyword of the draft the schema declares,
//! 2020-12 by default; `$ref` to the schema's own `$defs`/`definitions`; no
//! fetching of remote references), plus two hand-written helpers no crate
//! provides: [`extract_json`] (the JSON value in a model's reply) and
//! [`generate`] (an instance of a schema, for the simulator and the mock).

use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

/// The first place where an instance does not match its schema, or why
/// the schema itself is unusable (then `path` is `$schema`).
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

/// Compiled validators by schema text: the same few schemas (the op
/// kinds', a tool's) are checked over and over.
type Cache = Mutex<HashMap<String, Arc<jsonschema::Validator>>>;

/// More distinct schemas than this in one process is unusual; past it the
/// cache starts over rather than grow without bound.
const CACHE_LIMIT: usize = 512;

fn validator(schema: &Value) -> Result<Arc<jsonschema::Validator>, SchemaError> {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = schema.to_string();
    let cache = CACHE.get_or_init(Cache::default);
    if let Some(v) = crate::sync::lock(cache).get(&key) {
        return Ok(v.clone());
    }
    let compiled = jsonschema::validator_for(schema).map_err(|e| SchemaError {
        path: "$schema".into(),
        message: format!("the schema is not valid: {e}"),
    })?;
    let compiled = Arc::new(compiled);
    let mut g = crate::sync::lock(cache);
    if g.len() >= CACHE_LIMIT {
        g.clear();
    }
    g.insert(key, compiled.clone());
    Ok(compiled)
}

/// Checks that `schema` is a usable JSON Schema (for schemas that come from
/// outside: MCP tools, configuration).
pub fn check_schema(schema: &Value) -> Result<(), SchemaError> {
    validator(schema).map(|_| ())
}

/// Checks `value` against `schema`, returning the first mismatch.
pub fn validate(schema: &Value, value: &Value) -> Result<(), SchemaError> {
    let v = validator(schema)?;
    let first = v.iter_errors(value).next().map(|e| SchemaError {
        path: json_path(e.instance_path().as_str()),
        message: e.to_string(),
    });
    first.map_or(Ok(()), Err)
}

/// A JSON pointer (`/steps/1/id`) as the path the messages show
/// (`$.steps[1].id`).
fn json_path(pointer: &str) -> String {
    let mut out = String::from("$");
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else {
            out.push('.');
            out.push_str(&seg);
        }
    }
    out
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
            Some("$.steps[0].depends_on[0]: 1 is not of type \"string\"")
        );
    }

    /// Keywords the hand-written subset used to ignore are enforced.
    #[test]
    fn one_of_ref_pattern_and_minimum_are_enforced() {
        let schema = json!({
            "$defs": {"id": {"type": "string", "pattern": "^[a-z]+$"}},
            "type": "object",
            "properties": {
                "id": {"$ref": "#/$defs/id"},
                "n": {"type": "number", "minimum": 1},
                "v": {"oneOf": [{"type": "string"}, {"type": "integer"}]}
            }
        });
        assert_eq!(
            validate(&schema, &json!({"id": "abc", "n": 2, "v": 3})),
            Ok(())
        );
        for (bad, path) in [
            (json!({"id": "ABC"}), "$.id"),
            (json!({"n": 0}), "$.n"),
            (json!({"v": true}), "$.v"),
            (json!({"v": 1.5}), "$.v"),
        ] {
            let e = validate(&schema, &bad).expect_err("must be rejected");
            assert_eq!(e.path, path, "{bad}: {e}");
        }
    }

    #[test]
    fn an_unusable_schema_is_an_error_not_a_panic() {
        for schema in [
            json!({"type": "no-such-type"}),
            json!({"$ref": "#/$defs/missing"}),
            json!({"$ref": "https://example.com/remote.json"}),
            json!({"pattern": "("}),
        ] {
            let e = check_schema(&schema).expect_err("unusable");
            assert_eq!(e.path, "$schema", "{schema}: {e}");
            assert!(validate(&schema, &json!(1)).is_err());
        }
        assert_eq!(check_schema(&json!({"type": "object"})), Ok(()));
        assert_eq!(json_path("/a~1b/0/c"), "$.a/b[0].c");
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
