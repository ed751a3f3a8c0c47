//! The AAM's `thread_*` tools: what a run made on a thread sees of it
//! (`crate::store::thread`, docs/language.md "Threads").
//!
//! - `thread_history(limit?)`: the thread's earlier runs, oldest first,
//!   each `{run, input, answer, status}`; only runs made before this one,
//!   so a resumed run sees the same turns;
//! - `thread_state(key?)`: the thread's state (an object), or one key's
//!   value;
//! - `thread_set(key, value)`: sets one key (null removes it).
//!
//! They are tool calls, so the journal records each one: a resumed run
//! replays what it read and does not write again what it wrote (a
//! `thread_set` cut off before its result was recorded is run again: it
//! sets the same value, which is why it is declared idempotent). The
//! values keep their information-flow labels: a key's value keeps the
//! labels of what was written there, and an earlier run's answer carries
//! the sources its run read ([`crate::host::flow`]).

use super::AamHost;
use crate::host::{flow, HostError};
use crate::store::thread::{self, NewState};
use crate::store::Store;
use serde_json::{json, Value as Json};
use std::sync::Arc;

/// Turns `thread_history()` gives without a `limit`.
pub const DEFAULT_HISTORY: usize = 20;
/// Most turns one `thread_history` call gives.
pub const MAX_HISTORY: usize = 1000;

impl AamHost {
    /// Lets this run's `thread_*` tools find its thread in `store` (the
    /// store of its journal, where the run was linked to the thread).
    /// Later calls change nothing.
    pub fn bind_threads(&self, store: Arc<dyn Store>) {
        let _ = self.threads.set(store);
    }

    /// The store and `(thread, this run's place in it)`.
    fn my_thread(&self) -> Result<(&Arc<dyn Store>, String, i64), HostError> {
        let none = || {
            HostError::new(
                "thread.none",
                format!(
                    "run `{}` was not made on a thread: start it on one (`POST /v1/threads/{{id}}/runs`, `aisc run --thread ID`, or an A2A message with a contextId)",
                    self.run_id
                ),
            )
        };
        let store = self.threads.get().ok_or_else(none)?;
        let (thread, seq) = store
            .thread_of_run(&self.run_id)
            .map_err(store_error)?
            .ok_or_else(none)?;
        Ok((store, thread, seq))
    }

    pub(super) fn thread_op(&self, op: &str, args: &Json) -> Result<Json, HostError> {
        let (store, id, seq) = self.my_thread()?;
        match op {
            "history" => {
                let limit = match args.get("limit") {
                    None | Some(Json::Null) => DEFAULT_HISTORY,
                    Some(v) => v
                        .as_u64()
                        .map_or(DEFAULT_HISTORY, |n| {
                            usize::try_from(n).unwrap_or(MAX_HISTORY)
                        })
                        .min(MAX_HISTORY),
                };
                let turns =
                    thread::history(store.as_ref(), &id, Some(seq), limit).map_err(store_error)?;
                let mut out = Vec::with_capacity(turns.len());
                for t in turns {
                    flow::read(&t.labels);
                    out.push(json!({
                        "run": t.run,
                        "input": t.input,
                        "answer": t.answer,
                        "status": t.status,
                    }));
                }
                Ok(Json::Array(out))
            }
            "state" => {
                let info = store
                    .thread(&id)
                    .map_err(store_error)?
                    .ok_or_else(|| gone(&id))?;
                match args.get("key").and_then(Json::as_str) {
                    Some(k) => {
                        if let Some(l) = info.labels.get(k) {
                            flow::read(l);
                        }
                        Ok(info.state.get(k).cloned().unwrap_or(Json::Null))
                    }
                    None => {
                        for l in info.labels.values() {
                            flow::read(l);
                        }
                        Ok(Json::Object(info.state))
                    }
                }
            }
            "set" => {
                let key = args
                    .get("key")
                    .and_then(Json::as_str)
                    .filter(|k| !k.is_empty())
                    .ok_or_else(|| {
                        HostError::new("tool.invalid_args", "`thread_set` needs a `key`")
                    })?
                    .to_string();
                let value = args.get("value").cloned().unwrap_or(Json::Null);
                // With labels off nothing is known of the value's sources:
                // it keeps none, like a memory write then.
                let labels = if flow::active() {
                    flow::writing()
                } else {
                    Vec::new()
                };
                let after = store
                    .update_thread_state(&id, &mut |cur| {
                        let mut next = NewState {
                            state: cur.state.clone(),
                            labels: cur.labels.clone(),
                        };
                        if value.is_null() {
                            next.state.remove(&key);
                            next.labels.remove(&key);
                        } else {
                            next.state.insert(key.clone(), value.clone());
                            next.labels.insert(key.clone(), labels.clone());
                        }
                        thread::check_size(&next.state)?;
                        Ok(next)
                    })
                    .map_err(store_error)?
                    .ok_or_else(|| gone(&id))?;
                Ok(json!({"key": key, "version": after.version}))
            }
            other => Err(HostError::new(
                "tool.unknown",
                format!("no thread tool `{other}`"),
            )),
        }
    }
}

fn gone(id: &str) -> HostError {
    HostError::new(
        thread::NOT_FOUND,
        format!("the thread `{id}` of this run was deleted"),
    )
}

fn store_error(e: crate::store::JournalError) -> HostError {
    HostError::new(e.code, e.message)
}
