//! Multi-file programs: `import "path.ais"` and `import "std/NAME"`.
//!
//! [`parse_program`] reads the entry file's imports, then theirs, each file
//! once (by its canonical path, so diamonds and cycles are fine), gives each
//! a range of the global offset space ([`SourceMap`]), parses it there, and
//! joins every file's agents into one tree for `sema`. The entry file comes
//! first at base 0, so a program without imports has exactly the spans it
//! had before imports existed. Reading goes through a [`Loader`] so the
//! language server can supply the editor's unsaved text.

use crate::syntax::{self, ast, erase::shift_spans};
use ais_ir::{Diagnostic, IntoDiagnostic, SourceMap, Span};
use std::collections::{HashSet, VecDeque};
use std::path::{Component, Path, PathBuf};

/// The bundled library: `import "std/NAME"` reads `NAME` here, so an
/// installed `aisc` needs no files beside it.
pub const STD: &[(&str, &str)] = &[
    ("text", include_str!("../../stdlib-ais/text.ais")),
    ("review", include_str!("../../stdlib-ais/review.ais")),
    ("council", include_str!("../../stdlib-ais/council.ais")),
    ("research", include_str!("../../stdlib-ais/research.ais")),
];

/// The text of `std/NAME` (with or without `.ais`).
pub fn std_module(name: &str) -> Option<&'static str> {
    let name = name.strip_suffix(".ais").unwrap_or(name);
    STD.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Where imported files come from.
pub trait Loader {
    fn read(&self, path: &Path) -> std::io::Result<String>;
}

/// Reads imported files from disk.
pub struct FsLoader;

impl Loader for FsLoader {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        std::fs::read_to_string(path)
    }
}

/// Reads nothing: for source that arrives as text from elsewhere (an MCP
/// client, a test, an untitled editor buffer), whose imports must not read
/// the disk of the machine checking it. `std/` imports still work.
pub struct NoFiles;

impl Loader for NoFiles {
    fn read(&self, _: &Path) -> std::io::Result<String> {
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "source given as text, not as a file, can import only `std/` modules",
        ))
    }
}

/// Why an import did not join the program.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read imported file `{shown}`: {reason}")]
    Unreadable {
        shown: String,
        reason: String,
        span: Span,
    },
    #[error("no standard library module `{name}`")]
    UnknownStd { name: String, span: Span },
    #[error("an inner plan cannot import files")]
    InPlan { span: Span },
}

impl IntoDiagnostic for ImportError {
    fn into_diagnostic(self) -> Diagnostic {
        let modules: Vec<String> = STD.iter().map(|(n, _)| format!("std/{n}")).collect();
        match &self {
            ImportError::Unreadable { span, .. } => {
                Diagnostic::error("E0010", self.to_string(), *span)
                    .with_label("imported here")
                    .with_help(format!(
                        "a path is relative to the importing file's folder (`..` and absolute paths work); the bundled library is {}",
                        modules.join(", ")
                    ))
            }
            ImportError::UnknownStd { span, .. } => {
                Diagnostic::error("E0011", self.to_string(), *span)
                    .with_label("not in the bundled library")
                    .with_help(format!(
                        "the bundled library is {}; to import a folder of your own named `std`, write `./std/...`",
                        modules.join(", ")
                    ))
            }
            ImportError::InPlan { span } => Diagnostic::error("E0012", self.to_string(), *span)
                .with_label("not allowed in model-written code")
                .with_help("a plan is the body of one flow; it can call only the tools it is offered"),
        }
    }
}

/// Every file of a program, parsed and joined.
pub struct ParsedProgram {
    pub sources: SourceMap,
    /// The agents of every file (the entry file's first), and every
    /// file's imports; spans are global.
    pub file: ast::File,
    /// For each file of `sources` (same order): its path on disk, `None`
    /// for the bundled library (and for an entry given without a path).
    pub paths: Vec<Option<PathBuf>>,
    /// Import and syntax errors, in load order.
    pub diagnostics: Vec<Diagnostic>,
}

/// Which file an import names.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Std(String),
    Path(PathBuf),
}

