//! Speculated calls held aside: started before their branch was decided,
//! then adopted by their op (which journals and delivers the reply as if
//! it had just made the call) or discarded (cancelled, never journaled,
//! their spend counted as speculation's extra cost).
//!
//! Shared with the backends' reply callbacks, so it borrows nothing from
//! the run.

use crate::llm::{Attempt, LlmError, LlmRequest, LlmResponse, OnDone, Usage};
use crate::sync::{lock, wait_until};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

type Reply = Result<LlmResponse, LlmError>;

/// Where a speculated call's op sits: the `if` / `switch` (its frame and
/// op), the arm (region) and the op in the arm.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Key {
    pub frame: u64,
    pub control: u32,
    pub region: u32,
    pub op: u32,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fate {
    Held,
    Adopted,
    Discarded,
}

enum Progress {
    /// Not sent yet: it waits for the leader of its prompt-cache class
    /// (`scheduler::warmup`); an adopting op's completion waits here.
    Waiting(Option<OnDone>),
    /// Started on the backend; an adopting op's completion waits here.
    Running(Option<OnDone>),
    /// A backend that knows its replies at once (the simulator, fakes):
    /// due at `at`.
    Due { at: Instant, reply: Option<Reply> },
    /// The reply arrived and nobody has taken it yet.
    Done {
        reply: Option<Reply>,
        attempts: Vec<Attempt>,
        at: Instant,
    },
    /// Taken by its op, or accounted as discarded.
    Settled,
}

struct Entry {
    key: Key,
    req: LlmRequest,
    cancel: crate::llm::CancelToken,
    started: Instant,
    fate: Fate,
    progress: Progress,
}

/// What a discarded call spent, by model (priced by the run's budget).
#[derive(Default)]
pub(super) struct Spent {
    pub by_model: Vec<(String, Usage)>,
    /// Requests the discarded calls sent (retries included).
    pub attempts: u64,
}

#[derive(Default)]
struct State {
    entries: Vec<Entry>,
    spent: Spent,
    adopted: u64,
    discarded: u64,
    saved: Duration,
}

/// How an adopted call's reply reaches its op.
pub(in crate::scheduler) enum Adopted {
    /// A scheduled reply, due after this delay from now.
    Scheduled(Duration, Reply),
    /// Started on the backend: hand the op's completion to
    /// [`Table::attach`].
    Started(usize),
}

#[derive(Default)]
pub(super) struct Table {
    state: Mutex<State>,
    cv: Condvar,
}

impl Table {
    pub(super) fn push_running(
        &self,
        key: Key,
        req: LlmRequest,
        cancel: crate::llm::CancelToken,
    ) -> usize {
        self.push(key, req, cancel, Progress::Running(None))
    }

    /// A call held for the warm-up of its prefix: [`Table::start_held`]
    /// sends it.
    pub(super) fn push_waiting(
        &self,
        key: Key,
        req: LlmRequest,
        cancel: crate::llm::CancelToken,
    ) -> usize {
        self.push(key, req, cancel, Progress::Waiting(None))
    }

    /// Held call `i` may go now: its request and cancel token, or `None`
    /// when it is no longer wanted (its branch was decided against it, or
    /// the run ended). From here it is a running call.
    pub(super) fn start_held(&self, i: usize) -> Option<(LlmRequest, crate::llm::CancelToken)> {
        let mut g = lock(&self.state);
        let e = g.entries.get_mut(i)?;
        if e.fate == Fate::Discarded {
            return None;
        }
        let Progress::Waiting(w) = &mut e.progress else {
            return None;
        };
        e.progress = Progress::Running(w.take());
        e.started = Instant::now();
        Some((e.req.clone(), e.cancel.clone()))
    }

    pub(super) fn push_due(&self, key: Key, req: LlmRequest, delay: Duration, reply: Reply) {
        let at = Instant::now() + delay;
        self.push(
            key,
            req,
            crate::llm::CancelToken::new(),
            Progress::Due {
                at,
                reply: Some(reply),
            },
        );
    }

