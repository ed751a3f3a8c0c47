//! `aisc run --detach` (queue a run in the store), `aisc worker` (take
//! queued runs and run them, holding a renewed lease; take over runs whose
//! worker died) and `aisc store migrate|status`. See docs/scale-out.md.

use super::aam::MemoryArgs;
use super::args::RunArgs;
use super::journal::{idempotent_tools, BudgetArgs};
use super::load::Loaded;
use super::run::{RunEdge, RunSetup, SetupError};
use super::BackendArgs;
use ais_serve::fair::FairShare;
use ais_vm::journal::{self, Journal};
use ais_vm::store::{Claim, Store};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod probe;
mod schedules;

/// The default lease of a worker's run (seconds): short, so a killed
/// worker's runs are taken over within a few seconds (its lease plus one
/// `--poll-ms`); renewed every third of it (docs/scale-out.md).
pub const DEFAULT_LEASE_SECS: f64 = 3.0;

/// Options of `aisc worker`.
#[derive(clap::Args, Debug, Clone)]
pub struct WorkerArgs {
    /// Runs executed at once by this worker process.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub concurrency: u64,
    /// Lease of a taken run, renewed every third of it; a run whose lease
    /// ran out is taken over by another worker. Short by default, so a
    /// killed worker's runs go on elsewhere within a few seconds; longer
    /// rides out longer store outages without takeovers.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_LEASE_SECS)]
    pub lease_secs: f64,
    /// Serve `/health`, `/ready` and `/metrics` (Prometheus text) on this
    /// address, e.g. `127.0.0.1:9100` (port 0: any free port; the address
    /// is printed on stderr).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// How often an idle worker looks for queued runs.
    #[arg(long, value_name = "MS", default_value_t = 200)]
    pub poll_ms: u64,
    /// Exit once the queue is empty and this worker's runs are done.
    #[arg(long)]
    pub until_idle: bool,
    /// On SIGTERM (or SIGINT) the worker takes no more runs and lets its
    /// runs go on this long; the runs still going then are handed back to
    /// the queue, journal intact, and it exits 0.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub grace_secs: f64,
    /// Scheduler threads per run.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Allow tools marked destructive without asking (else they are refused).
    #[arg(long)]
    pub yes: bool,
    /// No line per run on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub budget: BudgetArgs,
    #[command(flatten)]
    pub memory: MemoryArgs,
}

