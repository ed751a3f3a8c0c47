//! Values and their operators, written from docs/language.md §5 and §8 and
//! the value rules in docs/runtime.md ("Op semantics"). Values are plain
//! JSON: lists are arrays, `void` is represented by `Json::Null` and the
//! checker guarantees it is never used.

use crate::error::OracleError;
use ais_compiler::syntax::ast::BinaryOp;
use serde_json::{Number, Value as Json};

/// A number as a JSON value; non-finite results have no JSON form.
pub fn number(n: f64) -> Result<Json, OracleError> {
    Number::from_f64(n)
        .map(Json::Number)
        .ok_or_else(|| OracleError::new("arith.not_finite", format!("{n} is not a finite number")))
}

/// The *text form*: strings as they are, numbers in plain form (`3`,
/// `2.5`), everything else compact JSON.
pub fn text(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        Json::Number(n) => plain_number(n.as_f64().unwrap_or(0.0)),
        other => other.to_string(),
    }
}

fn plain_number(n: f64) -> String {
    // Whole numbers print without a fraction ("3", not "3.0").
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// Truthiness: `false null 0 "" []` (and `{}`) are false.
pub fn truthy(v: &Json) -> bool {
    match v {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Json::String(s) => !s.is_empty(),
        Json::Array(a) => !a.is_empty(),
        Json::Object(o) => !o.is_empty(),
    }
}

/// Structural equality; numbers compare by value.
pub fn equal(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => x.as_f64() == y.as_f64(),
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equal(p, q))
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, p)| y.get(k).is_some_and(|q| equal(p, q)))
        }
        _ => a == b,
    }
}

fn as_number(v: &Json) -> Result<f64, OracleError> {
    v.as_f64()
        .ok_or_else(|| OracleError::new("type.not_number", format!("expected a number, found {v}")))
}

/// A binary operator on two evaluated operands.
pub fn binary(op: BinaryOp, a: &Json, b: &Json) -> Result<Json, OracleError> {
    use BinaryOp::*;
    match op {
        And => Ok(Json::Bool(truthy(a) && truthy(b))),
        Or => Ok(Json::Bool(truthy(a) || truthy(b))),
        Eq => Ok(Json::Bool(equal(a, b))),
        Ne => Ok(Json::Bool(!equal(a, b))),
        Lt | Le | Gt | Ge => compare(op, a, b),
        Add => add(a, b),
        Sub => number(as_number(a)? - as_number(b)?),
        Mul => number(as_number(a)? * as_number(b)?),
        Div | Rem => {
            let (x, y) = (as_number(a)?, as_number(b)?);
            if y == 0.0 {
                return Err(OracleError::new("arith.div_by_zero", "division by zero"));
            }
            number(if op == Div { x / y } else { x % y })
        }
    }
}

/// `+`: numbers add; a text operand makes it concatenation of text forms;
/// two lists concatenate.
fn add(a: &Json, b: &Json) -> Result<Json, OracleError> {
    match (a, b) {
        (Json::Number(_), Json::Number(_)) => number(as_number(a)? + as_number(b)?),
        (Json::String(_), _) | (_, Json::String(_)) => Ok(Json::String(text(a) + &text(b))),
        (Json::Array(x), Json::Array(y)) => Ok(Json::Array(x.iter().chain(y).cloned().collect())),
        _ => Err(OracleError::new(
            "type.not_number",
            format!("`+` cannot be applied to {a} and {b}"),
        )),
    }
}

/// `< <= > >=`: two numbers, or two texts compared lexicographically.
fn compare(op: BinaryOp, a: &Json, b: &Json) -> Result<Json, OracleError> {
    let ordering = match (a, b) {
        (Json::Number(_), Json::Number(_)) => as_number(a)?.partial_cmp(&as_number(b)?),
        (Json::String(x), Json::String(y)) => Some(x.cmp(y)),
        _ => None,
    };
    let Some(o) = ordering else {
        return Err(OracleError::new(
            "type.not_comparable",
            format!("`{}` cannot compare {a} and {b}", op.symbol()),
        ));
    };
    Ok(Json::Bool(match op {
        BinaryOp::Lt => o.is_lt(),
        BinaryOp::Le => o.is_le(),
        BinaryOp::Gt => o.is_gt(),
        _ => o.is_ge(),
    }))
}

/// `x[i]`: lists by whole in-range index, objects by the key's text,
/// strings by character.
pub fn index(base: &Json, i: &Json) -> Result<Json, OracleError> {
    let position = |len: usize| -> Result<usize, OracleError> {
        let n = i.as_f64().unwrap_or(-1.0);
        if n.fract() == 0.0 && n >= 0.0 && (n as usize) < len {
            Ok(n as usize)
        } else {
            Err(OracleError::new(
                "index.out_of_range",
                format!("index {i} out of range"),
            ))
        }
    };
    match base {
        Json::Array(items) => Ok(items[position(items.len())?].clone()),
        Json::Object(o) => Ok(o.get(&text(i)).cloned().unwrap_or(Json::Null)),
        Json::String(s) => {
            let chars: Vec<char> = s.chars().collect();
            Ok(Json::String(chars[position(chars.len())?].to_string()))
        }
        other => Err(OracleError::new(
            "type.not_indexable",
            format!("cannot index {other}"),
        )),
    }
}

/// `x.m`: a field of an object (or of JSON text holding one); missing is null.
pub fn member(base: &Json, name: &str) -> Result<Json, OracleError> {
    match base {
        Json::Object(o) => Ok(o.get(name).cloned().unwrap_or(Json::Null)),
        Json::String(s) => match serde_json::from_str::<Json>(s) {
            Ok(Json::Object(o)) => Ok(o.get(name).cloned().unwrap_or(Json::Null)),
            _ => Err(OracleError::new(
                "type.not_object",
                format!("`.{name}` on text"),
            )),
        },
        Json::Null => Ok(Json::Null),
        other => Err(OracleError::new(
            "type.not_object",
            format!("`.{name}` on {other}"),
        )),
    }
}
