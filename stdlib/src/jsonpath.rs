//! `json_query`: a JSONPath subset.
//!
//! `$` the document; `.name` / `['name']` / `["name"]` a member; `[n]` an
//! element (negative counts from the end); `[*]` / `.*` every element or
//! member value. Without a wildcard the result is the one selected value
//! (`null` when the path selects nothing); with a wildcard it is the list
//! of every selected value.

use crate::ToolError;
use serde_json::{json, Value as Json};

#[derive(Debug, PartialEq)]
enum Step {
    Key(String),
    Index(i64),
    All,
}

pub fn json_query(args: &Json) -> Result<Json, ToolError> {
    let path = crate::str_arg(args, "json_query", "path")?;
    let doc = args.get("document").ok_or_else(|| {
        ToolError::new(
            "tool.invalid_args",
            "`json_query` needs an argument `document`",
        )
    })?;
    // A document given as JSON text is parsed first.
    let parsed;
    let doc = match doc {
        Json::String(s) => match serde_json::from_str::<Json>(s) {
            Ok(v) => {
                parsed = v;
                &parsed
            }
            Err(_) => doc,
        },
        other => other,
    };
    query(doc, path)
}

/// Applies `path` to `doc`.
pub fn query(doc: &Json, path: &str) -> Result<Json, ToolError> {
    let steps = parse(path).map_err(|e| {
        ToolError::new("json_query.bad_path", format!("bad path `{path}`: {e}"))
            .with_payload(json!({"path": path}))
    })?;
    let wildcard = steps.contains(&Step::All);
    let mut cur: Vec<&Json> = vec![doc];
    for s in &steps {
        let mut next = Vec::new();
        for v in cur {
            match (s, v) {
                (Step::Key(k), Json::Object(m)) => next.extend(m.get(k)),
                (Step::Index(i), Json::Array(a)) => {
                    let idx = if *i < 0 { a.len() as i64 + i } else { *i };
                    if idx >= 0 {
                        next.extend(a.get(idx as usize));
                    }
                }
                (Step::All, Json::Array(a)) => next.extend(a.iter()),
                (Step::All, Json::Object(m)) => next.extend(m.values()),
                _ => {}
            }
        }
        cur = next;
    }
    Ok(if wildcard {
        Json::Array(cur.into_iter().cloned().collect())
    } else {
        cur.first().map_or(Json::Null, |v| (*v).clone())
    })
}

fn parse(path: &str) -> Result<Vec<Step>, String> {
    let s: Vec<char> = path.trim().chars().collect();
    let mut i = 0;
    if s.first() == Some(&'$') {
        i = 1;
    }
    let mut steps = Vec::new();
    let name_char = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    // A bare leading name (`a.b`) is accepted as `$.a.b`.
    if i == 0 && s.first().is_some_and(|c| name_char(*c)) {
        let st = i;
        while i < s.len() && name_char(s[i]) {
            i += 1;
        }
        steps.push(Step::Key(s[st..i].iter().collect()));
    }
    while i < s.len() {
        match s[i] {
            '.' => {
                i += 1;
                if s.get(i) == Some(&'*') {
                    i += 1;
                    steps.push(Step::All);
                    continue;
                }
                let st = i;
                while i < s.len() && name_char(s[i]) {
                    i += 1;
                }
                if st == i {
                    return Err(format!("expected a name at offset {st}"));
                }
                steps.push(Step::Key(s[st..i].iter().collect()));
            }
            '[' => {
                i += 1;
                match s.get(i) {
                    Some('*') => {
                        i += 1;
                        steps.push(Step::All);
                    }
                    Some(q @ ('\'' | '"')) => {
                        let q = *q;
                        i += 1;
                        let st = i;
                        while i < s.len() && s[i] != q {
                            i += 1;
                        }
                        if i >= s.len() {
                            return Err("unterminated quoted name".into());
                        }
                        steps.push(Step::Key(s[st..i].iter().collect()));
                        i += 1;
                    }
                    _ => {
                        let st = i;
                        if s.get(i) == Some(&'-') {
                            i += 1;
                        }
                        while i < s.len() && s[i].is_ascii_digit() {
                            i += 1;
                        }
                        let text: String = s[st..i].iter().collect();
                        let n = text
                            .parse::<i64>()
                            .map_err(|_| format!("expected an index at offset {st}"))?;
                        steps.push(Step::Index(n));
                    }
                }
                if s.get(i) != Some(&']') {
                    return Err(format!("expected `]` at offset {i}"));
                }
                i += 1;
            }
            c => return Err(format!("unexpected `{c}` at offset {i}")),
        }
    }
    Ok(steps)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let d = json!({"quote": {"last_price": 12.5, "tags": ["a", "b"]}, "x y": 1});
        assert_eq!(query(&d, "$.quote.last_price").unwrap(), json!(12.5));
        assert_eq!(query(&d, "quote.tags[-1]").unwrap(), json!("b"));
        assert_eq!(query(&d, "$['x y']").unwrap(), json!(1));
        assert_eq!(query(&d, "$.quote.tags[*]").unwrap(), json!(["a", "b"]));
        assert_eq!(query(&d, "$.missing.x").unwrap(), Json::Null);
        assert_eq!(query(&d, "$").unwrap(), d);
        assert!(query(&d, "$.[").is_err());
        assert!(query(&d, "$[1").is_err());
        assert_eq!(
            json_query(&json!({"document": "{\"a\": [1, 2]}", "path": "$.a[1]"})).unwrap(),
            json!(2)
        );
    }
}
