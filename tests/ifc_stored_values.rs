//! Labels survive storage, per value (issue 35 deliverable 2;
//! docs/security.md "Labels across runs"): text stored through the AAM's
//! tools — `store_fact`, `enqueue`, `communicate` — keeps its labels in
//! the agent store, and reading it back — `memory_search`, `claim`,
//! `inbox()` — puts them back on the result, so a run that passes it to a
//! sink is denied; `umem`/`qmem` of long-term memory and the episodic log
//! alike (issue 32 #10). Trusted text stays trusted (no over-tainting), and a
//! search that returns only trusted entries is trusted although untrusted
//! ones are stored beside them. Each run gets its own host, as a second
//! process would: on one SQLite memory directory, and on one PostgreSQL
//! store (ignored without PostgreSQL: run ./test).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/ifc_policy.rs"]
mod ifc_policy;
#[path = "support/mail_agent.rs"]
mod mail_agent;

use mail_agent::{denied, program};

use ais_ir::ifc::{FlowPolicy, SinkRule};
use ais_testkit::fake::{text_reply, FakeBackend};
use ais_testkit::pg::PgServer;
use ais_vm::aam::{AamHost, AamOptions, Storage};
use ais_vm::llm::ToolCall;
use ais_vm::{Host, RunError, RunOptions, RunReport};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// `fetch_page` is untrusted; the agent may keep untrusted text with the
/// storing tools (they are sinks by default), so the reads must keep it
/// untrusted.
fn policy() -> FlowPolicy {
    let mut p = ifc_policy::mail_policy();
    for sink in ["store_fact", "enqueue", "communicate", "memory.ltm"] {
        p.sinks.insert(
            sink.into(),
            SinkRule {
                allow_untrusted: vec!["*".into()],
                ..SinkRule::default()
            },
        );
    }
    p
}

/// Where the runs keep their agent state.
enum Place {
    Dir(std::path::PathBuf),
    Pg(String),
}

/// A fresh host on `place` (one per run, like one process per run), with
/// the three tools; `send` counts its calls in `sent`.
fn host(place: &Place, sent: &Arc<AtomicUsize>) -> Arc<AamHost> {
    let storage = match place {
        Place::Dir(d) => Storage::Dir(d.clone()),
        Place::Pg(_) => Storage::Ephemeral,
    };
    let mut h = AamHost::open(AamOptions {
        storage,
        ..AamOptions::default()
    })
    .unwrap();
    if let Place::Pg(url) = place {
        h.use_store(url).unwrap();
    }
    h.register_tool("fetch_page", |_| Ok(json!("mallory at evil dot test")));
    h.register_tool("read_note", |_| Ok(json!("alice at example dot test")));
    let s = sent.clone();
    h.register_tool("send", move |_| {
        s.fetch_add(1, Ordering::SeqCst);
        Ok(json!("sent"))
    });
    Arc::new(h)
}

fn run(place: &Place, sent: &Arc<AtomicUsize>, body: &str) -> RunReport {
    let options = RunOptions {
        flow_policy: policy(),
        ..RunOptions::default()
    };
    ais_vm::run(
        &program(body),
        &options,
        Arc::new(model()),
        host(place, sent) as Arc<dyn Host>,
    )
}

/// A model that, offered tools, first calls `memory_search` for "dot
/// test", then answers.
fn model() -> FakeBackend {
    FakeBackend::new().with_script(|req, _| {
        if req.tools.is_empty() || !req.turns.is_empty() {
            return None;
        }
        let mut r = text_reply("");
        r.tool_calls = vec![ToolCall {
            id: "c1".into(),
            name: "memory_search".into(),
            arguments: json!({"query": "dot test"}).to_string(),
        }];
        r.finish_reason = "tool_calls".into();
        Some(Ok(r))
    })
}

/// A fresh place per call.
type Fresh<'a> = &'a dyn Fn() -> Place;

