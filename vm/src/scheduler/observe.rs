//! Live updates to the run's observer (`crate::observe`): each op event as
//! it is recorded, and the text of LLM calls as it streams in.

use super::Run;
use crate::frame::Frame;
use crate::llm::{TextEvent, TextSink};
use crate::observe::{OpStart, OpUpdate, RunObserver, TextUpdate};
use crate::telemetry::{OpEvent, Status, Track};
use std::sync::Arc;

impl<'r> Run<'r> {
    /// Hands a recorded event to the observer, if any: every event to
    /// [`RunObserver::op`], a call's or a failure's to
    /// [`RunObserver::call`] too; a failure also fails its flow call.
    pub(super) fn observe_op(&self, event: &OpEvent) {
        if let Some(o) = self.observer {
            let u = OpUpdate {
                event,
                flow: &self.flow_label(event.flow),
                agent: self.agent_name(event.agent),
            };
            o.op(&u);
            let call = match event.track {
                Track::Llm(_) | Track::Tool(_) => true,
                Track::Worker(_) => event.status == Status::Failed,
            };
            if call {
                o.call(&u);
                if crate::observe::flow_calls::is_failure(event) {
                    self.call_failed(event.invocation.id);
                }
            }
        }
    }

    /// Tells the observer, if any, that the call at `op` of `frame` starts.
    pub(super) fn observe_start(&self, frame: &Frame<'r>, op: u32, start_ns: u64) {
        let Some(o) = self.observer.filter(|o| o.wants_starts()) else {
            return;
        };
        let Some(instr) = frame.code.ops.get(op as usize) else {
            return;
        };
        o.start(&OpStart {
            frame: frame.id,
            flow_id: frame.flow_id(),
            flow: &self.flow_label(frame.flow_id()),
            region: frame.region,
            op,
            opcode: instr.opcode,
            agent: self.agent_name(frame.agent),
            start_ns,
        });
    }

    /// Where the text of the LLM call at `op` of `frame` goes (model turn
    /// `turn` of an exchange); `None` without an observer.
    pub(super) fn text_sink(
        &self,
        frame: &Frame<'r>,
        op: u32,
        turn: Option<u32>,
    ) -> Option<TextSink> {
        let observer = self.observer_arc.clone()?;
        let (id, flow, agent) = (
            frame.id,
            self.flow_label(frame.flow_id()),
            self.agent_name(frame.agent).to_string(),
        );
        Some(TextSink::new(move |event: &TextEvent| {
            observer.text(&TextUpdate {
                frame: id,
                flow: &flow,
                op,
                agent: &agent,
                turn,
                event,
            });
        }))
    }

    /// A flow's name by its telemetry id: the program's own, then the
    /// flows of the inner plans linked so far.
    pub(super) fn flow_label(&self, id: u32) -> String {
        let own = self.program.flows.len();
        let Some(k) = (id as usize).checked_sub(own) else {
            return self.program.flow_name(id);
        };
        let linked = crate::sync::lock(&self.linked);
        let label = linked
            .iter()
            .flat_map(super::LinkedPlan::flow_labels)
            .nth(k);
        label.unwrap_or_else(|| format!("flow#{id}"))
    }
}

/// The observer, shared with text sinks that outlive a borrow of the run.
pub(super) type SharedObserver = Arc<dyn RunObserver>;
