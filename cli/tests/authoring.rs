//! End-to-end tests of the authoring commands: `aisc fmt`, `aisc new`,
//! `aisc completions`.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn aisc_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aisc"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("APXM_CONFIG")
        .env_remove("APXM_BACKEND")
        .env("NO_COLOR", "1")
        .current_dir(dir)
        .output()
        .expect("aisc runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const MESSY: &str = "agent A { // keep me\n  flow f(x:str)->str{ return ask(\"q {x}\",x) }\n}\n";
const TIDY: &str = "agent A { // keep me\n    flow f(x: str) -> str {\n        return ask(\"q {x}\", x)\n    }\n}\n";

#[test]
fn fmt_rewrites_a_file_in_place_and_check_then_passes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("a.ais");
    std::fs::write(&file, MESSY).expect("write");
    let o = aisc_in(dir.path(), &["fmt", "a.ais"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&file).expect("read"), TIDY);
    let o = aisc_in(dir.path(), &["fmt", "--check", "a.ais"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert_eq!(stdout(&o), "");
    // Only the file itself: no temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["a.ais".to_string()]);
}

#[test]
fn fmt_check_names_each_file_that_would_change_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("messy.ais"), MESSY).expect("write");
    std::fs::write(dir.path().join("tidy.ais"), TIDY).expect("write");
    std::fs::write(dir.path().join("messy2.ais"), MESSY).expect("write");
    let o = aisc_in(
        dir.path(),
        &["fmt", "--check", "messy.ais", "tidy.ais", "messy2.ais"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stdout(&o),
        "would reformat messy.ais\nwould reformat messy2.ais\n"
    );
    let left = std::fs::read_to_string(dir.path().join("messy.ais")).expect("read");
    assert_eq!(left, MESSY);
}

#[test]
fn fmt_refuses_a_file_that_does_not_parse_and_leaves_it_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = "agent A {\n  flow f( { return }\n}\n";
    std::fs::write(dir.path().join("bad.ais"), broken).expect("write");
    for args in [&["fmt", "bad.ais"][..], &["fmt", "--check", "bad.ais"][..]] {
        let o = aisc_in(dir.path(), args);
        assert_eq!(o.status.code(), Some(1));
        assert!(stderr(&o).contains("[E0004]"), "{}", stderr(&o));
        assert!(stderr(&o).contains("bad.ais:2:"), "{}", stderr(&o));
        assert_eq!(stdout(&o), "");
        let left = std::fs::read_to_string(dir.path().join("bad.ais")).expect("read");
        assert_eq!(left, broken);
    }
}

#[test]
fn fmt_reads_standard_input_and_writes_standard_output() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_aisc"))
        .args(["fmt", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("aisc runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(MESSY.as_bytes())
        .expect("write");
    let o = child.wait_with_output().expect("wait");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), TIDY);
}

#[cfg(unix)]
#[test]
fn fmt_keeps_the_file_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("a.ais");
    std::fs::write(&file, MESSY).expect("write");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let o = aisc_in(dir.path(), &["fmt", "a.ais"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
    assert_eq!(mode & 0o777, 0o640);
}

#[test]
fn new_then_check_then_run_on_the_simulator() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = aisc_in(dir.path(), &["new", "demo"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("created demo/main.ais"),
        "{}",
        stdout(&o)
    );
    let project = dir.path().join("demo");
    for f in [
        ".apxm/config.toml",
        "main.ais",
        "test.sh",
        "README.md",
        ".gitignore",
    ] {
        assert!(project.join(f).is_file(), "missing {f}");
    }
    let o = aisc_in(&project, &["check", "main.ais"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("0 errors, 0 warnings"),
        "{}",
        stderr(&o)
    );
    // The project's configuration is found in the folder and picks `sim`.
    let o = aisc_in(&project, &["config", "show"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains(".apxm/config.toml"), "{}", stdout(&o));
    let o = aisc_in(
        &project,
        &[
            "run",
            "main.ais",
            "--memory",
            ":memory:",
            "--sim-delay-scale",
            "0",
            "--arg",
            "topic=tide pools",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stdout(&o).trim().is_empty());
    assert!(
        !stderr(&o).contains("no LLM backend configured"),
        "the project's config was not used: {}",
        stderr(&o)
    );
    let o = aisc_in(&project, &["fmt", "--check", "main.ais"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn new_refuses_a_non_empty_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("taken")).expect("mkdir");
    std::fs::write(dir.path().join("taken/notes.txt"), "mine").expect("write");
    let o = aisc_in(dir.path(), &["new", "taken"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not an empty folder"), "{}", stderr(&o));
    assert!(!dir.path().join("taken/main.ais").exists());
    // An empty folder is fine.
    std::fs::create_dir(dir.path().join("empty")).expect("mkdir");
    let o = aisc_in(dir.path(), &["new", "empty"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn completions_cover_the_subcommands() {
    let dir = tempfile::tempdir().expect("tempdir");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = aisc_in(dir.path(), &["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{shell}: {}", stderr(&o));
        let script = stdout(&o);
        for sub in ["check", "fmt", "new", "completions"] {
            assert!(script.contains(sub), "{shell} script lacks `{sub}`");
        }
    }
    let o = aisc_in(dir.path(), &["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
}
