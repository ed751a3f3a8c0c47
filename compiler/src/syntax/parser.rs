//! Glue between the LALRPOP grammar and the rest of the front end: helper
//! constructors used by grammar actions, and the one conversion from LALRPOP
//! errors into our [`SyntaxError`].

use super::ast::*;
use super::lexer::{lex, LexError, LexErrorKind, Spanned, StrLit, Tok};
use ais_ir::{Diagnostic, IntoDiagnostic, Span};
use lalrpop_util::{ErrorRecovery, ParseError};

// `grammar.rs` is LALRPOP's output for `grammar.lalrpop`, checked in so that
// building does not run LALRPOP (issue 33: it and its dependencies were a
// share of every fresh build). `tests/grammar_generated.rs` regenerates it
// and fails if the two differ; `AIS_BLESS=1` rewrites it.
#[allow(clippy::all, clippy::unwrap_used, unused_qualifications, unused_parens)]
mod generated {
    include!("grammar.rs");
}

/// An error raised by a grammar action (a well-formed but invalid construct).
#[derive(Clone, Debug, PartialEq)]
pub struct UserError {
    pub message: String,
    pub span: Span,
    pub help: Option<String>,
}

type Errors<'a> = Vec<ErrorRecovery<usize, Tok<'a>, UserError>>;

/// Takes a string literal out of its token (cloning only if still shared).
pub fn unrc(s: std::rc::Rc<StrLit>) -> StrLit {
    std::rc::Rc::unwrap_or_clone(s)
}

/// Everything that can go wrong before semantic analysis.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SyntaxError {
    #[error("unterminated string literal")]
    UnterminatedString { span: Span },
    #[error("invalid escape sequence `{escape}`")]
    InvalidEscape { escape: String, span: Span },
    /// `ch` is the run of unexpected characters, shortened to its first few.
    #[error("unexpected character{} `{ch}`", if *.count > 1 { format!("s ({} in a row)", .count) } else { String::new() })]
    UnexpectedChar {
        ch: String,
        count: usize,
        span: Span,
    },
    #[error("unterminated block comment")]
    UnterminatedComment { span: Span },
    #[error("invalid number literal `{text}`")]
    InvalidNumber { text: String, span: Span },
    #[error("syntax error: unexpected {found}{}", expected_suffix(.expected))]
    UnexpectedToken {
        found: String,
        expected: Vec<String>,
        span: Span,
    },
    #[error("input nested too deeply (more than {limit} levels)")]
    TooDeep { limit: usize, span: Span },
    #[error("unexpected end of file{}", expected_suffix(.expected))]
    UnexpectedEof { expected: Vec<String>, span: Span },
    #[error("syntax error: {message}")]
    Invalid {
        message: String,
        span: Span,
        help: Option<String>,
    },
}

fn expected_suffix(expected: &[String]) -> String {
    if expected.is_empty() {
        String::new()
    } else {
        format!(", expected {}", describe_expected(expected))
    }
}

