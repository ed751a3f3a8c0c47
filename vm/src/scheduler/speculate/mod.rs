//! Speculation of `if` / `switch` arms (issue 36): when the condition of a
//! branch is an LLM reply and that call has just started, the arms' leading
//! LLM calls whose inputs are already known start too, within the run's
//! budget (`speculate = { max_extra_cost, max_extra_calls }`). Their
//! replies are held aside ([`table`]), not journaled. When the branch is
//! decided, the taken arm's ops adopt their replies (journaled then, by the
//! op's own completion, as if the call had just been made) and the other
//! arms' calls are cancelled and discarded: never journaled, never
//! delivered, their spend reported as speculation's extra cost.
//!
//! Safe by construction ([`plan`]): only LLM calls without tools (the op
//! table's `Llm` class: no side effect) and `inv` calls of tools the
//! catalogue declares read-only, which the host runs unasked and whose
//! inputs no sink check would look at, are speculated; every other tool,
//! memory, messages, prints and approvals only ever run in the taken arm.
//! Tool calls are held aside in [`tools`] and made on the run's
//! speculation threads (a tool call blocks). A resumed run replays the
//! condition from the journal, so nothing is speculated for it, and a
//! held reply is never in the journal.
//!
//! Only backends that start calls without waiting are speculated on (HTTP
//! providers, the simulator): a speculated LLM call needs no thread.

mod plan;
mod table;
mod tools;

use super::Run;
use crate::frame::{Frame, Role};
use crate::host::HostError;
use crate::llm::LlmRequest;
use crate::sync::lock;
use ais_ir::catalogue::Effect;
use serde_json::Value as Json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use crate::speculation::{Speculate, SpeculationSummary};
pub(super) use table::Adopted;

/// A branch speculated on: the arms' calls that may turn out extra, and
/// their estimated cost, until it is decided.
struct Charge {
    frame: u64,
    control: u32,
    calls: u64,
    micro_usd: u64,
    resolved: bool,
}

/// The run's speculation state.
pub(super) struct Spec {
    budget: Option<Speculate>,
    triggers: plan::Triggers,
    table: Arc<table::Table>,
    tools: tools::Tools,
    charges: Mutex<Vec<Charge>>,
}

/// Most speculation threads (each makes one tool call at a time).
const MAX_TOOL_THREADS: usize = 8;

impl Spec {
    pub(super) fn new(program: &ais_ir::bytecode::Program, budget: Option<Speculate>) -> Spec {
        let budget = budget.filter(Speculate::is_on);
        Spec {
            triggers: if budget.is_some() {
                plan::Triggers::of(program)
            } else {
                plan::Triggers::default()
            },
            budget,
            table: Arc::default(),
            tools: tools::Tools::default(),
            charges: Mutex::new(Vec::new()),
        }
    }

    fn off(&self) -> bool {
        self.budget.is_none() || self.triggers.is_empty()
    }

    /// The speculation threads the run needs for tool calls (0: none).
    pub(super) fn tool_threads(&self) -> usize {
        if self.off() {
            return 0;
        }
        self.triggers.tool_ops().min(MAX_TOOL_THREADS)
    }
}

