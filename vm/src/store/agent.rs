//! The state agents keep beyond one op, behind one trait: long-term memory
//! (entries in namespaces, facts among them, with keyword search), the
//! episodic log, named work queues, mailboxes, goals and beliefs.
//!
//! Two implementations, one folder each: [`super::sqlite::agent`] (a
//! memory directory's `memory.db`, or an in-memory database; mailboxes,
//! goals and beliefs live as long as the host that opened it) and
//! [`super::postgres::ltm`] (one PostgreSQL database shared by a fleet:
//! everything outlives the run). The AAM (`crate::aam`) holds an
//! `Arc<dyn AgentStore>` and never asks which one it has.
//!
//! The row types are defined here, below the AAM, so the stores do not
//! depend on it (`crate::aam` re-exports them).

use crate::host::HostError;
use serde_json::Value as Json;

/// One stored long-term memory entry.
#[derive(Clone, Debug, PartialEq)]
pub struct LtmEntry {
    pub agent: String,
    pub key: String,
    pub value: Json,
    pub seq: i64,
    pub updated_ms: i64,
    /// The information-flow labels (source names) of the value, kept
    /// with it (`crate::host::flow`); empty for a value written with none.
    pub labels: Vec<String>,
}

/// Which episodic records a read returns (all given conditions hold).
#[derive(Clone, Copy, Debug, Default)]
pub struct Filter<'a> {
    pub agent: Option<&'a str>,
    pub run: Option<&'a str>,
    /// `Some(true)`: only `note` records (`umem(…, "episodic")`);
    /// `Some(false)`: everything but notes.
    pub notes: Option<bool>,
}

/// One received message.
#[derive(Clone, Debug, PartialEq)]
pub struct Received {
    pub from: String,
    pub protocol: String,
    pub body: Json,
    pub time_ms: u64,
    /// The information-flow labels (source names) of the body.
    pub labels: Vec<String>,
}

/// Labels as a column stores them (a JSON list of source names).
pub fn labels_text(labels: &[String]) -> String {
    serde_json::to_string(labels).unwrap_or_else(|_| "[]".into())
}

/// A labels column read back; a value that is not a list of names (a row
/// edited by hand) reads as no labels.
pub fn labels_of(text: &str) -> Vec<String> {
    serde_json::from_str(text).unwrap_or_default()
}

