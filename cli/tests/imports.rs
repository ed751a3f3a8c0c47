//! Multi-file programs end to end: the example with its agent files and a
//! library import checks, builds, runs on the simulator and formats; every
//! flow of the bundled library runs on the simulator.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `aisc ARGS` in `dir` (its HOME too: no user configuration).
fn aisc_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aisc"))
        .args(args)
        .env("HOME", dir)
        .env_remove("OPENAI_API_KEY")
        .env("NO_COLOR", "1")
        .current_dir(dir)
        .output()
        .expect("aisc runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const SIM: [&str; 4] = ["--memory", ":memory:", "--sim-delay-scale", "0"];

#[test]
fn the_multi_file_example_checks_builds_runs_and_formats() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let main = root().join("examples/16_multi_file/main.ais");
    let main_s = main.display().to_string();
    let o = aisc_in(tmp.path(), &["check", &main_s]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("5 agents"), "{}", text(&o.stderr));

    let mut args = vec!["run", main_s.as_str(), "--arg", "topic=heat pumps"];
    args.extend(SIM);
    let o = aisc_in(tmp.path(), &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("simulated"), "{}", text(&o.stdout));

    // The artifact holds every file's flows: it runs without the sources.
    let art = tmp.path().join("p.apxmobj");
    let art_s = art.display().to_string();
    let o = aisc_in(tmp.path(), &["build", &main_s, "-o", &art_s]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut args = vec!["run", art_s.as_str(), "--arg", "topic=x"];
    args.extend(SIM);
    let o = aisc_in(tmp.path(), &args);
    assert!(o.status.success(), "{}", text(&o.stderr));

    let o = aisc_in(tmp.path(), &["build", &main_s, "--emit", "graph-json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let g = text(&o.stdout);
    for agent in ["Editor", "Writer", "FactChecker", "Reviewer", "Text"] {
        assert!(
            g.contains(&format!("\"{agent}\"")),
            "{agent} missing from graph JSON"
        );
    }

    for f in ["main.ais", "agents/writer.ais", "agents/fact_checker.ais"] {
        let p = root().join("examples/16_multi_file").join(f);
        let o = aisc_in(tmp.path(), &["fmt", "--check", &p.display().to_string()]);
        assert!(o.status.success(), "{f}: {}", text(&o.stderr));
    }
}

#[test]
fn a_type_error_in_an_imported_file_is_shown_in_that_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join("lib")).expect("mkdir");
    std::fs::write(
        dir.path().join("main.ais"),
        "import \"lib/helper.ais\"\n\nagent Main {\n    @entry flow main() -> str {\n        return Helper.help()\n    }\n}\n",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("lib/helper.ais"),
        "agent Helper {\n    flow help() -> str {\n        return 1 + true\n    }\n}\n",
    )
    .expect("write");
    let o = aisc_in(dir.path(), &["check", "main.ais"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("lib/helper.ais:3:"),
        "{}",
        text(&o.stderr)
    );
    let o = aisc_in(dir.path(), &["check", "--error-format=json", "main.ais"]);
    let first: serde_json::Value = text(&o.stdout)
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .expect("a JSON diagnostic");
    assert_eq!(first["spans"][0]["file"], "lib/helper.ais");
    assert_eq!(first["spans"][0]["line_start"], 3);
}

/// Runs `main` (a flow body using the library) on the simulator and
/// returns the number of model calls it made.
fn run_std(import: &str, body: &str) -> u64 {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = format!(
        "import \"{import}\"\n\nagent Main {{\n    @entry flow main() -> str {{\n        {body}\n    }}\n}}\n"
    );
    std::fs::write(dir.path().join("main.ais"), &src).expect("write");
    let mut args = vec!["run", "main.ais", "--report-json", "r.json"];
    args.extend(SIM);
    let o = aisc_in(dir.path(), &args);
    assert!(o.status.success(), "{src}\n{}", text(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).expect("report"))
            .expect("json");
    assert_eq!(report["ok"], true, "{report}");
    report["summary"]["llm_calls"].as_u64().unwrap_or(0)
}

#[test]
fn std_text_flows_run_on_the_simulator() {
    assert_eq!(
        run_std("std/text", "return Text.summarize(\"a long text\", 20)"),
        1
    );
    assert_eq!(
        run_std("std/text", "return Text.translate(\"hello\", \"French\")"),
        1
    );
    let extract =
        "let items = Text.extract_list(\"Ann met Bob\", \"person\")\n        return \"{items}\"";
    assert_eq!(run_std("std/text", extract), 1);
}

#[test]
fn std_review_flows_run_on_the_simulator() {
    // At least the first check; more when the simulated check rejects.
    assert!(
        run_std(
            "std/review",
            "return Reviewer.revise(\"a haiku\", \"old pond\", 3)"
        ) >= 1
    );
    // The draft, then at least one check.
    assert!(
        run_std(
            "std/review",
            "return Reviewer.write(\"a haiku about frogs\", 2)"
        ) >= 2
    );
    // No rounds: the draft comes back unchecked.
    assert_eq!(
        run_std(
            "std/review",
            "return Reviewer.revise(\"a haiku\", \"old pond\", 0)"
        ),
        0
    );
}

#[test]
fn std_council_flows_run_on_the_simulator() {
    // One call per perspective, then the synthesis.
    let two = "return Council.deliberate(\"Rent or buy?\", [\"a banker\", \"a tenant\"])";
    assert_eq!(run_std("std/council", two), 3);
    assert_eq!(
        run_std("std/council", "return Council.advise(\"Rent or buy?\")"),
        4
    );
}

#[test]
fn std_research_flows_run_on_the_simulator() {
    // The question, three angles, the report.
    assert_eq!(
        run_std(
            "std/research",
            "return Research.investigate(\"tidal power\")"
        ),
        5
    );
    let survey = "return Research.survey(\"tidal power\", [\"cost\", \"ecology\"])";
    assert_eq!(run_std("std/research", survey), 3);
}

#[test]
fn an_unknown_std_module_is_e0011() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("main.ais"),
        "import \"std/nothing\"\nagent A {\n    @entry flow main() -> str {\n        return \"x\"\n    }\n}\n",
    )
    .expect("write");
    let o = aisc_in(dir.path(), &["check", "main.ais"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("E0011"), "{}", text(&o.stderr));
}
