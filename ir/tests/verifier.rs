//! Runs the verifier corpus in `tests/verifier/`: each file carries its
//! expected diagnostics inline, and the verifier must report exactly those.
//!
//! Annotation forms (TEXT is a substring of the message, or the code):
//! - `// expected-error: TEXT` / `// expected-warning: TEXT` (this line)
//! - `// expected-error@-N: TEXT` (N lines above)
//! - `//~ ERROR TEXT`, `//~^ ERROR TEXT` (one line above per `^`), `WARNING`

mod common;

use ais_ir::diag::line_col;
use ais_ir::{parse_module, verifier, Severity};

#[derive(Debug)]
struct Expect {
    line: usize,
    severity: Severity,
    text: String,
}

fn annotations(src: &str) -> Vec<Expect> {
    let mut out = Vec::new();
    for (i, line) in src.lines().enumerate() {
        let here = i + 1;
        for (kw, severity) in [
            ("expected-error", Severity::Error),
            ("expected-warning", Severity::Warning),
        ] {
            if let Some(pos) = line.find(kw) {
                let rest = &line[pos + kw.len()..];
                let (offset, rest) = match rest.strip_prefix("@-") {
                    Some(r) => {
                        let digits: String = r.chars().take_while(char::is_ascii_digit).collect();
                        (digits.parse().unwrap_or(0), &r[digits.len()..])
                    }
                    None => (0usize, rest),
                };
                let text = rest.trim_start_matches(':').trim().to_string();
                out.push(Expect {
                    line: here - offset,
                    severity,
                    text,
                });
            }
        }
        if let Some(pos) = line.find("//~") {
            let rest = &line[pos + 3..];
            let ups = rest.chars().take_while(|&c| c == '^').count();
            let rest = rest[ups..].trim_start();
            let (severity, text) = if let Some(t) = rest.strip_prefix("ERROR") {
                (Severity::Error, t)
            } else if let Some(t) = rest.strip_prefix("WARNING") {
                (Severity::Warning, t)
            } else {
                panic!("line {here}: bad `//~` annotation");
            };
            out.push(Expect {
                line: here - ups,
                severity,
                text: text.trim().to_string(),
            });
        }
    }
    out
}

#[test]
fn verifier_corpus() {
    let files = common::aisir_files("verifier");
    assert!(files.len() >= 20, "verifier corpus missing: {files:?}");
    let mut failures = Vec::new();
    for path in files {
        let src = std::fs::read_to_string(&path).unwrap_or_default();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let m = match parse_module(&src) {
            Ok(m) => m,
            Err(errs) => {
                failures.push(format!("{name}: does not parse: {errs:?}"));
                continue;
            }
        };
        let got: Vec<(usize, Severity, String, &'static str)> = verifier::verify(&m)
            .into_iter()
            .map(|e| {
                (
                    line_col(&src, e.span().start as usize).0,
                    e.severity(),
                    e.to_string(),
                    e.code(),
                )
            })
            .collect();
        let expects = annotations(&src);
        assert!(!expects.is_empty(), "{name}: no expectations");
        for e in &expects {
            let hit = got.iter().any(|(l, s, msg, code)| {
                *l == e.line && *s == e.severity && (msg.contains(&e.text) || *code == e.text)
            });
            if !hit {
                failures.push(format!(
                    "{name}:{}: expected {} `{}` not reported; got {got:?}",
                    e.line, e.severity, e.text
                ));
            }
        }
        for (l, s, msg, code) in &got {
            let expected = expects.iter().any(|e| {
                e.line == *l && e.severity == *s && (msg.contains(&e.text) || *code == e.text)
            });
            if !expected {
                failures.push(format!("{name}:{l}: unexpected {s} {code}: {msg}"));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
