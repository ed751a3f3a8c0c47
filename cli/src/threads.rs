//! `aisc threads [show ID]`: the threads of the run journal (the memory
//! directory's `runs.db`, or `--store`), as `aisc serve`'s
//! `/v1/threads` shows them (docs/serve.md, "Threads").

use super::aam::MemoryArgs;
use ais_vm::store::thread::{self, ThreadInfo};
use ais_vm::store::Store;
use serde_json::json;
use std::io::Write;
use std::sync::Arc;

/// Threads listed, newest first.
const LIST: usize = 1000;
/// Runs shown by `show`, the last ones.
const SHOWN_RUNS: usize = 100;

fn open(memory: &MemoryArgs) -> Result<Arc<dyn Store>, String> {
    if let Some(url) = memory.store_url() {
        return MemoryArgs::shared_store(&url).map_err(|e| e.to_string());
    }
    let dir = ais_vm::journal::dir_of(&memory.storage())
        .ok_or("threads are kept in the run journal, and `--memory :memory:` keeps none")?;
    ais_vm::store::sqlite::SqliteStore::shared(&dir)
        .map(|s| s as Arc<dyn Store>)
        .map_err(|e| e.to_string())
}

fn summary(t: &ThreadInfo) -> serde_json::Value {
    json!({"thread_id": t.id, "created_ms": t.created_ms, "updated_ms": t.updated_ms,
           "metadata": t.metadata, "version": t.version, "runs": t.runs})
}

pub fn threads(show: Option<&str>, memory: &MemoryArgs, json: bool) -> i32 {
    match run(show, memory, json) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

fn run(show: Option<&str>, memory: &MemoryArgs, json: bool) -> Result<i32, String> {
    let store = open(memory)?;
    let mut out = std::io::stdout().lock();
    let Some(id) = show else {
        for t in store.threads(LIST).map_err(|e| e.to_string())? {
            let line = if json {
                summary(&t).to_string()
            } else {
                format!(
                    "{}  runs {}  version {}  updated {}",
                    t.id,
                    t.runs,
                    t.version,
                    ais_stdlib::time::rfc3339(u64::try_from(t.updated_ms).unwrap_or(0))
                )
            };
            let _ = writeln!(out, "{line}");
        }
        return Ok(0);
    };
    let Some(t) = store.thread(id).map_err(|e| e.to_string())? else {
        eprintln!(
            "error: no thread {id} in {}; `aisc threads` lists them",
            store.location()
        );
        return Ok(1);
    };
    let turns = thread::history(store.as_ref(), id, None, SHOWN_RUNS).map_err(|e| e.to_string())?;
    if json {
        let mut j = summary(&t);
        j["values"] = serde_json::Value::Object(t.state.clone());
        j["labels"] = json!(t.labels);
        j["history"] = turns
            .iter()
            .map(|r| {
                json!({"seq": r.seq, "run_id": r.run, "status": r.status, "input": r.input,
                       "result": r.answer, "error": r.error, "labels": r.labels})
            })
            .collect();
        let _ = writeln!(out, "{j}");
        return Ok(0);
    }
    let _ = writeln!(
        out,
        "thread {}  runs {}  version {}",
        t.id, t.runs, t.version
    );
    let _ = writeln!(out, "state {}", serde_json::Value::Object(t.state.clone()));
    for r in &turns {
        let _ = writeln!(
            out,
            "  {}. {}  {}  input {}  -> {}",
            r.seq,
            r.run,
            r.status.as_deref().unwrap_or("not started"),
            r.input,
            r.answer
                .as_ref()
                .map_or_else(|| r.error.clone().unwrap_or_default(), |a| a.to_string())
        );
    }
    Ok(0)
}
