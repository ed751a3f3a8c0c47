//! `GET /metrics`: Prometheus text format (version 0.0.4).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

/// Upper bounds of the op latency histogram, in seconds.
const BUCKETS: [f64; 14] = [
    0.000_1, 0.000_5, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0,
];

#[derive(Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

#[derive(Default)]
struct Inner {
    /// By op mnemonic.
    ops: BTreeMap<String, Histogram>,
    /// By backend: calls, input tokens, output tokens.
    llm: BTreeMap<String, [u64; 3]>,
    /// HTTP responses by status code.
    http: BTreeMap<u16, u64>,
    runs_started: u64,
}

/// Counters the server keeps (run counts by status are read from the
/// registry when scraped).
#[derive(Default)]
pub struct Metrics(Mutex<Inner>);

/// What the registry knows at scrape time.
pub struct Gauges {
    pub by_status: Vec<(&'static str, usize)>,
    pub queued: usize,
    pub running: usize,
    pub max_concurrent: usize,
}

impl Metrics {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn observe_op(&self, op: &str, seconds: f64) {
        let mut m = self.lock();
        let h = m.ops.entry(op.to_string()).or_default();
        for (i, b) in BUCKETS.iter().enumerate() {
            if seconds <= *b {
                h.counts[i] += 1;
            }
        }
        h.count += 1;
        h.sum += seconds;
    }

    pub fn observe_llm(&self, backend: &str, input: u64, output: u64) {
        let mut m = self.lock();
        let c = m.llm.entry(backend.to_string()).or_default();
        c[0] += 1;
        c[1] += input;
        c[2] += output;
    }

    pub fn observe_http(&self, status: u16) {
        *self.lock().http.entry(status).or_default() += 1;
    }

    pub fn run_started(&self) {
        self.lock().runs_started += 1;
    }

