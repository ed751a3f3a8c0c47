//! Tokens and the lexer (logos), plus the newline filter that turns raw line
//! breaks into statement separators only where a statement can end.
//!
//! The lexer never fails as a whole: problems (stray characters, bad escapes,
//! unterminated strings or comments) are collected as [`LexError`]s and lexing
//! goes on, so the parser still sees a useful token stream.

use ais_ir::Span;
use logos::Logos;
use std::fmt;
use std::rc::Rc;

/// A piece of a string literal: literal text or an interpolated `{name}`.
#[derive(Clone, Debug, PartialEq)]
pub enum StrPart {
    Text(String),
    /// `{name}` (or `{name.field...}`) inside a string; the span covers what
    /// is inside the braces.
    Interp(String, Span),
}

/// A decoded string literal (escapes resolved, template holes split out).
#[derive(Clone, Debug, PartialEq)]
pub struct StrLit {
    pub parts: Vec<StrPart>,
    pub span: Span,
}

impl StrLit {
    /// The text with holes written back as `{name}` (for prompts, messages).
    pub fn text(&self) -> String {
        let mut s = String::new();
        for p in &self.parts {
            match p {
                StrPart::Text(t) => s.push_str(t),
                StrPart::Interp(n, _) => {
                    s.push('{');
                    s.push_str(n);
                    s.push('}');
                }
            }
        }
        s
    }

    pub fn has_holes(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, StrPart::Interp(..)))
    }

    /// True when the literal is empty or only whitespace and has no holes.
    pub fn is_blank(&self) -> bool {
        !self.has_holes() && self.text().trim().is_empty()
    }
}

/// What went wrong while lexing; turned into E0001..E0007 diagnostics.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum LexErrorKind {
    #[default]
    UnexpectedChar,
    UnterminatedString,
    UnterminatedComment,
    InvalidNumber,
    InvalidEscape(String),
    /// Brackets or prefix operators nested past [`MAX_NESTING`].
    TooDeep,
}

/// The reserved words (docs/language.md, "Identifiers"): each lexes as its
/// own token, never as a name.
pub const RESERVED_WORDS: &[&str] = &[
    "agent",
    "flow",
    "memory",
    "beliefs",
    "goals",
    "capability",
    "on",
    "if",
    "else",
    "let",
    "return",
    "parallel",
    "loop",
    "in",
    "try",
    "catch",
    "switch",
    "case",
    "default",
    "true",
    "false",
    "null",
    "from",
    "import",
];

/// How deeply brackets (and chains of prefix or postfix operators) may nest.
pub const MAX_NESTING: usize = 1024;

#[derive(Clone, Debug, PartialEq)]
pub struct LexError {
    pub kind: LexErrorKind,
    pub span: Span,
}

/// Raw tokens straight from logos. `Newline` is filtered by [`lex`].
#[derive(Logos, Clone, Debug, PartialEq)]
#[logos(error = LexErrorKind)]
#[logos(skip r"[ \t\r\f\u{feff}]+")]
enum Raw {
    #[regex(r"//[^\n]*", allow_greedy = true)]
    LineComment,
    #[token("/*", block_comment)]
    BlockComment,
    #[token("\n")]
    Newline,
    #[token(";")]
    Semi,

    #[token("agent")]
    Agent,
    #[token("import")]
    Import,
    #[token("flow")]
    Flow,
    #[token("memory")]
    Memory,
    #[token("beliefs")]
    Beliefs,
    #[token("goals")]
    Goals,
    #[token("capability")]
    Capability,
    #[token("on")]
    On,
    #[token("if")]
    If,
    #[token("else")]
    Else,
    #[token("let")]
    Let,
    #[token("return")]
    Return,
    #[token("parallel")]
    Parallel,
    #[token("loop")]
    Loop,
    #[token("in")]
    In,
    #[token("try")]
    Try,
    #[token("catch")]
    Catch,
    #[token("switch")]
    Switch,
    #[token("case")]
    Case,
    #[token("default")]
    Default,
    #[token("true")]
    True,
    #[token("false")]
    False,
    #[token("null")]
    Null,
    #[token("from")]
    From,

