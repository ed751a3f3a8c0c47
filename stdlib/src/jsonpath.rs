//! `json_query`: JSONPath (RFC 9535) over a JSON document, with the
//! `serde_json_path` crate: members, indexes (negative from the end),
//! wildcards, slices, descendants (`..`), filters (`[?@.price < 10]`).
//! A singular path gives one value (`null` when nothing is selected), any
//! other the list of every selected value.

use crate::ToolError;
use serde_json::{json, Value as Json};

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

/// Applies `path` to `doc` (RFC 9535 JSONPath, with `serde_json_path`). A
/// path without the leading `$` is taken as `$.path` (`quote.last_price`).
/// A singular path (names and indexes only) gives the selected value or
/// `null`; any other (wildcards, slices, filters, `..`, unions) the list of
/// every selected value.
pub fn query(doc: &Json, path: &str) -> Result<Json, ToolError> {
    let trimmed = path.trim();
    let full = if trimmed.starts_with('$') {
        trimmed.to_string()
    } else if trimmed.starts_with('[') {
        format!("${trimmed}")
    } else {
        format!("$.{trimmed}")
    };
    let parsed = serde_json_path::JsonPath::parse(&full).map_err(|e| {
        ToolError::new(
            "json_query.bad_path",
            format!("bad path `{path}`: {e} (JSONPath, RFC 9535: `$.a.b`, `$.a[0]`, `$.a[*]`, `$..b`, `$.a[?@.n > 1]`)"),
        )
        .with_payload(json!({"path": path}))
    })?;
    let nodes = parsed.query(doc);
    Ok(if is_singular(&full) {
        nodes.all().first().map_or(Json::Null, |v| (*v).clone())
    } else {
        Json::Array(nodes.all().into_iter().cloned().collect())
    })
}

/// Whether a (well-formed) path has only name and index segments: outside
/// string literals, every other selector is spelled with `*`, `:`, `?`,
/// `,` or `..`.
fn is_singular(path: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut prev = '\0';
    for c in path.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => quote = Some(c),
                '*' | ':' | '?' | ',' => return false,
                '.' if prev == '.' => return false,
                _ => {}
            },
        }
        prev = c;
    }
    true
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
        // RFC 9535 beyond the old subset: slices, descendants, filters.
        let books = json!({"store": {"book": [
            {"title": "A", "price": 8}, {"title": "B", "price": 12}, {"title": "C", "price": 5}
        ]}});
        assert_eq!(
            query(&books, "$.store.book[0:2].title").unwrap(),
            json!(["A", "B"])
        );
        assert_eq!(query(&books, "$..title").unwrap(), json!(["A", "B", "C"]));
        assert_eq!(
            query(&books, "$.store.book[?@.price < 10].title").unwrap(),
            json!(["A", "C"])
        );
        assert_eq!(query(&books, "$.store.book[-1].title").unwrap(), json!("C"));
        // A quoted name with a `*` or `..` in it is still one value.
        assert_eq!(
            query(&json!({"a*b..c": 3}), "$['a*b..c']").unwrap(),
            json!(3)
        );
        let e = query(&books, "$.store.book[?@.price <]").unwrap_err();
        assert_eq!(e.code, "json_query.bad_path");
        assert_eq!(
            json_query(&json!({"document": "{\"a\": [1, 2]}", "path": "$.a[1]"})).unwrap(),
            json!(2)
        );
    }
}
