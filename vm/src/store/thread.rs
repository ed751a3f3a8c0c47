//! Threads: a conversation with an agent, as LangGraph Platform's threads
//! and the Agent Protocol have them: a row with metadata and a state (a
//! JSON object, versioned), and the runs made on it, in order. A run on a
//! thread sees the thread's earlier runs (their inputs and answers) and
//! its state through the AAM's `thread_*` tools (`aam/thread.rs`); the
//! state is read and edited over HTTP (`aisc serve`, docs/serve.md).
//!
//! Every state change bumps `version`, so an editor that read version N
//! can ask for its write to apply only if nobody wrote since (a 409
//! otherwise). Each key of the state keeps the information-flow labels of
//! the value written there (source names, `crate::ifc`), so a later run
//! reading it gets them back with the value.
//!
//! Both stores implement the same small set of statements: SQLite in
//! `sqlite/threads.rs` (the memory directory's `runs.db`), PostgreSQL in
//! `postgres/threads.rs` (migration 11).

use super::rows::JournalError;
use super::Store;
use serde_json::{Map, Value as Json};
use std::collections::BTreeMap;

/// The code of an unknown thread.
pub const NOT_FOUND: &str = "thread.not_found";
/// The code of a state write whose expected version is not the thread's.
pub const CONFLICT: &str = "thread.version_conflict";
/// The code of a thread id taken already.
pub const EXISTS: &str = "thread.exists";

/// Longest thread id accepted (ids are chosen by clients and A2A peers).
pub const MAX_ID_LEN: usize = 128;
/// The code of a state too large to keep.
pub const TOO_LARGE: &str = "thread.state_too_large";
/// Largest state kept, as JSON text: a thread's state is read whole by
/// every run on it.
pub const MAX_STATE_BYTES: usize = 1 << 20;

/// Refuses a state whose JSON text is over [`MAX_STATE_BYTES`].
pub fn check_size(state: &Map<String, Json>) -> Result<(), JournalError> {
    let n = Json::Object(state.clone()).to_string().len();
    if n > MAX_STATE_BYTES {
        return Err(JournalError::new(
            TOO_LARGE,
            format!("a thread's state is at most {MAX_STATE_BYTES} bytes of JSON; this one would be {n}"),
        ));
    }
    Ok(())
}

/// A thread as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadInfo {
    pub id: String,
    pub created_ms: i64,
    pub updated_ms: i64,
    /// A JSON object given at creation.
    pub metadata: Json,
    /// The state: a JSON object.
    pub state: Map<String, Json>,
    /// Per key of `state`: the source names its value came from.
    pub labels: BTreeMap<String, Vec<String>>,
    /// Bumped by every state change (0 at creation).
    pub version: i64,
    /// Runs made on the thread so far.
    pub runs: i64,
}

/// A state to store in place of the current one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewState {
    pub state: Map<String, Json>,
    pub labels: BTreeMap<String, Vec<String>>,
}

/// One run of a thread, with what its run row says (`None` fields while a
/// queued run has no row yet).
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadTurn {
    /// 1 for the thread's first run.
    pub seq: i64,
    pub run: String,
    /// `running`, `completed`, `failed`, `paused`, `queued`,
    /// `interrupted`; `None` before the run is journaled.
    pub status: Option<String>,
    /// The run's arguments as an object (`{name: value}`).
    pub input: Json,
    /// The entry flow's value once completed.
    pub answer: Option<Json>,
    pub error: Option<String>,
    pub started_ms: Option<i64>,
    pub ended_ms: Option<i64>,
    /// Source names of anything the run's journal recorded as read: an
    /// over-approximation of what its answer may carry (`crate::ifc`).
    pub labels: Vec<String>,
}

/// Is `id` acceptable as a thread id: 1 to [`MAX_ID_LEN`] characters of
/// `A-Za-z0-9._:-` (it appears in URLs and log lines)?
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._:-".contains(c))
}