/// Turns LALRPOP's list of terminal names into words a person reads:
/// expression starters become "an expression", operators "an operator",
/// keywords usable as names fold into "a name".
fn describe_expected(expected: &[String]) -> String {
    const EXPR_STARTS: &[&str] = &[
        "IDENT",
        "NUMBER",
        "STRING",
        "\"(\"",
        "\"[\"",
        "\"true\"",
        "\"false\"",
        "\"null\"",
        "\"-\"",
        "\"!\"",
        "\"switch\"",
    ];
    const SOFT_KEYWORDS: &[&str] = &[
        "\"memory\"",
        "\"beliefs\"",
        "\"goals\"",
        "\"capability\"",
        "\"agent\"",
        "\"flow\"",
        "\"on\"",
    ];
    const OPERATORS: &[&str] = &[
        "\"+\"", "\"-\"", "\"*\"", "\"/\"", "\"%\"", "\"==\"", "\"!=\"", "\"<\"", "\"<=\"",
        "\">\"", "\">=\"", "\"&&\"", "\"||\"", "\"|>\"", "\".\"", "\"(\"", "\"[\"", "\"=\"",
        "\"->\"",
    ];
    let has = |t: &str| expected.iter().any(|e| e == t);
    // Where an expression may start, a name, a string and a number all may.
    let is_expr = has("IDENT") && has("STRING") && has("NUMBER");
    let is_ops = !is_expr && OPERATORS.iter().filter(|t| has(t)).count() >= 4;
    let has_ident = has("IDENT");
    let mut words: Vec<String> = Vec::new();
    let mut push = |w: String| {
        if !words.contains(&w) {
            words.push(w);
        }
    };
    for e in expected {
        let e = e.as_str();
        if is_expr && (EXPR_STARTS.contains(&e) || SOFT_KEYWORDS.contains(&e)) {
            push("an expression".into());
        } else if is_ops && OPERATORS.contains(&e) {
            push("an operator".into());
        } else if has_ident && SOFT_KEYWORDS.contains(&e) {
            push("a name".into());
        } else {
            push(match e {
                "SEP" => "a new line or `;`".into(),
                "IDENT" => "a name".into(),
                "NUMBER" => "a number".into(),
                "STRING" => "a string".into(),
                other => format!("`{}`", other.trim_matches('"')),
            });
        }
    }
    match words.len() {
        0 => String::new(),
        1 => words.remove(0),
        n if n > 6 => format!("one of {}, …", words[..6].join(", ")),
        _ => format!("one of {}", words.join(", ")),
    }
}

impl SyntaxError {
    pub fn span(&self) -> Span {
        match self {
            SyntaxError::UnterminatedString { span }
            | SyntaxError::InvalidEscape { span, .. }
            | SyntaxError::UnexpectedChar { span, .. }
            | SyntaxError::UnterminatedComment { span }
            | SyntaxError::InvalidNumber { span, .. }
            | SyntaxError::UnexpectedToken { span, .. }
            | SyntaxError::UnexpectedEof { span, .. }
            | SyntaxError::TooDeep { span, .. }
            | SyntaxError::Invalid { span, .. } => *span,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            SyntaxError::UnterminatedString { .. } => "E0001",
            SyntaxError::InvalidEscape { .. } => "E0002",
            SyntaxError::UnexpectedChar { .. } => "E0003",
            SyntaxError::UnexpectedToken { .. } | SyntaxError::Invalid { .. } => "E0004",
            SyntaxError::UnexpectedEof { .. } => "E0005",
            SyntaxError::TooDeep { .. } => "E0008",
            SyntaxError::UnterminatedComment { .. } => "E0006",
            SyntaxError::InvalidNumber { .. } => "E0007",
        }
    }
}

impl IntoDiagnostic for SyntaxError {
    fn into_diagnostic(self) -> Diagnostic {
        let mut d = Diagnostic::error(self.code(), self.to_string(), self.span());
        match &self {
            SyntaxError::UnterminatedString { .. } => {
                d = d.with_label("this string is never closed").with_help(
                    "add the closing quote; write `\\n` for a line break inside a string",
                );
            }
            SyntaxError::InvalidEscape { .. } => {
                d = d.with_label("unknown escape").with_help(
                    "valid escapes are \\n \\t \\r \\0 \\\\ \\\" \\' \\{ \\} and \\u{HEX}; write `\\\\` for a backslash",
                );
            }
            SyntaxError::UnexpectedChar { .. } => {
                d = d.with_label("not part of the AIS language");
            }
            SyntaxError::UnterminatedComment { .. } => {
                d = d
                    .with_label("comment starts here")
                    .with_help("close it with `*/`");
            }
            SyntaxError::InvalidNumber { .. } => {
                d = d.with_label("not a number").with_help(
                    "numbers look like `42`, `3.14` or `1e-3`; names cannot start with a digit",
                );
            }
            SyntaxError::UnexpectedToken { .. } => d = d.with_label("unexpected here"),
            SyntaxError::TooDeep { .. } => {
                d = d
                    .with_label("the limit is reached here; the rest of the file is not read")
                    .with_help("split the expression with `let` bindings");
            }
            SyntaxError::UnexpectedEof { .. } => {
                d = d
                    .with_label("file ends here")
                    .with_help("check for a missing `}` or `)`");
            }
            SyntaxError::Invalid { help, .. } => {
                if let Some(h) = help {
                    d = d.with_help(h.clone());
                }
            }
        }
        d
    }
}

