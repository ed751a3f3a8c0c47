//! A run's journal from the command line: its limits (`BudgetArgs`), its
//! start (`begin`) and the tools safe to call again after an in-doubt
//! call. Shared by `run`, `resume`, the
//! worker and the servers.

use super::aam::MemoryArgs;
use super::load::Loaded;
use ais_vm::journal::{self, Budget, Journal};
use ais_vm::store::sqlite::SqliteStore;
use std::sync::Arc;

/// Run limits beyond `--token-budget` (shared by `run` and `resume`).
#[derive(clap::Args, Debug, Clone)]
pub struct BudgetArgs {
    /// Stop the run after this many LLM calls (counting earlier attempts).
    #[arg(long, value_name = "N")]
    pub llm_call_budget: Option<u64>,
    /// Stop the run after this many seconds of wall-clock time (this attempt).
    #[arg(long, value_name = "SECONDS")]
    pub deadline: Option<f64>,
    /// Stop the run once its LLM calls cost this many USD (priced by the
    /// backend's `prices` in the config; this attempt).
    #[arg(long, value_name = "USD")]
    pub cost_budget: Option<f64>,
    /// Stop with WATCHDOG_LOOP when an LLM or tool call in a loop repeats
    /// with the same inputs this many times (0: off).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub watchdog: u32,
    /// Stop with LIMIT_FRAMES when more frames (calls, branches, loop
    /// iterations) are alive at once (default: `[limits] max_live_frames`
    /// in the config, else 200000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_frames: Option<u64>,
    /// Per-agent token limit `AGENT=N` (`*=N` for every agent; repeatable).
    #[arg(long, value_name = "AGENT=N")]
    pub agent_token_budget: Vec<String>,
    /// Per-agent LLM call limit `AGENT=N` (`*=N` for every agent; repeatable).
    #[arg(long, value_name = "AGENT=N")]
    pub agent_llm_call_budget: Vec<String>,
}

fn agent_limits(b: &BudgetArgs) -> Result<Vec<journal::AgentLimit>, String> {
    let mut out: Vec<journal::AgentLimit> = Vec::new();
    for (list, tokens) in [
        (&b.agent_token_budget, true),
        (&b.agent_llm_call_budget, false),
    ] {
        for item in list {
            let (agent, n) = item
                .split_once('=')
                .and_then(|(a, n)| Some((a.trim(), n.trim().parse::<u64>().ok()?)))
                .filter(|(a, _)| !a.is_empty())
                .ok_or_else(|| format!("expected AGENT=N (N a whole number), got `{item}`"))?;
            let i = match out.iter().position(|l| l.agent == agent) {
                Some(i) => i,
                None => {
                    out.push(journal::AgentLimit {
                        agent: agent.to_string(),
                        ..journal::AgentLimit::default()
                    });
                    out.len() - 1
                }
            };
            if tokens {
                out[i].tokens = Some(n);
            } else {
                out[i].llm_calls = Some(n);
            }
        }
    }
    Ok(out)
}

/// Tools that are safe to run again when an earlier attempt's call is in
/// doubt: those the tool catalogue declares read-only or idempotent, by
/// name and alias (`ais_stdlib`'s facts, not a list kept here).
pub(crate) fn idempotent_tools() -> Vec<String> {
    ais_ir::catalogue::Declarations::builtin()
        .iter()
        .filter(|d| d.effect != ais_ir::catalogue::Effect::SideEffecting)
        .flat_map(|d| std::iter::once(d.name.clone()).chain(d.aliases.iter().cloned()))
        .collect()
}

/// The budget of a run from the flags and the selected backend's prices.
pub fn budget(b: &BudgetArgs, settings: &ais_vm::config::Settings) -> Result<Budget, String> {
    Ok(Budget {
        tokens: settings.token_budget,
        llm_calls: b.llm_call_budget,
        deadline_ms: b.deadline.map(|s| (s.max(0.0) * 1000.0) as u64),
        cost_usd: b.cost_budget,
        prices: settings
            .selected()
            .prices
            .as_ref()
            .map(|p| vec![("*".to_string(), p.input_per_mtok, p.output_per_mtok)])
            .unwrap_or_default(),
        cache_multipliers: settings
            .selected()
            .prices
            .as_ref()
            .map(|p| p.cache_multipliers()),
        agents: agent_limits(b)?,
    })
}

/// Starts the journal of a new run (in memory for `--memory :memory:`);
/// `unshown`: see [`Journal::begin_unshown_in`].
pub fn begin(
    unshown: bool,
    mem: &MemoryArgs,
    run_id: &str,
    name: &str,
    loaded: &Loaded,
    entry: Option<&str>,
    args: &[(String, serde_json::Value)],
) -> Result<Arc<Journal>, String> {
    let bytes = ais_ir::bytecode::encode(&loaded.program)
        .map_err(|e| format!("cannot encode the program for the run journal: {e}"))?;
    let store: Arc<dyn ais_vm::store::Store> = match mem.store_url() {
        Some(url) => MemoryArgs::shared_store(&url).map_err(|e| e.to_string())?,
        None => match journal::dir_of(&mem.storage()) {
            Some(dir) => SqliteStore::shared(&dir).map_err(|e| e.to_string())?,
            None => Arc::new(SqliteStore::open(None).map_err(|e| e.to_string())?),
        },
    };
    let mut j = if unshown {
        Journal::begin_unshown_in(store, run_id, name, &bytes, entry, args)
    } else {
        Journal::begin_in(store, run_id, name, &bytes, entry, args)
    }
    .map_err(|e| e.to_string())?;
    j.set_idempotent_tools(idempotent_tools());
    Ok(Arc::new(j))
}
