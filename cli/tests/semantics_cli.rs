//! Issue 15 ("semantics you can trust"): each test pins one place where the
//! documentation and the behaviour of `aisc` used to disagree, so they
//! cannot drift apart again.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn path(rel: &str) -> String {
    root().join(rel).display().to_string()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// `aisc` in `dir`, offline (no API key, no home config).
fn aisc_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aisc"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env("HOME", dir)
        .env("NO_COLOR", "1")
        .current_dir(dir)
        .output()
        .expect("aisc runs")
}

/// A configuration whose default backend is the mock server over the
/// OpenAI protocol, plus `extra` lines of that backend's settings.
fn mock_config(dir: &Path, server: &ais_testkit::mock::MockServer, extra: &str) -> String {
    write(
        dir,
        "config.toml",
        &format!(
            "default_backend = \"m\"\n[[llm_backends]]\nname = \"m\"\nprotocol = \"openai\"\nbase_url = \"{}\"\n{extra}",
            server.openai_url()
        ),
    )
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p.display().to_string()
}

const FAILING: &str = r#"agent A {
    @entry
    flow main() -> json {
        let r = inv("no_such_tool", "{}")
        return r
    }
}
"#;

const JSON_PARAM: &str = r#"agent A {
    @entry
    flow main(q: json, n: number) -> json {
        print(n)
        return q
    }
}
"#;

#[test]
fn uncaught_failure_code_matches_docs() {
    let dir = tempfile::tempdir().expect("dir");
    let f = write(dir.path(), "f.ais", FAILING);
    let o = aisc_in(dir.path(), &["run", &f, "--memory", ":memory:", "-q"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("[R0003]"), "{err}");
    assert!(err.contains("tool.unknown"), "{err}");
    // The documents name the same code, and `explain` knows it.
    assert!(read("docs/reliability.md").contains("(code R0003)"));
    assert!(read("docs/runtime.md").contains("code R0003"));
    let e = aisc_in(dir.path(), &["explain", "R0003"]);
    assert!(e.status.success(), "{}", stderr(&e));
    assert!(stdout(&e).contains("uncaught"), "{}", stdout(&e));
}

/// Every `"X0000"` code literal in the non-test source of the crates that
/// produce diagnostics (the compiler, the IR, the VM, the stdlib).
fn codes_in_source() -> std::collections::BTreeMap<String, String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    for c in ["compiler/src", "cli/src", "ir/src", "vm/src", "stdlib/src"] {
        walk(&root().join(c), &mut files);
    }
    let mut codes = std::collections::BTreeMap::new();
    for f in files {
        let name = f.display().to_string();
        if name.ends_with("explain.rs") || name.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).expect("source");
        // Unit tests at the end of a file may use codes as expectations only.
        let text = text.split("#[cfg(test)]").next().unwrap_or("");
        let b = text.as_bytes();
        for i in 0..b.len().saturating_sub(6) {
            let w = &b[i..i + 7];
            if w[0] == b'"'
                && w[1].is_ascii_uppercase()
                && w[2..6].iter().all(u8::is_ascii_digit)
                && w[6] == b'"'
            {
                let code = String::from_utf8_lossy(&w[1..6]).into_owned();
                codes.entry(code).or_insert_with(|| name.clone());
            }
        }
    }
    codes
}

#[test]
fn every_code_is_explained() {
    use ais_compiler::diagnostics::explain;
    let codes = codes_in_source();
    // The scan finds every phase's codes (a broken scan would pass vacuously).
    for family in ["E", "W", "L", "C", "P", "O", "V", "R", "K"] {
        assert!(
            codes.keys().any(|c| c.starts_with(family)),
            "no {family} code found"
        );
    }
    let docs = read("docs/diagnostics.md");
    for (code, file) in &codes {
        assert!(
            explain::lookup(code).is_some(),
            "{code} (constructed in {file}) has no `aisc explain` text"
        );
        assert!(
            docs.contains(&format!("| [{code}](#{}) |", code.to_lowercase())),
            "{code} has no row in docs/diagnostics.md"
        );
    }
    // And the registry holds nothing that no phase emits. Besides the
    // diagnostic codes it explains run-failure causes the runtime names
    // in a constant (`LIMIT_FRAMES`).
    let vm_source: String = [
        "vm/src/scheduler/limits.rs",
        "vm/src/scheduler/gate/watchdog.rs",
    ]
    .iter()
    .map(|f| read(f))
    .collect();
    for e in explain::EXPLANATIONS {
        assert!(
            codes.contains_key(e.code) || vm_source.contains(&format!("\"{}\"", e.code)),
            "{} is explained but nothing constructs it",
            e.code
        );
    }
    assert_eq!(docs, explain::markdown(), "docs/diagnostics.md is stale");
}

