//! A run's live observer (`RunOptions::observer`): every recorded event
//! reaches it, and a streaming backend's text reaches it piece by piece,
//! before the op's own event, labelled with the op it belongs to.
#![allow(clippy::unwrap_used)]

mod ir_support;
use ir_support::program;

use ais_testkit::llm::{mock, options};
use ais_testkit::mock::MockReply;
use ais_testkit::MemoryHost;
use ais_vm::llm::http::{HttpBackend, Protocol};
use ais_vm::llm::{LlmBackend, TextEvent};
use ais_vm::observe::{Observer, OpUpdate, RunObserver, TextUpdate};
use ais_vm::RunOptions;
use serde_json::json;
use std::sync::{Arc, Mutex};

#[derive(Debug, PartialEq)]
enum Seen {
    Text {
        flow: String,
        op: u32,
        turn: Option<u32>,
        text: String,
    },
    Op {
        flow: String,
        agent: String,
        frame: u64,
        op: u32,
    },
}

#[derive(Default)]
struct Collect(Mutex<Vec<Seen>>);

impl RunObserver for Collect {
    fn op(&self, u: &OpUpdate<'_>) {
        self.0.lock().unwrap().push(Seen::Op {
            flow: u.flow.to_string(),
            agent: u.agent.to_string(),
            frame: u.event.frame,
            op: u.event.op,
        });
    }

    fn text(&self, u: &TextUpdate<'_>) {
        if let TextEvent::Delta { text, .. } = u.event {
            self.0.lock().unwrap().push(Seen::Text {
                flow: u.flow.to_string(),
                op: u.op,
                turn: u.turn,
                text: text.clone(),
            });
        }
    }
}

fn two_asks() -> ais_ir::bytecode::Program {
    program(
        r#"agent @A {
  flow @main(%q: str) -> str entry {
    %0 = ask %q : str
    %1 = ask %0 : str
    return %1
  }
}"#,
    )
}

fn joined(seen: &[Seen], op: u32) -> (String, usize) {
    let pieces: Vec<&str> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Text { op: o, text, .. } if *o == op => Some(text.as_str()),
            _ => None,
        })
        .collect();
    (pieces.concat(), pieces.len())
}

#[test]
fn streamed_text_and_every_event_reach_the_observer_in_order() {
    for protocol in [Protocol::OpenAi, Protocol::Anthropic, Protocol::Ollama] {
        let server = mock();
        server.push(MockReply::Content("alpha\nbeta and more".into()));
        server.push(MockReply::Content("gamma".into()));
        let mut o = options(&server, protocol);
        o.stream = true;
        let backend: Arc<dyn LlmBackend> = Arc::new(HttpBackend::new(o));
        let collect = Arc::new(Collect::default());
        let opts = RunOptions {
            args: vec![("q".into(), json!("start"))],
            record_events: false,
            observer: Some(Observer(collect.clone())),
            ..RunOptions::default()
        };
        let r = ais_vm::run(&two_asks(), &opts, backend, Arc::new(MemoryHost::new()));
        assert_eq!(r.outcome.unwrap(), json!("gamma"), "{protocol:?}");
        let seen = collect.0.lock().unwrap();

        // The text of each call, in the pieces it streamed in (how many
        // depends on how the reads fall; incremental delivery itself is
        // `llm_streaming.rs`'s business).
        let (first, _) = joined(&seen, 0);
        assert_eq!(first, "alpha\nbeta and more", "{protocol:?}");
        assert_eq!(joined(&seen, 1).0, "gamma", "{protocol:?}");
        assert!(seen.iter().all(|s| match s {
            Seen::Text { flow, turn, .. } => flow == "A.main" && turn.is_none(),
            Seen::Op { flow, agent, .. } => flow == "A.main" && agent == "A",
        }));

        // An op's text comes before its event.
        let at = |want: &dyn Fn(&Seen) -> bool| seen.iter().position(want).unwrap();
        let last_text_0 = seen
            .iter()
            .rposition(|s| matches!(s, Seen::Text { op: 0, .. }))
            .unwrap();
        assert!(last_text_0 < at(&|s| matches!(s, Seen::Op { op: 0, .. })));
        // (Op 0's event may come after op 1's first text: its value is
        // delivered, and op 1 started, before the event is handed over.)

        // Every event of the report was observed, once (events are kept
        // when an observer is set, even with record_events off).
        let observed: Vec<(u64, u32)> = seen
            .iter()
            .filter_map(|s| match s {
                Seen::Op { frame, op, .. } => Some((*frame, *op)),
                _ => None,
            })
            .collect();
        let mut reported: Vec<(u64, u32)> = r.events.iter().map(|e| (e.frame, e.op)).collect();
        let mut sorted = observed.clone();
        sorted.sort_unstable();
        reported.sort_unstable();
        assert_eq!(sorted, reported, "{protocol:?}");
        assert_eq!(observed.len(), 3, "{protocol:?}: {observed:?}");
    }
}
