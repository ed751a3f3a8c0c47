//! `aisc run --detach`: a run queued in the shared store, under a run id
//! unique across a fleet, for `aisc worker` to take (docs/scale-out.md).

use super::args::RunArgs;
use super::load::Loaded;
use ais_vm::store::NewRun;
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

/// Where a queued run stands in the queue (`aisc run --detach`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct QueueArgs {
    /// With --detach: workers take queued runs of higher priority first
    /// (then the oldest); default 0, negative runs after the default.
    #[arg(
        long,
        default_value_t = 0,
        allow_negative_numbers = true,
        requires = "detach"
    )]
    pub priority: i32,
    /// With --detach: a key (a tenant, a user) shared by runs of which at
    /// most --key-limit run at once across the fleet.
    #[arg(long, value_name = "KEY", requires = "detach")]
    pub concurrency_key: Option<String>,
    /// At most this many runs of --concurrency-key at once.
    #[arg(long, value_name = "N", requires = "concurrency_key",
          value_parser = clap::value_parser!(i32).range(1..))]
    pub key_limit: Option<i32>,
    /// With --detach: a run that fails is queued again up to N more times
    /// (its journal kept: completed calls are replayed, not repeated);
    /// after the last attempt it is dead (`aisc runs --dead`).
    #[arg(long, value_name = "N", requires = "detach",
          value_parser = clap::value_parser!(i32).range(0..=100))]
    pub retries: Option<i32>,
    /// Wait before the first retry, doubled for each next one.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 1.0,
        requires = "retries"
    )]
    pub retry_backoff: f64,
    /// Retry only failures of these error classes (codes or their dotted
    /// prefixes, comma-separated: `llm,tool.timeout`); default: any failure
    /// but a cancel.
    #[arg(long, value_name = "CLASSES", requires = "retries")]
    pub retry_on: Option<String>,
}

impl QueueArgs {
    pub fn options(&self) -> ais_vm::store::priority::QueueOptions {
        ais_vm::store::priority::QueueOptions {
            priority: self.priority,
            key: self.concurrency_key.clone(),
            key_limit: self.key_limit,
            retry: self.retries.map(|n| ais_vm::store::retry::RetryPolicy {
                attempts: n + 1,
                backoff_ms: (self.retry_backoff.clamp(0.0, 3600.0) * 1000.0) as i64,
                on: self
                    .retry_on
                    .as_deref()
                    .unwrap_or_default()
                    .split(',')
                    .map(|c| c.trim().to_string())
                    .filter(|c| !c.is_empty())
                    .collect(),
            }),
        }
    }
}

/// `aisc run --detach`: stores the program (as an artifact) and its
/// arguments in the queue; prints the run id.
pub fn detach(
    file: &Path,
    loaded: &Loaded,
    args: &[(String, serde_json::Value)],
    run: &RunArgs,
) -> i32 {
    let Some(url) = run.memory.store_url() else {
        eprintln!("error: `--detach` queues the run in a shared store: give `--store postgres://...` (or set AIS_STORE)");
        return 2;
    };
    let store = match ais_vm::store::open(&url) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let bytes = match ais_ir::bytecode::encode(&loaded.program) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: cannot encode the program for the run queue: {e}");
            return 1;
        }
    };
    let id = queued_run_id();
    let name = loaded
        .source
        .as_ref()
        .map_or_else(|| file.display().to_string(), |(n, _)| n.clone());
    let args_text = serde_json::to_string(args).unwrap_or_else(|_| "[]".into());
    let queued = store.enqueue_with(
        &NewRun {
            id: &id,
            program: &name,
            artifact: &bytes,
            entry: run.entry.as_deref(),
            args: &args_text,
        },
        &run.queue.options(),
    );
    match queued {
        Ok(()) => {
            println!("{id}");
            if !run.quiet {
                eprintln!(
                    "queued run {id} in {}: `aisc worker --store URL` runs it; `aisc runs show {id} --store URL` shows it",
                    store.location()
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
