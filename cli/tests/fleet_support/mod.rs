//! Shared by the fleet tests (scale_out, fleet_limits, fleet_memory):
//! `aisc` with no key or store from the test's environment, workers that
//! log to a file in the test's folder, and a bounded wait that shows those
//! logs when it gives up.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// `aisc` in `dir` (its HOME too), with no provider key, store or colour
/// from the test's environment.
pub fn aisc(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_aisc"));
    c.env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("AIS_STORE")
        .env("HOME", dir)
        .env("NO_COLOR", "1")
        .current_dir(dir);
    c
}

/// `aisc worker --store URL --config CONFIG --memory :memory: --poll-ms 50
/// EXTRA...`, its stderr in `dir/log`.
pub fn worker(dir: &Path, url: &str, config: &str, log: &str, extra: &[&str]) -> Child {
    let log = std::fs::File::create(dir.join(log)).unwrap();
    aisc(dir)
        .args(["worker", "--store", url, "--config", config])
        .args(["--memory", ":memory:", "--poll-ms", "50"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

/// Polls `done` for up to two minutes; a hang fails with the workers'
/// logs (the `.log` files in `dir`).
pub fn wait_until(dir: &Path, what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..2400 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut logs = String::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "log") {
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            logs.push_str(&format!("--- {}\n{text}\n", e.path().display()));
        }
    }
    panic!("gave up waiting for {what}\n{logs}");
}