    #[regex(r"[A-Za-z_][A-Za-z0-9_]*")]
    Ident,
    #[regex(r"[0-9][0-9_]*(\.[0-9][0-9_]*)?([eE][+-]?[0-9][0-9_]*)?", priority = 3)]
    Number,
    #[regex(r"[0-9][0-9A-Za-z_]*(\.[0-9A-Za-z_]+)*", bad_number, priority = 2)]
    BadNumber,
    #[token("\"", |lex| string_body(lex, b'"'))]
    #[token("'", |lex| string_body(lex, b'\''))]
    Str,

    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token(",")]
    Comma,
    #[token(":")]
    Colon,
    #[token(".")]
    Dot,
    #[token("@")]
    At,
    #[token("->")]
    Arrow,
    #[token("=>")]
    FatArrow,
    #[token("|>")]
    Pipe,
    #[token("=")]
    Eq,
    #[token("==")]
    EqEq,
    #[token("!=")]
    NotEq,
    #[token("<")]
    Lt,
    #[token("<=")]
    Le,
    #[token(">")]
    Gt,
    #[token(">=")]
    Ge,
    #[token("&&")]
    AndAnd,
    #[token("||")]
    OrOr,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
    #[token("/")]
    Slash,
    #[token("%")]
    Percent,
    #[token("!")]
    Bang,
}

fn bad_number(_: &mut logos::Lexer<Raw>) -> Result<(), LexErrorKind> {
    Err(LexErrorKind::InvalidNumber)
}

/// Finds the end of a block comment (nesting allowed). Unterminated comments
/// run to the end.
fn block_comment(lex: &mut logos::Lexer<Raw>) -> Result<(), LexErrorKind> {
    let rest = lex.remainder().as_bytes();
    let mut depth = 1usize;
    let mut i = 0;
    while i < rest.len() {
        if rest[i..].starts_with(b"*/") {
            depth -= 1;
            i += 2;
            if depth == 0 {
                lex.bump(i);
                return Ok(());
            }
        } else if rest[i..].starts_with(b"/*") {
            depth += 1;
            i += 2;
        } else {
            i += 1;
        }
    }
    lex.bump(rest.len());
    Err(LexErrorKind::UnterminatedComment)
}

/// Finds the end of a string body. Strings may span lines; an unterminated one
/// is cut at the end of its first line so the rest of the file still lexes.
fn string_body(lex: &mut logos::Lexer<Raw>, quote: u8) -> Result<(), LexErrorKind> {
    let rest = lex.remainder().as_bytes();
    let mut i = 0;
    while i < rest.len() {
        match rest[i] {
            b'\\' => i += 2,
            c if c == quote => {
                lex.bump(i + 1);
                return Ok(());
            }
            _ => i += 1,
        }
    }
    let line_end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
    lex.bump(line_end);
    Err(LexErrorKind::UnterminatedString)
}

/// Tokens as the parser sees them.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok<'a> {
    /// A statement separator: a significant newline or `;`.
    Sep,
    Agent,
    Import,
    Flow,
    Memory,
    Beliefs,
    Goals,
    Capability,
    On,
    If,
    Else,
    Let,
    Return,
    Parallel,
    Loop,
    In,
    Try,
    Catch,
    Switch,
    Case,
    Default,
    True,
    False,
    Null,
    From,
    /// Borrowed from the source: lexing allocates nothing for names.
    Ident(&'a str),
    Number(f64),
    Str(Rc<StrLit>),
    LParen,
    RParen,
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    Comma,
    Colon,
    Dot,
    At,
    Arrow,
    FatArrow,
    Pipe,
    Eq,
    EqEq,
    NotEq,
    Lt,
    Le,
    Gt,
    Ge,
    AndAnd,
    OrOr,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Bang,
}

impl fmt::Display for Tok<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Tok::Sep => "end of statement",
            Tok::Ident(name) => return write!(f, "identifier `{name}`"),
            Tok::Number(n) => return write!(f, "number `{n}`"),
            Tok::Str(_) => "string literal",
            other => return write!(f, "`{}`", other.text()),
        };
        f.write_str(s)
    }
}

