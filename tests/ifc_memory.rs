//! Information-flow labels of memory that outlives a run (issue 19,
//! docs/security.md "Labels across runs"), and of the agent's own trace.
//!
//! Writing untrusted data to long-term memory is denied by default (it is a
//! sink); where the policy allows it, the page is still untrusted when a
//! later run on the same memory reads it, and a trusted note is not. Reading the agent's trace from the episodic log carries what
//! the host logged there (tool results included). Here on one in-process
//! host kept across runs (`MemoryHost`); `cli/tests/ifc_memory_cli.rs` does
//! the same with two `aisc run` processes on one memory directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/ifc_policy.rs"]
mod ifc_policy;
#[path = "support/mail_agent.rs"]
mod mail_agent;

use mail_agent::{denied, program};

use ais_ir::ifc::{FlowPolicy, SinkRule};
use ais_testkit::fake::FakeBackend;
use ais_testkit::MemoryHost;
use ais_vm::{Host, RunError, RunOptions, RunReport};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn policy() -> FlowPolicy {
    let mut p = ifc_policy::mail_policy();
    // Long-term memory is a sink by default (other agents and later runs
    // read it); this agent is allowed to keep untrusted pages there, so
    // the reads must keep them untrusted.
    p.sinks.insert(
        "memory.ltm".into(),
        SinkRule {
            allow_untrusted: vec!["*".into()],
            ..SinkRule::default()
        },
    );
    p
}

/// A host with the three tools; `send` counts its calls.
fn host() -> (Arc<MemoryHost>, Arc<AtomicUsize>) {
    let h = Arc::new(MemoryHost::new());
    h.register_tool("fetch_page", |_| Ok(json!("mallory@evil.test")));
    h.register_tool("read_note", |_| Ok(json!("alice@example.test")));
    let sent = Arc::new(AtomicUsize::new(0));
    let s = sent.clone();
    h.register_tool("send", move |_| {
        s.fetch_add(1, Ordering::SeqCst);
        Ok(json!("sent"))
    });
    (h, sent)
}

fn run(host: &Arc<MemoryHost>, body: &str) -> RunReport {
    let options = RunOptions {
        flow_policy: policy(),
        ..RunOptions::default()
    };
    ais_vm::run(
        &program(body),
        &options,
        Arc::new(FakeBackend::new()),
        host.clone() as Arc<dyn Host>,
    )
}

const STORE_PAGE: &str = "let doc = fetch_page(\"https://example.test\")\n        umem(doc, \"ltm\", \"contact\")\n        return \"stored\"";
const STORE_NOTE: &str = "let doc = read_note(\"contacts\")\n        umem(doc, \"ltm\", \"contact\")\n        return \"stored\"";
const SEND_STORED: &str = "let to = qmem(\"contact\", \"ltm\")\n        send(\"{to}\", \"scheduled\")\n        return \"done\"";

#[test]
fn an_untrusted_page_stored_by_one_run_is_untrusted_in_the_next() {
    let (h, sent) = host();
    let first = run(&h, STORE_PAGE);
    assert!(first.outcome.is_ok(), "{:?}", first.outcome);
    let second = run(&h, SEND_STORED);
    assert!(denied(&second), "{:?}", second.outcome);
    if let Err(RunError::OpFailed { message, .. }) = &second.outcome {
        assert!(message.contains("fetch_page"), "{message}");
    }
    assert_eq!(sent.load(Ordering::SeqCst), 0);
}

#[test]
fn a_trusted_note_stored_by_one_run_can_be_sent_by_the_next() {
    let (h, sent) = host();
    assert!(run(&h, STORE_NOTE).outcome.is_ok());
    let second = run(&h, SEND_STORED);
    assert!(second.outcome.is_ok(), "{:?}", second.outcome);
    assert_eq!(sent.load(Ordering::SeqCst), 1);
}

#[test]
fn a_fresh_memory_carries_nothing_from_other_hosts() {
    let (writer, _) = host();
    assert!(run(&writer, STORE_PAGE).outcome.is_ok());
    // Another host (another memory): its long-term memory holds nothing
    // untrusted, so the same read may reach the sink.
    let (reader, sent) = host();
    let r = run(&reader, SEND_STORED);
    assert!(r.outcome.is_ok(), "{:?}", r.outcome);
    assert_eq!(sent.load(Ordering::SeqCst), 1);
}

#[test]
fn the_agents_trace_carries_what_the_host_logged_in_this_run() {
    // The page is only logged (by the host, as the tool's result), never
    // written with `umem`; reading the trace still carries its source.
    // `fence()` orders the read after the call: nothing else does (a tool
    // call is not on the episodic chain), so without it the read may run
    // first and see a trace without the page.
    let (h, sent) = host();
    let r = run(
        &h,
        "let doc = fetch_page(\"https://example.test\")\n        fence()\n        let t = qmem(\"@trace\", \"episodic\")\n        send(\"{t}\", doc)\n        return \"done\"",
    );
    assert!(denied(&r), "{:?}", r.outcome);
    assert_eq!(sent.load(Ordering::SeqCst), 0);
    // With only trusted tools before it, the trace may reach the sink.
    let (h, sent) = host();
    let r = run(
        &h,
        "let doc = read_note(\"contacts\")\n        fence()\n        let t = qmem(\"@trace\", \"episodic\")\n        send(\"{t}\", doc)\n        return \"done\"",
    );
    assert!(r.outcome.is_ok(), "{:?}", r.outcome);
    assert_eq!(sent.load(Ordering::SeqCst), 1);
}