/// Result of parsing one file: the tree (with `Error` nodes where recovery
/// happened) and every lexical and syntax error, in source order.
pub struct Parsed {
    pub file: File,
    pub errors: Vec<SyntaxError>,
}

pub fn parse(source: &str) -> Parsed {
    let (tokens, lex_errors) = lex(source);
    let mut errors: Vec<SyntaxError> = lex_errors
        .into_iter()
        .map(|e| lex_error(source, e))
        .collect();
    let mut recovered: Errors<'_> = Vec::new();
    // "File ends here" points at the end of the last line with content.
    let content_end = source.trim_end().len();
    let (imports, agents) = parse_file(&tokens, content_end, &mut recovered);
    errors.extend(
        recovered
            .into_iter()
            .map(|r| parse_error(r.error, content_end)),
    );
    // An unterminated string or comment swallows the rest of its line or file,
    // so running out of input afterwards is a consequence, not a new problem.
    if errors.iter().any(|e| {
        matches!(
            e,
            SyntaxError::UnterminatedString { .. }
                | SyntaxError::UnterminatedComment { .. }
                | SyntaxError::TooDeep { .. }
        )
    }) {
        errors.retain(|e| !matches!(e, SyntaxError::UnexpectedEof { .. }));
    }
    errors.sort_by_key(|e| (e.span().start, e.span().end));
    errors.dedup();
    // The file can only end once: keep the first report of it.
    let mut seen_eof = false;
    errors.retain(|e| {
        let is_eof = matches!(e, SyntaxError::UnexpectedEof { .. });
        let keep = !(is_eof && seen_eof);
        seen_eof |= is_eof;
        keep
    });
    Parsed {
        file: File {
            imports,
            agents,
            span: Span::new(0, source.len()),
        },
        errors,
    }
}

fn unexpected<'a>(errors: &mut Errors<'a>, tok: &Spanned<'a>, expected: &[&str]) {
    errors.push(ErrorRecovery {
        error: ParseError::UnrecognizedToken {
            token: tok.clone(),
            expected: expected.iter().map(|s| s.to_string()).collect(),
        },
        dropped_tokens: Vec::new(),
    });
}

fn eof(errors: &mut Errors<'_>, at: usize, expected: &[&str]) {
    errors.push(ErrorRecovery {
        error: ParseError::UnrecognizedEof {
            location: at,
            expected: expected.iter().map(|s| s.to_string()).collect(),
        },
        dropped_tokens: Vec::new(),
    });
}

