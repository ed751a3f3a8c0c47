//! Built-in tools of the AIS runtime.
//!
//! Every tool takes its arguments as one JSON object and returns JSON. The
//! tools here have no knowledge of agents, access control or memory: the
//! Agent Abstract Machine (`ais_vm::aam`) registers them in its capability
//! registry, checks access, validates arguments against [`BuiltinInfo`]
//! schemas and records every call. `memory_search` lives in the AAM (it
//! needs the long-term memory store).
//!
//! | tool | class | arguments | result |
//! |---|---|---|---|
//! | `http_get` | network | `{url, headers?, timeout_s?}` | the body (parsed JSON, else text) |
//! | `read_file` | read-only | `{path}` | the file's text |
//! | `write_file` | write | `{path, content, append?}` | `{path, bytes}` |
//! | `json_query` | read-only | `{document, path}` | the selected value(s) |
//! | `calculator` | read-only | `{expression}` | a number |
//! | `now` | read-only | `{}` | RFC 3339 UTC timestamp |
//! | `echo` | read-only | any JSON | its arguments, unchanged |
//! | `search` | network | `{query, limit?}` | `[{title, url, snippet}]` from the configured provider |
//!
//! `read`, `write` and `search_web` are other names of `read_file`, `write_file` and `search`
//! ([`ALIASES`]). The shell tool `bash` is the AAM's (`ais_vm::catalogue::shell`).

pub mod calc;
pub mod facts;
pub mod fs;
#[cfg(feature = "http")]
pub mod http;
pub mod jsonpath;
pub mod search;
pub mod time;

pub use facts::{Effect, Facts, WorkspaceUse};
use serde_json::{json, Value as Json};

/// A failed tool call: a stable dotted code, a message, details.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    pub code: String,
    pub message: String,
    pub payload: Json,
}

impl ToolError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> ToolError {
        ToolError {
            code: code.into(),
            message: message.into(),
            payload: Json::Null,
        }
    }

    pub fn with_payload(mut self, payload: Json) -> ToolError {
        self.payload = payload;
        self
    }
}

/// What a tool may do to the world; drives the default access policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolClass {
    /// Reads local state only (allowed by default).
    ReadOnly,
    /// Writes local state (needs an explicit allow).
    Write,
    /// Talks to the network (needs an explicit allow).
    Network,
}

impl ToolClass {
    pub fn name(self) -> &'static str {
        match self {
            ToolClass::ReadOnly => "read-only",
            ToolClass::Write => "write",
            ToolClass::Network => "network",
        }
    }
}

/// Static description of a built-in tool.
#[derive(Clone, Debug)]
pub struct BuiltinInfo {
    pub name: &'static str,
    pub description: &'static str,
    pub class: ToolClass,
    /// What the tool acts on (`fs`, `net`, `local`): calls to one provider
    /// keep their program order when side-effecting (the compiler orders them).
    pub provider: &'static str,
    /// Effect, trust of its results, arguments that leave the machine.
    pub facts: Facts,
    pub input_schema: Json,
    pub output_schema: Json,
}

/// Settings the file and network tools need.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Root directory of `read_file` / `write_file`.
    pub workspace: std::path::PathBuf,
    /// Default timeout of `http_get`.
    pub http_timeout: std::time::Duration,
    /// Largest body `http_get` and `read_file` return.
    pub max_bytes: u64,
    /// Where `search` / `search_web` go.
    pub search: search::SearchProvider,
    /// Private destinations `http_get` may reach (`http`): `host`,
    /// `host:port` or `*`; none by default.
    pub allow_private_network: Vec<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            workspace: std::path::PathBuf::from("."),
            http_timeout: std::time::Duration::from_secs(30),
            max_bytes: 10 * 1024 * 1024,
            search: search::SearchProvider::None,
            allow_private_network: Vec::new(),
        }
    }
}

/// Other names of built-in tools (the reference's spellings): same
/// arguments, class and provider.
pub const ALIASES: &[(&str, &str)] = &[
    ("read", "read_file"),
    ("write", "write_file"),
    ("search_web", "search"),
];

/// The built-in tool `name` (aliases included), from [`builtins`] built
/// once: the table carries JSON schemas, and the compiler asks for a tool
/// by name at every call it checks and lowers (rebuilding the table each
/// time was 7 % of a large build; issue 40).
pub fn builtin(name: &str) -> Option<&'static BuiltinInfo> {
    static ALL: std::sync::OnceLock<Vec<BuiltinInfo>> = std::sync::OnceLock::new();
    ALL.get_or_init(builtins).iter().find(|b| b.name == name)
}

