//! The pass manager: runs a pipeline over a module, verifies after each pass
//! when asked, dumps IR under MLIR-style header lines and collects
//! statistics.

use super::{OptLevel, Pass, Pipeline, PipelineError};
use crate::entity::Op;
use crate::ops::Effect;
use crate::printer::print_module;
use crate::verifier::{verify_errors, VerifyError};
use crate::Module;
use rustc_hash::FxHashMap as HashMap;
use std::fmt::Write;
use std::time::{Duration, Instant};

/// When to print the IR. Pass names refer to the registry name (`cse`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrintOptions {
    /// Print before each pass with one of these names.
    pub before: Vec<String>,
    /// Print after each pass with one of these names.
    pub after: Vec<String>,
    pub before_all: bool,
    pub after_all: bool,
    /// Print after a pass only if it changed the module.
    pub after_change: bool,
}

/// Statistics of one pass run.
#[derive(Clone, Debug, PartialEq)]
pub struct PassStats {
    /// The pass as written in the pipeline (`fuse-ask{max-depth=3}`).
    pub name: String,
    pub changed: bool,
    pub time: Duration,
    /// Live ops in the module before and after the pass.
    pub ops_before: usize,
    pub ops_after: usize,
    /// Ops live before and not after, and the other way round.
    pub removed: usize,
    pub added: usize,
    /// Live LLM ops (static call sites) before and after.
    pub llm_calls_before: usize,
    pub llm_calls_after: usize,
    /// Pass-specific counters (`fused calls`, `folded`, ...).
    pub counters: Vec<(&'static str, u64)>,
}

/// Statistics of a pipeline run, one entry per pass in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub passes: Vec<PassStats>,
    pub total: Duration,
}

impl Stats {
    /// LLM call sites before the first pass (of the module passed to `run`).
    pub fn llm_calls_before(&self) -> usize {
        self.passes.first().map_or(0, |p| p.llm_calls_before)
    }

    /// LLM call sites after the last pass. Equals [`Self::llm_calls_before`]
    /// for an empty pipeline.
    pub fn llm_calls_after(&self) -> usize {
        self.passes
            .last()
            .map_or(self.llm_calls_before(), |p| p.llm_calls_after)
    }

    pub fn changed(&self) -> bool {
        self.passes.iter().any(|p| p.changed)
    }

    /// A table, one line per pass. With `timing = false` the output is
    /// deterministic (used by the golden tests).
    pub fn render(&self, timing: bool) -> String {
        let mut out = String::from("// ----- pass statistics ----- //\n");
        let width = self
            .passes
            .iter()
            .map(|p| p.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let _ = write!(
            out,
            "{:<width$}  {:<7}  {:>11}  {:>7}  {:>5}  {:>9}",
            "pass", "changed", "ops", "removed", "added", "llm calls"
        );
        if timing {
            out.push_str("       time");
        }
        out.push_str("  notes\n");
        for p in &self.passes {
            let _ = write!(
                out,
                "{:<width$}  {:<7}  {:>11}  {:>7}  {:>5}  {:>9}",
                p.name,
                if p.changed { "yes" } else { "no" },
                format!("{} -> {}", p.ops_before, p.ops_after),
                p.removed,
                p.added,
                format!("{} -> {}", p.llm_calls_before, p.llm_calls_after),
            );
            if timing {
                let _ = write!(out, "  {:>6.3} ms", p.time.as_secs_f64() * 1000.0);
            }
            let notes: Vec<String> = p
                .counters
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(k, n)| format!("{k}={n}"))
                .collect();
            if !notes.is_empty() {
                let _ = write!(out, "  {}", notes.join(" "));
            }
            // No trailing spaces.
            while out.ends_with(' ') {
                out.pop();
            }
            out.push('\n');
        }
        if timing {
            let _ = writeln!(out, "total {:.3} ms", self.total.as_secs_f64() * 1000.0);
        }
        out
    }
}

/// The module failed verification after a pass (a bug in that pass).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("the IR is invalid after pass `{pass}` ({} error(s))", errors.len())]
pub struct VerifyFailure {
    /// The pass as written in the pipeline.
    pub pass: String,
    pub errors: Vec<VerifyError>,
    /// The (invalid) IR after the pass, for debugging.
    pub ir: String,
}

/// Runs passes in order. See the module docs of [`crate::passes`].
pub struct PassManager {
    passes: Vec<(String, Box<dyn Pass>)>,
    verify_each: bool,
    print: PrintOptions,
    dumps: String,
}

impl PassManager {
    /// The pipeline of a preset.
    pub fn new(level: OptLevel) -> PassManager {
        // Presets only name registered passes without options, so building
        // cannot fail; fall back to an empty manager rather than panic.
        PassManager::from_pipeline(&level.pipeline()).unwrap_or_else(|_| PassManager::empty())
    }

    /// No passes.
    pub fn empty() -> PassManager {
        PassManager {
            passes: Vec::new(),
            verify_each: false,
            print: PrintOptions::default(),
            dumps: String::new(),
        }
    }

    pub fn from_pipeline(p: &Pipeline) -> Result<PassManager, PipelineError> {
        let mut pm = PassManager::empty();
        for spec in &p.passes {
            let pass = super::create_pass(spec)?;
            pm.passes.push((spec.to_string(), pass));
        }
        Ok(pm)
    }

    /// Parses a pipeline string (`canonicalize,fuse-ask{max-depth=3},cse`).
    pub fn parse(pipeline: &str) -> Result<PassManager, PipelineError> {
        PassManager::from_pipeline(&Pipeline::parse(pipeline)?)
    }

    /// Appends a pass (for custom passes).
    pub fn add(&mut self, pass: Box<dyn Pass>) -> &mut PassManager {
        self.passes.push((pass.name().to_string(), pass));
        self
    }

