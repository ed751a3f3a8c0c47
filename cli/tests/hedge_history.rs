//! The hedge's latency history across `aisc run` processes (issue 36):
//! each run adds the latencies its hedged backend observed to
//! `latency.json` in the memory directory, the next process starts from
//! them, and a corrupt file is a warning, never a failure.
#![allow(clippy::unwrap_used)]

mod serve_support;

use ais_testkit::mock::MockServer;
use ais_vm::llm::resilience::history;
use ais_vm::llm::LlmOpKind;
use serve_support::{aisc, write};

const TWO: &str = "agent Two {\n    @entry flow main(topic: str) -> str {\n        ask(\"First \" + topic) -> a\n        return ask(\"Then \" + topic, a)\n    }\n}\n";

#[test]
fn each_run_adds_its_latencies_and_a_corrupt_history_is_only_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mock = MockServer::start().unwrap();
    let config = write(
        dir,
        "config.toml",
        &format!(
            "default_backend = \"m\"\n[[llm_backends]]\nname = \"m\"\nprotocol = \"openai\"\nbase_url = \"{}\"\nretries = 0\nhedge = {{ after = \"p95\", max_extra = 0.1 }}\n",
            mock.openai_url()
        ),
    );
    let p = write(dir, "two.ais", TWO);
    let memory = dir.join(".apxm");
    let run = || {
        let out = aisc(
            dir,
            &["run", &p, "--config", &config, "--arg", "topic=ants"],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let kept = || history::stored(&memory, "m", LlmOpKind::Ask).unwrap().len();
    run();
    // However many requests a run makes (the compiler may fuse the two
    // asks), each answered one is a latency kept.
    let per_run = mock.requests().len();
    assert!(per_run >= 1);
    assert_eq!(kept(), per_run, "the first process kept its answers");
    run();
    assert_eq!(mock.requests().len(), 2 * per_run);
    assert_eq!(
        kept(),
        2 * per_run,
        "the second added its own to the first's"
    );

    std::fs::write(memory.join(history::FILE), b"\x00 not json").unwrap();
    let stderr = run();
    assert!(stderr.contains("not a latency history file"), "{stderr}");
    assert_eq!(
        kept(),
        per_run,
        "the corrupt file was replaced by this run's"
    );
}
