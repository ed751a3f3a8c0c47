//! `calculator`: a small arithmetic expression evaluator (recursive
//! descent; no code is ever executed).
//!
//! Grammar: `expr := term (('+'|'-') term)*`, `term := unary (('*'|'/'|'%')
//! unary)*`, `unary := '-' unary | '+' unary | power`, `power := atom ('^'
//! unary)?` (right-associative), `atom := number | name | name '(' args ')'
//! | '(' expr ')'`. Names: `pi`, `e`; functions: `sqrt abs ln log10 log2 exp
//! sin cos tan asin acos atan floor ceil round trunc min max pow`.

use crate::ToolError;
use serde_json::{json, Value as Json};

/// Deepest nesting accepted (keeps the recursion bounded).
const MAX_DEPTH: usize = 200;

pub fn calculator(args: &Json) -> Result<Json, ToolError> {
    let expr = match args {
        Json::String(s) => s.as_str(),
        _ => crate::str_arg(args, "calculator", "expression")?,
    };
    let v = eval(expr).map_err(|e| {
        ToolError::new("calculator.error", format!("cannot evaluate `{expr}`: {e}"))
            .with_payload(json!({"expression": expr, "error": e}))
    })?;
    // Whole numbers come back as integers.
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        return Ok(json!(v as i64));
    }
    serde_json::Number::from_f64(v)
        .map(Json::Number)
        .ok_or_else(|| ToolError::new("calculator.error", "the result is not a finite number"))
}