/// The built-in tools implemented in this crate, aliases included.
pub fn builtins() -> Vec<BuiltinInfo> {
    let mut all = primary_builtins();
    for &(alias, of) in ALIASES {
        if let Some(b) = all.iter().find(|b| b.name == of).cloned() {
            all.push(BuiltinInfo {
                name: alias,
                // An alias describes what its tool does: its own text, not
                // another alias's (`search_web` once read as `write_file`).
                description: match of {
                    "read_file" => "Read a UTF-8 text file inside the workspace directory (same as read_file)",
                    "write_file" => "Write (or append to) a text file inside the workspace directory (same as write_file)",
                    "search" => "Search the web through the configured provider: {query, limit?} -> [{title, url, snippet}] (same as search)",
                    _ => b.description,
                },
                ..b
            });
        }
    }
    all
}

fn primary_builtins() -> Vec<BuiltinInfo> {
    vec![
        BuiltinInfo {
            name: "http_get",
            description: "GET a URL (http or https); returns the body, parsed as JSON when it is JSON",
            class: ToolClass::Network,
            provider: "net",
            facts: Facts { effect: Effect::ReadOnly, trusted: false, leaves: &["url", "headers"], workspace: WorkspaceUse::None, local: false },
            input_schema: json!({
                "type": "object",
                "required": ["url"],
                "properties": {
                    "url": {"type": "string"},
                    "headers": {"type": "object"},
                    "timeout_s": {"type": "number"}
                }
            }),
            output_schema: json!({}),
        },
        BuiltinInfo {
            name: "search",
            description: "Search the web through the configured provider: {query, limit?} -> [{title, url, snippet}]",
            facts: Facts { effect: Effect::ReadOnly, trusted: false, leaves: &["query"], workspace: WorkspaceUse::None, local: false },
            class: ToolClass::Network,
            provider: "net",
            input_schema: json!({
                "type": "object",
                "required": ["query"],
                "properties": {
                    "query": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 1}
                }
            }),
            output_schema: json!({"type": "array"}),
        },
        BuiltinInfo {
            name: "read_file",
            description: "Read a UTF-8 text file inside the workspace directory",
            class: ToolClass::ReadOnly,
            provider: "fs",
            facts: Facts { workspace: WorkspaceUse::Reads, ..Facts::LOCAL },
            input_schema: json!({
                "type": "object",
                "required": ["path"],
                "properties": {"path": {"type": "string"}}
            }),
            output_schema: json!({"type": "string"}),
        },
        BuiltinInfo {
            name: "write_file",
            description: "Write (or append to) a text file inside the workspace directory",
            class: ToolClass::Write,
            provider: "fs",
            facts: Facts { effect: Effect::SideEffecting, workspace: WorkspaceUse::Writes, ..Facts::LOCAL },
            input_schema: json!({
                "type": "object",
                "required": ["path", "content"],
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"},
                    "append": {"type": "boolean"}
                }
            }),
            output_schema: json!({
                "type": "object",
                "required": ["path", "bytes"],
                "properties": {"path": {"type": "string"}, "bytes": {"type": "integer"}}
            }),
        },
        BuiltinInfo {
            name: "json_query",
            description: "Select values from a JSON document with a JSONPath subset ($, .name, [n], ['name'], [*], .*)",
            class: ToolClass::ReadOnly,
            provider: "local",
            facts: Facts::LOCAL,
            input_schema: json!({
                "type": "object",
                "required": ["document", "path"],
                "properties": {"path": {"type": "string"}}
            }),
            output_schema: json!({}),
        },
        BuiltinInfo {
            name: "calculator",
            description: "Evaluate an arithmetic expression (+ - * / % ^, parentheses, sqrt, abs, ln, log10, exp, sin, cos, tan, floor, ceil, round, min, max, pow, pi, e)",
            class: ToolClass::ReadOnly,
            provider: "local",
            facts: Facts::LOCAL,
            input_schema: json!({
                "type": "object",
                "required": ["expression"],
                "properties": {"expression": {"type": "string"}}
            }),
            output_schema: json!({"type": "number"}),
        },
        BuiltinInfo {
            name: "now",
            description: "The current UTC time as an RFC 3339 timestamp",
            class: ToolClass::ReadOnly,
            provider: "local",
            facts: Facts::LOCAL,
            input_schema: json!({"type": ["object", "null", "array"]}),
            output_schema: json!({"type": "string"}),
        },
        // Returns what it is given: a stand-in for a real service in the
        // examples and a probe for argument passing, with no side effect.
        BuiltinInfo {
            name: "echo",
            description: "Return the arguments unchanged",
            class: ToolClass::ReadOnly,
            provider: "local",
            facts: Facts::LOCAL,
            input_schema: json!({}),
            output_schema: json!({}),
        },
    ]
}