/// Index just past the `}` matching the `{` at `open`, or `None` if unclosed.
fn matching_brace(tokens: &[Spanned<'_>], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, (_, t, _)) in tokens.iter().enumerate().skip(open) {
        match t {
            Tok::LBrace => depth += 1,
            Tok::RBrace => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// `import "path"` lines, then `agent Name { members }`, repeated. Anything
/// else at the top level is reported once and skipped up to the next `agent`.
fn parse_file<'a>(
    tokens: &[Spanned<'a>],
    eof_at: usize,
    errors: &mut Errors<'a>,
) -> (Vec<Import>, Vec<Agent>) {
    let mut imports = Vec::new();
    let mut agents = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let (start, tok, _) = &tokens[i];
        match tok {
            Tok::Sep => i += 1,
            Tok::Import => {
                let (import, next) = parse_import(tokens, i, eof_at, errors);
                if let Some(import) = import {
                    if agents.is_empty() {
                        imports.push(import);
                    } else {
                        errors.push(ErrorRecovery {
                            error: ParseError::User {
                                error: UserError {
                                    message: "an import after an agent".into(),
                                    span: import.span,
                                    help: Some(
                                        "move the `import` lines to the top of the file".into(),
                                    ),
                                },
                            },
                            dropped_tokens: Vec::new(),
                        });
                    }
                }
                i = next;
            }
            Tok::Agent => {
                let name = match tokens.get(i + 1) {
                    Some((l, Tok::Ident(n), r)) => Ident {
                        name: n.to_string(),
                        span: Span::new(*l, *r),
                    },
                    Some(other) => {
                        unexpected(errors, other, &["IDENT"]);
                        i = skip_to_agent(tokens, i + 1);
                        continue;
                    }
                    None => {
                        eof(errors, eof_at, &["IDENT"]);
                        break;
                    }
                };
                match tokens.get(i + 2) {
                    Some((_, Tok::LBrace, _)) => {}
                    Some(other) => {
                        unexpected(errors, other, &["\"{\""]);
                        i = skip_to_agent(tokens, i + 2);
                        continue;
                    }
                    None => {
                        eof(errors, eof_at, &["\"{\""]);
                        break;
                    }
                }
                let (body_end, end) = match matching_brace(tokens, i + 2) {
                    Some(after) => (after - 1, after),
                    None => {
                        eof(errors, eof_at, &["\"}\""]);
                        (tokens.len(), tokens.len())
                    }
                };
                let members = parse_members(
                    &tokens[i + 3..body_end],
                    tokens.get(body_end),
                    eof_at,
                    errors,
                );
                let r = tokens
                    .get(end.saturating_sub(1))
                    .map_or(eof_at, |(_, _, r)| *r);
                agents.push(Agent {
                    name,
                    members,
                    span: Span::new(*start, r),
                });
                i = end;
            }
            _ => {
                unexpected(errors, &tokens[i], &["\"agent\"", "\"import\""]);
                i = skip_to_agent(tokens, i);
            }
        }
    }
    (imports, agents)
}

/// `import "path"` at `tokens[at]`, ended by a separator or the end of the
/// file; the import (when well formed) and the index to go on from.
fn parse_import<'a>(
    tokens: &[Spanned<'a>],
    at: usize,
    eof_at: usize,
    errors: &mut Errors<'a>,
) -> (Option<Import>, usize) {
    let start = tokens[at].0;
    let path = match tokens.get(at + 1) {
        Some((l, Tok::Str(lit), r)) => {
            if lit.has_holes() {
                errors.push(ErrorRecovery {
                    error: ParseError::User {
                        error: UserError {
                            message: "an import path cannot have `{...}` holes".into(),
                            span: Span::new(*l, *r),
                            help: Some("write the path literally; `\\{` is a brace".into()),
                        },
                    },
                    dropped_tokens: Vec::new(),
                });
                return (None, skip_to_agent(tokens, at));
            }
            (lit.text(), Span::new(*l, *r))
        }
        Some(other) => {
            unexpected(errors, other, &["STRING"]);
            return (None, skip_to_agent(tokens, at));
        }
        None => {
            eof(errors, eof_at, &["STRING"]);
            return (None, tokens.len());
        }
    };
    match tokens.get(at + 2) {
        None | Some((_, Tok::Sep, _)) => {}
        Some(other) => {
            unexpected(errors, other, &["SEP"]);
            return (None, skip_to_agent(tokens, at));
        }
    }
    let (text, path_span) = path;
    (
        Some(Import {
            path: text,
            path_span,
            span: Span::new(start, path_span.end as usize),
        }),
        at + 2,
    )
}

/// The index of the next `agent` at bracket depth 0 after `from`.
fn skip_to_agent(tokens: &[Spanned<'_>], from: usize) -> usize {
    let mut depth = 0usize;
    for (i, (_, t, _)) in tokens.iter().enumerate().skip(from + 1) {
        match t {
            Tok::LBrace => depth += 1,
            Tok::RBrace => depth = depth.saturating_sub(1),
            Tok::Agent if depth == 0 => return i,
            _ => {}
        }
    }
    tokens.len()
}

/// Splits an agent body at separators outside brackets and parses each
/// member on its own. `closer` is the token after the body (its `}`), used
/// to report a member that runs out of tokens.
fn parse_members<'a>(
    body: &[Spanned<'a>],
    closer: Option<&Spanned<'a>>,
    eof_at: usize,
    errors: &mut Errors<'a>,
) -> Vec<Member> {
    top_level_parts(body)
        .map(|(range, sep)| {
            let follow = sep.and_then(|i| body.get(i)).or(closer);
            parse_member(&body[range], follow, eof_at, errors)
        })
        .collect()
}

/// The non-empty runs of `tokens` between separators outside brackets, each
/// with the index of the separator that ends it (`None` for the last run).
fn top_level_parts<'t>(
    tokens: &'t [Spanned<'_>],
) -> impl Iterator<Item = (std::ops::Range<usize>, Option<usize>)> + 't {
    // Open brackets, matched as the lexer's separator filter matches them: a
    // separator inside `(`/`[` only appears where the lexer found them
    // unclosed, and a `}` closes whatever was left open inside its `{`.
    let mut open: Vec<bool> = Vec::new(); // true for `{`
    let mut start = 0;
    (0..=tokens.len()).filter_map(move |i| {
        let at_end = i == tokens.len();
        if !at_end {
            match tokens[i].1 {
                Tok::LBrace => open.push(true),
                Tok::LParen | Tok::LBracket => open.push(false),
                Tok::RBrace => while open.pop() == Some(false) {},
                Tok::RParen | Tok::RBracket if open.last() == Some(&false) => {
                    open.pop();
                }
                Tok::Sep => {
                    while open.last() == Some(&false) {
                        open.pop();
                    }
                }
                _ => {}
            }
        }
        if at_end || (open.is_empty() && tokens[i].1 == Tok::Sep) {
            let part = start..i;
            start = i + 1;
            (!part.is_empty()).then(|| (part, (!at_end).then_some(i)))
        } else {
            None
        }
    })
}

