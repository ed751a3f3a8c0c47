//! [`PgLtm`] as the agent store of a fleet: every piece of agent state in
//! the shared database (`ltm.rs`: entries, search, work queues;
//! `state.rs`: mailboxes, goals, beliefs, the episodic log).

use super::ltm::PgLtm;
use crate::host::HostError;
use crate::store::agent::{AgentStore, BeliefCheck, Filter, GoalsUpdate, LtmEntry, Received};
use serde_json::Value as Json;

impl AgentStore for PgLtm {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn put(
        &self,
        agent: &str,
        ns: &str,
        key: &str,
        value: &Json,
        seq: Option<i64>,
        labels: &[String],
    ) -> Result<(), HostError> {
        PgLtm::put(self, agent, ns, key, value, seq, labels)
    }

    fn get(&self, agent: &str, ns: &str, key: &str) -> Result<Option<LtmEntry>, HostError> {
        PgLtm::get(self, agent, ns, key)
    }

    fn all(&self, agent: &str, ns: &str) -> Result<Vec<LtmEntry>, HostError> {
        PgLtm::all(self, agent, ns)
    }

    fn prefix(&self, agent: &str, ns: &str, prefix: &str) -> Result<Vec<LtmEntry>, HostError> {
        PgLtm::prefix(self, agent, ns, prefix)
    }

    fn search_all(&self, agent: &str, ns: &str, query: &str) -> Result<Vec<LtmEntry>, HostError> {
        PgLtm::search_all(self, agent, ns, query)
    }

    fn search_ranked(
        &self,
        agent: Option<&str>,
        ns: &str,
        query: &str,
        limit: usize,
    ) -> Result<Vec<(LtmEntry, f64)>, HostError> {
        PgLtm::search_ranked(self, agent, ns, query, limit)
    }

    fn remove(&self, agent: &str, ns: &str, key: &str) -> Result<bool, HostError> {
        PgLtm::remove(self, agent, ns, key)
    }

    fn clear(&self, agent: Option<&str>, ns: &str) -> Result<usize, HostError> {
        PgLtm::clear(self, agent, ns)
    }

    fn clear_ns_prefix(&self, prefix: &str) -> Result<usize, HostError> {
        PgLtm::clear_ns_prefix(self, prefix)
    }

    fn agents(&self, ns: &str) -> Result<Vec<(String, i64)>, HostError> {
        PgLtm::agents(self, ns)
    }

    fn schema_version(&self) -> Result<i64, HostError> {
        PgLtm::schema_version(self)
    }

    fn enqueue(
        &self,
        queue: &str,
        job: &Json,
        by: &str,
        labels: &[String],
    ) -> Result<Json, HostError> {
        PgLtm::enqueue(self, queue, job, by, labels)
    }

    fn claim(
        &self,
        queue: &str,
        by: &str,
        lease_ms: Option<u64>,
    ) -> Result<(Json, Vec<String>), HostError> {
        PgLtm::claim(self, queue, by, lease_ms)
    }

    fn episodic_append(&self, record: &Json) -> Result<(), HostError> {
        PgLtm::episodic_append(self, record)
    }

    fn episodic_select(&self, f: &Filter<'_>) -> Result<Vec<Json>, HostError> {
        PgLtm::episodic_select(self, f)
    }

    fn episodic_runs(&self) -> Result<Vec<String>, HostError> {
        PgLtm::episodic_runs(self)
    }

    fn episodic_clear(&self) -> Result<usize, HostError> {
        PgLtm::episodic_clear(self)
    }

    fn agent_state_outlives_run(&self) -> bool {
        true
    }

    fn send(&self, to: &str, m: &Received) -> Result<(), HostError> {
        PgLtm::send(self, to, m)
    }

    fn inbox(&self, agent: &str, take: bool) -> Result<Vec<Received>, HostError> {
        PgLtm::inbox(self, agent, take)
    }

    fn goals(&self, agent: &str) -> Result<Json, HostError> {
        PgLtm::goals(self, agent)
    }

    fn update_goals(&self, agent: &str, f: GoalsUpdate<'_>) -> Result<(), HostError> {
        PgLtm::update_goals(self, agent, f)
    }

    fn belief(&self, agent: &str, name: &str) -> Result<Option<Json>, HostError> {
        PgLtm::belief(self, agent, name)
    }

    fn set_belief(
        &self,
        agent: &str,
        name: &str,
        value: &Json,
        check: BeliefCheck<'_>,
    ) -> Result<(), HostError> {
        PgLtm::set_belief(self, agent, name, value, check)
    }

    fn init_belief(
        &self,
        agent: &str,
        name: &str,
        value: &Json,
        _check: BeliefCheck<'_>,
    ) -> Result<Json, HostError> {
        // An earlier run's value stays.
        PgLtm::init_belief(self, agent, name, value)
    }
}