pub(crate) fn not_found(id: &str) -> JournalError {
    JournalError::new(NOT_FOUND, format!("no thread `{id}`"))
}

pub(crate) fn no_threads(backend: &str) -> JournalError {
    JournalError::new(
        "store.unsupported",
        format!("the {backend} store keeps no threads"),
    )
}

/// `{key: [names]}` as stored.
pub(crate) fn labels_text(labels: &BTreeMap<String, Vec<String>>) -> String {
    serde_json::to_string(labels).unwrap_or_else(|_| "{}".into())
}

/// A stored labels column back (unreadable text: no labels known).
pub(crate) fn labels_of(text: &str) -> BTreeMap<String, Vec<String>> {
    serde_json::from_str(text).unwrap_or_default()
}

/// A stored JSON object column back (anything else: empty).
pub(crate) fn object_of(text: &str) -> Map<String, Json> {
    match serde_json::from_str(text) {
        Ok(Json::Object(m)) => m,
        _ => Map::new(),
    }
}

/// The history of `thread` from the store's rows: each linked run with its
/// row, oldest first; only runs before `before` (a seq) when given, and at
/// most the last `limit`.
pub fn history(
    store: &dyn Store,
    thread: &str,
    before: Option<i64>,
    limit: usize,
) -> Result<Vec<ThreadTurn>, JournalError> {
    let mut links = store.thread_runs(thread)?;
    if let Some(b) = before {
        links.retain(|(seq, _)| *seq < b);
    }
    let skip = links.len().saturating_sub(limit);
    let mut out = Vec::with_capacity(links.len() - skip);
    for (seq, run) in links.into_iter().skip(skip) {
        let row = store.run_row(&run)?;
        let mut labels: Vec<String> = Vec::new();
        if row.is_some() {
            for e in store.entries(&run)? {
                let names: Vec<String> = e
                    .labels
                    .as_deref()
                    .and_then(|l| serde_json::from_str(l).ok())
                    .unwrap_or_default();
                for n in names {
                    if !labels.contains(&n) {
                        labels.push(n);
                    }
                }
            }
        }
        labels.sort();
        let turn = match row {
            None => ThreadTurn {
                seq,
                run,
                status: None,
                input: Json::Object(Map::new()),
                answer: None,
                error: None,
                started_ms: None,
                ended_ms: None,
                labels,
            },
            Some(r) => ThreadTurn {
                seq,
                run,
                status: Some(r.info.status.name().to_string()),
                input: args_object(&r.args),
                answer: r
                    .result
                    .as_deref()
                    .map(|t| serde_json::from_str(t).unwrap_or(Json::String(t.to_string()))),
                error: r.info.error.clone(),
                started_ms: Some(r.info.started_ms),
                ended_ms: r.info.ended_ms,
                labels,
            },
        };
        out.push(turn);
    }
    Ok(out)
}

/// A run's journaled arguments (`[[name, value], ...]`) as an object.
pub fn args_object(args: &str) -> Json {
    let pairs: Vec<(String, Json)> = serde_json::from_str(args).unwrap_or_default();
    Json::Object(pairs.into_iter().collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_short_and_url_safe() {
        assert!(valid_id("t-1.a:b_c"));
        assert!(!valid_id(""));
        assert!(!valid_id("a/b"));
        assert!(!valid_id("a b"));
        assert!(!valid_id(&"x".repeat(MAX_ID_LEN + 1)));
    }

    #[test]
    fn stored_columns_read_back_and_bad_text_reads_as_empty() {
        let mut l = BTreeMap::new();
        l.insert("k".to_string(), vec!["web".to_string()]);
        assert_eq!(labels_of(&labels_text(&l)), l);
        assert!(labels_of("not json").is_empty());
        assert!(object_of("[1]").is_empty());
        assert_eq!(
            args_object(r#"[["q","hi"],["n",2]]"#),
            serde_json::json!({"q": "hi", "n": 2})
        );
    }
}