/// What one run's execution ended as, for the worker's log line.
#[derive(Debug)]
enum Ended {
    Done(&'static str),
    /// The run failed with `reason`; `recorded`: the store shows it failed.
    Failed {
        reason: String,
        recorded: Recorded,
        /// What its retry policy made of it, once recorded.
        after: ais_vm::store::retry::AfterFailure,
    },
    /// Another worker took the run over: nothing was committed after that.
    Lost,
    Error(String),
}

/// Whether a failed run's failure reached the store, and if not, what
/// became of the run (issue 32, defect 9: a worker logged `failed` for runs
/// whose failure was never recorded and that another worker then
/// completed).
#[derive(Debug)]
enum Recorded {
    Yes,
    /// Not recorded; given back to the queue under this claim's fence.
    HandedBack,
    /// Not recorded, and not handed back (`why`): it waits for its lease to
    /// run out, then another worker takes it over.
    LeftToLease(String),
}

impl Ended {
    /// The worker's log line for run `id` (`how`: " (taken over)" or "").
    fn line(&self, id: &str, how: &str) -> String {
        match self {
            Ended::Done(status) => format!("run {id}{how}: {status}"),
            Ended::Failed {
                reason,
                recorded,
                after,
            } => {
                use ais_vm::store::retry::AfterFailure;
                let fate = match recorded {
                    Recorded::Yes => match after {
                        AfterFailure::Stays => "recorded as failed".to_string(),
                        AfterFailure::Requeued { attempt, of, in_ms } => format!(
                            "recorded as failed; queued again for attempt {attempt} of {of} in {:.1}s",
                            *in_ms as f64 / 1000.0
                        ),
                        AfterFailure::Dead { attempts } => format!(
                            "recorded as failed; dead after {attempts} attempt(s): `aisc runs --dead` lists it"
                        ),
                    },
                    Recorded::HandedBack => {
                        "the failure could not be recorded; handed back to the queue".to_string()
                    }
                    Recorded::LeftToLease(why) => format!(
                        "the failure could not be recorded and the run was not handed back ({why}); \
                         another worker takes it over when its lease runs out"
                    ),
                };
                format!("run {id}{how}: failed: {reason} ({fate})")
            }
            Ended::Lost => {
                format!("run {id}{how}: lease lost (taken over by another worker, or the run was cancelled); stopped without committing")
            }
            Ended::Error(e) => format!("run {id}{how}: error: {e}"),
        }
    }
}

/// `aisc worker`: takes queued runs until stopped (or idle, with
/// `--until-idle`). Exit code 0, or 1 when the store cannot be used.
pub fn worker(w: &WorkerArgs, backend: &BackendArgs) -> i32 {
    let store = match w
        .memory
        .fleet_store("a worker takes runs from a shared store")
    {
        Ok(s) => s,
        Err(code) => return code,
    };
    // The URL the store was opened from, for the fleet's limits.
    let url = w.memory.store_url().unwrap_or_default();
    let mut setup = match RunSetup::load(backend) {
        Ok(s) => s,
        Err(SetupError::Config(e)) => {
            eprintln!("error: {}", e.message());
            return 2;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let limiter = match limit_fleet(&mut setup, &url) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    // The calls of this worker's runs share the backend least attained
    // service first, as in `aisc serve`; under fleet limits each call
    // carries its run's service to the store, which lets the fleet's least
    // served run go next (docs/scale-out.md).
    let fair = FairShare::gates(&*setup.llm.backend)
        .then(|| FairShare::new(setup.llm.backend.concurrency()));
    let lease_ms = (w.lease_secs.max(0.05) * 1000.0) as i64;
    let listener = match w.listen.as_deref().map(probe::bind) {
        Some(Ok(l)) => Some(l),
        Some(Err(e)) => {
            eprintln!(
                "error: --listen {}: {e}",
                w.listen.as_deref().unwrap_or_default()
            );
            return 2;
        }
        None => None,
    };
    if let Some(addr) = listener.as_ref().and_then(|l| l.local_addr().ok()) {
        // Always printed (also with --quiet): a port 0 is found here.
        eprintln!("worker probes on http://{addr} (/health, /ready, /metrics)");
    }
    let me = ais_vm::store::postgres::owner_id();
    if !w.quiet {
        eprintln!(
            "worker {me}: {} runs at once from {}, lease {:.1}s",
            w.concurrency,
            store.location(),
            w.lease_secs
        );
    }
    let failed = AtomicBool::new(false);
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        // The first signal stops the worker gently; a second one while it
        // stops ends it at once (exit 1; the leases then run out).
        let registered = signal_hook::flag::register_conditional_shutdown(sig, 1, stop.clone())
            .and_then(|_| signal_hook::flag::register(sig, stop.clone()));
        if let Err(e) = registered {
            eprintln!("error: cannot handle signal {sig}: {e}");
            return 1;
        }
    }
    // The runs executing now, with the fence each was taken under.
    let running: std::sync::Mutex<Vec<Claim>> = std::sync::Mutex::default();
    let live = std::sync::atomic::AtomicUsize::new(usize::try_from(w.concurrency).unwrap_or(1));
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        if let Some(l) = &listener {
            let p = probe::Probe {
                store: store.as_ref(),
                running: &running,
                live: &live,
                stop: &stop,
                done: &done,
                slots: w.concurrency,
                lease_ms,
                limiter: limiter.as_deref(),
            };
            s.spawn(move || probe::serve(l, &p));
        }
        {
            let (store, stop, done) = (&store, &stop, &done);
            s.spawn(move || schedules::fire_loop(store.as_ref(), stop, done, w.quiet));
        }
        {
            // Webhook deliveries of the store (any run's, not only this
            // worker's): one last look once the worker is done.
            let (store, done) = (store.clone(), &done);
            s.spawn(move || super::webhooks::deliver_loop(store, done, w.quiet));
        }
        for slot in 0..w.concurrency {
            let (store, setup, failed, me, fair) = (&store, &setup, &failed, &me, &fair);
            let (stop, running, live) = (&stop, &running, &live);
            s.spawn(move || {
                let owner = format!("{me}/{slot}");
                let _done = OnDrop(|| {
                    live.fetch_sub(1, Ordering::SeqCst);
                });
                loop {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let claim = match store.claim(&owner, lease_ms) {
                        Ok(c) => c,
                        Err(e) => {
                            eprintln!("error: {e}");
                            failed.store(true, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(w.poll_ms.max(50)));
                            if w.until_idle {
                                return;
                            }
                            continue;
                        }
                    };
                    let Some(claim) = claim else {
                        if w.until_idle {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(w.poll_ms));
                        continue;
                    };
                    lock(running).push(claim.clone());
                    let ended = execute(store, setup, fair.as_ref(), w, &claim, lease_ms);
                    lock(running).retain(|c| c.id != claim.id);
                    if matches!(ended, Ended::Lost) {
                        let _ = store.note_worker(&owner, 1, 0);
                    }
                    if let Ended::Failed {
                        recorded: Recorded::HandedBack,
                        ..
                    } = ended
                    {
                        let _ = store.note_worker(&owner, 0, 1);
                    }
                    if !w.quiet {
                        let how = if claim.takeover { " (taken over)" } else { "" };
                        eprintln!("{}", ended.line(&claim.id, how));
                    }
                }
            });
        }
        // Wait for a stop signal (or, with --until-idle, for the slots).
        while live.load(Ordering::SeqCst) > 0 && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if stop.load(Ordering::SeqCst) {
            hand_back(store.as_ref(), &me, w, &running, &live);
        }
        done.store(true, Ordering::SeqCst);
    });
    i32::from(failed.load(Ordering::SeqCst))
}

