//! Starting, resuming, forking, cancelling and confirming runs: each
//! builds the run's edge (console, observer, cancel, confirmation asker)
//! and goes through the queue.

use super::{cancelled_error, unknown_run, Registry, Status};
use crate::cancel::Cancel;
use crate::engine::{BudgetSpec, RunEdge};
use crate::error::ApiError;
use crate::events::{EventLog, LogConsole, Watcher};
use crate::now_ms;
use crate::run::{queued_state, RunEntry};
use serde_json::Value as Json;
use std::sync::{Arc, Condvar, Mutex};

impl Registry {
    fn edge(
        &self,
        log: &Arc<EventLog>,
        cancel: &Cancel,
        asker: &Arc<crate::console::Asker>,
    ) -> RunEdge {
        RunEdge {
            confirm: asker.clone(),
            console: Arc::new(LogConsole(log.clone())),
            observer: ais_vm::observe::Observer(Arc::new(Watcher {
                log: log.clone(),
                metrics: self.metrics.clone(),
                backend: self.backend.clone(),
            })),
            cancel: cancel.clone(),
            unshown: false,
        }
    }

    /// Starts a run: checked, journaled, queued.
    pub fn start_run(
        &self,
        program: &str,
        entry: Option<&str>,
        args: &Json,
        budget: BudgetSpec,
    ) -> Result<Arc<RunEntry>, ApiError> {
        self.start_run_queued(program, entry, args, budget, Default::default(), Vec::new())
    }

    /// [`Registry::start_run_queued`] for a caller that waits for the
    /// run's end before it answers (`POST /v1/runs?wait=true`): nobody
    /// learns the run's id before its outcome, which is durable by then,
    /// so its journal row is not waited for on disk first.
    pub fn start_run_answered_at_end(
        &self,
        program: &str,
        entry: Option<&str>,
        args: &Json,
        budget: BudgetSpec,
        queue: ais_vm::store::priority::QueueOptions,
        webhooks: Vec<ais_vm::store::webhook::Hook>,
    ) -> Result<Arc<RunEntry>, ApiError> {
        self.start_as(
            program,
            entry,
            args,
            (budget, queue, webhooks),
            true,
            |p, _| Ok(p),
        )
    }

    /// [`Registry::start_run`] with a place in the fleet's queue (`aisc
    /// serve --enqueue`: priority, concurrency key).
    pub fn start_run_queued(
        &self,
        program: &str,
        entry: Option<&str>,
        args: &Json,
        budget: BudgetSpec,
        queue: ais_vm::store::priority::QueueOptions,
        webhooks: Vec<ais_vm::store::webhook::Hook>,
    ) -> Result<Arc<RunEntry>, ApiError> {
        self.start_run_with(program, entry, args, budget, queue, webhooks, |p, _| Ok(p))
    }