#[test]
fn verify_result_fields_match_the_schema() {
    let schema = ais_vm::llm::schema::verify();
    let fields: Vec<&str> = schema["properties"]
        .as_object()
        .expect("properties")
        .keys()
        .map(String::as_str)
        .collect();
    assert!(fields.contains(&"verdict"), "{fields:?}");
    let lang = read("docs/language.md");
    let row = lang
        .lines()
        .find(|l| l.starts_with("| `verify(claim, evidence)`"))
        .expect("verify row in docs/language.md");
    for f in &fields {
        assert!(row.contains(&format!("`{f}`")), "{row} lacks `{f}`");
    }
    // No document or example reads a field the schema does not have.
    for rel in [
        "docs/language.md",
        "examples/07_reflection.ais",
        "examples/11_verify_fix_retry.ais",
    ] {
        assert!(!read(rel).contains(".passed"), "{rel} reads `.passed`");
    }
}

#[test]
fn quiet_hides_the_simulator_note() {
    let dir = tempfile::tempdir().expect("dir");
    let f = write(dir.path(), "j.ais", JSON_PARAM);
    let args = [
        "run", &f, "--memory", ":memory:", "--arg", "q=1", "--arg", "n=2",
    ];
    let loud = aisc_in(dir.path(), &args);
    assert!(loud.status.success(), "{}", stderr(&loud));
    assert!(stderr(&loud).contains("simulat"), "{}", stderr(&loud));
    let mut quiet = args.to_vec();
    quiet.push("-q");
    let o = aisc_in(dir.path(), &quiet);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), "", "-q prints nothing on stderr");
    assert_eq!(stdout(&o), "2\n1\n");
}

