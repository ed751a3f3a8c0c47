//! What the registry keeps: ended runs held in memory up to `keep_runs`,
//! the events of at least `keep_event_files` runs on disk (the journal and
//! the event segments still answer for the runs dropped from memory).

use super::{Registry, Runs, Status};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

impl Registry {
    /// Drops the oldest ended runs from memory beyond `keep_runs` (the
    /// journal and their event files still answer for them), and every 64
    /// drops the oldest event files beyond `keep_event_files`.
    pub(super) fn prune(&self) {
        if self.config.keep_runs == 0
            || (self.journal_dir().is_none() && self.engine.journal_store().is_none())
        {
            return;
        }
        let dropped = {
            let mut runs = self.lock();
            // Called at every run's end: a registry within its limit needs
            // no scan, and a scan reads each run's status without copying
            // its result or cloning its id.
            if runs.by_id.len() <= self.config.keep_runs {
                return;
            }
            let ended = |e: &std::sync::Arc<crate::run::RunEntry>| {
                !matches!(e.status(), Status::Queued | Status::Running)
            };
            let n_ended = runs.by_id.values().filter(|e| ended(e)).count();
            let excess = n_ended.saturating_sub(self.config.keep_runs);
            if excess > 0 {
                let Runs { by_id, order } = &mut *runs;
                // The oldest `excess` ended runs, in arrival order.
                let mut left = excess;
                order.retain(|id| {
                    if left == 0 || !by_id.get(id).is_some_and(&ended) {
                        return true;
                    }
                    left -= 1;
                    by_id.remove(id);
                    false
                });
            }
            excess
        };
        let n = self.dropped.fetch_add(dropped, Ordering::Relaxed) + dropped;
        if dropped > 0 && n / 64 != (n - dropped) / 64 {
            self.prune_event_files();
        }
    }

    /// Keeps the events of the newest `keep_event_files` runs at least:
    /// removes the oldest whole segments beyond them, and the oldest event
    /// files of servers before segments; never those of runs held in
    /// memory, nor the segment this process writes.
    pub fn prune_event_files(&self) {
        let (Some(dir), keep) = (self.journal_dir(), self.config.keep_event_files) else {
            return;
        };
        if keep == 0 {
            return;
        }
        let events = crate::events::EventLog::dir(&dir);
        let files = std::fs::read_dir(&events).map_or(0, Iterator::count);
        if self.pruned_files.swap(files, Ordering::Relaxed) == files {
            return;
        }
        let held: HashSet<String> = self.lock().by_id.keys().cloned().collect();
        let current: Vec<String> = super::control::event_segments(&dir)
            .current()
            .into_iter()
            .collect();
        ais_vm::telemetry::segments::prune(&events, keep, &current, &held);
        let Ok(read) = std::fs::read_dir(&events) else {
            return;
        };
        let mut files: Vec<(std::time::SystemTime, PathBuf)> = read
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
            .filter_map(|e| {
                let at = e.metadata().ok()?.modified().ok()?;
                Some((at, e.path()))
            })
            .collect();
        if files.len() <= keep {
            return;
        }
        files.sort();
        let excess = files.len() - keep;
        for (_, path) in files.into_iter().take(excess) {
            let id = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            if !held.contains(id) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}
