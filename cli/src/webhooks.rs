//! Webhooks at the command line (`ais_vm::webhook`): `--webhook URL
//! [--webhook-events LIST]` on `aisc run` (also with `--detach` and
//! `--schedule`), the delivery loop of `aisc worker` and `aisc serve`, and
//! `aisc run`'s own run's deliveries sent before it exits.

use ais_vm::llm::secret::redact_url;
use ais_vm::store::webhook::{DeliveryInfo, Hook};
use ais_vm::store::Store;
use ais_vm::webhook::deliver::Deliverer;
use ais_vm::webhook::{declare_all, Settings};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// How long `aisc run` waits for its own run's deliveries (retries
/// included) before it exits; what is still pending is sent by the next
/// `aisc run`, `aisc serve` or `aisc worker` on the same store.
const RUN_WAIT: Duration = Duration::from_secs(30);

/// The webhook options of `aisc run`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct WebhookArgs {
    /// POST the run's completion, failure or pause to URL, signed with
    /// AIS_WEBHOOK_SECRET (Standard Webhooks headers), retried with backoff
    /// (repeatable; with --detach and --schedule too: every run of the
    /// schedule).
    #[arg(long = "webhook", value_name = "URL")]
    pub webhook: Vec<String>,
    /// The events sent (comma-separated): completed, failed, paused.
    #[arg(
        long = "webhook-events",
        value_name = "EVENTS",
        default_value = "completed,failed,paused",
        requires = "webhook"
    )]
    pub webhook_events: String,
}

impl WebhookArgs {
    /// The subscriptions, checked (URL, address, events); exit code 2 with
    /// the reason printed when one is refused.
    pub fn hooks(&self) -> Result<Vec<Hook>, i32> {
        self.checked().map_err(|e| {
            eprintln!("error[{e}");
            eprintln!("  = hint: `--webhook https://example.com/hooks/ais --webhook-events completed,failed`; the receiver checks the `webhook-signature` header with the same secret");
            2
        })
    }
}

impl WebhookArgs {
    /// The subscriptions, checked (URL, address, events): these options'
    /// and the configuration's `[[webhooks]]` (the options' events win
    /// for a URL both name).
    pub fn checked(&self) -> Result<Vec<Hook>, ais_vm::webhook::WebhookError> {
        let own = if self.webhook.is_empty() {
            Vec::new()
        } else {
            declare_all(
                &self.webhook,
                Some(&self.webhook_events),
                &Settings::from_process(),
            )?
        };
        ais_vm::webhook::merge(own, &ais_vm::webhook::configured_hooks()?)
    }
}

/// Subscribes `subject` (a run or a schedule) in `store`; exit code 1 with
/// the reason printed when the store refuses.
pub fn subscribe(store: &dyn Store, subject: &str, hooks: &[Hook]) -> Result<(), i32> {
    if hooks.is_empty() {
        return Ok(());
    }
    store.add_webhooks(subject, hooks).map_err(|e| {
        eprintln!("error: cannot store the webhooks: {e}");
        1
    })
}

/// Subscribes run `run`, taken by a worker, to the configuration's
/// `[[webhooks]]` (checked when the worker started). A store error is
/// printed and the run goes on: its own webhooks are stored already.
pub fn subscribe_configured(store: &dyn Store, run: &str) {
    let hooks = ais_vm::webhook::configured_hooks().unwrap_or_default();
    if hooks.is_empty() {
        return;
    }
    if let Err(e) = store.add_webhooks(run, &hooks) {
        eprintln!("error: run {run}: cannot store the configuration's webhooks: {e}");
    }
}