fn parse_member<'a>(
    chunk: &[Spanned<'a>],
    follow: Option<&Spanned<'a>>,
    eof_at: usize,
    errors: &mut Errors<'a>,
) -> Member {
    let (mut member, mut local) = parse_member_whole(chunk);
    if !local.is_empty() {
        // Retry a broken flow or handler statement by statement, so that one
        // bad statement neither hides the others nor ends the body early.
        if let Some((m, e)) = parse_member_by_statements(chunk) {
            member = m;
            local = e;
        }
    }
    report_member_errors(local, follow, eof_at, errors);
    member
}

fn parse_member_whole<'a>(chunk: &[Spanned<'a>]) -> (Member, Errors<'a>) {
    let mut local: Errors<'a> = Vec::new();
    let result = generated::MemberParser::new().parse(&mut local, chunk.iter().cloned());
    let l = chunk.first().map_or(0, |t| t.0);
    let r = chunk.last().map_or(0, |t| t.2);
    let member = match result {
        Ok(m) => m,
        Err(e) => {
            local.push(ErrorRecovery {
                error: e,
                dropped_tokens: Vec::new(),
            });
            Member::Error(Span::new(l, r))
        }
    };
    (member, local)
}

/// For `... flow name(...) -> T { body }` and `on e ... => { body }`: parses the
/// header with an empty body, then each top-level statement of the body on
/// its own. `None` when the chunk does not have that shape.
fn parse_member_by_statements<'a>(chunk: &[Spanned<'a>]) -> Option<(Member, Errors<'a>)> {
    let is_body_owner = chunk
        .iter()
        .any(|(_, t, _)| matches!(t, Tok::Flow | Tok::On));
    if !is_body_owner {
        return None;
    }
    // The body is the brace group that ends the chunk.
    let last = chunk.len().checked_sub(1)?;
    if chunk[last].1 != Tok::RBrace {
        return None;
    }
    let mut depth = 0usize;
    let mut open = None;
    for i in (0..=last).rev() {
        match chunk[i].1 {
            Tok::RBrace => depth += 1,
            Tok::LBrace => {
                depth -= 1;
                if depth == 0 {
                    open = Some(i);
                    break;
                }
            }
            _ => {}
        }
    }
    let open = open?;
    let mut header: Vec<Spanned<'a>> = chunk[..=open].to_vec();
    header.push(chunk[last].clone());
    let (mut member, mut errors) = parse_member_whole(&header);
    let body = &chunk[open + 1..last];
    let mut stmts = Vec::new();
    for (range, sep) in top_level_parts(body) {
        let part = &body[range];
        let follow = sep.and_then(|i| body.get(i)).unwrap_or(&chunk[last]);
        let mut local: Errors<'a> = Vec::new();
        let result = generated::StmtParser::new().parse(&mut local, part.iter().cloned());
        let span = Span::new(part[0].0, part[part.len() - 1].2);
        let broken = Stmt {
            kind: StmtKind::Error(bound_name(part)),
            span,
        };
        stmts.push(match result {
            // Recovered inside: the statement as a whole is broken.
            Ok(_) if !local.is_empty() => broken,
            Ok(s) => s,
            Err(e) => {
                local.push(ErrorRecovery {
                    error: e,
                    dropped_tokens: Vec::new(),
                });
                broken
            }
        });
        for mut rec in local {
            if let ParseError::UnrecognizedEof { expected, .. } = &rec.error {
                rec.error = ParseError::UnrecognizedToken {
                    token: follow.clone(),
                    expected: expected.clone(),
                };
            }
            // The chunk's end is a statement's end; LALRPOP does not list
            // it, but wherever `->` may follow, the statement may also end.
            if let ParseError::UnrecognizedToken { expected, .. } = &mut rec.error {
                if expected.iter().any(|e| e == "\"->\"") {
                    expected.insert(0, "SEP".into());
                }
            }
            errors.push(rec);
        }
    }
    let body_span = Span::new(chunk[open].0, chunk[last].2);
    match &mut member {
        Member::Flow(f) => {
            f.body = Block {
                stmts,
                span: body_span,
            }
        }
        Member::Handler(h) => {
            h.body = Block {
                stmts,
                span: body_span,
            }
        }
        _ => {}
    }
    Some((member, errors))
}

