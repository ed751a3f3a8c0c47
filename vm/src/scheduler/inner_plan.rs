//! Inner plans (`solve`). The op asks the model for a plan written in AIS
//! over the tools it offers; the edge's [`PlanCompiler`] checks it with the
//! language's own front end. A plan that does not check goes back to the
//! model with its diagnostics, for a bounded number of repair rounds
//! (`repairs`, default 2); one that never checks fails the op with
//! `plan.invalid` and has made no tool call. An accepted plan is kept in
//! the run's plan arena and linked: its entry flow starts as a frame owned
//! by the `solve` op (role `Plan`), so its ops run on the same workers, with
//! the same admission, journal and telemetry as the program's own, and its
//! return value becomes the op's.
//!
//! The planner's replies are journaled like the turns of a tool-calling
//! exchange (`<op key>#turn<N>`), so a resumed run reads the same plan
//! instead of asking again, and the plan's ops replay from their own
//! entries.

use super::early_calls::{self, EarlySite, Prefetch};
use super::io::Job;
use super::tool_loop::{Exchange, Site, Stop};
use super::{Run, Sink};
use crate::exec::{self, Class, OpError};
use crate::frame::{Frame, Owner, Role, Unit};
use crate::llm::{LlmRequest, LlmResponse, TextEvent, TextSink};
use crate::plan::{DeniedFlow, PlanSpec, Rejected};
use crate::telemetry::{OpEvent, Status, Track};
use crate::value::Val;
use std::sync::Arc;

/// A plan linked into a run, for the run's report (`aisc run --emit-plans`).
#[derive(Clone, Debug)]
pub struct LinkedPlan {
    /// Where it was made: `Agent.flow`, op index.
    pub made_by: String,
    pub op: u32,
    /// The flow id its entry flow has in telemetry.
    pub flow_id: u32,
    /// How many flows it has (consecutive ids, the entry's among them).
    pub flows: u32,
    /// The entry flow's index among them.
    pub entry: u32,
    /// Their names in the plan's program, in id order.
    pub flow_names: Vec<String>,
    pub body: String,
    pub source: String,
    pub ir: String,
}

impl LinkedPlan {
    /// A label per flow of the plan, in id order, for telemetry:
    /// `Agent.flow (plan of op N)` for its entry flow, followed by the
    /// flow's own name for the others.
    pub fn flow_labels(&self) -> impl Iterator<Item = String> + '_ {
        self.flow_names.iter().enumerate().map(move |(i, name)| {
            let plan = format!("{} (plan of op {})", self.made_by, self.op);
            if i as u32 == self.entry {
                plan
            } else {
                format!("{plan} {name}")
            }
        })
    }
}

impl<'r> Run<'r> {
    pub(super) fn run_solve(&self, job: Job<'r>, idx: u32) -> Option<OpEvent> {
        let (mut call, args, jkey) = job.into_call(Track::Llm(idx), self.now());
        let op = call.op;
        let instr = call.frame.code.ops.get(op as usize)?;
        // Its tokens are counted turn by turn, as they are spent.
        call.usage_accounted = true;
        if let Some(ev) = self.unwanted(&call) {
            return ev;
        }
        let mut ex = Exchange::new(self.backend.is_simulated());
        let site = Site {
            frame: &call.frame,
            op,
            instr,
            agent: self.agent_name(call.frame.agent),
            jkey: jkey.as_ref(),
            read: std::sync::atomic::AtomicU64::new(call.frame.label(instr.result)),
        };
        let linked = self.plan_and_link(&site, &call.frame, &args, &mut ex);
        let end = self.now();
        match linked {
            // The op completes when the plan's frame does.
            Ok(()) => self
                .record
                .then(|| call.event(end, Status::Ok, Some(ex.info())))
                .flatten(),
            Err(Stop::Fail(e)) => {
                call.jkey = jkey.clone();
                self.settle(call, Err(e), Some(ex.info()))
            }
            Err(Stop::Halted) => self.halted_event(&call, ex),
        }
    }

