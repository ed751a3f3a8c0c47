//! The Agent Abstract Machine: the [`Host`] the VM runs agents on.
//!
//! Per agent instance the AAM holds **beliefs** (a typed key–value store,
//! initialised by the VM from the program's `beliefs {}`), **goals** (a
//! priority queue initialised from `goals {}`, read and changed through the
//! `goals_*` tools), **capabilities** (the registry of tools the agent may
//! call, with JSON-schema validation of arguments before the call and of
//! results after it) and three **memory tiers** with independent locks:
//!
//! - STM: in memory, sharded per key, bounded; LRU-K evicts to SQLite;
//! - LTM: SQLite (WAL, transactions, versioned schema, FTS5 search);
//! - episodic: an append-only, checksummed log file.
//!
//! Every AAM transition (belief reads and writes, memory reads and writes,
//! tool calls and their denials, messages, goal changes, prints) is
//! appended to the episodic log with the run id, agent, op, inputs,
//! outputs or error, and timing. See `docs/runtime.md`, "Agent Abstract
//! Machine", for the language-level semantics.

/// Tools every agent has without declaring them, besides the stdlib's
/// built-ins (`ais_stdlib::builtins`). The front end reads the same names
/// from `ais_stdlib::HOST_TOOLS` (a test keeps the two equal) so calling
/// them does not warn W0003.
pub const AAM_TOOL_NAMES: &[&str] = &[
    "memory_search",
    "store_fact",
    "goals_list",
    "goals_next",
    "goals_add",
    "goals_complete",
    "update_goal",
    "enqueue",
    "claim",
    "inbox",
    "bash",
    "thread_history",
    "thread_state",
    "thread_set",
];

mod beliefs;
mod claim;
pub mod config;
pub mod episodic;
mod goals;
pub mod inspect;
mod key_order;
pub mod ltm;
pub mod mcp;
mod memory;
pub mod messaging;
pub mod remote;
pub mod stm;
mod thread;
mod tool_registry;
pub mod tools;

use crate::host::{Host, HostError, Message, ToolFn};
use crate::llm::jsonschema;
use crate::llm::CancelToken;
use crate::sync::lock;
use ais_ir::bytecode::{Program, TypeEntry};
use ais_ir::Tier;
use config::AamConfig;
use episodic::Episodic;
use ltm::{text_of, Ltm};
use serde_json::{json, Map, Value as Json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;
use stm::Stm;
use tools::{Kind, Limiter, Origin, ToolSpec};

/// LTM namespace of the LTM tier.
pub const LTM_NS: &str = "ltm";
/// Database file inside the memory directory.
pub const DB_FILE: &str = "memory.db";
/// The legacy episodic log file (imported into `memory.db` when found).
pub const LOG_FILE: &str = episodic::LEGACY_FILE;
/// `qmem(TRACE_QUERY, "episodic")`: the agent's transitions in this run.
pub const TRACE_QUERY: &str = "@trace";

pub use crate::store::storage::DEFAULT_DIR;

pub use crate::store::agent::{words, Received};
pub use goals::Goal;
pub use memory::content_key;

pub use crate::store::storage::Storage;

/// Asks whether an agent may run a destructive tool. The edge provides it
/// (the CLI asks on the terminal); the VM never reads its input itself.
pub trait Confirmer: Send + Sync {
    /// `true` allows `agent` to run `tool` (first called with `args`) for
    /// the rest of the run.
    fn confirm(&self, agent: &str, tool: &str, args: &Json) -> bool;
}

/// What happens when an agent calls a destructive tool.
#[derive(Clone)]
pub enum Confirm {
    /// `--yes`: run it.
    Yes,
    /// Ask whoever runs the program (the CLI: a `[y/N]` prompt on the
    /// terminal). Asked once per agent and tool; the answer holds for the run.
    Ask(Arc<dyn Confirmer>),
    /// Refuse with `tool.confirmation_required` (nobody to ask).
    Deny,
}

impl std::fmt::Debug for Confirm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Confirm::Yes => "Yes",
            Confirm::Ask(_) => "Ask",
            Confirm::Deny => "Deny",
        })
    }
}

