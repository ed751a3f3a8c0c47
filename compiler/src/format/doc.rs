//! A small layout algebra in the style of Wadler's "prettier printer": a
//! [`Doc`] is text with optional line breaks; a group is laid out on one
//! line when it fits in the width, else every break of the group (not of its
//! inner groups) becomes a new line.

/// Spaces per indentation level.
pub const INDENT: usize = 4;

#[derive(Clone, Debug)]
pub enum Doc {
    Text(String),
    /// A space on one line, a line break when the group breaks.
    Line,
    /// Nothing on one line, a line break when the group breaks.
    Soft,
    /// Always a line break; the groups around it break too.
    Hard,
    /// An empty line (two line breaks; no indentation on the empty one).
    Blank,
    /// Text only when the group breaks (a trailing comma).
    IfBreak(&'static str),
    /// Nothing, but the groups around it break (after a line comment).
    BreakParent,
    /// One more level of indentation after each line break inside.
    Nest(Vec<Doc>),
    /// `hard` is true when a [`Doc::Hard`] is inside: the group never fits.
    Group {
        docs: Vec<Doc>,
        hard: bool,
    },
    Concat(Vec<Doc>),
}

pub fn text(s: impl Into<String>) -> Doc {
    Doc::Text(s.into())
}

pub fn has_hard(docs: &[Doc]) -> bool {
    docs.iter().any(|d| match d {
        Doc::Hard | Doc::Blank | Doc::BreakParent => true,
        Doc::Group { hard, .. } => *hard,
        Doc::Nest(ds) | Doc::Concat(ds) => has_hard(ds),
        Doc::Text(t) => t.contains('\n'),
        _ => false,
    })
}

pub fn group(docs: Vec<Doc>) -> Doc {
    let hard = has_hard(&docs);
    Doc::Group { docs, hard }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Flat,
    Break,
}

/// Lays `doc` out in `width` columns.
pub fn render(doc: &Doc, width: usize) -> String {
    let mut r = Renderer {
        out: String::new(),
        col: 0,
        indent_pending: None,
        width,
    };
    let mut stack: Vec<(usize, Mode, &Doc)> = vec![(0, Mode::Break, doc)];
    while let Some((indent, mode, d)) = stack.pop() {
        match d {
            Doc::Text(t) => r.text(t),
            Doc::BreakParent => {}
            Doc::Line if mode == Mode::Flat => r.text(" "),
            Doc::Soft | Doc::IfBreak(_) if mode == Mode::Flat => {}
            Doc::IfBreak(t) => r.text(t),
            Doc::Line | Doc::Soft | Doc::Hard => r.newline(indent),
            Doc::Blank => {
                r.newline(indent);
                r.newline(indent);
            }
            Doc::Nest(ds) => {
                for d in ds.iter().rev() {
                    stack.push((indent + INDENT, mode, d));
                }
            }
            Doc::Concat(ds) => {
                for d in ds.iter().rev() {
                    stack.push((indent, mode, d));
                }
            }
            Doc::Group { docs, hard } => {
                let mode = if mode == Mode::Flat
                    || (!hard && r.fits(docs, &stack, r.width.saturating_sub(r.col)))
                {
                    Mode::Flat
                } else {
                    Mode::Break
                };
                for d in docs.iter().rev() {
                    stack.push((indent, mode, d));
                }
            }
        }
    }
    r.out
}

struct Renderer {
    out: String,
    col: usize,
    /// Indentation owed to the current line (written with its first text,
    /// so empty lines carry no spaces).
    indent_pending: Option<usize>,
    width: usize,
}

impl Renderer {
    fn text(&mut self, t: &str) {
        if t.is_empty() {
            return;
        }
        if let Some(n) = self.indent_pending.take() {
            self.out.extend(std::iter::repeat_n(' ', n));
            self.col = n;
        }
        self.out.push_str(t);
        match t.rfind('\n') {
            Some(i) => self.col = t.len() - i - 1,
            None => self.col += t.chars().count(),
        }
    }

    fn newline(&mut self, indent: usize) {
        // Spaces a flat `Line` left at the end of the line are dropped.
        if self.indent_pending.is_none() {
            let trimmed = self.out.trim_end_matches(' ').len();
            self.out.truncate(trimmed);
        }
        self.out.push('\n');
        self.indent_pending = Some(indent);
        self.col = indent;
    }

    /// Whether `docs` laid out flat, followed by what comes after them up to
    /// the next possible line break, fit in `room` columns.
    fn fits(&self, docs: &[Doc], rest: &[(usize, Mode, &Doc)], room: usize) -> bool {
        let mut used = 0usize;
        let mut work: Vec<(Mode, &Doc)> = docs.iter().rev().map(|d| (Mode::Flat, d)).collect();
        let mut rest_at = rest.len();
        loop {
            let (mode, d) = match work.pop() {
                Some(x) => x,
                None => {
                    if rest_at == 0 {
                        return true;
                    }
                    rest_at -= 1;
                    let (_, m, d) = rest[rest_at];
                    (m, d)
                }
            };
            match d {
                Doc::Text(t) => {
                    if t.contains('\n') {
                        return mode == Mode::Break;
                    }
                    used += t.chars().count();
                }
                Doc::BreakParent if mode == Mode::Flat => return false,
                Doc::BreakParent => {}
                Doc::Line if mode == Mode::Flat => used += 1,
                Doc::Soft | Doc::IfBreak(_) if mode == Mode::Flat => {}
                Doc::IfBreak(t) => used += t.len(),
                Doc::Line | Doc::Soft | Doc::Hard | Doc::Blank => {
                    return mode == Mode::Break;
                }
                Doc::Nest(ds) | Doc::Concat(ds) => {
                    work.extend(ds.iter().rev().map(|d| (mode, d)));
                }
                Doc::Group { docs, hard } => {
                    if *hard && mode == Mode::Flat {
                        return false;
                    }
                    work.extend(docs.iter().rev().map(|d| (mode, d)));
                }
            }
            if used > room {
                return false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(args: &[&str]) -> Doc {
        let mut inner = vec![Doc::Soft];
        for (i, a) in args.iter().enumerate() {
            if i > 0 {
                inner.push(text(","));
                inner.push(Doc::Line);
            }
            inner.push(text(*a));
        }
        inner.push(Doc::IfBreak(","));
        group(vec![text("f("), Doc::Nest(inner), Doc::Soft, text(")")])
    }

    #[test]
    fn a_group_that_fits_stays_on_one_line() {
        assert_eq!(render(&call(&["a", "b"]), 20), "f(a, b)");
    }

    #[test]
    fn a_group_that_does_not_fit_breaks_every_line() {
        assert_eq!(
            render(&call(&["aaaaaaaa", "bbbbbbbb"]), 12),
            "f(\n    aaaaaaaa,\n    bbbbbbbb,\n)"
        );
    }

    #[test]
    fn a_hard_break_breaks_its_groups_and_blank_lines_have_no_spaces() {
        let d = Doc::Nest(vec![
            text("x"),
            Doc::Blank,
            group(vec![
                text("a"),
                Doc::Line,
                text("//c"),
                Doc::Hard,
                text("b"),
            ]),
        ]);
        assert_eq!(render(&d, 80), "x\n\n    a\n    //c\n    b");
    }
}