impl Tok<'_> {
    /// Source text of fixed tokens (used in messages).
    pub fn text(&self) -> &'static str {
        match self {
            Tok::Sep => ";",
            Tok::Agent => "agent",
            Tok::Import => "import",
            Tok::Flow => "flow",
            Tok::Memory => "memory",
            Tok::Beliefs => "beliefs",
            Tok::Goals => "goals",
            Tok::Capability => "capability",
            Tok::On => "on",
            Tok::If => "if",
            Tok::Else => "else",
            Tok::Let => "let",
            Tok::Return => "return",
            Tok::Parallel => "parallel",
            Tok::Loop => "loop",
            Tok::In => "in",
            Tok::Try => "try",
            Tok::Catch => "catch",
            Tok::Switch => "switch",
            Tok::Case => "case",
            Tok::Default => "default",
            Tok::True => "true",
            Tok::False => "false",
            Tok::Null => "null",
            Tok::From => "from",
            Tok::Ident(_) => "identifier",
            Tok::Number(_) => "number",
            Tok::Str(_) => "string",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::Comma => ",",
            Tok::Colon => ":",
            Tok::Dot => ".",
            Tok::At => "@",
            Tok::Arrow => "->",
            Tok::FatArrow => "=>",
            Tok::Pipe => "|>",
            Tok::Eq => "=",
            Tok::EqEq => "==",
            Tok::NotEq => "!=",
            Tok::Lt => "<",
            Tok::Le => "<=",
            Tok::Gt => ">",
            Tok::Ge => ">=",
            Tok::AndAnd => "&&",
            Tok::OrOr => "||",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::Percent => "%",
            Tok::Bang => "!",
        }
    }

    /// Tokens after which a line break cannot end a statement.
    fn continues_after(&self) -> bool {
        matches!(
            self,
            Tok::Sep
                | Tok::LParen
                | Tok::LBrace
                | Tok::LBracket
                | Tok::Comma
                | Tok::Colon
                | Tok::Dot
                | Tok::At
                | Tok::Arrow
                | Tok::FatArrow
                | Tok::Pipe
                | Tok::Eq
                | Tok::EqEq
                | Tok::NotEq
                | Tok::Lt
                | Tok::Le
                | Tok::Gt
                | Tok::Ge
                | Tok::AndAnd
                | Tok::OrOr
                | Tok::Plus
                | Tok::Minus
                | Tok::Star
                | Tok::Slash
                | Tok::Percent
                | Tok::Bang
                | Tok::Else
                | Tok::Let
                | Tok::In
                | Tok::Case
                | Tok::From
        )
    }

    /// Tokens that cannot start a statement, so a line break before them is
    /// a continuation (`}` closes the block and needs no separator either).
    /// Keywords that begin a statement and can appear nowhere inside an
    /// expression (nor serve as names).
    pub fn starts_statement_only(&self) -> bool {
        matches!(
            self,
            Tok::Let | Tok::Return | Tok::If | Tok::Loop | Tok::Try | Tok::Parallel
        )
    }

    /// Tokens that start an operand and nothing else (not `-`, `(` or `[`,
    /// which also continue an expression).
    fn starts_operand(&self) -> bool {
        matches!(
            self,
            Tok::Ident(_) | Tok::Number(_) | Tok::Str(_) | Tok::True | Tok::False | Tok::Null
        )
    }

    fn continues_before(&self) -> bool {
        matches!(
            self,
            Tok::Sep
                | Tok::RParen
                | Tok::RBrace
                | Tok::RBracket
                | Tok::LBrace
                | Tok::Comma
                | Tok::Dot
                | Tok::Arrow
                | Tok::FatArrow
                | Tok::Pipe
                | Tok::Eq
                | Tok::EqEq
                | Tok::NotEq
                | Tok::Lt
                | Tok::Le
                | Tok::Ge
                | Tok::Gt
                | Tok::AndAnd
                | Tok::OrOr
                | Tok::Plus
                | Tok::Star
                | Tok::Slash
                | Tok::Percent
                | Tok::Else
                | Tok::Catch
                | Tok::In
        )
    }
}

/// A comment in the source: `// ...` (to the end of its line, the line break
/// excluded) or `/* ... */` (nesting allowed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comment {
    pub kind: CommentKind,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommentKind {
    Line,
    Block,
}

