//! What a `qmem` query means, in one place. The AAM's tiers, a `try`
//! body's buffered writes (`crate::tx`), the test host and the reference
//! interpreter all read a query through [`MemQuery`], so a value is found
//! (or not) the same way wherever it is held:
//!
//! - `""` or `"*"`: every entry;
//! - `p*` (any other text ending in `*`): entries whose key starts with `p`;
//! - anything else: first the entry whose key is exactly the query, if
//!   there is one (its value, not a list); otherwise the entries whose key
//!   or text contains every word of the query as a whole word (letters and
//!   digits, ignoring case; [`words`]). A query with no word finds nothing.
//!
//! The LTM tier's word search runs in the store (FTS5 or a PostgreSQL
//! `tsquery`) with the same words and the same all-words rule.

use serde_json::Value as Json;
use std::collections::HashSet;

/// A parsed `qmem` query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemQuery<'q> {
    /// `""` or `"*"`.
    Everything,
    /// `p*`: keys starting with `p`.
    Prefix(&'q str),
    /// An exact key first, else every word.
    Words { exact: &'q str, words: Vec<String> },
}

impl<'q> MemQuery<'q> {
    pub fn parse(q: &'q str) -> MemQuery<'q> {
        if q.is_empty() || q == "*" {
            MemQuery::Everything
        } else if let Some(p) = q.strip_suffix('*') {
            MemQuery::Prefix(p)
        } else {
            MemQuery::Words {
                exact: q,
                words: words(q),
            }
        }
    }

    /// The key an exact lookup tries first (word queries only).
    pub fn exact_key(&self) -> Option<&'q str> {
        match self {
            MemQuery::Words { exact, .. } => Some(exact),
            _ => None,
        }
    }

    /// Does an entry stored under `key` with `value` belong to the list
    /// result?
    pub fn matches(&self, key: &str, value: &Json) -> bool {
        match self {
            MemQuery::Everything => true,
            MemQuery::Prefix(p) => key.starts_with(p),
            MemQuery::Words { words: ws, .. } => {
                if ws.is_empty() {
                    return false;
                }
                let have: HashSet<String> = words(&format!("{key} {}", text_of(value)))
                    .into_iter()
                    .collect();
                ws.iter().all(|w| have.contains(w))
            }
        }
    }
}

/// A value's text as a query sees it: a string's own text, else its JSON.
pub fn text_of(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The distinct lower-cased words of `s` (runs of letters and digits), in
/// order of first appearance.
pub fn words(s: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen = HashSet::new();
    for w in s
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let w = w.to_lowercase();
        if seen.insert(w.clone()) {
            out.push(w);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_three_forms_of_a_query() {
        assert_eq!(MemQuery::parse("*"), MemQuery::Everything);
        assert_eq!(MemQuery::parse(""), MemQuery::Everything);
        assert_eq!(MemQuery::parse("user.*"), MemQuery::Prefix("user."));
        // A query ending in `*` is a prefix even when it looks like markup.
        assert_eq!(MemQuery::parse("**bold**"), MemQuery::Prefix("**bold*"));
        let q = MemQuery::parse("Billing bug");
        assert_eq!(q.exact_key(), Some("Billing bug"));
        assert!(q.matches("#1", &json!("a bug in billing")));
        assert!(!q.matches("#1", &json!("billing only")));
        // Whole words: `bug` is not in `debugging`.
        assert!(!q.matches("billing", &json!("debugging")));
        assert!(!MemQuery::parse("--").matches("--", &json!("--")));
    }
}
