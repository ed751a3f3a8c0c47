//! Speculation's public data (issue 36): the budget a run is given and
//! what speculation did in it. Plain types, below the configuration (which
//! reads the budget), the telemetry summary (which reports it) and the
//! scheduler (which speculates: `crate::scheduler` `speculate`).

use serde::{Deserialize, Serialize};

/// A run's speculation budget: at most `max_extra_calls` calls (LLM and
/// read-only tool calls) and
/// `max_extra_cost_usd` spent on arms that are not taken. Either at 0:
/// no speculation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Speculate {
    pub max_extra_calls: u32,
    pub max_extra_cost_usd: f64,
}

impl Speculate {
    /// Whether the budget allows any speculation.
    pub fn is_on(&self) -> bool {
        self.max_extra_calls > 0 && self.max_extra_cost_usd > 0.0
    }
}

/// What speculation did in a run (the run summary's `speculation`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SpeculationSummary {
    /// Calls (LLM and read-only tool calls) started before their branch
    /// was decided.
    pub speculated: u64,
    /// Of those, calls whose arm was taken: their op used the reply.
    pub adopted: u64,
    /// Calls of arms not taken (cancelled; never journaled).
    pub discarded: u64,
    /// Of `speculated`, `adopted` and `discarded`: the tool calls.
    #[serde(default)]
    pub tool_speculated: u64,
    #[serde(default)]
    pub tool_adopted: u64,
    #[serde(default)]
    pub tool_discarded: u64,
    /// Tokens and cost (at the configured prices) of the discarded calls,
    /// included in the run's `cost_usd`.
    pub extra_input_tokens: u64,
    pub extra_output_tokens: u64,
    pub extra_cost_usd: f64,
    /// Time adopted calls had already run when their op started (the
    /// critical-path time speculation took off the run, at most).
    pub saved_ms: f64,
    /// The budget the run had.
    pub max_extra_calls: u32,
    pub max_extra_cost_usd: f64,
}