impl Comment {
    /// The comment's text as written (a line comment without a trailing
    /// carriage return or spaces).
    pub fn text<'s>(&self, source: &'s str) -> &'s str {
        let text = source.get(self.span.range()).unwrap_or("");
        match self.kind {
            CommentKind::Line => text.trim_end(),
            CommentKind::Block => text,
        }
    }
}

/// Every comment of a source text, in order. The parser never sees them; the
/// formatter and editor support do. An unterminated block comment is listed
/// up to the end of the text (and reported by [`lex`]).
pub fn comments(source: &str) -> Vec<Comment> {
    let mut out = Vec::new();
    let mut lexer = Raw::lexer(source);
    while let Some(item) = lexer.next() {
        let range = lexer.span();
        let kind = match item {
            Ok(Raw::LineComment) => CommentKind::Line,
            Ok(Raw::BlockComment) | Err(LexErrorKind::UnterminatedComment) => CommentKind::Block,
            _ => continue,
        };
        out.push(Comment {
            kind,
            span: Span::new(range.start, range.end),
        });
    }
    out
}

/// A token with its byte span, in the triple form LALRPOP expects.
pub type Spanned<'a> = (usize, Tok<'a>, usize);

/// Lexes a whole source text. Returns parser-ready tokens (separators already
/// filtered) and every lexical error found.
pub fn lex(source: &str) -> (Vec<Spanned<'_>>, Vec<LexError>) {
    let mut raw_tokens: Vec<Spanned<'_>> = Vec::with_capacity(source.len() / 4);
    let mut errors = Vec::new();
    let mut lexer = Raw::lexer(source);
    while let Some(item) = lexer.next() {
        let range = lexer.span();
        let span = Span::new(range.start, range.end);
        let slice = lexer.slice();
        let tok = match item {
            Ok(raw) => convert(raw, slice, range.start, &mut errors),
            Err(LexErrorKind::UnterminatedString) => {
                errors.push(LexError {
                    kind: LexErrorKind::UnterminatedString,
                    span,
                });
                // Keep a string token so the parser does not cascade.
                Some(Tok::Str(Rc::new(decode_string(
                    slice,
                    range.start,
                    false,
                    &mut errors,
                ))))
            }
            Err(LexErrorKind::InvalidNumber) => {
                errors.push(LexError {
                    kind: LexErrorKind::InvalidNumber,
                    span,
                });
                Some(Tok::Number(0.0))
            }
            Err(kind) => {
                // A run of unexpected characters is one error, not one per
                // character (a line of junk would otherwise report n errors).
                match errors.last_mut() {
                    Some(prev)
                        if kind == LexErrorKind::UnexpectedChar
                            && prev.kind == LexErrorKind::UnexpectedChar
                            && prev.span.end == span.start =>
                    {
                        prev.span = Span::new(prev.span.start as usize, span.end as usize);
                    }
                    _ => errors.push(LexError { kind, span }),
                }
                None
            }
        };
        if let Some(tok) = tok {
            raw_tokens.push((range.start, tok, range.end));
        }
    }
    let tokens = filter_separators(raw_tokens, &mut errors);
    (tokens, errors)
}

