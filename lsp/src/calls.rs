//! The call the cursor is in, found from the text rather than the syntax
//! tree: signature help and argument completion are asked for while a call
//! is being typed, when the line does not parse yet.

/// A call whose parentheses hold the cursor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallSite {
    /// The callee as written: `ask`, `summarize`, `Researcher.research`.
    pub callee: String,
    /// Byte offset of the `(`.
    pub open: usize,
    /// Index of the argument holding the cursor (top-level commas before it).
    pub arg: usize,
    /// `name` when the cursor's argument is written `name: ...`.
    pub named: Option<String>,
    /// Names of the named arguments written in the call so far (the current
    /// one included).
    pub names_written: Vec<String>,
    /// The cursor's argument from its start to the cursor, leading blanks
    /// dropped.
    pub typed: String,
}

struct Frame {
    open: usize,
    paren: bool,
    commas: usize,
    arg_start: usize,
    names: Vec<String>,
}

/// The innermost call around `offset`, or `None` outside any call's
/// parentheses (or inside a comment).
pub fn call_at(text: &str, offset: usize) -> Option<CallSite> {
    let bytes = text.as_bytes();
    let end = offset.min(bytes.len());
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < end {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                match bytes[i..].iter().position(|&c| c == b'\n') {
                    Some(n) if i + n < end => i += n,
                    _ => return None,
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let close = block_comment_end(bytes, i)?;
                if close > end {
                    return None;
                }
                i = close;
                continue;
            }
            q @ (b'"' | b'\'') => {
                // A string the cursor is in still counts as the argument.
                i += 1;
                while i < end && bytes[i] != q {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            c @ (b'(' | b'[' | b'{') => stack.push(Frame {
                open: i,
                paren: c == b'(',
                commas: 0,
                arg_start: i + 1,
                names: Vec::new(),
            }),
            b')' | b']' | b'}' => {
                stack.pop();
            }
            b',' => {
                if let Some(f) = stack.last_mut() {
                    if let Some(n) = text.get(f.arg_start..i).and_then(arg_name) {
                        f.names.push(n.to_string());
                    }
                    f.commas += 1;
                    f.arg_start = i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    // The nearest `(`; a block between it and the cursor means the cursor
    // is in a statement, not an argument (a `[` is a list argument).
    let frame = stack
        .iter()
        .rev()
        .take_while(|f| f.paren || bytes[f.open] == b'[')
        .find(|f| f.paren)?;
    let callee = callee_before(text, frame.open)?;
    let typed = text
        .get(frame.arg_start..end)
        .unwrap_or("")
        .trim_start()
        .to_string();
    let named = arg_name(&typed).map(str::to_string);
    let mut names_written = frame.names.clone();
    names_written.extend(named.clone());
    Some(CallSite {
        callee,
        open: frame.open,
        arg: frame.commas,
        named,
        names_written,
        typed,
    })
}

/// The offset just past the `*/` closing the comment opened at `start`
/// (comments nest), or `None` when it is never closed.
fn block_comment_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = start;
    while i + 1 < bytes.len() {
        if bytes[i] == b'/' && bytes[i + 1] == b'*' {
            depth += 1;
            i += 2;
        } else if bytes[i] == b'*' && bytes[i + 1] == b'/' {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return Some(i);
            }
        } else {
            i += 1;
        }
    }
    None
}

/// `name` of an argument written `name: value` (not `name::`).
fn arg_name(arg: &str) -> Option<&str> {
    let arg = arg.trim_start();
    let len = arg
        .bytes()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_')
        .count();
    let (name, rest) = arg.split_at(len);
    let first_ok = name
        .bytes()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_');
    (first_ok && rest.trim_start().starts_with(':')).then_some(name)
}

/// `ask`, `Agent.flow`: the dotted name right before `(`; `None` for a
/// parenthesised expression or a keyword (`loop (`, `catch (`).
fn callee_before(text: &str, open: usize) -> Option<String> {
    let before = text.get(..open)?.trim_end();
    let start = before
        .char_indices()
        .rev()
        .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let callee = &before[start..];
    let ok = callee.split('.').all(|seg| {
        seg.bytes()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
    });
    let keyword = matches!(callee, "if" | "loop" | "catch" | "switch" | "return" | "in");
    (ok && !keyword).then(|| callee.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(text_with_cursor: &str) -> Option<CallSite> {
        let offset = text_with_cursor.find('|').unwrap_or(0);
        let text = text_with_cursor.replace('|', "");
        call_at(&text, offset)
    }

    #[test]
    fn finds_the_innermost_call_its_argument_and_named_arguments() {
        let s = site("let a = ask(\"q, (x\", model: \"m\", temp|").expect("call");
        assert_eq!(s.callee, "ask");
        assert_eq!(s.arg, 2);
        assert_eq!(s.named, None);
        assert_eq!(s.names_written, vec!["model".to_string()]);
        assert_eq!(s.typed, "temp");

        let s = site("Researcher.research(topic: f(x), |").expect("call");
        assert_eq!(s.callee, "Researcher.research");
        assert_eq!(s.arg, 1);

        let s = site("ask(prompt: \"a {b}|").expect("call in a string");
        assert_eq!(s.named.as_deref(), Some("prompt"));

        let s = site("ask(tools: [a, |").expect("call around a list");
        assert_eq!((s.callee.as_str(), s.arg), ("ask", 0));
    }

    #[test]
    fn no_call_outside_parentheses_in_comments_or_after_keywords() {
        assert_eq!(site("let a = ask(x) |"), None);
        assert_eq!(site("ask(x // note |"), None);
        assert_eq!(site("loop (item in |"), None);
        assert_eq!(site("let b = (1 + |"), None);
        assert_eq!(site("f(x, { |"), None);
        assert!(site("f(/* a, b */ x, |").is_some_and(|s| s.arg == 1));
    }
}
