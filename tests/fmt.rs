//! Formatter golden tests, one generated test per file:
//! - `tests/fmt/*.ais`: one layout case per file; the formatted text matches
//!   its reviewed snapshot in `snapshots/fmt/` and is a fixed point;
//! - every `.ais` file of `examples/` and the test corpora (`tests/**`): a
//!   file that parses formats to a fixed point (`fmt(fmt(x)) == fmt(x)`),
//!   means the same program (equal trees once spans are erased) and keeps
//!   every comment's text, in order; a file that does not parse is refused
//!   with its syntax errors;
//! - every example is already formatted (`aisc fmt --check examples`
//!   passes), so an example copied into a project passes its `test.sh`.

use ais_compiler::driver::with_deep_stack;
use ais_compiler::format::{format_source, FormatError};
use ais_compiler::syntax::erase::erase_spans;
use ais_compiler::syntax::lexer::comments;
use ais_compiler::syntax::parse;
use ais_testkit::golden::{corpus, rel, snapshot_name, snapshot_settings};
use libtest_mimic::{Arguments, Failed, Trial};
use std::path::PathBuf;

fn comment_texts(src: &str) -> Vec<String> {
    comments(src)
        .iter()
        .map(|c| c.text(src).to_string())
        .collect()
}

/// Formats `source` and checks the three properties; `Ok(None)` when the
/// source does not parse (and the formatter refused it).
fn check_properties(source: &str) -> Result<Option<String>, String> {
    let parsed = parse(source);
    let once = match format_source(source) {
        Ok(text) => text,
        Err(FormatError::Syntax(errors)) => {
            if parsed.errors.is_empty() {
                return Err("refused a file that parses".into());
            }
            if errors != parsed.errors {
                return Err("refused with other errors than the parser's".into());
            }
            return Ok(None);
        }
        Err(e) => return Err(e.to_string()),
    };
    if !parsed.errors.is_empty() {
        return Err("formatted a file with syntax errors".into());
    }
    let twice = format_source(&once).map_err(|e| format!("formatted text: {e}"))?;
    if twice != once {
        return Err(format!(
            "not idempotent:\n--- once\n{once}\n--- twice\n{twice}"
        ));
    }
    let reparsed = parse(&once);
    if erase_spans(&reparsed.file) != erase_spans(&parsed.file) {
        return Err(format!("the program changed:\n{once}"));
    }
    if comment_texts(&once) != comment_texts(source) {
        return Err(format!("comments changed:\n{once}"));
    }
    Ok(Some(once))
}

fn golden(path: PathBuf) -> Trial {
    let snap = snapshot_name(&path, "tests/fmt");
    Trial::test(format!("tests/fmt/{snap}"), move || {
        let source = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", rel(&path)))?;
        let text = with_deep_stack(|| check_properties(&source))?
            .ok_or_else(|| Failed::from(format!("{} does not parse", rel(&path))))?;
        snapshot_settings("fmt").bind(|| insta::assert_snapshot!(snap, text));
        Ok(())
    })
}

fn corpus_file(path: PathBuf) -> Trial {
    Trial::test(
        format!("{} formats to a fixed point", rel(&path)),
        move || {
            let source =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", rel(&path)))?;
            with_deep_stack(|| check_properties(&source))?;
            Ok(())
        },
    )
}

fn example_is_formatted(path: PathBuf) -> Trial {
    Trial::test(format!("{} is formatted", rel(&path)), move || {
        let source = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", rel(&path)))?;
        let formatted = with_deep_stack(|| format_source(&source)).map_err(|e| e.to_string())?;
        if formatted != source {
            return Err(format!("not formatted: run `aisc fmt {}`", rel(&path)).into());
        }
        Ok(())
    })
}

fn main() {
    ais_testkit::golden::init();
    let args = Arguments::from_args();
    let mut trials: Vec<Trial> = corpus("tests/fmt", "ais").into_iter().map(golden).collect();
    let examples = corpus("examples", "ais");
    trials.extend(examples.iter().cloned().map(example_is_formatted));
    let mut others = examples;
    others.extend(
        corpus("tests", "ais")
            .into_iter()
            .filter(|p| !rel(p).starts_with("tests/fmt/")),
    );
    trials.extend(others.into_iter().map(corpus_file));
    libtest_mimic::run(&args, trials).exit();
}