fn convert<'a>(
    raw: Raw,
    slice: &'a str,
    start: usize,
    errors: &mut Vec<LexError>,
) -> Option<Tok<'a>> {
    Some(match raw {
        // Comments are not tokens for the parser; [`comments`] lists them.
        Raw::LineComment | Raw::BlockComment => return None,
        Raw::Newline | Raw::Semi => Tok::Sep,
        Raw::Agent => Tok::Agent,
        Raw::Import => Tok::Import,
        Raw::Flow => Tok::Flow,
        Raw::Memory => Tok::Memory,
        Raw::Beliefs => Tok::Beliefs,
        Raw::Goals => Tok::Goals,
        Raw::Capability => Tok::Capability,
        Raw::On => Tok::On,
        Raw::If => Tok::If,
        Raw::Else => Tok::Else,
        Raw::Let => Tok::Let,
        Raw::Return => Tok::Return,
        Raw::Parallel => Tok::Parallel,
        Raw::Loop => Tok::Loop,
        Raw::In => Tok::In,
        Raw::Try => Tok::Try,
        Raw::Catch => Tok::Catch,
        Raw::Switch => Tok::Switch,
        Raw::Case => Tok::Case,
        Raw::Default => Tok::Default,
        Raw::True => Tok::True,
        Raw::False => Tok::False,
        Raw::Null => Tok::Null,
        Raw::From => Tok::From,
        Raw::Ident => Tok::Ident(slice),
        Raw::Number => match slice.replace('_', "").parse::<f64>() {
            Ok(n) if n.is_finite() => Tok::Number(n),
            _ => {
                errors.push(LexError {
                    kind: LexErrorKind::InvalidNumber,
                    span: Span::new(start, start + slice.len()),
                });
                Tok::Number(0.0)
            }
        },
        Raw::BadNumber => Tok::Number(0.0),
        Raw::Str => Tok::Str(Rc::new(decode_string(slice, start, true, errors))),
        Raw::LParen => Tok::LParen,
        Raw::RParen => Tok::RParen,
        Raw::LBrace => Tok::LBrace,
        Raw::RBrace => Tok::RBrace,
        Raw::LBracket => Tok::LBracket,
        Raw::RBracket => Tok::RBracket,
        Raw::Comma => Tok::Comma,
        Raw::Colon => Tok::Colon,
        Raw::Dot => Tok::Dot,
        Raw::At => Tok::At,
        Raw::Arrow => Tok::Arrow,
        Raw::FatArrow => Tok::FatArrow,
        Raw::Pipe => Tok::Pipe,
        Raw::Eq => Tok::Eq,
        Raw::EqEq => Tok::EqEq,
        Raw::NotEq => Tok::NotEq,
        Raw::Lt => Tok::Lt,
        Raw::Le => Tok::Le,
        Raw::Gt => Tok::Gt,
        Raw::Ge => Tok::Ge,
        Raw::AndAnd => Tok::AndAnd,
        Raw::OrOr => Tok::OrOr,
        Raw::Plus => Tok::Plus,
        Raw::Minus => Tok::Minus,
        Raw::Star => Tok::Star,
        Raw::Slash => Tok::Slash,
        Raw::Percent => Tok::Percent,
        Raw::Bang => Tok::Bang,
    })
}

/// Decodes escapes and splits `{name}` holes. `slice` includes the quotes
/// (the closing one only when `terminated`).
fn decode_string(
    slice: &str,
    start: usize,
    terminated: bool,
    errors: &mut Vec<LexError>,
) -> StrLit {
    let span = Span::new(start, start + slice.len());
    let body_end = if terminated && slice.len() >= 2 {
        slice.len() - 1
    } else {
        slice.len()
    };
    let body = slice.get(1..body_end).unwrap_or("");
    // Most literals have no escape and no braces: one text part, no scanning.
    if !body.contains(['\\', '{', '}']) {
        return StrLit {
            parts: vec![StrPart::Text(body.to_string())],
            span,
        };
    }
    let base = start + 1;
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut chars = body.char_indices().peekable();
    // Literal `{{` seen and not yet closed by a `}}`.
    let mut doubled_open = 0usize;
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                let Some((j, e)) = chars.next() else {
                    break;
                };
                let decoded = match e {
                    'n' => Some('\n'),
                    't' => Some('\t'),
                    'r' => Some('\r'),
                    '0' => Some('\0'),
                    '\\' => Some('\\'),
                    '"' => Some('"'),
                    '\'' => Some('\''),
                    '{' => Some('{'),
                    '}' => Some('}'),
                    '\n' => None, // line continuation
                    'u' => decode_unicode(body, j, &mut chars),
                    _ => {
                        errors.push(LexError {
                            kind: LexErrorKind::InvalidEscape(format!("\\{e}")),
                            span: Span::new(base + i, base + j + e.len_utf8()),
                        });
                        None
                    }
                };
                if let Some(d) = decoded {
                    text.push(d);
                } else if e == 'u' {
                    errors.push(LexError {
                        kind: LexErrorKind::InvalidEscape("\\u".into()),
                        span: Span::new(base + i, base + j + 1),
                    });
                }
            }
            // `{{name}}` interpolates like `{name}` (the reference language's
            // spelling); any other `{{` is a literal `{`.
            '{' if matches!(chars.peek(), Some((_, '{'))) => {
                match hole_name(&body[i + 2..])
                    .filter(|n| body[i + 2 + n.len() + 1..].starts_with('}'))
                {
                    Some(name) => {
                        if !text.is_empty() {
                            parts.push(StrPart::Text(std::mem::take(&mut text)));
                        }
                        let name_start = base + i + 2;
                        parts.push(StrPart::Interp(
                            name.to_string(),
                            Span::new(name_start, name_start + name.len()),
                        ));
                        // Skip the second `{`, the name and both closing braces.
                        for _ in 0..name.chars().count() + 3 {
                            chars.next();
                        }
                    }
                    None => {
                        chars.next();
                        text.push('{');
                        doubled_open += 1;
                    }
                }
            }
            // A `}}` closing a literal `{{` is one `}`; any other `}` stays
            // as written, so JSON with nested objects (`{"a": {"b": 1}}`)
            // needs no escaping.
            '}' if doubled_open > 0 && matches!(chars.peek(), Some((_, '}'))) => {
                chars.next();
                text.push('}');
                doubled_open -= 1;
            }
            '{' => match hole_name(&body[i + 1..]) {
                Some(name) => {
                    if !text.is_empty() {
                        parts.push(StrPart::Text(std::mem::take(&mut text)));
                    }
                    let name_start = base + i + 1;
                    parts.push(StrPart::Interp(
                        name.to_string(),
                        Span::new(name_start, name_start + name.len()),
                    ));
                    // Skip the name and the closing brace.
                    for _ in 0..=name.chars().count() {
                        chars.next();
                    }
                }
                None => text.push('{'),
            },
            _ => text.push(c),
        }
    }
    if !text.is_empty() || parts.is_empty() {
        parts.push(StrPart::Text(text));
    }
    StrLit { parts, span }
}

