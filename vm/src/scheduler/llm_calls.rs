//! LLM calls on backends that start without waiting: the table of calls
//! in flight, the inbox their replies arrive in, and the completion thread
//! that settles them.

use super::io::{Call, Job};
use super::{Run, Sink};
use crate::exec;
use crate::sync::{lock, wait_until, SPIN};
use crate::telemetry::{OpEvent, Status, Track};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long the end of a run waits for its cancelled calls to report the
/// requests they sent. A transport stops a cancelled exchange at once, so
/// this bounds only a call that does not notice, or one still waiting for
/// admission to a shared backend (`aisc serve`), which sent nothing.
pub(super) const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// LLM calls started on a backend that does not wait (see
/// [`Run::pump_llm`]): what each is for, by token.
#[derive(Default)]
pub(super) struct Calls<'r> {
    pub(super) table: std::collections::HashMap<u64, Pending<'r>, TokenHash>,
    /// Trace tracks of finished calls, reused so the trace shows at most
    /// `concurrency` LLM tracks.
    pub(super) free_slots: Vec<u32>,
    pub(super) slots: u32,
    /// Events of calls dropped before they started (the run had ended).
    pub(super) events: Vec<OpEvent>,
}

/// A started LLM call: its op, its request (for reading the reply) and,
/// for a scheduled reply, the reply and the delay it was due after.
pub(super) struct Pending<'r> {
    pub(super) call: Call<'r>,
    pub(super) req: crate::llm::LlmRequest,
    pub(super) scheduled: Option<(
        Duration,
        Result<crate::llm::LlmResponse, crate::llm::LlmError>,
    )>,
    /// A speculated call of the same request this call adopts
    /// (`speculate`): its reply, not a new call, settles this one.
    pub(super) adopted: Option<usize>,
}

/// Tokens are distinct sequential numbers: hashing them is a multiply.
#[derive(Clone, Copy, Default)]
pub(super) struct TokenHash;

impl std::hash::BuildHasher for TokenHash {
    type Hasher = TokenHasher;
    fn build_hasher(&self) -> TokenHasher {
        TokenHasher(0)
    }
}

pub(super) struct TokenHasher(u64);

impl std::hash::Hasher for TokenHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The outcome of one LLM call, for the completion thread.
pub(super) struct Outcome {
    pub(super) token: u64,
    pub(super) result: Result<crate::llm::LlmResponse, crate::llm::LlmError>,
    pub(super) attempts: Vec<crate::llm::Attempt>,
}

/// Where LLM outcomes wait for the completion thread: replies of started
/// calls as they arrive, scheduled replies until they are due. Shared with
/// the backends' reply callbacks, so it borrows nothing from the run.
#[derive(Default)]
pub(super) struct Inbox {
    pub(super) state: Mutex<InboxState>,
    pub(super) cv: Condvar,
}

#[derive(Default)]
pub(super) struct InboxState {
    pub(super) arrived: Vec<Outcome>,
    /// Scheduled replies by due time (the replies wait in the calls table).
    pub(super) due: std::collections::BinaryHeap<std::cmp::Reverse<(Instant, u64)>>,
    /// Leaders whose reply started (`warmup`).
    pub(super) first_bytes: Vec<u64>,
    pub(super) stop: bool,
}

/// What the completion thread takes at once.
#[derive(Default)]
pub(super) struct Ready {
    pub(super) arrived: Vec<Outcome>,
    pub(super) due: Vec<u64>,
    pub(super) first_bytes: Vec<u64>,
}

impl Inbox {
    pub(super) fn arrive(&self, o: Outcome) {
        lock(&self.state).arrived.push(o);
        self.cv.notify_one();
    }

    /// Call `token`'s reply started (its first streamed text).
    pub(super) fn first_byte(&self, token: u64) {
        lock(&self.state).first_bytes.push(token);
        self.cv.notify_one();
    }

    /// Calls are due at these times; wakes the completion thread only when
    /// one is earlier than everything it waits for (a fan-out of scheduled
    /// calls costs one wake-up, not one per call).
    pub(super) fn schedule_all(&self, due: Vec<(Instant, u64)>) {
        let mut g = lock(&self.state);
        let earliest = g.due.peek().map(|std::cmp::Reverse((t, _))| *t);
        let first = due.iter().map(|(t, _)| *t).min();
        g.due.extend(due.into_iter().map(std::cmp::Reverse));
        drop(g);
        if let Some(first) = first {
            if earliest.is_none_or(|t| first < t) {
                self.cv.notify_one();
            }
        }
    }

