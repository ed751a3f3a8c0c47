//! The A2A server (Agent2Agent protocol 1.0, JSON-RPC binding) under
//! `aisc serve`.
//!
//! Every agent of the served programs with entry flows is an A2A agent:
//! its card at `/a2a/{Agent}/.well-known/agent-card.json`, its JSON-RPC
//! endpoint at `POST /a2a/{Agent}`. `/.well-known/agent-card.json` and
//! `POST /a2a` describe and answer for every served agent at once (the
//! skill is chosen by the message's `metadata.skill`).
//!
//! Skills are entry flows (id `Agent.flow`); the JSON Schemas of their
//! parameters and results are in the card's `capabilities.extensions`
//! entry [`SCHEMA_EXTENSION`]. A task is a run (task id = run id): a
//! message starts the skill's flow with arguments taken from its parts
//! ([`arguments`]); the task's artifact `result` holds the flow's value.
//!
//! Methods: `SendMessage` (blocking unless `configuration.returnImmediately`),
//! `SendStreamingMessage` and `SubscribeToTask` (Server-Sent Events of
//! `StreamResponse`s: the task, then status and artifact updates, closed
//! once the task is in a terminal state), `GetTask`, `ListTasks`,
//! `CancelTask`. Push notifications and the extended card are not
//! supported (their errors). 1.0 requests name the version in the
//! `A2A-Version` header; a request without it (or with 0.3) is an A2A 0.3
//! request: `message/send`, `message/stream`, `tasks/get`, `tasks/cancel`
//! and `tasks/resubscribe` are answered in 0.3 shapes (translated at this
//! edge, `to_0_3`), any other method with `VersionNotSupportedError`.

use crate::engine::BudgetSpec;
use crate::error::ApiError;
use crate::registry::{Registry, RunEntry, Status};
use ais_ir::Type;
use ais_wire::a2a::TaskState;
use ais_wire::rpc;
use serde_json::{json, Map, Value as Json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod args;
mod error;
mod legacy;
mod stream;
mod task;
pub use args::arguments_for;
use args::*;
use error::*;
pub use error::{parse_error, RpcError};
use legacy::*;
pub use stream::{TaskFrames, TaskStream};
pub use task::timestamp;
use task::*;

/// The protocol version spoken (`Major.Minor`) and the card's well-known
/// path (relative to an agent's base URL).
pub use ais_wire::a2a::{CARD_PATH, PROTOCOL_VERSION};

/// The card extension carrying each skill's JSON Schemas.
pub const SCHEMA_EXTENSION: &str = "urn:ais:a2a:skill-schemas:v1";

/// One skill: an entry flow.
struct Skill {
    /// `Agent.flow`.
    id: String,
    agent: String,
    /// The served program's file name.
    program: String,
    description: String,
    /// `(name, type)` of each parameter.
    params: Vec<(String, Type)>,
    result: Type,
    input: Json,
    output: Json,
    /// The agent's entry flow (others are `discoverable`).
    entry: bool,
}

impl Skill {
    /// The parameter a text part is given to: the single `str` one.
    fn text_param(&self) -> Option<&str> {
        match self.params.as_slice() {
            [(name, Type::Str)] => Some(name),
            _ => None,
        }
    }

    fn signature(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|(n, t)| format!("{n}: {t}"))
            .collect();
        format!("{}({}) -> {}", self.id, params.join(", "), self.result)
    }

    fn to_card(&self) -> Json {
        let input = if self.text_param().is_some() {
            json!(["text/plain", "application/json"])
        } else {
            json!(["application/json"])
        };
        let output = if self.result == Type::Str {
            json!(["text/plain"])
        } else {
            json!(["application/json"])
        };
        json!({
            "id": self.id,
            "name": self.id,
            "description": self.description,
            // `entry`: the skill a message naming none goes to.
            "tags": if self.entry { json!(["ais", self.agent, "entry"]) } else { json!(["ais", self.agent]) },
            "inputModes": input,
            "outputModes": output,
        })
    }
}

/// What the server keeps of a task beyond its run.
#[derive(Clone)]
struct TaskMeta {
    context_id: String,
    /// The message that started it.
    history: Vec<Json>,
}

/// The answer to one JSON-RPC request.
pub enum Reply {
    /// A response object (`None`: the request was a notification).
    Json(Option<Json>),
    /// A stream of `StreamResponse`s for the task of `entry`.
    Stream(TaskStream),
}

