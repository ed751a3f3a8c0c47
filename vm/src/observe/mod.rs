//! Watching a run live: each op's event as it is recorded, and each LLM
//! call's text as the model streams it. For whoever shows a run while it
//! lasts (`aisc run --stream` prints the text, a server sends both to its
//! clients); the run's report still holds every event at the end.
//!
//! The VM calls the observer on the thread that finished the op or, for
//! text, on the thread reading the reply (for the event transport, the
//! one I/O thread every call shares): an observer must return quickly and
//! never wait for the run.
//!
//! `otlp` is one such observer: it exports a run as OpenTelemetry spans.
//! It asks for the run's flow calls ([`FlowCall`]), which the scheduler
//! records from its frames as they start and complete, and for the events
//! of calls only ([`RunObserver::call`]): nothing per op of a graph of
//! cheap ops beyond what any observer costs.

pub(crate) mod flow_calls;
pub mod otlp;

pub use flow_calls::{fold_flow_calls, FlowCall};

use crate::llm::TextEvent;
use crate::telemetry::OpEvent;
use std::sync::Arc;

/// An op finished: its event (as the report will hold it) and names for
/// its flow and agent.
#[derive(Debug)]
pub struct OpUpdate<'a> {
    pub event: &'a OpEvent,
    /// `Agent.flow`, or for a flow of an inner plan, the flow that linked
    /// it and its `solve` op.
    pub flow: &'a str,
    pub agent: &'a str,
}

/// A piece of an LLM call's reply as it arrives.
#[derive(Debug)]
pub struct TextUpdate<'a> {
    /// The frame, flow and op the call belongs to (as in [`OpEvent`]).
    pub frame: u64,
    pub flow: &'a str,
    pub op: u32,
    pub agent: &'a str,
    /// The model turn (tool-calling exchanges and planner rounds, from 1);
    /// `None` for a call of one turn.
    pub turn: Option<u32>,
    /// More text, or: forget the text of an attempt that was cut off (a
    /// retry follows).
    pub event: &'a TextEvent,
}

/// An LLM or tool call starts (after its wait for a lane): the op that
/// will later be reported by [`RunObserver::op`]. Pure ops report no start
/// (they end as they begin).
#[derive(Debug)]
pub struct OpStart<'a> {
    pub frame: u64,
    /// The flow's telemetry id, and its name as in [`OpUpdate::flow`].
    pub flow_id: u32,
    pub flow: &'a str,
    pub region: u32,
    pub op: u32,
    pub opcode: ais_ir::Opcode,
    pub agent: &'a str,
    /// Run-clock nanoseconds, as the op event's `start_ns`.
    pub start_ns: u64,
}

/// Receives a run's updates. Every method defaults to ignoring them.
pub trait RunObserver: Send + Sync {
    /// Whether [`RunObserver::start`] is wanted: naming the op's flow costs
    /// an allocation per call, paid only for an observer that asks.
    fn wants_starts(&self) -> bool {
        false
    }
    fn start(&self, _update: &OpStart<'_>) {}
    fn op(&self, _update: &OpUpdate<'_>) {}
    /// An LLM or tool call finished (cancelled or not), or an op failed
    /// (a pause among them): called after [`RunObserver::op`] with the same
    /// update, for an observer that only wants these and would otherwise
    /// look at every op to find them.
    fn call(&self, _update: &OpUpdate<'_>) {}
    fn text(&self, _update: &TextUpdate<'_>) {}
    /// Whether [`RunObserver::flow_calls`] is wanted: the scheduler then
    /// records each flow call's extent as its frame starts and completes.
    fn wants_flow_calls(&self) -> bool {
        false
    }
    /// The run's flow calls by id, once, as the run ends (before its
    /// report is returned), on the report's clock.
    fn flow_calls(&self, _calls: &[FlowCall]) {}
}

/// The observer a run reports to ([`crate::RunOptions::observer`]).
#[derive(Clone)]
pub struct Observer(pub Arc<dyn RunObserver>);

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}
