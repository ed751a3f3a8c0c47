//! Pipeline strings (`canonicalize,fuse-ask{max-depth=3},cse,dce`), the
//! optimization presets and the pass registry.

use super::{CacheLayout, Canonicalize, Cse, Dce, FuseAsk, Pass};
use crate::diag::{Diagnostic, IntoDiagnostic};
use crate::Span;
use std::fmt;

/// One pass of a pipeline with its options, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassSpec {
    pub name: String,
    /// `key=value` (or a bare `key`, a flag) in the order written.
    pub options: Vec<(String, Option<String>)>,
    /// Where the pass is named in the pipeline text.
    pub span: Span,
}

impl PassSpec {
    pub fn new(name: &str) -> PassSpec {
        PassSpec {
            name: name.to_string(),
            options: Vec::new(),
            span: Span::DUMMY,
        }
    }

    pub fn with_option(mut self, key: &str, value: Option<&str>) -> PassSpec {
        self.options
            .push((key.to_string(), value.map(str::to_string)));
        self
    }
}

impl fmt::Display for PassSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if !self.options.is_empty() {
            let opts: Vec<String> = self
                .options
                .iter()
                .map(|(k, v)| match v {
                    Some(v) => format!("{k}={v}"),
                    None => k.clone(),
                })
                .collect();
            write!(f, "{{{}}}", opts.join(","))?;
        }
        Ok(())
    }
}

/// An ordered list of passes. `Display` prints the canonical pipeline string.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pipeline {
    pub passes: Vec<PassSpec>,
}

/// Optimization presets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OptLevel {
    /// No passes.
    O0,
    /// `canonicalize,fuse-ask,cse,dce,cache-layout` (the default of
    /// `aisc build/run`).
    #[default]
    O1,
    /// `-O1` followed by a second clean-up round `canonicalize,cse,dce`,
    /// which picks up what fusion and the first round exposed (dead
    /// prompt pieces, newly constant templates and conditions).
    O2,
}

impl OptLevel {
    pub fn pipeline(self) -> Pipeline {
        let names: &[&str] = match self {
            OptLevel::O0 => &[],
            OptLevel::O1 => &["canonicalize", "fuse-ask", "cse", "dce", "cache-layout"],
            OptLevel::O2 => &[
                "canonicalize",
                "fuse-ask",
                "cse",
                "dce",
                "canonicalize",
                "cse",
                "dce",
                "cache-layout",
            ],
        };
        Pipeline {
            passes: names.iter().map(|n| PassSpec::new(n)).collect(),
        }
    }

    /// `0`, `1`, `2` (also `O1`, `-O1`).
    pub fn parse(s: &str) -> Option<OptLevel> {
        match s.trim_start_matches('-').trim_start_matches(['O', 'o']) {
            "0" => Some(OptLevel::O0),
            "1" => Some(OptLevel::O1),
            "2" => Some(OptLevel::O2),
            _ => None,
        }
    }
}

impl fmt::Display for OptLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OptLevel::O0 => "-O0",
            OptLevel::O1 => "-O1",
            OptLevel::O2 => "-O2",
        })
    }
}

impl fmt::Display for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.passes.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

/// A problem with a pipeline string or a pass option. Spans are byte ranges
/// into the pipeline text. Codes `O0001`..
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PipelineError {
    #[error("malformed pipeline: {message}")]
    Syntax { message: String, span: Span },
    #[error("unknown pass `{name}`")]
    UnknownPass {
        name: String,
        suggestion: Option<&'static str>,
        span: Span,
    },
    #[error("pass `{pass}` has no option `{option}`")]
    UnknownOption {
        pass: String,
        option: String,
        known: &'static str,
        span: Span,
    },
    #[error("option `{option}` of pass `{pass}`: {message}")]
    BadOptionValue {
        pass: String,
        option: String,
        message: String,
        span: Span,
    },
}

impl PipelineError {
    pub fn code(&self) -> &'static str {
        match self {
            PipelineError::Syntax { .. } => "O0001",
            PipelineError::UnknownPass { .. } => "O0002",
            PipelineError::UnknownOption { .. } => "O0003",
            PipelineError::BadOptionValue { .. } => "O0004",
        }
    }

    pub fn span(&self) -> Span {
        match self {
            PipelineError::Syntax { span, .. }
            | PipelineError::UnknownPass { span, .. }
            | PipelineError::UnknownOption { span, .. }
            | PipelineError::BadOptionValue { span, .. } => *span,
        }
    }
}