/// What a broken statement was binding: `let x ...` or `... -> x`, nothing
/// (no `let` or `->` anywhere in it), or something that cannot be told.
fn bound_name(part: &[Spanned<'_>]) -> Broken {
    let ident = |t: &Spanned<'_>| match t {
        (l, Tok::Ident(n), r) => Broken::Binds(Ident {
            name: n.to_string(),
            span: Span::new(*l, *r),
        }),
        _ => Broken::Unknown,
    };
    match part {
        [(_, Tok::Let, _), name, ..] => ident(name),
        [.., (_, Tok::Arrow, _), name] => ident(name),
        _ if part
            .iter()
            .any(|(_, t, _)| matches!(t, Tok::Let | Tok::Arrow)) =>
        {
            Broken::Unknown
        }
        _ => Broken::Nothing,
    }
}

fn report_member_errors<'a>(
    local: Errors<'a>,
    follow: Option<&Spanned<'a>>,
    eof_at: usize,
    errors: &mut Errors<'a>,
) {
    // Running out of tokens inside a member means the next token (a separator
    // or the agent's `}`) came too early, unless the file really ended.
    for mut rec in local {
        if let ParseError::UnrecognizedEof { expected, .. } = &rec.error {
            match follow {
                Some(tok) => {
                    rec.error = ParseError::UnrecognizedToken {
                        token: tok.clone(),
                        expected: expected.clone(),
                    }
                }
                None => {
                    rec.error = ParseError::UnrecognizedEof {
                        location: eof_at,
                        expected: expected.clone(),
                    }
                }
            }
        }
        errors.push(rec);
    }
}