/// Where what the AAM has to show a person goes while a run is under way:
/// the program's printed lines and warnings. The VM never writes to the
/// terminal itself; the edge (the CLI) provides this.
pub trait Console: Send + Sync {
    /// A line the program printed (it is also kept: [`AamHost::printed`]).
    fn print(&self, line: &str);
    /// Something went wrong that does not stop the run (e.g. an episodic
    /// record could not be written).
    fn warn(&self, message: &str);
}

/// How to build an [`AamHost`].
#[derive(Clone)]
pub struct AamOptions {
    pub storage: Storage,
    pub config: AamConfig,
    pub confirm: Confirm,
    /// Shows printed lines and run-time warnings; `None`: printed lines are
    /// only kept, warnings dropped.
    pub console: Option<Arc<dyn Console>>,
}

impl std::fmt::Debug for AamOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AamOptions")
            .field("storage", &self.storage)
            .field("config", &self.config)
            .field("confirm", &self.confirm)
            .field("console", &self.console.is_some())
            .finish()
    }
}

impl Default for AamOptions {
    fn default() -> Self {
        AamOptions {
            storage: Storage::Ephemeral,
            config: AamConfig::default(),
            confirm: Confirm::Deny,
            console: None,
        }
    }
}

/// A capability declared by the program: JSON schemas of its arguments and result.
#[derive(Clone, Debug)]
struct CapSig {
    args: Json,
    result: Json,
}

fn type_schema(types: &[TypeEntry], t: u32, depth: u32) -> Json {
    if depth > 32 {
        return json!({});
    }
    match types.get(t as usize) {
        Some(TypeEntry::Str) => json!({"type": "string"}),
        Some(TypeEntry::Number) => json!({"type": "number"}),
        Some(TypeEntry::Bool) => json!({"type": "boolean"}),
        Some(TypeEntry::Null) => json!({"type": "null"}),
        Some(TypeEntry::List(i)) => {
            json!({"type": "array", "items": type_schema(types, *i, depth + 1)})
        }
        _ => json!({}),
    }
}

/// The Agent Abstract Machine host.
pub struct AamHost {
    run_id: String,
    swap_ns: String,
    storage: Storage,
    config: AamConfig,
    confirm: Confirm,
    console: Option<Arc<dyn Console>>,
    clock: Arc<AtomicU64>,
    seq: AtomicU64,
    stm: RwLock<HashMap<String, Arc<Stm>>>,
    swapped: Mutex<HashSet<(String, String)>>,
    /// The agent store (`crate::store::AgentStore`): long-term memory,
    /// work queues, mailboxes, goals, beliefs — and the episodic log, a
    /// view of the same store. A memory directory's database is shared by
    /// the hosts of one process (a server opens it once); in memory each
    /// host's is made on first use. `use_store` swaps in a fleet's.
    ltm: Ltm,
    episodic: Episodic,
    caps: RwLock<HashMap<(String, String), CapSig>>,
    tools: RwLock<BTreeMap<String, Arc<ToolSpec>>>,
    /// Configured MCP servers, started on first use.
    mcp: Vec<Arc<mcp::McpServer>>,
    printed: Mutex<Vec<String>>,
    /// Destructive tools confirmed (or not), per agent and tool.
    answers: crate::sync::AskOnce<(String, String)>,
    warnings: Vec<String>,
    settings: ais_stdlib::Settings,
    /// Every tool's declaration (`crate::catalogue`): aliases resolve
    /// through it before access is checked.
    catalogue: Arc<ais_ir::catalogue::Declarations>,
    /// The run store of this run's journal: where the thread the run was
    /// made on lives (`thread.rs`); unset: no thread (the `thread_*`
    /// tools then say so).
    threads: std::sync::OnceLock<Arc<dyn crate::store::Store>>,
}

fn new_run_id() -> String {
    let ms = ais_stdlib::time::unix_ms();
    let t = ais_stdlib::time::rfc3339(ms);
    // 2025-01-31T12:34:56.789Z -> 20250131-123456
    let compact: String = t
        .chars()
        .take(19)
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect::<String>()
        .replace('T', "-");
    // A per-process base (time and pid) plus a per-process counter: the
    // runs one process starts in the same second (a server's) get distinct
    // ids for the first 65536 of them.
    static BASE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = *BASE.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        u64::from(nanos) ^ (u64::from(std::process::id()) << 16)
    });
    let salt = base.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed)) & 0xffff;
    format!("{compact}-{salt:04x}")
}