    fn push(
        &self,
        key: Key,
        req: LlmRequest,
        cancel: crate::llm::CancelToken,
        progress: Progress,
    ) -> usize {
        let mut g = lock(&self.state);
        g.entries.push(Entry {
            key,
            req,
            cancel,
            started: Instant::now(),
            fate: Fate::Held,
            progress,
        });
        g.entries.len() - 1
    }

    /// A started call's outcome (from the backend's thread).
    pub(super) fn arrive(&self, i: usize, reply: Reply, attempts: Vec<Attempt>) {
        let mut g = lock(&self.state);
        let st = &mut *g;
        let Some(e) = st.entries.get_mut(i) else {
            return;
        };
        let waiter = match (&mut e.progress, e.fate) {
            (Progress::Running(w), Fate::Adopted) => w.take(),
            _ => None,
        };
        match (waiter, e.fate) {
            (Some(done), _) => {
                e.progress = Progress::Settled;
                drop(g);
                done(reply, attempts);
                return;
            }
            (None, Fate::Discarded) => {
                e.progress = Progress::Settled;
                let model = reply
                    .as_ref()
                    .map(|r| r.model.clone())
                    .ok()
                    .or_else(|| e.req.model.clone())
                    .unwrap_or_default();
                spend(&mut st.spent, model, reply.as_ref().ok(), Some(&attempts));
            }
            (None, _) => {
                e.progress = Progress::Done {
                    reply: Some(reply),
                    attempts,
                    at: Instant::now(),
                }
            }
        }
        drop(g);
        self.cv.notify_all();
    }

    /// The held call for `key`, adopted by its op when it asks the same
    /// request (a different one, which the arm's inputs cannot give, is
    /// discarded and the op calls the backend itself).
    pub(super) fn adopt(&self, key: Key, req: &LlmRequest) -> Option<Adopted> {
        let mut g = lock(&self.state);
        let now = Instant::now();
        let st = &mut *g;
        let i = st
            .entries
            .iter()
            .position(|e| e.key == key && e.fate == Fate::Held)?;
        let e = &mut st.entries[i];
        if !same_request(&e.req, req) {
            discard(&mut st.spent, e);
            st.discarded += 1;
            drop(g);
            self.cv.notify_all();
            return None;
        }
        e.fate = Fate::Adopted;
        st.adopted += 1;
        let r = match &mut e.progress {
            Progress::Due { at, reply } => {
                let at = *at;
                let reply = reply.take()?;
                // Saved: the part of the call already behind it.
                let total = at.saturating_duration_since(e.started);
                st.saved += now.saturating_duration_since(e.started).min(total);
                e.progress = Progress::Settled;
                Some(Adopted::Scheduled(at.saturating_duration_since(now), reply))
            }
            Progress::Done { at, .. } => {
                st.saved += at.saturating_duration_since(e.started);
                Some(Adopted::Started(i))
            }
            Progress::Running(_) => {
                st.saved += now.saturating_duration_since(e.started);
                Some(Adopted::Started(i))
            }
            // Not sent yet: the op's completion waits for it like for a
            // running one, and nothing was saved.
            Progress::Waiting(_) => Some(Adopted::Started(i)),
            Progress::Settled => None,
        };
        drop(g);
        self.cv.notify_all();
        r
    }

