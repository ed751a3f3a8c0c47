//! The host interface: every effect other than an LLM call.
//!
//! The VM calls a [`Host`] for tools (`inv`, `exec`), memory (`qmem`/`umem`
//! per tier), beliefs, `print` and `communicate`. Tool calls run on I/O
//! threads (they may block); the others run inline on scheduler workers and
//! must be quick. The ordering of effects is the program's business (ordering
//! tokens in the IR); a host only has to be thread-safe.
//!
//! The product's host is the AAM (`crate::aam::AamHost`); the in-memory
//! test double `MemoryHost` lives in the `ais-testkit` crate.

use crate::llm::CancelToken;
use ais_ir::Tier;
use serde_json::Value as Json;
use std::sync::Arc;

/// A failed host operation, surfaced to `try/catch` as `{code, message, payload}`.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct HostError {
    /// Stable, dotted code, e.g. `tool.unknown`, `belief.unknown`.
    pub code: String,
    pub message: String,
    pub payload: Json,
}

impl HostError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> HostError {
        HostError {
            code: code.into(),
            message: message.into(),
            payload: Json::Null,
        }
    }

    pub fn with_payload(mut self, payload: Json) -> HostError {
        self.payload = payload;
        self
    }
}

/// A message sent with `communicate`.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub from: String,
    pub to: String,
    pub body: Json,
    pub protocol: String,
}

/// Effects the VM delegates. `agent` is the name of the agent executing the op.
pub trait Host: Send + Sync {
    /// `inv(args) {tool = name}`. Blocking allowed (runs on an I/O thread).
    fn invoke_tool(
        &self,
        agent: &str,
        tool: &str,
        args: &Json,
        cancel: &CancelToken,
    ) -> Result<Json, HostError>;
    /// [`Host::invoke_tool`] for a call the run journals, with its
    /// idempotency key: the same in every attempt of the run (a retry of a
    /// call left in doubt carries it again), so a tool that deduplicates by
    /// it makes the retry safe. Hosts that pass keys on override this.
    fn invoke_tool_keyed(
        &self,
        agent: &str,
        tool: &str,
        args: &Json,
        cancel: &CancelToken,
        idempotency_key: Option<&str>,
    ) -> Result<Json, HostError> {
        let _ = idempotency_key;
        self.invoke_tool(agent, tool, args, cancel)
    }
    /// Would a call of `tool` by `agent` run without anyone being asked:
    /// allowed by the host's access policy and needing no confirmation?
    /// Speculation starts only such calls (`scheduler` `speculate`). A
    /// host with no access policy and no confirmations: yes (the default).
    fn may_call_unasked(&self, agent: &str, tool: &str) -> bool {
        let _ = (agent, tool);
        true
    }
    /// `exec(command, args...)`. Blocking allowed (runs on an I/O thread).
    fn exec(&self, agent: &str, args: &[Json], cancel: &CancelToken) -> Result<Json, HostError>;
    /// `qmem(query) {tier}`.
    fn mem_query(&self, agent: &str, tier: Tier, query: &Json) -> Result<Json, HostError>;
    /// `umem(value [, key]) {tier}`.
    fn mem_update(
        &self,
        agent: &str,
        tier: Tier,
        value: &Json,
        key: Option<&Json>,
    ) -> Result<(), HostError>;
    fn belief_get(&self, agent: &str, name: &str) -> Result<Json, HostError>;
    fn belief_set(&self, agent: &str, name: &str, value: &Json) -> Result<(), HostError>;
    /// Gives a belief the program's initial value at the start of a run.
    /// A host whose beliefs outlive runs (a shared store) keeps a value
    /// already there; the default sets it.
    fn belief_init(&self, agent: &str, name: &str, value: &Json) -> Result<(), HostError> {
        self.belief_set(agent, name, value)
    }
    /// Do beliefs outlive the run (a shared store)? Then a resumed run
    /// does not write a replayed belief update again: the store has it,
    /// and another run may have updated it since.
    fn beliefs_outlive_run(&self) -> bool {
        false
    }
    /// The sources (by name) of what earlier runs wrote into `tier`
    /// (`"ltm"`, `"episodic"` or `"belief"`) where it outlives a run, so a
    /// read in this run carries them (docs/security.md, "Labels across
    /// runs"). A host whose tier ends with the run has none (the default);
    /// so has a tier whose reads report the labels of each value they
    /// return ([`flow::read`]): its provenance is per value, not the union
    /// of everything ever written there.
    fn stored_labels(&self, _tier: &str) -> Result<Vec<String>, HostError> {
        Ok(Vec::new())
    }
    /// Records that data from the sources `names` is about to be written
    /// into `tier`; what [`Host::stored_labels`] answers later runs.
    fn store_labels(&self, _tier: &str, _names: &[String]) -> Result<(), HostError> {
        Ok(())
    }
    /// `print(values...)`: the values' text forms joined by spaces.
    fn print(&self, agent: &str, line: &str);
    /// `communicate(to, message, protocol)`.
    fn communicate(&self, message: Message) -> Result<(), HostError>;
    /// `pause(message)`: a person's answer, when the host can ask one now
    /// (an embedding with a person at hand, a test). `None` (the default):
    /// the run stops durably at the pause, and `aisc resume RUN --input
    /// VALUE` answers it later.
    fn pause(&self, _agent: &str, _message: &str) -> Option<Json> {
        None
    }
}

/// A tool implemented in process.
pub type ToolFn = Arc<dyn Fn(&Json) -> Result<Json, HostError> + Send + Sync>;

/// Information-flow labels across a host call, by source name
/// (docs/security.md, "Labels across runs"): the scheduler runs a tool
/// call inside [`flow::with`], giving the labels of the call's arguments;
/// a host that stores a value keeps [`flow::writing`] with it, and one
/// that reads stored values back reports their labels with
/// [`flow::read`], which the scheduler joins into the result's label.
/// Per thread, like the call's idempotency key: a tool call runs on one
/// I/O thread from start to end. Outside [`flow::with`] (labels off, a
/// host used directly) a write keeps no labels and a read reports none.
pub mod flow {
    use std::cell::RefCell;

    struct Call {
        writing: Vec<String>,
        read: Vec<String>,
    }

    std::thread_local! {
        static CALL: RefCell<Vec<Call>> = const { RefCell::new(Vec::new()) };
    }

    /// Runs `f` (one host call on this thread) with `writing` as the
    /// labels of what it may store; returns its result and the labels of
    /// what it read back.
    pub fn with<T>(writing: Vec<String>, f: impl FnOnce() -> T) -> (T, Vec<String>) {
        CALL.with(|c| {
            c.borrow_mut().push(Call {
                writing,
                read: Vec::new(),
            })
        });
        let r = f();
        let read = CALL
            .with(|c| c.borrow_mut().pop())
            .map(|c| c.read)
            .unwrap_or_default();
        (r, read)
    }

    /// Is a labelled call running on this thread (labels on)? A host
    /// that stores values marks them as labelled only then, so a value
    /// stored with labels off is not taken as carrying none.
    pub fn active() -> bool {
        CALL.with(|c| !c.borrow().is_empty())
    }

    /// The labels of what the current call writes.
    pub fn writing() -> Vec<String> {
        CALL.with(|c| c.borrow().last().map(|c| c.writing.clone()))
            .unwrap_or_default()
    }

    /// Notes that the current call read values labelled `names`.
    pub fn read(names: &[String]) {
        CALL.with(|c| {
            if let Some(call) = c.borrow_mut().last_mut() {
                for n in names {
                    if !call.read.contains(n) {
                        call.read.push(n.clone());
                    }
                }
            }
        });
    }
}
