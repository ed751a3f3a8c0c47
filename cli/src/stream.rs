//! `aisc run --stream`: the text of LLM calls on stderr as the model writes
//! it. Calls run in parallel, so each line is prefixed with the op it comes
//! from (`[Agent.flow %3]`, `[Agent.flow %3 turn 2]`) and printed once it
//! is complete; a call's last partial line is printed when its op ends.

use ais_vm::llm::TextEvent;
use ais_vm::observe::{OpUpdate, RunObserver, TextUpdate};
use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;

/// Which call a piece of text belongs to: frame, op, model turn.
type CallKey = (u64, u32, Option<u32>);

/// Prints streamed text, line by line, to a writer (stderr).
pub struct TextPrinter<W: Write + Send> {
    state: Mutex<State<W>>,
}

struct State<W> {
    out: W,
    /// Each call's prefix and the part of its current line not yet printed.
    pending: HashMap<CallKey, (String, String)>,
}

impl<W: Write + Send> TextPrinter<W> {
    pub fn new(out: W) -> TextPrinter<W> {
        TextPrinter {
            state: Mutex::new(State {
                out,
                pending: HashMap::new(),
            }),
        }
    }

    /// The writer back, with nothing left unprinted.
    #[cfg(test)]
    fn into_inner(self) -> W {
        let mut st = self.state.into_inner().unwrap_or_else(|e| e.into_inner());
        let keys: Vec<CallKey> = st.pending.keys().copied().collect();
        for k in keys {
            st.flush(k);
        }
        st.out
    }
}

impl<W: Write> State<W> {
    /// Prints what is left of a call's line (a failed write to stderr is
    /// not worth stopping the run for).
    fn flush(&mut self, key: CallKey) {
        if let Some((prefix, rest)) = self.pending.remove(&key) {
            if !rest.is_empty() {
                let _ = writeln!(self.out, "{prefix} {rest}");
            }
        }
    }
}

impl<W: Write + Send> RunObserver for TextPrinter<W> {
    fn text(&self, u: &TextUpdate<'_>) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let key = (u.frame, u.op, u.turn);
        let State { out, pending } = &mut *st;
        let (prefix, line) = pending.entry(key).or_insert_with(|| {
            let turn = u.turn.map(|t| format!(" turn {t}")).unwrap_or_default();
            (format!("[{} %{}{turn}]", u.flow, u.op), String::new())
        });
        match u.event {
            TextEvent::Delta { text, .. } => {
                line.push_str(text);
                while let Some(nl) = line.find('\n') {
                    let _ = writeln!(out, "{prefix} {}", &line[..nl]);
                    line.drain(..=nl);
                }
            }
            TextEvent::Reset { attempt } => {
                line.clear();
                let _ = writeln!(
                    out,
                    "{prefix} (attempt {attempt} was cut off; its text is void, retrying)"
                );
            }
        }
    }

    fn op(&self, u: &OpUpdate<'_>) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.pending.is_empty() {
            return;
        }
        let keys: Vec<CallKey> = st
            .pending
            .keys()
            .filter(|(f, o, _)| *f == u.event.frame && *o == u.event.op)
            .copied()
            .collect();
        for k in keys {
            st.flush(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ais_vm::telemetry::{OpEvent, Status, Track};

    fn text(p: &TextPrinter<Vec<u8>>, op: u32, turn: Option<u32>, event: TextEvent) {
        p.text(&TextUpdate {
            frame: 0,
            flow: "A.main",
            op,
            agent: "A",
            turn,
            event: &event,
        });
    }

    fn delta(t: &str) -> TextEvent {
        TextEvent::Delta {
            attempt: 1,
            text: t.into(),
        }
    }

    #[test]
    fn interleaved_calls_print_whole_prefixed_lines() {
        let p = TextPrinter::new(Vec::new());
        text(&p, 1, None, delta("Hel"));
        text(&p, 2, Some(1), delta("Other\nsec"));
        text(&p, 1, None, delta("lo\nwor"));
        text(&p, 1, None, TextEvent::Reset { attempt: 1 });
        text(&p, 1, None, delta("again"));
        let ev = OpEvent {
            frame: 0,
            frame_key: 0,
            flow: 0,
            region: 0,
            op: 1,
            opcode: ais_ir::Opcode::Ask,
            agent: 0,
            invocation: Default::default(),
            track: Track::Llm(0),
            worker: 0,
            ready_ns: 0,
            start_ns: 0,
            end_ns: 0,
            status: Status::Ok,
            llm: None,
            detail: None,
        };
        p.op(&OpUpdate {
            event: &ev,
            flow: "A.main",
            agent: "A",
        });
        let out = String::from_utf8(p.into_inner()).expect("utf-8");
        assert_eq!(
            out,
            "[A.main %2 turn 1] Other\n[A.main %1] Hello\n[A.main %1] (attempt 1 was cut off; its text is void, retrying)\n[A.main %1] again\n[A.main %2 turn 1] sec\n"
        );
    }
}