/// `\u{1F600}` escapes. Returns None (and lets the caller report) when malformed.
fn decode_unicode(
    body: &str,
    u_at: usize,
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
) -> Option<char> {
    let rest = &body[u_at + 1..];
    if !rest.starts_with('{') {
        return None;
    }
    let close = rest.find('}')?;
    let hex = &rest[1..close];
    let c = u32::from_str_radix(hex, 16).ok().and_then(char::from_u32)?;
    for _ in 0..=close {
        chars.next();
    }
    Some(c)
}

/// If `rest` starts with `name}` where name is an identifier, returns name.
fn hole_name(rest: &str) -> Option<&str> {
    let end = rest.find('}')?;
    let name = &rest[..end];
    // A variable, or a field path into one: `{x}`, `{result.verdict}`.
    let ident = |seg: &str| {
        let mut cs = seg.chars();
        cs.next()
            .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
            && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    name.split('.').all(ident).then_some(name)
}

/// A hole's variable and the fields it reads from it: `result.verdict`
/// is `("result", ["verdict"])`.
pub fn hole_path(hole: &str) -> (&str, Vec<&str>) {
    let mut segs = hole.split('.');
    let var = segs.next().unwrap_or(hole);
    (var, segs.collect())
}

/// `@entry` on its own line decorates the flow on the next line.
fn ends_with_decorator(out: &[Spanned<'_>]) -> bool {
    matches!(out, [.., (_, Tok::At, _), (_, Tok::Ident(_), _)])
}

/// Keeps a separator only where a statement may end: outside parentheses and
/// brackets, after a token that can end an expression, and before a token that
/// can start a statement. Runs of separators collapse into one.
fn filter_separators<'a>(tokens: Vec<Spanned<'a>>, errors: &mut Vec<LexError>) -> Vec<Spanned<'a>> {
    let mut out: Vec<Spanned<'a>> = Vec::with_capacity(tokens.len());
    // Stack of open delimiters; separators are dropped while the innermost is ( or [.
    let mut delims: Vec<Tok<'a>> = Vec::new();
    let mut pending: Option<(usize, usize)> = None;
    // The first line break seen inside the innermost `(`/`[`.
    let mut unclosed_at: Option<(usize, usize)> = None;
    let mut prefix_run = 0usize;
    // Postfix operations (`.name`, `(...)`, `[...]`) applied in a row: each
    // nests the expression before it one level deeper. `postfix_saved`
    // keeps the count of the chain a `(`/`[` interrupts, with the depth it
    // was opened at, to continue it after the closing bracket.
    let mut postfix = 0usize;
    let mut postfix_saved: Vec<(usize, usize)> = Vec::new();
    for (start, tok, end) in tokens {
        // Bound nesting so that later recursive passes stay within their stack:
        // past the limit the rest of the input is cut off (and reported).
        // (Binary operator chains are not bounded: the passes walk along them.)
        prefix_run = if matches!(tok, Tok::Minus | Tok::Bang) {
            prefix_run + 1
        } else {
            0
        };
        let after_operand = out.last().is_some_and(|(_, t, _)| !t.continues_after());
        match tok {
            Tok::Dot => postfix += 1,
            Tok::LParen | Tok::LBracket => {
                let chain = if after_operand { postfix + 1 } else { 0 };
                postfix_saved.push((delims.len(), chain));
                postfix = 0;
            }
            Tok::Ident(_) if matches!(out.last(), Some((_, Tok::Dot, _))) => {}
            Tok::RParen | Tok::RBracket => {}
            _ => postfix = 0,
        }
        if delims.len() >= MAX_NESTING || prefix_run >= MAX_NESTING || postfix >= MAX_NESTING {
            errors.push(LexError {
                kind: LexErrorKind::TooDeep,
                span: Span::new(start, end),
            });
            break;
        }
        if tok == Tok::Sep {
            let inside_parens = matches!(delims.last(), Some(Tok::LParen | Tok::LBracket));
            let after_ok = out.last().is_some_and(|(_, t, _)| !t.continues_after())
                && !ends_with_decorator(&out);
            if inside_parens {
                unclosed_at.get_or_insert((start, end));
            } else if after_ok && pending.is_none() {
                pending = Some((start, end));
            }
            continue;
        }
        if let Some((s, e)) = unclosed_at.take() {
            // A line inside `(` or `[` that starts with a statement keyword,
            // or with an operand right after a complete operand (no comma or
            // operator between them): the bracket was never closed. End the statement at that line
            // break (the parser reports the missing `)` there) so the error
            // does not swallow the rest of the block.
            let ends_expr = out.last().is_some_and(|(_, t, _)| !t.continues_after());
            if tok.starts_statement_only() || (ends_expr && tok.starts_operand()) {
                while matches!(delims.last(), Some(Tok::LParen | Tok::LBracket)) {
                    delims.pop();
                }
                pending = Some((s, e));
            }
        }
        if let Some((s, e)) = pending.take() {
            if !tok.continues_before() {
                out.push((s, Tok::Sep, e));
            }
        }
        match tok {
            Tok::LParen | Tok::LBracket | Tok::LBrace => delims.push(tok.clone()),
            // A `}` closes its `{` and any bracket left open inside it.
            Tok::RBrace => {
                while let Some(open) = delims.pop() {
                    if open == Tok::LBrace {
                        break;
                    }
                }
            }
            Tok::RParen | Tok::RBracket => {
                if matches!(delims.last(), Some(Tok::LParen | Tok::LBracket)) {
                    delims.pop();
                }
            }
            _ => {}
        }
        while let Some(&(depth, chain)) = postfix_saved.last() {
            if depth < delims.len() {
                break;
            }
            postfix_saved.pop();
            postfix = chain;
        }
        if tok == Tok::RBrace {
            postfix = 0;
        }
        out.push((start, tok, end));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<Tok<'_>> {
        let (toks, errs) = lex(src);
        assert!(errs.is_empty(), "{errs:?}");
        toks.into_iter().map(|(_, t, _)| t).collect()
    }

    #[test]
    fn newlines_inside_parens_are_not_separators() {
        let toks = kinds("f(a,\n b)\ng()");
        assert_eq!(toks.iter().filter(|t| **t == Tok::Sep).count(), 1);
    }

    #[test]
    fn newline_before_else_and_operators_continues() {
        let toks = kinds("if x {\n a\n}\nelse {\n b\n}\nc = 1 +\n 2\n |> f()");
        let seps = toks.iter().filter(|t| **t == Tok::Sep).count();
        // only between `}`(else block end) and `c`
        assert_eq!(seps, 1, "{toks:?}");
    }

    #[test]
    fn string_holes_and_escapes() {
        let (toks, errs) = lex(r#""a {x} \{y} {{z}} {{1}} {{ \n""#);
        assert!(errs.is_empty());
        let Tok::Str(s) = &toks[0].1 else { panic!() };
        assert_eq!(s.text(), "a {x} {y} {z} {1} { \n");
        let holes: Vec<_> = s
            .parts
            .iter()
            .filter_map(|p| match p {
                StrPart::Interp(name, span) => Some((name.as_str(), span.range())),
                _ => None,
            })
            .collect();
        // `{{z}}` interpolates like `{z}`; `{{1}}` and a lone `{{` are text.
        assert_eq!(holes, vec![("x", 4..5), ("z", 14..15)]);
    }

    #[test]
    fn every_reserved_word_is_a_token_and_no_other_word_is() {
        for w in RESERVED_WORDS {
            let (toks, _) = lex(w);
            assert!(!matches!(toks[0].1, Tok::Ident(_)), "{w} lexes as a name");
        }
        for w in ["agents", "flows", "parallelism", "entry", "tools"] {
            let (toks, _) = lex(w);
            assert!(matches!(toks[0].1, Tok::Ident(_)), "{w} is reserved");
        }
    }

    #[test]
    fn doubled_close_brace_is_one_brace_only_after_a_doubled_open() {
        let text = |src: &str| {
            let (toks, errs) = lex(src);
            assert!(errs.is_empty(), "{errs:?}");
            let Tok::Str(s) = &toks[0].1 else { panic!() };
            s.text()
        };
        // JSON with nested objects reads as written.
        assert_eq!(text(r#"'{"a": {"b": 1}}'"#), r#"{"a": {"b": 1}}"#);
        // The doubled spelling of a JSON template still closes once.
        assert_eq!(text(r#""{{\"a\": {\"b\": 1}}}""#), r#"{"a": {"b": 1}}"#);
        assert_eq!(text(r#""{{\"q\": 1}}""#), r#"{"q": 1}"#);
        assert_eq!(text(r#""a}}b""#), "a}}b");
    }

    #[test]
    fn string_holes_read_field_paths() {
        let (toks, errs) = lex(r#""{r.verdict} {a.b.c} {x.} {.y} {1.5}""#);
        assert!(errs.is_empty());
        let Tok::Str(s) = &toks[0].1 else { panic!() };
        let holes: Vec<_> = s
            .parts
            .iter()
            .filter_map(|p| match p {
                StrPart::Interp(name, _) => Some(name.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(holes, vec!["r.verdict", "a.b.c"]);
        assert_eq!(hole_path("a.b.c"), ("a", vec!["b", "c"]));
        assert_eq!(hole_path("x"), ("x", vec![]));
    }

    #[test]
    fn errors_are_collected_not_fatal() {
        let (toks, errs) = lex("a $ \"bad \\q\" 12ab \"open\nnext");
        let kinds: Vec<_> = errs.iter().map(|e| e.kind.clone()).collect();
        assert_eq!(
            kinds,
            vec![
                LexErrorKind::UnexpectedChar,
                LexErrorKind::InvalidEscape("\\q".into()),
                LexErrorKind::InvalidNumber,
                LexErrorKind::UnterminatedString
            ]
        );
        // `next` on the following line still lexes.
        assert!(toks.iter().any(|(_, t, _)| *t == Tok::Ident("next")));
    }

    #[test]
    fn comments_are_listed_and_never_reach_the_parser() {
        let src = "a // one\r\n/* two /* nested */ */ b \"// not\" /* open";
        let listed: Vec<_> = comments(src)
            .iter()
            .map(|c| (c.kind, c.text(src).to_string()))
            .collect();
        assert_eq!(
            listed,
            vec![
                (CommentKind::Line, "// one".to_string()),
                (CommentKind::Block, "/* two /* nested */ */".to_string()),
                (CommentKind::Block, "/* open".to_string()),
            ]
        );
        let (toks, _) = lex(src);
        assert_eq!(toks.len(), 4, "{toks:?}"); // a, separator, b, the string
    }

    #[test]
    fn unterminated_block_comment() {
        let (_, errs) = lex("a /* open");
        assert_eq!(errs[0].kind, LexErrorKind::UnterminatedComment);
    }
}
