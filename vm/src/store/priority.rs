//! Queued runs' priorities and concurrency keys: a worker takes the queued
//! run of highest priority, oldest first, among those whose key (a tenant,
//! a user) has fewer than its limit running (docs/scale-out.md). Kept in
//! the `runs` rows of the PostgreSQL store (schema version 7).

use std::collections::BTreeMap;

/// How a run waits in the queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueOptions {
    /// Higher first; 0 by default (negative: after the default).
    pub priority: i32,
    /// Runs sharing a key run at most `key_limit` at once across the fleet.
    pub key: Option<String>,
    /// `None`: the key only labels the run (no limit).
    pub key_limit: Option<i32>,
    /// What happens when the run fails (`None`: it stays failed).
    pub retry: Option<super::retry::RetryPolicy>,
}

impl QueueOptions {
    pub fn is_default(&self) -> bool {
        *self == QueueOptions::default()
    }
}

/// One concurrency key's runs now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyLoad {
    pub queued: i64,
    pub running: i64,
    /// The smallest limit its queued or running runs were given.
    pub limit: Option<i64>,
}

/// What `aisc runs` and `/metrics` show of the queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueView {
    /// Per run still queued or running: `(priority, key)`.
    pub runs: BTreeMap<String, (i32, Option<String>)>,
    pub keys: BTreeMap<String, KeyLoad>,
}