    /// Planner rounds until a plan checks, then links it. Calls the
    /// streaming planner starts early run on threads of a scope that ends
    /// once they have all finished (the plan's ops that take their results
    /// wait for them, not for the scope).
    fn plan_and_link(
        &self,
        site: &Site<'_, 'r>,
        frame: &Arc<Frame<'r>>,
        args: &[Val],
        ex: &mut Exchange,
    ) -> Result<(), Stop> {
        let Some(planner) = self.planner else {
            return Err(Stop::Fail(crate::plan::unavailable()));
        };
        let mut req = exec::llm_request(site.agent, site.instr, args).map_err(Stop::Fail)?;
        ex.model = req.model.clone().unwrap_or_default();
        let spec = PlanSpec::of(site.agent, site.instr, &mut req);
        let guide = planner.guide(&spec);
        let rounds = exec::repairs(site.instr).saturating_add(1);
        let mut asks = crate::plan::PlannerRounds::new(&mut req, guide, rounds);
        let prefetch = Arc::new(Prefetch::default());
        let inputs = self.plan_inputs(site);
        let linked = std::thread::scope(|scope| {
            // The last plan's denied flows, when that is why it was refused.
            let mut denied: Vec<DeniedFlow> = Vec::new();
            for round in 1..=rounds {
                if round > 1 {
                    if self.halted() || site.frame.is_cancelled() {
                        return Err(Stop::Halted);
                    }
                    if self.over_budget(site.frame, site.op, site.instr, Class::Llm) {
                        return Err(Stop::Halted);
                    }
                }
                // Each round asks differently (the plans refused so far,
                // every problem found, a higher temperature).
                asks.prepare(round, &mut req);
                let early = EarlySite {
                    agent: site.agent,
                    jkey: site.jkey.map(|j| j.key.as_str()),
                    round,
                };
                let turn =
                    |req: &LlmRequest, ex: &mut Exchange| self.model_turn(site, req, round, ex);
                let start_ready = |text: &str| {
                    if let Some(prefix) = planner.check_prefix(&spec, text) {
                        let ready = early_calls::ready_calls(&prefix, &spec.read_only);
                        self.start_early(scope, early, &prefetch, ready);
                    }
                };
                let at = (site.frame, site.op, round);
                let reply = self.planner_turn(&mut req, ex, turn, start_ready, at)?;
                let plan = match planner.check(&spec, &reply.text) {
                    Ok(plan) => plan,
                    Err(r) => {
                        ex.plan_checks
                            .push(check_record(round, "invalid", &r.problems));
                        denied.clear();
                        asks.reject(r);
                        continue;
                    }
                };
                // Before any op of the plan runs: its flows under the
                // labels its inputs carry now (the runtime check of each
                // sink stays as a second line).
                let policy = &self.labels.policy;
                let flows = match &inputs {
                    Some(inputs) => planner.check_flows(&plan, inputs, policy),
                    None => Vec::new(),
                };
                if flows.is_empty() || !policy.enforced() {
                    if !flows.is_empty() {
                        let texts: Vec<String> = flows.iter().map(|f| f.text.clone()).collect();
                        ex.plan_checks.push(check_record(round, "warned", &texts));
                    }
                    return self.link(site, frame, plan, Arc::clone(&prefetch));
                }
                let problems: Vec<String> = flows.iter().map(|f| f.text.clone()).collect();
                ex.plan_checks
                    .push(check_record(round, "denied", &problems));
                denied = flows;
                asks.reject(Rejected {
                    body: plan.body,
                    problems,
                });
            }
            if denied.is_empty() {
                Err(Stop::Fail(crate::plan::invalid(rounds, asks.last())))
            } else {
                Err(Stop::Fail(crate::plan::denied(rounds, &denied)))
            }
        });
        ex.tool_calls.extend(prefetch.records());
        linked
    }

    /// The untrusted sources a plan made now by `site` depends on (its
    /// frame's context, the `solve` op's goal and context, `@plan`), the
    /// same label the plan's frame will run under; `None` with the policy
    /// off (no flow is checked).
    fn plan_inputs(&self, site: &Site<'_, 'r>) -> Option<Vec<String>> {
        if self.labels.off() {
            return None;
        }
        let label = site.frame.label_of(site.frame.code.data(site.instr)) | self.labels.plan;
        Some(self.labels.untrusted_names(label))
    }

