//! Inner plans: the contract between the VM and the front end that checks
//! them, and where accepted plans live while a run executes them.
//!
//! A `solve` op asks the model for a plan written in AIS. The VM does not
//! know the language: the edge gives it a [`PlanCompiler`] (the `aisc`
//! command line passes one built on `ais-compiler`), which turns the
//! model's reply into a checked, compiled program or into the diagnostics
//! the model gets back. The scheduler then links the plan's bytecode into
//! the run (`scheduler::inner_plan`): its ops run on the same workers,
//! journal and telemetry as the program's own.

use crate::exec::OpError;
use crate::llm::{LlmRequest, ToolSpec};
use crate::prefetch::Prefetch;
use ais_ir::bytecode::Program;
use ais_ir::bytecode::{Imm, Instr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// What a plan may use.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanSpec {
    /// The agent the plan acts for.
    pub agent: String,
    /// The tools it may call (with the schemas offered to the model).
    pub tools: Vec<ToolSpec>,
    /// Those of them declared read-only: the plan's calls to them need not
    /// wait for each other.
    pub read_only: Vec<String>,
}

impl PlanSpec {
    /// The spec of a `solve` op, taking the tools out of its request: the
    /// planner writes code, it does not call them itself.
    pub fn of(agent: &str, instr: &Instr, request: &mut LlmRequest) -> PlanSpec {
        let read_only = match &instr.imm {
            Imm::Llm(a) => a
                .tools
                .iter()
                .filter(|t| t.read_only)
                .map(|t| t.name.clone())
                .collect(),
            _ => Vec::new(),
        };
        PlanSpec {
            agent: agent.to_string(),
            tools: std::mem::take(&mut request.tools),
            read_only,
        }
    }
}

/// How much each repair round raises the planner's temperature.
pub const TEMPERATURE_STEP: f64 = 0.3;

/// A `solve` op's planner rounds: what each one asks. A round after a
/// rejected plan sends that plan, every problem found in any round so far
/// (a model that fixes one problem and brings back an earlier one is told
/// both), its round number, and a temperature raised by
/// [`TEMPERATURE_STEP`] per round (from the op's, else 0; at most 1), so no
/// two rounds send the same request and a deterministic server does not
/// answer a repair with the plan it just rejected.
#[derive(Clone, Debug)]
pub struct PlannerRounds {
    goal: String,
    guide: String,
    rounds: u32,
    temperature: Option<f64>,
    rejected: Vec<Rejected>,
}

impl PlannerRounds {
    /// Takes the goal out of `req` (its prompt) and remembers its
    /// temperature.
    pub fn new(req: &mut LlmRequest, guide: String, rounds: u32) -> PlannerRounds {
        PlannerRounds {
            goal: std::mem::take(&mut req.prompt),
            guide,
            rounds,
            temperature: req.temperature,
            rejected: Vec::new(),
        }
    }

    /// Sets `req`'s prompt and temperature for round `round` (1-based).
    pub fn prepare(&self, round: u32, req: &mut LlmRequest) {
        req.prompt = planner_prompt(&self.goal, &self.guide, &self.rejected, round, self.rounds);
        req.temperature = match round {
            0 | 1 => self.temperature,
            r => Some(
                (self.temperature.unwrap_or(0.0) + TEMPERATURE_STEP * f64::from(r - 1)).min(1.0),
            ),
        };
    }

    /// Records why the round's plan was refused.
    pub fn reject(&mut self, r: Rejected) {
        self.rejected.push(r);
    }

    /// The last refused plan.
    pub fn last(&self) -> Option<Rejected> {
        self.rejected.last().cloned()
    }
}

/// The planner's prompt: the goal and the guide; after a rejected plan,
/// that plan and every problem found so far, by round.
fn planner_prompt(
    goal: &str,
    guide: &str,
    rejected: &[Rejected],
    round: u32,
    rounds: u32,
) -> String {
    let mut p = format!("Goal: {goal}\n\n{guide}");
    if let Some(r) = rejected.last() {
        p.push_str(&format!(
            "\n\nThis is attempt {round} of {rounds}. Your previous plan was rejected by the checker:\n```ais\n"
        ));
        p.push_str(&r.body);
        p.push_str("\n```\nProblems found so far:\n");
        for (i, r) in rejected.iter().enumerate() {
            for problem in &r.problems {
                p.push_str(&format!("- attempt {}: {problem}\n", i + 1));
            }
        }
        p.push_str("Write a corrected plan that has none of these problems.");
    }
    p
}

/// `plan.invalid`: no plan checked in `rounds` rounds; the payload lists
/// the last plan's diagnostics.
pub fn invalid(rounds: u32, last: Option<Rejected>) -> OpError {
    let problems = last.map(|r| r.problems).unwrap_or_default();
    OpError::new(
        "plan.invalid",
        format!(
            "the model's plan did not check after {rounds} round{}: {}",
            if rounds == 1 { "" } else { "s" },
            problems.first().map_or("no plan", String::as_str)
        ),
    )
    .with_payload(serde_json::json!({
        "rounds": rounds,
        "diagnostics": problems,
    }))
}

