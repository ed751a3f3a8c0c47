//! `aisc memory show|search|clear`, `aisc trace RUN_ID`, and the AAM host
//! that `aisc run` runs programs on.

use ais_vm::aam::inspect::{self, Which};
use ais_vm::aam::{AamHost, AamOptions, Storage};
use std::path::PathBuf;

/// Where memory lives (shared by `run`, `memory`, `trace`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct MemoryArgs {
    /// Memory directory (LTM database, episodic log); `:memory:` keeps
    /// everything in memory for this run only. Default: ./.apxm
    #[arg(long = "memory", value_name = "DIR", global = true)]
    pub memory: Option<String>,
    /// Where runs are journaled and queued: `postgres://USER@HOST/DB` for
    /// a store shared by a fleet of workers (docs/scale-out.md). Default:
    /// `$AIS_STORE`, else `runs.db` in the memory directory.
    #[arg(long = "store", value_name = "URL", global = true)]
    pub store: Option<String>,
}

impl MemoryArgs {
    pub fn storage(&self) -> Storage {
        Storage::from_arg(self.memory.as_deref())
    }

    /// The store URL given by `--store`, `AIS_STORE` or the config file's
    /// `store` (`None`: the memory directory's SQLite journal).
    /// An empty value (`--store ''`) means the memory directory, whatever
    /// the environment or the file say.
    pub fn store_url(&self) -> Option<String> {
        self.store
            .clone()
            .or_else(|| std::env::var("AIS_STORE").ok())
            .or_else(configured_store)
            .filter(|s| !s.trim().is_empty())
    }

    /// The fleet's PostgreSQL store (`--store`, `AIS_STORE` or the config),
    /// opened; without one, says `why` one is needed and gives exit code 2;
    /// when it cannot be opened, says why and gives 1.
    pub fn fleet_store(&self, why: &str) -> Result<std::sync::Arc<dyn ais_vm::store::Store>, i32> {
        let Some(url) = self
            .store_url()
            .filter(|u| ais_vm::store::is_postgres_url(u))
        else {
            eprintln!("error: {why}: give `--store postgres://...` (or set AIS_STORE)");
            return Err(2);
        };
        ais_vm::store::open(&url).map_err(|e| {
            eprintln!("error: {e}");
            1
        })
    }

    /// The store at `--store` (a URL), opened once per process: a server
    /// journals every run through one pool and one set of group-commit
    /// writers rather than connecting per run.
    pub fn shared_store(
        url: &str,
    ) -> Result<std::sync::Arc<dyn ais_vm::store::Store>, ais_vm::journal::JournalError> {
        type Open = std::collections::HashMap<String, std::sync::Arc<dyn ais_vm::store::Store>>;
        static OPEN: std::sync::OnceLock<std::sync::Mutex<Open>> = std::sync::OnceLock::new();
        let mut open = OPEN
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(s) = open.get(url) {
            return Ok(s.clone());
        }
        let s = ais_vm::store::open(url)?;
        open.insert(url.to_string(), s.clone());
        Ok(s)
    }

    /// The run store: `--store`, else the memory directory's `runs.db`
    /// (`Ok(None)` for `--memory :memory:`, which keeps no journal on disk).
    pub fn run_store(
        &self,
    ) -> Result<Option<std::sync::Arc<dyn ais_vm::store::Store>>, ais_vm::journal::JournalError>
    {
        if let Some(url) = self.store_url() {
            return ais_vm::store::open(&url).map(Some);
        }
        match ais_vm::journal::dir_of(&self.storage()) {
            Some(d) => ais_vm::store::open(&d.display().to_string()).map(Some),
            None => Ok(None),
        }
    }
}

/// The `--config PATH` of this invocation, for [`configured_store`]
/// (commands without backend options read the default file).
static CONFIG_PATH: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();

/// Notes the command's `--config PATH` (once, at start).
pub fn set_config_path(path: Option<PathBuf>) {
    let _ = CONFIG_PATH.set(path);
}

/// The `store` key of the configuration file (`--config`, else the
/// default file); `None` without one, or when the file does not load (the
/// run reports that itself).
fn configured_store() -> Option<String> {
    static STORE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    STORE
        .get_or_init(|| {
            let flags = ais_vm::config::Flags {
                config: CONFIG_PATH.get().cloned().flatten(),
                ..ais_vm::config::Flags::default()
            };
            ais_vm::config::Settings::load(&flags, &ais_vm::config::Env::from_process())
                .ok()?
                .config
                .store
        })
        .clone()
}

