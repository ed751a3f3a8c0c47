//! The program's own state: memory tiers, beliefs, printed lines and sent
//! messages, per agent. Written from docs/runtime.md ("Host", "Memory").
//!
//! The oracle keeps this state itself (instead of in a `MemoryHost`) so a
//! failing `try` body can be undone by restoring a clone: a `try` body is
//! all-or-nothing for these effects. Tools and LLM calls are outside the
//! world and are never undone.

use crate::value::text;
use ais_vm::store::MemQuery;
use serde_json::Value as Json;
use std::collections::BTreeMap;

/// The three memory tiers, by canonical name.
pub const TIERS: [&str; 3] = ["stm", "ltm", "episodic"];

#[derive(Clone, Debug, Default, PartialEq)]
pub struct World {
    /// `(agent, tier)` → ordered `(key, value)` entries.
    pub memory: BTreeMap<(String, String), Vec<(String, Json)>>,
    /// `(agent, belief)` → value.
    pub beliefs: BTreeMap<(String, String), Json>,
    pub printed: Vec<String>,
    /// `(from, to, body, protocol)` in send order.
    pub outbox: Vec<(String, String, Json, String)>,
}

impl World {
    /// `umem(value, tier [, key])`: a key replaces its entry (STM/LTM) or
    /// appends; no key appends as `#n`; episodic only appends.
    pub fn mem_update(&mut self, agent: &str, tier: &str, value: Json, key: Option<&Json>) {
        let store = self
            .memory
            .entry((agent.to_string(), tier.to_string()))
            .or_default();
        let key = key.map_or_else(|| format!("#{}", store.len()), text);
        if tier != "episodic" {
            if let Some(entry) = store.iter_mut().find(|(k, _)| *k == key) {
                entry.1 = value;
                return;
            }
        }
        store.push((key, value));
    }

    /// `qmem(query, tier [, limit])`, matched as the VM's memory matches
    /// it ([`MemQuery`]: a key returns its value; `"*"` or `""` every value;
    /// `p*` keys starting with `p`; else every word of the query). `limit`
    /// keeps the most recent hits.
    pub fn mem_query(&self, agent: &str, tier: &str, query: &Json, limit: Option<usize>) -> Json {
        let empty = Vec::new();
        let store = self
            .memory
            .get(&(agent.to_string(), tier.to_string()))
            .unwrap_or(&empty);
        let q = text(query);
        let query = MemQuery::parse(&q);
        if let Some(key) = query.exact_key() {
            if let Some((_, v)) = store.iter().rev().find(|(k, _)| k == key) {
                return v.clone();
            }
        }
        let mut hits: Vec<Json> = store
            .iter()
            .filter(|(k, v)| query.matches(k, v))
            .map(|(_, v)| v.clone())
            .collect();
        if let Some(n) = limit {
            let drop = hits.len().saturating_sub(n);
            hits.drain(..drop);
        }
        Json::Array(hits)
    }
}
