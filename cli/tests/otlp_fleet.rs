//! A fleet run is one trace across the workers that ran it: worker A takes
//! a queued run and is killed after its first LLM call, worker B takes it
//! over when A's lease expires and finishes it; both export to one OTLP
//! collector (`ais_testkit::otlp`) and every span carries the trace id of
//! the run; A's spans name the root B sends (`cli/tests/otlp_phoenix.rs`
//! checks the same in Arize Phoenix). Needs PostgreSQL (the shared run store), as
//! `cli/tests/scale_out.rs`.

use ais_testkit::mock::{MockReply, MockServer};
use ais_testkit::otlp::{Collector, ReceivedSpan};
use ais_testkit::pg::PgServer;
use ais_vm::journal::{self, Status};
use ais_vm::store::postgres::PgStore;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const CHAIN: &str = r#"agent A {
    @entry flow main(n: str) -> str {
        ask("{n} step 1") -> a
        ask("{n} step 2", a) -> b
        ask("{n} step 3", b) -> c
        return c
    }
}
"#;

fn aisc(dir: &Path, endpoint: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_aisc"));
    c.env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("AIS_STORE")
        .env_remove("OTEL_SDK_DISABLED")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("HOME", dir)
        .env("NO_COLOR", "1")
        .current_dir(dir);
    c
}

/// Polls `done` a bounded number of times (a hang fails, with the logs).
fn wait_until(dir: &Path, what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..1200 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let logs: String = ["a.log", "b.log"]
        .iter()
        .map(|f| std::fs::read_to_string(dir.join(f)).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n---\n");
    panic!("gave up waiting for {what}\n{logs}");
}

fn worker(dir: &Path, endpoint: &str, url: &str, config: &str, log: &str) -> Child {
    let log = std::fs::File::create(dir.join(log)).expect("log");
    aisc(dir, endpoint)
        .args([
            "worker", "--store", url, "--config", config, "--memory", ":memory:",
        ])
        .args(["--lease-secs", "1", "--poll-ms", "50"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("worker starts")
}

fn chats(spans: &[ReceivedSpan]) -> usize {
    spans.iter().filter(|s| s.name.starts_with("chat ")).count()
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn a_run_taken_over_by_another_worker_is_one_trace() {
    let pg = PgServer::start();
    let url = pg.database("otlp_fleet");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let collector = Collector::start();
    let endpoint = collector.endpoint();
    let mock = MockServer::start().expect("mock");
    for i in 1..=3 {
        mock.push(MockReply::Content(format!("reply {i}")));
    }
    mock.set_latency(Duration::from_millis(300));
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
    // -O0: the three asks stay three calls (fuse-ask would make one).
    let out = aisc(dir, &endpoint)
        .args([
            "run",
            "--detach",
            "-O0",
            "-q",
            "--store",
            &url,
            "chain.ais",
            "--config",
            &config,
            "--arg",
            "n=r1",
        ])
        .output()
        .expect("enqueue");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let store = PgStore::connect(&url).expect("store");

    // A runs the first call, and its span reaches the collector.
    let mut a = worker(dir, &endpoint, &url, &config, "a.log");
    wait_until(dir, "worker A's first call in the trace", || {
        chats(&collector.spans()) >= 1
    });
    a.kill().expect("SIGKILL A");
    let _ = a.wait();
    let from_a = collector.spans();
    let requests_at_kill = mock.request_count();

    // B takes the run over once A's lease has expired, and completes it.
    let mut b = worker(dir, &endpoint, &url, &config, "b.log");
    wait_until(dir, "worker B completing the run", || {
        journal::load_record_in(&store, &id).is_ok_and(|r| r.info.status == Status::Completed)
    });
    let record = journal::load_record_in(&store, &id).expect("record");
    assert_eq!(
        record.info.resumes,
        1,
        "taken over once; requests at the kill {requests_at_kill}, now {}; A sent {:?}; B: {}",
        mock.request_count(),
        from_a.iter().map(|s| &s.name).collect::<Vec<_>>(),
        std::fs::read_to_string(dir.join("b.log")).unwrap_or_default()
    );
    // B's root is sent when its run ends: wait for it.
    wait_until(dir, "worker B's root span", || {
        collector
            .spans()
            .iter()
            .any(|s| s.parent.is_none() && s.name.starts_with("invoke_agent"))
    });
    let _ = b.kill();
    let _ = b.wait();

    let spans = collector.spans();
    let trace: String = ais_vm::observe::otlp::spans::trace_id(&id)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect();
    assert!(
        spans.iter().all(|s| s.trace_id == trace),
        "one trace: {spans:#?}"
    );
    // A died before its run ended: its calls are in the trace, its root is
    // not. B's root says it resumed the run.
    assert!(from_a.iter().all(|s| !s.name.starts_with("invoke_agent")));
    let roots: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.parent.is_none()).collect();
    assert_eq!(roots.len(), 1, "{spans:#?}");
    assert_eq!(roots[0].attr("ais.run.resumed"), true);
    assert_eq!(roots[0].attr("ais.run.attempt"), 2);
    // A's spans and B's hang under that root: span ids are the same in
    // every attempt, so every parent named is in the trace.
    let ids: std::collections::HashSet<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
    assert_eq!(ids.len(), spans.len(), "{spans:#?}");
    assert!(
        spans
            .iter()
            .all(|s| s.parent.as_deref().is_none_or(|p| ids.contains(p))),
        "{spans:#?}"
    );
    assert!(from_a.iter().all(|s| s.attr("ais.run.attempt") == 1));
    assert_eq!(roots[0].attr("ais.run.outcome"), "ok");
    assert_eq!(roots[0].attr("ais.run.id"), id.as_str());
    // B's LLM requests are its chat spans (A's completed call it replays
    // from the journal, and sends no span for it); with A's, every step
    // of the chain is in the trace.
    assert!(chats(&from_a) >= 1);
    assert_eq!(
        chats(&spans) - chats(&from_a),
        mock.request_count() - requests_at_kill,
        "{spans:#?}"
    );
    assert!(chats(&spans) >= 3);
}