impl IntoDiagnostic for PipelineError {
    fn into_diagnostic(self) -> Diagnostic {
        let label = match &self {
            PipelineError::Syntax { .. } => "here",
            PipelineError::UnknownPass { .. } => "no pass has this name",
            PipelineError::UnknownOption { .. } => "unknown option",
            PipelineError::BadOptionValue { .. } => "invalid value",
        };
        let mut d = Diagnostic::error(self.code(), self.to_string(), self.span()).with_label(label);
        match &self {
            PipelineError::UnknownPass { suggestion, .. } => {
                d = d.with_help(match suggestion {
                    Some(s) => format!("did you mean `{s}`? (`ais-opt --list-passes` shows all)"),
                    None => format!("known passes: {}", pass_names().join(", ")),
                });
            }
            PipelineError::UnknownOption { known, .. } => {
                d = d.with_help(format!("known options: {known}"));
            }
            PipelineError::Syntax { .. } => {
                d = d.with_help("write passes separated by commas, options in braces: `canonicalize,fuse-ask{max-depth=3},cse,dce`");
            }
            PipelineError::BadOptionValue { .. } => {}
        }
        d
    }
}

impl Pipeline {
    /// Parses `pass,pass{opt=value,flag},...`. Whitespace around names is
    /// allowed; an empty string is the empty pipeline. Pass names and option
    /// names are checked against the registry.
    pub fn parse(text: &str) -> Result<Pipeline, PipelineError> {
        let mut passes = Vec::new();
        let bytes = text.as_bytes();
        let mut i = 0usize;
        let skip_ws = |i: &mut usize| {
            while *i < bytes.len() && bytes[*i].is_ascii_whitespace() {
                *i += 1;
            }
        };
        let word = |i: &mut usize| -> (String, Span) {
            let start = *i;
            while *i < bytes.len()
                && (bytes[*i].is_ascii_alphanumeric() || matches!(bytes[*i], b'-' | b'_' | b'.'))
            {
                *i += 1;
            }
            (text[start..*i].to_string(), Span::new(start, *i))
        };
        skip_ws(&mut i);
        if i == bytes.len() {
            return Ok(Pipeline::default());
        }
        loop {
            skip_ws(&mut i);
            let (name, span) = word(&mut i);
            if name.is_empty() {
                return Err(syntax(text, i, "expected a pass name"));
            }
            let mut spec = PassSpec {
                name,
                options: Vec::new(),
                span,
            };
            skip_ws(&mut i);
            if i < bytes.len() && bytes[i] == b'{' {
                i += 1;
                loop {
                    skip_ws(&mut i);
                    if i < bytes.len() && bytes[i] == b'}' {
                        i += 1;
                        break;
                    }
                    let (key, key_span) = word(&mut i);
                    if key.is_empty() {
                        return Err(syntax(text, i, "expected an option name"));
                    }
                    skip_ws(&mut i);
                    let value = if i < bytes.len() && bytes[i] == b'=' {
                        i += 1;
                        skip_ws(&mut i);
                        let (v, _) = word(&mut i);
                        if v.is_empty() {
                            return Err(syntax(text, i, "expected an option value"));
                        }
                        Some(v)
                    } else {
                        None
                    };
                    spec.options.push((key, value));
                    let _ = key_span;
                    skip_ws(&mut i);
                    match bytes.get(i) {
                        Some(b',') => i += 1,
                        Some(b'}') => {
                            i += 1;
                            break;
                        }
                        _ => return Err(syntax(text, i, "expected `,` or `}` in pass options")),
                    }
                }
            }
            // Validate name and options now, so errors point at the text.
            create_pass_at(&spec, text)?;
            passes.push(spec);
            skip_ws(&mut i);
            match bytes.get(i) {
                None => break,
                Some(b',') => i += 1,
                Some(_) => return Err(syntax(text, i, "expected `,` between passes")),
            }
        }
        Ok(Pipeline { passes })
    }

    /// Instantiates every pass.
    pub fn build(&self) -> Result<Vec<Box<dyn Pass>>, PipelineError> {
        self.passes.iter().map(create_pass).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.passes.is_empty()
    }
}

fn syntax(text: &str, at: usize, message: &str) -> PipelineError {
    let found = text[at.min(text.len())..]
        .chars()
        .next()
        .map_or_else(|| "end of pipeline".to_string(), |c| format!("`{c}`"));
    let end = (at + 1).min(text.len()).max(at.min(text.len()));
    PipelineError::Syntax {
        message: format!("{message}, found {found}"),
        span: Span::new(at.min(text.len()), end),
    }
}

/// Every registered transformation pass, with a one-line description.
pub const PASSES: &[(&str, &str)] = &[
    (
        "canonicalize",
        "fold constant concat/templates, trivial merges, constant and single-case switch/if",
    ),
    (
        "fuse-ask",
        "fuse producer->consumer chains of `ask` into one call (options: max-depth=N, prompt-budget=N, think)",
    ),
    ("cse", "merge identical pure ops (and identical `cacheable` LLM calls)"),
    ("dce", "remove unused pure ops, and flows/agents unreachable from any entry"),
    (
        "cache-layout",
        "lay LLM requests out for prompt caching: shared context blocks first, cache keys, breakpoints",
    ),
];

/// The names of the registered passes.
pub fn pass_names() -> Vec<&'static str> {
    PASSES.iter().map(|(n, _)| *n).collect()
}