    /// Hands an adopted started call's reply to `done`: now when it has
    /// arrived, else when it does.
    pub(super) fn attach(&self, i: usize, done: OnDone) {
        let mut g = lock(&self.state);
        let Some(e) = g.entries.get_mut(i) else {
            return;
        };
        match std::mem::replace(&mut e.progress, Progress::Settled) {
            Progress::Done {
                reply: Some(reply),
                attempts,
                ..
            } => {
                drop(g);
                done(reply, attempts);
            }
            Progress::Running(_) => e.progress = Progress::Running(Some(done)),
            Progress::Waiting(_) => e.progress = Progress::Waiting(Some(done)),
            other => e.progress = other,
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
                discard(&mut st.spent, e);
                st.discarded += 1;
            }
        }
        drop(g);
        self.cv.notify_all();
    }

    /// The run is over: what is still held is discarded; waits until the
    /// discarded calls in flight report what they spent, or until `until`
    /// (their tokens are cancelled with the run's).
    pub(super) fn close(&self, until: Instant) {
        let mut g = lock(&self.state);
        let st = &mut *g;
        for e in &mut st.entries {
            if e.fate == Fate::Held {
                discard(&mut st.spent, e);
                st.discarded += 1;
            }
        }
        while g
            .entries
            .iter()
            .any(|e| e.fate == Fate::Discarded && matches!(e.progress, Progress::Running(_)))
            && Instant::now() < until
        {
            g = wait_until(&self.state, &self.cv, g, Some(until));
        }
    }

    /// Calls started, adopted, discarded, the time adoption saved and
    /// what the discarded calls spent.
    pub(super) fn totals(&self) -> (u64, u64, u64, Duration, Spent) {
        let mut g = lock(&self.state);
        let spent = std::mem::take(&mut g.spent);
        (
            g.entries.len() as u64,
            g.adopted,
            g.discarded,
            g.saved,
            spent,
        )
    }

    /// What the discarded calls spent so far, priced by `price`.
    pub(super) fn spent_micro(&self, price: &dyn Fn(&str, &Usage) -> u64) -> u64 {
        lock(&self.state)
            .spent
            .by_model
            .iter()
            .map(|(m, u)| price(m, u))
            .sum()
    }

    /// Discarded calls so far, and started calls of unresolved branches.
    pub(super) fn counts(&self) -> (u64, u64) {
        let g = lock(&self.state);
        let held = g.entries.iter().filter(|e| e.fate == Fate::Held).count();
        (g.discarded, held as u64)
    }

    /// Calls started and not yet settled (they occupy backend slots).
    pub(super) fn in_flight(&self) -> usize {
        lock(&self.state)
            .entries
            .iter()
            .filter(|e| matches!(e.progress, Progress::Running(_)))
            .count()
    }
}

/// Cancels a held call and accounts what it spent (now, when known; a
/// call in flight reports it on arrival).
fn discard(spent: &mut Spent, e: &mut Entry) {
    e.fate = Fate::Discarded;
    e.cancel.cancel();
    let model = e.req.model.clone().unwrap_or_default();
    match std::mem::replace(&mut e.progress, Progress::Settled) {
        Progress::Running(w) => e.progress = Progress::Running(w),
        // Never sent: nothing spent.
        Progress::Waiting(_) => {}
        // A scheduled reply was the call: the backend counted it.
        Progress::Due { reply, .. } => {
            let r = reply.as_ref().and_then(|r| r.as_ref().ok());
            let model = r.map_or(model, |r| r.model.clone());
            spend(spent, model, r, None);
        }
        Progress::Done {
            reply, attempts, ..
        } => {
            let r = reply.as_ref().and_then(|r| r.as_ref().ok());
            let model = r.map_or(model, |r| r.model.clone());
            spend(spent, model, r, Some(&attempts));
        }
        Progress::Settled => {}
    }
}

/// Accounts a discarded call: its usage, and its requests (`attempts`;
/// `None`: a scheduled reply, which was one request).
fn spend(
    spent: &mut Spent,
    model: String,
    reply: Option<&LlmResponse>,
    attempts: Option<&[Attempt]>,
) {
    let usage = crate::llm::call_usage(reply, attempts.unwrap_or(&[]));
    spent.attempts += attempts.map_or(1, |a| a.len() as u64);
    spent.by_model.push((model, usage));
}

/// Requests compare without what is not asked (the text sink, the
/// critical-path mark).
fn same_request(a: &LlmRequest, b: &LlmRequest) -> bool {
    let strip = |r: &LlmRequest| LlmRequest {
        on_text: None,
        critical: false,
        attained: Default::default(),
        ..r.clone()
    };
    strip(a) == strip(b)
}

/// A speculated call's completion callback.
pub(super) fn on_done(table: &Arc<Table>, i: usize) -> OnDone {
    let t = Arc::clone(table);
    Box::new(move |reply, attempts| t.arrive(i, reply, attempts))
}
