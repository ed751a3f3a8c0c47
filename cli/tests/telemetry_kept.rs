//! A run's telemetry is kept as it happens (docs/report.md): a run killed
//! with SIGKILL mid-call leaves the events it recorded, `aisc report` draws
//! them and says they stop where the process ended; a resume keeps its
//! own attempt's file with the journal's replays marked; a served run
//! keeps reportable telemetry too. The model is the testkit's mock server.

mod serve_support;

#[path = "support/isolated_aisc.rs"]
mod isolated_aisc;
use ais_testkit::mock::MockServer;
use isolated_aisc::aisc;
use serde_json::{json, Value as Json};
use serve_support::{write, Server};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

const STEPS: &str = r#"agent Steps {
    @entry flow main() -> str {
        let a = ask(prompt: "one")
        let b = ask(prompt: "two {a}")
        let c = ask(prompt: "three {b}")
        let d = ask(prompt: "four {c}")
        return d
    }
}
"#;

fn output(dir: &Path, args: &[&str]) -> Output {
    aisc(dir).args(args).output().expect("aisc runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every line of a kept file, parsed (a line that is not JSON fails).
fn lines(path: &Path) -> Vec<Json> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("each kept line is JSON"))
        .collect()
}

fn of_type<'a>(lines: &'a [Json], t: &str) -> Vec<&'a Json> {
    lines.iter().filter(|l| l["type"] == t).collect()
}

/// A completed attempt's file: its end line (the outcome) comes right
/// before the summary, which is last.
fn completed(lines: &[Json]) -> &Json {
    let n = lines.len();
    assert!(n >= 3, "{lines:?}");
    assert_eq!(lines[n - 1]["type"], "summary", "{lines:?}");
    assert_eq!(lines[n - 2]["type"], "end", "{lines:?}");
    assert_eq!(of_type(lines, "summary").len(), 1);
    &lines[n - 2]
}

fn llm_ops(lines: &[Json]) -> usize {
    of_type(lines, "op")
        .iter()
        .filter(|l| {
            l["opcode"] == "ask" && l["track"].as_str().is_some_and(|t| t.starts_with("llm:"))
        })
        .count()
}

fn telemetry_dir(dir: &Path) -> std::path::PathBuf {
    dir.join(".apxm").join("telemetry")
}

/// Every line of attempt `n` of run `id` kept in the memory directory
/// `.apxm` (a new run's in the segments, a resume's in its own file).
fn attempt(dir: &Path, id: &str, n: u32) -> Vec<Json> {
    let memory = dir.join(".apxm");
    let found = ais_cli::report::keep::attempts(&memory, id);
    let Some((_, kept)) = found.iter().find(|(m, _)| *m == n) else {
        return Vec::new();
    };
    parsed(&kept.read(&memory).unwrap_or_default())
}

fn parsed(text: &str) -> Vec<Json> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("each kept line is JSON"))
        .collect()
}