/// Evaluates an arithmetic expression.
pub fn eval(src: &str) -> Result<f64, String> {
    let mut p = Parser {
        s: src.as_bytes(),
        i: 0,
        depth: 0,
    };
    let v = p.expr()?;
    p.ws();
    if p.i < p.s.len() {
        return Err(format!("unexpected `{}` at offset {}", p.rest(), p.i));
    }
    if !v.is_finite() {
        return Err("the result is not a finite number".into());
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    fn rest(&self) -> String {
        String::from_utf8_lossy(&self.s[self.i.min(self.s.len())..])
            .chars()
            .take(12)
            .collect()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn enter(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err("expression nested too deeply".into());
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<f64, String> {
        self.enter()?;
        let mut v = self.term()?;
        loop {
            if self.eat(b'+') {
                v += self.term()?;
            } else if self.eat(b'-') {
                v -= self.term()?;
            } else {
                break;
            }
        }
        self.depth -= 1;
        Ok(v)
    }

    fn term(&mut self) -> Result<f64, String> {
        let mut v = self.unary()?;
        loop {
            if self.eat(b'*') {
                v *= self.unary()?;
            } else if self.eat(b'/') {
                let d = self.unary()?;
                if d == 0.0 {
                    return Err("division by zero".into());
                }
                v /= d;
            } else if self.eat(b'%') {
                let d = self.unary()?;
                if d == 0.0 {
                    return Err("division by zero".into());
                }
                v %= d;
            } else {
                break;
            }
        }
        Ok(v)
    }

    fn unary(&mut self) -> Result<f64, String> {
        self.enter()?;
        let v = if self.eat(b'-') {
            -self.unary()?
        } else if self.eat(b'+') {
            self.unary()?
        } else {
            self.power()?
        };
        self.depth -= 1;
        Ok(v)
    }

    fn power(&mut self) -> Result<f64, String> {
        let base = self.atom()?;
        if self.eat(b'^') {
            let exp = self.unary()?;
            return Ok(base.powf(exp));
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<f64, String> {
        match self.peek() {
            None => Err("unexpected end of the expression".into()),
            Some(b'(') => {
                self.i += 1;
                let v = self.expr()?;
                if !self.eat(b')') {
                    return Err(format!("expected `)` at offset {}", self.i));
                }
                Ok(v)
            }
            Some(c) if c.is_ascii_digit() || c == b'.' => self.number(),
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let start = self.i;
                while self.i < self.s.len()
                    && (self.s[self.i].is_ascii_alphanumeric() || self.s[self.i] == b'_')
                {
                    self.i += 1;
                }
                let name = String::from_utf8_lossy(&self.s[start..self.i]).to_lowercase();
                if self.eat(b'(') {
                    let mut args = Vec::new();
                    if !self.eat(b')') {
                        loop {
                            args.push(self.expr()?);
                            if self.eat(b',') {
                                continue;
                            }
                            if self.eat(b')') {
                                break;
                            }
                            return Err(format!("expected `,` or `)` at offset {}", self.i));
                        }
                    }
                    return apply(&name, &args);
                }
                match name.as_str() {
                    "pi" => Ok(std::f64::consts::PI),
                    "e" => Ok(std::f64::consts::E),
                    _ => Err(format!("unknown name `{name}`")),
                }
            }
            Some(_) => Err(format!("unexpected `{}` at offset {}", self.rest(), self.i)),
        }
    }

    fn number(&mut self) -> Result<f64, String> {
        let start = self.i;
        let digits = |p: &mut Self| {
            while p.i < p.s.len() && p.s[p.i].is_ascii_digit() {
                p.i += 1;
            }
        };
        digits(self);
        if self.i < self.s.len() && self.s[self.i] == b'.' {
            self.i += 1;
            digits(self);
        }
        if self.i < self.s.len() && (self.s[self.i] == b'e' || self.s[self.i] == b'E') {
            let save = self.i;
            self.i += 1;
            if self.i < self.s.len() && (self.s[self.i] == b'+' || self.s[self.i] == b'-') {
                self.i += 1;
            }
            let exp_start = self.i;
            digits(self);
            if self.i == exp_start {
                self.i = save;
            }
        }
        let text = String::from_utf8_lossy(&self.s[start..self.i]);
        text.parse::<f64>()
            .map_err(|_| format!("bad number `{text}` at offset {start}"))
    }
}

fn apply(name: &str, a: &[f64]) -> Result<f64, String> {
    let one = |f: fn(f64) -> f64| match a {
        [x] => Ok(f(*x)),
        _ => Err(format!("`{name}` takes 1 argument, got {}", a.len())),
    };
    match name {
        "sqrt" => match a {
            [x] if *x < 0.0 => Err("square root of a negative number".into()),
            _ => one(f64::sqrt),
        },
        "abs" => one(f64::abs),
        "ln" => one(f64::ln),
        "log10" | "log" => one(f64::log10),
        "log2" => one(f64::log2),
        "exp" => one(f64::exp),
        "sin" => one(f64::sin),
        "cos" => one(f64::cos),
        "tan" => one(f64::tan),
        "asin" => one(f64::asin),
        "acos" => one(f64::acos),
        "atan" => one(f64::atan),
        "floor" => one(f64::floor),
        "ceil" => one(f64::ceil),
        "round" => one(f64::round),
        "trunc" => one(f64::trunc),
        "min" | "max" if !a.is_empty() => {
            let init = a[0];
            Ok(a[1..].iter().fold(
                init,
                |m, &x| {
                    if name == "min" {
                        m.min(x)
                    } else {
                        m.max(x)
                    }
                },
            ))
        }
        "pow" => match a {
            [x, y] => Ok(x.powf(*y)),
            _ => Err(format!("`pow` takes 2 arguments, got {}", a.len())),
        },
        _ => Err(format!("unknown function `{name}`")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic() {
        assert_eq!(eval("1 + 2 * 3").unwrap(), 7.0);
        assert_eq!(eval("(1 + 2) * 3").unwrap(), 9.0);
        assert_eq!(eval("2 ^ 3 ^ 2").unwrap(), 512.0);
        assert_eq!(eval("-2 ^ 2").unwrap(), -4.0);
        assert_eq!(eval("10 % 4").unwrap(), 2.0);
        assert_eq!(eval("max(1, 5, 3) + min(2, -1)").unwrap(), 4.0);
        assert_eq!(eval("1.5e3").unwrap(), 1500.0);
        assert!((eval("(182.40 - 151.90) / 151.90 * 100").unwrap() - 20.0790).abs() < 1e-3);
        assert!((eval("sqrt(16) + pi").unwrap() - 7.14159).abs() < 1e-4);
    }

    #[test]
    fn errors() {
        assert!(eval("1 / 0").is_err());
        assert!(eval("1 +").is_err());
        assert!(eval("foo(1)").is_err());
        assert!(eval("2 ) 3").is_err());
        assert!(eval("system(\"rm\")").is_err());
        assert!(eval(&"(".repeat(10_000)).is_err());
        assert!(eval("sqrt(-1)").is_err());
        assert_eq!(
            calculator(&json!({"expression": "6*7"})).unwrap(),
            json!(42)
        );
        assert_eq!(
            calculator(&json!({})).unwrap_err().code,
            "tool.invalid_args"
        );
    }
}