/// The text an entry is searched by.
pub fn text_of(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub use super::query::words;

/// A change to one agent's goal list (a JSON array of goal rows), applied
/// under the store's lock for that list.
pub type GoalsUpdate<'a> = &'a mut dyn FnMut(&mut Json) -> Result<(), HostError>;

/// Accepts (or refuses) a belief's new value given its current one.
pub type BeliefCheck<'a> = &'a dyn Fn(Option<&Json>) -> Result<(), HostError>;

/// Agent state. Every method is one short transaction (or one statement).
pub trait AgentStore: Send + Sync {
    /// `sqlite` or `postgres`, for messages.
    fn backend(&self) -> &'static str;

    // -- long-term memory ----------------------------------------------

    /// Inserts or replaces `(agent, ns, key)` with the value's `labels`;
    /// `seq`: keep this sequence number (an STM swap-out), else the next
    /// one of the namespace.
    fn put(
        &self,
        agent: &str,
        ns: &str,
        key: &str,
        value: &Json,
        seq: Option<i64>,
        labels: &[String],
    ) -> Result<(), HostError>;
    fn get(&self, agent: &str, ns: &str, key: &str) -> Result<Option<LtmEntry>, HostError>;
    /// Every entry of the namespace, oldest write first.
    fn all(&self, agent: &str, ns: &str) -> Result<Vec<LtmEntry>, HostError>;
    /// Entries whose key starts with `prefix`, oldest write first.
    fn prefix(&self, agent: &str, ns: &str, prefix: &str) -> Result<Vec<LtmEntry>, HostError>;
    /// Entries containing every word of `query`, oldest write first.
    fn search_all(&self, agent: &str, ns: &str, query: &str) -> Result<Vec<LtmEntry>, HostError>;
    /// Entries containing any word of `query`, best first, with scores
    /// (higher is better). `agent = None`: every agent.
    fn search_ranked(
        &self,
        agent: Option<&str>,
        ns: &str,
        query: &str,
        limit: usize,
    ) -> Result<Vec<(LtmEntry, f64)>, HostError>;
    fn remove(&self, agent: &str, ns: &str, key: &str) -> Result<bool, HostError>;
    /// Deletes a namespace (of one agent, or of all); returns the count.
    fn clear(&self, agent: Option<&str>, ns: &str) -> Result<usize, HostError>;
    /// Deletes every namespace starting with `prefix` (swap spaces).
    fn clear_ns_prefix(&self, prefix: &str) -> Result<usize, HostError>;
    /// Agents with entries in `ns`, and their counts.
    fn agents(&self, ns: &str) -> Result<Vec<(String, i64)>, HostError>;
    /// The schema version of the open database.
    fn schema_version(&self) -> Result<i64, HostError>;

    // -- work queues -----------------------------------------------------

    /// Appends `job` (labelled `labels`) to `queue`; `{queue, id,
    /// pending}` (jobs not claimed yet).
    fn enqueue(
        &self,
        queue: &str,
        job: &Json,
        by: &str,
        labels: &[String],
    ) -> Result<Json, HostError>;
    /// Takes the oldest job of `queue` that is unclaimed or whose claim's
    /// lease has run out, for `by`, leased for `lease_ms` (none: for good):
    /// `{queue, id, job}` and the job's labels, or `null` when there is none.
    fn claim(
        &self,
        queue: &str,
        by: &str,
        lease_ms: Option<u64>,
    ) -> Result<(Json, Vec<String>), HostError>;

    // -- the episodic log --------------------------------------------------

    /// Appends one record (a JSON object with `run`, `agent`, `op`, ...),
    /// durably.
    fn episodic_append(&self, record: &Json) -> Result<(), HostError>;
    /// The records matching `f`, oldest first.
    fn episodic_select(&self, f: &Filter<'_>) -> Result<Vec<Json>, HostError>;
    /// The run ids in the log, oldest first.
    fn episodic_runs(&self) -> Result<Vec<String>, HostError>;
    /// Deletes every record; returns how many there were.
    fn episodic_clear(&self) -> Result<usize, HostError>;

    // -- mailboxes, goals, beliefs ----------------------------------------

    /// Do mailboxes, goals and beliefs outlive the host that wrote them
    /// (a shared store)? Then a belief's initial value does not replace a
    /// stored one, and their labels are kept for later runs.
    fn agent_state_outlives_run(&self) -> bool;
    fn send(&self, to: &str, m: &Received) -> Result<(), HostError>;
    /// The messages of `agent`, oldest first; `take` removes them (each
    /// message is taken at most once).
    fn inbox(&self, agent: &str, take: bool) -> Result<Vec<Received>, HostError>;
    /// The agent's goal list as stored (a JSON array of rows).
    fn goals(&self, agent: &str) -> Result<Json, HostError>;
    /// Runs `f` on the agent's goal list under its lock; stores what `f`
    /// leaves when it succeeds.
    fn update_goals(&self, agent: &str, f: GoalsUpdate<'_>) -> Result<(), HostError>;
    fn belief(&self, agent: &str, name: &str) -> Result<Option<Json>, HostError>;
    /// Sets a belief after `check` accepted its current value, both under
    /// one lock.
    fn set_belief(
        &self,
        agent: &str,
        name: &str,
        value: &Json,
        check: BeliefCheck<'_>,
    ) -> Result<(), HostError>;
    /// Gives a belief its initial value: a store whose beliefs outlive the
    /// run keeps one already there; returns the value it has now.
    fn init_belief(
        &self,
        agent: &str,
        name: &str,
        value: &Json,
        check: BeliefCheck<'_>,
    ) -> Result<Json, HostError>;
}