/// Effect facts of a tool the runtime provides but does not implement here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostToolFacts {
    pub name: &'static str,
    /// Calls to one provider are ordered (see [`BuiltinInfo::provider`]).
    pub provider: &'static str,
    pub class: ToolClass,
    /// Effect, trust of its results, arguments that leave the machine.
    pub facts: Facts,
    /// Its arguments' names, in the order a call by name takes them by
    /// position (`store_fact(text, tags, source)`).
    pub params: &'static [&'static str],
}

/// The Agent Abstract Machine's tools (`ais_vm::aam`; implemented there
/// because they need the agent's state): only what the compiler needs to
/// order their calls and to call them by name, so it need not depend on
/// the VM. The goal tools share one provider, so `goals_add` then
/// `goals_next` keep their order.
pub const HOST_TOOLS: &[HostToolFacts] = &[
    HostToolFacts {
        name: "memory_search",
        provider: "aam.memory",
        class: ToolClass::ReadOnly,
        facts: Facts {
            effect: Effect::ReadOnly,
            ..Facts::LOCAL
        },
        params: &["query", "limit", "tags"],
    },
    // A fact into long-term memory with tags and where it came from,
    // found again by `memory_search` (the reference's `store_fact`).
    HostToolFacts {
        name: "store_fact",
        provider: "aam.memory",
        class: ToolClass::Write,
        facts: Facts::STATE,
        params: &["text", "tags", "source"],
    },
    HostToolFacts {
        name: "goals_list",
        provider: "aam.goals",
        class: ToolClass::ReadOnly,
        facts: Facts {
            effect: Effect::ReadOnly,
            ..Facts::LOCAL
        },
        params: &["all"],
    },
    HostToolFacts {
        name: "goals_next",
        provider: "aam.goals",
        class: ToolClass::ReadOnly,
        facts: Facts {
            effect: Effect::ReadOnly,
            ..Facts::LOCAL
        },
        params: &[],
    },
    HostToolFacts {
        name: "goals_add",
        provider: "aam.goals",
        class: ToolClass::Write,
        facts: Facts {
            effect: Effect::Idempotent,
            ..Facts::LOCAL
        },
        params: &["name", "priority", "description"],
    },
    HostToolFacts {
        name: "goals_complete",
        provider: "aam.goals",
        class: ToolClass::Write,
        facts: Facts {
            effect: Effect::Idempotent,
            ..Facts::LOCAL
        },
        params: &["name"],
    },
    // The reference's `update_goal`: add, re-prioritise, complete or drop.
    HostToolFacts {
        name: "update_goal",
        provider: "aam.goals",
        class: ToolClass::Write,
        facts: Facts {
            effect: Effect::Idempotent,
            ..Facts::LOCAL
        },
        params: &[
            "name",
            "status",
            "priority",
            "description",
            "goal_id",
            "action",
        ],
    },
    // Named work queues: `enqueue` a job, `claim` the oldest one (the
    // reference's coordination op). Both change the queue.
    HostToolFacts {
        name: "enqueue",
        provider: "aam.queue",
        class: ToolClass::Write,
        facts: Facts::STATE,
        params: &["queue", "job"],
    },
    HostToolFacts {
        name: "claim",
        provider: "aam.queue",
        class: ToolClass::Write,
        facts: Facts::STATE,
        params: &["queue", "lease_ms", "max_wait_ms"],
    },
    // A shell command changes the world: ordered like a write, and denied
    // unless allowed.
    HostToolFacts {
        name: "bash",
        provider: "shell",
        class: ToolClass::Write,
        facts: Facts {
            effect: Effect::SideEffecting,
            trusted: true,
            leaves: &[],
            workspace: WorkspaceUse::ReadsWrites,
            // A command may reach the network.
            local: false,
        },
        params: &["command", "cwd", "timeout_s"],
    },
    // A run made on a thread (docs/language.md, "Threads"): its earlier
    // runs and its state. Values keep the labels they were stored with
    // (reported by the host, like `inbox`); the tools add no source.
    HostToolFacts {
        name: "thread_history",
        provider: "aam.thread",
        class: ToolClass::ReadOnly,
        facts: Facts {
            effect: Effect::ReadOnly,
            ..Facts::LOCAL
        },
        params: &["limit"],
    },
    HostToolFacts {
        name: "thread_state",
        provider: "aam.thread",
        class: ToolClass::ReadOnly,
        facts: Facts {
            effect: Effect::ReadOnly,
            ..Facts::LOCAL
        },
        params: &["key"],
    },
    // Setting a key to a value twice leaves the same state: a call cut
    // off by a crash is run again on resume, not left in doubt.
    HostToolFacts {
        name: "thread_set",
        provider: "aam.thread",
        class: ToolClass::Write,
        facts: Facts {
            effect: Effect::Idempotent,
            ..Facts::LOCAL
        },
        params: &["key", "value"],
    },
    // `{"clear": true}` empties the inbox.
    HostToolFacts {
        name: "inbox",
        provider: "aam.inbox",
        class: ToolClass::Write,
        // The messages other agents of the program sent: each keeps the
        // labels of what was sent (stored per message, `host::flow`), and
        // `inbox()` returns them with its result, as a handler's argument
        // carries them. The tool itself adds no untrusted source.
        facts: Facts {
            effect: Effect::ReadOnly,
            trusted: true,
            leaves: &[],
            workspace: WorkspaceUse::None,
            local: true,
        },
        params: &["clear"],
    },
];

