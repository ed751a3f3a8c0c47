//! `aisc runs --dead` (runs whose last attempt under a retry policy
//! failed) and `aisc runs requeue ID [--set NAME=VALUE]` (one put back in
//! the queue): the dead-letter view of a shared store (docs/scale-out.md).

use super::aam::MemoryArgs;
use ais_vm::store::Store;
use std::sync::Arc;

fn open(mem: &MemoryArgs) -> Result<Arc<dyn Store>, i32> {
    mem.fleet_store("dead runs are kept by a shared store's queue")
}

/// `aisc runs --dead`.
pub fn dead(mem: &MemoryArgs, json: bool) -> i32 {
    let store = match open(mem) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let list = match store.dead_runs() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    if json {
        for d in &list {
            println!(
                "{}",
                serde_json::json!({
                    "id": d.id, "program": d.program, "attempts": d.attempts,
                    "reason": d.reason, "ended_ms": d.ended_ms, "concurrency_key": d.key,
                })
            );
        }
        return 0;
    }
    if list.is_empty() {
        println!("no dead runs in {}", store.location());
        return 0;
    }
    println!("{:<28} {:>8}  program / reason", "run", "attempts");
    for d in &list {
        let key = d
            .key
            .as_deref()
            .map(|k| format!(" [key {k}]"))
            .unwrap_or_default();
        println!("{:<28} {:>8}  {}{key}", d.id, d.attempts, d.program);
        println!("{:>39}{}", "", d.reason.replace('\n', " "));
    }
    0
}

/// `aisc runs requeue ID [--set NAME=VALUE]...`.
pub fn requeue(mem: &MemoryArgs, id: &str, set: &[String]) -> i32 {
    let store = match open(mem) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let args = if set.is_empty() {
        None
    } else {
        match edited_args(store.as_ref(), id, set) {
            Ok(a) => Some(a),
            Err(e) => {
                eprintln!("error: {e}");
                return 2;
            }
        }
    };
    let new_id = super::queue::queued_run_id();
    match store.requeue(id, args.as_deref(), &new_id) {
        Ok(true) if args.is_some() => {
            println!("{new_id}");
            eprintln!("queued run {new_id}: run {id} with the edited inputs");
            0
        }
        Ok(true) => {
            println!("{id}");
            eprintln!("queued run {id} again: its journal is kept, completed calls are replayed");
            0
        }
        Ok(false) => {
            eprintln!("error: run `{id}` is not dead (see `aisc runs --dead`): nothing was queued");
            1
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

/// The stored arguments of run `id` with `set` applied, checked against
/// its program's entry flow; JSON text `[[name, value], ...]`.
fn edited_args(store: &dyn Store, id: &str, set: &[String]) -> Result<String, String> {
    let row = store
        .run_row(id)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no run `{id}` in {}", store.location()))?;
    let mut args: Vec<(String, serde_json::Value)> = serde_json::from_str(&row.args)
        .map_err(|e| format!("the stored arguments of `{id}`: {e}"))?;
    for (k, v) in super::args::parse_args(set).map_err(|e| e.to_string())? {
        match args.iter_mut().find(|(n, _)| *n == k) {
            Some(slot) => slot.1 = v,
            None => args.push((k, v)),
        }
    }
    let program = ais_ir::bytecode::decode(&row.artifact)
        .map_err(|e| format!("the program stored for `{id}`: {e}"))?;
    super::args::check_args(&program, row.info.entry.as_deref(), &args)
        .map_err(|e| e.to_string())?;
    serde_json::to_string(&args).map_err(|e| e.to_string())
}