#[test]
fn a_killed_run_keeps_its_telemetry_and_a_resume_keeps_its_own_attempt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MockServer::start().expect("mock");
    // Slow enough that the test sees the second call arrive before the
    // third is sent; from then on a call never answers while it matters.
    server.set_latency(Duration::from_millis(300));
    let config = write(
        dir.path(),
        "config.toml",
        &format!(
            "default_backend = \"m\"\n[[llm_backends]]\nname = \"m\"\nprotocol = \"openai\"\nbase_url = \"{}\"\nstream = false\nretries = 0\n",
            server.openai_url()
        ),
    );
    let program = write(dir.path(), "steps.ais", STEPS);

    let mut child = aisc(dir.path())
        // -O0: the optimiser would fuse the four calls into one.
        .args(["run", &program, "-O0", "--config", &config, "-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("aisc run starts");
    let alive = |child: &mut std::process::Child, what: &str| {
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("the run ended before {what}: {status}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    while server.request_count() < 2 {
        alive(&mut child, "its second LLM call");
    }
    server.set_latency(Duration::from_secs(600));
    // The first attempt (the lines of the one run kept in the segments):
    // polled until it holds the two answered calls and the third call is
    // in flight.
    let id = loop {
        let keys = ais_vm::telemetry::segments::keys(&telemetry_dir(dir.path()), |_| true);
        if let [one] = keys.as_slice() {
            if llm_ops(&attempt(dir.path(), one, 1)) >= 2 && server.request_count() >= 3 {
                break one.clone();
            }
        }
        alive(&mut child, "two LLM op events were kept");
    };
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), None, "killed by a signal");

    let kept = attempt(dir.path(), &id, 1);
    let header = &kept[0];
    assert_eq!(header["type"], "attempt", "{header}");
    assert_eq!(header["attempt"], 1);
    assert_eq!(header["state"], "running");
    assert!(of_type(&kept, "summary").is_empty(), "{kept:?}");
    assert_eq!(llm_ops(&kept), 2, "{kept:?}");
    assert_eq!(header["run_id"], id.as_str());
    // No file of its own.
    assert!(!telemetry_dir(dir.path())
        .join(format!("{id}.jsonl"))
        .exists());

    // The report draws what was kept and says it stops there.
    let o = output(dir.path(), &["report", &id, "-o", "killed.html"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("Incomplete telemetry"),
        "{}",
        stderr(&o)
    );
    let page = std::fs::read_to_string(dir.path().join("killed.html")).expect("page");
    assert!(page.contains("Incomplete telemetry"));
    assert!(page.contains("its process ended"));
    // `runs show` is unaffected.
    let o = output(dir.path(), &["runs", "show", &id]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // The resume completes; the first attempt's file is left as it was.
    server.set_latency(Duration::ZERO);
    let o = output(dir.path(), &["resume", &id, "--config", &config, "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(attempt(dir.path(), &id, 1), kept);
    let second = telemetry_dir(dir.path()).join(format!("{id}.2.jsonl"));
    let kept2 = lines(&second);
    assert_eq!(kept2[0]["type"], "attempt", "{}", kept2[0]);
    assert_eq!(kept2[0]["attempt"], 2);
    assert_eq!(completed(&kept2)["outcome"], "ok");
    assert_eq!(of_type(&kept2, "summary").len(), 1);
    // The two answered calls come from the journal; the other two ran.
    let asks: Vec<&Json> = of_type(&kept2, "op")
        .into_iter()
        .filter(|l| l["opcode"] == "ask")
        .collect();
    assert_eq!(asks.len(), 4, "{asks:?}");
    let replayed = asks.iter().filter(|l| l["replayed"] == true).count();
    assert_eq!(replayed, 2, "{asks:?}");
    assert_eq!(completed(&kept2)["replayed_ops"], 2);
    assert_eq!(llm_ops(&kept2), 2);
    assert_eq!(server.request_count(), 5, "calls three (again) and four");

    let o = output(dir.path(), &["report", &id, "-o", "resumed.html"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let page = std::fs::read_to_string(dir.path().join("resumed.html")).expect("page");
    assert!(page.contains("attempt 2"), "the title names the attempt");
    assert!(page.contains("1 earlier attempt"));
    assert!(
        page.contains(&format!("{id} in telemetry/*.seg")),
        "names the first attempt"
    );
    assert!(!page.contains("Incomplete telemetry"));
}

#[test]
fn a_served_run_keeps_reportable_telemetry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "steps.ais", STEPS);
    let s = Server::start(dir.path(), &[&p], &["--sim-delay-scale", "0"], &[]);
    let r = s.post(
        "/v1/runs?wait=true",
        &json!({"program": "steps.ais"}).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let j = r.json();
    assert_eq!(j["status"], "succeeded", "{j}");
    let id = j["id"].as_str().expect("id").to_string();

    let kept = attempt(dir.path(), &id, 1);
    assert_eq!(completed(&kept)["outcome"], "ok");
    assert_eq!(of_type(&kept, "summary").len(), 1);
    assert!(llm_ops(&kept) >= 1, "{kept:?}");
    let o = output(dir.path(), &["report", &id, "-o", "served.html"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let page = std::fs::read_to_string(dir.path().join("served.html")).expect("page");
    assert!(page.contains(&format!("run {id}")));
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn a_worker_run_keeps_its_telemetry_in_its_memory_directory() {
    let pg = ais_testkit::pg::PgServer::start();
    let url = pg.database("telemetry");
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MockServer::start().expect("mock");
    let config = write(
        dir.path(),
        "config.toml",
        &format!(
            "default_backend = \"m\"\n[[llm_backends]]\nname = \"m\"\nprotocol = \"openai\"\nbase_url = \"{}\"\nstream = false\n",
            server.openai_url()
        ),
    );
    let program = write(dir.path(), "steps.ais", STEPS);
    let o = output(
        dir.path(),
        &[
            "run", "--detach", "-O0", "-q", "--store", &url, &program, "--config", &config,
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let o = output(
        dir.path(),
        &[
            "worker",
            "--until-idle",
            "--store",
            &url,
            "--config",
            &config,
            "--memory",
            "mem",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let kept = lines(&dir.path().join("mem/telemetry").join(format!("{id}.jsonl")));
    assert_eq!(completed(&kept)["outcome"], "ok");
    assert_eq!(llm_ops(&kept), 4, "{kept:?}");
    // Reported from the worker's memory directory, the journal from the store.
    let o = output(
        dir.path(),
        &[
            "report", &id, "--store", &url, "--memory", "mem", "-o", "w.html",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(dir.path().join("w.html").exists());
}
