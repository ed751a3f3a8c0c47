//! Threads (`ais_vm::store::thread`): created, read, their state edited,
//! and runs started on them. A run on a thread is linked to it in the
//! store before it is queued, so its `thread_*` tools find the thread
//! wherever it runs (here, or on a worker of the fleet).
//!
//! Runs on one thread take turns across the fleet: the store numbers a
//! thread's runs as they are linked, and each waits, queued, until every
//! run linked before it has ended, wherever it ran (LangGraph's
//! `multitask_strategy: "enqueue"`, the default); with `"reject"` a new
//! run is refused (409 `thread.busy`) while another is queued or running.

use super::Registry;
use crate::engine::{BudgetSpec, Finished, Prepared};
use crate::error::ApiError;
use crate::run::RunEntry;
use ais_vm::store::thread::{self, NewState, ThreadInfo, ThreadTurn};
use ais_vm::store::{JournalError, Store};
use serde_json::{json, Map, Value as Json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What a new run does when its thread has one queued or running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Multitask {
    /// Waits its turn (runs in the order accepted).
    #[default]
    Enqueue,
    /// Refused with 409 `thread.busy`.
    Reject,
}

impl Multitask {
    pub fn parse(s: &str) -> Option<Multitask> {
        match s {
            "enqueue" => Some(Multitask::Enqueue),
            "reject" => Some(Multitask::Reject),
            _ => None,
        }
    }
}

/// The runs of each thread accepted by this server and not ended (for
/// `busy` and `DELETE`); an entry is removed when its count drops to 0,
/// so the map holds only threads with runs in flight here.
#[derive(Default, Clone)]
pub(super) struct Gates(Arc<Mutex<HashMap<String, usize>>>);

impl Gates {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one more run of `thread` until the guard is dropped.
    fn hold(&self, thread: &str) -> Held {
        *self.lock().entry(thread.to_string()).or_default() += 1;
        Held {
            gates: self.clone(),
            thread: thread.to_string(),
        }
    }

    /// Runs of `thread` accepted here and not ended.
    fn outstanding(&self, thread: &str) -> usize {
        self.lock().get(thread).copied().unwrap_or(0)
    }
}

/// One run of a thread counted in [`Gates`].
struct Held {
    gates: Gates,
    thread: String,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut g = self.gates.lock();
        if let Some(n) = g.get_mut(&self.thread) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                g.remove(&self.thread);
            }
        }
    }
}

/// A run of a thread. Its turn is the store's to say: it may start when
/// no run linked to the thread before it (on this server, another, or a
/// worker of the fleet) is queued or running. Until then the executor
/// parks it, still `queued` (`executor.rs`), and asks again.
struct OnThread {
    inner: Box<dyn Prepared>,
    store: Arc<dyn Store>,
    _held: Held,
}

impl Prepared for OnThread {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn execute(self: Box<Self>) -> Finished {
        self.inner.execute()
    }

    fn discard(self: Box<Self>, reason: &str) {
        self.inner.discard(reason);
    }

    fn waits_for(&self) -> Option<String> {
        match self.store.thread_waits_for(self.inner.id()) {
            Ok(w) => w,
            // Asked again at the next look; starting out of turn would
            // let two runs write the thread at once.
            Err(e) => Some(format!("(the store did not answer: {})", e.code)),
        }
    }
}

fn store_error(e: JournalError) -> ApiError {
    match e.code {
        thread::NOT_FOUND => ApiError::not_found(
            "thread.not_found",
            e.message,
            "`POST /v1/threads` creates a thread",
        ),
        thread::CONFLICT => ApiError::conflict(
            "thread.version_conflict",
            e.message,
            "read the thread's state again (`GET /v1/threads/{id}/state`) and send its `version`",
        ),
        thread::EXISTS => ApiError::conflict(
            "thread.exists",
            e.message,
            "choose another id, or leave `thread_id` out for a new one",
        ),
        thread::TOO_LARGE => ApiError::new(
            413,
            "thread.state_too_large",
            e.message,
            "keep large values in memory (`umem`) and their keys in the state",
        ),
        _ => ApiError::internal(e.to_string()),
    }
}

fn unknown_thread(id: &str) -> ApiError {
    store_error(JournalError {
        code: thread::NOT_FOUND,
        message: format!("no thread `{id}`"),
    })
}

/// A thread as the API shows it.
pub fn thread_json(t: &ThreadInfo) -> Json {
    json!({
        "thread_id": t.id,
        "created_ms": t.created_ms,
        "updated_ms": t.updated_ms,
        "metadata": t.metadata,
        "version": t.version,
        "runs": t.runs,
    })
}

