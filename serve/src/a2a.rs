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
use crate::wire::rpc;
use ais_ir::Type;
use serde_json::{json, Map, Value as Json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod stream;
pub use stream::{TaskFrames, TaskStream};

/// The protocol version spoken (`Major.Minor`).
pub const PROTOCOL_VERSION: &str = "1.0";

/// The card extension carrying each skill's JSON Schemas.
pub const SCHEMA_EXTENSION: &str = "urn:ais:a2a:skill-schemas:v1";

/// The card's well-known path (relative to an agent's base URL).
pub const CARD_PATH: &str = ".well-known/agent-card.json";

// JSON-RPC error codes (A2A specification, section 5.4).
use rpc::{
    INTERNAL_ERROR as INTERNAL, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR,
};
const TASK_NOT_FOUND: i64 = -32001;
const TASK_NOT_CANCELABLE: i64 = -32002;
const PUSH_NOT_SUPPORTED: i64 = -32003;
const UNSUPPORTED_OPERATION: i64 = -32004;
const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
const EXTENDED_CARD_NOT_CONFIGURED: i64 = -32007;
const VERSION_NOT_SUPPORTED: i64 = -32009;

/// A JSON-RPC error: code, message, and the `google.rpc.ErrorInfo` reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct RpcError {
    pub code: i64,
    pub reason: &'static str,
    pub message: String,
    pub metadata: Map<String, Json>,
}

impl RpcError {
    fn new(code: i64, reason: &'static str, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            reason,
            message: message.into(),
            metadata: Map::new(),
        }
    }

    fn with(mut self, key: &str, value: impl Into<Json>) -> RpcError {
        self.metadata.insert(key.into(), value.into());
        self
    }

    fn params(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_PARAMS, "INVALID_PARAMS", message)
    }

    fn task_not_found(id: &str) -> RpcError {
        RpcError::new(TASK_NOT_FOUND, "TASK_NOT_FOUND", format!("no task `{id}`"))
            .with("taskId", id)
    }

    /// The error object of a JSON-RPC response.
    pub fn to_json(&self) -> Json {
        json!({"code": self.code, "message": self.message, "data": self.data()})
    }

    /// The error object's `data`: one `google.rpc.ErrorInfo`.
    fn data(&self) -> Json {
        let mut metadata = self.metadata.clone();
        metadata.insert("timestamp".into(), timestamp(crate::now_ms()).into());
        json!([{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": self.reason,
            "domain": "a2a-protocol.org",
            "metadata": metadata,
        }])
    }

    /// A server refusal (`ApiError`) as the JSON-RPC error closest to it.
    fn from_api(e: &ApiError) -> RpcError {
        let (code, reason) = match e.status {
            400 | 404 | 413 => (INVALID_PARAMS, "INVALID_PARAMS"),
            _ => (INTERNAL, "INTERNAL"),
        };
        let mut r =
            RpcError::new(code, reason, format!("{} ({})", e.message, e.hint)).with("code", e.code);
        if let Some(s) = e.retry_after {
            r = r.with("retryAfterSeconds", s);
        }
        r
    }
}

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
        let entry = self
            .registry
            .start_run(
                &skill.program,
                Some(&skill.id),
                &args,
                BudgetSpec::default(),
            )
            .map_err(|e| RpcError::from_api(&e).with("skill", skill.id.as_str()))?;
        let context_id = message
            .get("contextId")
            .and_then(Json::as_str)
            .filter(|c| !c.is_empty())
            .map_or_else(|| format!("ctx-{}", entry.id), str::to_string);
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
        if entry.state().status.is_final() {
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
            .filter(|s| !s.is_empty() && *s != "TASK_STATE_UNSPECIFIED");
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

/// The flow arguments a message's parts give `skill`:
/// - a data part holding an object: that object, the arguments by name;
/// - else text parts (joined with newlines): the value of the flow's
///   single `str` parameter;
/// - else nothing: a flow without parameters.
///
/// Files (`raw`, `url` parts) are refused.
pub fn arguments_for(
    params: &[(String, Type)],
    flow: &str,
    parts: &[Json],
) -> Result<Json, RpcError> {
    let mut data: Option<&Json> = None;
    let mut texts: Vec<&str> = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        if let Some(d) = p.get("data") {
            if !d.is_object() {
                return Err(RpcError::params(format!(
                    "message.parts[{i}].data must be an object of {flow}'s arguments"
                )));
            }
            if data.is_some() {
                return Err(RpcError::params(
                    "several data parts: send the arguments in one object",
                ));
            }
            data = Some(d);
        } else if let Some(t) = p.get("text") {
            let t = t.as_str().ok_or_else(|| {
                RpcError::params(format!("message.parts[{i}].text must be a string"))
            })?;
            texts.push(t);
        } else if p.get("raw").is_some() || p.get("url").is_some() || p.get("file").is_some() {
            return Err(RpcError::new(
                CONTENT_TYPE_NOT_SUPPORTED,
                "CONTENT_TYPE_NOT_SUPPORTED",
                format!("message.parts[{i}] is a file: AIS flows take text and data parts"),
            ));
        } else {
            return Err(RpcError::params(format!(
                "message.parts[{i}] has no text, data, raw or url"
            )));
        }
    }
    if let Some(d) = data {
        return Ok(d.clone());
    }
    match params {
        [] => Ok(json!({})),
        [(name, Type::Str)] if !texts.is_empty() => Ok(json!({name.as_str(): texts.join("\n")})),
        _ => {
            let sig: Vec<String> = params.iter().map(|(n, t)| format!("{n}: {t}")).collect();
            Err(RpcError::params(format!(
                "{flow} takes ({}): send a data part with an object of its arguments{}",
                sig.join(", "),
                if texts.is_empty() {
                    ""
                } else {
                    " (a text part fills only a single str parameter)"
                }
            )))
        }
    }
}

