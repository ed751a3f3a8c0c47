//! The pass manager: runs a pipeline over a module, verifies after each pass
//! when asked, dumps IR under MLIR-style header lines and collects
//! statistics.

use super::{OptLevel, Pass, Pipeline, PipelineError};
use crate::entity::Op;
use crate::printer::print_module;
use crate::verifier::{verify_errors, VerifyError};
use crate::Module;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
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
        let start = Instant::now();
        let mut stats = Stats::default();
        let mut live = live_ops(m);
        let mut calls = super::util::llm_call_count(m);
        for (name, pass) in &mut self.passes {
            let short = pass.name();
            if self.print.before_all || self.print.before.iter().any(|p| p == short) {
                let _ = writeln!(self.dumps, "// ----- IR before {name} ----- //");
                self.dumps.push_str(&print_module(m));
            }
            let t0 = Instant::now();
            let changed = pass.run(m).changed();
            let time = t0.elapsed();
            let after = live_ops(m);
            let calls_after = super::util::llm_call_count(m);
            stats.passes.push(PassStats {
                name: name.clone(),
                changed,
                time,
                ops_before: live.values().map(HashSet::len).sum(),
                ops_after: after.values().map(HashSet::len).sum(),
                removed: only_in(&live, &after),
                added: only_in(&after, &live),
                llm_calls_before: calls,
                llm_calls_after: calls_after,
                counters: pass.counters(),
            });
            live = after;
            calls = calls_after;
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

/// Live ops, keyed by agent name, flow name and op id.
/// Live ops per flow, keyed by the flow's names (ids change when `dce`
/// drops flows). One key per flow, not per op: keying every op by two
/// strings made the statistics the slowest part of a large build.
type LiveOps = HashMap<(String, String), HashSet<Op>>;

fn live_ops(m: &Module) -> LiveOps {
    let mut out = LiveOps::default();
    for a in m.agents.values() {
        for f in a.flows.values() {
            out.entry((a.name.clone(), f.name.clone()))
                .or_default()
                .extend(f.walk());
        }
    }
    out
}

/// Ops live in `a` and not in `b`.
fn only_in(a: &LiveOps, b: &LiveOps) -> usize {
    a.iter()
        .map(|(k, ops)| match b.get(k) {
            Some(other) => ops.difference(other).count(),
            None => ops.len(),
        })
        .sum()
}