    /// Verify the module after every pass (errors only; warnings such as
    /// unused values are not failures). Always on in tests.
    pub fn verify_each(&mut self, on: bool) -> &mut PassManager {
        self.verify_each = on;
        self
    }

    pub fn print(&mut self, options: PrintOptions) -> &mut PassManager {
        self.print = options;
        self
    }

    /// The pipeline as a string.
    pub fn pipeline(&self) -> String {
        let names: Vec<&str> = self.passes.iter().map(|(n, _)| n.as_str()).collect();
        names.join(",")
    }

    /// IR dumps requested by [`PrintOptions`], accumulated since the last call.
    pub fn take_dumps(&mut self) -> String {
        std::mem::take(&mut self.dumps)
    }

    /// Runs every pass in order. Stops at the first pass after which the
    /// module does not verify (only with `verify_each`).
    pub fn run(&mut self, m: &mut Module) -> Result<Stats, VerifyFailure> {
        self.run_passes(m, true)
    }

    /// [`PassManager::run`] without the statistics: the census they take
    /// after every pass (a walk of every flow, its live ops sorted and
    /// compared with the previous census) was a tenth of an `aisc build`
    /// that does not show them (issue 40).
    pub fn run_unmeasured(&mut self, m: &mut Module) -> Result<(), VerifyFailure> {
        self.run_passes(m, false).map(drop)
    }

    /// The passes in order; with `measure`, each one's [`PassStats`].
    fn run_passes(&mut self, m: &mut Module, measure: bool) -> Result<Stats, VerifyFailure> {
        let start = Instant::now();
        let mut stats = Stats::default();
        let mut live = measure.then(|| Census::of(m));
        for (name, pass) in &mut self.passes {
            let short = pass.name();
            if self.print.before_all || self.print.before.iter().any(|p| p == short) {
                let _ = writeln!(self.dumps, "// ----- IR before {name} ----- //");
                self.dumps.push_str(&print_module(m));
            }
            let t0 = Instant::now();
            let changed = pass.run(m).changed();
            let time = t0.elapsed();
            if let Some(before) = live.take() {
                let (ops_before, calls) = (before.ops, before.llm_calls);
                let (after, removed, added) = Census::after(m, before.flows);
                stats.passes.push(PassStats {
                    name: name.clone(),
                    changed,
                    time,
                    ops_before,
                    ops_after: after.ops,
                    removed,
                    added,
                    llm_calls_before: calls,
                    llm_calls_after: after.llm_calls,
                    counters: pass.counters(),
                });
                live = Some(after);
            }
            let wanted = self.print.after_all
                || self.print.after.iter().any(|p| p == short)
                || (self.print.after_change && changed);
            if wanted {
                let _ = writeln!(
                    self.dumps,
                    "// ----- IR after {name} ({}) ----- //",
                    if changed { "changed" } else { "unchanged" }
                );
                self.dumps.push_str(&print_module(m));
            }
            if self.verify_each {
                let errors = verify_errors(m);
                if !errors.is_empty() {
                    return Err(VerifyFailure {
                        pass: name.clone(),
                        errors,
                        ir: print_module(m),
                    });
                }
            }
        }
        stats.total = start.elapsed();
        Ok(stats)
    }
}

/// Live ops of each flow (sorted by id), by agent name and flow name (ids
/// change when `dce` drops flows). Nested maps so that the next census
/// looks a flow up by its borrowed names and takes the keys over: cloning
/// both names and hashing every op into a set, for every flow after every
/// pass, made the statistics a large part of a many-flow build (issue 40).
type LiveOps = HashMap<String, HashMap<String, Vec<Op>>>;

/// What the statistics count of a module between passes.
struct Census {
    flows: LiveOps,
    ops: usize,
    llm_calls: usize,
}

impl Census {
    fn of(m: &Module) -> Census {
        Census::after(m, LiveOps::default()).0
    }

    /// The census of `m`, with the ops removed from and added to `before`
    /// (the previous census's flows, whose keys it reuses).
    fn after(m: &Module, mut before: LiveOps) -> (Census, usize, usize) {
        let mut census = Census {
            flows: LiveOps::default(),
            ops: 0,
            llm_calls: 0,
        };
        let (mut removed, mut added) = (0, 0);
        for a in m.agents.values() {
            let (key, mut old) = before
                .remove_entry(a.name.as_str())
                .unwrap_or_else(|| (a.name.clone(), HashMap::default()));
            let flows = census.flows.entry(key).or_default();
            for f in a.flows.values() {
                let mut live = f.walk();
                census.llm_calls += live
                    .iter()
                    .filter(|&&o| {
                        f.dfg
                            .ops
                            .get(o)
                            .is_some_and(|d| d.opcode.effect() == Effect::Llm)
                    })
                    .count();
                live.sort_unstable();
                census.ops += live.len();
                let (key, was) = old
                    .remove_entry(f.name.as_str())
                    .unwrap_or_else(|| (f.name.clone(), Vec::new()));
                let (r, a) = difference(&was, &live);
                removed += r;
                added += a;
                flows.insert(key, live);
            }
            // Flows (and below, agents) that are gone.
            removed += old.values().map(Vec::len).sum::<usize>();
        }
        removed += before
            .values()
            .flat_map(HashMap::values)
            .map(Vec::len)
            .sum::<usize>();
        (census, removed, added)
    }
}

/// Ops only in `a` and ops only in `b`, both sorted.
fn difference(a: &[Op], b: &[Op]) -> (usize, usize) {
    let (mut i, mut j, mut only_a, mut only_b) = (0, 0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => {
                only_a += 1;
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                only_b += 1;
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                i += 1;
                j += 1;
            }
        }
    }
    (only_a + a.len() - i, only_b + b.len() - j)
}