fn arguments(skill: &Skill, parts: &[Json]) -> Result<Json, RpcError> {
    arguments_for(&skill.params, &skill.id, parts)
}

/// The A2A 0.3 methods answered (JSON-RPC binding).
const LEGACY_METHODS: [&str; 5] = [
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
    "tasks/resubscribe",
];

/// Whether a request's `A2A-Version` means 0.3 (absent means 0.3).
fn is_0_3(v: Option<&str>) -> bool {
    let v = v.map(str::trim).unwrap_or("");
    v.is_empty() || v == "0.3" || v.starts_with("0.3.")
}

/// A 0.3 request's params in 1.0 terms: `role: "user"`, and
/// `configuration.blocking: false` for `returnImmediately`.
fn legacy_params(params: &mut Json) {
    if let Some(m) = params.get_mut("message") {
        if m["role"] == "user" {
            m["role"] = "ROLE_USER".into();
        }
    }
    if params["configuration"]["blocking"] == false {
        params["configuration"]["returnImmediately"] = true.into();
    }
}

/// A 1.0 result (`{"task": …}`, a `StreamResponse`, a Task) in 0.3 shapes:
/// `kind` discriminators, lower-case states and roles, a `final` flag on
/// status updates.
fn to_0_3(v: Json) -> Json {
    let Json::Object(mut o) = v else { return v };
    if let Some(t) = o.remove("task") {
        return task_0_3(t);
    }
    if let Some(m) = o.remove("message") {
        return message_0_3(m);
    }
    if let Some(Json::Object(mut u)) = o.remove("statusUpdate") {
        let status = u.remove("status").map_or(Json::Null, status_0_3);
        let last = ends_stream(&json!(format!(
            "TASK_STATE_{}",
            status["state"]
                .as_str()
                .unwrap_or("")
                .to_uppercase()
                .replace('-', "_")
        )));
        u.insert("status".into(), status);
        u.insert("final".into(), last.into());
        u.insert("kind".into(), "status-update".into());
        return Json::Object(u);
    }
    if let Some(Json::Object(mut u)) = o.remove("artifactUpdate") {
        if let Some(a) = u.remove("artifact") {
            u.insert("artifact".into(), artifact_0_3(a));
        }
        u.insert("kind".into(), "artifact-update".into());
        return Json::Object(u);
    }
    if o.contains_key("status") && o.contains_key("id") {
        return task_0_3(Json::Object(o));
    }
    Json::Object(o)
}

fn task_0_3(mut t: Json) -> Json {
    if let Some(s) = t.get_mut("status") {
        *s = status_0_3(s.take());
    }
    if let Some(Json::Array(a)) = t.get_mut("artifacts") {
        for x in a.iter_mut() {
            *x = artifact_0_3(x.take());
        }
    }
    if let Some(Json::Array(h)) = t.get_mut("history") {
        for m in h.iter_mut() {
            *m = message_0_3(m.take());
        }
    }
    t["kind"] = "task".into();
    t
}

fn status_0_3(mut s: Json) -> Json {
    let state = s["state"]
        .as_str()
        .and_then(|x| x.strip_prefix("TASK_STATE_"))
        .map_or_else(
            || "unknown".to_string(),
            |x| x.to_lowercase().replace('_', "-"),
        );
    s["state"] = state.into();
    if let Some(m) = s.get_mut("message") {
        *m = message_0_3(m.take());
    }
    s
}