/// After `aisc run` (or `aisc resume`) ends run `run`: sends its due
/// deliveries (and any other due ones of the store), retrying within
/// [`RUN_WAIT`]. Silent when the run has none.
pub fn flush_run(store: &Arc<dyn Store>, run: &str, quiet: bool) {
    let pending = store
        .deliveries(run)
        .map_or(0, |d| d.iter().filter(|d| d.status == "pending").count());
    if pending == 0 {
        return;
    }
    let Some(d) = Deliverer::new(store.clone(), Settings::from_process()) else {
        eprintln!("warning: {pending} webhook deliveries of run {run} are not sent: AIS_WEBHOOK_SECRET is not set in this process (`aisc serve` or `aisc worker` on this store sends them when it has the secret)");
        return;
    };
    let log = |line: &str| {
        if !quiet || line.starts_with("error") {
            eprintln!("{line}");
        }
    };
    let left = d.flush_run(run, RUN_WAIT, &log);
    if left > 0 {
        eprintln!("warning: {left} webhook deliveries of run {run} are still pending after {}s of retries; the next `aisc run`, `aisc serve` or `aisc worker` on this store goes on (`aisc runs show {run}` lists them)", RUN_WAIT.as_secs());
    }
}

/// The delivery loop of a long-running process (`aisc worker`, `aisc
/// serve`) on `store`, until `stop`; a line per attempt on stderr unless
/// `quiet`. Without a secret it says so once and sends nothing.
pub fn deliver_loop(store: Arc<dyn Store>, stop: &AtomicBool, quiet: bool) {
    let Some(d) = Deliverer::new(store.clone(), Settings::from_process()) else {
        // Said once, and only when there is something to send: most
        // stores have no webhooks at all.
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            if store.delivery_counts().is_ok_and(|c| c.pending > 0) {
                if !quiet {
                    eprintln!("note: webhook deliveries are pending, but AIS_WEBHOOK_SECRET is not set: this process sends none (another process on the store with the secret does)");
                }
                return;
            }
            for _ in 0..50 {
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        return;
    };
    d.run(stop, &|line: &str| {
        if !quiet || line.starts_with("error") {
            eprintln!("{line}");
        }
    });
}

/// A run's deliveries for `aisc runs show --json` (URLs' credentials
/// masked).
pub fn deliveries_json(list: &[DeliveryInfo]) -> serde_json::Value {
    list.iter()
        .map(|d| {
            let mut j = serde_json::to_value(d).unwrap_or_default();
            j["url"] = redact_url(&d.url).into();
            j
        })
        .collect()
}

/// A run's deliveries for `aisc runs show`: one line each, then a line per
/// attempt.
pub fn print_deliveries(list: &[DeliveryInfo]) {
    if list.is_empty() {
        return;
    }
    println!("webhooks");
    for d in list {
        let when = match (d.status.as_str(), d.ended_ms) {
            ("pending", _) => format!(", next attempt {}", time(d.next_ms)),
            (_, Some(t)) => format!(" at {}", time(t)),
            _ => String::new(),
        };
        println!(
            "  {}  run.{}  {}{when}  {}  ({} attempt{})",
            d.id,
            d.event,
            d.status,
            redact_url(&d.url),
            d.attempts.len(),
            if d.attempts.len() == 1 { "" } else { "s" }
        );
        for a in &d.attempts {
            let answer = a
                .http_status
                .map_or_else(|| "no answer".to_string(), |s| format!("HTTP {s}"));
            let why = a
                .error
                .as_deref()
                .filter(|e| *e != answer)
                .map(|e| format!(": {e}"))
                .unwrap_or_default();
            println!(
                "    #{} {}  {answer}  {} ms{why}",
                a.n,
                time(a.at_ms),
                a.duration_ms
            );
        }
    }
}

fn time(ms: i64) -> String {
    let t = ais_stdlib::time::rfc3339(u64::try_from(ms).unwrap_or(0));
    t.chars().take(19).collect::<String>().replace('T', " ")
}

/// Starts sending the webhook deliveries of the store runs are journaled
/// in (`--store`, else the memory directory's); returns its stop flag.
pub(crate) fn deliver_served_in_background(
    memory: &super::aam::MemoryArgs,
) -> Option<Arc<AtomicBool>> {
    let store = match memory.store_url() {
        Some(url) => super::aam::MemoryArgs::shared_store(&url).ok()?,
        None => {
            let dir = ais_vm::journal::dir_of(&memory.storage())?;
            ais_vm::store::open(&dir.display().to_string()).ok()?
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::Builder::new()
        .name("ais-webhooks".into())
        .spawn(move || deliver_loop(store, &flag, false))
        .ok()?;
    Some(stop)
}