impl AamHost {
    /// Opens storage, registers the built-in and subprocess tools and
    /// notes the MCP servers (started lazily: on the first call of one of
    /// their tools, or by [`AamHost::start_mcp_servers`]). Warnings (e.g.
    /// a dropped torn tail of the episodic log) are in
    /// [`AamHost::warnings`].
    pub fn open(options: AamOptions) -> Result<AamHost, HostError> {
        let (store, mut warnings) = match &options.storage {
            Storage::Ephemeral => (crate::store::open_agent_sqlite(None)?.0, Vec::new()),
            Storage::Dir(d) => {
                std::fs::create_dir_all(d).map_err(|e| {
                    HostError::new(
                        "memory.dir",
                        format!("cannot create the memory directory `{}`: {e}", d.display()),
                    )
                })?;
                let (store, w) = crate::store::open_agent_sqlite(Some(&d.join(DB_FILE)))?;
                (store, w.into_iter().collect())
            }
        };
        let run_id = new_run_id();
        let cfg = options.config.clone();
        let host = AamHost {
            swap_ns: format!("stm:{run_id}:{}", std::process::id()),
            run_id,
            storage: options.storage.clone(),
            confirm: options.confirm.clone(),
            console: options.console.clone(),
            clock: Arc::new(AtomicU64::new(0)),
            seq: AtomicU64::new(0),
            stm: RwLock::default(),
            swapped: Mutex::default(),
            ltm: Ltm::of(store.clone()),
            episodic: Episodic::of(store),
            caps: RwLock::default(),
            tools: RwLock::default(),
            mcp: cfg
                .mcp_servers
                .iter()
                .map(|m| Arc::new(mcp::McpServer::new(m.clone())))
                .collect(),
            printed: Mutex::default(),
            answers: crate::sync::AskOnce::default(),
            warnings: Vec::new(),
            catalogue: Arc::new(cfg.declarations()),
            threads: std::sync::OnceLock::new(),
            settings: ais_stdlib::Settings {
                workspace: cfg.workspace.clone(),
                http_timeout: cfg.http_timeout,
                search: tool_registry::search_provider(&cfg),
                allow_private_network: cfg.allow_private_network.clone(),
                ..ais_stdlib::Settings::default()
            },
            config: cfg,
        };
        host.register_builtins();
        for r in host.config.remote_agents.clone() {
            let remote = Arc::new(remote::RemoteAgent::new(r));
            host.add_tool(ToolSpec {
                name: remote.name().to_string(),
                description: remote.description(),
                origin: Origin::Remote,
                input_schema: None,
                output_schema: None,
                destructive: false,
                limit: Some(Arc::new(Limiter::new(remote.concurrency()))),
                kind: Kind::Provided(Arc::new(tools::RemoteTool(remote))),
            });
        }
        for s in host.config.subprocess.clone() {
            host.add_tool(ToolSpec {
                name: s.name.clone(),
                description: s.description.clone(),
                origin: Origin::Subprocess,
                input_schema: s.input_schema.as_ref().map(config::toml_to_json),
                output_schema: s.output_schema.as_ref().map(config::toml_to_json),
                destructive: s.destructive,
                limit: s.concurrency.map(|n| Arc::new(Limiter::new(n))),
                kind: Kind::Provided(Arc::new(crate::catalogue::subprocess::Subprocess(
                    Arc::new(s),
                ))),
            });
        }
        let mut host = host;
        warnings.retain(|w| !w.is_empty());
        host.warnings = warnings;
        Ok(host)
    }

    /// An ephemeral host with default settings (tests, embedding).
    pub fn ephemeral() -> AamHost {
        match AamHost::open(AamOptions::default()) {
            Ok(h) => h,
            // An in-memory SQLite database cannot fail to open short of
            // running out of memory.
            Err(e) => panic!("cannot open an in-memory AAM: {e}"),
        }
    }