#[test]
fn json_error_format_covers_inspect_bad_artifacts_and_summaries() {
    let dir = tempfile::tempdir().expect("dir");
    let bad = write(dir.path(), "bad.apxmobj", "not an artifact");
    for cmd in ["inspect", "run"] {
        let o = aisc_in(dir.path(), &["--error-format=json", cmd, &bad]);
        assert_eq!(o.status.code(), Some(1), "{cmd}");
        assert_eq!(stderr(&o), "", "{cmd}: nothing for people on stderr");
        let d: serde_json::Value =
            serde_json::from_str(stdout(&o).lines().next().unwrap_or("")).expect("json line");
        assert_eq!(d["code"]["code"], "L0002", "{cmd}: {d}");
        assert_eq!(d["level"], "error");
    }
    // The per-file summary of `check` is a JSON object too.
    let o = aisc_in(
        dir.path(),
        &[
            "check",
            "--error-format=json",
            &path("examples/01_parallel_research.ais"),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let s: serde_json::Value =
        serde_json::from_str(stdout(&o).lines().last().unwrap_or("")).expect("json");
    assert_eq!(s["$message_type"], "summary");
    assert_eq!(s["errors"], 0);
    assert!(s["flows"].as_u64().is_some_and(|n| n >= 1), "{s}");
}

#[test]
fn report_json_has_a_structured_error() {
    let dir = tempfile::tempdir().expect("dir");
    let f = write(dir.path(), "f.ais", FAILING);
    let report = dir.path().join("r.json");
    let o = aisc_in(
        dir.path(),
        &[
            "run",
            &f,
            "--memory",
            ":memory:",
            "-q",
            "--report-json",
            &report.display().to_string(),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("json");
    assert_eq!(j["ok"], false);
    let e = &j["error"];
    assert!(e.is_object(), "{e}");
    assert_eq!(e["code"], "R0003");
    assert_eq!(e["cause"], "tool.unknown");
    assert_eq!(e["op"], "inv");
    assert_eq!(e["span"]["line"], 4);
    assert!(e["hint"].as_str().is_some_and(|h| !h.is_empty()));
}

#[test]
fn duplicate_arg_is_an_error() {
    let dir = tempfile::tempdir().expect("dir");
    let f = write(dir.path(), "j.ais", JSON_PARAM);
    let o = aisc_in(
        dir.path(),
        &[
            "run", &f, "--memory", ":memory:", "--arg", "n=1", "--arg", "n=2", "--arg", "q=1",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("`n` is given more than once"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stdout(&o), "", "nothing ran");
}

#[test]
fn arg_errors_exit_2() {
    let dir = tempfile::tempdir().expect("dir");
    let f = write(dir.path(), "j.ais", JSON_PARAM);
    for (args, says) in [
        (vec!["--arg", "q=1"], "missing argument `n"),
        (
            vec!["--arg", "q=1", "--arg", "n=x"],
            "argument `n` must be number",
        ),
        (
            vec!["--arg", "q=1", "--arg", "n=1", "--arg", "z=1"],
            "no parameter `z`",
        ),
        (vec!["--arg", "novalue"], "NAME=VALUE"),
        (
            vec!["--entry", "A.nope", "--arg", "q=1", "--arg", "n=1"],
            "no flow `A.nope`",
        ),
    ] {
        let mut all = vec!["run", &f, "--memory", ":memory:", "-q"];
        all.extend(args.iter().copied());
        let o = aisc_in(dir.path(), &all);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn invalid_json_arg_is_an_error_with_its_position() {
    let dir = tempfile::tempdir().expect("dir");
    let f = write(dir.path(), "j.ais", JSON_PARAM);
    let o = aisc_in(
        dir.path(),
        &[
            "run",
            &f,
            "--memory",
            ":memory:",
            "--arg",
            "n=1",
            "--arg",
            "q={\"a\": tru}",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("--arg `q`: invalid JSON"), "{err}");
    assert!(err.contains("--arg q:1:10"), "line and column: {err}");
    assert!(err.contains("Help:"), "{err}");
    // Valid JSON is taken as JSON, not as text.
    let o = aisc_in(
        dir.path(),
        &[
            "run", &f, "--memory", ":memory:", "-q", "--arg", "n=1", "--arg", "q=[1,2]",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("[\n  1,\n  2\n]"), "{}", stdout(&o));
}

/// The words of a `// Run:  aisc run FILE ARGS` line, split like a shell
/// would (double quotes group words).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let (mut quoted, mut any) = (false, false);
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(cur);
    }
    words
}

#[test]
fn every_example_runs_out_of_the_box_without_a_catch() {
    let mut examples: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .expect("examples")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "ais"))
        .collect();
    examples.sort();
    assert!(examples.len() >= 10, "{examples:?}");
    for ex in examples {
        let text = std::fs::read_to_string(&ex).expect("example");
        let name = ex.file_name().map(|n| n.to_string_lossy().into_owned());
        let run = text
            .lines()
            .find_map(|l| l.strip_prefix("// Run:"))
            .unwrap_or_else(|| panic!("{name:?} documents no `// Run:` command"));
        let words = shell_words(run);
        assert_eq!(words[..2], ["aisc", "run"], "{name:?}");
        // A fresh directory: no configuration, no memory, no API key.
        let dir = tempfile::tempdir().expect("dir");
        let report = dir.path().join("report.json");
        let mut args: Vec<String> =
            vec!["run".into(), root().join(&words[2]).display().to_string()];
        args.extend(words[3..].iter().cloned());
        args.extend(
            ["--sim-delay-scale", "0", "--report-json"]
                .map(String::from)
                .into_iter()
                .chain([report.display().to_string()]),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = aisc_in(dir.path(), &args);
        assert!(o.status.success(), "{name:?}: {}", stderr(&o));
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("json");
        assert_eq!(j["ok"], true, "{name:?}");
        assert_eq!(j["simulated"], true, "{name:?}");
        // No op failed, so no `catch` region ran.
        assert_eq!(j["summary"]["failed_ops"], 0, "{name:?}: {j}");
    }
}

#[test]
fn config_show_rejects_unknown_keys_with_a_caret() {
    let dir = tempfile::tempdir().expect("dir");
    for (section, text, key, line) in [
        ("tools", "[tools]\nworkspcae = \".\"\n", "workspcae", 2),
        (
            "memory",
            "[memory]\nstm_capacity = 4\nstm_capcity = 3\n",
            "stm_capcity",
            3,
        ),
        ("access", "[access]\nallw = 1\n", "allw", 2),
        (
            "mcp_servers",
            "[[mcp_servers]]\nname = \"fs\"\ncommand = [\"x\"]\ntimeout = 3\n",
            "timeout",
            4,
        ),
    ] {
        let cfg = write(dir.path(), &format!("{section}.toml"), text);
        let o = aisc_in(dir.path(), &["config", "show", "--config", &cfg]);
        assert_eq!(o.status.code(), Some(2), "{section}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains("[K0001]"), "{section}: {err}");
        assert!(
            err.contains(&format!("unknown field `{key}`")),
            "{section}: {err}"
        );
        assert!(
            err.contains(&format!("{section}.toml:{line}:1")),
            "{section}: {err}"
        );
        // The caret underlines the key.
        let underline = format!("{}┬", "─".repeat(key.len() / 2));
        assert!(err.contains(&underline), "{section}: {err}");
        // `run` reports it the same way, before running anything.
        let f = write(dir.path(), "j.ais", JSON_PARAM);
        let r = aisc_in(
            dir.path(),
            &["run", &f, "--config", &cfg, "--arg", "q=1", "--arg", "n=1"],
        );
        assert_eq!(r.status.code(), Some(2), "{section}");
        assert!(stderr(&r).contains(&format!("unknown field `{key}`")));
        assert_eq!(stdout(&r), "", "{section}: nothing ran");
    }
}

#[test]
fn config_errors_never_print_secrets() {
    let dir = tempfile::tempdir().expect("dir");
    let cfg = write(
        dir.path(),
        "c.toml",
        "[[llm_backends]]\nname = \"x\"\nprotocol = \"openai\"\napi_key = \"sk-do-not-print\"\n",
    );
    let o = aisc_in(dir.path(), &["config", "show", "--config", &cfg]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!stderr(&o).contains("sk-do-not-print"), "{}", stderr(&o));
    assert!(!stdout(&o).contains("sk-do-not-print"));
}

#[test]
fn config_show_exits_2_on_a_bad_config() {
    let dir = tempfile::tempdir().expect("dir");
    let cfg = write(dir.path(), "c.toml", "default_backend = [1\n");
    let o = aisc_in(dir.path(), &["config", "show", "--config", &cfg]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let missing = dir.path().join("missing.toml").display().to_string();
    let o = aisc_in(dir.path(), &["config", "show", "--config", &missing]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = aisc_in(dir.path(), &["doctor", "--config", &cfg]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // The documented table says so.
    assert!(read("docs/cli.md").contains("| `2` | bad command-line usage or configuration"));
}

#[test]
fn global_flags_work_after_subcommands() {
    let dir = tempfile::tempdir().expect("dir");
    let cfg = write(
        dir.path(),
        "c.toml",
        "default_backend = \"mine\"\n[[llm_backends]]\nname = \"mine\"\nprotocol = \"sim\"\n",
    );
    for args in [
        vec!["config", "show", "--config", &cfg],
        vec!["config", "--config", &cfg, "show"],
        vec![
            "config",
            "show",
            "--config",
            &cfg,
            "--backend",
            "mine",
            "--color",
            "never",
        ],
    ] {
        let o = aisc_in(dir.path(), &args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).contains("mine"), "{args:?}: {}", stdout(&o));
    }
}

#[test]
fn hints_fit_their_codes() {
    use ais_vm::error::hint_for;
    let unknown = hint_for("tool.unknown");
    assert!(unknown.contains("[[tools.subprocess]]"), "{unknown}");
    assert!(!unknown.contains("arguments"), "{unknown}");
    let confirm = hint_for("tool.confirmation_required");
    assert!(confirm.contains("--yes"), "{confirm}");
    let invalid = hint_for("llm.invalid_response");
    assert!(
        invalid.contains("reply") && invalid.contains("structured_output"),
        "{invalid}"
    );
    assert!(
        !invalid.contains("aisc doctor"),
        "the backend answers: {invalid}"
    );
    // What a user sees for an uncaught unknown tool.
    let dir = tempfile::tempdir().expect("dir");
    let f = write(dir.path(), "f.ais", FAILING);
    let o = aisc_in(dir.path(), &["run", &f, "--memory", ":memory:", "-q"]);
    assert!(
        stderr(&o).contains("no tool has this name"),
        "{}",
        stderr(&o)
    );
}

const LLM_ONLY: &str = r#"agent A {
    @entry
    flow main(topic: str) -> str {
        let a = ask("Name one fact about {topic}.")
        return ask("Rephrase it.", a)
    }
}
"#;

/// Runs `LLM_ONLY` with its memory (and run journal) in `dir/mem`; returns
/// the printed result.
fn run_llm_only(dir: &Path) -> String {
    let f = write(dir, "llm.ais", LLM_ONLY);
    let o = aisc_in(
        dir,
        &[
            "run",
            &f,
            "--memory",
            "mem",
            "--sim-delay-scale",
            "0",
            "-q",
            "-O0",
            "--arg",
            "topic=tides",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
}

#[test]
fn runs_show_prints_a_completed_result() {
    let dir = tempfile::tempdir().expect("dir");
    let printed = run_llm_only(dir.path());
    assert!(printed.contains("simulated"), "{printed}");
    // Whatever happened to the process after the journal's "completed"
    // write, the result is read back from the journal.
    let o = aisc_in(dir.path(), &["runs", "show", "last", "--memory", "mem"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("status   completed"), "{text}");
    assert!(text.contains("args     topic=\"tides\""), "{text}");
    assert!(text.contains("2 journaled steps (ask ×2)"), "{text}");
    assert!(text.ends_with(&format!("result:\n{printed}")), "{text}");
    let o = aisc_in(
        dir.path(),
        &["runs", "show", "last", "--json", "--memory", "mem"],
    );
    let j: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(j["status"], "completed");
    assert_eq!(
        j["result"].as_str().map(|s| format!("{s}\n")),
        Some(printed)
    );
    assert_eq!(j["summary"]["by_op"]["ask"], 2);
    // `resume` refuses a completed run and says where its result is.
    let id = j["id"].as_str().expect("id");
    let r = aisc_in(dir.path(), &["resume", id, "--memory", "mem"]);
    assert_eq!(r.status.code(), Some(1));
    assert!(
        stderr(&r).contains(&format!("aisc runs show {id}")),
        "{}",
        stderr(&r)
    );
    // An unknown run is an error.
    let o = aisc_in(dir.path(), &["runs", "show", "nope", "--memory", "mem"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn trace_lists_llm_only_steps() {
    let dir = tempfile::tempdir().expect("dir");
    run_llm_only(dir.path());
    let o = aisc_in(dir.path(), &["trace", "last", "--memory", "mem"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("journal: 2 journaled steps (ask ×2)"),
        "{text}"
    );
    assert_eq!(text.matches(" ask ").count(), 2, "{text}");
    let o = aisc_in(dir.path(), &["trace", "last", "--json", "--memory", "mem"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ops: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(
        ops.iter().filter(|j| j["op"] == "ask").count(),
        2,
        "{ops:?}"
    );
}

/// Every (sub)command of `aisc` with its path (`["runs", "show"]`), from clap.
fn commands() -> Vec<(Vec<String>, clap::Command)> {
    fn walk(path: Vec<String>, c: &clap::Command, out: &mut Vec<(Vec<String>, clap::Command)>) {
        out.push((path.clone(), c.clone()));
        for s in c.get_subcommands() {
            let mut p = path.clone();
            p.push(s.get_name().to_string());
            walk(p, s, out);
        }
    }
    let mut root = <ais_cli::Cli as clap::CommandFactory>::command();
    root.build();
    let mut out = Vec::new();
    walk(Vec::new(), &root, &mut out);
    // clap's generated `help` subcommands are not ours to document.
    out.retain(|(p, _)| !p.iter().any(|n| n == "help"));
    out
}

fn user_args(c: &clap::Command) -> Vec<&clap::Arg> {
    c.get_arguments()
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .collect()
}

#[test]
fn every_clap_arg_has_help() {
    let mut missing = Vec::new();
    for (path, c) in commands() {
        if !path.is_empty() && c.get_about().is_none() {
            missing.push(format!("aisc {}", path.join(" ")));
        }
        for a in user_args(&c) {
            if a.get_help().is_none() {
                missing.push(format!("aisc {} {}", path.join(" "), a.get_id()));
            }
        }
    }
    assert!(missing.is_empty(), "no help text: {missing:#?}");
}

#[test]
fn docs_cli_lists_every_subcommand_and_flag() {
    let docs = read("docs/cli.md");
    let mut missing = Vec::new();
    for (path, c) in commands() {
        if !path.is_empty() {
            let heading = format!("## `aisc {}", path.join(" "));
            let named = format!("`aisc {}", path.join(" "));
            if !docs
                .lines()
                .any(|l| l.starts_with('#') && l.contains(&named))
            {
                missing.push(heading);
            }
        }
        for a in user_args(&c) {
            if let Some(long) = a.get_long() {
                if !docs.contains(&format!("`--{long}")) {
                    missing.push(format!("aisc {}: --{long}", path.join(" ")));
                }
            }
            if let Some(short) = a.get_short() {
                if !docs.contains(&format!("`-{short}")) {
                    missing.push(format!("aisc {}: -{short}", path.join(" ")));
                }
            }
        }
    }
    assert!(missing.is_empty(), "not in docs/cli.md: {missing:#?}");
}

#[test]
fn bad_passes_is_a_usage_error_with_its_code() {
    let dir = tempfile::tempdir().expect("dir");
    let f = write(dir.path(), "j.ais", JSON_PARAM);
    for cmd in [vec!["build", &f, "--emit", "ir"], vec!["run", &f]] {
        let mut args = cmd.clone();
        args.extend(["--passes", "canonicalize,cs"]);
        let o = aisc_in(dir.path(), &args);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}");
        let err = stderr(&o);
        assert!(
            err.contains("[O0002]") && err.contains("--passes:1:14"),
            "{err}"
        );
        assert!(err.contains("did you mean `cse`"), "{err}");
    }
}

/// A backend with `accept_incomplete = true` takes a cut-off reply as the
/// op's value, and `aisc run` says so on stderr, even with `-q`.
#[test]
fn accepted_incomplete_replies_are_warned_about() {
    use ais_testkit::mock::{MockReply, MockServer};
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MockServer::start().expect("mock");
    server.push(MockReply::openai_finish("length"));
    let program = write(
        dir.path(),
        "p.ais",
        "agent A {\n    @entry flow main() -> str {\n        return ask(\"long answer\")\n    }\n}\n",
    );
    let config = mock_config(
        dir.path(),
        &server,
        "accept_incomplete = true\nretries = 0\n",
    );
    let o = aisc_in(dir.path(), &["run", &program, "--config", &config, "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "partial answ");
    assert!(
        stderr(&o).contains("warning: 1 incomplete LLM reply (cut off at the token limit, or filtered) used as a value"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("accept_incomplete"), "{}", stderr(&o));

    // The run line counts attempts and retries when there were retries.
    server.push(MockReply::error(500, "flaky"));
    server.push(MockReply::Content("whole".into()));
    let config = mock_config(dir.path(), &server, "retries = 1\n");
    let o = aisc_in(dir.path(), &["run", &program, "--config", &config]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "whole");
    assert!(
        stderr(&o).contains("1 LLM calls (2 attempts, 1 retries)"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("incomplete"), "{}", stderr(&o));
}

/// `aisc run --stream` prints the model's text on stderr as it streams in,
/// line by line, each line prefixed with its op; stdout keeps the result.
#[test]
fn run_stream_prints_streamed_text_prefixed_with_its_op() {
    use ais_testkit::mock::{MockReply, MockServer};
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MockServer::start().expect("mock");
    server.push(MockReply::Content("first line\nsecond line".into()));
    let program = write(
        dir.path(),
        "p.ais",
        "agent A {\n    @entry flow main() -> str {\n        return ask(\"two lines\")\n    }\n}\n",
    );
    let config = mock_config(dir.path(), &server, "");
    let o = aisc_in(
        dir.path(),
        &["run", &program, "--config", &config, "--stream"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "first line\nsecond line");
    let err = stderr(&o);
    let first = err.find("[A.main %").expect(&err);
    let line1 = err[first..].lines().next().unwrap_or_default();
    assert!(line1.ends_with("] first line"), "{err}");
    assert!(err.contains("] second line\n"), "{err}");
    // The request asked for a stream (the configuration's default).
    assert_eq!(server.requests()[0].body["stream"], serde_json::json!(true));
}

/// Named arguments (reference style): flows by parameter name in any
/// order; `prompt:`, `context:` and `budget:` of an LLM op reach the
/// request (`budget:` as OpenAI's `max_completion_tokens`).
#[test]
fn named_arguments_reach_flows_and_llm_requests() {
    use ais_testkit::mock::{MockReply, MockServer};
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MockServer::start().expect("mock");
    server.push(MockReply::Content("a plan".into()));
    let program = write(
        dir.path(),
        "p.ais",
        "agent T {\n    flow plan(city: str, days: number) -> str {\n        return think(prompt: \"Plan {days} days in {city}\", context: [\"fact one\", city], budget: 800)\n    }\n    @entry flow main() -> str {\n        let p = plan(days: 3, city: \"Oslo\")\n        let d = days_of(city: \"Bergen\", days: 2)\n        return \"{p} / {d}\"\n    }\n    flow days_of(days: number, city: str) -> str {\n        return \"{days} in {city}\"\n    }\n}\n",
    );
    let config = mock_config(dir.path(), &server, "stream = false\n");
    let o = aisc_in(dir.path(), &["run", &program, "--config", &config, "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "a plan / 2 in Bergen");
    let req = &server.requests()[0].body;
    assert_eq!(
        req["max_completion_tokens"],
        serde_json::json!(800),
        "{req}"
    );
    let user = req["messages"][1]["content"].as_str().unwrap_or_default();
    assert!(user.starts_with("Plan 3 days in Oslo"), "{user}");
    assert!(user.contains("fact one") && user.contains("Oslo"), "{user}");
}

/// `pause(message)` stops the run durably (exit 3, `aisc runs` shows what
/// it waits for); `aisc resume RUN --input VALUE` answers it and the run
/// goes on with the answer as the op's value, repeating no LLM call. A
/// `try` does not catch a pause.
#[test]
fn a_paused_run_waits_for_its_input_and_resumes_with_it() {
    use ais_testkit::mock::{MockReply, MockServer};
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MockServer::start().expect("mock");
    server.push(MockReply::Content(
        "a refund of 40 for a broken kettle".into(),
    ));
    let program = write(
        dir.path(),
        "p.ais",
        "agent Refunds {\n    flow main(amount: number) -> str {\n        let summary = ask(prompt: \"Summarise the request for {amount}\")\n        try {\n            let answer = pause(\"Approve? {summary}\")\n            return \"decision: {answer} ({summary})\"\n        } catch (e) {\n            return \"caught {e.code}\"\n        }\n    }\n}\n",
    );
    let config = mock_config(dir.path(), &server, "stream = false\n");
    let o = aisc_in(
        dir.path(),
        &["run", &program, "--config", &config, "--arg", "amount=40"],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(err.contains("paused: Approve? a refund of 40"), "{err}");
    let id = err
        .split("aisc resume ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .expect("the resume hint names the run")
        .to_string();
    let runs = aisc_in(dir.path(), &["runs"]);
    let listed = stdout(&runs) + &stderr(&runs);
    assert!(listed.contains("paused"), "{listed}");
    assert!(listed.contains("waiting for input: Approve?"), "{listed}");

    // Without an answer it stays paused.
    let o = aisc_in(dir.path(), &["resume", &id, "--config", &config]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("is paused, waiting for an answer"),
        "{}",
        stderr(&o)
    );

    let o = aisc_in(
        dir.path(),
        &["resume", &id, "--config", &config, "--input", "yes", "-q"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o).trim(),
        "decision: yes (a refund of 40 for a broken kettle)"
    );
    // The summary came from the journal: one LLM call in all.
    assert_eq!(server.request_count(), 1);
    let o = aisc_in(dir.path(), &["resume", &id, "--input", "again"]);
    assert_ne!(o.status.code(), Some(0));
}

/// The agent member `context: "..."` is the system prompt of each of the
/// agent's LLM ops that sets none; `system:` on an op wins.
#[test]
fn the_agent_context_is_the_system_prompt_of_its_llm_ops() {
    use ais_testkit::mock::{MockReply, MockServer};
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MockServer::start().expect("mock");
    server.push_n(MockReply::Content("ok".into()), 2);
    let program = write(
        dir.path(),
        "p.ais",
        "agent Librarian {\n    context: \"You are a careful librarian.\"\n    @entry flow main() -> str {\n        let a = ask(\"first\")\n        let b = ask(a, system: \"Be brief.\")\n        return b\n    }\n}\n",
    );
    let config = mock_config(dir.path(), &server, "stream = false\n");
    let o = aisc_in(dir.path(), &["run", &program, "--config", &config, "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        reqs[0].body["messages"][0],
        serde_json::json!({"role": "system", "content": "You are a careful librarian."})
    );
    assert_eq!(reqs[1].body["messages"][0]["content"], "Be brief.");
}

/// `backend:` sends that op to the named configured backend (the others go
/// to the run's); a name that is not configured fails before any call and
/// before the run is journaled. `schema:` makes the reply's JSON the value.
#[test]
fn named_backend_routes_one_op_and_schema_makes_the_value_json() {
    use ais_testkit::mock::{MockReply, MockServer};
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MockServer::start().expect("mock");
    server.push(MockReply::Content(
        r#"{"population": 709000, "country": "Norway"}"#.into(),
    ));
    let program = write(
        dir.path(),
        "p.ais",
        r#"agent Trip {
    @entry flow main(city: str) -> str {
        let facts = ask("Facts about {city}", backend: "local", schema: '{"type": "object", "required": ["population", "country"], "properties": {"population": {"type": "integer"}, "country": {"type": "string"}}}')
        let line = ask("One line on {city}")
        return "{facts.country} / {line}"
    }
}
"#,
    );
    let config = write(
        dir.path(),
        "config.toml",
        &format!(
            "default_backend = \"sim\"\n[[llm_backends]]\nname = \"sim\"\nprotocol = \"sim\"\ndelay_scale = 0\n\
             [[llm_backends]]\nname = \"local\"\nprotocol = \"openai\"\nbase_url = \"{}\"\n",
            server.openai_url()
        ),
    );
    let o = aisc_in(
        dir.path(),
        &[
            "run",
            &program,
            "--config",
            &config,
            "--arg",
            "city=Oslo",
            "-q",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("Norway / "), "{out}");
    assert!(out.contains("simulated"), "the other op went to sim: {out}");
    // Exactly the `backend: "local"` op reached the HTTP backend, with the schema.
    assert_eq!(server.request_count(), 1);
    let body = server.last_request().expect("request").body.to_string();
    assert!(body.contains("Facts about Oslo"), "{body}");
    assert!(body.contains("population"), "the schema was sent: {body}");

    // An unconfigured name: a configuration error, no call, no journaled run.
    let bad = std::fs::read_to_string(&program)
        .expect("read")
        .replace("backend: \"local\"", "backend: \"nowhere\"");
    let bad = write(dir.path(), "bad.ais", &bad);
    let o = aisc_in(
        dir.path(),
        &["run", &bad, "--config", &config, "--arg", "city=Oslo"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("names backend `nowhere`")
            && stderr(&o).contains("configured backends: sim, local"),
        "{}",
        stderr(&o)
    );
    assert_eq!(server.request_count(), 1);
    let runs = aisc_in(dir.path(), &["runs", "--json"]);
    assert_eq!(stdout(&runs).lines().count(), 1, "{}", stdout(&runs));
}

/// `search` / `search_web` go to the configured SearXNG-compatible
/// provider (network tools need an allow); with no provider, a run on a real
/// backend gets `search.unconfigured`, a run on the simulator labelled
/// simulated results.
#[test]
fn web_search_uses_the_configured_provider_or_says_none_is_configured() {
    use ais_testkit::mock::{MockReply, MockServer};
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().expect("tempdir");
    let provider = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let provider_url = format!("http://{}", provider.local_addr().expect("addr"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = provider.accept() {
            let mut buf = [0u8; 4096];
            let n = s.read(&mut buf).unwrap_or(0);
            let _ = tx.send(String::from_utf8_lossy(&buf[..n]).into_owned());
            let body = r#"{"results": [{"title": "Cells", "url": "https://x/cells", "content": "solid electrolytes"}]}"#;
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let program = write(
        dir.path(),
        "p.ais",
        "agent R {\n    flow main(topic: str) -> json {\n        return search_web(\"{topic} news\")\n    }\n}\n",
    );
    let config = write(
        dir.path(),
        "config.toml",
        &format!(
            "default_backend = \"sim\"\n[[llm_backends]]\nname = \"sim\"\nprotocol = \"sim\"\n\
             [tools.search]\nurl = \"{provider_url}\"\n[access.allow]\nR = [\"search_web\"]\n"
        ),
    );
    let o = aisc_in(
        dir.path(),
        &[
            "run",
            &program,
            "--config",
            &config,
            "--arg",
            "topic=battery",
            "-q",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v[0]["snippet"], "solid electrolytes");
    let req = rx.recv().expect("request");
    assert!(
        req.starts_with("GET /search?q=battery%20news&format=json"),
        "{req}"
    );

    // A real backend and no provider: a coded error naming the config key.
    let server = MockServer::start().expect("mock");
    server.push(MockReply::Content("unused".into()));
    let config = mock_config(
        dir.path(),
        &server,
        "[access.allow]\nR = [\"search_web\"]\n",
    );
    let o = aisc_in(
        dir.path(),
        &[
            "run",
            &program,
            "--config",
            &config,
            "--arg",
            "topic=battery",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("search.unconfigured") && stderr(&o).contains("[tools.search]"),
        "{}",
        stderr(&o)
    );

    // The simulator with no provider: labelled simulated results, no allow needed.
    let o = aisc_in(
        dir.path(),
        &["run", &program, "--arg", "topic=battery", "-q"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("[simulated search] battery news"),
        "{}",
        stdout(&o)
    );
}
