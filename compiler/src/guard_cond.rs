//! The reference's guard condition language (`"> 0.8"`, `"!= null"`,
//! `"not_empty"`, ...), shared by graph JSON's `GUARD` and source
//! `guard(value, condition: "...")`. Both lower a parsed condition to pure
//! ops over the guarded value, so the VM needs no second evaluator.

/// A parsed condition.
#[derive(Clone, Debug, PartialEq)]
pub enum Cond {
    /// `not_empty` (`false`) or `is_empty` (`true`): null, `""`, `[]` and
    /// `{}` are empty.
    Empty(bool),
    IsNull,
    NotNull,
    /// `is_true`/`true` or `is_false`/`false`: the value is that bool.
    Is(bool),
    /// `>`, `>=`, `<`, `<=`, `==`, `!=` against a number or a text.
    Compare(&'static str, Rhs),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Rhs {
    Number(f64),
    Text(String),
}

/// Parses a condition. Anything else means "not null", as in the
/// reference.
pub fn parse(condition: &str) -> Cond {
    let c = condition.trim();
    match c {
        "not_empty" => return Cond::Empty(false),
        "is_empty" => return Cond::Empty(true),
        "is_null" => return Cond::IsNull,
        "not_null" => return Cond::NotNull,
        "is_true" | "true" => return Cond::Is(true),
        "is_false" | "false" => return Cond::Is(false),
        _ => {}
    }
    for op in [">=", "<=", "!=", "==", ">", "<"] {
        if let Some(rest) = c.strip_prefix(op) {
            let rhs = rest.trim();
            return Cond::Compare(
                op,
                match rhs.parse::<f64>() {
                    Ok(n) if n.is_finite() => Rhs::Number(n),
                    _ => Rhs::Text(rhs.trim_matches('"').trim_matches('\'').to_string()),
                },
            );
        }
    }
    Cond::NotNull
}

/// Whether a string is written in the condition language (used to warn
/// about `guard(x, "> 0.8")`, where the string would be the message).
pub fn looks_like_condition(s: &str) -> bool {
    let c = s.trim();
    matches!(
        c,
        "not_empty" | "is_empty" | "is_null" | "not_null" | "is_true" | "is_false"
    ) || [">=", "<=", "!=", "==", ">", "<"]
        .iter()
        .any(|op| c.starts_with(op))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_parse_as_the_reference_reads_them() {
        assert_eq!(parse("> 0.8"), Cond::Compare(">", Rhs::Number(0.8)));
        assert_eq!(parse(">=1"), Cond::Compare(">=", Rhs::Number(1.0)));
        assert_eq!(
            parse("== \"done\""),
            Cond::Compare("==", Rhs::Text("done".into()))
        );
        assert_eq!(
            parse("!= null"),
            Cond::Compare("!=", Rhs::Text("null".into()))
        );
        assert_eq!(parse(" not_empty "), Cond::Empty(false));
        assert_eq!(parse("true"), Cond::Is(true));
        assert_eq!(parse("whatever"), Cond::NotNull);
        assert!(looks_like_condition("> 0.8"));
        assert!(!looks_like_condition("confidence too low"));
    }
}