/// A thread's state as the API shows it: the values, the version, and
/// per key the sources its value came from.
pub fn state_json(t: &ThreadInfo) -> Json {
    json!({
        "thread_id": t.id,
        "values": t.state,
        "version": t.version,
        "labels": t.labels,
    })
}

fn turn_json(t: &ThreadTurn, live: Option<Json>) -> Json {
    let mut j = json!({
        "seq": t.seq,
        "run_id": t.run,
        "input": t.input,
        "status": t.status,
        "started_ms": t.started_ms,
        "ended_ms": t.ended_ms,
        "labels": t.labels,
    });
    if let Some(a) = &t.answer {
        j["result"] = a.clone();
    }
    if let Some(e) = &t.error {
        j["error"] = e.clone().into();
    }
    // This server's view is fresher than the journal's while it runs.
    if let Some(live) = live {
        j["status"] = live["status"].clone();
        if let Some(r) = live.get("result") {
            j["result"] = r.clone();
        }
        if let Some(e) = live.get("error") {
            j["error"] = e.clone();
        }
    }
    j
}

/// A new thread id: `thr-` and 16 hex digits of time and a counter.
pub fn new_thread_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let t = u64::try_from(crate::now_ms()).unwrap_or(0);
    format!(
        "thr-{:012x}{:04x}",
        t & 0xffff_ffff_ffff,
        (n ^ u64::from(std::process::id())) & 0xffff
    )
}

impl Registry {
    /// The store threads live in: the journal's (`--store`, else the
    /// memory directory's `runs.db`).
    pub(crate) fn thread_store(&self) -> Result<Arc<dyn Store>, ApiError> {
        if let Some(s) = self.engine.journal_store() {
            return Ok(s);
        }
        match self.engine.journal_dir() {
            Some(dir) => Ok(ais_vm::store::sqlite::SqliteStore::shared(&dir)
                .map_err(|e| ApiError::internal(e.to_string()))?),
            None => Err(ApiError::conflict(
                "thread.no_store",
                "threads are kept in the run journal, and `--memory :memory:` keeps none",
                "serve with a memory directory (the default) or `--store`",
            )),
        }
    }

    /// `POST /v1/threads`: a new thread (`id` chosen by the client, or
    /// made up).
    pub fn create_thread(&self, id: Option<&str>, metadata: &Json) -> Result<Json, ApiError> {
        let id = match id {
            Some(i) if !thread::valid_id(i) => {
                return Err(ApiError::bad_request(
                    "thread.bad_id",
                    format!("`{i}` is not a thread id"),
                    "1 to 128 characters of A-Z a-z 0-9 . _ : -",
                ))
            }
            Some(i) => i.to_string(),
            None => new_thread_id(),
        };
        let store = self.thread_store()?;
        let t = store.create_thread(&id, metadata).map_err(store_error)?;
        Ok(thread_json(&t))
    }

    fn thread_info(&self, id: &str) -> Result<(Arc<dyn Store>, ThreadInfo), ApiError> {
        let store = self.thread_store()?;
        let t = store
            .thread(id)
            .map_err(store_error)?
            .ok_or_else(|| unknown_thread(id))?;
        Ok((store, t))
    }

    /// `GET /v1/threads/{id}`.
    pub fn thread(&self, id: &str) -> Result<Json, ApiError> {
        let (_, t) = self.thread_info(id)?;
        let mut j = thread_json(&t);
        j["values"] = Json::Object(t.state.clone());
        j["status"] = if self.busy(id)? { "busy" } else { "idle" }.into();
        Ok(j)
    }

    /// `GET /v1/threads`: the newest threads.
    pub fn threads(&self, limit: usize) -> Result<Json, ApiError> {
        let store = self.thread_store()?;
        let list = store.threads(limit).map_err(store_error)?;
        Ok(json!({"threads": list.iter().map(thread_json).collect::<Vec<_>>()}))
    }

    /// `GET /v1/threads/{id}/state`.
    pub fn thread_state(&self, id: &str) -> Result<Json, ApiError> {
        Ok(state_json(&self.thread_info(id)?.1))
    }

