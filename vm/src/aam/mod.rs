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
];

pub mod config;
pub mod episodic;
mod goals;
pub mod inspect;
mod key_order;
pub mod ltm;
pub mod mcp;
pub mod messaging;
pub mod queue;
pub mod remote;
pub mod stm;
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

/// Where the sources written into tiers that outlive a run are kept (as
/// long-term memory entries `TIER/SOURCE` of a name no agent can have), for
/// later runs' information-flow labels (`Host::stored_labels`).
const LABELS_OWNER: &str = "@ifc";
const LABELS_NS: &str = "labels";
pub use crate::store::storage::DEFAULT_DIR;

/// The lower-cased words (alphanumeric runs) of `s`: what keyword search
/// matches on, in every tier.
pub fn words(s: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in s
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let w = w.to_lowercase();
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// Does `text` contain every word of `query` (as whole words)?
fn matches_all(query_words: &[String], text: &str) -> bool {
    if query_words.is_empty() {
        return false;
    }
    let have: HashSet<String> = words(text).into_iter().collect();
    query_words.iter().all(|w| have.contains(w))
}

/// The key `umem(value)` stores under when no key is given: `#` and the
/// first 16 hex digits of the SHA-256 of the value's JSON text.
pub fn content_key(value: &Json) -> String {
    use sha2::{Digest, Sha256};
    let text = serde_json::to_string(value).unwrap_or_default();
    let d = Sha256::digest(text.as_bytes());
    let hex: String = d.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("#{hex}")
}

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

/// A goal of an agent.
#[derive(Clone, Debug, PartialEq)]
pub struct Goal {
    pub name: String,
    /// 1 is the most important.
    pub priority: i64,
    pub description: String,
    pub done: bool,
    order: u64,
}

impl Goal {
    fn to_json(&self) -> Json {
        json!({
            "name": self.name,
            "priority": self.priority,
            "description": self.description,
            "status": if self.done { "done" } else { "active" },
        })
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

/// One received message.
#[derive(Clone, Debug, PartialEq)]
pub struct Received {
    pub from: String,
    pub protocol: String,
    pub body: Json,
    pub time_ms: u64,
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
    /// Shared by the hosts of one process on one memory directory
    /// (`shared_stores`): a server opens them once, not per run. In
    /// memory (`:memory:`) each host's are made on first use, so a run
    /// that touches no memory makes none.
    ltm: OnFirstUse<Ltm>,
    episodic: OnFirstUse<Episodic>,
    /// With a PostgreSQL store: mailboxes, goals and beliefs live there
    /// too (`use_store`), shared by every host on it.
    shared: Option<Arc<crate::store::postgres::ltm::PgLtm>>,
    beliefs: Mutex<HashMap<(String, String), Json>>,
    goals: Mutex<HashMap<String, Vec<Goal>>>,
    goal_order: AtomicU64,
    caps: RwLock<HashMap<(String, String), CapSig>>,
    tools: RwLock<BTreeMap<String, Arc<ToolSpec>>>,
    /// Configured MCP servers, started on first use.
    mcp: Vec<Arc<mcp::McpServer>>,
    inbox: Mutex<HashMap<String, Vec<Received>>>,
    printed: Mutex<Vec<String>>,
    /// Destructive tools confirmed (or not), per agent and tool.
    answers: crate::sync::AskOnce<(String, String)>,
    warnings: Vec<String>,
    settings: ais_stdlib::Settings,
    /// Every tool's declaration (`crate::catalogue`): aliases resolve
    /// through it before access is checked.
    catalogue: Arc<ais_ir::catalogue::Declarations>,
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
        let (ltm, episodic, mut warnings) = match &options.storage {
            Storage::Ephemeral => (
                OnFirstUse::lazy(|| Ltm::open(None)),
                OnFirstUse::lazy(Episodic::ephemeral),
                Vec::new(),
            ),
            Storage::Dir(d) => {
                std::fs::create_dir_all(d).map_err(|e| {
                    HostError::new(
                        "memory.dir",
                        format!("cannot create the memory directory `{}`: {e}", d.display()),
                    )
                })?;
                let (ltm, ep, w) = shared_stores(&d.join(DB_FILE))?;
                (
                    OnFirstUse::ready(ltm),
                    OnFirstUse::ready(ep),
                    w.into_iter().collect(),
                )
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
            ltm,
            episodic,
            shared: None,
            beliefs: Mutex::default(),
            goals: Mutex::default(),
            goal_order: AtomicU64::new(0),
            caps: RwLock::default(),
            tools: RwLock::default(),
            mcp: cfg
                .mcp_servers
                .iter()
                .map(|m| Arc::new(mcp::McpServer::new(m.clone())))
                .collect(),
            inbox: Mutex::default(),
            printed: Mutex::default(),
            answers: crate::sync::AskOnce::default(),
            warnings: Vec::new(),
            catalogue: Arc::new(cfg.declarations()),
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

    /// The episodic records of this host (all runs in the log), oldest first.
    pub fn episodic_records(&self) -> Vec<Json> {
        self.episodic
            .get()
            .and_then(|e| e.select(&episodic::Filter::default()))
            .unwrap_or_default()
    }

    /// Messages `agent` has received.
    pub fn received(&self, agent: &str) -> Vec<Received> {
        match self.shared_state() {
            Some(pg) => pg.inbox(agent, false).unwrap_or_else(|e| {
                self.warn(&format!("inbox of agent `{agent}`: {e}"));
                Vec::new()
            }),
            None => lock(&self.inbox).get(agent).cloned().unwrap_or_default(),
        }
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

    /// The long-term memory store (for inspection).
    /// Keeps long-term memory in `ltm` from now on (the shared store of a
    /// fleet: `Ltm::postgres`); called before the run starts.
    pub fn use_ltm(&mut self, ltm: Ltm) {
        self.ltm = OnFirstUse::ready(Arc::new(ltm));
    }

    /// Keeps every piece of agent state that outlives a run in the shared
    /// PostgreSQL store at `url` from now on: LTM, work queues, the episodic
    /// log, mailboxes, goals and beliefs (docs/scale-out.md). Call it
    /// before `load_program`.
    pub fn use_store(&mut self, url: &str) -> Result<(), HostError> {
        self.use_ltm(Ltm::postgres(url)?);
        self.episodic = OnFirstUse::ready(Arc::new(Episodic::postgres(url)?));
        self.shared = Some(crate::store::postgres::ltm::PgLtm::shared(url)?);
        Ok(())
    }

    /// The shared store holding mailboxes, goals and beliefs, if any.
    fn shared_state(&self) -> Option<&crate::store::postgres::ltm::PgLtm> {
        self.shared.as_deref()
    }

    /// Does `tier` outlive the run here, so its sources must be kept for
    /// later runs' labels? Long-term memory and the episodic log always;
    /// beliefs only in a shared store.
    fn keeps_labels(&self, tier: &str) -> bool {
        match tier {
            "ltm" | "episodic" => true,
            "belief" => self.shared.is_some(),
            _ => false,
        }
    }

    /// The long-term memory store (for inspection; made if it was not yet).
    pub fn ltm(&self) -> Result<&Ltm, HostError> {
        self.ltm.get()
    }

    /// Number of STM entries of `agent` held in memory (not swapped out).
    pub fn stm_len(&self, agent: &str) -> usize {
        self.stm
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(agent)
            .map_or(0, |s| s.len())
    }

    // -- episodic -------------------------------------------------------

    fn log(
        &self,
        agent: &str,
        op: &str,
        inputs: Json,
        out: Result<&Json, &HostError>,
        t0: Instant,
    ) {
        let ms = ais_stdlib::time::unix_ms();
        let mut rec = json!({
            "run": self.run_id,
            "seq": self.seq.fetch_add(1, Ordering::Relaxed) + 1,
            "time": ais_stdlib::time::rfc3339(ms),
            "agent": agent,
            "op": op,
            "inputs": inputs,
            "dur_us": u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX),
        });
        match out {
            Ok(v) => rec["outputs"] = v.clone(),
            Err(e) => {
                rec["error"] = json!({"code": e.code, "message": e.message, "payload": e.payload})
            }
        }
        self.append(rec);
    }

    fn append(&self, rec: Json) {
        if let Err(e) = self.episodic.get().and_then(|l| l.append(rec)) {
            // The run goes on; the edge shows the failure once per call.
            self.warn(&e.to_string());
        }
    }

    fn warn(&self, message: &str) {
        if let Some(c) = &self.console {
            c.warn(message);
        }
    }

    // -- STM --------------------------------------------------------------

    fn stm_of(&self, agent: &str) -> Arc<Stm> {
        if let Some(s) = self
            .stm
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(agent)
        {
            return s.clone();
        }
        self.stm
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(agent.to_string())
            .or_insert_with(|| {
                Arc::new(Stm::new(
                    self.config.memory.stm_capacity,
                    self.config.memory.lru_k,
                    self.clock.clone(),
                ))
            })
            .clone()
    }

    fn swap_out(&self, agent: &str, evicted: Vec<stm::StmEntry>) -> Result<(), HostError> {
        for e in evicted {
            self.ltm.get()?.put(
                agent,
                &self.swap_ns,
                &e.key,
                &e.value,
                Some(i64::try_from(e.seq).unwrap_or(i64::MAX)),
            )?;
            lock(&self.swapped).insert((agent.to_string(), e.key));
        }
        Ok(())
    }

    fn stm_put(&self, agent: &str, key: &str, value: &Json) -> Result<(), HostError> {
        let s = self.stm_of(agent);
        let was_swapped = lock(&self.swapped).remove(&(agent.to_string(), key.to_string()));
        if was_swapped {
            self.ltm.get()?.remove(agent, &self.swap_ns, key)?;
        }
        let ev = s.put(key, value.clone());
        self.swap_out(agent, ev)
    }

    fn stm_has_swapped(&self, agent: &str) -> bool {
        lock(&self.swapped).iter().any(|(a, _)| a == agent)
    }

    /// STM entries (in memory and swapped out), oldest write first.
    fn stm_entries(&self, agent: &str) -> Result<Vec<(String, Json, u64)>, HostError> {
        let mut all: Vec<(String, Json, u64)> = self
            .stm_of(agent)
            .entries()
            .into_iter()
            .map(|e| (e.key, e.value, e.seq))
            .collect();
        if self.stm_has_swapped(agent) {
            for e in self.ltm.get()?.all(agent, &self.swap_ns)? {
                all.push((e.key, e.value, u64::try_from(e.seq).unwrap_or(0)));
            }
            all.sort_by_key(|e| e.2);
        }
        Ok(all)
    }

    fn stm_get(&self, agent: &str, key: &str) -> Result<Option<Json>, HostError> {
        let s = self.stm_of(agent);
        if let Some(v) = s.get(key) {
            return Ok(Some(v));
        }
        if !lock(&self.swapped).contains(&(agent.to_string(), key.to_string())) {
            return Ok(None);
        }
        // Swap the entry back in.
        let Some(e) = self.ltm.get()?.get(agent, &self.swap_ns, key)? else {
            return Ok(None);
        };
        self.ltm.get()?.remove(agent, &self.swap_ns, key)?;
        lock(&self.swapped).remove(&(agent.to_string(), key.to_string()));
        let ev = s.put_at(
            key,
            e.value.clone(),
            Some(u64::try_from(e.seq).unwrap_or(0)),
        );
        s.get(key);
        self.swap_out(agent, ev)?;
        Ok(Some(e.value))
    }

    // -- memory semantics -------------------------------------------------

    fn query(&self, agent: &str, tier: Tier, q: &str) -> Result<Json, HostError> {
        let list = |xs: Vec<Json>| Ok(Json::Array(xs));
        let everything = q.is_empty() || q == "*";
        let prefix = q.strip_suffix('*').filter(|_| !everything);
        match tier {
            Tier::Stm => {
                if !everything && prefix.is_none() {
                    if let Some(v) = self.stm_get(agent, q)? {
                        return Ok(v);
                    }
                }
                let all = self.stm_entries(agent)?;
                let ws = words(q);
                list(
                    all.into_iter()
                        .filter(|(k, v, _)| {
                            everything
                                || prefix.map_or_else(
                                    || matches_all(&ws, &format!("{k} {}", text_of(v))),
                                    |p| k.starts_with(p),
                                )
                        })
                        .map(|(_, v, _)| v)
                        .collect(),
                )
            }
            Tier::Ltm => {
                let rows = if everything {
                    self.ltm.get()?.all(agent, LTM_NS)?
                } else if let Some(p) = prefix {
                    self.ltm.get()?.prefix(agent, LTM_NS, p)?
                } else if let Some(e) = self.ltm.get()?.get(agent, LTM_NS, q)? {
                    return Ok(e.value);
                } else {
                    self.ltm.get()?.search_all(agent, LTM_NS, q)?
                };
                list(rows.into_iter().map(|e| e.value).collect())
            }
            Tier::Episodic => {
                if q == TRACE_QUERY {
                    // This run's transitions of the agent (for reflection).
                    return list(self.episodic.get()?.select(&episodic::Filter {
                        agent: Some(agent),
                        run: Some(&self.run_id),
                        notes: Some(false),
                    })?);
                }
                let recs = self.episodic.get()?.select(&episodic::Filter {
                    agent: Some(agent),
                    notes: Some(true),
                    ..episodic::Filter::default()
                })?;
                let key_of = |r: &Json| -> String {
                    match r.get("op").and_then(Json::as_str) {
                        Some("note") => r
                            .get("key")
                            .and_then(Json::as_str)
                            .unwrap_or("")
                            .to_string(),
                        Some(op) => op.to_string(),
                        None => String::new(),
                    }
                };
                let value_of = |r: &Json| -> Json {
                    if r.get("op").and_then(Json::as_str) == Some("note") {
                        r.get("value").cloned().unwrap_or(Json::Null)
                    } else {
                        r.clone()
                    }
                };
                if !everything && prefix.is_none() {
                    if let Some(r) = recs.iter().rev().find(|r| key_of(r) == q) {
                        return Ok(value_of(r));
                    }
                }
                let ws = words(q);
                list(
                    recs.iter()
                        .filter(|r| {
                            everything
                                || prefix.map_or_else(
                                    || {
                                        matches_all(
                                            &ws,
                                            &format!("{} {}", key_of(r), text_of(&value_of(r))),
                                        )
                                    },
                                    |p| key_of(r).starts_with(p),
                                )
                        })
                        .map(value_of)
                        .collect(),
                )
            }
        }
    }

    fn update(
        &self,
        agent: &str,
        tier: Tier,
        value: &Json,
        key: Option<&Json>,
    ) -> Result<Json, HostError> {
        let key = key.map(text_of);
        match tier {
            Tier::Stm => {
                let k = key.unwrap_or_else(|| content_key(value));
                self.stm_put(agent, &k, value)?;
                Ok(json!({"key": k}))
            }
            Tier::Ltm => {
                let k = key.unwrap_or_else(|| content_key(value));
                self.ltm.get()?.put(agent, LTM_NS, &k, value, None)?;
                Ok(json!({"key": k}))
            }
            Tier::Episodic => {
                let ms = ais_stdlib::time::unix_ms();
                self.episodic.get()?.append(json!({
                    "run": self.run_id,
                    "seq": self.seq.fetch_add(1, Ordering::Relaxed) + 1,
                    "time": ais_stdlib::time::rfc3339(ms),
                    "agent": agent,
                    "op": "note",
                    "key": key,
                    "value": value,
                }))?;
                Ok(json!({"key": key}))
            }
        }
    }
}

/// The LTM and episodic stores of the memory database `db`, opened once
/// per process (opening and migrating SQLite per run was most of a served
/// trivial run's cost; `crate::store::open_once`).
#[allow(clippy::type_complexity)]
fn shared_stores(db: &Path) -> Result<(Arc<Ltm>, Arc<Episodic>, Option<String>), HostError> {
    static OPEN: crate::store::open_once::OpenOnce<(Arc<Ltm>, Arc<Episodic>)> =
        crate::store::open_once::OpenOnce::new();
    let key = std::fs::canonicalize(db.parent().unwrap_or(db))
        .map(|d| d.join(DB_FILE))
        .unwrap_or_else(|_| db.to_path_buf());
    let mut warning = None;
    // An old framed log to import: opened afresh so the import runs (and
    // says what it did) whatever this process had open.
    if db.with_file_name(episodic::LEGACY_FILE).exists() {
        let (ep, w) = Episodic::open(db)?;
        return Ok((Arc::new(Ltm::open(Some(db))?), Arc::new(ep), w));
    }
    let (ltm, ep) = OPEN.get(&key, || -> Result<_, HostError> {
        let ltm = Arc::new(Ltm::open(Some(db))?);
        let (ep, w) = Episodic::open(db)?;
        warning = w;
        Ok((ltm, Arc::new(ep)))
    })?;
    Ok((ltm, ep, warning))
}

impl Drop for AamHost {
    fn drop(&mut self) {
        // Swapped-out STM belongs to this process only.
        if let Some(l) = self.ltm.opened() {
            let _ = l.clear_ns_prefix(&self.swap_ns);
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

fn kind_name(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "bool",
        Json::Number(_) => "number",
        Json::String(_) => "str",
        Json::Array(_) => "list",
        Json::Object(_) => "json object",
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
        let t0 = Instant::now();
        let q = text_of(query);
        let r = self.query(agent, tier, &q);
        self.log(
            agent,
            "qmem",
            json!({"tier": tier.name(), "query": q}),
            r.as_ref(),
            t0,
        );
        r
    }

    fn mem_update(
        &self,
        agent: &str,
        tier: Tier,
        value: &Json,
        key: Option<&Json>,
    ) -> Result<(), HostError> {
        let t0 = Instant::now();
        let r = self.update(agent, tier, value, key);
        if tier != Tier::Episodic || r.is_err() {
            let inputs = json!({"tier": tier.name(), "key": key, "value": value});
            self.log(agent, "umem", inputs, r.as_ref(), t0);
        }
        r.map(|_| ())
    }

    fn belief_get(&self, agent: &str, name: &str) -> Result<Json, HostError> {
        let t0 = Instant::now();
        let found = match self.shared_state() {
            Some(pg) => pg.belief(agent, name),
            None => Ok(lock(&self.beliefs)
                .get(&(agent.to_string(), name.to_string()))
                .cloned()),
        };
        let r = found.and_then(|v| {
            v.ok_or_else(|| {
                HostError::new(
                    "belief.unknown",
                    format!("agent `{agent}` has no belief `{name}`"),
                )
                .with_payload(json!({"agent": agent, "belief": name}))
            })
        });
        self.log(agent, "belief.get", json!({"name": name}), r.as_ref(), t0);
        r
    }

    fn belief_set(&self, agent: &str, name: &str, value: &Json) -> Result<(), HostError> {
        let t0 = Instant::now();
        let check = |old: Option<&Json>| match old {
            Some(old)
                if !old.is_null()
                    && !value.is_null()
                    && std::mem::discriminant(old) != std::mem::discriminant(value) =>
            {
                Err(HostError::new(
                    "belief.type",
                    format!(
                        "belief `{name}` of agent `{agent}` holds a {}; it cannot become a {}",
                        kind_name(old),
                        kind_name(value)
                    ),
                )
                .with_payload(json!({"agent": agent, "belief": name})))
            }
            _ => Ok(()),
        };
        let r = match self.shared_state() {
            Some(pg) => pg.set_belief(agent, name, value, check),
            None => {
                let mut b = lock(&self.beliefs);
                let k = (agent.to_string(), name.to_string());
                check(b.get(&k)).map(|()| {
                    b.insert(k, value.clone());
                })
            }
        }
        .map(|()| Json::Null);
        self.log(
            agent,
            "belief.set",
            json!({"name": name, "value": value}),
            r.as_ref(),
            t0,
        );
        r.map(|_| ())
    }

    fn belief_init(&self, agent: &str, name: &str, value: &Json) -> Result<(), HostError> {
        let Some(pg) = self.shared_state() else {
            return self.belief_set(agent, name, value);
        };
        // Beliefs persist in the shared store: an earlier run's value stays.
        let t0 = Instant::now();
        let r = pg.init_belief(agent, name, value);
        let inputs = json!({"name": name, "value": value, "initial": true});
        self.log(agent, "belief.set", inputs, r.as_ref(), t0);
        r.map(|_| ())
    }

    fn stored_labels(&self, tier: &str) -> Result<Vec<String>, HostError> {
        if tier == "workspace" {
            return crate::catalogue::labels::load(&self.settings.workspace);
        }
        if !self.keeps_labels(tier) {
            return Ok(Vec::new());
        }
        let prefix = format!("{tier}/");
        Ok(self
            .ltm
            .get()?
            .prefix(LABELS_OWNER, LABELS_NS, &prefix)?
            .into_iter()
            .filter_map(|e| e.key.strip_prefix(&prefix).map(str::to_string))
            .collect())
    }

    fn store_labels(&self, tier: &str, names: &[String]) -> Result<(), HostError> {
        if tier == "workspace" {
            return crate::catalogue::labels::store(&self.settings.workspace, names);
        }
        if !self.keeps_labels(tier) {
            return Ok(());
        }
        let ltm = self.ltm.get()?;
        for n in names {
            ltm.put(
                LABELS_OWNER,
                LABELS_NS,
                &format!("{tier}/{n}"),
                &Json::Bool(true),
                None,
            )?;
        }
        Ok(())
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
        let t0 = Instant::now();
        let ms = ais_stdlib::time::unix_ms();
        let m = Received {
            from: message.from.clone(),
            protocol: message.protocol.clone(),
            body: message.body.clone(),
            time_ms: ms,
        };
        match self.shared_state() {
            Some(pg) => {
                if let Err(e) = pg.send(&message.to, &m) {
                    let inputs = json!({"to": message.to, "protocol": message.protocol});
                    self.log(&message.from, "send", inputs, Err(&e), t0);
                    return Err(e);
                }
            }
            None => lock(&self.inbox)
                .entry(message.to.clone())
                .or_default()
                .push(m),
        }
        let inputs = json!({"to": message.to, "protocol": message.protocol, "body": message.body});
        self.log(&message.from, "send", inputs, Ok(&Json::Null), t0);
        let inputs =
            json!({"from": message.from, "protocol": message.protocol, "body": message.body});
        self.log(&message.to, "receive", inputs, Ok(&Json::Null), t0);
        Ok(())
    }
}

/// The hash a fact's key is made of: the journal's input hash of the text
/// (SHA-256 of its tagged JSON, 128 bits in hex), computed here so keys of
/// facts stored before stay the same.
fn content_hash(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let tagged = json!([{ "v": text }]).to_string();
    let h = Sha256::digest(tagged.as_bytes());
    h[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// Paths of a memory directory's files.
pub fn files(dir: &Path) -> (PathBuf, PathBuf) {
    (dir.join(DB_FILE), dir.join(LOG_FILE))
}

/// A store made on its first use (see `AamHost::ltm`/`episodic`).
struct OnFirstUse<T> {
    cell: std::sync::OnceLock<Arc<T>>,
    open: fn() -> Result<T, HostError>,
}

impl<T> OnFirstUse<T> {
    fn ready(v: Arc<T>) -> Self {
        let cell = std::sync::OnceLock::new();
        let _ = cell.set(v);
        OnFirstUse {
            cell,
            open: || {
                Err(HostError::new(
                    "internal.store",
                    "the store was given, not opened",
                ))
            },
        }
    }

    fn lazy(open: fn() -> Result<T, HostError>) -> Self {
        OnFirstUse {
            cell: std::sync::OnceLock::new(),
            open,
        }
    }

    fn get(&self) -> Result<&T, HostError> {
        if let Some(v) = self.cell.get() {
            return Ok(v);
        }
        let v = Arc::new((self.open)()?);
        Ok(self.cell.get_or_init(|| v))
    }

    /// The store, if it was made.
    fn opened(&self) -> Option<&T> {
        self.cell.get().map(|v| &**v)
    }
}
