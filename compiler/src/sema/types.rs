//! Language-level types and the compatibility rules of the checker.

use crate::syntax::ast::TypeExpr;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    /// Text: `str`, `string`, `token`, `response`, `context`.
    Str,
    Number,
    Bool,
    /// Any JSON value; checked at run time.
    Json,
    Void,
    Null,
    List(Box<Ty>),
    /// A user-named type (`goal`, `handle`, `Report`, ...): opaque, any non-void value fits.
    Named(String),
    /// The type of an expression that already produced an error; fits everywhere
    /// so one mistake is reported once.
    Unknown,
}

impl Ty {
    pub fn from_ast(t: &TypeExpr) -> Ty {
        match t {
            TypeExpr::Named(id) => Ty::from_name(&id.name),
            TypeExpr::List(inner, _) => Ty::List(Box::new(Ty::from_ast(inner))),
        }
    }

    pub fn from_name(name: &str) -> Ty {
        match name {
            "str" | "string" | "token" | "response" | "context" => Ty::Str,
            "number" | "int" | "float" => Ty::Number,
            "bool" => Ty::Bool,
            "json" => Ty::Json,
            "void" => Ty::Void,
            other => Ty::Named(other.to_string()),
        }
    }

    /// May a value of type `found` be used where `self` is expected?
    /// Text, numbers and booleans are strict; JSON and named types are dynamic.
    pub fn accepts(&self, found: &Ty) -> bool {
        use Ty::*;
        match (self, found) {
            (Unknown, _) | (_, Unknown) => true,
            (Void, Void) => true,
            (_, Void) | (Void, _) => false,
            (Json | Named(_), _) => true,
            (_, Json | Named(_) | Null) => true,
            (Str, Str) | (Number, Number) | (Bool, Bool) => true,
            (List(a), List(b)) => a.accepts(b),
            _ => false,
        }
    }

    pub fn is_void(&self) -> bool {
        *self == Ty::Void
    }

    /// Text-like for `+` concatenation.
    pub fn is_text(&self) -> bool {
        *self == Ty::Str
    }

    pub fn is_dynamic(&self) -> bool {
        matches!(self, Ty::Json | Ty::Named(_) | Ty::Unknown | Ty::Null)
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Str => f.write_str("str"),
            Ty::Number => f.write_str("number"),
            Ty::Bool => f.write_str("bool"),
            Ty::Json => f.write_str("json"),
            Ty::Void => f.write_str("void"),
            Ty::Null => f.write_str("null"),
            Ty::List(t) => write!(f, "list<{t}>"),
            Ty::Named(n) => f.write_str(n),
            Ty::Unknown => f.write_str("{unknown}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Ty::*;
    use super::*;

    #[test]
    fn strict_and_dynamic_types() {
        assert!(Str.accepts(&Str));
        assert!(!Number.accepts(&Str));
        assert!(!Str.accepts(&Number));
        assert!(Str.accepts(&Json), "json is checked at run time");
        assert!(Json.accepts(&Number));
        assert!(!Json.accepts(&Void));
        assert!(!Str.accepts(&Void));
        assert!(Named("goal".into()).accepts(&Str));
        assert!(List(Box::new(Str)).accepts(&List(Box::new(Str))));
        assert!(!List(Box::new(Number)).accepts(&List(Box::new(Str))));
        assert_eq!(Ty::from_name("token"), Str);
        assert_eq!(Ty::from_name("Report"), Named("Report".into()));
    }
}
