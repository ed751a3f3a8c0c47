//! Speculated tool calls held aside: `inv` calls of read-only tools
//! started before their branch was decided, on the run's speculation
//! threads ([`Tools::next`]), then adopted by their op (which journals and
//! delivers the result as if it had just made the call) or discarded
//! (cancelled, never journaled, never delivered).
//!
//! Shared by the run's workers, tool lane and speculation threads, so it
//! borrows nothing from the run.

use super::table::Key;
use crate::host::HostError;
use crate::llm::CancelToken;
use crate::sync::{lock, wait_until};
use serde_json::Value as Json;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

type Outcome = Result<Json, HostError>;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fate {
    Held,
    Adopted,
    Discarded,
}

enum Progress {
    /// Waiting for a speculation thread.
    Queued,
    Running,
    /// The tool answered at `at`; `read`: the labelled stored values it
    /// read (`crate::host::flow`), joined into its op's result label.
    Done {
        outcome: Option<Outcome>,
        read: Vec<String>,
        at: Instant,
    },
    /// Taken by its op, or never started (decided against while queued).
    Settled,
}

struct Entry {
    key: Key,
    agent: String,
    tool: String,
    args: Json,
    cancel: CancelToken,
    started: Option<Instant>,
    fate: Fate,
    progress: Progress,
}

#[derive(Default)]
struct State {
    entries: Vec<Entry>,
    stopped: bool,
    started: u64,
    adopted: u64,
    discarded: u64,
    saved: Duration,
}

/// A call a speculation thread is to make.
pub(super) struct Job {
    pub index: usize,
    pub agent: String,
    pub tool: String,
    pub args: Json,
    pub cancel: CancelToken,
}

/// What speculation did with tool calls: started, adopted, discarded and
/// the time adoption saved.
pub(super) struct ToolTotals {
    pub started: u64,
    pub adopted: u64,
    pub discarded: u64,
    pub saved: Duration,
}

#[derive(Default)]
pub(super) struct Tools {
    state: Mutex<State>,
    cv: Condvar,
}

impl Tools {
    /// Queues a call for the speculation threads.
    pub(super) fn push(
        &self,
        key: Key,
        agent: &str,
        tool: String,
        args: Json,
        cancel: CancelToken,
    ) {
        let mut g = lock(&self.state);
        if g.stopped {
            return;
        }
        g.entries.push(Entry {
            key,
            agent: agent.to_string(),
            tool,
            args,
            cancel,
            started: None,
            fate: Fate::Held,
            progress: Progress::Queued,
        });
        drop(g);
        self.cv.notify_all();
    }

    /// The next queued call still wanted, waiting for one; `None` once the
    /// run is over.
    pub(super) fn next(&self) -> Option<Job> {
        let mut g = lock(&self.state);
        loop {
            if g.stopped {
                return None;
            }
            let st = &mut *g;
            if let Some((i, e)) = st
                .entries
                .iter_mut()
                .enumerate()
                .find(|(_, e)| e.fate == Fate::Held && matches!(e.progress, Progress::Queued))
            {
                e.progress = Progress::Running;
                e.started = Some(Instant::now());
                st.started += 1;
                return Some(Job {
                    index: i,
                    agent: e.agent.clone(),
                    tool: e.tool.clone(),
                    args: e.args.clone(),
                    cancel: e.cancel.clone(),
                });
            }
            g = wait_until(&self.state, &self.cv, g, None);
        }
    }

    /// A started call's outcome (from its speculation thread).
    pub(super) fn finish(&self, i: usize, outcome: Outcome, read: Vec<String>) {
        let mut g = lock(&self.state);
        if let Some(e) = g.entries.get_mut(i) {
            e.progress = match e.fate {
                // Nobody will take it: it only had to end.
                Fate::Discarded => Progress::Settled,
                _ => Progress::Done {
                    outcome: Some(outcome),
                    read,
                    at: Instant::now(),
                },
            };
        }
        drop(g);
        self.cv.notify_all();
    }