fn lex_error(source: &str, e: LexError) -> SyntaxError {
    let text = source.get(e.span.range()).unwrap_or("").to_string();
    match e.kind {
        LexErrorKind::UnexpectedChar => {
            const SHOWN: usize = 8;
            let count = text.chars().count();
            let mut ch: String = text.chars().take(SHOWN).collect();
            if count > SHOWN {
                ch.push('…');
            }
            SyntaxError::UnexpectedChar {
                ch,
                count,
                span: e.span,
            }
        }
        LexErrorKind::UnterminatedString => SyntaxError::UnterminatedString {
            // Point at the opening quote, where the problem starts.
            span: Span::new(e.span.start as usize, e.span.start as usize + 1),
        },
        LexErrorKind::UnterminatedComment => SyntaxError::UnterminatedComment {
            span: Span::new(e.span.start as usize, e.span.start as usize + 2),
        },
        LexErrorKind::InvalidNumber => SyntaxError::InvalidNumber { text, span: e.span },
        LexErrorKind::TooDeep => SyntaxError::TooDeep {
            limit: super::lexer::MAX_NESTING,
            span: e.span,
        },
        LexErrorKind::InvalidEscape(escape) => SyntaxError::InvalidEscape {
            escape,
            span: e.span,
        },
    }
}

fn parse_error(e: ParseError<usize, Tok<'_>, UserError>, eof: usize) -> SyntaxError {
    match e {
        ParseError::InvalidToken { location } => SyntaxError::UnexpectedChar {
            ch: String::new(),
            count: 1,
            span: Span::new(location, location + 1),
        },
        ParseError::UnrecognizedEof { expected, .. } => SyntaxError::UnexpectedEof {
            expected,
            span: Span::new(eof.saturating_sub(1), eof),
        },
        ParseError::UnrecognizedToken {
            token: (l, tok, r),
            expected,
        } => {
            let found = tok.to_string();
            SyntaxError::UnexpectedToken {
                found,
                expected,
                span: Span::new(l, r),
            }
        }
        ParseError::ExtraToken { token: (l, tok, r) } => SyntaxError::UnexpectedToken {
            found: tok.to_string(),
            expected: Vec::new(),
            span: Span::new(l, r),
        },
        ParseError::User { error } => SyntaxError::Invalid {
            message: error.message,
            span: error.span,
            help: error.help,
        },
    }
}

// ------------------------------------------------------------ grammar helpers

pub fn sp(l: usize, r: usize) -> Span {
    Span::new(l, r)
}

pub fn mk(kind: ExprKind, l: usize, r: usize) -> Expr {
    Expr {
        kind,
        span: sp(l, r),
    }
}

pub fn call(callee: Expr, args: Vec<Expr>, l: usize, r: usize) -> Expr {
    mk(
        ExprKind::Call {
            callee: Box::new(callee),
            args,
        },
        l,
        r,
    )
}

fn report(errors: &mut Errors<'_>, message: impl Into<String>, span: Span, help: Option<&str>) {
    errors.push(ErrorRecovery {
        error: ParseError::User {
            error: UserError {
                message: message.into(),
                span,
                help: help.map(str::to_string),
            },
        },
        dropped_tokens: Vec::new(),
    });
}

