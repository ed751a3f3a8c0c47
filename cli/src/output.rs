//! Where CLI output goes: diagnostics to stderr (human) or stdout (JSON, one
//! object per line), results to stdout.

use super::{ColorChoice, ErrorFormat};
use ais_compiler::diagnostics::{
    hidden_json, hidden_note, limit, limit_map, render_human, render_human_map, render_json,
    render_json_map, render_json_plain, render_plain,
};
use ais_ir::Diagnostic;
use std::io::{IsTerminal, Write};
use std::path::Path;

pub struct Output {
    format: ErrorFormat,
    color: bool,
}

impl Output {
    pub fn new(format: ErrorFormat, color: ColorChoice) -> Output {
        let color = match color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                    && std::io::stderr().is_terminal()
            }
        };
        Output { format, color }
    }

    pub fn diagnostics(&mut self, file: &str, source: &str, diags: &[Diagnostic]) {
        let (shown, hidden) = limit(source, diags);
        match self.format {
            ErrorFormat::Human => {
                let mut err = std::io::stderr().lock();
                for d in shown {
                    let _ = err.write_all(render_human(d, file, source, self.color).as_bytes());
                }
                if hidden > 0 {
                    let _ = writeln!(err, "{}", hidden_note(file, hidden));
                }
            }
            ErrorFormat::Json => {
                let mut out = std::io::stdout().lock();
                for d in shown {
                    let _ = writeln!(out, "{}", render_json(d, file, source));
                }
                if hidden > 0 {
                    let _ = writeln!(out, "{}", hidden_json(file, hidden));
                }
            }
        }
    }

    /// Diagnostics of a program of several files, each shown in the file it
    /// points into (capped per file as [`Output::diagnostics`] does).
    pub fn diagnostics_map(&mut self, sources: &ais_ir::SourceMap, diags: &[Diagnostic]) {
        for (file, shown, hidden) in limit_map(sources, diags) {
            match self.format {
                ErrorFormat::Human => {
                    let mut err = std::io::stderr().lock();
                    for d in shown {
                        let _ = err.write_all(render_human_map(d, sources, self.color).as_bytes());
                    }
                    if hidden > 0 {
                        let _ = writeln!(err, "{}", hidden_note(file, hidden));
                    }
                }
                ErrorFormat::Json => {
                    let mut out = std::io::stdout().lock();
                    for d in shown {
                        let _ = writeln!(out, "{}", render_json_map(d, sources));
                    }
                    if hidden > 0 {
                        let _ = writeln!(out, "{}", hidden_json(file, hidden));
                    }
                }
            }
        }
    }

    /// A one-line outcome: the line on stderr for people, or with
    /// `--error-format=json` one `{"$message_type": "summary", ...}` object
    /// on stdout holding the line and `fields` (so tools get the counts too).
    pub fn summary(&mut self, line: &str, fields: serde_json::Value) {
        match self.format {
            ErrorFormat::Human => eprintln!("{line}"),
            ErrorFormat::Json => {
                let mut j = serde_json::json!({"$message_type": "summary", "message": line});
                if let (Some(j), serde_json::Value::Object(f)) = (j.as_object_mut(), fields) {
                    j.extend(f);
                }
                println!("{j}");
            }
        }
    }

    /// A diagnostic that points into no source text (artifacts, arguments
    /// without a snippet, configuration), in the chosen format.
    pub fn report(&mut self, file: Option<&str>, d: &Diagnostic) {
        match self.format {
            ErrorFormat::Human => eprint!("{}", render_plain(d, file)),
            ErrorFormat::Json => println!("{}", render_json_plain(d, file)),
        }
    }

    pub fn stdout(&mut self, text: &str) {
        let _ = std::io::stdout().lock().write_all(text.as_bytes());
    }

    /// Reads a source file; reports a missing or non-UTF-8 file as an error.
    pub fn read_source(&mut self, path: &Path) -> Option<String> {
        match std::fs::read(path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(s) => Some(s),
                Err(e) => {
                    self.io_error(
                        path,
                        &format!(
                            "file is not valid UTF-8 (byte {})",
                            e.utf8_error().valid_up_to()
                        ),
                    );
                    None
                }
            },
            Err(e) => {
                self.io_error(path, &e.to_string());
                None
            }
        }
    }

    pub fn io_error(&mut self, path: &Path, message: &str) {
        let text = format!("cannot read `{}`: {message}", path.display());
        match self.format {
            ErrorFormat::Human => eprintln!("error: {text}"),
            ErrorFormat::Json => println!(
                "{}",
                serde_json::json!({"$message_type": "diagnostic", "message": text, "code": null, "level": "error", "spans": [], "children": [], "rendered": format!("error: {text}\n")})
            ),
        }
    }
}

/// Makes a closed stdout (`aisc runs | head -1`) end the process quietly,
/// with status 141 (128 + SIGPIPE, what the shell shows for a filter that
/// SIGPIPE ended, as `git log | head -1` does). Rust ignores
/// SIGPIPE, so `println!` on a closed pipe panics with "failed printing to
/// stdout: Broken pipe"; this hook turns exactly that panic into a quiet
/// exit wherever it happens (every subcommand, every thread) and leaves
/// every other panic to the default hook. SIGPIPE itself stays ignored: a
/// run writes to its tools' and MCP servers' pipes, and one that exits is
/// an error of that call, not the end of aisc. Called once, by the binary.
pub fn exit_quietly_when_stdout_closes() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}
