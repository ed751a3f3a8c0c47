//! Printed lines are exactly-once across kill -9 + resume (issue 31/32
//! target): a 400-line print loop runs as a real `aisc run` subprocess on
//! an on-disk memory directory, is killed with SIGKILL at 50 points spread
//! over its run (and, in every other trial, its first resume too), then
//! resumed to completion. The stdout of every attempt, concatenated, must
//! hold every line exactly once, in order.
//!
//! Each attempt's stdout is a regular file, as when output is redirected:
//! then the resumed run can read back whether the line being written when
//! the kill came made it (`vm/src/scheduler/gate/outbox.rs`).
//! `aisc` is the test-only `aisc-fault` with no fault set: the product's
//! command line.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LINES: usize = 400;
const TRIALS: u64 = 50;

fn program() -> String {
    let items: Vec<String> = (0..LINES).map(|i| i.to_string()).collect();
    format!(
        "agent A {{\n    @entry flow main() {{\n        loop (i in [{}]) {{\n            print(\"line {{i}}\")\n        }}\n    }}\n}}\n",
        items.join(", ")
    )
}

fn aisc(dir: &Path, args: &[&str], out: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_aisc-fault"));
    c.current_dir(dir)
        .args(args)
        .arg("-q")
        .env_remove(ais_testkit::fault::FAULT_ENV)
        .stdout(std::fs::File::create(out).unwrap())
        .stderr(Stdio::piped());
    c
}

/// Runs `args` to its end; `(succeeded, stderr)`.
fn finish(dir: &Path, args: &[&str], out: &Path) -> (bool, String) {
    let o = aisc(dir, args, out).output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Starts `args` and kills it with SIGKILL after `delay` (if still running).
fn killed(dir: &Path, args: &[&str], out: &Path, delay: Duration) {
    let mut child = aisc(dir, args, out).spawn().unwrap();
    std::thread::sleep(delay);
    // SIGKILL on Unix; nothing when the run already ended.
    let _ = child.kill();
    let _ = child.wait();
}

/// A small deterministic generator (the points are reproducible).
struct Lcg(u64);

impl Lcg {
    fn next_fraction(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[test]
fn a_print_loop_killed_at_50_points_and_resumed_prints_every_line_exactly_once() {
    let want: Vec<String> = (0..LINES).map(|i| format!("line {i}")).collect();
    // An uninterrupted run: the lines, and how long a run lasts here.
    let clean = tempfile::tempdir().unwrap();
    std::fs::write(clean.path().join("p.ais"), program()).unwrap();
    let out = clean.path().join("out");
    let t = Instant::now();
    let (ok, err) = finish(clean.path(), &["run", "p.ais"], &out);
    let span = t.elapsed();
    assert!(ok, "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().collect::<Vec<_>>(), want);

    let mut rng = Lcg(0x5eed);
    let mut killed_mid_output = 0;
    for trial in 0..TRIALS {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("p.ais"), program()).unwrap();
        let mut outs = Vec::new();
        let mut attempt = |args: &[&str], kill_after: Option<Duration>| {
            let out = d.join(format!("out{}", outs.len()));
            let r = match kill_after {
                Some(delay) => {
                    killed(d, args, &out, delay);
                    (false, String::new())
                }
                None => finish(d, args, &out),
            };
            outs.push(out);
            r
        };
        let at = span.mul_f64(rng.next_fraction() * 1.1);
        attempt(&["run", "p.ais"], Some(at));
        if trial % 2 == 1 {
            // Kill the resume too (often while it shows what the first
            // attempt journaled and did not show).
            let at2 = span.mul_f64(rng.next_fraction() * 0.6);
            attempt(&["resume", "last"], Some(at2));
        }
        let (ok, err) = attempt(&["resume", "last"], None);
        if !ok {
            if err.contains("journal.completed") {
                // The run ended before a kill reached it.
            } else if err.contains("journal.missing") || err.contains("journal.no_run") {
                // Killed before the run was journaled: nothing ran.
                let (ok, err) = attempt(&["run", "p.ais"], None);
                assert!(ok, "trial {trial}: {err}");
            } else {
                panic!("trial {trial}: resume failed: {err}");
            }
        }
        let mut got = Vec::new();
        for o in &outs {
            got.extend(
                std::fs::read_to_string(o)
                    .unwrap()
                    .lines()
                    .map(str::to_string),
            );
        }
        let first = std::fs::read_to_string(&outs[0]).unwrap().lines().count();
        if first > 0 && first < LINES {
            killed_mid_output += 1;
        }
        assert_eq!(
            got, want,
            "trial {trial} (killed after {at:?}): the attempts' stdout differs from one run's"
        );
    }
    // The kills landed while lines were being printed, not only before or
    // after: the test exercised what it claims to.
    assert!(
        killed_mid_output >= 10,
        "only {killed_mid_output} of {TRIALS} kills landed mid-output"
    );
}
