//! Pure ops: values in, a value out (arithmetic, comparison, text
//! templates, indexing, type checks), the same in the VM and the
//! reference interpreter.

use super::{arg, boolean, num, short, OpError};
use crate::value::Val;
use ais_ir::bytecode::{Imm, Instr, Program};
use ais_ir::Opcode;
use serde_json::{json, Value as Json};
use std::sync::Arc;

/// Fills `{N}` placeholders with the text of operand `N`; `{{` and `}}` are
/// literal braces; anything else (including `{name}` or an out-of-range
/// `{N}`) stays literal.
pub fn fill_template(t: &str, args: &[Val]) -> String {
    let mut out = String::with_capacity(t.len());
    let mut rest = t;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
            continue;
        }
        if let Some(r) = tail.strip_prefix('}') {
            out.push('}');
            rest = r;
            continue;
        }
        let after = &tail[1..];
        let hole = after.find('}').and_then(|j| {
            let digits = &after[..j];
            let ok = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
            ok.then(|| digits.parse::<usize>().ok().and_then(|n| args.get(n)))
                .flatten()
                .map(|v| (v, j))
        });
        match hole {
            Some((v, j)) => {
                out.push_str(&v.text());
                rest = &after[j + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Truthiness: `false`, `null`, `0`, `""`, `[]` and `{}` are false.
pub fn truthy(v: &Val) -> bool {
    match v {
        Val::Null | Val::Ord => false,
        Val::Bool(b) => *b,
        Val::Num(n) => *n != 0.0,
        Val::Str(s) => !s.is_empty(),
        Val::List(xs) => !xs.is_empty(),
        Val::Json(j) => match &**j {
            Json::Null => false,
            Json::Bool(b) => *b,
            Json::Number(n) => n.as_f64() != Some(0.0),
            Json::String(s) => !s.is_empty(),
            Json::Array(a) => !a.is_empty(),
            Json::Object(o) => !o.is_empty(),
        },
    }
}

/// Does `v` have type `t`? (`null` fits everything; dynamic types accept all.)
pub fn fits(v: &Val, t: &ais_ir::Type) -> bool {
    use ais_ir::Type;
    match (t, v) {
        (_, Val::Null) => true,
        (Type::Json | Type::Opaque(_), _) => !matches!(v, Val::Ord),
        (Type::Str, Val::Str(_)) | (Type::Number, Val::Num(_)) | (Type::Bool, Val::Bool(_)) => true,
        (Type::Ord, Val::Ord) => true,
        (Type::List(e), _) => v.items().is_some_and(|xs| xs.iter().all(|x| fits(x, e))),
        _ => false,
    }
}

fn compare(a: &Val, b: &Val) -> Result<std::cmp::Ordering, OpError> {
    if let (Some(x), Some(y)) = (a.as_num(), b.as_num()) {
        return x
            .partial_cmp(&y)
            .ok_or_else(|| OpError::new("type.nan", "cannot compare NaN"));
    }
    match (a, b) {
        (Val::Str(x), Val::Str(y)) => Ok(x.cmp(y)),
        _ => Err(OpError::new(
            "type.not_comparable",
            format!(
                "cannot order {} `{}` and {} `{}` (numbers with numbers, text with text)",
                a.kind(),
                short(&a.text()),
                b.kind(),
                short(&b.text())
            ),
        )),
    }
}

/// Evaluates a pure op on its data operands.
pub fn eval_pure(program: &Program, instr: &Instr, args: &[Val]) -> Result<Val, OpError> {
    use Opcode as O;
    let bin = |f: fn(f64, f64) -> Result<f64, OpError>| -> Result<Val, OpError> {
        Ok(Val::Num(f(num(arg(args, 0)?)?, num(arg(args, 1)?)?)?))
    };
    let cmp = |f: fn(std::cmp::Ordering) -> bool| -> Result<Val, OpError> {
        Ok(Val::Bool(f(compare(arg(args, 0)?, arg(args, 1)?)?)))
    };
    Ok(match instr.opcode {
        O::Const => match &instr.imm {
            Imm::Const(c) => program
                .consts
                .get(*c as usize)
                .and_then(|c| c.to_json())
                .map(Val::from_json)
                .ok_or_else(|| OpError::new("internal.const", "bad constant"))?,
            _ => return Err(OpError::new("internal.const", "bad constant")),
        },
        O::Template => match &instr.imm {
            Imm::Template(t) => Val::str(fill_template(t, args)),
            _ => return Err(OpError::new("internal.template", "bad template")),
        },
        O::Concat => {
            let mut s = String::new();
            for a in args {
                s.push_str(&a.text());
            }
            Val::str(s)
        }
        O::Merge => Val::str(args.iter().map(Val::text).collect::<Vec<_>>().join("\n\n")),
        // A list of the values themselves (shared, not copied into JSON):
        // it reads, prints and indexes like the JSON array it stands for.
        O::WaitAll => Val::List(Arc::from(args.to_vec())),
        O::List => Val::List(Arc::from(args.to_vec())),
        O::Index => {
            let c = arg(args, 0)?;
            let i = arg(args, 1)?;
            index(c, i)?
        }
        O::Member => {
            let Imm::Field(f) = &instr.imm else {
                return Err(OpError::new("internal.member", "bad field"));
            };
            member(arg(args, 0)?, f)?
        }
        O::Add => bin(|a, b| Ok(a + b))?,
        O::Sub => bin(|a, b| Ok(a - b))?,
        O::Mul => bin(|a, b| Ok(a * b))?,
        O::Div => bin(|a, b| {
            if b == 0.0 {
                Err(OpError::new("arith.div_by_zero", "division by zero"))
            } else {
                Ok(a / b)
            }
        })?,
        O::Mod => bin(|a, b| {
            if b == 0.0 {
                Err(OpError::new("arith.div_by_zero", "remainder by zero"))
            } else {
                Ok(a % b)
            }
        })?,
        O::Neg => Val::Num(-num(arg(args, 0)?)?),
        O::Eq => Val::Bool(arg(args, 0)?.same(arg(args, 1)?)),
        O::Ne => Val::Bool(!arg(args, 0)?.same(arg(args, 1)?)),
        O::Lt => cmp(|o| o.is_lt())?,
        O::Le => cmp(|o| o.is_le())?,
        O::Gt => cmp(|o| o.is_gt())?,
        O::Ge => cmp(|o| o.is_ge())?,
        O::And => Val::Bool(boolean(arg(args, 0)?)? && boolean(arg(args, 1)?)?),
        O::Or => Val::Bool(boolean(arg(args, 0)?)? || boolean(arg(args, 1)?)?),
        O::Not => Val::Bool(!boolean(arg(args, 0)?)?),
        O::ToStr => Val::str(arg(args, 0)?.text()),
        O::ToBool => Val::Bool(truthy(arg(args, 0)?)),
        O::ToNum => {
            let v = arg(args, 0)?;
            let n = match v {
                Val::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
                Val::Str(s) => s.trim().parse::<f64>().ok().filter(|n| n.is_finite()),
                Val::Json(j) => match &**j {
                    Json::String(s) => s.trim().parse::<f64>().ok().filter(|n| n.is_finite()),
                    other => other.as_f64(),
                },
                other => other.as_num(),
            };
            match n {
                Some(n) => Val::Num(n),
                None => {
                    return Err(OpError::new(
                        "type.not_a_number",
                        format!(
                            "{}: {} `{}` is not a number",
                            arg(args, 1)?.text(),
                            v.kind(),
                            short(&v.text())
                        ),
                    )
                    .with_payload(json!({"value": v.to_json()})))
                }
            }
        }
        O::Object => {
            let Imm::Keys(keys) = &instr.imm else {
                return Err(OpError::new("internal.object", "bad keys"));
            };
            let m: serde_json::Map<String, Json> = keys
                .iter()
                .zip(args)
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect();
            Val::Json(Arc::new(Json::Object(m)))
        }
        O::Cast => {
            let Imm::Cast(t) = &instr.imm else {
                return Err(OpError::new("internal.cast", "bad cast"));
            };
            let ty = program.type_of(*t);
            let v = arg(args, 0)?;
            if !fits(v, &ty) {
                return Err(OpError::new(
                    "type.cast",
                    format!("expected {ty}, got {} `{}`", v.kind(), short(&v.text())),
                )
                .with_payload(json!({"expected": ty.to_string(), "value": v.to_json()})));
            }
            v.clone()
        }
        other => {
            return Err(OpError::new(
                "internal.not_pure",
                format!("`{other}` is not a pure op"),
            ))
        }
    })
}

pub(super) fn index(c: &Val, i: &Val) -> Result<Val, OpError> {
    let oob = |n: f64, len: usize| {
        OpError::new(
            "index.out_of_range",
            format!("index {n} out of range (length {len})"),
        )
    };
    match (c, i) {
        (Val::List(xs), _) => {
            let n = num(i)?;
            if n < 0.0 || n.fract() != 0.0 || n as usize >= xs.len() {
                return Err(oob(n, xs.len()));
            }
            Ok(xs[n as usize].clone())
        }
        (Val::Json(j), _) => match (&**j, i) {
            (Json::Array(xs), _) => {
                let n = num(i)?;
                if n < 0.0 || n.fract() != 0.0 || n as usize >= xs.len() {
                    return Err(oob(n, xs.len()));
                }
                Ok(Val::from_json(xs[n as usize].clone()))
            }
            (Json::Object(m), key) => Ok(m
                .get(&key.text())
                .cloned()
                .map(Val::from_json)
                .unwrap_or(Val::Null)),
            _ => Err(OpError::ty("list", c)),
        },
        (Val::Str(s), _) => {
            // Strings index by character.
            let n = num(i)?;
            let len = s.chars().count();
            if n < 0.0 || n.fract() != 0.0 || n as usize >= len {
                return Err(oob(n, len));
            }
            Ok(Val::str(
                s.chars()
                    .nth(n as usize)
                    .map(String::from)
                    .unwrap_or_default(),
            ))
        }
        _ => Err(OpError::ty("list", c)),
    }
}

pub(super) fn member(v: &Val, field: &str) -> Result<Val, OpError> {
    match v {
        Val::Json(j) => match &**j {
            Json::Object(m) => Ok(m
                .get(field)
                .cloned()
                .map(Val::from_json)
                .unwrap_or(Val::Null)),
            _ => Err(OpError::ty("object", v)),
        },
        // An LLM reply may hold JSON text.
        Val::Str(s) => match serde_json::from_str::<Json>(s) {
            Ok(Json::Object(m)) => Ok(m
                .get(field)
                .cloned()
                .map(Val::from_json)
                .unwrap_or(Val::Null)),
            _ => Err(OpError::ty("object", v)),
        },
        _ => Err(OpError::ty("object", v)),
    }
}