/// Runs the built-in tool `name`; `None` when there is no such tool.
pub fn call(name: &str, args: &Json, settings: &Settings) -> Option<Result<Json, ToolError>> {
    Some(match name {
        #[cfg(feature = "http")]
        "http_get" => http::http_get(args, settings),
        // Built for the catalogue only (the front end): nothing to call.
        #[cfg(not(feature = "http"))]
        "http_get" => Err(ToolError::new(
            "http.unavailable",
            "ais-stdlib was built without its `http` feature",
        )),
        "read_file" | "read" => fs::read_file(args, settings),
        "write_file" | "write" => fs::write_file(args, settings),
        "json_query" => jsonpath::json_query(args),
        "search" | "search_web" => search::search(args, settings),
        "calculator" => calc::calculator(args),
        "now" => Ok(Json::String(time::now_rfc3339())),
        "echo" => Ok(args.clone()),
        _ => return None,
    })
}

/// The string field `key` of an argument object.
pub(crate) fn str_arg<'a>(args: &'a Json, tool: &str, key: &str) -> Result<&'a str, ToolError> {
    args.get(key).and_then(Json::as_str).ok_or_else(|| {
        ToolError::new(
            "tool.invalid_args",
            format!("`{tool}` needs a string argument `{key}`"),
        )
        .with_payload(json!({"tool": tool, "argument": key}))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_are_described_as_the_tool_they_name() {
        let all = builtins();
        for &(alias, of) in ALIASES {
            let a = all.iter().find(|b| b.name == alias).expect("alias listed");
            assert!(
                a.description.ends_with(&format!("(same as {of})")),
                "{alias}: {}",
                a.description
            );
        }
    }

    #[test]
    fn read_and_write_are_the_file_tools_under_other_names() {
        let all = builtins();
        for (alias, of) in ALIASES {
            let a = all
                .iter()
                .find(|b| b.name == *alias)
                .map(|b| (b.class, b.provider));
            let o = all
                .iter()
                .find(|b| b.name == *of)
                .map(|b| (b.class, b.provider));
            assert!(a.is_some());
            assert_eq!(a, o);
        }
        let dir = std::env::temp_dir().join(format!("ais-alias-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_default();
        let s = Settings {
            workspace: dir.clone(),
            ..Settings::default()
        };
        let w = call("write", &json!({"path": "a.txt", "content": "hi"}), &s);
        assert_eq!(w, Some(Ok(json!({"path": "a.txt", "bytes": 2}))));
        assert_eq!(
            call("read", &json!({"path": "a.txt"}), &s),
            Some(Ok(json!("hi")))
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn echo_is_a_read_only_builtin_returning_its_arguments() {
        let info = builtins().into_iter().find(|b| b.name == "echo");
        assert_eq!(info.map(|b| b.class), Some(ToolClass::ReadOnly));
        let args = json!({"a": [1, "two"], "b": null});
        assert_eq!(call("echo", &args, &Settings::default()), Some(Ok(args)));
    }
}