/// Creates a pass from its spec (name and options).
pub fn create_pass(spec: &PassSpec) -> Result<Box<dyn Pass>, PipelineError> {
    Ok(match spec.name.as_str() {
        "canonicalize" => {
            no_options(spec)?;
            Box::new(Canonicalize::default())
        }
        "fuse-ask" => Box::new(FuseAsk::from_spec(spec)?),
        "cse" => {
            no_options(spec)?;
            Box::new(Cse::default())
        }
        "dce" => {
            no_options(spec)?;
            Box::new(Dce::default())
        }
        "cache-layout" => {
            no_options(spec)?;
            Box::new(CacheLayout::default())
        }
        other => {
            return Err(PipelineError::UnknownPass {
                name: other.to_string(),
                suggestion: suggest(other),
                span: spec.span,
            })
        }
    })
}

/// Like [`create_pass`], but option errors point at the option in `text`.
fn create_pass_at(spec: &PassSpec, text: &str) -> Result<(), PipelineError> {
    create_pass(spec).map(|_| ()).map_err(|e| match e {
        PipelineError::UnknownOption {
            pass,
            option,
            known,
            ..
        } => {
            let span = option_span(spec, text, &option);
            PipelineError::UnknownOption {
                pass,
                option,
                known,
                span,
            }
        }
        PipelineError::BadOptionValue {
            pass,
            option,
            message,
            ..
        } => {
            let span = option_span(spec, text, &option);
            PipelineError::BadOptionValue {
                pass,
                option,
                message,
                span,
            }
        }
        other => other,
    })
}

fn option_span(spec: &PassSpec, text: &str, option: &str) -> Span {
    let from = spec.span.end as usize;
    text.get(from..)
        .and_then(|rest| rest.find(option))
        .map_or(spec.span, |at| {
            Span::new(from + at, from + at + option.len())
        })
}

fn no_options(spec: &PassSpec) -> Result<(), PipelineError> {
    match spec.options.first() {
        Some((k, _)) => Err(PipelineError::UnknownOption {
            pass: spec.name.clone(),
            option: k.clone(),
            known: "(none)",
            span: spec.span,
        }),
        None => Ok(()),
    }
}

/// Parses a non-negative integer option value.
pub(crate) fn usize_option(
    spec: &PassSpec,
    key: &str,
    value: Option<&str>,
) -> Result<usize, PipelineError> {
    value
        .and_then(|v| v.parse::<usize>().ok())
        .ok_or_else(|| PipelineError::BadOptionValue {
            pass: spec.name.clone(),
            option: key.to_string(),
            message: format!(
                "expected a non-negative integer, found `{}`",
                value.unwrap_or("")
            ),
            span: spec.span,
        })
}

/// Parses a boolean option: a bare flag, `true` or `false`.
pub(crate) fn bool_option(
    spec: &PassSpec,
    key: &str,
    value: Option<&str>,
) -> Result<bool, PipelineError> {
    match value {
        None | Some("true") | Some("1") => Ok(true),
        Some("false") | Some("0") => Ok(false),
        Some(v) => Err(PipelineError::BadOptionValue {
            pass: spec.name.clone(),
            option: key.to_string(),
            message: format!("expected `true` or `false`, found `{v}`"),
            span: spec.span,
        }),
    }
}

fn suggest(name: &str) -> Option<&'static str> {
    pass_names()
        .into_iter()
        .map(|n| (edit_distance(n, name), n))
        .filter(|(d, _)| *d <= 3)
        .min()
        .map(|(_, n)| n)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_pipelines() {
        let p = Pipeline::parse(" canonicalize , fuse-ask{max-depth=3, think} ,cse,dce")
            .expect("valid");
        assert_eq!(
            p.to_string(),
            "canonicalize,fuse-ask{max-depth=3,think},cse,dce"
        );
        assert_eq!(Pipeline::parse("").expect("empty").passes.len(), 0);
        assert_eq!(
            OptLevel::O1.pipeline().to_string(),
            "canonicalize,fuse-ask,cse,dce,cache-layout"
        );
        assert_eq!(OptLevel::parse("-O2"), Some(OptLevel::O2));
        assert_eq!(OptLevel::parse("3"), None);
    }

    #[test]
    fn reports_errors_with_spans() {
        let e = Pipeline::parse("canonicalize,cs").expect_err("unknown");
        assert_eq!(e.code(), "O0002");
        assert_eq!(e.span(), Span::new(13, 15));
        assert!(matches!(
            e,
            PipelineError::UnknownPass {
                suggestion: Some("cse"),
                ..
            }
        ));
        let e = Pipeline::parse("fuse-ask{depth=3}").expect_err("unknown option");
        assert_eq!(e.code(), "O0003");
        assert_eq!(e.span(), Span::new(9, 14));
        let e = Pipeline::parse("fuse-ask{max-depth=x}").expect_err("bad value");
        assert_eq!(e.code(), "O0004");
        for bad in [
            "cse,",
            ",cse",
            "cse dce",
            "fuse-ask{",
            "fuse-ask{max-depth=}",
            "cse{x",
            "a,,b",
        ] {
            assert!(Pipeline::parse(bad).is_err(), "{bad}");
        }
    }
}
