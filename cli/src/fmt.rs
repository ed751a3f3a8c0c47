//! `aisc fmt`: rewrite files in the canonical layout, or (`--check`) name
//! the files that are not in it.

use crate::output::Output;
use ais_compiler::format::{format_source, FormatError};
use ais_ir::IntoDiagnostic;
use std::io::Read;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct FmtArgs {
    /// `.ais` files to format; `-` reads standard input and writes the
    /// result to standard output.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Change nothing: list the files that are not formatted and exit 1 if
    /// there is any.
    #[arg(long)]
    pub check: bool,
}

/// Exit code: 0 when every file is formatted (or was rewritten), 1 when a
/// file has syntax errors, cannot be read or written, or (`--check`) would
/// change.
pub fn fmt(out: &mut Output, args: &FmtArgs) -> i32 {
    let mut failed = false;
    for path in &args.files {
        let stdin = path.as_os_str() == "-";
        let name = if stdin {
            "<stdin>".to_string()
        } else {
            path.display().to_string()
        };
        let source = if stdin {
            let mut s = String::new();
            match std::io::stdin().read_to_string(&mut s) {
                Ok(_) => s,
                Err(e) => {
                    out.io_error(Path::new("<stdin>"), &e.to_string());
                    failed = true;
                    continue;
                }
            }
        } else {
            match out.read_source(path) {
                Some(s) => s,
                None => {
                    failed = true;
                    continue;
                }
            }
        };
        let formatted = match format_source(&source) {
            Ok(f) => f,
            Err(FormatError::Syntax(errors)) => {
                let diags: Vec<_> = errors.into_iter().map(|e| e.into_diagnostic()).collect();
                out.diagnostics(&name, &source, &diags);
                failed = true;
                continue;
            }
            Err(e @ FormatError::Internal(_)) => {
                eprintln!("error: {name}: {e}; the file is left unchanged");
                failed = true;
                continue;
            }
        };
        if args.check {
            if formatted != source {
                println!("would reformat {name}");
                failed = true;
            }
        } else if stdin {
            out.stdout(&formatted);
        } else if formatted != source {
            if let Err(e) = crate::load::write_atomic(path, formatted.as_bytes()) {
                eprintln!("error: cannot write `{name}`: {e}");
                failed = true;
            }
        }
    }
    i32::from(failed)
}
