//! Labels survive a thread (docs/language.md "Threads"; docs/security.md
//! "Labels across runs"): a run on a thread that got text from an
//! untrusted source and answered with it, or wrote it into the thread's
//! state, leaves it untrusted for the next run on the thread, which reads
//! it back with `thread_history()` or `thread_state()`; a sink then
//! refuses it. Text from a trusted source stays trusted (no
//! over-tainting). Each run gets its own host and journal on one memory
//! directory, as a second process would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/ifc_policy.rs"]
mod ifc_policy;
#[path = "support/mail_agent.rs"]
mod mail_agent;

use mail_agent::{denied, program};

use ais_ir::ifc::{FlowPolicy, SinkRule};
use ais_testkit::fake::FakeBackend;
use ais_vm::aam::{AamHost, AamOptions, Storage};
use ais_vm::journal::Journal;
use ais_vm::{Host, RunError, RunOptions, RunReport};
use serde_json::json;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// `fetch_page` is untrusted; writing it into the thread's state is
/// allowed (the state is the agent's own), sending it is not.
fn policy() -> FlowPolicy {
    let mut p = ifc_policy::mail_policy();
    p.sinks.insert(
        "thread_set".into(),
        SinkRule {
            allow_untrusted: vec!["*".into()],
            ..SinkRule::default()
        },
    );
    p
}

/// One run of `body` on thread `t` in `dir`, with its own host and
/// journal; `send` counts its calls in `sent`.
fn run(dir: &Path, sent: &Arc<AtomicUsize>, body: &str) -> RunReport {
    let h = AamHost::open(AamOptions {
        storage: Storage::Dir(dir.to_path_buf()),
        ..AamOptions::default()
    })
    .unwrap();
    h.register_tool("fetch_page", |_| Ok(json!("mallory at evil dot test")));
    h.register_tool("read_note", |_| Ok(json!("alice at example dot test")));
    let s = sent.clone();
    h.register_tool("send", move |_| {
        s.fetch_add(1, Ordering::SeqCst);
        Ok(json!("sent"))
    });
    let prog = program(body);
    let bytes = ais_ir::bytecode::encode(&prog).unwrap();
    let journal = Journal::begin(Some(dir), h.run_id(), "threads.ais", &bytes, None, &[]).unwrap();
    journal
        .store()
        .link_thread_run("t", h.run_id(), true)
        .unwrap();
    h.bind_threads(journal.store().clone());
    let options = RunOptions {
        flow_policy: policy(),
        journal: Some(Arc::new(journal)),
        ..RunOptions::default()
    };
    ais_vm::run(
        &prog,
        &options,
        Arc::new(FakeBackend::new()),
        Arc::new(h) as Arc<dyn Host>,
    )
}

/// Run 1 takes text from `source` and answers with it (and writes it to
/// the state); run 2 reads it back with `read` and sends it.
fn across_turns(read: &str) {
    for (source, untrusted) in [("fetch_page", true), ("read_note", false)] {
        let dir = tempfile::tempdir().unwrap();
        let sent = Arc::new(AtomicUsize::new(0));
        let first = run(
            dir.path(),
            &sent,
            &format!(
                "let doc = {source}(\"x\")\n        thread_set(key: \"doc\", value: doc)\n        return doc"
            ),
        );
        assert!(first.outcome.is_ok(), "{source}: {:?}", first.outcome);
        let second = run(
            dir.path(),
            &sent,
            &format!("let got = {read}\n        send(\"{{got}}\", \"n\")\n        return \"done\""),
        );
        if untrusted {
            assert!(denied(&second), "{read}: {:?}", second.outcome);
            if let Err(RunError::OpFailed { message, .. }) = &second.outcome {
                assert!(message.contains("fetch_page"), "{message}");
            }
            assert_eq!(sent.load(Ordering::SeqCst), 0, "{read}: the send ran");
        } else {
            assert!(second.outcome.is_ok(), "{read}: {:?}", second.outcome);
            assert_eq!(sent.load(Ordering::SeqCst), 1, "{read}");
        }
    }
}

#[test]
fn an_earlier_runs_untrusted_answer_stays_untrusted_in_the_history() {
    across_turns("thread_history()");
}

#[test]
fn an_untrusted_value_in_the_state_stays_untrusted_for_the_next_run() {
    across_turns("thread_state(key: \"doc\")");
    across_turns("thread_state()");
}