    pub(super) fn stop(&self) {
        lock(&self.state).stop = true;
        self.cv.notify_all();
    }

    /// After [`Inbox::stop`]: waits until `want` outcomes have arrived, or
    /// until `until`, and takes those that did.
    pub(super) fn drain(&self, want: usize, until: Instant) -> Vec<Outcome> {
        let mut g = lock(&self.state);
        while g.arrived.len() < want && Instant::now() < until {
            g = wait_until(&self.state, &self.cv, g, Some(until));
        }
        std::mem::take(&mut g.arrived)
    }

    /// Blocks until outcomes are ready (arrived, or due); `None` once
    /// stopped. `soon` is called once when a scheduled reply is due within
    /// [`SPIN`] (the wait then yields instead of sleeping, to be on time).
    pub(super) fn take(&self, soon: &dyn Fn()) -> Option<Ready> {
        let mut g = lock(&self.state);
        let mut warned = false;
        loop {
            if g.stop {
                return None;
            }
            let now = Instant::now();
            let mut ready = Ready {
                arrived: std::mem::take(&mut g.arrived),
                due: Vec::new(),
                first_bytes: std::mem::take(&mut g.first_bytes),
            };
            while let Some(std::cmp::Reverse((at, token))) = g.due.peek().copied() {
                if at > now {
                    break;
                }
                g.due.pop();
                ready.due.push(token);
            }
            if !ready.arrived.is_empty() || !ready.due.is_empty() || !ready.first_bytes.is_empty() {
                return Some(ready);
            }
            let next = g.due.peek().map(|std::cmp::Reverse((at, _))| *at);
            if !warned && next.is_some_and(|at| at.saturating_duration_since(now) <= SPIN) {
                warned = true;
                drop(g);
                soon();
                g = lock(&self.state);
                continue;
            }
            g = wait_until(&self.state, &self.cv, g, next);
        }
    }
}

impl<'r> Run<'r> {
    /// Starts queued LLM calls while the backend's limit allows (backends
    /// that [start without waiting](LlmBackend::starts_without_waiting)).
    /// Called by workers after queuing calls and by the completion thread
    /// after each reply.
    pub(super) fn pump_llm(&self) {
        let mut jobs = Vec::new();
        while let Some(job) = self.llm.try_pop(self.llm_limit) {
            jobs.push(job);
        }
        if !jobs.is_empty() {
            self.start_llms(jobs);
        }
    }

    /// A worker's burst of LLM calls: those the limit allows start now
    /// (together), the rest wait in the policy queue for a finishing call
    /// (the pump after queuing closes the race with one).
    pub(super) fn dispatch_llm(&self, batch: Vec<Job<'r>>) {
        let mut now = Vec::with_capacity(batch.len());
        let mut queued = false;
        let mut free = self.llm.try_reserve(self.llm_limit, batch.len());
        for job in batch {
            if free > 0 {
                free -= 1;
                now.push(job);
                continue;
            }
            queued = true;
            let (prio, agent) = job
                .frame
                .code
                .ops
                .get(job.op as usize)
                .map_or((0, job.frame.agent), |i| {
                    (job.frame.tail_ms.saturating_add(i.rem_ms), job.frame.agent)
                });
            self.llm.push_quiet(job, prio, agent);
        }
        if !now.is_empty() {
            self.start_llms(now);
        }
        if queued {
            self.pump_llm();
        }
    }

    /// Registers a batch of calls (one lock for the table, one for the
    /// inbox): scheduled replies go to the inbox, the others to the
    /// backend's `start_many`.
    pub(super) fn start_llms(&self, jobs: Vec<Job<'r>>) {
        let mut prepared = Vec::with_capacity(jobs.len());
        for job in jobs {
            if let Some(p) = self.prepare_llm(job) {
                let (frame, op) = (Arc::clone(&p.1.call.frame), p.1.call.op);
                // A call that can read what another is writing to the
                // provider's cache may wait for it (`warmup`).
                if let Some(p) = self.warm_up(p) {
                    prepared.push(p);
                }
                // Its reply may decide a branch: start the arms' calls,
                // now that the warm-up knows whether this call leads its
                // prefix class (speculated calls of the class wait for it).
                self.speculate_after(&frame, op);
            }
        }
        self.launch_llms(prepared);
    }

