//! Load probe for `docs/bench/reliability.md`: a run of ~100k ops whose
//! loop starts every iteration at once, so up to `concurrency` simulated
//! LLM calls are in flight together; prints ops, makespan, throughput and
//! peak RSS (VmHWM).
//!
//! `cargo run --release -p ais-vm --example reliability_load -- ITERS CONCURRENCY LATENCY_MS [journal-dir|none]`

use ais_ir::bytecode;
use ais_testkit::fake::FakeBackend;
use ais_testkit::MemoryHost;
use ais_vm::journal::Journal;
use ais_vm::llm::{CancelToken, LlmBackend, LlmError, LlmRequest, LlmResponse};
use ais_vm::RunOptions;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Counts calls in flight (and the most at once).
struct Peak {
    inner: FakeBackend,
    now: AtomicUsize,
    max: AtomicUsize,
    n: usize,
}

impl LlmBackend for Peak {
    fn name(&self) -> &str {
        "peak"
    }
    fn concurrency(&self) -> usize {
        self.n
    }
    fn complete(&self, r: &LlmRequest, c: &CancelToken) -> Result<LlmResponse, LlmError> {
        let k = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(k, Ordering::SeqCst);
        let out = self.inner.complete(r, c);
        self.now.fetch_sub(1, Ordering::SeqCst);
        out
    }
}

const SRC: &str = r#"
agent @A {
  flow @main(%items: list<str>) -> str entry {
    %0 = const {value = "done"} : str
    loop %items {
      body(%1: str, %2: number) {
        %3 = template %1 {template = "Q {0}"} : str
        %4 = ask %3 : str
        %5 = concat %4, %1 : str
        %6 = concat %5, %3 : str
        %7 = concat %6, %1 : str
        %8 = concat %7, %3 : str
        %9 = concat %8, %1 : str
        %10 = concat %9, %3 : str
        yield
      }
    }
    return %0
  }
}
"#;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: u64| a.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let iters = num(0, 10_000);
    let concurrency = num(1, 10_000) as usize;
    let latency = num(2, 200);
    let journal_dir = a.get(3).filter(|s| s.as_str() != "none").cloned();
    let module = match ais_ir::parse_module(SRC) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("parse: {e:?}");
            std::process::exit(1);
        }
    };
    let program = match bytecode::compile(&module) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("compile: {e}");
            std::process::exit(1);
        }
    };
    let items: Vec<String> = (0..iters).map(|i| format!("item {i}")).collect();
    let args = vec![("items".to_string(), json!(items))];
    let journal = journal_dir.map(|d| {
        let bytes = bytecode::encode(&program).unwrap_or_default();
        match Journal::begin(
            Some(std::path::Path::new(&d)),
            &format!("load-{}", std::process::id()),
            "load",
            &bytes,
            None,
            &args,
        ) {
            Ok(j) => Arc::new(j),
            Err(e) => {
                eprintln!("journal: {e}");
                std::process::exit(1);
            }
        }
    });
    let journaled = journal.is_some();
    let options = RunOptions {
        args,
        concurrency: Some(concurrency),
        record_events: false,
        journal,
        ..RunOptions::default()
    };
    let backend = Arc::new(Peak {
        inner: FakeBackend::new().with_latency(Duration::from_millis(latency)),
        now: AtomicUsize::new(0),
        max: AtomicUsize::new(0),
        n: concurrency,
    });
    let t = Instant::now();
    let report = ais_vm::run(
        &program,
        &options,
        backend.clone(),
        Arc::new(MemoryHost::new()),
    );
    let wall = t.elapsed().as_secs_f64();
    let s = &report.summary;
    println!(
        "iters {iters} concurrency {concurrency} latency {latency} ms journal {journaled}: ok {} | ops {} | wall {wall:.2} s (makespan {:.0} ms, setup {:.0} ms) | {:.0} ops/s | peak calls in flight {} | peak RSS {} MiB",
        report.outcome.is_ok(),
        s.ops,
        s.makespan_ms,
        s.setup_ms,
        s.ops as f64 / wall.max(1e-9),
        backend.max.load(Ordering::SeqCst),
        peak_rss_kb() / 1024,
    );
}
