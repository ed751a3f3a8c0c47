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