fn message_0_3(mut m: Json) -> Json {
    let role = match m["role"].as_str() {
        Some("ROLE_AGENT") => "agent",
        _ => "user",
    };
    m["role"] = role.into();
    if let Some(Json::Array(p)) = m.get_mut("parts") {
        for x in p.iter_mut() {
            *x = part_0_3(x.take());
        }
    }
    m["kind"] = "message".into();
    m
}

fn artifact_0_3(mut a: Json) -> Json {
    if let Some(Json::Array(p)) = a.get_mut("parts") {
        for x in p.iter_mut() {
            *x = part_0_3(x.take());
        }
    }
    a
}

/// A 0.3 part: `kind` text or data (0.3 data is an object: other values
/// are wrapped as `{"result": value}`).
fn part_0_3(p: Json) -> Json {
    if p.get("kind").is_some() {
        return p;
    }
    if let Some(t) = p.get("text") {
        return json!({"kind": "text", "text": t});
    }
    match p.get("data") {
        Some(d @ Json::Object(_)) => json!({"kind": "data", "data": d}),
        Some(d) => json!({"kind": "data", "data": {"result": d}}),
        None => p,
    }
}

fn check_version(v: Option<&str>) -> Result<(), RpcError> {
    let v = v.map(str::trim).unwrap_or("");
    let given = if v.is_empty() { "0.3" } else { v };
    let mut it = given.split('.');
    let (major, minor) = (it.next(), it.next().unwrap_or("0"));
    if major == Some("1") && minor == "0" {
        return Ok(());
    }
    Err(RpcError::new(
        VERSION_NOT_SUPPORTED,
        "VERSION_NOT_SUPPORTED",
        format!(
            "A2A version {given}{} is not supported: this agent speaks A2A {PROTOCOL_VERSION} (send the header `A2A-Version: {PROTOCOL_VERSION}`)",
            if v.is_empty() { " (no A2A-Version header)" } else { "" }
        ),
    )
    .with("requestedVersion", given)
    .with("supportedVersions", json!([PROTOCOL_VERSION])))
}

fn task_id(params: &Json) -> Result<&str, RpcError> {
    params["id"]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| RpcError::params("`id` (the task id) is required"))
}

fn history_length(params: &Json) -> Result<Option<usize>, RpcError> {
    let v = params
        .get("historyLength")
        .or_else(|| params["configuration"].get("historyLength"));
    match v {
        None | Some(Json::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(|n| Some(usize::try_from(n).unwrap_or(usize::MAX)))
            .ok_or_else(|| RpcError::params("historyLength must be zero or more")),
    }
}

/// What a paused run's status reads as before its cause is known.
const PAUSED_STATE: &str = "TASK_STATE_FAILED";

fn state_name(s: Status) -> &'static str {
    match s {
        Status::Queued => "TASK_STATE_SUBMITTED",
        Status::Running => "TASK_STATE_WORKING",
        Status::Succeeded => "TASK_STATE_COMPLETED",
        // A run its server's stop interrupted is resumable through POST
        // /v1/runs/{id}/resume; to A2A it has failed. One waiting at a
        // `pause` is told apart by `state_of`.
        Status::Failed | Status::Paused => PAUSED_STATE,
        Status::Cancelled => "TASK_STATE_CANCELED",
    }
}

/// Whether a run waits at a `pause` for a person's answer.
fn waits_for_input(run: &Json) -> bool {
    run["status"] == "paused" && run["error"]["cause"] == "run.paused"
}

/// A run's task state: a run waiting at a `pause` is
/// `TASK_STATE_INPUT_REQUIRED` (a follow-up message with its `taskId`
/// answers it).
fn state_of(run: &Json) -> &'static str {
    if waits_for_input(run) {
        return "TASK_STATE_INPUT_REQUIRED";
    }
    run["status"]
        .as_str()
        .and_then(Status::parse)
        .map_or("TASK_STATE_UNSPECIFIED", state_name)
}

/// A stream closes at a terminal state and at an interrupted one (the
/// task waits for input: a follow-up message resumes it, and the client
/// subscribes again).
fn ends_stream(state: &Json) -> bool {
    is_terminal(state)
        || state == "TASK_STATE_INPUT_REQUIRED"
        || state == "TASK_STATE_AUTH_REQUIRED"
}

fn is_terminal(state: &Json) -> bool {
    matches!(
        state.as_str(),
        Some(
            "TASK_STATE_COMPLETED"
                | "TASK_STATE_FAILED"
                | "TASK_STATE_CANCELED"
                | "TASK_STATE_REJECTED"
        )
    )
}

