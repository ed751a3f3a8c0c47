//! A run's limits (tokens, LLM calls, deadline, cost) and how a call is
//! priced against them.

/// Limits of one run. Exceeding one stops the run (not catchable by `try`)
/// with code `budget.<what>` and payload `{limit, used}`; the journal keeps
/// every completed op, so the run can be resumed with a higher limit.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Budget {
    /// Input + output tokens of all LLM calls of the run (every attempt).
    pub tokens: Option<u64>,
    /// LLM calls of the run (every attempt; replayed calls are not repeated).
    pub llm_calls: Option<u64>,
    /// Wall-clock limit of this attempt, in milliseconds.
    pub deadline_ms: Option<u64>,
    /// Cost in USD of this run's LLM calls, priced by `prices`.
    pub cost_usd: Option<f64>,
    /// Model name (or `*`) -> (USD per 1M input tokens, USD per 1M output tokens).
    pub prices: Vec<(String, f64, f64)>,
    /// Price multipliers of cached input relative to the input price:
    /// (cache reads, cache writes), from the backend's `prices` table or
    /// its protocol's defaults; `None`: 1×.
    pub cache_multipliers: Option<(f64, f64)>,
    /// Per-agent limits (this attempt); agent `*` applies to every agent
    /// without its own entry.
    pub agents: Vec<AgentLimit>,
}

/// The limits of one agent's LLM use within a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentLimit {
    pub agent: String,
    pub tokens: Option<u64>,
    pub llm_calls: Option<u64>,
}

impl Budget {
    pub fn is_empty(&self) -> bool {
        self.tokens.is_none()
            && self.llm_calls.is_none()
            && self.deadline_ms.is_none()
            && self.cost_usd.is_none()
            && self.agents.is_empty()
    }

    /// The limits of `agent` (its own entry, else `*`).
    pub fn agent(&self, agent: &str) -> Option<&AgentLimit> {
        self.agents
            .iter()
            .find(|a| a.agent == agent)
            .or_else(|| self.agents.iter().find(|a| a.agent == "*"))
    }

    /// Cost in micro-dollars of one call's `usage`, its cached input
    /// priced by `cache_multipliers` (reads, writes; 1× when unset).
    pub fn cost_of(&self, model: &str, usage: &crate::llm::Usage) -> u64 {
        let Some((_, pi, po)) = self
            .prices
            .iter()
            .find(|(m, _, _)| m == model)
            .or_else(|| self.prices.iter().find(|(m, _, _)| m == "*"))
        else {
            return 0;
        };
        let (read, write) = self.cache_multipliers.unwrap_or((1.0, 1.0));
        let input = usage.priced_input(read, write);
        (input * pi + usage.completion_tokens as f64 * po)
            .round()
            .max(0.0) as u64
    }

    /// Cost in micro-dollars of one call.
    pub fn cost_micro_usd(&self, model: &str, input: u64, output: u64) -> u64 {
        let Some((_, pi, po)) = self
            .prices
            .iter()
            .find(|(m, _, _)| m == model)
            .or_else(|| self.prices.iter().find(|(m, _, _)| m == "*"))
        else {
            return 0;
        };
        (input as f64 * pi + output as f64 * po).round().max(0.0) as u64
    }
}
