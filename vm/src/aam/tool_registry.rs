//! The AAM's tool registry: registering the built-in, AAM, subprocess,
//! MCP and remote-agent tools (each run by its provider,
//! `crate::catalogue`), and the path of every call: access (aliases
//! resolved through the catalogue first), argument validation,
//! confirmation of destructive tools, concurrency limits, the call, and
//! result validation.

use super::*;
use crate::catalogue::provider::ToolProvider;

impl AamHost {
    pub(super) fn register_builtins(&self) {
        // Simulated search touches no network: no allow needed.
        let simulated_search =
            self.settings.search == ais_stdlib::search::SearchProvider::Simulated;
        let builtin: Arc<dyn ToolProvider> = Arc::new(crate::catalogue::builtin::Builtin(
            Arc::new(self.settings.clone()),
        ));
        for b in ais_stdlib::builtins() {
            let origin = match b.class {
                _ if simulated_search && matches!(b.name, "search" | "search_web") => {
                    Origin::BuiltinReadOnly
                }
                ais_stdlib::ToolClass::ReadOnly => Origin::BuiltinReadOnly,
                ais_stdlib::ToolClass::Write => Origin::BuiltinWrite,
                ais_stdlib::ToolClass::Network => Origin::BuiltinNetwork,
            };
            self.add_tool(ToolSpec {
                name: b.name.to_string(),
                description: b.description.to_string(),
                origin,
                kind: Kind::Provided(builtin.clone()),
                input_schema: Some(b.input_schema),
                output_schema: Some(b.output_schema),
                destructive: false,
                limit: None,
            });
        }
        let aam =
            |name: &str, kind: Kind, description: &str, input: Json, origin: Origin| ToolSpec {
                name: name.to_string(),
                description: description.to_string(),
                origin,
                kind,
                input_schema: Some(input),
                output_schema: None,
                destructive: false,
                limit: None,
            };
        self.add_tool(aam(
            "memory_search",
            Kind::MemorySearch,
            "Keyword search over the agent's long-term memory, best match first: [{key, value, score}]",
            json!({"type": "object", "required": ["query"], "properties": {
                "query": {"type": "string"}, "limit": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string"}}}}),
            Origin::BuiltinReadOnly,
        ));
        self.add_tool(aam(
            "store_fact",
            Kind::StoreFact,
            "Store a fact in the agent's long-term memory with tags and its source: {text, tags?, source?} -> {key}; memory_search finds it",
            json!({"type": "object", "required": ["text"], "properties": {
                "text": {"type": "string", "minLength": 1},
                "tags": {"type": "array", "items": {"type": "string"}},
                "source": {"type": "string"}}}),
            Origin::Aam,
        ));
        self.add_tool(aam(
            "update_goal",
            Kind::Goals("update"),
            "Add or change a goal: {name, status? (active|done|dropped), priority?, description?} -> the goal; or the reference's form {goal_id, action (set|remove|clear), priority?} -> \"set\", \"removed\", \"not_found\" or \"cleared\"",
            json!({"type": "object", "properties": {
                "name": {"type": "string", "minLength": 1},
                "goal_id": {"type": "string", "minLength": 1},
                "action": {"enum": ["set", "remove", "clear"]},
                "status": {"enum": ["active", "done", "dropped"]},
                "priority": {"type": "integer"},
                "description": {"type": "string"}}}),
            Origin::Aam,
        ));
        self.add_tool(aam(
            "enqueue",
            Kind::Queue("enqueue"),
            "Append a job to a named work queue: {queue, job} -> {queue, id, pending}",
            json!({"type": "object", "required": ["queue", "job"], "properties": {
                "queue": {"type": "string", "minLength": 1}, "job": {}}}),
            Origin::Aam,
        ));
        self.add_tool(aam(
            "claim",
            Kind::Queue("claim"),
            "Take the oldest job of a named work queue that is unclaimed or whose lease ran out: {queue, lease_ms?, max_wait_ms?} -> {queue, id, job, task_data, task_id, claim_token} (the reference's three results beside ours), or null when none came within max_wait_ms; leased for lease_ms (without it: for good)",
            json!({"type": "object", "required": ["queue"], "properties": {
                "queue": {"type": "string", "minLength": 1},
                "lease_ms": {"type": "integer", "minimum": 0},
                "max_wait_ms": {"type": "integer", "minimum": 0}}}),
            Origin::Aam,
        ));
        let obj = json!({"type": ["object", "null", "array"]});
        self.add_tool(aam(
            "goals_list",
            Kind::Goals("list"),
            "The agent's active goals, most important first ({\"all\": true} includes completed ones)",
            obj.clone(),
            Origin::Aam,
        ));
        self.add_tool(aam(
            "goals_next",
            Kind::Goals("next"),
            "The agent's most important active goal, or null",
            obj.clone(),
            Origin::Aam,
        ));
        self.add_tool(aam(
            "goals_add",
            Kind::Goals("add"),
            "Add a goal (or re-prioritise an active one): {name, priority?, description?}",
            json!({"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"}, "priority": {"type": "integer"},
                "description": {"type": "string"}}}),
            Origin::Aam,
        ));
        self.add_tool(aam(
            "goals_complete",
            Kind::Goals("complete"),
            "Mark an active goal done: {name}",
            json!({"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"}}}),
            Origin::Aam,
        ));
        self.add_tool(aam(
            "bash",
            Kind::Provided(Arc::new(crate::catalogue::shell::Shell {
                workspace: self.settings.workspace.clone(),
                sandbox: self.config.sandbox,
            })),
            "Run a shell command (bash -c) in the workspace, confined to it: {command, cwd?, timeout_s?} -> {exit_code, stdout, stderr, truncated}",
            crate::catalogue::shell::input_schema(),
            Origin::Shell,
        ));
        self.add_tool(aam(
            "thread_history",
            Kind::Thread("history"),
            "The earlier runs of the thread this run was made on, oldest first: [{run, input, answer, status}] ({\"limit\": N}: the last N, default 20)",
            json!({"type": ["object", "null"], "properties": {
                "limit": {"type": "integer", "minimum": 0}}}),
            Origin::Aam,
        ));
        self.add_tool(aam(
            "thread_state",
            Kind::Thread("state"),
            "The state of the thread this run was made on (an object), or the value of one of its keys ({\"key\": K}; null when unset)",
            json!({"type": ["object", "null"], "properties": {
                "key": {"type": "string"}}}),
            Origin::Aam,
        ));
        self.add_tool(aam(
            "thread_set",
            Kind::Thread("set"),
            "Set a key of the state of the thread this run was made on: {key, value} -> {key, version} (a null value removes the key)",
            json!({"type": "object", "required": ["key", "value"], "properties": {
                "key": {"type": "string", "minLength": 1}, "value": {}}}),
            Origin::Aam,
        ));
        self.add_tool(aam(
            "inbox",
            Kind::Inbox,
            "Messages received by the agent, oldest first ({\"clear\": true} empties the inbox)",
            obj,
            Origin::Aam,
        ));
    }

    pub(super) fn add_tool(&self, mut spec: ToolSpec) {
        // Settings of a tool hold for its aliases too.
        let canonical = self.catalogue.canonical(&spec.name).to_string();
        let of =
            |m: &BTreeMap<String, usize>| m.get(&spec.name).or_else(|| m.get(&canonical)).copied();
        if let Some(n) = of(&self.config.concurrency) {
            spec.limit = Some(Arc::new(Limiter::new(n)));
        }
        if self.config.destructive.contains(&spec.name)
            || self.config.destructive.contains(&canonical)
        {
            spec.destructive = true;
        }
        self.tools
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(spec.name.clone(), Arc::new(spec));
    }

    /// Registers the tools of a freshly started MCP server.
    pub(super) fn register_mcp(
        &self,
        m: &config::McpServerConfig,
        client: &Arc<mcp::McpClient>,
        list: Vec<mcp::McpTool>,
    ) {
        let prefix = m.prefix();
        let limit = m.concurrency.map(|n| Arc::new(Limiter::new(n)));
        for t in list {
            self.add_tool(ToolSpec {
                name: format!("{prefix}{}", t.name),
                description: t.description.clone(),
                origin: Origin::Mcp,
                input_schema: t.input_schema.clone(),
                output_schema: t.output_schema.clone(),
                destructive: t.destructive || m.destructive.contains(&t.name),
                limit: limit.clone(),
                kind: Kind::Provided(Arc::new(tools::McpTool {
                    param_order: t.param_order.clone(),
                    client: client.clone(),
                    remote: t.name.clone(),
                })),
            });
        }
    }

    /// Starts the MCP servers that could provide `tool` (by prefix, in
    /// configuration order) until one of them registers it. A server that
    /// fails to start fails the call with its start-up error.
    pub(super) fn start_mcp_for(&self, tool: &str, cancel: &CancelToken) -> Result<(), HostError> {
        for s in self.mcp.iter().filter(|s| s.may_provide(tool)) {
            s.ensure_started(cancel, |c, list| self.register_mcp(&s.config, c, list))?;
            if self.tool(tool).is_some() {
                break;
            }
        }
        Ok(())
    }

    /// Starts every configured MCP server not started yet (what listing
    /// all tools needs); the errors of those that cannot start.
    pub fn start_mcp_servers(&self) -> Vec<HostError> {
        let never = CancelToken::new();
        self.mcp
            .iter()
            .filter_map(|s| {
                s.ensure_started(&never, |c, list| self.register_mcp(&s.config, c, list))
                    .err()
            })
            .collect()
    }

    /// Each configured MCP server: `{name, state, protocol_version?,
    /// server_info?, error?}`; `state` is `not started`, `running`,
    /// `exited` or `failed`.
    pub fn mcp_status(&self) -> Vec<Json> {
        self.mcp.iter().map(|s| s.status()).collect()
    }

    /// Registers an in-process tool (trusted: allowed for every agent
    /// unless `[access.deny]` names it).
    pub fn register_tool(
        &self,
        name: &str,
        f: impl Fn(&Json) -> Result<Json, HostError> + Send + Sync + 'static,
    ) {
        let f: ToolFn = Arc::new(f);
        self.add_tool(ToolSpec {
            name: name.to_string(),
            description: String::new(),
            origin: Origin::Embedded,
            kind: Kind::Provided(Arc::new(crate::catalogue::embedded::Embedded(f))),
            input_schema: None,
            output_schema: None,
            destructive: false,
            limit: None,
        });
    }

    // -- tools ------------------------------------------------------------

    pub(super) fn tool(&self, name: &str) -> Option<Arc<ToolSpec>> {
        self.tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Whether `agent` may call `tool` under `[access]` (the reason when not).
    pub fn may_call(&self, agent: &str, tool: &str) -> Result<(), String> {
        let origin = self.tool(tool).map_or(Origin::Mcp, |t| t.origin);
        self.check_access_by_name(agent, tool, origin)
            .map_err(|e| e.message)
    }

    pub(super) fn check_access(&self, agent: &str, t: &ToolSpec) -> Result<(), HostError> {
        self.check_access_by_name(agent, &t.name, t.origin)
    }

    pub(super) fn check_access_by_name(
        &self,
        agent: &str,
        tool: &str,
        origin: Origin,
    ) -> Result<(), HostError> {
        let a = &self.config.access;
        // An alias is the tool it names: `deny = ["write_file"]` holds
        // for `write` too (and an allow of either name allows both).
        let canonical = self.catalogue.canonical(tool);
        let denied = |why: &str| {
            HostError::new(
                "tool.denied",
                format!("agent `{agent}` may not call tool `{tool}`: {why}"),
            )
            .with_payload(json!({"agent": agent, "tool": tool, "origin": origin.name()}))
        };
        if a.denied(agent, tool) || a.denied(agent, canonical) {
            return Err(denied("[access.deny] lists it"));
        }
        if matches!(origin, Origin::Aam | Origin::Remote)
            || a.allowed(agent, tool)
            || a.allowed(agent, canonical)
        {
            return Ok(());
        }
        if origin.allowed_by_default() && a.readonly_default {
            return Ok(());
        }
        Err(denied(&format!(
            "{} tools need an explicit allow, e.g. `[access.allow] {agent} = [\"{tool}\"]` in .apxm/config.toml",
            origin.name(),
        )))
    }

    pub(super) fn confirm(&self, agent: &str, t: &ToolSpec, args: &Json) -> Result<(), HostError> {
        if !t.destructive {
            return Ok(());
        }
        let refuse = |how: &str| {
            HostError::new(
                "tool.confirmation_required",
                format!(
                    "tool `{}` is destructive and {how}; rerun with --yes to allow it",
                    t.name
                ),
            )
            .with_payload(json!({"agent": agent, "tool": t.name}))
        };
        match &self.confirm {
            Confirm::Yes => Ok(()),
            Confirm::Deny => Err(refuse("nobody can confirm it (no terminal)")),
            Confirm::Ask(asker) => {
                // The answer holds for the run.
                let k = (agent.to_string(), t.name.clone());
                if self
                    .answers
                    .answer(k, || asker.confirm(agent, &t.name, args))
                {
                    Ok(())
                } else {
                    Err(refuse("was not confirmed"))
                }
            }
        }
    }

    pub(super) fn validate(
        &self,
        agent: &str,
        t: &ToolSpec,
        args: &Json,
        result: Option<&Json>,
    ) -> Result<(), HostError> {
        let sig = self
            .caps
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(agent.to_string(), t.name.clone()))
            .cloned();
        let (code, what, value, schemas) = match result {
            None => (
                "tool.invalid_args",
                "arguments",
                args,
                [t.input_schema.clone(), sig.map(|s| s.args)],
            ),
            Some(r) => (
                "tool.invalid_result",
                "result",
                r,
                [t.output_schema.clone(), sig.map(|s| s.result)],
            ),
        };
        for (i, s) in schemas.iter().enumerate() {
            let Some(s) = s else { continue };
            if let Err(e) = jsonschema::validate(s, value) {
                let source = if i == 0 {
                    "the tool's schema".to_string()
                } else {
                    format!("the capability declared by agent `{agent}`")
                };
                if e.path == "$schema" {
                    // The schema, not the value, is at fault: nothing runs.
                    return Err(HostError::new(
                        "tool.invalid_schema",
                        format!("tool `{}`: {source} is not usable: {}", t.name, e.message),
                    )
                    .with_payload(json!({"tool": t.name, "message": e.message, "schema": s})));
                }
                return Err(HostError::new(
                    code,
                    format!("tool `{}`: the {what} do not match {source}: {e}", t.name),
                )
                .with_payload(
                    json!({"tool": t.name, "path": e.path, "message": e.message, "schema": s}),
                ));
            }
        }
        Ok(())
    }

    pub(super) fn call(
        &self,
        agent: &str,
        t: &ToolSpec,
        args: &Json,
        cancel: &CancelToken,
    ) -> Result<Json, HostError> {
        match &t.kind {
            Kind::Provided(p) => p.call(&t.name, args, cancel),
            Kind::MemorySearch => self.memory_search(agent, args),
            Kind::StoreFact => self.store_fact(agent, args),
            Kind::Queue(op) => self.queue_op(agent, op, args, cancel),
            Kind::Goals(op) => self.goal_op(agent, op, args),
            Kind::Inbox => self.inbox_tool(agent, args),
            Kind::Thread(op) => self.thread_op(op, args),
        }
    }

    pub(super) fn invoke(
        &self,
        agent: &str,
        tool: &str,
        args: &Json,
        cancel: &CancelToken,
    ) -> Result<Json, HostError> {
        if cancel.is_cancelled() {
            return Err(HostError::new("cancelled", "the run was cancelled"));
        }
        if self.tool(tool).is_none() && self.mcp.iter().any(|s| s.may_provide(tool)) {
            // A call the access policy refuses never starts a server.
            self.check_access_by_name(agent, tool, Origin::Mcp)?;
            self.start_mcp_for(tool, cancel)?;
        }
        let Some(t) = self.tool(tool) else {
            let declared = self
                .caps
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .contains_key(&(agent.to_string(), tool.to_string()));
            let hint = if declared {
                format!("; `{tool}` is declared as a capability but no built-in, [[tools.subprocess]] or MCP tool provides it")
            } else {
                String::new()
            };
            return Err(
                HostError::new("tool.unknown", format!("no tool named `{tool}`{hint}"))
                    .with_payload(json!({"tool": tool})),
            );
        };
        self.check_access(agent, &t)?;
        self.validate(agent, &t, args, None)?;
        self.confirm(agent, &t, args)?;
        let _permit = match &t.limit {
            Some(l) => Some(l.acquire(cancel)?),
            None => None,
        };
        let r = self.call(agent, &t, args, cancel)?;
        if let Some(text) = self.as_declared_text(agent, &t, &r) {
            // Checked against the tool's own schema before it becomes text.
            if let Some(s) = &t.output_schema {
                if let Err(e) = jsonschema::validate(s, &r) {
                    return Err(HostError::new(
                        "tool.invalid_result",
                        format!(
                            "tool `{}`: the result do not match the tool's schema: {e}",
                            t.name
                        ),
                    ));
                }
            }
            return Ok(text);
        }
        self.validate(agent, &t, args, Some(&r))?;
        Ok(r)
    }

    /// A structured result of a tool the agent declares `-> str` (the
    /// reference's `capability search(query: str) -> str` over our `search`,
    /// which gives a list): its JSON text, as the declaration asks.
    pub(super) fn as_declared_text(&self, agent: &str, t: &ToolSpec, r: &Json) -> Option<Json> {
        let caps = self.caps.read().unwrap_or_else(|e| e.into_inner());
        let sig = caps.get(&(agent.to_string(), t.name.clone()))?;
        let wants_text = sig.result == json!({"type": "string"});
        (wants_text && (r.is_array() || r.is_object())).then(|| Json::String(r.to_string()))
    }
}

/// The provider of `search`: the configured one (its key read from the
/// environment now; when the variable is unset, calls fail naming it), else
/// the simulator's stand-in when the run is simulated.
pub(super) fn search_provider(cfg: &AamConfig) -> ais_stdlib::search::SearchProvider {
    use ais_stdlib::search::SearchProvider;
    match &cfg.search {
        Some(s) => SearchProvider::Http {
            url: s.url.clone(),
            api_key: s
                .api_key_env
                .as_deref()
                .and_then(|v| std::env::var(v).ok())
                .map(|k| k.trim().to_string()),
            key_missing: s
                .api_key_env
                .clone()
                .filter(|v| std::env::var_os(v).is_none()),
            timeout: s
                .timeout_s
                .and_then(config::secs)
                .unwrap_or(cfg.http_timeout),
        },
        None if cfg.simulate_search => SearchProvider::Simulated,
        None => SearchProvider::None,
    }
}
