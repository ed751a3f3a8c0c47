//! Building the ops a reference-style node stands for: constants, templates
//! over its data inputs (`{0}` holes, `{{node_N}}` references), argument
//! objects. Shared by `reference.rs` and `refonly.rs`.

use ais_ir::{Attr, FlowData, Opcode, Region, Span, Type, Value};
use serde_json::Value as Json;

/// A data input of a node and the id of the node it comes from.
#[derive(Clone, Copy)]
pub struct Data {
    pub value: Value,
    pub from: Option<u64>,
}

/// A node's inputs: data (in operand order) and ordering tokens.
pub struct DataIn {
    pub data: Vec<Data>,
    pub tokens: Vec<Value>,
}

pub struct Build<'a> {
    pub flow: &'a mut FlowData,
    pub region: Region,
    pub span: Span,
    /// The node's name, for messages at run time (a guard's).
    pub node: String,
    /// Inputs consumed by a `{{node_N}}` reference.
    used: Vec<Value>,
}

impl<'a> Build<'a> {
    pub fn new(flow: &'a mut FlowData, region: Region, span: Span) -> Self {
        Build {
            flow,
            region,
            span,
            node: String::new(),
            used: Vec::new(),
        }
    }

    pub fn op(
        &mut self,
        opcode: Opcode,
        operands: &[Value],
        types: &[Type],
        attrs: Vec<(String, Attr)>,
    ) -> Vec<Value> {
        let op = self.flow.dfg.create_op(opcode, operands, types);
        for (k, a) in attrs {
            self.flow.dfg.ops[op].attrs.set(k, a);
        }
        self.flow.dfg.spans.insert(op, self.span);
        self.flow.dfg.append_op(self.region, op);
        self.flow.dfg.ops[op].results.to_vec()
    }

    pub fn op1(
        &mut self,
        opcode: Opcode,
        operands: &[Value],
        ty: Type,
        attrs: Vec<(String, Attr)>,
    ) -> Value {
        self.op(opcode, operands, &[ty], attrs)[0]
    }

    pub fn konst(&mut self, value: Attr, ty: Type) -> Value {
        self.op1(Opcode::Const, &[], ty, vec![("value".into(), value)])
    }

    pub fn template(&mut self, t: String, vals: &[Value]) -> Value {
        self.op1(
            Opcode::Template,
            vals,
            Type::Str,
            vec![("template".into(), Attr::Str(t))],
        )
    }

    pub fn object(&mut self, keys: Vec<Json>, vals: &[Value]) -> Value {
        self.op1(
            Opcode::Object,
            vals,
            Type::Json,
            vec![("keys".into(), Attr::Json(Json::Array(keys)))],
        )
    }

    /// Whether a `{{node_N}}` reference consumed this input.
    pub fn used(&self, d: &Data) -> bool {
        self.used.contains(&d.value)
    }

    /// The reference's LLM prompt: `{0}`-style holes filled from the data
    /// inputs when the text has a `{0}` and there are inputs; otherwise the
    /// text as is (a `{0}` with no input stays literal, `{{x}}` too) and
    /// the inputs as context.
    pub fn prompt(&mut self, text: &str, data: &[Data]) -> Vec<Value> {
        let vals: Vec<Value> = data.iter().map(|d| d.value).collect();
        if text.contains("{0}") && !data.is_empty() {
            let t = escape_keeping_holes(text);
            return vec![self.template(t, &vals)];
        }
        let mut out = vec![self.konst(Attr::Str(text.to_string()), Type::Str)];
        out.extend(vals);
        out
    }

    /// A text attribute: a `{{node_N}}` reference to a data input is that
    /// input (alone: the value itself; in text: its text); a reference to
    /// anything else stays literal, as in the reference.
    pub fn text(&mut self, s: &str, data: &[Data]) -> Value {
        if let Some(d) = whole_ref(s).and_then(|n| data.iter().find(|d| d.from == Some(n))) {
            self.used.push(d.value);
            return d.value;
        }
        match self.holes(s, data) {
            Some(v) => v,
            None => self.konst(Attr::Str(s.to_string()), Type::Str),
        }
    }

    /// A template for text with `{{node_N}}` references to data inputs, or
    /// `None` when it has none.
    pub fn holes(&mut self, s: &str, data: &[Data]) -> Option<Value> {
        let mut t = String::new();
        let mut vals: Vec<Value> = Vec::new();
        let mut rest = s;
        while let Some(i) = rest.find("{{") {
            t.push_str(&escape(&rest[..i]));
            let after = &rest[i + 2..];
            let hit = after.find("}}").and_then(|j| {
                let n = after[..j]
                    .trim()
                    .strip_prefix("node_")?
                    .parse::<u64>()
                    .ok()?;
                data.iter()
                    .find(|d| d.from == Some(n))
                    .map(|d| (d.value, j))
            });
            match hit {
                Some((v, j)) => {
                    let k = vals.iter().position(|x| *x == v).unwrap_or_else(|| {
                        vals.push(v);
                        vals.len() - 1
                    });
                    t.push_str(&format!("{{{k}}}"));
                    rest = &after[j + 2..];
                }
                None => {
                    t.push_str("{{{{");
                    rest = after;
                }
            }
        }
        if vals.is_empty() {
            return None;
        }
        t.push_str(&escape(rest));
        self.used.extend(vals.iter().copied());
        Some(self.template(t, &vals))
    }

    /// A JSON attribute value: strings as [`Build::text`], the rest constant.
    pub fn json(&mut self, v: &Json, data: &[Data]) -> Value {
        match v {
            Json::String(s) => self.text(s, data),
            other => self.konst(Attr::Json(other.clone()), Type::Json),
        }
    }
}

/// `{{node_N}}` alone.
fn whole_ref(s: &str) -> Option<u64> {
    s.trim()
        .strip_prefix("{{")?
        .strip_suffix("}}")?
        .trim()
        .strip_prefix("node_")?
        .parse()
        .ok()
}

/// Text as our template syntax, literally (`{{` and `}}` are escapes there).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '{' => out.push_str("{{"),
            '}' => out.push_str("}}"),
            c => out.push(c),
        }
    }
    out
}

/// Like [`escape`] but keeping `{N}` holes.
fn escape_keeping_holes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < s.len() {
        let c = b[i];
        if c == b'{' {
            let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits > 0 && b.get(i + 1 + digits) == Some(&b'}') {
                out.push_str(&s[i..i + digits + 2]);
                i += digits + 2;
                continue;
            }
            out.push_str("{{");
        } else if c == b'}' {
            out.push_str("}}");
        } else {
            let ch = s[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
            continue;
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_braces_survive_our_template_syntax() {
        assert_eq!(escape("a {x} }"), "a {{x}} }}");
        assert_eq!(
            escape_keeping_holes("Sum {0} of {{y}} é"),
            "Sum {0} of {{{{y}}}} é"
        );
        assert_eq!(whole_ref(" {{node_12}} "), Some(12));
        assert_eq!(whole_ref("x {{node_1}}"), None);
    }
}