    /// `PUT` (`merge` false: the state becomes `values`) or `PATCH`
    /// (`merge`: each key of `values` set, a null removing it) of a
    /// thread's state; with `version`, only if the state is still at that
    /// version (409 otherwise). Values written over HTTP carry no labels.
    pub fn edit_thread_state(
        &self,
        id: &str,
        values: &Map<String, Json>,
        version: Option<i64>,
        merge: bool,
    ) -> Result<Json, ApiError> {
        let store = self.thread_store()?;
        let t = store
            .update_thread_state(id, &mut |cur| {
                if let Some(v) = version {
                    if v != cur.version {
                        return Err(JournalError {
                            code: thread::CONFLICT,
                            message: format!(
                                "thread `{id}` is at version {}, not {v}: someone changed it since",
                                cur.version
                            ),
                        });
                    }
                }
                let mut next = if merge {
                    NewState {
                        state: cur.state.clone(),
                        labels: cur.labels.clone(),
                    }
                } else {
                    NewState::default()
                };
                for (k, v) in values {
                    next.labels.remove(k);
                    if v.is_null() && merge {
                        next.state.remove(k);
                    } else {
                        next.state.insert(k.clone(), v.clone());
                    }
                }
                thread::check_size(&next.state)?;
                Ok(next)
            })
            .map_err(store_error)?
            .ok_or_else(|| unknown_thread(id))?;
        Ok(state_json(&t))
    }

    /// `DELETE /v1/threads/{id}`: the thread and its links (its runs stay
    /// in the journal). Refused while one of its runs is queued or running.
    pub fn delete_thread(&self, id: &str) -> Result<Json, ApiError> {
        let store = self.thread_store()?;
        if self.gates.outstanding(id) > 0 {
            return Err(busy(id));
        }
        if !store.delete_thread(id).map_err(store_error)? {
            return Err(unknown_thread(id));
        }
        Ok(json!({"thread_id": id, "deleted": true}))
    }

    /// `GET /v1/threads/{id}/history`: the thread's runs, oldest first,
    /// with their inputs and results (the last `limit`).
    pub fn thread_history(&self, id: &str, limit: usize) -> Result<Json, ApiError> {
        let (store, _) = self.thread_info(id)?;
        let turns = thread::history(store.as_ref(), id, None, limit).map_err(store_error)?;
        let list: Vec<Json> = turns
            .iter()
            .map(|t| turn_json(t, self.get(&t.run).map(|e| e.to_json())))
            .collect();
        Ok(json!({"thread_id": id, "runs": list}))
    }

    /// Is a run of thread `id` queued or running (here, or, by the
    /// journal, elsewhere)?
    fn busy(&self, id: &str) -> Result<bool, ApiError> {
        if self.gates.outstanding(id) > 0 {
            return Ok(true);
        }
        let store = self.thread_store()?;
        let turns = thread::history(store.as_ref(), id, None, 16).map_err(store_error)?;
        Ok(turns
            .iter()
            .any(|t| matches!(t.status.as_deref(), Some("queued" | "running"))))
    }

    /// `POST /v1/threads/{id}/runs` (and an A2A message with a context
    /// id, `create`: the thread is made on first use): a run like `POST
    /// /v1/runs`'s, made on the thread.
    #[allow(clippy::too_many_arguments)]
    pub fn start_thread_run(
        &self,
        thread_id: &str,
        program: &str,
        entry: Option<&str>,
        args: &Json,
        budget: BudgetSpec,
        queue: ais_vm::store::priority::QueueOptions,
        webhooks: Vec<ais_vm::store::webhook::Hook>,
        multitask: Multitask,
        create: bool,
    ) -> Result<Arc<RunEntry>, ApiError> {
        if !thread::valid_id(thread_id) {
            return Err(ApiError::bad_request(
                "thread.bad_id",
                format!("`{thread_id}` is not a thread id"),
                "1 to 128 characters of A-Z a-z 0-9 . _ : -",
            ));
        }
        let store = self.thread_store()?;
        let exists = store.thread(thread_id).map_err(store_error)?.is_some();
        if !exists && !create {
            return Err(unknown_thread(thread_id));
        }
        if multitask == Multitask::Reject && exists && self.busy(thread_id)? {
            return Err(busy(thread_id));
        }
        self.start_run_with(
            program,
            entry,
            args,
            budget,
            queue,
            webhooks,
            |mut prepared, _cancel| {
                // Linked before it is queued: wherever it runs, its tools find
                // the thread, and the store's order is its turn.
                let held = self.gates.hold(thread_id);
                if let Err(e) = prepared.join_thread(store.as_ref(), thread_id, create) {
                    prepared.discard("its thread could not be linked");
                    return Err(store_error(e));
                }
                Ok(Box::new(OnThread {
                    inner: prepared,
                    store: store.clone(),
                    _held: held,
                }))
            },
        )
    }
}

fn busy(id: &str) -> ApiError {
    ApiError::conflict(
        "thread.busy",
        format!("a run of thread `{id}` is queued or running"),
        "wait for it to end, or send `\"multitask_strategy\": \"enqueue\"` to run after it",
    )
}