    pub fn render(&self, g: &Gauges) -> String {
        let m = self.lock();
        let mut out = String::new();
        let _ = writeln!(out, "# HELP ais_runs Runs known to this server, by status.");
        let _ = writeln!(out, "# TYPE ais_runs gauge");
        for (s, n) in &g.by_status {
            let _ = writeln!(out, "ais_runs{{status=\"{s}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP ais_runs_started_total Runs started or resumed by this process."
        );
        let _ = writeln!(out, "# TYPE ais_runs_started_total counter");
        let _ = writeln!(out, "ais_runs_started_total {}", m.runs_started);
        let _ = writeln!(
            out,
            "# HELP ais_queue_depth Runs accepted and waiting for an executor."
        );
        let _ = writeln!(out, "# TYPE ais_queue_depth gauge");
        let _ = writeln!(out, "ais_queue_depth {}", g.queued);
        let _ = writeln!(out, "# HELP ais_runs_running Runs executing now.");
        let _ = writeln!(out, "# TYPE ais_runs_running gauge");
        let _ = writeln!(out, "ais_runs_running {}", g.running);
        let _ = writeln!(
            out,
            "# HELP ais_runs_max_concurrent Runs that may execute at once."
        );
        let _ = writeln!(out, "# TYPE ais_runs_max_concurrent gauge");
        let _ = writeln!(out, "ais_runs_max_concurrent {}", g.max_concurrent);
        let _ = writeln!(
            out,
            "# HELP ais_op_duration_seconds Time from an op's start to its end, by op."
        );
        let _ = writeln!(out, "# TYPE ais_op_duration_seconds histogram");
        for (op, h) in &m.ops {
            for (i, b) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "ais_op_duration_seconds_bucket{{op=\"{op}\",le=\"{b}\"}} {}",
                    h.counts[i]
                );
            }
            let _ = writeln!(
                out,
                "ais_op_duration_seconds_bucket{{op=\"{op}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(out, "ais_op_duration_seconds_sum{{op=\"{op}\"}} {}", h.sum);
            let _ = writeln!(
                out,
                "ais_op_duration_seconds_count{{op=\"{op}\"}} {}",
                h.count
            );
        }
        let _ = writeln!(out, "# HELP ais_llm_calls_total LLM calls, by backend.");
        let _ = writeln!(out, "# TYPE ais_llm_calls_total counter");
        for (b, c) in &m.llm {
            let _ = writeln!(
                out,
                "ais_llm_calls_total{{backend=\"{}\"}} {}",
                escape(b),
                c[0]
            );
        }
        let _ = writeln!(
            out,
            "# HELP ais_llm_tokens_total LLM tokens, by backend and direction."
        );
        let _ = writeln!(out, "# TYPE ais_llm_tokens_total counter");
        for (b, c) in &m.llm {
            let b = escape(b);
            let _ = writeln!(
                out,
                "ais_llm_tokens_total{{backend=\"{b}\",direction=\"input\"}} {}",
                c[1]
            );
            let _ = writeln!(
                out,
                "ais_llm_tokens_total{{backend=\"{b}\",direction=\"output\"}} {}",
                c[2]
            );
        }
        let _ = writeln!(
            out,
            "# HELP ais_http_responses_total HTTP responses, by status code."
        );
        let _ = writeln!(out, "# TYPE ais_http_responses_total counter");
        for (code, n) in &m.http {
            let _ = writeln!(out, "ais_http_responses_total{{code=\"{code}\"}} {n}");
        }
        out
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Reads one counter of a worker.
type WorkerCount = fn(&ais_vm::store::WorkerStats) -> i64;

/// The shared store's gauges and counters (`aisc serve --store
/// postgres://…`): what the whole fleet does, read from the store at scrape
/// time, so every server of a fleet reports the same numbers.
pub fn render_store(s: &ais_vm::store::StoreStatus) -> String {
    let mut out = String::new();
    let n = |status: &str| {
        s.runs
            .iter()
            .find(|(k, _)| k == status)
            .map_or(0, |(_, n)| *n)
    };
    let _ = writeln!(
        out,
        "# HELP ais_store_runs Runs in the shared store by status."
    );
    let _ = writeln!(out, "# TYPE ais_store_runs gauge");
    let mut statuses: Vec<&str> = vec!["queued", "running", "paused"];
    for (k, _) in &s.runs {
        if !statuses.contains(&k.as_str()) {
            statuses.push(k);
        }
    }
    for st in statuses {
        let _ = writeln!(out, "ais_store_runs{{status=\"{}\"}} {}", escape(st), n(st));
    }
    let _ = writeln!(
        out,
        "# HELP ais_store_queue_depth Runs a worker may take now: queued, or running with an expired lease."
    );
    let _ = writeln!(out, "# TYPE ais_store_queue_depth gauge");
    let _ = writeln!(out, "ais_store_queue_depth {}", s.queue_depth);
    let _ = writeln!(out, "# HELP ais_store_lease_takeovers_total Runs taken over after their worker's lease expired.");
    let _ = writeln!(out, "# TYPE ais_store_lease_takeovers_total counter");
    let _ = writeln!(out, "ais_store_lease_takeovers_total {}", s.takeovers);
    let per_worker: [(&str, &str, WorkerCount); 4] = [
        (
            "ais_store_worker_runs_taken_total",
            "Runs each worker process acquired.",
            |w| w.runs_taken,
        ),
        (
            "ais_store_worker_takeovers_total",
            "Runs each worker took over from a dead one.",
            |w| w.takeovers,
        ),
        (
            "ais_store_worker_fenced_total",
            "Runs each worker stopped because its writes were fenced.",
            |w| w.fenced,
        ),
        (
            "ais_store_worker_handed_back_total",
            "Runs each worker gave back to the queue when stopped.",
            |w| w.handed_back,
        ),
    ];
    for (name, help, get) in per_worker {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} counter");
        for w in &s.workers {
            let _ = writeln!(out, "{name}{{worker=\"{}\"}} {}", escape(&w.worker), get(w));
        }
    }
    let _ = writeln!(
        out,
        "# HELP ais_store_work_queue_open Jobs of each named work queue not claimed yet."
    );
    let _ = writeln!(out, "# TYPE ais_store_work_queue_open gauge");
    for (q, n) in &s.work_queues {
        let _ = writeln!(
            out,
            "ais_store_work_queue_open{{queue=\"{}\"}} {n}",
            escape(q)
        );
    }
    out
}

/// Each concurrency key's runs (`aisc run --detach --concurrency-key`),
/// read from the shared store: running, queued and the key's limit.
pub fn render_queue(v: &ais_vm::store::priority::QueueView) -> String {
    let mut out = String::new();
    type Pick = fn(&ais_vm::store::priority::KeyLoad) -> Option<i64>;
    let series: [(&str, &str, Pick); 3] = [
        (
            "ais_store_key_running",
            "Runs of a concurrency key running across the fleet.",
            |k| Some(k.running),
        ),
        (
            "ais_store_key_queued",
            "Runs of a concurrency key waiting in the queue.",
            |k| Some(k.queued),
        ),
        (
            "ais_store_key_limit",
            "At most this many runs of a concurrency key run at once.",
            |k| k.limit,
        ),
    ];
    for (name, help, pick) in series {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        for (key, k) in &v.keys {
            if let Some(n) = pick(k) {
                let key = key.replace(['\\', '"', '\n'], "_");
                let _ = writeln!(out, "{name}{{key=\"{key}\"}} {n}");
            }
        }
    }
    out
}
