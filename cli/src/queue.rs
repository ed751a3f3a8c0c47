//! `aisc run --detach`: a run queued in the shared store, under a run id
//! unique across a fleet, for `aisc worker` to take (docs/scale-out.md).

use super::args::RunArgs;
use super::load::Loaded;
use ais_vm::store::schedule::{CronSchedule, NewSchedule};
use ais_vm::store::NewRun;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// A run id for a queued run: time, then random-enough hex (pid, clock,
/// counter hashed), unique across the machines of a fleet.
pub(crate) fn queued_run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    static N: AtomicU64 = AtomicU64::new(0);
    let ms = ais_stdlib::time::unix_ms();
    let t: String = ais_stdlib::time::rfc3339(ms)
        .chars()
        .take(19)
        .filter(char::is_ascii_digit)
        .collect();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    // RandomState is seeded per process: two machines differ too.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write(ais_vm::store::postgres::owner_id().as_bytes());
    h.write_u128(nanos);
    h.write_u64(N.fetch_add(1, Ordering::SeqCst));
    let (day, time) = t.split_at(8.min(t.len()));
    format!("{day}-{time}-q{:08x}", h.finish() & 0xffff_ffff)
}

/// What a queued run is made of: the store, and the program as an
/// artifact with its name and arguments.
struct Queued {
    store: std::sync::Arc<dyn ais_vm::store::Store>,
    name: String,
    artifact: Vec<u8>,
    args: String,
}

/// Opens the `--store` and encodes the program, for `flag`; the exit code
/// after printing why when either fails.
fn prepare(
    file: &Path,
    loaded: &Loaded,
    args: &[(String, serde_json::Value)],
    run: &RunArgs,
    flag: &str,
) -> Result<Queued, i32> {
    let store = run
        .memory
        .fleet_store(&format!("`{flag}` queues runs in a shared store"))?;
    let artifact = ais_ir::bytecode::encode(&loaded.program).map_err(|e| {
        eprintln!("error: cannot encode the program for the run queue: {e}");
        1
    })?;
    let name = loaded
        .source
        .as_ref()
        .map_or_else(|| file.display().to_string(), |(n, _)| n.clone());
    let args = serde_json::to_string(args).unwrap_or_else(|_| "[]".into());
    Ok(Queued {
        store,
        name,
        artifact,
        args,
    })
}

/// A schedule id: `s` then a random-enough hex suffix (as for run ids).
fn schedule_id() -> String {
    let run = queued_run_id();
    let suffix = run
        .rsplit('-')
        .next()
        .unwrap_or_default()
        .trim_start_matches('q');
    format!("s{suffix}")
}

/// `aisc run --detach`: stores the program (as an artifact) and its
/// arguments in the queue; prints the run id.
pub fn detach(
    file: &Path,
    loaded: &Loaded,
    args: &[(String, serde_json::Value)],
    run: &RunArgs,
) -> i32 {
    let hooks = match run.webhooks.hooks() {
        Ok(h) => h,
        Err(code) => return code,
    };
    let q = match prepare(file, loaded, args, run, "--detach") {
        Ok(q) => q,
        Err(code) => return code,
    };
    let id = queued_run_id();
    // Before the run is queued: a worker may end it at once.
    if let Err(code) = super::webhooks::subscribe(q.store.as_ref(), &id, &hooks) {
        return code;
    }
    let queued = q.store.enqueue_with(
        &NewRun {
            id: &id,
            program: &q.name,
            artifact: &q.artifact,
            entry: run.entry.as_deref(),
            args: &q.args,
        },
        &run.queue.options(),
    );
    match queued {
        Ok(()) => {
            println!("{id}");
            if !run.quiet {
                eprintln!(
                    "queued run {id} in {}: `aisc worker --store URL` runs it; `aisc runs show {id} --store URL` shows it",
                    q.store.location()
                );
            }
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

/// `aisc run --schedule CRON [--tz ZONE]`: stores a schedule whose run the
/// workers queue at every tick (`ais_vm::store::schedule`); prints its id.
pub fn schedule(
    file: &Path,
    loaded: &Loaded,
    args: &[(String, serde_json::Value)],
    run: &RunArgs,
    cron: &str,
) -> i32 {
    let parsed = match CronSchedule::parse(cron, &run.tz) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error[{e}");
            eprintln!("  = hint: `--schedule \"*/5 * * * *\"` is every five minutes; `--schedule \"0 9 * * MON-FRI\" --tz Europe/Oslo` is 09:00 on weekdays in Oslo");
            return 2;
        }
    };
    let first =
        match parsed.first_after(i64::try_from(ais_stdlib::time::unix_ms()).unwrap_or(i64::MAX)) {
            Ok(ms) => ms,
            Err(e) => {
                eprintln!("error[{e}");
                return 2;
            }
        };
    let hooks = match run.webhooks.hooks() {
        Ok(h) => h,
        Err(code) => return code,
    };
    let q = match prepare(file, loaded, args, run, "--schedule") {
        Ok(q) => q,
        Err(code) => return code,
    };
    let id = schedule_id();
    // Every tick's run inherits them (copied when it is queued).
    if let Err(code) = super::webhooks::subscribe(q.store.as_ref(), &id, &hooks) {
        return code;
    }
    let stored = q.store.add_schedule(&NewSchedule {
        id: &id,
        cron,
        tz: &run.tz,
        next_ms: first,
        run: NewRun {
            id: &id,
            program: &q.name,
            artifact: &q.artifact,
            entry: run.entry.as_deref(),
            args: &q.args,
        },
    });
    match stored {
        Ok(()) => {
            println!("{id}");
            if !run.quiet {
                eprintln!(
                    "schedule {id} in {}: `{cron}` ({}), first tick {}; `aisc worker --store URL` queues and runs each tick's run (`{id}-tTICK_MS`); `aisc schedules remove {id} --store URL` ends it",
                    q.store.location(),
                    run.tz,
                    rfc3339(first)
                );
            }
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

/// `aisc schedules [remove ID]`: lists the store's schedules, or deletes one.
pub fn schedules(remove: Option<&str>, memory: &super::aam::MemoryArgs, json: bool) -> i32 {
    let store = match memory.fleet_store("schedules live in a shared store") {
        Ok(s) => s,
        Err(code) => return code,
    };
    if let Some(id) = remove {
        return match store.remove_schedule(id) {
            Ok(true) => {
                eprintln!("removed schedule {id} (runs it already queued stay)");
                0
            }
            Ok(false) => {
                eprintln!(
                    "error: no schedule {id} in {}; `aisc schedules` lists them",
                    store.location()
                );
                1
            }
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        };
    }
    let list = match store.schedules() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let mut out = std::io::stdout().lock();
    for s in &list {
        let line = if json {
            serde_json::to_string(s).unwrap_or_default()
        } else {
            let next = s.next_ms.map_or_else(|| "never".to_string(), rfc3339);
            format!(
                "{}  {}  {}  {}  next {next}  fired {}  skipped {}",
                s.id, s.cron, s.tz, s.program, s.fired, s.skipped
            )
        };
        if writeln!(out, "{line}").is_err() {
            // The reader went away (`| head`): nothing more to say.
            return 0;
        }
    }
    0
}

/// Unix milliseconds as an RFC 3339 UTC time.
fn rfc3339(ms: i64) -> String {
    ais_stdlib::time::rfc3339(u64::try_from(ms).unwrap_or(0))
}
