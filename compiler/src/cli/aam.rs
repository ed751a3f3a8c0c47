//! `aisc memory show|search|clear`, `aisc trace RUN_ID`, and the AAM host
//! that `aisc run` runs programs on.

use ais_vm::aam::inspect::{self, Which};
use ais_vm::aam::{AamHost, AamOptions, Confirm, Storage};
use std::path::PathBuf;

/// Where memory lives (shared by `run`, `memory`, `trace`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct MemoryArgs {
    /// Memory directory (LTM database, episodic log); `:memory:` keeps
    /// everything in memory for this run only. Default: ./.apxm
    #[arg(long = "memory", value_name = "DIR", global = true)]
    pub memory: Option<String>,
}

impl MemoryArgs {
    pub fn storage(&self) -> Storage {
        Storage::from_arg(self.memory.as_deref())
    }
}

#[derive(clap::Subcommand, Debug)]
pub enum MemoryAction {
    /// List long-term memory entries and summarise the episodic log.
    Show {
        #[arg(long)]
        agent: Option<String>,
        #[arg(long, value_parser = ["ltm", "episodic", "all"], default_value = "all")]
        tier: String,
        #[arg(long)]
        json: bool,
    },
    /// Keyword search over long-term memory, best match first.
    Search {
        query: String,
        #[arg(long)]
        agent: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// Delete long-term memory entries and/or the episodic log.
    Clear {
        #[arg(long)]
        agent: Option<String>,
        #[arg(long, value_parser = ["ltm", "episodic", "all"], default_value = "all")]
        tier: String,
        /// Required: clearing cannot be undone.
        #[arg(long)]
        yes: bool,
    },
}

fn which(t: &str) -> Which {
    match t {
        "ltm" => Which::Ltm,
        "episodic" => Which::Episodic,
        _ => Which::All,
    }
}

pub fn memory(action: &MemoryAction, mem: &MemoryArgs) -> i32 {
    let storage = mem.storage();
    let r = match action {
        MemoryAction::Show { agent, tier, json } => {
            inspect::show(&storage, agent.as_deref(), which(tier), *json)
        }
        MemoryAction::Search {
            query,
            agent,
            limit,
            json,
        } => inspect::search(&storage, query, agent.as_deref(), *limit, *json),
        MemoryAction::Clear { agent, tier, yes } => {
            if !yes {
                eprintln!(
                    "error: `aisc memory clear` deletes memory in `{}` for good; add --yes",
                    storage.describe()
                );
                return 2;
            }
            inspect::clear(&storage, agent.as_deref(), which(tier))
        }
    };
    match r {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

pub fn trace(run: &str, mem: &MemoryArgs, json: bool) -> i32 {
    match inspect::trace(&mem.storage(), run, json) {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

/// The host `aisc run` uses: memory from `--memory`, tools and access from
/// the config file (already validated), printed lines on stdout.
pub fn open_host(
    mem: &MemoryArgs,
    config: ais_vm::aam::config::AamConfig,
    yes: bool,
) -> Result<AamHost, String> {
    let host = AamHost::open(AamOptions {
        storage: mem.storage(),
        config,
        confirm: Confirm::auto(yes),
        echo: true,
    })
    .map_err(|e| e.to_string())?;
    for w in host.warnings() {
        eprintln!("{w}");
    }
    Ok(host)
}

/// The run id line printed after a run.
pub fn run_footer(host: &AamHost) -> String {
    match host.storage() {
        Storage::Dir(d) => format!(
            "run id {} (episodic log in {}; `aisc trace {}`)",
            host.run_id(),
            PathBuf::from(d).display(),
            host.run_id()
        ),
        Storage::Ephemeral => format!("run id {} (memory not persisted)", host.run_id()),
    }
}
