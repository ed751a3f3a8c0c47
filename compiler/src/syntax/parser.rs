//! Glue between the LALRPOP grammar and the rest of the front end: helper
//! constructors used by grammar actions, and the one conversion from LALRPOP
//! errors into our [`SyntaxError`].

use super::ast::*;
use super::lexer::{lex, LexError, LexErrorKind, StrLit, Tok};
use ais_ir::{Diagnostic, IntoDiagnostic, Span};
use lalrpop_util::{ErrorRecovery, ParseError};

#[allow(clippy::all, clippy::unwrap_used, unused_qualifications, unused_parens)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/syntax/grammar.rs"));
}

/// An error raised by a grammar action (a well-formed but invalid construct).
#[derive(Clone, Debug, PartialEq)]
pub struct UserError {
    pub message: String,
    pub span: Span,
    pub help: Option<String>,
}

type Errors = Vec<ErrorRecovery<usize, Tok, UserError>>;

/// Everything that can go wrong before semantic analysis.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SyntaxError {
    #[error("unterminated string literal")]
    UnterminatedString { span: Span },
    #[error("invalid escape sequence `{escape}`")]
    InvalidEscape { escape: String, span: Span },
    #[error("unexpected character `{ch}`")]
    UnexpectedChar { ch: String, span: Span },
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
        "IDENT", "NUMBER", "STRING", "\"(\"", "\"[\"", "\"true\"", "\"false\"", "\"null\"",
        "\"-\"", "\"!\"", "\"switch\"",
    ];
    const SOFT_KEYWORDS: &[&str] = &[
        "\"memory\"", "\"beliefs\"", "\"goals\"", "\"capability\"", "\"agent\"", "\"flow\"",
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
    let mut recovered: Errors = Vec::new();
    let eof = source.len();
    let result = generated::FileParser::new().parse(&mut recovered, tokens);
    let file = match result {
        Ok(file) => file,
        Err(e) => {
            // Recovery could not continue (typically at end of file).
            recovered.push(ErrorRecovery {
                error: e,
                dropped_tokens: Vec::new(),
            });
            File {
                agents: Vec::new(),
                span: Span::new(0, eof),
            }
        }
    };
    // "File ends here" points at the end of the last line with content.
    let content_end = source.trim_end().len();
    errors.extend(recovered.into_iter().map(|r| parse_error(r.error, content_end)));
    // An unterminated string or comment swallows the rest of its line or file,
    // so running out of input afterwards is a consequence, not a new problem.
    if errors.iter().any(|e| {
        matches!(
            e,
            SyntaxError::UnterminatedString { .. } | SyntaxError::UnterminatedComment { .. }
        )
    }) {
        errors.retain(|e| !matches!(e, SyntaxError::UnexpectedEof { .. }));
    }
    errors.sort_by_key(|e| (e.span().start, e.span().end));
    errors.dedup();
    Parsed { file, errors }
}

fn lex_error(source: &str, e: LexError) -> SyntaxError {
    let text = source.get(e.span.range()).unwrap_or("").to_string();
    match e.kind {
        LexErrorKind::UnexpectedChar => SyntaxError::UnexpectedChar {
            ch: text.chars().next().map(String::from).unwrap_or_default(),
            span: e.span,
        },
        LexErrorKind::UnterminatedString => SyntaxError::UnterminatedString {
            // Point at the opening quote, where the problem starts.
            span: Span::new(e.span.start as usize, e.span.start as usize + 1),
        },
        LexErrorKind::UnterminatedComment => SyntaxError::UnterminatedComment {
            span: Span::new(e.span.start as usize, e.span.start as usize + 2),
        },
        LexErrorKind::InvalidNumber => SyntaxError::InvalidNumber { text, span: e.span },
        LexErrorKind::InvalidEscape(escape) => SyntaxError::InvalidEscape {
            escape,
            span: e.span,
        },
    }
}

fn parse_error(e: ParseError<usize, Tok, UserError>, eof: usize) -> SyntaxError {
    match e {
        ParseError::InvalidToken { location } => SyntaxError::UnexpectedChar {
            ch: String::new(),
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

fn report(errors: &mut Errors, message: impl Into<String>, span: Span, help: Option<&str>) {
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
pub fn pipe(errors: &mut Errors, x: Expr, f: Expr, l: usize, r: usize) -> Expr {
    match f.kind {
        ExprKind::Call { callee, mut args } => {
            args.insert(0, x);
            call(*callee, args, l, r)
        }
        ExprKind::Var(_) | ExprKind::Member(..) => call(f, vec![x], l, r),
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
    errors: &mut Errors,
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
    errors: &mut Errors,
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
pub fn generic_type(errors: &mut Errors, name: Ident, arg: TypeExpr, span: Span) -> TypeExpr {
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
