//! A run's trace in a real backend: Arize Phoenix (`scripts/provision/
//! phoenix.sh` installs the pinned version; `./test` runs this). Phoenix is
//! started on free loopback ports with a temporary working directory and
//! its outside calls turned off (`PHOENIX_ALLOW_EXTERNAL_RESOURCES=false`,
//! `PHOENIX_TELEMETRY_ENABLED=false`); `aisc run` and `aisc resume` export
//! to it with `OTEL_EXPORTER_OTLP_ENDPOINT`, and the spans are read back
//! through Phoenix's own REST API (`GET /v1/projects/default/spans`).

use serde_json::Value as Json;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// Phoenix, killed when dropped (also when the test fails).
struct Phoenix {
    child: Child,
    base: String,
    log: std::path::PathBuf,
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn get(url: &str) -> Option<Json> {
    let mut r = ureq::get(url).call().ok()?;
    if !r.status().is_success() {
        return None;
    }
    r.body_mut().read_json().ok()
}

impl Phoenix {
    fn start(dir: &Path) -> Phoenix {
        let python = std::env::var("AIS_PHOENIX_PYTHON").expect(
            "AIS_PHOENIX_PYTHON is not set: run ./test (scripts/provision/phoenix.sh installs arize-phoenix 20.26.1)",
        );
        let (port, grpc) = (free_port(), free_port());
        let work = dir.join("phoenix");
        std::fs::create_dir_all(&work).expect("mkdir");
        let log = dir.join("phoenix.log");
        let out = std::fs::File::create(&log).expect("log");
        let mut c = Command::new(&python);
        // Nothing of ours leaks in (an OTLP endpoint would make Phoenix
        // trace itself).
        for (k, _) in std::env::vars() {
            if k.starts_with("OTEL_") || k.starts_with("PHOENIX_") {
                c.env_remove(&k);
            }
        }
        c.args(["-m", "phoenix.server.main", "serve"])
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", grpc.to_string())
            .env("PHOENIX_WORKING_DIR", &work)
            // Offline: no web fonts, analytics pixels or downloads.
            .env("PHOENIX_ALLOW_EXTERNAL_RESOURCES", "false")
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .env("HOME", dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out);
        let child = c.spawn().expect("phoenix starts");
        let mut p = Phoenix {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        // Ready when its health check answers (start-up migrates a fresh
        // SQLite database: seconds on this machine).
        for _ in 0..1200 {
            if let Some(status) = p.child.try_wait().expect("try_wait") {
                panic!(
                    "Phoenix exited ({status}) before it was ready:\n{}",
                    p.log_text()
                );
            }
            if ureq::get(&format!("{}/healthz", p.base))
                .call()
                .is_ok_and(|r| r.status().is_success())
            {
                return p;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("Phoenix did not become ready:\n{}", p.log_text());
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Every span of the default project, through its REST API.
    fn spans(&self) -> Vec<Json> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut url = format!("{}/v1/projects/default/spans?limit=100", self.base);
            if let Some(c) = &cursor {
                url.push_str(&format!("&cursor={c}"));
            }
            let Some(page) = get(&url) else {
                return out; // no project yet: nothing ingested
            };
            out.extend(page["data"].as_array().cloned().unwrap_or_default());
            match page["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => return out,
            }
        }
    }

    /// The spans of trace `trace`, once `n` of them have been ingested
    /// (Phoenix writes them to its database in batches).
    fn trace(&self, trace: &str, n: usize) -> Vec<Json> {
        let mut last = Vec::new();
        for _ in 0..600 {
            last = self
                .spans()
                .into_iter()
                .filter(|s| s["context"]["trace_id"] == trace)
                .collect();
            if last.len() >= n {
                return last;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "Phoenix holds {} spans of trace {trace}, not {n}: {last:#?}\n{}",
            last.len(),
            self.log_text()
        );
    }
}

fn aisc(dir: &Path, args: &[&str], endpoint: &str) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_aisc"));
    c.args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("APXM_CONFIG")
        .env_remove("APXM_BACKEND")
        .env_remove("OTEL_SDK_DISABLED")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("HOME", dir)
        .env("NO_COLOR", "1")
        .current_dir(dir);
    c.output().expect("aisc runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The run id `aisc run` prints (`run id ID (...)`).
fn run_id(o: &Output) -> String {
    let err = stderr(o);
    err.lines()
        .find_map(|l| {
            l.strip_prefix("run id ")
                .or_else(|| l.split("run id ").nth(1))
        })
        .and_then(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no run id in: {err}"))
}

fn attr<'a>(s: &'a Json, k: &str) -> &'a Json {
    &s["attributes"][k]
}

fn named<'a>(spans: &'a [Json], prefix: &str) -> Vec<&'a Json> {
    spans
        .iter()
        .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
        .collect()
}

fn hex_trace_id(run_id: &str) -> String {
    ais_vm::observe::otlp::spans::trace_id(run_id)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

const PAUSING: &str = r#"agent Refunds {
    flow main(amount: number) -> str {
        let summary = ask(prompt: "Summarise the refund request for {amount}")
        let answer = pause("Approve? {summary}")
        let letter = ask(prompt: "Write to the customer that the answer is {answer}")
        return "{answer}: {letter}"
    }
}
"#;

#[test]
#[ignore = "needs Arize Phoenix: run ./test"]
fn phoenix_shows_a_run_and_its_resume_as_one_trace_with_the_genai_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let phoenix = Phoenix::start(dir.path());