/// Parses `entry_text` (named `entry_name`, read from `entry_path` if it
/// was) and every file it imports. Relative imports of an entry without a
/// path are resolved from the working directory.
pub fn parse_program(
    entry_name: &str,
    entry_path: Option<&Path>,
    entry_text: &str,
    loader: &dyn Loader,
) -> ParsedProgram {
    let mut prog = ParsedProgram {
        sources: SourceMap::new(),
        file: ast::File {
            imports: Vec::new(),
            agents: Vec::new(),
            span: Span::DUMMY,
        },
        paths: Vec::new(),
        diagnostics: Vec::new(),
    };
    let mut seen: HashSet<Key> = HashSet::new();
    if let Some(p) = entry_path {
        seen.insert(Key::Path(canonical(p)));
    }
    // Files read but not parsed yet: (display name, path, text).
    let mut queue: VecDeque<(String, Option<PathBuf>, String)> = VecDeque::new();
    queue.push_back((
        entry_name.to_string(),
        entry_path.map(Path::to_path_buf),
        entry_text.to_string(),
    ));
    while let Some((name, path, text)) = queue.pop_front() {
        let base = prog.sources.add(name.clone(), text);
        let Some(added) = prog.sources.files().last() else {
            break;
        };
        let parsed = syntax::parse(&added.text);
        let mut file = parsed.file;
        shift_spans(&mut file, base);
        prog.diagnostics.extend(
            parsed
                .errors
                .into_iter()
                .map(|e| e.into_diagnostic().shifted(base)),
        );
        let is_std = path.is_none() && !prog.paths.is_empty();
        let dir: PathBuf = match &path {
            Some(p) => p.parent().map(Path::to_path_buf).unwrap_or_default(),
            None => PathBuf::new(),
        };
        let shown_dir = Path::new(&name)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        prog.paths.push(path);
        for import in &file.imports {
            match resolve(&import.path, &dir, &shown_dir, is_std) {
                Target::Std(module) => {
                    let key = Key::Std(module.clone());
                    if !seen.insert(key) {
                        continue;
                    }
                    match std_module(&module) {
                        Some(text) => {
                            queue.push_back((format!("std/{module}.ais"), None, text.to_string()))
                        }
                        None => prog.diagnostics.push(
                            ImportError::UnknownStd {
                                name: format!("std/{module}"),
                                span: import.path_span,
                            }
                            .into_diagnostic(),
                        ),
                    }
                }
                Target::File { path, shown } => {
                    if !seen.insert(Key::Path(canonical(&path))) {
                        continue;
                    }
                    match loader.read(&path) {
                        Ok(text) => queue.push_back((shown, Some(path), text)),
                        Err(e) => prog.diagnostics.push(
                            ImportError::Unreadable {
                                shown,
                                reason: io_reason(&e),
                                span: import.path_span,
                            }
                            .into_diagnostic(),
                        ),
                    }
                }
            }
        }
        prog.file.imports.extend(file.imports);
        prog.file.agents.extend(file.agents);
    }
    let end = prog.sources.files().last().map_or(0, |f| f.end());
    prog.file.span = Span::new(0, end as usize);
    prog
}

enum Target {
    Std(String),
    File { path: PathBuf, shown: String },
}

/// `written` as imported from a file in `dir` (shown to people as
/// `shown_dir`). In a bundled module every import is of the bundle.
fn resolve(written: &str, dir: &Path, shown_dir: &Path, in_std: bool) -> Target {
    if let Some(module) = written.strip_prefix("std/") {
        return Target::Std(module.strip_suffix(".ais").unwrap_or(module).to_string());
    }
    if in_std {
        let module = written.trim_start_matches("./");
        return Target::Std(module.strip_suffix(".ais").unwrap_or(module).to_string());
    }
    let p = Path::new(written);
    if p.is_absolute() {
        return Target::File {
            path: normalize(p),
            shown: normalize(p).display().to_string(),
        };
    }
    Target::File {
        path: normalize(&dir.join(p)),
        shown: normalize(&shown_dir.join(p)).display().to_string(),
    }
}

/// The path with `.` dropped and `..` applied where it can be, without
/// asking the file system (the path may not exist).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                let last_is_normal =
                    matches!(out.components().next_back(), Some(Component::Normal(_)));
                if last_is_normal {
                    out.pop();
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// One identity per file however it is reached (symbolic links, `..`).
fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| normalize(p))
}

/// The OS's reason without the "(os error N)" suffix.
fn io_reason(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// The first `import` in model-written plan text, as a refusal.
pub fn refuse_in_plan(body: &str) -> Option<ImportError> {
    let (tokens, _) = syntax::lexer::lex(body);
    tokens
        .iter()
        .find(|(_, t, _)| matches!(t, syntax::lexer::Tok::Import))
        .map(|(l, _, r)| ImportError::InPlan {
            span: Span::new(*l, *r),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_applies_parent_steps_lexically() {
        assert_eq!(
            normalize(Path::new("a/./b/../c.ais")),
            PathBuf::from("a/c.ais")
        );
        assert_eq!(normalize(Path::new("../x.ais")), PathBuf::from("../x.ais"));
        assert_eq!(
            normalize(Path::new("/a/../../x.ais")),
            PathBuf::from("/x.ais")
        );
    }

    #[test]
    fn text_without_a_file_imports_only_the_library() {
        let src = "import \"/etc/hostname\"\nimport \"std/text\"\nagent A {}\n";
        let p = parse_program("input.ais", None, src, &NoFiles);
        assert_eq!(p.sources.files().len(), 2, "std/text joins");
        assert_eq!(p.diagnostics.len(), 1);
        assert_eq!(p.diagnostics[0].code, "E0010");
    }

    #[test]
    fn every_std_module_parses() {
        for (name, text) in STD {
            let parsed = syntax::parse(text);
            assert!(parsed.errors.is_empty(), "std/{name}: {:?}", parsed.errors);
        }
    }
}