impl<'r> Run<'r> {
    /// LLM op `op` of `frame` has been admitted: when its reply decides a
    /// branch, start the arms' known calls within the budget.
    pub(super) fn speculate_after(&self, frame: &Arc<Frame<'r>>, op: u32) {
        let spec = &self.spec;
        if spec.off()
            || !self.llm_async
            || !std::ptr::eq(frame.unit.program, self.program)
            || self.halted()
            || self.pausing()
        {
            return;
        }
        let Some(budget) = spec.budget else { return };
        for &control in spec.triggers.get(frame.flow, frame.region, op) {
            if lock(&spec.charges)
                .iter()
                .any(|c| c.frame == frame.id && c.control == control)
            {
                continue;
            }
            let agent = self.agent_name(frame.agent);
            let may_call = |tool: &str| self.may_speculate_tool(agent, tool);
            let labels_off = self.labels.off();
            let gate = plan::ToolGate {
                may_call: &may_call,
                labels: (!labels_off)
                    .then(|| {
                        plan::condition_label(self.program, &self.labels, frame, control, op)
                            .map(|pc| (&self.labels, pc))
                    })
                    .flatten(),
                labels_off,
            };
            let (arms, exhaustive) = plan::arms(self.program, frame, control, agent, &gate);
            let Some((calls, charge, micro)) = self.within_budget(&budget, arms, exhaustive) else {
                continue;
            };
            {
                let mut g = lock(&spec.charges);
                if g.iter()
                    .any(|c| c.frame == frame.id && c.control == control)
                {
                    continue;
                }
                g.push(Charge {
                    frame: frame.id,
                    control,
                    calls: charge,
                    micro_usd: micro,
                    resolved: false,
                });
            }
            for c in calls {
                let key = table::Key {
                    frame: frame.id,
                    control,
                    region: c.region,
                    op: c.op,
                };
                match c.call {
                    plan::Call::Llm(req) => self.start_speculated(key, *req),
                    plan::Call::Tool { tool, args } => {
                        spec.tools.push(key, agent, tool, args, self.cancel.child())
                    }
                }
            }
        }
    }

    /// May an arm's call of `tool` start before its branch is decided?
    /// Only when the catalogue declares the tool read-only (never by its
    /// name) and the host would run it for `agent` without asking anyone.
    fn may_speculate_tool(&self, agent: &str, tool: &str) -> bool {
        self.spec.tool_threads() > 0
            && self
                .labels
                .policy
                .catalogue
                .get(tool)
                .is_some_and(|d| d.effect == Effect::ReadOnly)
            && self.host.may_call_unasked(agent, tool)
    }

    /// The calls of `arms` to start, how many of them may turn out extra
    /// and their estimated cost (micro-USD), or `None` when none fit the budget (calls and cost) or the
    /// backend's free slots. All arms when they fit: with arms covering
    /// every outcome, one is taken, so its calls are not extra; else arms
    /// in order while they fit, all counted extra.
    fn within_budget(
        &self,
        budget: &Speculate,
        arms: Vec<Vec<plan::Candidate>>,
        exhaustive: bool,
    ) -> Option<(Vec<plan::Candidate>, u64, u64)> {
        let (discarded, _) = self.spec.table.counts();
        let discarded = discarded + self.spec.tools.discarded();
        let (outstanding, outstanding_cost) = {
            let g = lock(&self.spec.charges);
            g.iter()
                .filter(|c| !c.resolved)
                .fold((0u64, 0u64), |(n, m), c| (n + c.calls, m + c.micro_usd))
        };
        let room = u64::from(budget.max_extra_calls).saturating_sub(discarded + outstanding);
        let max_micro = (budget.max_extra_cost_usd * 1e6) as u64;
        let spent = self.spec_spent_micro();
        let cost_room = max_micro.saturating_sub(spent + outstanding_cost);
        let free = self
            .llm_limit
            .saturating_sub(self.llm.busy.load(std::sync::atomic::Ordering::SeqCst))
            .saturating_sub(self.spec.table.in_flight())
            // The deciding call itself may still wait for a slot.
            .saturating_sub(1) as u64;
        let counts: Vec<u64> = arms.iter().map(|a| a.len() as u64).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        // Only LLM calls take the backend's slots (tool calls run on the
        // speculation threads).
        let llm_calls = |a: &[plan::Candidate]| {
            a.iter()
                .filter(|c| matches!(c.call, plan::Call::Llm(_)))
                .count() as u64
        };
        let all_llm: u64 = arms.iter().map(|a| llm_calls(a)).sum();
        let all_cost: u64 = arms.iter().flatten().map(|c| self.estimated_cost(c)).sum();
        let cover = exhaustive && counts.iter().all(|&k| k > 0);
        // With arms covering every outcome one is taken: at most the
        // others are extra.
        let (charge, extra_cost) = if cover {
            (
                total - counts.iter().copied().min().unwrap_or(0),
                all_cost - self.cheapest(&arms).min(all_cost),
            )
        } else {
            (total, all_cost)
        };
        if charge <= room && extra_cost <= cost_room && all_llm <= free {
            return Some((arms.into_iter().flatten().collect(), charge, extra_cost));
        }
        // Some arms, in order, each counted extra.
        let mut out = Vec::new();
        let (mut n, mut llm, mut cost) = (0u64, 0u64, 0u64);
        for arm in arms {
            let k = arm.len() as u64;
            let l = llm_calls(&arm);
            let c: u64 = arm.iter().map(|c| self.estimated_cost(c)).sum();
            if k == 0 || n + k > room || llm + l > free || cost + c > cost_room {
                continue;
            }
            n += k;
            llm += l;
            cost += c;
            out.extend(arm);
        }
        (!out.is_empty()).then_some((out, n, cost))
    }