/// The one hook of fleet-wide limits: the run backend of this process
/// (every run it executes) takes a slot from the store `store` before each
/// call when its configuration sets `fleet_concurrency`,
/// `requests_per_minute` or `tokens_per_minute` (docs/scale-out.md).
pub(crate) fn limit_fleet(
    setup: &mut RunSetup,
    store: &str,
) -> Result<Option<Arc<dyn ais_vm::store::limits::Limiter>>, journal::JournalError> {
    let Some(limits) = setup
        .settings
        .config
        .backend(&setup.settings.backend)
        .map(|b| b.fleet)
        .filter(|l| l.any())
    else {
        return Ok(None);
    };
    let limiter = ais_vm::store::limits::shared(store)?;
    setup.llm.backend =
        ais_vm::store::limits::limited(setup.llm.backend.clone(), limiter.clone(), limits);
    Ok(Some(limiter))
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` when dropped (also when a slot's thread unwinds).
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// After a stop signal: lets the runs in execution go on for the grace
/// period; gives the ones still going back to the queue and exits 0. A
/// given-back run's fence moves on, so whatever its thread still tries to
/// write is refused; the next worker replays its journal (no completed call
/// repeated; the calls in flight now are asked again).
fn hand_back(
    store: &dyn Store,
    me: &str,
    w: &WorkerArgs,
    running: &std::sync::Mutex<Vec<Claim>>,
    live: &std::sync::atomic::AtomicUsize,
) {
    let n = lock(running).len();
    if !w.quiet {
        eprintln!(
            "worker {me}: stopping: no more runs taken; {n} running, given {:.1}s to end",
            w.grace_secs
        );
    }
    let deadline = std::time::Instant::now() + Duration::from_secs_f64(w.grace_secs.max(0.0));
    while live.load(Ordering::SeqCst) > 0
        && !lock(running).is_empty()
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<Claim> = lock(running).clone();
    let mut given = 0;
    for c in &left {
        match store.release(&c.id, c.fence) {
            Ok(true) => {
                given += 1;
                if !w.quiet {
                    eprintln!("run {}: handed back to the queue", c.id);
                }
            }
            // It ended (or was taken over) meanwhile.
            Ok(false) => {}
            Err(e) => eprintln!(
                "error: run {}: cannot hand it back ({e}); it waits for its lease to run out",
                c.id
            ),
        }
    }
    if given > 0 {
        let _ = store.note_worker(&format!("{me}/0"), 0, given);
    }
    if !w.quiet {
        eprintln!("worker {me}: stopped ({given} run(s) handed back)");
    }
    // The threads of handed-back runs may still be inside a call: they
    // must not outlive this (they could only be fenced anyway).
    std::process::exit(0);
}

/// Renews the lease of a run every third of it while the run lasts;
/// notes when the lease was lost (the fence moved on).
struct Heartbeat {
    stop: Arc<AtomicBool>,
    lost: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    fn start(store: Arc<dyn Store>, claim: &Claim, lease_ms: i64) -> Heartbeat {
        let stop = Arc::new(AtomicBool::new(false));
        let lost = Arc::new(AtomicBool::new(false));
        let (s, l, id, fence) = (stop.clone(), lost.clone(), claim.id.clone(), claim.fence);
        let period = Duration::from_millis(u64::try_from(lease_ms / 3).unwrap_or(1000).max(10));
        let thread = std::thread::spawn(move || {
            let tick = Duration::from_millis(10).min(period);
            let mut waited = Duration::ZERO;
            while !s.load(Ordering::SeqCst) {
                std::thread::sleep(tick);
                waited += tick;
                if waited < period {
                    continue;
                }
                waited = Duration::ZERO;
                match store.renew(&id, fence, lease_ms) {
                    Ok(true) => {}
                    Ok(false) => {
                        l.store(true, Ordering::SeqCst);
                        return;
                    }
                    // A store hiccup: try again next period; the lease
                    // has slack for two misses.
                    Err(_) => {}
                }
            }
        });
        Heartbeat {
            stop,
            lost,
            thread: Some(thread),
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn execute(
    store: &Arc<dyn Store>,
    setup: &RunSetup,
    fair: Option<&Arc<FairShare>>,
    w: &WorkerArgs,
    claim: &Claim,
    lease_ms: i64,
) -> Ended {
    let heartbeat = Heartbeat::start(store.clone(), claim, lease_ms);
    // Before the run can end: its state change finds them (again on a
    // takeover: the same rows).
    super::webhooks::subscribe_configured(store.as_ref(), &claim.id);
    // A run that cannot start because its stored program or arguments are
    // corrupt is failed under this claim's fence, not passed on; a store
    // error leaves it to the lease (another worker tries again).
    let give_up = |e: journal::JournalError| {
        let msg = e.to_string();
        if e.code == "journal.corrupt" {
            let _ = store.finish(&claim.id, claim.fence, "failed", None, Some(&msg));
        }
        Ended::Error(msg)
    };
    let stored = match journal::load_run_in(&**store, &claim.id) {
        Ok(s) => s,
        Err(e) => return give_up(e),
    };
    let mut j = match Journal::claimed(store.clone(), claim) {
        Ok(j) => j,
        Err(e) => return give_up(e),
    };
    j.set_idempotent_tools(idempotent_tools());
    let j = Arc::new(j);
    let program = match ais_ir::bytecode::decode(&stored.artifact) {
        Ok(p) => p,
        Err(e) => {
            let msg = format!(
                "the program stored for run `{}` is not a valid artifact: {e}",
                claim.id
            );
            let _ = j.finish(Err(&msg));
            return Ended::Error(msg);
        }
    };
    let loaded = Loaded {
        program,
        source: None,
    };
    let run = RunArgs {
        args: Vec::new(),
        entry: stored.info.entry.clone(),
        workers: Some(w.workers.max(1)),
        policy: "fifo".into(),
        concurrency: None,
        no_speculate: false,
        events: None,
        trace: None,
        report_json: None,
        emit_plans: None,
        stream: false,
        quiet: true,
        memory: w.memory.clone(),
        yes: w.yes,
        budget: w.budget.clone(),
        telemetry: Default::default(),
        detach: false,
        thread: None,
        schedule: None,
        tz: "UTC".into(),

        queue: Default::default(),
        webhooks: Default::default(),
    };
    let edge = RunEdge {
        console: None,
        confirm: if w.yes {
            ais_vm::aam::Confirm::Yes
        } else {
            ais_vm::aam::Confirm::Deny
        },
        progress: None,
        observer: None,
        unshown: false,
    };
    let prepared =
        match super::run::prepare_run(setup, &loaded, stored.args, &run, edge, Some(j.clone())) {
            Ok(p) => p,
            Err(e) => {
                let msg = e.to_string();
                let _ = j.finish(Err(&msg));
                return Ended::Error(msg);
            }
        };
    let backend = match fair {
        Some(f) => {
            let credit = loaded
                .program
                .entry_sure_llm_calls(stored.info.entry.as_deref());
            f.for_run(prepared.backend, credit)
        }
        None => prepared.backend,
    };
    let report = ais_vm::run(&loaded.program, &prepared.options, backend, prepared.host);
    super::run::keep_latency_history();
    // This attempt's telemetry, whatever became of the run.
    if let Some(k) = &prepared.telemetry {
        k.finish(&loaded.program, &report);
    }
    let lost = heartbeat.lost.load(Ordering::SeqCst) || j.is_fenced();
    drop(heartbeat);
    if lost {
        return Ended::Lost;
    }
    match &report.outcome {
        Ok(_) => Ended::Done("completed"),
        Err(ais_vm::RunError::OpFailed { code, .. }) if code == ais_vm::exec::PAUSED => {
            Ended::Done("paused")
        }
        Err(e) => {
            let class = match e {
                ais_vm::RunError::OpFailed { code, .. } => code.to_string(),
                e => e.code().to_string(),
            };
            failed(store.as_ref(), claim, e.to_string(), &class)
        }
    }
}

/// A run that failed: whether the store recorded it (the VM records the
/// failure at the end of the run, but a store error there is not the run's
/// error), and if not, hands the run back so another worker runs it again
/// from its journal instead of waiting for the lease.
fn failed(store: &dyn Store, claim: &Claim, reason: String, class: &str) -> Ended {
    let mut after = ais_vm::store::retry::AfterFailure::Stays;
    let recorded = match store.run_state(&claim.id) {
        Ok(Some(state)) if state.status == "failed" => {
            // Its retry policy: queued again, or dead (fenced: once).
            match store.after_failure(&claim.id, claim.fence, class) {
                Ok(a) => after = a,
                Err(e) => eprintln!(
                    "error: run {}: its retry policy could not be applied ({e}); it stays failed",
                    claim.id
                ),
            }
            Recorded::Yes
        }
        state => match store.release(&claim.id, claim.fence) {
            Ok(true) => Recorded::HandedBack,
            Ok(false) => Recorded::LeftToLease("another worker has it now".into()),
            Err(e) => Recorded::LeftToLease(match state {
                Err(s) => format!("the store did not answer: {s}; {e}"),
                _ => e.to_string(),
            }),
        },
    };
    Ended::Failed {
        reason,
        recorded,
        after,
    }
}

/// `aisc store migrate|status`.
#[derive(clap::Subcommand, Debug)]
pub enum StoreAction {
    /// Apply the schema migrations this aisc knows (a newer schema is refused).
    Migrate,
    /// Schema version, runs by status, queue depth and lease takeovers.
    Status {
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
}

pub fn store(action: &StoreAction, mem: &MemoryArgs) -> i32 {
    let store = match mem.run_store() {
        Ok(Some(s)) => s,
        Ok(None) => {
            eprintln!("error: `--memory :memory:` keeps no store");
            return 2;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    match action {
        StoreAction::Migrate => match store.migrate() {
            Ok((from, to)) if from == to => {
                println!(
                    "{} store {}: schema version {to}, up to date",
                    store.backend(),
                    store.location()
                );
                0
            }
            Ok((from, to)) => {
                println!(
                    "{} store {}: schema version {from} -> {to}",
                    store.backend(),
                    store.location()
                );
                0
            }
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        },
        StoreAction::Status { json } => match store.status() {
            Ok(s) => {
                if *json {
                    let runs: serde_json::Map<String, serde_json::Value> = s
                        .runs
                        .iter()
                        .map(|(k, n)| (k.clone(), (*n).into()))
                        .collect();
                    println!(
                        "{}",
                        serde_json::json!({
                            "backend": s.backend, "location": s.location,
                            "schema_version": s.schema_version, "known_version": s.known_version,
                            "runs": runs, "queue_depth": s.queue_depth, "takeovers": s.takeovers,
                            "fenced": s.workers.iter().map(|w| w.fenced).sum::<i64>(),
                            "handed_back": s.workers.iter().map(|w| w.handed_back).sum::<i64>(),
                            "workers": s.workers.iter().map(|w| serde_json::json!({
                                "worker": w.worker, "runs_taken": w.runs_taken,
                                "takeovers": w.takeovers, "fenced": w.fenced,
                                "handed_back": w.handed_back,
                            })).collect::<Vec<_>>(),
                            "work_queues": s.work_queues.iter()
                                .map(|(q, n)| (q.clone(), serde_json::Value::from(*n)))
                                .collect::<serde_json::Map<_, _>>(),
                        })
                    );
                } else {
                    println!("store        {} {}", s.backend, s.location);
                    println!(
                        "schema       version {} (this aisc knows {})",
                        s.schema_version, s.known_version
                    );
                    let runs: Vec<String> =
                        s.runs.iter().map(|(k, n)| format!("{k} {n}")).collect();
                    println!(
                        "runs         {}",
                        if runs.is_empty() {
                            "none".to_string()
                        } else {
                            runs.join(", ")
                        }
                    );
                    println!("queue depth  {}", s.queue_depth);
                    println!("takeovers    {}", s.takeovers);
                    for w in &s.workers {
                        println!(
                            "worker       {}: {} runs taken, {} taken over, {} fenced, {} handed back",
                            w.worker, w.runs_taken, w.takeovers, w.fenced, w.handed_back
                        );
                    }
                    for (q, n) in &s.work_queues {
                        println!("work queue   {q}: {n} open");
                    }
                }
                0
            }
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ais_vm::store::sqlite::SqliteStore;
    use ais_vm::store::NewRun;

    fn running(store: &SqliteStore, id: &str) -> Claim {
        let fence = store
            .begin_run(&NewRun {
                id,
                program: "p.ais",
                artifact: b"",
                entry: None,
                args: "[]",
            })
            .expect("begin");
        Claim {
            id: id.into(),
            fence,
            takeover: false,
        }
    }

    /// Issue 32, defect 9: the log says why the run failed and whether the
    /// failure reached the store.
    #[test]
    fn worker_logged_failed_without_reason_or_fate() {
        let store = SqliteStore::open(None).expect("store");
        let claim = running(&store, "r1");
        store
            .finish("r1", claim.fence, "failed", None, Some("division by zero"))
            .expect("finish");
        let ended = failed(
            &store,
            &claim,
            "`div` in @A.main failed [arith.div_by_zero]".into(),
            "arith.div_by_zero",
        );
        assert_eq!(
            ended.line("r1", ""),
            "run r1: failed: `div` in @A.main failed [arith.div_by_zero] (recorded as failed)"
        );
        // Still `running` in the store: the failure was not recorded, and
        // this store has no queue to hand it back to.
        let claim = running(&store, "r2");
        let line = failed(&store, &claim, "journal write failed".into(), "R0005")
            .line("r2", " (taken over)");
        assert!(
            line.starts_with("run r2 (taken over): failed: journal write failed (the failure could not be recorded and the run was not handed back ("),
            "{line}"
        );
        assert!(
            line.ends_with("another worker takes it over when its lease runs out)"),
            "{line}"
        );
        let handed = Ended::Failed {
            reason: "x".into(),
            recorded: Recorded::HandedBack,
            after: ais_vm::store::retry::AfterFailure::Stays,
        };
        assert_eq!(
            handed.line("r3", ""),
            "run r3: failed: x (the failure could not be recorded; handed back to the queue)"
        );
    }
}