    /// [`Registry::start_run_queued`], the prepared run passed through
    /// `wrap` before it is queued (a thread's run is linked to its thread
    /// and waits its turn); an error of `wrap` discards the run.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start_run_with(
        &self,
        program: &str,
        entry: Option<&str>,
        args: &Json,
        budget: BudgetSpec,
        queue: ais_vm::store::priority::QueueOptions,
        webhooks: Vec<ais_vm::store::webhook::Hook>,
        wrap: impl FnOnce(
            Box<dyn crate::engine::Prepared>,
            &Cancel,
        ) -> Result<Box<dyn crate::engine::Prepared>, ApiError>,
    ) -> Result<Arc<RunEntry>, ApiError> {
        self.start_as(program, entry, args, (budget, queue, webhooks), false, wrap)
    }

    /// [`Registry::start_run_with`]; `unshown`: see [`RunEdge::unshown`].
    fn start_as(
        &self,
        program: &str,
        entry: Option<&str>,
        args: &Json,
        (budget, queue, webhooks): (
            BudgetSpec,
            ais_vm::store::priority::QueueOptions,
            Vec<ais_vm::store::webhook::Hook>,
        ),
        unshown: bool,
        wrap: impl FnOnce(
            Box<dyn crate::engine::Prepared>,
            &Cancel,
        ) -> Result<Box<dyn crate::engine::Prepared>, ApiError>,
    ) -> Result<Arc<RunEntry>, ApiError> {
        let (served, mut spec) = self.check(program, entry, args)?;
        spec.budget = budget;
        spec.queue = queue;
        spec.webhooks = webhooks;
        self.reserve()?;
        let log = Arc::new(EventLog::new());
        let cancel = Cancel::new();
        let asker = crate::console::Asker::new(log.clone(), cancel.clone());
        let mut edge = self.edge(&log, &cancel, &asker);
        edge.unshown = unshown;
        let prepared = match self.engine.prepare(&served, &spec, edge) {
            Ok(p) => p,
            Err(e) => {
                self.release();
                return Err(e);
            }
        };
        let id = prepared.id().to_string();
        let prepared = match wrap(prepared, &cancel) {
            Ok(p) => p,
            Err(e) => {
                // `wrap` consumed it; the journal's run row stays as a
                // run that never started (`aisc runs` shows it).
                self.release();
                return Err(e);
            }
        };
        let entry = Arc::new(RunEntry {
            id,
            program: served.file.clone(),
            entry: spec.entry.clone(),
            created_ms: now_ms(),
            resumes: 0,
            state: Mutex::new(queued_state()),
            cv: Condvar::new(),
            events: log,
            cancel,
            asker,
        });
        if let Some(dir) = self.engine.journal_dir() {
            entry.events.attach(event_segments(&dir), &entry.id);
        }
        Ok(self.enqueue(entry, prepared))
    }

    /// Resumes a failed, cancelled or paused run: its completed ops are
    /// replayed from the journal.
    pub fn resume(
        &self,
        id: &str,
        budget: BudgetSpec,
        input: Option<Json>,
    ) -> Result<Arc<RunEntry>, ApiError> {
        let old = self.get(id);
        if let Some(e) = &old {
            let s = e.status();
            if !s.resumable() {
                return Err(ApiError::conflict(
                    "run.not_resumable",
                    format!("run `{id}` is {}", s.name()),
                    "only failed, cancelled and paused runs can be resumed",
                ));
            }
        }
        let log = match (&old, self.journal_dir()) {
            (Some(e), _) => e.events.clone(),
            (None, Some(dir)) => Arc::new(EventLog::load(&dir, id)),
            (None, None) => return Err(unknown_run(id)),
        };
        self.reserve()?;
        let cancel = Cancel::new();
        let asker = crate::console::Asker::new(log.clone(), cancel.clone());
        let crate::engine::Resumed {
            prepared,
            program,
            entry,
        } = match self
            .engine
            .prepare_resume(id, &budget, input, self.edge(&log, &cancel, &asker))
        {
            Ok(p) => p,
            Err(e) => {
                self.release();
                return Err(e);
            }
        };
        log.reopen();
        let entry = Arc::new(RunEntry {
            id: prepared.id().to_string(),
            program,
            entry,
            created_ms: old.as_ref().map_or_else(now_ms, |e| e.created_ms),
            resumes: old.as_ref().map_or(1, |e| e.resumes + 1),
            state: Mutex::new(queued_state()),
            cv: Condvar::new(),
            events: log,
            cancel,
            asker,
        });
        if old.is_none() {
            // Its events are kept by this process from here on.
            if let Some(dir) = self.journal_dir() {
                entry.events.attach(event_segments(&dir), id);
            }
        }
        Ok(self.enqueue(entry, prepared))
    }

    /// Forks run `id` at journal step `at` (value `value`, or kept) and
    /// runs the fork: every effect whose inputs did not change is replayed.
    pub fn fork(
        &self,
        id: &str,
        at: &str,
        value: Option<&Json>,
    ) -> Result<(Arc<RunEntry>, Json), ApiError> {
        let (fork_id, what) = self.engine.fork(id, at, value)?;
        let entry = self.resume(&fork_id, BudgetSpec::default(), None)?;
        Ok((entry, what))
    }

    /// Cancels a queued or running run.
    pub fn cancel(&self, id: &str) -> Result<Arc<RunEntry>, ApiError> {
        let Some(e) = self.get(id) else {
            self.describe(id)?;
            return Err(ApiError::conflict(
                "run.not_active",
                format!("run `{id}` is not running in this server"),
                "only queued and running runs can be cancelled",
            ));
        };
        let queued = {
            let st = e.lock();
            if st.status.is_final() {
                return Err(ApiError::conflict(
                    "run.finished",
                    format!("run `{id}` has already ended ({})", st.status.name()),
                    "only queued and running runs can be cancelled",
                ));
            }
            st.status == Status::Queued
        };
        e.cancel.cancel();
        if queued {
            // Settled now; the executor that dequeues it discards it.
            let settled = {
                let mut st = e.lock();
                if st.status == Status::Queued {
                    st.status = Status::Cancelled;
                    true
                } else {
                    false
                }
            };
            if settled {
                e.settle(Status::Cancelled, None, Some(cancelled_error()), None);
            }
        }
        Ok(e)
    }

    /// Answers a destructive tool's question of a running run (`request`:
    /// its number in the `confirm` event; `None`: the only open one).
    pub fn confirm(
        &self,
        id: &str,
        request: Option<u64>,
        allow: bool,
    ) -> Result<Arc<RunEntry>, ApiError> {
        let e = self.get(id).ok_or_else(|| unknown_run(id))?;
        e.asker.answer(request, allow)?;
        Ok(e)
    }
}

/// This process's event segments in memory directory `dir`.
pub(super) fn event_segments(dir: &std::path::Path) -> Arc<ais_vm::telemetry::segments::Segments> {
    ais_vm::telemetry::segments::Segments::shared(&EventLog::dir(dir))
}