    /// The estimated cost of the cheapest arm (the one that may be taken
    /// when arms cover every outcome: not extra).
    fn cheapest(&self, arms: &[Vec<plan::Candidate>]) -> u64 {
        arms.iter()
            .map(|a| a.iter().map(|c| self.estimated_cost(c)).sum::<u64>())
            .min()
            .unwrap_or(0)
    }

    /// A call's cost before it is made, in micro-USD: a tool call's is 0
    /// (tools have no price).
    fn estimated_cost(&self, c: &plan::Candidate) -> u64 {
        match &c.call {
            plan::Call::Llm(req) => self.estimated_llm_cost(req),
            plan::Call::Tool { .. } => 0,
        }
    }

    /// An LLM call's cost before it is made, in micro-USD: its serialised
    /// request at 4 bytes a token, and its completion limit (256 tokens
    /// when it has none).
    fn estimated_llm_cost(&self, req: &LlmRequest) -> u64 {
        let bytes = serde_json::to_vec(req).map_or(0, |v| v.len()) as u64;
        let usage = crate::llm::Usage {
            prompt_tokens: bytes / 4,
            completion_tokens: u64::from(req.max_tokens.unwrap_or(256)),
            ..Default::default()
        };
        self.gate
            .budget
            .cost_of(req.model.as_deref().unwrap_or(""), &usage)
    }

    fn spec_spent_micro(&self) -> u64 {
        self.spec
            .table
            .spent_micro(&|m, u| self.gate.budget.cost_of(m, u))
    }

    fn start_speculated(&self, key: table::Key, req: LlmRequest) {
        let t = &self.spec.table;
        if let Some((delay, reply)) = self.backend.scheduled_reply(&req) {
            t.push_due(key, req, delay, reply);
            return;
        }
        let cancel = self.cancel.child();
        // A call whose prompt prefix a leader is writing to the provider's
        // cache waits for it like any other call of its class (`warmup`).
        if let Some(prefix) = self.backend.shared_prefix(&req) {
            let i = t.push_waiting(key, req, cancel);
            if !self.warmup.hold_speculated(&prefix, i) {
                self.spec_release(vec![i]);
            }
            return;
        }
        let i = t.push_running(key, req.clone(), cancel.clone());
        self.backend
            .start_many(vec![(req, cancel, table::on_done(t, i))]);
    }

    /// Speculated calls held for the warm-up go now (those still wanted).
    pub(super) fn spec_release(&self, held: Vec<usize>) {
        let t = &self.spec.table;
        let calls: Vec<_> = held
            .into_iter()
            .filter_map(|i| {
                let (req, cancel) = t.start_held(i)?;
                Some((req, cancel, table::on_done(t, i)))
            })
            .collect();
        if !calls.is_empty() {
            self.backend.start_many(calls);
        }
    }

    /// LLM op `op` of a taken arm is about to call: the held reply of the
    /// same request, when there is one.
    pub(super) fn spec_adopt(
        &self,
        frame: &Frame<'r>,
        op: u32,
        req: &LlmRequest,
    ) -> Option<Adopted> {
        if self.spec.off() {
            return None;
        }
        let owner = frame.owner.as_ref()?;
        if !matches!(owner.role, Role::Branch) {
            return None;
        }
        self.spec.table.adopt(
            table::Key {
                frame: owner.frame.id,
                control: owner.op,
                region: frame.region,
                op,
            },
            req,
        )
    }