/// A value as one part: a string as text, anything else as data.
fn part_of(v: &Json) -> Json {
    match v {
        Json::String(s) => json!({"text": s, "mediaType": "text/plain"}),
        other => json!({"data": other, "mediaType": "application/json"}),
    }
}

fn result_artifact(run: &Json) -> Option<Json> {
    if run["status"] != "succeeded" {
        return None;
    }
    let v = run.get("result")?;
    Some(json!({
        "artifactId": "result",
        "name": "result",
        "description": "the value of the flow",
        "parts": [part_of(v)],
    }))
}

/// The agent's message of a failed or cancelled task: the error's code
/// and message as text, the whole error as data.
fn status_message(run: &Json, id: &str, context_id: &str) -> Option<Json> {
    let e = run.get("error")?;
    if waits_for_input(run) {
        // The question the run waits on, for the person to answer.
        let question = e["payload"]["message"]
            .as_str()
            .or_else(|| e["message"].as_str())
            .unwrap_or("")
            .to_string();
        return Some(json!({
            "messageId": format!("{id}-input"),
            "contextId": context_id,
            "taskId": id,
            "role": "ROLE_AGENT",
            "parts": [{"text": question, "mediaType": "text/plain"}],
            "metadata": {"answer": "send a message with this taskId: its text (or data part) is the answer"},
        }));
    }
    let text = format!(
        "{}: {}",
        e["code"].as_str().unwrap_or("run.failed"),
        e["message"].as_str().unwrap_or("")
    );
    let mut parts = vec![json!({"text": text, "mediaType": "text/plain"})];
    if run["status"] == "paused" {
        parts.push(json!({"text": format!("the run is paused (its server stopped, or it waits at a `pause`); POST /v1/runs/{id}/resume continues it, with `input` for a `pause`"), "mediaType": "text/plain"}));
    }
    parts.push(json!({"data": e, "mediaType": "application/json"}));
    Some(json!({
        "messageId": format!("{id}-status"),
        "contextId": context_id,
        "taskId": id,
        "role": "ROLE_AGENT",
        "parts": parts,
    }))
}

fn error(id: Json, e: &RpcError) -> Json {
    rpc::error(id, e.code, &e.message, Some(e.data()))
}

/// A JSON-RPC parse error response (the body was not JSON).
pub fn parse_error(detail: &str) -> Json {
    error(
        Json::Null,
        &RpcError::new(
            PARSE_ERROR,
            "PARSE_ERROR",
            format!("invalid JSON payload: {detail}"),
        ),
    )
}

/// RFC 3339 UTC with milliseconds from milliseconds since the epoch.
pub fn timestamp(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(timestamp(1_709_251_199_123), "2024-02-29T23:59:59.123Z");
        assert_eq!(timestamp(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn parts_map_to_arguments() {
        let one = vec![("topic".to_string(), Type::Str)];
        let two = vec![
            ("a".to_string(), Type::Str),
            ("n".to_string(), Type::Number),
        ];
        let text = json!([{"text": "bees"}, {"text": "wasps"}]);
        let text = text.as_array().map_or(&[][..], Vec::as_slice);
        assert_eq!(
            arguments_for(&one, "A.f", text),
            Ok(json!({"topic": "bees\nwasps"}))
        );
        let data = [json!({"data": {"a": "x", "n": 2}})];
        assert_eq!(
            arguments_for(&two, "A.g", &data),
            Ok(json!({"a": "x", "n": 2}))
        );
        let e = arguments_for(&two, "A.g", text).err().map(|e| e.code);
        assert_eq!(e, Some(INVALID_PARAMS));
        let file = [json!({"url": "https://x/y.png"})];
        let e = arguments_for(&one, "A.f", &file).err().map(|e| e.code);
        assert_eq!(e, Some(CONTENT_TYPE_NOT_SUPPORTED));
        assert_eq!(arguments_for(&[], "A.h", &[]), Ok(json!({})));
        let e = arguments_for(&one, "A.f", &[json!({"data": [1]})])
            .err()
            .map(|e| e.code);
        assert_eq!(e, Some(INVALID_PARAMS));
    }

    #[test]
    fn only_version_1_0_is_spoken_and_no_header_means_0_3() {
        assert!(check_version(Some("1.0")).is_ok());
        assert!(check_version(Some("1.0.3")).is_ok());
        assert_eq!(
            check_version(None).err().map(|e| e.code),
            Some(VERSION_NOT_SUPPORTED)
        );
        assert_eq!(
            check_version(Some("0.3")).err().map(|e| e.code),
            Some(VERSION_NOT_SUPPORTED)
        );
    }
}