/// `x |> f(a)` is `f(x, a)`; `x |> f` is `f(x)`.
pub fn pipe(errors: &mut Errors<'_>, x: Expr, mut f: Expr, l: usize, r: usize) -> Expr {
    // Taken out, not moved: `Expr` has a drop of its own.
    let kind = std::mem::replace(&mut f.kind, ExprKind::Error);
    match kind {
        ExprKind::Call { callee, mut args } => {
            args.insert(0, x);
            call(*callee, args, l, r)
        }
        kind @ (ExprKind::Var(_) | ExprKind::Member(..)) => {
            call(Expr { kind, span: f.span }, vec![x], l, r)
        }
        _ => {
            report(
                errors,
                "the right side of `|>` must be a call or a name",
                f.span,
                Some("write `value |> op(args)`; the value becomes the first argument"),
            );
            mk(ExprKind::Error, l, r)
        }
    }
}

/// `name(priority: 1, description: "...")` or `name(1)`.
pub fn goal_from_args(
    errors: &mut Errors<'_>,
    name: Ident,
    args: Vec<(Option<Ident>, Expr)>,
    span: Span,
) -> Goal {
    let mut goal = Goal {
        name,
        description: None,
        priority: None,
        span,
    };
    for (key, value) in args {
        let key_name = key.as_ref().map(|k| k.name.as_str());
        match (key_name, &value.kind) {
            (Some("priority") | None, ExprKind::Number(n)) if goal.priority.is_none() => {
                goal.priority = Some((*n, value.span));
            }
            (Some("description") | None, ExprKind::Str(s)) if goal.description.is_none() => {
                goal.description = Some(s.clone());
            }
            _ => report(
                errors,
                match key {
                    Some(k) => format!("unexpected goal field `{}`", k.name),
                    None => "unexpected goal argument".to_string(),
                },
                value.span,
                Some("a goal takes `priority: NUMBER` and `description: \"TEXT\"`"),
            ),
        }
    }
    goal
}

/// `name: "description" priority 2`
pub fn goal_with_keyword(
    errors: &mut Errors<'_>,
    name: Ident,
    description: StrLit,
    keyword: Ident,
    priority: (f64, Span),
    span: Span,
) -> Goal {
    if keyword.name != "priority" {
        report(
            errors,
            format!("expected `priority`, found `{}`", keyword.name),
            keyword.span,
            Some("write `name: \"description\" priority 1`"),
        );
    }
    Goal {
        name,
        description: Some(description),
        priority: Some(priority),
        span,
    }
}

/// `list<T>` is the only generic type.
/// `name: [a, b]` as an agent member: `tools` is one; other names are
/// reported.
pub fn list_member(errors: &mut Errors<'_>, key: Ident, names: Vec<Ident>, span: Span) -> Member {
    match key.name.as_str() {
        "tools" => Member::Tools(names, span),
        "discoverable" => Member::Discoverable(names, span),
        _ => unknown_member(errors, key, span),
    }
}

/// `name: "text"` as an agent member: `context` is one.
pub fn text_member(errors: &mut Errors<'_>, key: Ident, text: StrLit, span: Span) -> Member {
    match key.name.as_str() {
        "context" => Member::Context(text, span),
        _ => unknown_member(errors, key, span),
    }
}

fn unknown_member(errors: &mut Errors<'_>, key: Ident, span: Span) -> Member {
    report(
        errors,
        format!("unknown agent member `{}`", key.name),
        key.span,
        Some("agent members are `memory`, `beliefs`, `goals`, `capability`, `tools: [...]`, `discoverable: [...]`, `context: \"...\"`, flows and `on` handlers"),
    );
    Member::Error(span)
}

pub fn generic_type(errors: &mut Errors<'_>, name: Ident, arg: TypeExpr, span: Span) -> TypeExpr {
    if name.name != "list" {
        report(
            errors,
            format!("`{}` does not take a type argument", name.name),
            name.span,
            Some("only `list<T>` is generic"),
        );
    }
    TypeExpr::List(Box::new(arg), span)
}