    /// Tool op `op` of a taken arm is about to call `tool` with `args`:
    /// the outcome of the speculated call of the same request (waiting for
    /// it while it runs), and the labelled stored values it read.
    pub(super) fn spec_adopt_tool(
        &self,
        frame: &Frame<'r>,
        op: u32,
        tool: &str,
        args: &Json,
    ) -> Option<(Result<Json, HostError>, Vec<String>)> {
        if self.spec.tool_threads() == 0 {
            return None;
        }
        let owner = frame.owner.as_ref()?;
        if !matches!(owner.role, Role::Branch) {
            return None;
        }
        self.spec.tools.adopt(
            table::Key {
                frame: owner.frame.id,
                control: owner.op,
                region: frame.region,
                op,
            },
            tool,
            args,
        )
    }

    /// A speculation thread: makes the queued tool calls until the run
    /// ends. A call runs like its op's would (the host's access control,
    /// limits and log; `crate::host::flow` for the labels of what it
    /// reads), with no idempotency key (a read-only call needs none).
    pub(super) fn spec_tool_loop(&self) -> Vec<crate::telemetry::OpEvent> {
        while let Some(job) = self.spec.tools.next() {
            // A tool that panics fails its call; an op waiting to adopt
            // it must not wait forever.
            let call = || {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.host
                        .invoke_tool(&job.agent, &job.tool, &job.args, &job.cancel)
                }))
                .unwrap_or_else(|_| Err(HostError::new("tool.panicked", "the tool panicked")))
            };
            let (outcome, read) = if self.labels.off() {
                (call(), Vec::new())
            } else {
                crate::host::flow::with(Vec::new(), call)
            };
            self.spec.tools.finish(job.index, outcome, read);
        }
        Vec::new()
    }

    /// The run is over: held tool calls are discarded, the speculation
    /// threads stop.
    pub(super) fn spec_stop(&self) {
        self.spec.tools.stop();
    }

    /// Hands an adopted started call's reply to the op's completion.
    pub(super) fn spec_attach(&self, i: usize, done: crate::llm::OnDone) {
        self.spec.table.attach(i, done);
    }

    /// The branch of control op `control` of frame `frame` is decided
    /// (`taken`: its region; `None` when the condition failed).
    pub(super) fn spec_resolve(&self, frame: u64, control: u32, taken: Option<u32>) {
        if self.spec.off() {
            return;
        }
        {
            let mut g = lock(&self.spec.charges);
            let Some(c) = g
                .iter_mut()
                .find(|c| c.frame == frame && c.control == control && !c.resolved)
            else {
                return;
            };
            c.resolved = true;
        }
        self.spec.table.resolve(frame, control, taken);
        self.spec.tools.resolve(frame, control, taken);
    }

    /// After the run: held calls are discarded; the summary gets what
    /// speculation did, and the discarded calls' cost and requests.
    pub(super) fn spec_report(&self, summary: &mut crate::telemetry::RunSummary, grace: Duration) {
        let Some(budget) = self.spec.budget else {
            return;
        };
        self.spec.table.close(Instant::now() + grace);
        self.spec.tools.stop();
        let (speculated, adopted, discarded, saved, spent) = self.spec.table.totals();
        let t = self.spec.tools.totals();
        let mut s = SpeculationSummary {
            speculated: speculated + t.started,
            adopted: adopted + t.adopted,
            discarded: discarded + t.discarded,
            tool_speculated: t.started,
            tool_adopted: t.adopted,
            tool_discarded: t.discarded,
            saved_ms: (saved + t.saved).as_secs_f64() * 1e3,
            max_extra_calls: budget.max_extra_calls,
            max_extra_cost_usd: budget.max_extra_cost_usd,
            ..SpeculationSummary::default()
        };
        let mut micro = 0u64;
        for (model, usage) in &spent.by_model {
            s.extra_input_tokens += usage.prompt_tokens;
            s.extra_output_tokens += usage.completion_tokens;
            micro += self.gate.budget.cost_of(model, usage);
        }
        s.extra_cost_usd = micro as f64 / 1e6;
        summary.cost_usd += s.extra_cost_usd;
        summary.llm_attempts += spent.attempts;
        summary.speculation = Some(s);
    }
}