/// The skills of the served programs (rebuilt when they are reloaded).
struct Skills {
    skills: Vec<Skill>,
    /// Agents in order, each with its skills (indices into `skills`).
    agents: Vec<(String, Vec<usize>)>,
}

impl Skills {
    fn knows(&self, agent: Option<&str>) -> bool {
        agent.is_none_or(|a| self.agents.iter().any(|(n, _)| n == a))
    }

    fn skills_of(&self, agent: Option<&str>) -> Vec<&Skill> {
        match agent {
            None => self.skills.iter().collect(),
            Some(a) => self
                .agents
                .iter()
                .find(|(n, _)| n == a)
                .map(|(_, v)| v.iter().filter_map(|&i| self.skills.get(i)).collect())
                .unwrap_or_default(),
        }
    }
}

/// The A2A server over a registry of served programs.
pub struct A2a {
    registry: Arc<Registry>,
    index: std::sync::RwLock<Arc<Skills>>,
    tasks: Mutex<HashMap<String, TaskMeta>>,
    /// Whether requests need a bearer token (declared in the cards).
    authenticated: bool,
}

impl A2a {
    pub fn new(registry: Arc<Registry>, authenticated: bool) -> A2a {
        let index = std::sync::RwLock::new(Arc::new(Self::build(&registry)));
        A2a {
            registry,
            index,
            tasks: Mutex::default(),
            authenticated,
        }
    }

    /// Rebuilds the skills from the registry's programs (after a reload).
    pub fn refresh(&self) {
        let fresh = Arc::new(Self::build(&self.registry));
        *self.index.write().unwrap_or_else(|e| e.into_inner()) = fresh;
    }