/// Run 1 stores, run 2 reads and sends: denied when the stored text came
/// from `fetch_page`, sent when it came from `read_note` (each case on a
/// fresh place).
fn across_runs(fresh: Fresh<'_>, store: &str, read: &str) {
    for (source, untrusted) in [("fetch_page", true), ("read_note", false)] {
        let place = &fresh();
        let sent = Arc::new(AtomicUsize::new(0));
        let first = run(
            place,
            &sent,
            &format!("let doc = {source}(\"x\")\n        {store}\n        return \"stored\""),
        );
        assert!(first.outcome.is_ok(), "{store}: {:?}", first.outcome);
        let second = run(
            place,
            &sent,
            &format!("{read}\n        send(\"{{got}}\", \"n\")\n        return \"done\""),
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

fn every_store(place: Fresh<'_>) {
    // Facts: `store_fact` then `memory_search`.
    across_runs(
        place,
        "store_fact(text: doc)",
        "let got = memory_search(query: \"dot test\")",
    );
    // Work queues: each job keeps its labels until it is claimed.
    across_runs(place, "enqueue(\"jobs\", doc)", "let got = claim(\"jobs\")");
    // Memory tiers that outlive the run: each value keeps its labels
    // (issue 32 #10).
    across_runs(
        place,
        "umem(doc, \"episodic\")",
        "let got = qmem(\"dot test\", \"episodic\")",
    );
    across_runs(
        place,
        "umem(doc, \"ltm\", \"contact\")",
        "let got = qmem(\"contact\", \"ltm\")",
    );
}

/// A tool-calling exchange whose model calls `memory_search` carries the
/// labels of what the search returned.
fn tool_calling(fresh: Fresh<'_>) {
    across_runs(
        fresh,
        "store_fact(text: doc)",
        "let got = ask(\"dot test\", tools: [memory_search])",
    );
}

/// A search that returns only trusted entries is trusted, although an
/// untrusted one is stored beside them: the labels are per value.
fn per_value(place: &Place) {
    let sent = Arc::new(AtomicUsize::new(0));
    let first = run(
        place,
        &sent,
        "let page = fetch_page(\"x\")\n        store_fact(text: page)\n        let note = read_note(\"y\")\n        store_fact(text: note)\n        return \"stored\"",
    );
    assert!(first.outcome.is_ok(), "{:?}", first.outcome);
    let trusted = run(
        place,
        &sent,
        "let got = memory_search(query: \"alice\")\n        send(\"{got}\", \"n\")\n        return \"done\"",
    );
    assert!(trusted.outcome.is_ok(), "{:?}", trusted.outcome);
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    // Both entries: the union of their labels, so denied.
    let both = run(
        place,
        &sent,
        "let got = memory_search(query: \"dot test\")\n        send(\"{got}\", \"n\")\n        return \"done\"",
    );
    assert!(denied(&both), "{:?}", both.outcome);
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    // `umem`/`qmem` alike (issue 32 #10: another program's untrusted
    // memory no longer taints every read of the tier): the note read back
    // is trusted, the page is not, in long-term memory and in the
    // episodic log.
    let stored = run(
        place,
        &sent,
        "let page = fetch_page(\"x\")\n        umem(page, \"ltm\", \"page\")\n        umem(page, \"episodic\", \"page\")\n        let note = read_note(\"y\")\n        umem(note, \"ltm\", \"note\")\n        umem(note, \"episodic\", \"note\")\n        return \"stored\"",
    );
    assert!(stored.outcome.is_ok(), "{:?}", stored.outcome);
    for tier in ["ltm", "episodic"] {
        let before = sent.load(Ordering::SeqCst);
        let note = run(
            place,
            &sent,
            &format!("let got = qmem(\"note\", \"{tier}\")\n        send(\"{{got}}\", \"n\")\n        return \"done\""),
        );
        assert!(note.outcome.is_ok(), "{tier}: {:?}", note.outcome);
        assert_eq!(sent.load(Ordering::SeqCst), before + 1, "{tier}");
        let page = run(
            place,
            &sent,
            &format!("let got = qmem(\"page\", \"{tier}\")\n        send(\"{{got}}\", \"n\")\n        return \"done\""),
        );
        assert!(denied(&page), "{tier}: {:?}", page.outcome);
        assert_eq!(sent.load(Ordering::SeqCst), before + 1, "{tier}");
    }
}

/// `inbox()` gives a message back with its body's labels (one run: the
/// message goes to the agent's own mailbox).
fn inbox(fresh: Fresh<'_>) {
    for (source, untrusted) in [("fetch_page", true), ("read_note", false)] {
        let place = &fresh();
        let sent = Arc::new(AtomicUsize::new(0));
        let r = run(
            place,
            &sent,
            &format!(
                "let doc = {source}(\"x\")\n        communicate(\"A\", doc, \"note\")\n        fence()\n        let got = inbox()\n        send(\"{{got}}\", \"n\")\n        return \"done\""
            ),
        );
        if untrusted {
            assert!(denied(&r), "{:?}", r.outcome);
            assert_eq!(sent.load(Ordering::SeqCst), 0);
        } else {
            assert!(r.outcome.is_ok(), "{:?}", r.outcome);
            assert_eq!(sent.load(Ordering::SeqCst), 1);
        }
    }
}

#[test]
fn stored_values_keep_their_labels_on_sqlite() {
    let d = tempfile::tempdir().unwrap();
    let n = AtomicUsize::new(0);
    let fresh = || {
        Place::Dir(
            d.path()
                .join(format!("mem{}", n.fetch_add(1, Ordering::SeqCst))),
        )
    };
    every_store(&fresh);
    inbox(&fresh);
    tool_calling(&fresh);
    per_value(&fresh());
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn stored_values_keep_their_labels_on_postgres() {
    let server = PgServer::start();
    let n = AtomicUsize::new(0);
    let fresh =
        || Place::Pg(server.database(&format!("labels{}", n.fetch_add(1, Ordering::SeqCst))));
    every_store(&fresh);
    inbox(&fresh);
    tool_calling(&fresh);
    per_value(&fresh());
}