    // 1. A run with a fan-out of flow calls.
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .join("examples/01_parallel_research.ais");
    let o = aisc(
        dir.path(),
        &[
            "run",
            &example.display().to_string(),
            "--arg",
            "topic=sodium batteries",
        ],
        &phoenix.base,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        !stderr(&o).contains("OpenTelemetry export"),
        "{}",
        stderr(&o)
    );
    let trace = hex_trace_id(&run_id(&o));
    // The entry flow, three flow calls, five LLM calls.
    let spans = phoenix.trace(&trace, 9);
    assert_eq!(spans.len(), 9, "{spans:#?}");
    let id = |s: &Json| s["context"]["span_id"].as_str().unwrap_or("").to_string();
    let roots: Vec<&Json> = spans.iter().filter(|s| s["parent_id"].is_null()).collect();
    assert_eq!(roots.len(), 1, "{spans:#?}");
    let root = roots[0];
    assert_eq!(root["name"], "invoke_agent Coordinator");
    assert_eq!(attr(root, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(attr(root, "ais.run.outcome"), "ok");
    let calls = named(&spans, "invoke_agent ");
    assert_eq!(calls.len(), 4);
    for c in calls.iter().filter(|c| c["parent_id"].is_string()) {
        assert_eq!(c["parent_id"].as_str(), Some(id(root).as_str()), "{c:#}");
        assert!(attr(c, "gen_ai.agent.name").is_string());
    }
    let chats = named(&spans, "chat ");
    assert_eq!(chats.len(), 5);
    for c in &chats {
        assert_eq!(attr(c, "gen_ai.operation.name"), "chat");
        assert_eq!(attr(c, "gen_ai.provider.name"), "ais.simulator");
        let model = attr(c, "gen_ai.request.model").as_str().expect("model");
        assert_eq!(c["name"].as_str(), Some(format!("chat {model}").as_str()));
        assert!(attr(c, "gen_ai.usage.input_tokens")
            .as_i64()
            .is_some_and(|n| n > 0));
        assert!(attr(c, "gen_ai.usage.output_tokens").as_i64().is_some());
        // Each under the flow call whose op it is.
        let parent = spans
            .iter()
            .find(|s| Some(id(s).as_str()) == c["parent_id"].as_str())
            .expect("parent in Phoenix");
        assert_eq!(attr(parent, "ais.flow"), attr(c, "ais.flow"));
    }

    // 2. A run that pauses, resumed by another process: one trace, two
    // roots (one per attempt), the replayed call not sent again.
    std::fs::write(dir.path().join("refunds.ais"), PAUSING).expect("program");
    let o = aisc(
        dir.path(),
        &["run", "refunds.ais", "--arg", "amount=40"],
        &phoenix.base,
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let run = run_id(&o);
    let trace = hex_trace_id(&run);
    // Root, the first ask, the pause.
    let first = phoenix.trace(&trace, 3);
    assert!(named(&first, "pause ").len() == 1, "{first:#?}");
    let o = aisc(
        dir.path(),
        &["resume", &run, "--input", "yes"],
        &phoenix.base,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // + the resumed attempt's root and its one new ask.
    let all = phoenix.trace(&trace, 5);
    assert_eq!(all.len(), 5, "{all:#?}");
    let roots: Vec<&Json> = all.iter().filter(|s| s["parent_id"].is_null()).collect();
    assert_eq!(roots.len(), 2);
    let mut outcomes: Vec<&str> = roots
        .iter()
        .map(|r| attr(r, "ais.run.outcome").as_str().unwrap_or(""))
        .collect();
    outcomes.sort_unstable();
    assert_eq!(outcomes, ["ok", "paused"]);
    assert!(roots.iter().all(|r| attr(r, "ais.run.id") == run.as_str()));
    assert_eq!(named(&all, "chat ").len(), 2);
}
