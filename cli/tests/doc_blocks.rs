//! Every `ais` code block in the docs (`docs/*.md`, `README.md`) is a
//! complete program that `aisc check` accepts and that runs on the offline
//! simulator, unless its info string marks it `ais fragment` (a piece of a
//! program, shown for its syntax). Arguments for the entry flow go on the
//! info string: ```` ```ais args: topic=tides n=3 ````. So the docs and the
//! language cannot drift apart (docs/testing.md).

use std::path::{Path, PathBuf};
use std::process::Command;

struct Block {
    file: String,
    line: usize,
    info: String,
    code: String,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ has a parent")
        .to_path_buf()
}

fn blocks() -> Vec<Block> {
    let root = workspace();
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.push(root.join("README.md"));
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("read a doc");
        let name = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .display()
            .to_string();
        let mut open: Option<(usize, String, String)> = None;
        for (i, line) in text.lines().enumerate() {
            match &mut open {
                None => {
                    if let Some(info) = line.strip_prefix("```ais") {
                        if info.is_empty() || info.starts_with(' ') {
                            open = Some((i + 1, info.trim().to_string(), String::new()));
                        }
                    }
                }
                Some((start, info, code)) => {
                    if line.trim_start().starts_with("```") {
                        out.push(Block {
                            file: name.clone(),
                            line: *start,
                            info: std::mem::take(info),
                            code: std::mem::take(code),
                        });
                        open = None;
                    } else {
                        code.push_str(line);
                        code.push('\n');
                    }
                }
            }
        }
        assert!(open.is_none(), "{name}: an ```ais block is not closed");
    }
    out
}

fn aisc(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_aisc"))
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("NO_COLOR", "1")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("APXM_CONFIG")
        .env_remove("AIS_STORE")
        .output()
        .expect("aisc runs")
}

#[test]
fn every_complete_program_in_the_docs_checks_and_runs_on_the_simulator() {
    let all = blocks();
    let mut failures = Vec::new();
    let mut complete = 0;
    for b in &all {
        let at = format!("{}:{}", b.file, b.line);
        let args: Vec<String> = match b.info.as_str() {
            "fragment" => continue,
            "" => Vec::new(),
            info => match info.strip_prefix("args:") {
                Some(list) => list
                    .split_whitespace()
                    .flat_map(|a| ["--arg".to_string(), a.to_string()])
                    .collect(),
                None => {
                    failures.push(format!(
                        "{at}: unknown info string `ais {info}` (`ais`, `ais fragment` or `ais args: NAME=VALUE ...`)"
                    ));
                    continue;
                }
            },
        };
        complete += 1;
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("block.ais"), &b.code).expect("write");
        let o = aisc(dir.path(), &["check", "block.ais"]);
        if !o.status.success() {
            failures.push(format!(
                "{at}: `aisc check` fails:\n{}",
                String::from_utf8_lossy(&o.stderr)
            ));
            continue;
        }
        let mut run = vec![
            "run",
            "block.ais",
            "--memory",
            ":memory:",
            "--sim-delay-scale",
            "0",
            "--quiet",
        ];
        run.extend(args.iter().map(String::as_str));
        let o = aisc(dir.path(), &run);
        if !o.status.success() {
            failures.push(format!(
                "{at}: `aisc {}` exits {:?}:\n{}",
                run.join(" "),
                o.status.code(),
                String::from_utf8_lossy(&o.stderr)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} blocks fail (mark a piece of a program ```ais fragment):\n\n{}",
        failures.len(),
        all.len(),
        failures.join("\n\n")
    );
    // The docs show whole programs, not only fragments (a floor: raise it
    // as blocks become complete programs).
    assert!(
        complete >= 14,
        "only {complete} of {} blocks are complete programs",
        all.len()
    );
}

/// docs/security.md shows its policies on whole programs: every AIS block
/// there is complete (checked and run by the test above), none a fragment
/// (issue 35: its quarantine example, a fragment, did not compile).
#[test]
fn every_ais_block_in_security_md_is_a_complete_program() {
    let security: Vec<Block> = blocks()
        .into_iter()
        .filter(|b| b.file == "docs/security.md")
        .collect();
    assert!(!security.is_empty(), "docs/security.md has AIS blocks");
    for b in &security {
        assert_ne!(
            b.info, "fragment",
            "docs/security.md:{}: a fragment; write the whole program",
            b.line
        );
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("block.ais"), &b.code).expect("write");
        let o = aisc(dir.path(), &["check", "block.ais"]);
        assert!(
            o.status.success(),
            "docs/security.md:{}: `aisc check` fails:\n{}",
            b.line,
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