    /// The held call for `key`, adopted by its op when it asks the same
    /// tool with the same argument: its outcome and the labelled values it
    /// read, waiting for it while it runs. `None`: the op calls the tool
    /// itself (no such call, a different request, which is discarded, or
    /// one still queued, which is dropped unsent).
    pub(super) fn adopt(
        &self,
        key: Key,
        tool: &str,
        args: &Json,
    ) -> Option<(Outcome, Vec<String>)> {
        let mut g = lock(&self.state);
        let i = g
            .entries
            .iter()
            .position(|e| e.key == key && e.fate == Fate::Held)?;
        {
            let st = &mut *g;
            let e = &mut st.entries[i];
            if e.tool != tool || &e.args != args {
                discard(&mut st.discarded, e);
                drop(g);
                self.cv.notify_all();
                return None;
            }
            if matches!(e.progress, Progress::Queued) {
                // Never sent: the op makes the call now, nothing was saved.
                e.fate = Fate::Discarded;
                e.progress = Progress::Settled;
                return None;
            }
            e.fate = Fate::Adopted;
            st.adopted += 1;
        }
        let now = Instant::now();
        loop {
            let st = &mut *g;
            let e = &mut st.entries[i];
            if let Progress::Done { outcome, read, at } = &mut e.progress {
                let (outcome, read, at) = (outcome.take(), std::mem::take(read), *at);
                // Saved: the part of the call already behind it when its
                // op asked for it.
                if let Some(s) = e.started {
                    st.saved += now.min(at).saturating_duration_since(s);
                }
                e.progress = Progress::Settled;
                return outcome.map(|o| (o, read));
            }
            if !matches!(e.progress, Progress::Running) {
                return None;
            }
            // The call ends on its own, or when the run's cancel token
            // (its parent) is cancelled.
            g = wait_until(&self.state, &self.cv, g, None);
        }
    }

    /// The branch of `(frame, control)` is decided: calls held for the
    /// other arms are cancelled and discarded. `taken`: `None` when no
    /// arm is (the condition failed).
    pub(super) fn resolve(&self, frame: u64, control: u32, taken: Option<u32>) {
        let mut g = lock(&self.state);
        let st = &mut *g;
        for e in &mut st.entries {
            if e.key.frame == frame
                && e.key.control == control
                && e.fate == Fate::Held
                && Some(e.key.region) != taken
            {
                discard(&mut st.discarded, e);
            }
        }
        drop(g);
        self.cv.notify_all();
    }

    /// The run is over: what is still held is discarded and the
    /// speculation threads stop (a call in flight ends on its cancel).
    pub(super) fn stop(&self) {
        let mut g = lock(&self.state);
        g.stopped = true;
        let st = &mut *g;
        for e in &mut st.entries {
            if e.fate == Fate::Held {
                discard(&mut st.discarded, e);
            }
        }
        drop(g);
        self.cv.notify_all();
    }

    pub(super) fn totals(&self) -> ToolTotals {
        let g = lock(&self.state);
        ToolTotals {
            started: g.started,
            adopted: g.adopted,
            discarded: g.discarded,
            saved: g.saved,
        }
    }

    /// Discarded calls so far (they were made).
    pub(super) fn discarded(&self) -> u64 {
        lock(&self.state).discarded
    }
}

/// Cancels a held call; one that was started counts as discarded (one
/// never sent cost nothing).
fn discard(discarded: &mut u64, e: &mut Entry) {
    e.fate = Fate::Discarded;
    e.cancel.cancel();
    match e.progress {
        Progress::Queued => e.progress = Progress::Settled,
        Progress::Running => *discarded += 1,
        Progress::Done { .. } => {
            *discarded += 1;
            e.progress = Progress::Settled;
        }
        Progress::Settled => {}
    }
}
