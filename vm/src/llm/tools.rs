//! Tool names between programs and providers.
//!
//! Programs name tools freely (`fs.read`, long qualified names); OpenAI and
//! Anthropic accept only `^[a-zA-Z0-9_-]{1,64}$`. [`ToolNames`] maps each
//! offered tool to a name the provider takes (`.` → `__`, other characters
//! → `_`, too long or clashing → cut and suffixed with a hash) and back.
//! A name the model sends that was never offered is kept as sent, so the
//! VM can tell the model the tool is unknown.

use super::ToolSpec;

/// The longest tool name OpenAI and Anthropic accept.
pub const MAX_NAME: usize = 64;

/// Offered tools' program names and wire names, in offer order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolNames {
    pairs: Vec<(String, String)>,
}

impl ToolNames {
    pub fn new(tools: &[ToolSpec]) -> ToolNames {
        let mut pairs: Vec<(String, String)> = Vec::with_capacity(tools.len());
        // Names that are valid as they are keep them, so they are taken
        // first and a mapped name never shadows one.
        let valid: Vec<&str> = tools
            .iter()
            .map(|t| t.name.as_str())
            .filter(|n| is_wire_name(n))
            .collect();
        for t in tools {
            if pairs.iter().any(|(p, _)| p == &t.name) {
                continue;
            }
            let wire = if is_wire_name(&t.name) {
                t.name.clone()
            } else {
                let simple = simple_form(&t.name);
                let taken = |w: &str| valid.contains(&w) || pairs.iter().any(|(_, x)| x == w);
                if simple.len() <= MAX_NAME && !simple.is_empty() && !taken(&simple) {
                    simple
                } else {
                    hashed_form(&simple, &t.name)
                }
            };
            pairs.push((t.name.clone(), wire));
        }
        ToolNames { pairs }
    }

    /// The name the provider sees for program tool `name` (unchanged when
    /// it was not offered).
    pub fn to_wire<'a>(&'a self, name: &'a str) -> &'a str {
        self.pairs
            .iter()
            .find(|(p, _)| p == name)
            .map(|(_, w)| w.as_str())
            .unwrap_or(name)
    }

    /// The program name for a name the model sent (unchanged when no
    /// offered tool has it).
    pub fn from_wire<'a>(&'a self, wire: &'a str) -> &'a str {
        self.pairs
            .iter()
            .find(|(_, w)| w == wire)
            .map(|(p, _)| p.as_str())
            .unwrap_or(wire)
    }
}

/// True for names OpenAI and Anthropic accept as they are.
pub fn is_wire_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn simple_form(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        match c {
            '.' => out.push_str("__"),
            c if c.is_ascii_alphanumeric() || c == '_' || c == '-' => out.push(c),
            _ => out.push('_'),
        }
    }
    out
}

/// `simple` cut to fit, then `_` and 8 hex digits of the program name's
/// FNV-1a hash (distinct program names get distinct suffixes but for
/// collisions of a 32-bit hash).
fn hashed_form(simple: &str, name: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    let keep = MAX_NAME - 9;
    let head: String = simple.chars().take(keep).collect();
    format!("{head}_{h:08x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        }
    }

    #[test]
    fn names_map_to_valid_wire_names_and_back() {
        let long = "a".repeat(80);
        let names = [
            "fs.read",
            "ok_name",
            "weird name!",
            long.as_str(),
            "fs__read",
        ];
        let tools: Vec<ToolSpec> = names.iter().map(|n| tool(n)).collect();
        let map = ToolNames::new(&tools);
        let wires: Vec<&str> = names.iter().map(|n| map.to_wire(n)).collect();
        for (n, w) in names.iter().zip(&wires) {
            assert!(is_wire_name(w), "{n} -> {w}");
            assert_eq!(map.from_wire(w), *n);
        }
        assert_eq!(map.to_wire("ok_name"), "ok_name");
        // `fs__read` is valid and offered, so `fs.read` may not take it.
        assert_eq!(map.to_wire("fs__read"), "fs__read");
        assert_ne!(map.to_wire("fs.read"), "fs__read");
        let mut unique = wires.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), wires.len());
        assert_eq!(map.from_wire("never_offered"), "never_offered");
    }

    #[test]
    fn a_dotted_name_becomes_double_underscores() {
        let map = ToolNames::new(&[tool("web.search")]);
        assert_eq!(map.to_wire("web.search"), "web__search");
        assert_eq!(map.from_wire("web__search"), "web.search");
    }
}