    /// Loads the program's agents: goals and capability signatures.
    pub fn load_program(&self, program: &Program) {
        for a in &program.agents {
            let declared: Vec<(String, i64, String)> = a
                .goals
                .iter()
                .map(|g| (g.name.clone(), g.priority, g.description.clone()))
                .collect();
            self.add_declared_goals(&a.name, &declared);
        }
        let mut caps = self.caps.write().unwrap_or_else(|e| e.into_inner());
        for a in &program.agents {
            for c in &a.capabilities {
                let mut props = Map::new();
                for (p, t) in &c.params {
                    props.insert(p.clone(), type_schema(&program.types, *t, 0));
                }
                let required: Vec<Json> = c.params.iter().map(|(p, _)| json!(p)).collect();
                caps.insert(
                    (a.name.clone(), c.name.clone()),
                    CapSig {
                        args: json!({"type": "object", "required": required, "properties": props}),
                        result: type_schema(&program.types, c.result, 0),
                    },
                );
            }
        }
    }

    /// The capabilities the program's agents declare that no tool
    /// provides: `(agent, capability)`. Starts the MCP servers that could
    /// provide one (their tools are known only once they run), so a run can
    /// say so before it makes any call.
    pub fn unprovided_capabilities(&self, program: &Program) -> Vec<(String, String)> {
        let never = CancelToken::new();
        let mut out = Vec::new();
        for a in &program.agents {
            for c in &a.capabilities {
                if self.tool(&c.name).is_none()
                    && self.mcp.iter().any(|s| s.may_provide(&c.name))
                    && self.start_mcp_for(&c.name, &never).is_err()
                {
                    // Its server is configured but does not start: a call
                    // fails with the server's error (unused, it is harmless).
                    continue;
                }
                if self.tool(&c.name).is_none() {
                    out.push((a.name.clone(), c.name.clone()));
                }
            }
        }
        out
    }

    /// Provides each of `caps` (from [`AamHost::unprovided_capabilities`])
    /// with a stand-in that answers from the capability's declared result
    /// type, for runs on the offline simulator: strings say
    /// `[simulated NAME] ARGS`, so the output shows they are not real.
    pub fn simulate_capabilities(&self, caps: &[(String, String)]) {
        let sigs = self.caps.read().unwrap_or_else(|e| e.into_inner());
        for (agent, name) in caps {
            if self.tool(name).is_some() {
                continue;
            }
            let result = sigs
                .get(&(agent.clone(), name.clone()))
                .map_or_else(|| json!({}), |s| s.result.clone());
            let tool = name.clone();
            let f: ToolFn = Arc::new(move |args: &Json| {
                let label = format!("[simulated {tool}] {args}");
                Ok(jsonschema::generate(&result, &mut |_path| label.clone()))
            });
            self.add_tool(ToolSpec {
                name: name.clone(),
                description: format!(
                    "simulated from the signature of capability {name} (no tool provides it)"
                ),
                origin: Origin::Embedded,
                kind: Kind::Provided(Arc::new(crate::catalogue::embedded::Embedded(f))),
                input_schema: None,
                output_schema: None,
                destructive: false,
                limit: None,
            });
        }
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// A resumed run keeps its id: its episodic records, footer and
    /// `aisc trace` name the run being resumed, not a new one.
    pub fn set_run_id(&mut self, id: &str) {
        self.run_id = id.to_string();
    }

    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// Warnings from opening the host (a legacy log imported, ...).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    pub fn printed(&self) -> Vec<String> {
        lock(&self.printed).clone()
    }

    /// Descriptions of every registered tool. Starts the MCP servers not
    /// started yet, since their tools are only known once they run; a
    /// server that fails is left out (see [`AamHost::start_mcp_servers`]
    /// and [`AamHost::mcp_status`] for its error).
    pub fn tool_list(&self) -> Vec<Json> {
        let _ = self.start_mcp_servers();
        self.tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|t| t.describe())
            .collect()
    }

    fn warn(&self, message: &str) {
        if let Some(c) = &self.console {
            c.warn(message);
        }
    }
}