/// A flow of an accepted plan that the policy denies, found by the edge's
/// static check ([`PlanCompiler::check_flows`]) before the plan runs.
#[derive(Clone, Debug, PartialEq)]
pub struct DeniedFlow {
    pub sink: String,
    pub argument: String,
    /// The untrusted sources reaching the argument.
    pub sources: Vec<String>,
    /// The path from the first source to the sink, source first.
    pub path: Vec<String>,
    /// The whole finding rendered for the model (position in the plan,
    /// `warning[W0020]`, path, help).
    pub text: String,
}

/// `policy.denied`: the model's plan still routed untrusted data to a
/// denied sink argument after `rounds` rounds; structured like the
/// run-time denial (`sink`, `argument`, `sources`, `path`) with every
/// finding of the last plan. No op of it ran.
pub fn denied(rounds: u32, flows: &[DeniedFlow]) -> OpError {
    let first = flows.first();
    let field = |f: fn(&DeniedFlow) -> &str| first.map_or("", f).to_string();
    let sources = first.map(|f| f.sources.clone()).unwrap_or_default();
    let path = first.map(|f| f.path.clone()).unwrap_or_default();
    OpError::new(
        crate::ifc::DENIED,
        format!(
            "the model's plan still routed untrusted data from {} to argument `{}` of `{}` after {rounds} round{}; it did not run (path: {})",
            sources.join(", "),
            field(|f| &f.argument),
            field(|f| &f.sink),
            if rounds == 1 { "" } else { "s" },
            path.join(" -> ")
        ),
    )
    .with_payload(serde_json::json!({
        "sink": field(|f| &f.sink),
        "argument": field(|f| &f.argument),
        "sources": sources,
        "path": path,
        "rounds": rounds,
        "diagnostics": flows.iter().map(|f| f.text.as_str()).collect::<Vec<_>>(),
    }))
}

/// `plan.unavailable`: a `solve` op in a run without a plan compiler.
pub fn unavailable() -> OpError {
    OpError::new(
        "plan.unavailable",
        "this run has no plan compiler: `solve` needs one (aisc run provides it; an embedding passes RunOptions::planner)",
    )
}

/// A plan that checked.
#[derive(Clone, Debug)]
pub struct AcceptedPlan {
    /// The plan text as the model wrote it (the flow body).
    pub body: String,
    /// The whole program the plan became (what `aisc check` accepts).
    pub source: String,
    /// Its optimised IR, as text (what `ais-opt` accepts).
    pub ir: String,
    /// Its bytecode; its entry flow is the plan.
    pub program: Program,
}

/// Why a reply is not an acceptable plan: the text it was read as, and
/// each problem, rendered for the model to read (line and column in the
/// plan, code, message, help).
#[derive(Clone, Debug, PartialEq)]
pub struct Rejected {
    pub body: String,
    pub problems: Vec<String>,
}

/// Checks and compiles plans; provided by the edge.
pub trait PlanCompiler: Send + Sync + std::fmt::Debug {
    /// The planner's instructions for `spec`: what to write, the subset of
    /// the language, the tools' signatures.
    fn guide(&self, spec: &PlanSpec) -> String;
    /// Reads the plan in a model's reply and checks it against `spec`.
    fn check(&self, spec: &PlanSpec, reply: &str) -> Result<AcceptedPlan, Rejected>;
    /// For a reply still streaming in: the statements complete so far that
    /// check, compiled as a plan of their own that keeps every call (its
    /// entry flow's read-only tool calls with known arguments start
    /// early). `None` (the default) when nothing may start yet.
    fn check_prefix(&self, _spec: &PlanSpec, _reply_so_far: &str) -> Option<Program> {
        None
    }
    /// The flows of an accepted `plan` that `policy` denies when its
    /// inputs (the `solve` op's goal and context, which the plan was
    /// written from, so everything it computes depends on them) carry the
    /// untrusted sources `inputs`; the plan's tool calls are the sinks.
    fn check_flows(
        &self,
        plan: &AcceptedPlan,
        inputs: &[String],
        policy: &ais_ir::ifc::FlowPolicy,
    ) -> Vec<DeniedFlow>;
}

/// Accepted plans of one run, at addresses that stay put while frames
/// point into them. Fixed capacity: a run links at most this many plans
/// (`plan.limit` past it), which also bounds what model output can make a
/// run hold in memory.
pub(crate) struct PlanArena {
    slots: Box<[OnceLock<Linked>]>,
    next: AtomicUsize,
}

/// A linked plan's program and the calls started for it while it streamed.
type Linked = (Program, Arc<Prefetch>);

/// Plans one run may link.
pub const MAX_PLANS_PER_RUN: usize = 1024;

impl PlanArena {
    pub(crate) fn new(capacity: usize) -> PlanArena {
        PlanArena {
            slots: (0..capacity).map(|_| OnceLock::new()).collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// Keeps `program` and the early calls made for it; returns its index
    /// and references valid for the arena's life, or `None` when the arena
    /// is full.
    pub(crate) fn add(
        &self,
        program: Program,
        prefetch: Arc<Prefetch>,
    ) -> Option<(usize, &Program, &Prefetch)> {
        let i = self.next.fetch_add(1, Ordering::SeqCst);
        let slot = self.slots.get(i)?;
        let _ = slot.set((program, prefetch));
        slot.get().map(|(p, f)| (i, p, &**f))
    }

    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }
}
