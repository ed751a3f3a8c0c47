//! Configuration problems as diagnostics. `config show`, `doctor` and `run`
//! validate every section of the config file (the backends, and the AAM's
//! `[memory]`, `[tools]`, `[[mcp_servers]]` and `[access]`), and report a
//! problem with the file's line, column and a caret; it is a usage error
//! (exit 2, docs/cli.md).

use super::output::Output;
use ais_ir::{Diagnostic, Span};
use ais_vm::aam::config::AamConfig;
use ais_vm::config::{ConfigError, Settings};
use std::path::{Path, PathBuf};

/// The code of every configuration diagnostic (see `aisc explain K0001`).
const CODE: &str = "K0001";

/// Loads the settings, which checks every section of the file, and the
/// AAM's settings from the same parse.
pub fn load_all(backend: &super::BackendArgs) -> Result<(Settings, AamConfig), ConfigError> {
    let settings = backend.settings()?;
    let aam = AamConfig::from_config(&settings.config);
    Ok((settings, aam))
}

/// Renders a configuration problem; returns the exit code (2).
pub fn report(out: &mut Output, problem: &ConfigError) -> i32 {
    let message = problem.message();
    let path = problem.path();
    let text = path.and_then(|p| std::fs::read_to_string(p).ok());
    let mut d = Diagnostic::error(
        CODE,
        format!("invalid configuration: {message}"),
        Span::DUMMY,
    );
    if let Some(h) = problem.hint() {
        d = d.with_help(h.to_string());
    }
    match (path, text, problem.span()) {
        (Some(path), Some(text), Some(span)) => {
            let text = mask_secrets(&text);
            let range = clamp(&text, span);
            d.primary.span = Span::new(range.start, range.end);
            let d = d.with_label(label_for(message));
            out.diagnostics(&path.display().to_string(), &text, &[d]);
        }
        (path, _, _) => {
            let name = path.map(|p: &Path| p.display().to_string());
            out.report(name.as_deref(), &d);
        }
    }
    2
}

fn label_for(message: &str) -> String {
    if message.starts_with("unknown field") {
        "this key is not known in this section".into()
    } else {
        "here".into()
    }
}

/// The span within `text` (the file may have changed since it was read),
/// at least one character wide so the caret has something to point at.
fn clamp(text: &str, span: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let start = span.start.min(text.len());
    let end = span.end.min(text.len()).max(start);
    if end > start {
        return start..end;
    }
    let width = text
        .get(start..)
        .and_then(|t| t.chars().next())
        .map_or(0, char::len_utf8);
    start..start + width
}

/// The file text with the values of secret-looking keys (`api_key`,
/// `token`, ...) replaced by `*`, byte for byte, so that spans stay valid
/// and a caret near such a line never prints a secret.
fn mask_secrets(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| {
            let Some((key, value)) = line.split_once('=') else {
                return line.to_string();
            };
            let k = key.trim().to_ascii_lowercase();
            let secretish = ["key", "token", "secret", "password"]
                .iter()
                .any(|w| k.contains(w));
            // `api_key_env = "NAME"` names a variable; it is not a secret.
            if !secretish || k.ends_with("_env") {
                return line.to_string();
            }
            let masked: String = value
                .chars()
                .map(|c| {
                    if c.is_whitespace() || c == '"' || c == '\'' {
                        c.to_string()
                    } else {
                        "*".repeat(c.len_utf8())
                    }
                })
                .collect();
            format!("{key}={masked}")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_without_moving_offsets() {
        let text = "name = \"x\"\napi_key = \"sk-ünïcode\"\napi_key_env = \"KEY\"\n";
        let m = mask_secrets(text);
        assert_eq!(m.len(), text.len());
        assert!(!m.contains("sk-"), "{m}");
        assert!(m.contains("api_key_env = \"KEY\""), "{m}");
        assert!(m.starts_with("name = \"x\"\n"));
    }

    #[test]
    fn spans_stay_inside_the_text_and_are_never_empty() {
        let text = "a = 1\nb = é\n";
        assert_eq!(clamp(text, 0..1), 0..1);
        assert_eq!(clamp(text, 10..10), 10..12);
        assert_eq!(clamp(text, 40..50), text.len()..text.len());
    }
}

/// The `.apxm/` folder of the project a program belongs to, when that is
/// not the working directory's: the nearest folder with a `.apxm/`, from
/// the program's own folder up (as git finds a repository). The walk stops
/// at the working directory, whose `.apxm/` is the default anyway, and
/// skips `$HOME/.apxm` (the user's configuration, not a project).
pub fn program_project(program: &Path, cwd: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let program = if program.is_absolute() {
        program.to_path_buf()
    } else {
        cwd.join(program)
    };
    let mut dir = program.parent()?.to_path_buf();
    loop {
        if dir == cwd {
            return None;
        }
        let candidate = dir.join(ais_vm::config::CONFIG_DIR);
        if candidate.is_dir() && Some(dir.as_path()) != home {
            return Some(candidate);
        }
        if !dir.pop() || dir.as_os_str().is_empty() {
            return None;
        }
    }
}

/// Points a command at its program's project (`aisc run sub/main.ais` from
/// the parent folder uses `sub/.apxm`): its configuration file, unless
/// `--config` or `$APXM_CONFIG` names one, and its memory directory (runs,
/// journal, episodic log), unless `--memory` names one. Nothing is created
/// in the working directory.
pub fn adopt_project(
    program: &Path,
    config: &mut Option<PathBuf>,
    memory: Option<&mut super::aam::MemoryArgs>,
) {
    let Ok(cwd) = std::env::current_dir() else {
        return;
    };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let Some(project) = program_project(program, &cwd, home.as_deref()) else {
        return;
    };
    let file = project.join(ais_vm::config::CONFIG_FILE);
    if config.is_none() && std::env::var_os("APXM_CONFIG").is_none() && file.is_file() {
        *config = Some(file);
    }
    if let Some(m) = memory {
        if m.memory.is_none() {
            m.memory = Some(project.display().to_string());
        }
    }
}

#[cfg(test)]
mod project_tests {
    use super::program_project;
    use std::path::Path;

    #[test]
    fn the_nearest_apxm_from_the_program_up_and_not_past_the_working_directory() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        std::fs::create_dir_all(root.join("agent/.apxm")).expect("mkdir");
        std::fs::create_dir_all(root.join("agent/flows/deep")).expect("mkdir");
        std::fs::create_dir_all(root.join("home/.apxm")).expect("mkdir");
        std::fs::create_dir_all(root.join("home/p")).expect("mkdir");
        // From the parent folder: the program's project.
        assert_eq!(
            program_project(Path::new("agent/main.ais"), root, None),
            Some(root.join("agent/.apxm"))
        );
        assert_eq!(
            program_project(&root.join("agent/flows/deep/x.ais"), root, None),
            Some(root.join("agent/.apxm"))
        );
        // Inside the project: the working directory's own, the default.
        assert_eq!(
            program_project(Path::new("main.ais"), &root.join("agent"), None),
            None
        );
        // No project on the way: the default.
        assert_eq!(
            program_project(Path::new("home/p/x.ais"), root, Some(&root.join("home"))),
            None
        );
    }
}
