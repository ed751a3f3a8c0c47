//! `aisc run` and `aisc resume` export their spans to an OTLP collector
//! set in `[telemetry.otlp]` or by `OTEL_EXPORTER_OTLP_ENDPOINT`: a run
//! that pauses and is resumed by another process is one trace.

use ais_testkit::otlp::{Collector, ReceivedSpan};
use std::path::Path;
use std::process::{Command, Output};

const PAUSED: i32 = 3;

const PROGRAM: &str = r#"agent Refunds {
    flow main(amount: number) -> str {
        let summary = ask(prompt: "Summarise the refund request for {amount}")
        let answer = pause("Approve? {summary}")
        let letter = ask(prompt: "Write to the customer that the answer is {answer}")
        return "{answer}: {letter}"
    }
}
"#;

fn aisc(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_aisc"));
    c.args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("APXM_CONFIG")
        .env_remove("APXM_BACKEND")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_SDK_DISABLED")
        .env("HOME", dir)
        .env("NO_COLOR", "1")
        .current_dir(dir);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("aisc runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn roots(spans: &[ReceivedSpan]) -> Vec<&ReceivedSpan> {
    spans.iter().filter(|s| s.parent.is_none()).collect()
}

#[test]
fn a_paused_run_and_its_resume_in_another_process_are_one_trace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let collector = Collector::start();
    // The first process finds the collector in the config file...
    std::fs::create_dir_all(dir.path().join(".apxm")).expect("mkdir");
    std::fs::write(
        dir.path().join(".apxm/config.toml"),
        format!(
            "[telemetry.otlp]\nendpoint = \"{}\"\nservice_name = \"refunds\"\n",
            collector.endpoint()
        ),
    )
    .expect("config");
    std::fs::write(dir.path().join("refunds.ais"), PROGRAM).expect("program");
    let o = aisc(
        dir.path(),
        &["run", "refunds.ais", "--arg", "amount=40"],
        &[],
    );
    assert_eq!(o.status.code(), Some(PAUSED), "{}", stderr(&o));
    // `aisc run` waits for its spans to be sent before it exits. The run
    // is not over: its root is left to the attempt that ends it, and the
    // first ask and the pause name it as their parent already.
    let first = collector.spans();
    assert!(roots(&first).is_empty(), "{first:#?}");
    assert!(first.iter().all(|s| s.service == "refunds"));
    let err = stderr(&o);
    let run_id = err
        .split("run id ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no run id in: {err}"))
        .to_string();
    let chats: Vec<&ReceivedSpan> = first
        .iter()
        .filter(|s| s.name.starts_with("chat "))
        .collect();
    assert_eq!(chats.len(), 1);
    assert_eq!(chats[0].attr("gen_ai.provider.name"), "ais.simulator");
    assert_eq!(chats[0].attr("ais.run.attempt"), 1);
    let pause: Vec<&ReceivedSpan> = first
        .iter()
        .filter(|s| s.name.starts_with("pause "))
        .collect();
    assert_eq!(pause.len(), 1, "{first:#?}");
    assert_eq!(pause[0].name, "pause Refunds.main");
    let root_id = chats[0].parent.clone().expect("the ask's parent");
    assert_eq!(pause[0].parent.as_deref(), Some(root_id.as_str()));

    // ...the second from the standard variable (which wins over the file).
    let second = Collector::start();
    let o = aisc(
        dir.path(),
        &["resume", "last", "--input", "yes"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &second.endpoint()),
            ("OTEL_SERVICE_NAME", "refunds-2"),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let resumed = second.spans();
    assert!(!resumed.is_empty());
    assert!(
        resumed.iter().all(|s| s.trace_id == chats[0].trace_id),
        "one trace"
    );
    assert!(resumed.iter().all(|s| s.service == "refunds-2"));
    let root2 = roots(&resumed);
    assert_eq!(root2.len(), 1);
    assert_eq!(root2[0].attr("ais.run.id"), run_id.as_str());
    assert_eq!(root2[0].attr("ais.run.outcome"), "ok");
    assert_eq!(root2[0].attr("ais.run.resumed"), true);
    assert_eq!(root2[0].attr("ais.run.attempt"), 2);
    assert_eq!(root2[0].name, "invoke_agent Refunds");
    // The root the first attempt's spans named.
    assert_eq!(root2[0].span_id, root_id);
    // The first ask was replayed from the journal: only the second is a
    // new LLM call, under the same root.
    let chats2: Vec<&ReceivedSpan> = resumed
        .iter()
        .filter(|s| s.name.starts_with("chat "))
        .collect();
    assert_eq!(chats2.len(), 1);
    assert_eq!(chats2[0].parent.as_deref(), Some(root_id.as_str()));
    assert_eq!(chats2[0].attr("ais.run.attempt"), 2);
    assert_ne!(chats2[0].span_id, chats[0].span_id);
    // Nothing went to the first collector.
    assert_eq!(collector.spans().len(), first.len());

    // OTEL_SDK_DISABLED turns it off.
    let third = Collector::start();
    let o = aisc(
        dir.path(),
        &["run", "refunds.ais", "--arg", "amount=41"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &third.endpoint()),
            ("OTEL_SDK_DISABLED", "true"),
        ],
    );
    assert_eq!(o.status.code(), Some(PAUSED), "{}", stderr(&o));
    assert!(third.requests().is_empty());
    assert_eq!(collector.spans().len(), first.len());
}

#[test]
fn a_collector_that_is_down_is_a_warning_not_a_failure() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("refunds.ais"), PROGRAM).expect("program");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let o = aisc(
        dir.path(),
        &["run", "refunds.ais", "--arg", "amount=40"],
        &[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            &format!("http://127.0.0.1:{port}"),
        )],
    );
    assert_eq!(o.status.code(), Some(PAUSED), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("warning: OpenTelemetry export to"), "{err}");
    assert!(err.contains("0 spans sent"), "{err}");
}
