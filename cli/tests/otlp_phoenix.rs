//! A run's trace in a real backend: Arize Phoenix (`scripts/provision/
//! phoenix.sh` installs the pinned version; `./test` runs this). Phoenix is
//! started on free loopback ports with a temporary working directory and
//! its outside calls turned off (`PHOENIX_ALLOW_EXTERNAL_RESOURCES=false`,
//! `PHOENIX_TELEMETRY_ENABLED=false`); `aisc run`, `aisc resume`, `aisc
//! serve` and `aisc worker` export to it with `OTEL_EXPORTER_OTLP_ENDPOINT`,
//! and the spans are read back through Phoenix's own REST API (`GET
//! /v1/projects/default/spans`). Three runs: one from the command line and
//! its resume after a pause; one POSTed to `aisc serve`; one on a fleet
//! (PostgreSQL) whose worker is killed (-9) mid-run and taken over by
//! another. Each is one trace with one root, every span's parent in it.

mod fleet_support;
mod serve_support;

use ais_testkit::mock::{MockReply, MockServer};
use ais_testkit::pg::PgServer;
use ais_vm::journal::{self, Status};
use ais_vm::store::postgres::PgStore;
use serde_json::{json, Value as Json};
use std::collections::HashSet;
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
        // SQLite database: seconds on this machine when idle, minutes with
        // the three tests' Phoenixes starting at once on a loaded one).
        for _ in 0..6000 {
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

    /// The spans of trace `trace`, once `n` of them (not counting
    /// `queue_wait` spans: how many calls waited for a lane depends on the
    /// machine's load) have been ingested (Phoenix writes them to its
    /// database in batches).
    fn trace(&self, trace: &str, n: usize) -> Vec<Json> {
        let mut last = Vec::new();
        for _ in 0..600 {
            last = self
                .spans()
                .into_iter()
                .filter(|s| s["context"]["trace_id"] == trace)
                .collect();
            if counted(&last) >= n {
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

/// How many spans, not counting `queue_wait` spans.
fn counted(spans: &[Json]) -> usize {
    spans.iter().filter(|s| s["name"] != "queue_wait").count()
}

/// Checks the shape of one run's trace: span ids unique, every span's
/// parent in the trace, one root; returns the root.
fn one_tree(spans: &[Json]) -> &Json {
    let id = |s: &Json| s["context"]["span_id"].as_str().unwrap_or("").to_string();
    let ids: HashSet<String> = spans.iter().map(id).collect();
    assert_eq!(ids.len(), spans.len(), "span ids repeat: {spans:#?}");
    for s in spans {
        if let Some(p) = s["parent_id"].as_str() {
            assert!(ids.contains(p), "the parent of {s:#} is not in the trace");
        }
    }
    let roots: Vec<&Json> = spans.iter().filter(|s| s["parent_id"].is_null()).collect();
    assert_eq!(roots.len(), 1, "one root: {spans:#?}");
    roots[0]
}

/// The `chat` spans' checks: the spec's names and required attributes.
fn check_chat(c: &Json, provider: &str) {
    assert_eq!(attr(c, "gen_ai.operation.name"), "chat");
    assert_eq!(attr(c, "gen_ai.provider.name"), provider);
    let model = attr(c, "gen_ai.request.model").as_str().expect("model");
    assert_eq!(c["name"].as_str(), Some(format!("chat {model}").as_str()));
    assert!(attr(c, "gen_ai.usage.input_tokens")
        .as_i64()
        .is_some_and(|n| n > 0));
    assert!(attr(c, "gen_ai.usage.output_tokens").as_i64().is_some());
    assert!(attr(c, "ais.run.attempt").as_i64().is_some_and(|n| n >= 1));
}

/// The span `s`'s parent among `spans`.
fn parent_of<'a>(spans: &'a [Json], s: &Json) -> &'a Json {
    spans
        .iter()
        .find(|p| p["context"]["span_id"] == s["parent_id"])
        .unwrap_or_else(|| panic!("no parent of {s:#}"))
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
    assert_eq!(counted(&spans), 9, "{spans:#?}");
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
        check_chat(c, "ais.simulator");
        assert_eq!(attr(c, "ais.run.attempt"), 1);
        // Each under the flow call whose op it is.
        assert_eq!(attr(parent_of(&spans, c), "ais.flow"), attr(c, "ais.flow"));
    }
    assert_eq!(one_tree(&spans), root);

    // 2. A run that pauses, resumed by another process: one trace, one
    // root (sent by the attempt that ended the run), the replayed call
    // not sent again.
    std::fs::write(dir.path().join("refunds.ais"), PAUSING).expect("program");
    let o = aisc(
        dir.path(),
        &["run", "refunds.ais", "--arg", "amount=40"],
        &phoenix.base,
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let run = run_id(&o);
    let trace = hex_trace_id(&run);
    // The first ask and the pause; their parent, the root, is the
    // resuming attempt's to send.
    let first = phoenix.trace(&trace, 2);
    assert_eq!(counted(&first), 2, "{first:#?}");
    assert!(named(&first, "pause ").len() == 1, "{first:#?}");
    assert!(
        first.iter().all(|s| s["parent_id"].is_string()),
        "{first:#?}"
    );
    let o = aisc(
        dir.path(),
        &["resume", &run, "--input", "yes"],
        &phoenix.base,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // + the root and the resumed attempt's one new ask.
    let all = phoenix.trace(&trace, 4);
    assert_eq!(counted(&all), 4, "{all:#?}");
    let root = one_tree(&all);
    assert_eq!(attr(root, "ais.run.outcome"), "ok");
    assert_eq!(attr(root, "ais.run.id"), run.as_str());
    assert_eq!(attr(root, "ais.run.attempt"), 2);
    assert_eq!(attr(root, "ais.run.resumed"), true);
    let chats = named(&all, "chat ");
    assert_eq!(chats.len(), 2);
    let mut attempts: Vec<i64> = chats
        .iter()
        .map(|c| attr(c, "ais.run.attempt").as_i64().unwrap_or(0))
        .collect();
    attempts.sort_unstable();
    assert_eq!(attempts, [1, 2]);
    assert_eq!(attr(named(&all, "pause ")[0], "ais.run.attempt"), 1);
}

#[test]
#[ignore = "needs Arize Phoenix: run ./test"]
fn phoenix_shows_a_run_posted_to_aisc_serve_with_the_genai_names_and_parents() {
    let dir = tempfile::tempdir().expect("tempdir");
    let phoenix = Phoenix::start(dir.path());
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .join("examples/01_parallel_research.ais");
    let file = example.display().to_string();
    let traces = format!("{}/v1/traces", phoenix.base);
    let server = serve_support::Server::start(
        dir.path(),
        &[&file],
        &["--sim-delay-scale", "0"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.base.as_str()),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", traces.as_str()),
        ],
    );
    let r = server.post(
        "/v1/runs?wait=true",
        &json!({"program": "01_parallel_research.ais", "args": {"topic": "bees"}}).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let run = r.json();
    assert_eq!(run["status"], "succeeded", "{run}");
    let id = run["id"].as_str().expect("run id").to_string();
    // The entry flow, three flow calls, five LLM calls (as `aisc run`).
    let spans = phoenix.trace(&hex_trace_id(&id), 9);
    assert_eq!(counted(&spans), 9, "{spans:#?}");
    let root = one_tree(&spans);
    assert_eq!(root["name"], "invoke_agent Coordinator");
    assert_eq!(attr(root, "ais.run.id"), id.as_str());
    assert_eq!(attr(root, "ais.run.outcome"), "ok");
    assert_eq!(
        attr(root, "gen_ai.usage.input_tokens").as_i64(),
        run["summary"]["input_tokens"].as_i64()
    );
    let calls = named(&spans, "invoke_agent ");
    let mut agents: Vec<&str> = calls
        .iter()
        .filter(|c| c["parent_id"].is_string())
        .map(|c| {
            assert_eq!(parent_of(&spans, c)["context"], root["context"]);
            assert_eq!(attr(c, "gen_ai.operation.name"), "invoke_agent");
            attr(c, "gen_ai.agent.name").as_str().unwrap_or("")
        })
        .collect();
    agents.sort_unstable();
    assert_eq!(agents, ["Analyst", "Critic", "Researcher"]);
    let chats = named(&spans, "chat ");
    assert_eq!(chats.len(), 5);
    for c in &chats {
        check_chat(c, "ais.simulator");
        let parent = parent_of(&spans, c);
        assert_eq!(attr(parent, "ais.flow"), attr(c, "ais.flow"));
        assert_eq!(
            attr(parent, "gen_ai.agent.name"),
            attr(c, "gen_ai.agent.name")
        );
    }
    // Nothing but this run's trace reached Phoenix.
    assert!(phoenix
        .spans()
        .iter()
        .all(|s| s["context"]["trace_id"] == hex_trace_id(&id).as_str()));
}

/// Three LLM calls in a row, the middle one in a flow call of another
/// agent (so the takeover happens inside a call's span).
const CHAIN: &str = r#"agent Researcher {
    flow research(q: str) -> str {
        return ask("{q} step 2")
    }
}
agent Lead {
    @entry flow main(n: str) -> str {
        let a = ask("{n} step 1")
        let b = Researcher.research(a)
        let c = ask("{n} step 3 {b}")
        return c
    }
}
"#;

#[test]
#[ignore = "needs Arize Phoenix and PostgreSQL: run ./test"]
fn phoenix_shows_a_fleet_run_taken_over_after_a_kill_as_one_trace() {
    let pg = PgServer::start();
    let url = pg.database("otlp_phoenix_fleet");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let phoenix = Phoenix::start(dir);
    let mock = MockServer::start().expect("mock");
    // A's second call stalls: A is inside it when the test kills it (once
    // its first call's span is in Phoenix). B's calls are answered.
    mock.push(MockReply::Content("reply 1".into()));
    mock.push(MockReply::Stall(Duration::from_secs(600)));
    mock.push(MockReply::Content("reply 2".into()));
    mock.push(MockReply::Content("reply 3".into()));
    mock.set_latency(Duration::from_millis(200));
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "default_backend = \"m\"\n[[llm_backends]]\nname = \"m\"\nprotocol = \"openai\"\nbase_url = \"{}\"\nstream = false\n",
            mock.openai_url()
        ),
    )
    .expect("config");
    let config = config.display().to_string();
    std::fs::write(dir.join("chain.ais"), CHAIN).expect("program");
    let with_otlp = |mut c: Command| {
        c.env_remove("OTEL_SDK_DISABLED")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &phoenix.base);
        c
    };
    // -O0: the asks stay separate calls and the flow call stays a call.
    let out = with_otlp(fleet_support::aisc(dir))
        .args(["run", "--detach", "-O0", "-q", "--store", &url, "chain.ais"])
        .args(["--config", &config, "--arg", "n=r1"])
        .output()
        .expect("enqueue");
    assert!(out.status.success(), "{}", stderr(&out));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let trace = hex_trace_id(&id);
    let store = PgStore::connect(&url).expect("store");
    let worker = |log: &str| -> Child {
        let log = std::fs::File::create(dir.join(log)).expect("log");
        with_otlp(fleet_support::aisc(dir))
            .args(["worker", "--store", &url, "--config", &config])
            .args([
                "--memory",
                ":memory:",
                "--poll-ms",
                "50",
                "--lease-secs",
                "1",
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("worker starts")
    };

    // Worker A: its first call's span is in Phoenix, then A dies (-9)
    // while its second call is in flight.
    let mut a = worker("a.log");
    fleet_support::wait_until(dir, "worker A's first call in Phoenix", || {
        mock.request_count() == 2
            && phoenix.spans().iter().any(|s| {
                s["context"]["trace_id"] == trace.as_str()
                    && s["name"].as_str().is_some_and(|n| n.starts_with("chat "))
            })
    });
    a.kill().expect("SIGKILL A");
    let _ = a.wait();
    let requests_at_kill = mock.request_count();
    assert_eq!(requests_at_kill, 2, "A was killed inside its second call");

    // Worker B takes the run over when A's lease expires, and ends it.
    let mut b = worker("b.log");
    fleet_support::wait_until(dir, "worker B completing the run", || {
        journal::load_record_in(&store, &id).is_ok_and(|r| r.info.status == Status::Completed)
    });
    let record = journal::load_record_in(&store, &id).expect("record");
    assert_eq!(record.info.resumes, 1, "taken over once");
    // The root, the flow call to Researcher, three chat spans: step 1 by
    // A, the second (A's was cut off) and third by B.
    let spans = phoenix.trace(&trace, 5);
    let _ = b.kill();
    let _ = b.wait();
    assert_eq!(counted(&spans), 5, "{spans:#?}");
    // One trace in Phoenix: the run's.
    assert!(phoenix
        .spans()
        .iter()
        .all(|s| s["context"]["trace_id"] == trace.as_str()));
    let root = one_tree(&spans);
    assert_eq!(root["name"], "invoke_agent Lead");
    assert_eq!(attr(root, "ais.run.id"), id.as_str());
    assert_eq!(attr(root, "ais.run.outcome"), "ok");
    assert_eq!(attr(root, "ais.run.attempt"), 2);
    assert_eq!(attr(root, "ais.run.resumed"), true);
    let research = named(&spans, "invoke_agent Researcher");
    assert_eq!(research.len(), 1);
    assert_eq!(parent_of(&spans, research[0])["context"], root["context"]);
    let chats = named(&spans, "chat ");
    assert_eq!(chats.len(), 3, "{spans:#?}");
    let mut by_attempt: Vec<(i64, String)> = chats
        .iter()
        .map(|c| {
            check_chat(c, "openai");
            let flow = attr(parent_of(&spans, c), "ais.flow");
            assert_eq!(flow, attr(c, "ais.flow"));
            (
                attr(c, "ais.run.attempt").as_i64().unwrap_or(0),
                flow.as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    by_attempt.sort();
    // A's first call; B's re-execution of the call A was killed in (in
    // Researcher's flow) and the last one.
    assert_eq!(
        by_attempt,
        [
            (1, "Lead.main".to_string()),
            (2, "Lead.main".to_string()),
            (2, "Researcher.research".to_string())
        ]
    );
    // B replayed A's first call from the journal: requests made = spans.
    assert_eq!(mock.request_count(), 4);
}
