//! A run's telemetry outputs at the edge: the file kept for `aisc report`
//! (`super::keep`) and the OpenTelemetry trace (`ais_vm::observe::otlp`),
//! started together by `run::prepare_run` and completed together by
//! whoever ran the run (`aisc run`, `aisc serve`, `aisc worker`).

use super::keep::{Both, Keeper};
use ais_ir::bytecode::Program;
use ais_vm::observe::otlp::{OtlpSettings, Pipeline, RunTrace};
use ais_vm::observe::{Observer, RunObserver};
use ais_vm::RunOptions;
use std::sync::Arc;
use std::time::Duration;

/// What a run's telemetry goes to.
pub struct RunTelemetry {
    pub keeper: Option<Arc<Keeper>>,
    pub trace: Option<Arc<RunTrace>>,
}

impl RunTelemetry {
    /// Completes both from the run's report (the trace's last spans are
    /// queued, not waited for).
    pub fn finish(&self, program: &Program, report: &ais_vm::RunReport) {
        if let Some(k) = &self.keeper {
            k.finish(program, report);
        }
        if let Some(t) = &self.trace {
            t.finish_report(program, report);
        }
    }

    /// The run never started: no file, no spans.
    pub fn discard(&self) {
        if let Some(k) = &self.keeper {
            k.discard();
        }
    }
}

/// The export settings from `[telemetry.otlp]` and the `OTEL_*`
/// variables; a mistake is a warning and the run goes on without export.
pub fn settings(config: &ais_vm::config::Config) -> Option<OtlpSettings> {
    match OtlpSettings::resolve(config.otlp.as_ref(), &|k| std::env::var(k).ok()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("warning: no OpenTelemetry export for this run: {e}");
            None
        }
    }
}

/// `gen_ai.provider.name` of each configured backend: its protocol.
fn providers(config: &ais_vm::config::Config) -> std::collections::BTreeMap<String, String> {
    use ais_vm::config::BackendKind;
    config
        .backends
        .iter()
        .map(|b| {
            let p = match b.kind {
                BackendKind::Sim => "ais.simulator",
                k => k.name(),
            };
            (b.name.clone(), p.to_string())
        })
        .collect()
}

/// Adds the run's trace to `keeper` (when export is configured), composing
/// its observer with the run's.
pub fn with_trace(
    keeper: Option<Arc<Keeper>>,
    config: &ais_vm::config::Config,
    options: &mut RunOptions,
    resumed: bool,
) -> Option<RunTelemetry> {
    let trace = settings(config).and_then(|s| {
        let journal = options.journal.as_ref()?;
        let run_id = journal.run_id().to_string();
        let pipeline = match Pipeline::shared(&s) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("warning: no OpenTelemetry export for this run: {e}");
                return None;
            }
        };
        let (attempt, began) = if resumed {
            attempt_of(journal.store().as_ref(), &run_id)
        } else {
            (1, None)
        };
        let trace = RunTrace::new(pipeline, &run_id, attempt, providers(config));
        Some(Arc::new(match began {
            Some(ms) => trace.run_started(ms),
            None => trace,
        }))
    });
    if let Some(t) = &trace {
        let mine: Arc<dyn RunObserver> = t.clone();
        options.observer = Some(Observer(match options.observer.take() {
            Some(edge) => Arc::new(Both(edge.0, mine)),
            None => mine,
        }));
    }
    (keeper.is_some() || trace.is_some()).then_some(RunTelemetry { keeper, trace })
}

/// For a resumed run (resumed, or taken from a queue by a worker): which
/// attempt this is (the store counts resumes and takeovers) and, after a
/// first attempt, when the run began (Unix ms; a fleet run: when it was
/// queued), for its root span. One read of the run's row; when it fails,
/// the spans still join the earlier attempts' (their ids do not depend on
/// it) and say attempt 1.
fn attempt_of(store: &dyn ais_vm::store::Store, run_id: &str) -> (u32, Option<i64>) {
    match store.run_row(run_id) {
        Ok(Some(row)) => {
            let n = u32::try_from(row.info.resumes.saturating_add(1)).unwrap_or(u32::MAX);
            (n, (n > 1).then_some(row.info.started_ms))
        }
        _ => (1, None),
    }
}

/// At the end of a one-shot process: waits (up to the export timeout) for
/// the trace's spans to be sent, and says so when some were not.
pub fn flush(t: Option<&RunTelemetry>) {
    let Some(trace) = t.and_then(|t| t.trace.as_ref()) else {
        return;
    };
    let p = trace.pipeline();
    let done = p.flush(p.settings().timeout + Duration::from_secs(1));
    let s = p.stats();
    if !done || s.dropped > 0 || s.failed > 0 {
        eprintln!(
            "warning: OpenTelemetry export to {}: {} spans sent, {} failed, {} dropped{}{}",
            p.settings().traces_url,
            s.sent,
            s.failed,
            s.dropped,
            if done { "" } else { ", still sending at exit" },
            s.last_error
                .map(|e| format!(" (last error: {e})"))
                .unwrap_or_default(),
        );
    }
}
