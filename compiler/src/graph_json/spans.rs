//! Byte spans of the parts of a JSON text, by path (`nodes[3].op`), so
//! that graph diagnostics point into the file like source diagnostics.
//! serde_json reports no spans for values it accepted, hence this small
//! scanner. It runs only on text serde_json has parsed, but never panics
//! on any input: malformed text simply yields fewer spans.

use ais_ir::Span;

/// One step of a path into a JSON value.
#[derive(Clone, Debug)]
pub enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

#[derive(Debug)]
enum Kind {
    Object(Vec<(String, Tree)>),
    Array(Vec<Tree>),
    Scalar,
}

#[derive(Debug)]
pub struct Tree {
    span: Span,
    kind: Kind,
}

impl Tree {
    /// Scans `text`; `None` if it is not a JSON value.
    pub fn scan(text: &str) -> Option<Tree> {
        let mut s = Scanner {
            b: text.as_bytes(),
            i: 0,
            depth: 0,
        };
        s.value()
    }

    /// The span of the value at `path`, or of its longest existing prefix.
    pub fn span(&self, path: &[Seg<'_>]) -> Span {
        let mut t = self;
        for seg in path {
            let next = match (seg, &t.kind) {
                (Seg::Key(k), Kind::Object(fields)) => {
                    // The last of duplicate keys, as serde reads them.
                    fields.iter().rev().find(|(n, _)| n == k).map(|(_, v)| v)
                }
                (Seg::Index(i), Kind::Array(items)) => items.get(*i),
                _ => None,
            };
            match next {
                Some(n) => t = n,
                None => break,
            }
        }
        t.span
    }
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    depth: usize,
}

impl Scanner<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && self.b[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn value(&mut self) -> Option<Tree> {
        self.ws();
        let start = self.i;
        // serde_json refuses deeper nesting anyway.
        if self.depth > 256 {
            return None;
        }
        let kind = match *self.b.get(self.i)? {
            b'{' => {
                self.i += 1;
                self.depth += 1;
                let mut fields = Vec::new();
                loop {
                    self.ws();
                    match *self.b.get(self.i)? {
                        b'}' => {
                            self.i += 1;
                            break;
                        }
                        b',' => self.i += 1,
                        b'"' => {
                            let ks = self.i;
                            self.string()?;
                            let key: String =
                                serde_json::from_slice(self.b.get(ks..self.i)?).ok()?;
                            self.ws();
                            if self.b.get(self.i) != Some(&b':') {
                                return None;
                            }
                            self.i += 1;
                            let v = self.value()?;
                            fields.push((key, v));
                        }
                        _ => return None,
                    }
                }
                self.depth -= 1;
                Kind::Object(fields)
            }
            b'[' => {
                self.i += 1;
                self.depth += 1;
                let mut items = Vec::new();
                loop {
                    self.ws();
                    match *self.b.get(self.i)? {
                        b']' => {
                            self.i += 1;
                            break;
                        }
                        b',' => self.i += 1,
                        _ => items.push(self.value()?),
                    }
                }
                self.depth -= 1;
                Kind::Array(items)
            }
            b'"' => {
                self.string()?;
                Kind::Scalar
            }
            _ => {
                while self.i < self.b.len()
                    && !matches!(self.b[self.i], b',' | b'}' | b']')
                    && !self.b[self.i].is_ascii_whitespace()
                {
                    self.i += 1;
                }
                if self.i == start {
                    return None;
                }
                Kind::Scalar
            }
        };
        Some(Tree {
            span: Span::new(start, self.i),
            kind,
        })
    }

    /// Skips a string literal, quotes included.
    fn string(&mut self) -> Option<()> {
        self.i += 1;
        loop {
            match *self.b.get(self.i)? {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                _ => self.i += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_values() {
        let text = r#"{"nodes": [{"id": 1}, {"id": 2, "op": "ASK"}]}"#;
        let t = Tree::scan(text).expect("valid json");
        let s = t.span(&[Seg::Key("nodes"), Seg::Index(1), Seg::Key("op")]);
        assert_eq!(&text[s.range()], "\"ASK\"");
        // A missing step stops at the longest prefix.
        let s = t.span(&[Seg::Key("nodes"), Seg::Index(0), Seg::Key("op")]);
        assert_eq!(&text[s.range()], "{\"id\": 1}");
    }

    #[test]
    fn never_panics_on_garbage() {
        for text in ["", "{", "[1,", "\"abc", "{\"a\" 1}", "{\"a\":\"\\", "]"] {
            let _ = Tree::scan(text);
        }
    }
}