#[derive(clap::Subcommand, Debug)]
pub enum MemoryAction {
    /// List long-term memory entries and summarise the episodic log.
    Show {
        /// Only this agent's memory.
        #[arg(long)]
        agent: Option<String>,
        /// Which tier to show.
        #[arg(long, value_parser = ["ltm", "episodic", "all"], default_value = "all")]
        tier: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Keyword search over long-term memory, best match first.
    Search {
        /// Words to look for.
        query: String,
        /// Only this agent's entries.
        #[arg(long)]
        agent: Option<String>,
        /// At most this many results.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Delete long-term memory entries and/or the episodic log.
    Clear {
        /// Only this agent's memory.
        #[arg(long)]
        agent: Option<String>,
        /// Which tier to clear (default: all; with --agent, that agent's
        /// long-term memory: the episodic log is cleared only as a whole).
        #[arg(long, value_parser = ["ltm", "episodic", "all"])]
        tier: Option<String>,
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
        } => match mem
            .store_url()
            .filter(|u| ais_vm::store::is_postgres_url(u))
        {
            // The fleet's long-term memory, in the shared store.
            Some(url) => ais_vm::aam::ltm::Ltm::postgres(&url)
                .and_then(|l| inspect::search_in(&l, query, agent.as_deref(), *limit, *json)),
            None => inspect::search(&storage, query, agent.as_deref(), *limit, *json),
        },
        MemoryAction::Clear { agent, tier, yes } => {
            if !yes {
                eprintln!(
                    "error: `aisc memory clear` deletes memory in `{}` for good; add --yes",
                    storage.describe()
                );
                return 2;
            }
            match (agent, tier.as_deref()) {
                // One agent's memory: its LTM entries. The episodic log is
                // append-only and shared by every agent of a run.
                (Some(a), None) => inspect::clear(&storage, Some(a), Which::Ltm).map(|text| {
                    format!(
                        "{text}the episodic log is kept: it is cleared only as a whole (`aisc memory clear --tier episodic --yes`)\n"
                    )
                }),
                (agent, tier) => inspect::clear(&storage, agent.as_deref(), which(tier.unwrap_or("all"))),
            }
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

/// `aisc trace RUN_ID`: the run's episodic records, then its journaled
/// steps. The episodic log holds tool calls, memory, messages and prints but
/// not LLM calls, so a run of LLM calls only has no episodic records; the
/// run journal has them (and knows every run, so it resolves `last`).
pub fn trace(run: &str, mem: &MemoryArgs, json: bool) -> i32 {
    let storage = mem.storage();
    let journal_dir = ais_vm::journal::dir_of(&storage);
    let record = match mem.store_url() {
        // The shared store: wherever the run ran.
        Some(url) => match ais_vm::store::open(&url) {
            Ok(s) => ais_vm::journal::load_record_in(&*s, run).ok(),
            Err(e) => {
                eprintln!("error: {e}");
                return 1;
            }
        },
        None => journal_dir
            .as_deref()
            .filter(|d| d.join(ais_vm::journal::DB_FILE).is_file())
            .and_then(|d| ais_vm::journal::load_record(d, run).ok()),
    };
    let id = record
        .as_ref()
        .map_or_else(|| run.to_string(), |r| r.info.id.clone());
    let episodic = match mem
        .store_url()
        .filter(|u| ais_vm::store::is_postgres_url(u))
    {
        // The fleet's episodic log, in the shared store.
        Some(url) => ais_vm::aam::episodic::Episodic::postgres(&url).and_then(|log| {
            inspect::trace_in(
                &log,
                &ais_vm::store::postgres::redact(&url),
                &id,
                json,
                None,
            )
        }),
        None => inspect::trace(&storage, &id, json),
    };
    let Some(record) = record else {
        return match episodic {
            Ok(text) => {
                print!("{text}");
                0
            }
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        };
    };
    let episodic = match episodic {
        Ok(text) => text,
        // Known to the journal, absent from the log: no episodic records
        // (a run of LLM calls only; or, with a SQLite `--store`, a run
        // whose log is in another memory directory).
        Err(e)
            if matches!(e.code.as_str(), "trace.unknown_run" | "trace.empty")
                || mem.store_url().is_some() =>
        {
            if json {
                String::new()
            } else {
                format!("run {id}: no episodic records\n")
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    print!("{episodic}");
    if json {
        for s in &record.steps {
            println!(
                "{}",
                serde_json::json!({"run": id, "journal": true, "seq": s.seq, "kind": s.kind, "op": s.op, "tokens": s.tokens})
            );
        }
    } else {
        println!("journal: {}", super::steps::steps_line(&record.steps));
        for s in &record.steps {
            let state = match s.kind.as_str() {
                "done" => "",
                "intent" => "  (in doubt)",
                other => other,
            };
            println!("  #{:<4} {:<10} {:>6} tokens{state}", s.seq, s.op, s.tokens);
        }
    }
    0
}

/// The host `aisc run` uses: memory from `--memory`, tools and access from
/// the config file (already validated), printed lines on stdout.
pub fn open_host(
    mem: &MemoryArgs,
    config: ais_vm::aam::config::AamConfig,
    confirm: ais_vm::aam::Confirm,
    console: Option<std::sync::Arc<dyn ais_vm::aam::Console>>,
) -> Result<AamHost, String> {
    let mut host = AamHost::open(AamOptions {
        storage: mem.storage(),
        config,
        confirm,
        console,
    })
    .map_err(|e| e.to_string())?;
    // A fleet shares agent state (LTM, mailboxes, goals, beliefs, the
    // episodic log) through the store.
    if let Some(url) = mem
        .store_url()
        .filter(|u| ais_vm::store::is_postgres_url(u))
    {
        host.use_store(&url).map_err(|e| e.to_string())?;
    }
    for w in host.warnings() {
        eprintln!("{w}");
    }
    Ok(host)
}

/// The run id line printed after a run.
pub fn run_footer(host: &AamHost) -> String {
    match host.storage() {
        Storage::Dir(d) => format!(
            "run id {} (episodic log in {}; `aisc trace {}{}`)",
            host.run_id(),
            PathBuf::from(d).display(),
            host.run_id(),
            memory_flag(host.storage())
        ),
        Storage::Ephemeral => format!("run id {} (memory not persisted)", host.run_id()),
    }
}

/// ` --memory DIR` when a run's memory directory is not the default
/// (`./.apxm`), for the commands a hint suggests (`aisc trace`, `aisc
/// resume`), so that they find the run from the same folder.
pub fn memory_flag(storage: &Storage) -> String {
    match storage {
        Storage::Dir(d) if d.as_path() != std::path::Path::new(ais_vm::aam::DEFAULT_DIR) => {
            format!(" --memory {}", d.display())
        }
        _ => String::new(),
    }
}
