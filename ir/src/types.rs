//! IR value types.
//!
//! Printed forms: `str number bool json void null ord list<T>`; user-named
//! (opaque) types print with a `!` sigil, e.g. `!goal`, `!Report`, so that an
//! opaque type can never be confused with a built-in one.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Type {
    Str,
    Number,
    Bool,
    Json,
    Void,
    Null,
    /// An ordering token: carries no data, only "happens after".
    Ord,
    List(Box<Type>),
    /// A user-named type (`goal`, `handle`, `Report`, ...). Dynamically typed
    /// at run time, like `json`.
    Opaque(String),
}

impl Type {
    pub fn list(elem: Type) -> Type {
        Type::List(Box::new(elem))
    }

    /// Can a value of type `other` be used where `self` is expected?
    ///
    /// `json` and opaque types accept every data type (everything except
    /// `void` and `ord`); `list<T>` is covariant; otherwise types must be equal.
    pub fn accepts(&self, other: &Type) -> bool {
        match (self, other) {
            (Type::Json | Type::Opaque(_), o) => o.is_data(),
            (Type::List(a), Type::List(b)) => a.accepts(b),
            (a, b) => a == b,
        }
    }

    /// A type whose values carry data: not `void`, not `ord`.
    pub fn is_data(&self) -> bool {
        !matches!(self, Type::Void | Type::Ord)
    }

    /// Statically unknown shape (`json` or opaque): checked at run time.
    pub fn is_dynamic(&self) -> bool {
        matches!(self, Type::Json | Type::Opaque(_))
    }

    /// The element type of a list, `json` for dynamic containers.
    pub fn element(&self) -> Option<Type> {
        match self {
            Type::List(t) => Some((**t).clone()),
            t if t.is_dynamic() => Some(Type::Json),
            _ => None,
        }
    }

    /// Parses the printed form (`str`, `list<number>`, `!Report`). Also
    /// accepts the source-language spellings `string` and `token`.
    pub fn parse(text: &str) -> Option<Type> {
        let text = text.trim();
        if let Some(inner) = text.strip_prefix("list<").and_then(|r| r.strip_suffix('>')) {
            return Type::parse(inner).map(Type::list);
        }
        if let Some(name) = text.strip_prefix('!') {
            return is_type_name(name).then(|| Type::Opaque(name.to_string()));
        }
        Type::from_keyword(text)
    }

    /// A built-in type keyword (no `list`, no opaque names).
    pub fn from_keyword(word: &str) -> Option<Type> {
        Some(match word {
            "str" | "string" => Type::Str,
            "number" => Type::Number,
            "bool" => Type::Bool,
            "json" => Type::Json,
            "void" => Type::Void,
            "null" => Type::Null,
            "ord" | "token" => Type::Ord,
            _ => return None,
        })
    }
}

/// Valid opaque type name: identifier characters (and dots), non-empty.
pub fn is_type_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Str => f.write_str("str"),
            Type::Number => f.write_str("number"),
            Type::Bool => f.write_str("bool"),
            Type::Json => f.write_str("json"),
            Type::Void => f.write_str("void"),
            Type::Null => f.write_str("null"),
            Type::Ord => f.write_str("ord"),
            Type::List(t) => write!(f, "list<{t}>"),
            Type::Opaque(n) => write!(f, "!{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_rules() {
        let report = Type::Opaque("Report".into());
        assert!(Type::Json.accepts(&Type::Str));
        assert!(!Type::Json.accepts(&Type::Ord));
        assert!(!Type::Json.accepts(&Type::Void));
        assert!(report.accepts(&Type::Number));
        assert!(!report.accepts(&Type::Ord));
        assert!(Type::list(Type::Json).accepts(&Type::list(Type::Str)));
        assert!(!Type::list(Type::Str).accepts(&Type::list(Type::Json)));
        assert!(!Type::Str.accepts(&Type::Json));
        assert!(Type::Ord.accepts(&Type::Ord));
    }

    #[test]
    fn display_parse_round_trip() {
        for t in [
            Type::Str,
            Type::Ord,
            Type::Null,
            Type::list(Type::list(Type::Bool)),
            Type::Opaque("goal".into()),
        ] {
            assert_eq!(Type::parse(&t.to_string()), Some(t));
        }
        assert_eq!(Type::parse("string"), Some(Type::Str));
        assert_eq!(Type::parse("!"), None);
        assert_eq!(Type::parse("list<"), None);
    }
}