    /// Starts prepared calls: registers them, then hands them to the
    /// backend (or the inbox's timers).
    fn launch_llms(&self, prepared: Vec<(u64, Pending<'r>)>) {
        if prepared.is_empty() {
            return;
        }
        let mut due = Vec::new();
        let mut started = Vec::new();
        {
            let mut g = lock(&self.calls);
            for (token, mut pending) in prepared {
                let slot = g.free_slots.pop().unwrap_or_else(|| {
                    g.slots += 1;
                    g.slots - 1
                });
                pending.call.track = Track::Llm(slot);
                match &pending.scheduled {
                    Some((delay, _)) => due.push((Instant::now() + *delay, token)),
                    None => started.push((token, pending.req.clone(), pending.adopted)),
                }
                g.table.insert(token, pending);
            }
        }
        if !due.is_empty() {
            self.inbox.schedule_all(due);
        }
        if started.is_empty() {
            return;
        }
        let mut calls = Vec::with_capacity(started.len());
        for (token, req, adopted) in started {
            let inbox = Arc::clone(&self.inbox);
            let done: crate::llm::OnDone = Box::new(move |result, attempts| {
                // After the run ends nobody takes it; it is dropped.
                inbox.arrive(Outcome {
                    token,
                    result,
                    attempts,
                });
            });
            match adopted {
                Some(i) => self.spec_attach(i, done),
                None => calls.push((req, self.cancel.clone(), done)),
            }
        }
        if !calls.is_empty() {
            self.backend.start_many(calls);
        }
    }

    /// One call's request and, when the backend has its reply at once, the
    /// reply; `None` when the run has ended (the call is cancelled).
    pub(super) fn prepare_llm(&self, job: Job<'r>) -> Option<(u64, Pending<'r>)> {
        let (mut call, args, jkey) = job.into_call(Track::Llm(0), self.now());
        let op = call.op;
        let Some(instr) = call.frame.code.ops.get(op as usize) else {
            self.call_finished(&self.llm);
            return None;
        };
        if let Some(ev) = self.unwanted(&call) {
            if let Some(ev) = ev {
                self.observe_op(&ev);
                lock(&self.calls).events.push(ev);
            }
            self.call_finished(&self.llm);
            return None;
        }
        self.observe_start(&call.frame, op, call.start_ns);
        let req = match exec::llm_request(self.agent_name(call.frame.agent), instr, &args) {
            Ok(mut req) => {
                req.on_text = self.text_sink(&call.frame, op, None);
                req.critical = self.on_critical_path(&call.frame, op);
                req
            }
            Err(e) => {
                self.fail(&call.frame, op, e, &Sink::Global);
                self.call_finished(&self.llm);
                return None;
            }
        };
        call.jkey = jkey;
        let token = self.next_call.fetch_add(1, Ordering::Relaxed);
        let (scheduled, adopted) = match self.spec_adopt(&call.frame, op, &req) {
            Some(super::speculate::Adopted::Scheduled(delay, reply)) => {
                (Some((delay, reply)), None)
            }
            Some(super::speculate::Adopted::Started(i)) => (None, Some(i)),
            None => (self.backend.scheduled_reply(&req), None),
        };
        Some((
            token,
            Pending {
                call,
                req,
                scheduled,
                adopted,
            },
        ))
    }

    /// The completion thread of started LLM calls: settles each reply,
    /// then starts queued calls the freed slot allows. Returns the events
    /// of the calls it settled (and of those cancelled by the run's end).
    pub(super) fn replies_loop(&self) -> Vec<OpEvent> {
        let mut events = Vec::new();
        let soon = || {
            self.reply_soon.store(true, Ordering::Release);
            self.sleep.notify_all();
        };
        while let Some(ready) = self.inbox.take(&soon) {
            for token in ready.first_bytes {
                self.warm_release(token, true);
            }
            let settled_due = !ready.due.is_empty();
            let outcomes = ready.arrived.into_iter().map(|o| (o.token, Some(o)));
            let due = ready.due.into_iter().map(|t| (t, None));
            for (token, outcome) in outcomes.chain(due) {
                if let Some(ev) = self.settle_llm(token, outcome) {
                    self.observe_op(&ev);
                    events.push(ev);
                }
            }
            if settled_due {
                self.reply_soon.store(false, Ordering::Release);
            }
        }
        // The run is over: calls still out are cancelled. Those started on
        // the backend report the requests they sent once they see the
        // cancel, and every request sent counts (issue 32 #4): their
        // outcomes are awaited, for at most `CANCEL_GRACE`.
        let started = lock(&self.calls)
            .table
            .values()
            .filter(|p| p.scheduled.is_none())
            .count();
        let mut late: std::collections::HashMap<u64, Outcome> = self
            .inbox
            .drain(started, Instant::now() + CANCEL_GRACE)
            .into_iter()
            .map(|o| (o.token, o))
            .collect();
        let now = self.now();
        for (_, Pending { call: c, .. }) in self.warmup.take_all() {
            self.call_finished(&self.llm);
            if let Some(ev) = self
                .record
                .then(|| c.event(now, Status::Cancelled, None))
                .flatten()
            {
                self.observe_op(&ev);
                events.push(ev);
            }
        }
        let (table, mut dropped) = {
            let mut g = lock(&self.calls);
            let table: Vec<_> = g.table.drain().collect();
            (table, std::mem::take(&mut g.events))
        };
        events.append(&mut dropped);
        for (token, Pending { call: c, req, .. }) in table {
            self.call_finished(&self.llm);
            if self.record {
                let info = late
                    .remove(&token)
                    .and_then(|o| self.llm_outcome(&req, o.result, o.attempts).1);
                if let Some(ev) = c.event(now, Status::Cancelled, info) {
                    self.observe_op(&ev);
                    events.push(ev);
                }
            }
        }
        events
    }

    /// Settles call `token` with its outcome (a scheduled reply's is in
    /// the table), then starts queued calls the freed slot allows.
    pub(super) fn settle_llm(&self, token: u64, outcome: Option<Outcome>) -> Option<OpEvent> {
        let pending = {
            let mut g = lock(&self.calls);
            let pending = g.table.remove(&token);
            if let Some(Pending {
                call:
                    Call {
                        track: Track::Llm(slot),
                        ..
                    },
                ..
            }) = &pending
            {
                g.free_slots.push(*slot);
            }
            pending
        }?;
        let (result, attempts) = match (outcome, pending.scheduled) {
            (Some(o), _) => (o.result, o.attempts),
            (None, Some((delay, result))) => {
                let attempt = crate::llm::Attempt::single(self.backend.name(), &result, delay);
                (result, vec![attempt])
            }
            (None, None) => {
                // Not reachable: only scheduled calls are settled by token.
                self.call_finished(&self.llm);
                return None;
            }
        };
        self.warmup.observe(&pending.req, &attempts);
        // A leader that was not streamed releases its class now, before
        // its value makes calls of its class ready (they find it warm).
        self.warm_release(token, result.is_ok());
        let (value, info) = self.llm_outcome(&pending.req, result, attempts);
        let ev = self.settle(pending.call, value, info);
        self.call_finished(&self.llm);
        self.pump_llm();
        ev
    }

    /// Admits prepared call `p` through the warm-up (`warmup`): the call
    /// back when it goes now (a leader's text sink then reports its first
    /// text), `None` when it is held.
    fn warm_up(&self, p: (u64, Pending<'r>)) -> Option<(u64, Pending<'r>)> {
        let (token, pending) = p;
        // A scheduled reply waits for nobody; an adopted speculated call
        // was sent already, or waits for its class in the table.
        if pending.scheduled.is_some() || pending.adopted.is_some() {
            return Some((token, pending));
        }
        let Some(prefix) = self.backend.shared_prefix(&pending.req) else {
            return Some((token, pending));
        };
        let (critical, backend) = (pending.req.critical, pending.req.backend.clone());
        let (admit, pending) = self
            .warmup
            .admit(token, &prefix, critical, &backend, pending);
        let mut pending = pending?;
        if admit == super::warmup::Admit::Cold {
            pending.req.cache.points.clear();
        }
        if admit == super::warmup::Admit::Lead {
            let inbox = Arc::clone(&self.inbox);
            let inner = pending.req.on_text.take();
            let told = std::sync::atomic::AtomicBool::new(false);
            pending.req.on_text = Some(crate::llm::TextSink::new(move |e| {
                if matches!(e, crate::llm::TextEvent::Delta { .. })
                    && !told.swap(true, Ordering::AcqRel)
                {
                    inbox.first_byte(token);
                }
                if let Some(sink) = &inner {
                    sink.send(e);
                }
            }));
        }
        Some((token, pending))
    }

    /// Leader `token`'s reply started or it ended (`ok`: with a reply):
    /// the calls it held start, except those no longer wanted.
    fn warm_release(&self, token: u64, ok: bool) {
        let mut go = Vec::new();
        let (held, speculated) = self.warmup.release(token, ok);
        self.spec_release(speculated);
        for (t, pending) in held {
            match self.unwanted(&pending.call) {
                Some(ev) => {
                    if let Some(ev) = ev {
                        self.observe_op(&ev);
                        lock(&self.calls).events.push(ev);
                    }
                    self.call_finished(&self.llm);
                }
                None => go.push((t, pending)),
            }
        }
        self.launch_llms(go);
    }
}
