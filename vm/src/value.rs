//! Run-time values. Cheap to clone (scalars inline, everything else behind
//! an `Arc`), convertible to and from JSON at the edges.

use serde_json::Value as Json;
use std::fmt;
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Null,
    Bool(bool),
    Num(f64),
    Str(Arc<str>),
    List(Arc<[Val]>),
    /// Arrays and objects (and anything structured from the outside world).
    Json(Arc<Json>),
    /// An ordering token: "this happened".
    Ord,
}

impl Val {
    pub fn str(s: impl AsRef<str>) -> Val {
        Val::Str(Arc::from(s.as_ref()))
    }

    /// From JSON: scalars become native values, containers stay JSON.
    pub fn from_json(v: Json) -> Val {
        match v {
            Json::Null => Val::Null,
            Json::Bool(b) => Val::Bool(b),
            Json::Number(n) => Val::Num(n.as_f64().unwrap_or(0.0)),
            Json::String(s) => Val::Str(Arc::from(s)),
            other => Val::Json(Arc::new(other)),
        }
    }

    pub fn to_json(&self) -> Json {
        match self {
            Val::Null | Val::Ord => Json::Null,
            Val::Bool(b) => Json::Bool(*b),
            Val::Num(n) => num_json(*n),
            Val::Str(s) => Json::String(s.to_string()),
            Val::List(xs) => Json::Array(xs.iter().map(Val::to_json).collect()),
            Val::Json(j) => (**j).clone(),
        }
    }

    /// The text form used by templates, concatenation, prompts and `to_str`:
    /// strings as themselves, numbers in their plain form (`3`, `2.5`),
    /// everything else as compact JSON.
    pub fn text(&self) -> String {
        match self {
            Val::Str(s) => s.to_string(),
            Val::Num(n) => num_text(*n),
            Val::Bool(b) => b.to_string(),
            Val::Null | Val::Ord => "null".into(),
            Val::List(_) | Val::Json(_) => self.to_json().to_string(),
        }
    }

    pub fn as_num(&self) -> Option<f64> {
        match self {
            Val::Num(n) => Some(*n),
            Val::Json(j) => j.as_f64(),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Val::Bool(b) => Some(*b),
            Val::Json(j) => j.as_bool(),
            _ => None,
        }
    }

    /// Elements of a list or JSON array.
    pub fn items(&self) -> Option<Vec<Val>> {
        match self {
            Val::List(xs) => Some(xs.to_vec()),
            Val::Json(j) => j
                .as_array()
                .map(|a| a.iter().cloned().map(Val::from_json).collect()),
            _ => None,
        }
    }

    /// Structural equality across representations (`Str("a")` equals JSON `"a"`).
    pub fn same(&self, other: &Val) -> bool {
        match (self, other) {
            (Val::Str(a), Val::Str(b)) => a == b,
            (Val::Num(a), Val::Num(b)) => a == b,
            (Val::Bool(a), Val::Bool(b)) => a == b,
            (Val::Null, Val::Null) | (Val::Ord, Val::Ord) => true,
            _ => self.to_json() == other.to_json(),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Val::Null => "null",
            Val::Bool(_) => "bool",
            Val::Num(_) => "number",
            Val::Str(_) => "str",
            Val::List(_) => "list",
            Val::Json(j) if j.is_object() => "object",
            Val::Json(_) => "json",
            Val::Ord => "ord",
        }
    }
}

fn num_json(n: f64) -> Json {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        Json::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(Json::Null, Json::Number)
    }
}

fn num_text(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

impl fmt::Display for Val {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_round_trip_and_text() {
        let v = Val::from_json(json!({"a": [1, 2.5, "x"]}));
        assert_eq!(v.to_json(), json!({"a": [1, 2.5, "x"]}));
        assert_eq!(v.text(), r#"{"a":[1,2.5,"x"]}"#);
        assert_eq!(Val::Num(3.0).text(), "3");
        assert_eq!(Val::Num(2.5).text(), "2.5");
        assert!(Val::str("a").same(&Val::Json(Arc::new(json!("a")))));
        let l = Val::List(Arc::from(vec![Val::Num(1.0), Val::str("b")]));
        assert_eq!(l.to_json(), json!([1, "b"]));
    }
}