/// `inv` arguments may arrive as JSON text (templates produce strings).
fn parse_args(args: &Json) -> Json {
    match args {
        Json::String(s) => serde_json::from_str::<Json>(s).unwrap_or_else(|_| args.clone()),
        other => other.clone(),
    }
}

impl Host for AamHost {
    fn invoke_tool(
        &self,
        agent: &str,
        tool: &str,
        args: &Json,
        cancel: &CancelToken,
    ) -> Result<Json, HostError> {
        let t0 = Instant::now();
        let args = parse_args(args);
        let r = self.invoke(agent, tool, &args, cancel);
        self.log(
            agent,
            "inv",
            json!({"tool": tool, "args": args}),
            r.as_ref(),
            t0,
        );
        r
    }

    fn invoke_tool_keyed(
        &self,
        agent: &str,
        tool: &str,
        args: &Json,
        cancel: &CancelToken,
        idempotency_key: Option<&str>,
    ) -> Result<Json, HostError> {
        tools::with_idempotency_key(idempotency_key, || {
            self.invoke_tool(agent, tool, args, cancel)
        })
    }

    fn may_call_unasked(&self, agent: &str, tool: &str) -> bool {
        // A tool not registered yet (an MCP server not started) is not
        // known to need no confirmation.
        self.may_call(agent, tool).is_ok() && self.tool(tool).is_some_and(|t| !t.destructive)
    }

    fn exec(&self, agent: &str, args: &[Json], cancel: &CancelToken) -> Result<Json, HostError> {
        let t0 = Instant::now();
        let Some((cmd, rest)) = args.split_first() else {
            let e = HostError::new("exec.usage", "exec needs a command");
            self.log(agent, "exec", json!({"args": args}), Err(&e), t0);
            return Err(e);
        };
        let name = text_of(cmd);
        let rest = Json::Array(rest.to_vec());
        let r = self.invoke(agent, &name, &rest, cancel);
        self.log(
            agent,
            "exec",
            json!({"tool": name, "args": rest}),
            r.as_ref(),
            t0,
        );
        r
    }

    fn mem_query(&self, agent: &str, tier: Tier, query: &Json) -> Result<Json, HostError> {
        self.mem_query_logged(agent, tier, query)
    }

    fn mem_update(
        &self,
        agent: &str,
        tier: Tier,
        value: &Json,
        key: Option<&Json>,
    ) -> Result<(), HostError> {
        self.mem_update_logged(agent, tier, value, key)
    }

    fn belief_get(&self, agent: &str, name: &str) -> Result<Json, HostError> {
        self.belief_get_logged(agent, name)
    }

    fn belief_set(&self, agent: &str, name: &str, value: &Json) -> Result<(), HostError> {
        self.belief_set_logged(agent, name, value)
    }

    fn belief_init(&self, agent: &str, name: &str, value: &Json) -> Result<(), HostError> {
        self.belief_init_logged(agent, name, value)
    }

    fn beliefs_outlive_run(&self) -> bool {
        self.ltm.agent_state_outlives_run()
    }

    fn stored_labels(&self, tier: &str) -> Result<Vec<String>, HostError> {
        match tier {
            "workspace" => crate::catalogue::labels::load(&self.settings.workspace),
            // Each read reports the labels of the values it returns
            // (`memory.rs`): nothing is joined into every read of the tier.
            "ltm" | "episodic" => Ok(Vec::new()),
            _ => self.labels_kept(tier),
        }
    }

    fn store_labels(&self, tier: &str, names: &[String]) -> Result<(), HostError> {
        if tier == "workspace" {
            return crate::catalogue::labels::store(&self.settings.workspace, names);
        }
        self.keep_labels(tier, names)
    }

    fn print(&self, agent: &str, line: &str) {
        let t0 = Instant::now();
        if let Some(c) = &self.console {
            c.print(line);
        }
        lock(&self.printed).push(line.to_string());
        self.log(agent, "print", json!({"line": line}), Ok(&Json::Null), t0);
    }

    fn communicate(&self, message: Message) -> Result<(), HostError> {
        self.deliver(message)
    }
}

/// Paths of a memory directory's files.
pub fn files(dir: &Path) -> (PathBuf, PathBuf) {
    (dir.join(DB_FILE), dir.join(LOG_FILE))
}