    /// One planner turn. Its text, as it streams in, goes to the observer
    /// and, at each line break, to `on_lines` (the reply so far, on this
    /// thread) while the turn runs on a thread of `scope`.
    fn planner_turn(
        &self,
        req: &mut LlmRequest,
        ex: &mut Exchange,
        turn: impl FnOnce(&LlmRequest, &mut Exchange) -> Result<LlmResponse, Stop> + Send,
        mut on_lines: impl FnMut(&str),
        (frame, op, round): (&Frame<'r>, u32, u32),
    ) -> Result<LlmResponse, Stop> {
        let (tx, rx) = crossbeam::channel::unbounded::<Option<TextEvent>>();
        let observer = self.text_sink(frame, op, Some(round));
        let text_tx = tx.clone();
        req.on_text = Some(TextSink::new(move |e: &TextEvent| {
            if let Some(o) = &observer {
                o.send(e);
            }
            let _ = text_tx.send(Some(e.clone()));
        }));
        let req: &LlmRequest = req;
        std::thread::scope(|inner| {
            let running = std::thread::Builder::new()
                .name("ais-planner".into())
                .spawn_scoped(inner, move || {
                    let r = turn(req, ex);
                    let _ = tx.send(None);
                    r
                });
            let Ok(running) = running else {
                return Err(Stop::Fail(OpError::new(
                    "internal.thread",
                    "cannot start a thread for the planner's turn",
                )));
            };
            let mut text = String::new();
            let mut seen = 0usize;
            while let Ok(Some(event)) = rx.recv() {
                match event {
                    TextEvent::Delta { text: t, .. } => text.push_str(&t),
                    TextEvent::Reset { .. } => {
                        text.clear();
                        seen = 0;
                    }
                }
                if text[seen..].contains('\n') {
                    seen = text.len();
                    on_lines(&text);
                }
            }
            running.join().unwrap_or_else(|_| {
                Err(Stop::Fail(OpError::new(
                    "internal.thread",
                    "the planner's turn panicked",
                )))
            })
        })
    }

    /// Starts an accepted plan as a frame owned by the `solve` op.
    fn link(
        &self,
        site: &Site<'_, 'r>,
        frame: &Arc<Frame<'r>>,
        plan: crate::plan::AcceptedPlan,
        prefetch: Arc<Prefetch>,
    ) -> Result<(), Stop> {
        let fail = |code: &str, m: String| Stop::Fail(OpError::new(code, m));
        let entry = plan
            .program
            .find_entry(None)
            .map_err(|e| fail("internal.plan", e.to_string()))?;
        let flows = u32::try_from(plan.program.flows.len()).unwrap_or(u32::MAX);
        let flow_names = (0..flows).map(|f| plan.program.flow_name(f)).collect();
        let (body, source, ir) = (plan.body, plan.source, plan.ir);
        let Some((_, program, prefetch)) = self.plans.add(plan.program, prefetch) else {
            return Err(fail(
                "plan.limit",
                format!(
                    "this run already linked {} plans, the most one run may",
                    self.plans.capacity()
                ),
            ));
        };
        let base = {
            let mut linked = crate::sync::lock(&self.linked);
            let base = self.linked_flows(&linked);
            linked.push(LinkedPlan {
                made_by: frame.unit.program.flow_name(frame.flow),
                op: site.op,
                flow_id: base.saturating_add(entry),
                flows,
                entry,
                flow_names,
                body,
                source,
                ir,
            });
            base
        };
        let unit = Unit {
            program,
            base,
            prefetch: Some(prefetch),
        };
        let tail = frame.tail_ms + site.instr.rem_ms.saturating_sub(site.instr.est_ms);
        let owner = Owner {
            frame: frame.clone(),
            op: site.op,
            role: Role::Plan,
        };
        let child = self
            .new_frame(
                unit,
                entry,
                0,
                Some(owner),
                tail,
                frame.depth.saturating_add(1),
            )
            .map_err(Stop::Fail)?;
        self.start_frame(&child, [], &[], None, &Sink::Global)
            .map_err(Stop::Fail)?;
        if !self.injector.is_empty() {
            self.sleep.notify_one();
        }
        Ok(())
    }

    /// The first flow id free for the next plan: past the program's flows
    /// and those of the plans linked so far.
    fn linked_flows(&self, linked: &[LinkedPlan]) -> u32 {
        let own = u32::try_from(self.program.flows.len()).unwrap_or(u32::MAX);
        linked
            .iter()
            .fold(own, |base, p| base.saturating_add(p.flows))
    }
}

/// A planner round's refused or flagged plan, for the `solve` op's event.
fn check_record(
    turn: u32,
    verdict: &'static str,
    problems: &[String],
) -> crate::telemetry::PlanCheck {
    crate::telemetry::PlanCheck {
        turn,
        verdict,
        problems: problems.to_vec(),
    }
}