    fn index(&self) -> Arc<Skills> {
        self.index.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn build(registry: &Registry) -> Skills {
        let mut skills = Vec::new();
        let mut agents: Vec<(String, Vec<usize>)> = Vec::new();
        for served in registry.programs().iter() {
            let p = &served.program;
            for f in served.exposed_flows() {
                let Some(code) = p.flows.get(f as usize) else {
                    continue;
                };
                let agent = p
                    .agents
                    .get(code.agent as usize)
                    .map_or("agent", |a| a.name.as_str())
                    .to_string();
                let mut skill = Skill {
                    id: p.flow_name(f),
                    agent: agent.clone(),
                    program: served.file.clone(),
                    description: String::new(),
                    params: code
                        .params
                        .iter()
                        .map(|(n, t)| (n.clone(), p.type_of(*t)))
                        .collect(),
                    result: p.type_of(code.result),
                    input: crate::schema::input(p, f),
                    output: crate::schema::output(p, f),
                    entry: code.entry,
                };
                let how = match skill.text_param() {
                    Some(n) => format!(
                        "a text part (its `{n}`) or a data part with an object of arguments"
                    ),
                    None if skill.params.is_empty() => "any message (no arguments)".to_string(),
                    None => "a data part with an object of arguments".to_string(),
                };
                skill.description = format!(
                    "Runs the AIS flow {} of {}. Send {how}; the task's artifact `result` holds its value.",
                    skill.signature(),
                    served.file
                );
                let i = skills.len();
                skills.push(skill);
                match agents.iter_mut().find(|(a, _)| *a == agent) {
                    Some((_, v)) => v.push(i),
                    None => agents.push((agent, vec![i])),
                }
            }
        }
        Skills { skills, agents }
    }

    fn tasks(&self) -> std::sync::MutexGuard<'_, HashMap<String, TaskMeta>> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `agent` names an A2A agent of this server (`None`: the
    /// endpoint of all of them).
    pub fn knows(&self, agent: Option<&str>) -> bool {
        self.index().knows(agent)
    }

    /// The agent card of `agent` (`None`: the card of every served agent
    /// at `/a2a`), its URLs under `base` (`http://host:port`).
    pub fn card(&self, agent: Option<&str>, base: &str) -> Option<Json> {
        if !self.knows(agent) {
            return None;
        }
        let ix = self.index();
        let skills = ix.skills_of(agent);
        let (name, url, description) = match agent {
            Some(a) => {
                let files: Vec<&str> = {
                    let mut f: Vec<&str> = skills.iter().map(|s| s.program.as_str()).collect();
                    f.dedup();
                    f
                };
                (
                    a.to_string(),
                    format!("{base}/a2a/{a}"),
                    format!(
                        "The AIS agent {a} of {}, served by aisc. Skills: {}.",
                        files.join(", "),
                        skills
                            .iter()
                            .map(|s| s.signature())
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                )
            }
            None => {
                let names: Vec<&str> = ix.agents.iter().map(|(n, _)| n.as_str()).collect();
                let name = match names.as_slice() {
                    [one] => (*one).to_string(),
                    _ => "aisc".to_string(),
                };
                (
                    name,
                    format!("{base}/a2a"),
                    format!(
                        "AIS agents served by aisc: {}. Name the skill in the message's metadata.skill when there are several; each agent also has its own card at /a2a/{{Agent}}/{CARD_PATH}.",
                        names.join(", ")
                    ),
                )
            }
        };
        let schemas: Map<String, Json> = skills
            .iter()
            .map(|s| (s.id.clone(), json!({"input": s.input, "output": s.output})))
            .collect();
        let mut card = json!({
            "name": name,
            "description": description,
            "supportedInterfaces": [{
                "url": url,
                "protocolBinding": "JSONRPC",
                "protocolVersion": PROTOCOL_VERSION,
            }, {
                "url": url,
                "protocolBinding": "JSONRPC",
                "protocolVersion": "0.3",
            }],
            // A2A 0.3 clients read these (1.0 clients ignore them).
            "url": url,
            "preferredTransport": "JSONRPC",
            "protocolVersion": "0.3.0",
            "version": env!("CARGO_PKG_VERSION"),
            "capabilities": {
                "streaming": true,
                "pushNotifications": false,
                "extendedAgentCard": false,
                "extensions": [{
                    "uri": SCHEMA_EXTENSION,
                    "description": "JSON Schemas of each skill's arguments (input: the object a data part carries) and result (output: {result: ...}), by skill id",
                    "required": false,
                    "params": schemas,
                }],
            },
            "defaultInputModes": ["application/json", "text/plain"],
            "defaultOutputModes": ["text/plain", "application/json"],
            "skills": skills.iter().map(|s| s.to_card()).collect::<Vec<_>>(),
        });
        if self.authenticated {
            card["securitySchemes"] = json!({"bearer": {"httpAuthSecurityScheme": {
                "scheme": "Bearer",
                "description": "the token of the server's AIS_SERVE_TOKEN",
            }}});
            card["securityRequirements"] = json!([{"schemes": {"bearer": {"list": []}}}]);
        }
        Some(card)
    }

    /// Answers one JSON-RPC request to the endpoint of `agent` (`None`:
    /// `/a2a`). `version` is the request's `A2A-Version`. Blocks while a
    /// blocking `SendMessage` runs.
    pub fn handle(&self, agent: Option<&str>, version: Option<&str>, msg: &Json) -> Reply {
        let (id, method, params) = match rpc::classify(msg) {
            rpc::Incoming::Request { id, method, params } => (id, method, params),
            // A2A defines no notifications: nothing to answer.
            rpc::Incoming::Notification { .. } | rpc::Incoming::Ignored => {
                return Reply::Json(None)
            }
            rpc::Incoming::Invalid { id, why } => {
                let m = match why {
                    rpc::Invalid::NotAnObject => "the request is not a JSON-RPC object",
                    rpc::Invalid::NoMethod => "no `method`",
                    rpc::Invalid::BadVersion => "`jsonrpc` must be \"2.0\"",
                };
                return Reply::Json(Some(error(
                    id,
                    &RpcError::new(INVALID_REQUEST, "INVALID_REQUEST", m),
                )));
            }
        };
        // A2A 0.3 (no A2A-Version header, or 0.3) with its own method
        // names and shapes, translated at this edge.
        let legacy = LEGACY_METHODS.contains(&method) && is_0_3(version);
        let method = if legacy {
            match method {
                "message/send" => "SendMessage",
                "message/stream" => "SendStreamingMessage",
                "tasks/get" => "GetTask",
                "tasks/cancel" => "CancelTask",
                _ => "SubscribeToTask",
            }
        } else {
            if let Err(e) = check_version(version) {
                return Reply::Json(Some(error(id, &e)));
            }
            method
        };
        // An explicit `"params": null` is refused below, as always.
        let _ = params;
        let mut params = msg.get("params").cloned().unwrap_or(json!({}));
        if legacy {
            legacy_params(&mut params);
        }
        if !params.is_object() {
            return Reply::Json(Some(error(
                id,
                &RpcError::params("`params` must be an object"),
            )));
        }
        let r = match method {
            "SendMessage" => self.send(agent, &params).and_then(|(e, meta)| {
                let immediate = params["configuration"]["returnImmediately"] == true;
                if !immediate {
                    e.wait();
                }
                Ok(json!({"task": self.task_of(&e.to_json(), Some(&meta), history_length(&params)?)}))
            }),
            "SendStreamingMessage" => match self.send(agent, &params) {
                Ok((entry, meta)) => {
                    return Reply::Stream(TaskStream {
                        rpc_id: id,
                        entry,
                        meta,
                        legacy,
                    })
                }
                Err(e) => Err(e),
            },
            "SubscribeToTask" => match self.subscribe(&params) {
                Ok((entry, meta)) => {
                    return Reply::Stream(TaskStream {
                        rpc_id: id,
                        entry,
                        meta,
                        legacy,
                    })
                }
                Err(e) => Err(e),
            },
            "GetTask" => self.get(&params),
            "ListTasks" => self.list(&params),
            "CancelTask" => self.cancel(&params),
            "CreateTaskPushNotificationConfig"
            | "GetTaskPushNotificationConfig"
            | "ListTaskPushNotificationConfigs"
            | "DeleteTaskPushNotificationConfig" => Err(RpcError::new(
                PUSH_NOT_SUPPORTED,
                "PUSH_NOTIFICATION_NOT_SUPPORTED",
                "this agent does not send push notifications (capabilities.pushNotifications is false); stream the task or poll GetTask",
            )),
            "GetExtendedAgentCard" => Err(RpcError::new(
                EXTENDED_CARD_NOT_CONFIGURED,
                "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
                "this agent has no extended card; its public card is the whole card",
            )),
            other => Err(RpcError::new(
                METHOD_NOT_FOUND,
                "METHOD_NOT_FOUND",
                format!("method not found: {other} (A2A 1.0 JSON-RPC methods: SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask)"),
            )),
        };
        Reply::Json(Some(match r {
            Ok(v) if legacy => rpc::result(id, to_0_3(v)),
            Ok(v) => rpc::result(id, v),
            Err(e) => error(id, &e),
        }))
    }

    /// Starts the run of a `SendMessage`/`SendStreamingMessage`.
    fn send(
        &self,
        agent: Option<&str>,
        params: &Json,
    ) -> Result<(Arc<RunEntry>, TaskMeta), RpcError> {
        let message = params
            .get("message")
            .filter(|m| m.is_object())
            .ok_or_else(|| RpcError::params("`message` (an object) is required"))?;
        if let Some(role) = message.get("role").and_then(Json::as_str) {
            if role != "ROLE_USER" {
                return Err(RpcError::params(format!(
                    "message.role is {role}: a client's message has role ROLE_USER"
                )));
            }
        }
        let parts = match message.get("parts") {
            Some(Json::Array(p)) => p.as_slice(),
            None | Some(Json::Null) => &[],
            Some(_) => return Err(RpcError::params("message.parts must be an array")),
        };
        if let Some(t) = message
            .get("taskId")
            .and_then(Json::as_str)
            .filter(|t| !t.is_empty())
        {
            return self.answer(t, message, parts);
        }
        let ix = self.index();
        let skill = self.pick_skill(&ix, agent, message, params)?;
        let args = arguments(skill, parts)?;
        let given = message
            .get("contextId")
            .and_then(Json::as_str)
            .filter(|c| !c.is_empty());
        // A context is a thread (made on first use): the run sees the
        // context's earlier runs and state. Without a journal to keep
        // threads in (`--memory :memory:`) it is only an id, as before.
        // A context the client did not name is a new thread, whose id the
        // reply carries: the client continues the conversation with it.
        let on_thread = if self.registry.thread_store().is_ok() {
            match given {
                Some(c) if ais_vm::store::thread::valid_id(c) => Some(c.to_string()),
                Some(_) => None,
                None => Some(format!("ctx-{}", crate::registry::new_thread_id())),
            }
        } else {
            None
        };
        let entry = match &on_thread {
            Some(ctx) => self.registry.start_thread_run(
                ctx,
                &skill.program,
                Some(&skill.id),
                &args,
                BudgetSpec::default(),
                Default::default(),
                Vec::new(),
                crate::registry::Multitask::Enqueue,
                true,
            ),
            None => self.registry.start_run(
                &skill.program,
                Some(&skill.id),
                &args,
                BudgetSpec::default(),
            ),
        }
        .map_err(|e| RpcError::from_api(&e).with("skill", skill.id.as_str()))?;
        let context_id = on_thread
            .or_else(|| given.map(str::to_string))
            .unwrap_or_else(|| format!("ctx-{}", entry.id));
        let mut user = message.clone();
        user["taskId"] = entry.id.as_str().into();
        user["contextId"] = context_id.as_str().into();
        let meta = TaskMeta {
            context_id,
            history: vec![user],
        };
        self.tasks().insert(entry.id.clone(), meta.clone());
        Ok((entry, meta))
    }

    /// A follow-up message to a task in `TASK_STATE_INPUT_REQUIRED` (its
    /// run waits at a `pause`): the message is the answer (its text, or its
    /// data part's value), and the run resumes with it.
    fn answer(
        &self,
        t: &str,
        message: &Json,
        parts: &[Json],
    ) -> Result<(Arc<RunEntry>, TaskMeta), RpcError> {
        let run = self
            .registry
            .describe(t)
            .map_err(|_| RpcError::task_not_found(t))?;
        if !waits_for_input(&run) {
            return Err(RpcError::new(
                UNSUPPORTED_OPERATION,
                "UNSUPPORTED_OPERATION",
                format!("task `{t}` does not wait for input (it is {}): only a task in TASK_STATE_INPUT_REQUIRED takes a further message; send a new message without taskId", state_of(&run)),
            )
            .with("taskId", t));
        }
        let data = parts.iter().find_map(|p| p.get("data")).cloned();
        let texts: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
        let input = match (data, texts.is_empty()) {
            (Some(d), _) => d,
            (None, false) => Json::String(texts.join("\n")),
            (None, true) => {
                return Err(RpcError::params(
                    "the answer to a paused task is a text part or a data part",
                ))
            }
        };
        let entry = self
            .registry
            .resume(t, BudgetSpec::default(), Some(input))
            .map_err(|e| RpcError::from_api(&e).with("taskId", t))?;
        let mut meta = self.meta(t);
        let mut user = message.clone();
        user["contextId"] = meta.context_id.as_str().into();
        meta.history.push(user);
        self.tasks().insert(t.to_string(), meta.clone());
        Ok((entry, meta))
    }

    /// The skill a message is for: `metadata.skill` (of the message or of
    /// the request), else the agent's only skill, else the agent's
    /// `@entry` flow when it has one of its own.
    fn pick_skill<'a>(
        &self,
        ix: &'a Skills,
        agent: Option<&str>,
        message: &Json,
        params: &Json,
    ) -> Result<&'a Skill, RpcError> {
        let skills = ix.skills_of(agent);
        let named = message["metadata"]["skill"]
            .as_str()
            .or_else(|| params["metadata"]["skill"].as_str());
        let ids = || {
            skills
                .iter()
                .map(|s| s.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if let Some(n) = named {
            return skills
                .iter()
                .find(|s| s.id == n || s.id.rsplit_once('.').is_some_and(|(_, f)| f == n))
                .copied()
                .ok_or_else(|| {
                    RpcError::params(format!("no skill `{n}` here; skills: {}", ids()))
                        .with("skill", n)
                });
        }
        match skills.as_slice() {
            [one] => Ok(one),
            [] => Err(RpcError::params("this agent has no skills")),
            _ => Err(RpcError::params(format!(
                "several skills ({}): name one in the message's metadata.skill",
                ids()
            ))),
        }
    }

    fn subscribe(&self, params: &Json) -> Result<(Arc<RunEntry>, TaskMeta), RpcError> {
        let id = task_id(params)?;
        let Some(entry) = self.registry.get(id) else {
            return Err(match self.registry.describe(id) {
                Ok(_) => RpcError::new(
                    UNSUPPORTED_OPERATION,
                    "UNSUPPORTED_OPERATION",
                    format!("task `{id}` is not running in this server"),
                )
                .with("taskId", id),
                Err(_) => RpcError::task_not_found(id),
            });
        };
        if entry.status().is_final() {
            return Err(RpcError::new(
                UNSUPPORTED_OPERATION,
                "UNSUPPORTED_OPERATION",
                format!("task `{id}` is in a terminal state; GetTask returns it"),
            )
            .with("taskId", id));
        }
        Ok((entry, self.meta(id)))
    }

    fn meta(&self, id: &str) -> TaskMeta {
        self.tasks().get(id).cloned().unwrap_or_else(|| TaskMeta {
            // A run started through /v1/runs: its own context.
            context_id: format!("ctx-{id}"),
            history: Vec::new(),
        })
    }

    fn get(&self, params: &Json) -> Result<Json, RpcError> {
        let id = task_id(params)?;
        let run = self
            .registry
            .describe(id)
            .map_err(|_| RpcError::task_not_found(id))?;
        let meta = self.meta(id);
        Ok(self.task_of(&run, Some(&meta), history_length(params)?))
    }

    fn list(&self, params: &Json) -> Result<Json, RpcError> {
        let runs = self
            .registry
            .list(None)
            .map_err(|e| RpcError::from_api(&e))?;
        let context = params["contextId"].as_str().filter(|c| !c.is_empty());
        let status = params["status"]
            .as_str()
            .filter(|s| !s.is_empty() && *s != TaskState::Unspecified.name());
        let page_size = match &params["pageSize"] {
            Json::Null => 50,
            v => v
                .as_u64()
                .filter(|n| (1..=100).contains(n))
                .ok_or_else(|| RpcError::params("pageSize must be 1 to 100"))?
                as usize,
        };
        let offset = match params["pageToken"].as_str().filter(|t| !t.is_empty()) {
            None => 0,
            Some(t) => t
                .parse::<usize>()
                .map_err(|_| RpcError::params(format!("pageToken `{t}` is not one of ours")))?,
        };
        let history = history_length(params)?;
        let artifacts = params["includeArtifacts"] == true;
        // Newest first.
        let tasks: Vec<Json> = runs
            .iter()
            .rev()
            .filter_map(|r| {
                let id = r["id"].as_str()?;
                let meta = self.meta(id);
                let mut t = self.task_of(r, Some(&meta), history);
                if context.is_some_and(|c| c != meta.context_id) {
                    return None;
                }
                if status.is_some_and(|s| t["status"]["state"] != s) {
                    return None;
                }
                if !artifacts {
                    if let Some(o) = t.as_object_mut() {
                        o.remove("artifacts");
                    }
                }
                Some(t)
            })
            .collect();
        let total = tasks.len();
        let page: Vec<Json> = tasks.into_iter().skip(offset).take(page_size).collect();
        let next = if offset + page.len() < total {
            (offset + page.len()).to_string()
        } else {
            String::new()
        };
        Ok(json!({
            "tasks": page,
            "nextPageToken": next,
            "pageSize": page_size,
            "totalSize": total,
        }))
    }

    fn cancel(&self, params: &Json) -> Result<Json, RpcError> {
        let id = task_id(params)?;
        match self.registry.cancel(id) {
            Ok(entry) => {
                // Cancelling is cooperative: the run's effects stop at once,
                // its flow a moment later (an LLM call that does not
                // watch its cancel token ends first): the task as it is
                // after a short wait.
                entry.wait_timeout(Duration::from_secs(2));
                Ok(self.task_of(&entry.to_json(), Some(&self.meta(id)), None))
            }
            Err(e) if e.status == 404 => Err(RpcError::task_not_found(id)),
            Err(e) => Err(RpcError::new(
                TASK_NOT_CANCELABLE,
                "TASK_NOT_CANCELABLE",
                format!("{} ({})", e.message, e.hint),
            )
            .with("taskId", id)),
        }
    }

    /// A `Task` from a run's JSON (`GET /v1/runs/{id}`'s shape).
    fn task_of(&self, run: &Json, meta: Option<&TaskMeta>, history: Option<usize>) -> Json {
        let id = run["id"].as_str().unwrap_or("");
        let context_id = meta.map_or_else(|| format!("ctx-{id}"), |m| m.context_id.clone());
        let state = state_of(run);
        let at = ["ended_ms", "started_ms", "created_ms"]
            .iter()
            .find_map(|k| run[*k].as_i64())
            .unwrap_or_else(crate::now_ms);
        let mut st = json!({"state": state, "timestamp": timestamp(at)});
        if let Some(m) = status_message(run, id, &context_id) {
            st["message"] = m;
        }
        let mut task = json!({
            "id": id,
            "contextId": context_id,
            "status": st,
            "metadata": {"program": run["program"], "entry": run["entry"]},
        });
        if let Some(a) = result_artifact(run) {
            task["artifacts"] = json!([a]);
        }
        let mut h: Vec<Json> = meta.map(|m| m.history.clone()).unwrap_or_default();
        if let Some(n) = history {
            let skip = h.len().saturating_sub(n);
            h.drain(..skip);
        }
        if !h.is_empty() {
            task["history"] = h.into();
        }
        task
    }
}
