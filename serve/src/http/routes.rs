//! The endpoints: a request (already authenticated, its body read) to a
//! [`Reply`]. Synchronous: it runs on the runtime's blocking pool, since
//! starting a run journals it and some requests wait for their run
//! (`?wait=true`, MCP `tools/call`, A2A `SendMessage`).

use super::Ctx;
use crate::a2a;
use crate::engine::BudgetSpec;
use crate::error::ApiError;
use crate::events::EventLog;
use crate::registry::Status;
use serde::Deserialize;
use serde_json::{json, Value as Json};
use std::sync::Arc;

/// What the router needs of a request.
pub(crate) struct Head {
    pub method: hyper::Method,
    pub path: String,
    pub query: String,
    /// `Last-Event-ID`.
    pub last_event_id: Option<String>,
    /// `A2A-Version`.
    pub a2a_version: Option<String>,
    /// `Host` (agent card URLs).
    pub host: Option<String>,
}

/// The answer to a request.
pub(crate) enum Reply {
    /// A whole body.
    Full {
        status: u16,
        content_type: &'static str,
        body: Vec<u8>,
        headers: Vec<(&'static str, String)>,
    },
    /// `GET /v1/runs/{id}/events`: the log's events after `after`.
    Events { log: Arc<EventLog>, after: u64 },
    /// An A2A task's stream.
    Task(a2a::TaskStream),
}

impl Reply {
    pub fn json(status: u16, body: &Json) -> Reply {
        Reply::Full {
            status,
            content_type: "application/json",
            body: format!("{body}\n").into_bytes(),
            headers: Vec::new(),
        }
    }

    pub fn error(e: &ApiError) -> Reply {
        let mut headers = Vec::new();
        if let Some(s) = e.retry_after {
            headers.push(("Retry-After", s.to_string()));
        }
        if matches!(e.status, 408 | 413) {
            // The rest of the body is not read.
            headers.push(("Connection", "close".to_string()));
        }
        Reply::Full {
            status: e.status,
            content_type: "application/json",
            body: format!("{}\n", e.to_json()).into_bytes(),
            headers,
        }
    }

    fn empty(
        status: u16,
        content_type: &'static str,
        headers: Vec<(&'static str, String)>,
    ) -> Reply {
        Reply::Full {
            status,
            content_type,
            body: Vec::new(),
            headers,
        }
    }
}

pub(super) fn query_param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

pub(super) fn parse_json(body: &[u8]) -> Result<Json, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Json::Null);
    }
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(
            "request.malformed_json",
            format!("the body is not valid JSON: {e}"),
            "send a JSON object with `Content-Type: application/json`",
        )
    })
}

/// `POST /v1/runs`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StartRequest {
    pub program: String,
    pub entry: Option<String>,
    #[serde(default)]
    pub args: Json,
    #[serde(default)]
    pub budget: BudgetSpec,
    /// With `aisc serve --enqueue`: the run's place in the fleet's queue
    /// (docs/scale-out.md).
    #[serde(default)]
    priority: Option<i32>,
    #[serde(default)]
    concurrency_key: Option<String>,
    #[serde(default)]
    key_limit: Option<i32>,
    /// POST the run's completion, failure or pause to these URLs, signed
    /// (docs/serve.md, "Webhooks").
    #[serde(default)]
    webhooks: Vec<WebhookRequest>,
}

/// One webhook of `POST /v1/runs`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WebhookRequest {
    url: String,
    /// Some of `completed`, `failed`, `paused` (default: all three).
    #[serde(default)]
    events: Option<Vec<String>>,
}

/// The webhooks of a request, checked as `aisc run --webhook` checks them.
fn webhooks(list: &[WebhookRequest]) -> Result<Vec<ais_vm::store::webhook::Hook>, ApiError> {
    let settings = ais_vm::webhook::Settings::from_process();
    if list.len() > ais_vm::webhook::MAX_HOOKS {
        let e = ais_vm::webhook::WebhookError::TooMany(list.len());
        return Err(ApiError::bad_request(
            e.code(),
            e.to_string(),
            "send fewer webhooks",
        ));
    }
    list.iter()
        .map(|w| {
            let events = w.events.as_ref().map(|e| e.join(","));
            ais_vm::webhook::declare(&w.url, events.as_deref(), &settings).map_err(|e| {
                ApiError::bad_request(
                    e.code(),
                    e.to_string(),
                    "send `\"webhooks\": [{\"url\": \"https://example.com/hook\", \"events\": [\"completed\", \"failed\"]}]`",
                )
            })
        })
        .collect()
}

impl StartRequest {
    /// The run's place in the fleet's queue.
    /// The request's webhooks, checked (`webhooks`).
    pub(super) fn hooks(&self) -> Result<Vec<ais_vm::store::webhook::Hook>, ApiError> {
        webhooks(&self.webhooks)
    }

    pub(super) fn queue_options(&self) -> Result<ais_vm::store::priority::QueueOptions, ApiError> {
        if self.key_limit.is_some_and(|l| l < 1)
            || (self.key_limit.is_some() && self.concurrency_key.is_none())
        {
            return Err(ApiError::bad_request(
                "request.invalid",
                "`key_limit` must be at least 1 and comes with a `concurrency_key`",
                "send `\"concurrency_key\": \"tenant-a\", \"key_limit\": 2`",
            ));
        }
        Ok(ais_vm::store::priority::QueueOptions {
            priority: self.priority.unwrap_or(0),
            key: self.concurrency_key.clone(),
            key_limit: self.key_limit,
            retry: None,
        })
    }
}

/// `POST /v1/runs/{id}/confirm`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfirmRequest {
    allow: bool,
    /// The question's number (the `confirm` event's `request`); optional
    /// when only one is open.
    #[serde(default)]
    request: Option<u64>,
}

/// `POST /v1/runs/{id}/fork`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ForkRequest {
    /// A step number (`GET /v1/runs/{id}/steps`) or a key prefix.
    at: Json,
    /// The step's value in the fork; absent: kept.
    #[serde(default)]
    set: Option<Json>,
}

/// `POST /v1/runs/{id}/resume`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ResumeRequest {
    #[serde(default)]
    budget: BudgetSpec,
    /// The answer to the `pause` a paused run waits at.
    #[serde(default)]
    input: Option<Json>,
}

pub(super) fn shape<T: for<'de> Deserialize<'de>>(j: Json, what: &str) -> Result<T, ApiError> {
    serde_json::from_value(j).map_err(|e| {
        ApiError::bad_request(
            "request.invalid",
            format!("{what}: {e}"),
            "see docs/serve.md for the request's fields",
        )
    })
}

fn method_not_allowed(head: &Head, allow: &str, hint: &str) -> Reply {
    let e = ApiError::new(
        405,
        "request.method",
        format!("{} is not allowed on {}", head.method, head.path),
        hint,
    );
    match Reply::error(&e) {
        Reply::Full {
            status,
            content_type,
            body,
            mut headers,
        } => {
            headers.push(("Allow", allow.to_string()));
            Reply::Full {
                status,
                content_type,
                body,
                headers,
            }
        }
        other => other,
    }
}

/// Answers one request that `threads` and `memory` did not take
/// (`super::answer`).
pub(crate) fn route(ctx: &Arc<Ctx>, head: &Head, segs: &[&str], body: &[u8]) -> Reply {
    use hyper::Method;
    let path = head.path.as_str();
    let query = head.query.as_str();
    let result: Result<(u16, Json), ApiError> = match (&head.method, segs) {
        (&Method::GET, ["health"]) => {
            let g = ctx.registry.gauges();
            Ok((
                200,
                json!({"status": "ok", "running": g.running, "queued": g.queued,
                       "programs": ctx.registry.programs().iter().map(|p| p.file.clone()).collect::<Vec<_>>()}),
            ))
        }
        // Compile the served files again (only when asked): new runs, A2A
        // skills and MCP tools use the new programs; runs in flight keep
        // theirs. A file that does not compile changes nothing (422).
        (&Method::POST, ["v1", "reload"]) => ctx.registry.reload().map(|programs| {
            ctx.a2a.refresh();
            ctx.mcp.refresh();
            (
                200,
                json!({"programs": programs.iter().map(|p| p.file.clone()).collect::<Vec<_>>()}),
            )
        }),
        (&Method::GET, ["console", ..]) => {
            return match crate::console::asset(path) {
                Some((content_type, text)) => Reply::Full {
                    status: 200,
                    content_type,
                    body: text.as_bytes().to_vec(),
                    headers: vec![
                        ("Content-Security-Policy", crate::console::CSP.into()),
                        ("X-Frame-Options", "DENY".into()),
                        ("X-Content-Type-Options", "nosniff".into()),
                        ("Cache-Control", "no-cache".into()),
                    ],
                },
                None => Reply::error(&ApiError::not_found(
                    "request.not_found",
                    format!("no endpoint {path}"),
                    "the console is at /console",
                )),
            };
        }
        (&Method::GET, ["v1", "programs"]) => Ok((200, ctx.registry.programs_json())),
        (&Method::GET, ["metrics"]) => {
            return Reply::Full {
                status: 200,
                content_type: "text/plain; version=0.0.4",
                body: ctx.registry.metrics_text().into_bytes(),
                headers: Vec::new(),
            }
        }
        (&Method::POST, ["v1", "runs"]) => parse_json(body)
            .and_then(|j| {
                if !j.is_object() {
                    return Err(ApiError::bad_request(
                        "request.invalid",
                        "the body must be a JSON object",
                        "send `{\"program\": \"file.ais\", \"args\": {...}}`",
                    ));
                }
                shape::<StartRequest>(j, "POST /v1/runs")
            })
            .and_then(|r| {
                let queue = r.queue_options()?;
                let wait = query_param(query, "wait") == Some("true");
                let e = if wait {
                    ctx.registry.start_run_answered_at_end(
                        &r.program,
                        r.entry.as_deref(),
                        &r.args,
                        r.budget,
                        queue,
                        webhooks(&r.webhooks)?,
                    )
                } else {
                    ctx.registry.start_run_queued(
                        &r.program,
                        r.entry.as_deref(),
                        &r.args,
                        r.budget,
                        queue,
                        webhooks(&r.webhooks)?,
                    )
                }?;
                if wait {
                    e.wait();
                }
                Ok((201, e.to_json()))
            }),
        (&Method::GET, ["v1", "runs"]) => {
            let status = match query_param(query, "status") {
                None | Some("") => Ok(None),
                Some(s) => Status::parse(s).map(Some).ok_or_else(|| {
                    ApiError::bad_request(
                        "request.bad_status",
                        format!("unknown status `{s}`"),
                        "one of queued, running, succeeded, failed, cancelled, paused",
                    )
                }),
            };
            status
                .and_then(|s| ctx.registry.list(s))
                .map(|runs| (200, json!({"runs": runs})))
        }
        (&Method::GET, ["v1", "runs", id]) => ctx.registry.describe(id).map(|j| (200, j)),
        // Runs are records (the journal keeps every one): nothing deletes
        // them, and stopping one is `cancel`.
        (_, ["v1", "runs", _]) => {
            return method_not_allowed(
                head,
                "GET",
                "runs are not deleted (the journal keeps them); to stop a run, POST /v1/runs/{id}/cancel",
            )
        }
        (&Method::POST, ["v1", "runs", id, "cancel"]) => {
            ctx.registry.cancel(id).map(|e| (202, e.to_json()))
        }
        (&Method::POST, ["v1", "runs", id, "resume"]) => parse_json(body)
            .and_then(|j| {
                if j.is_null() {
                    Ok(ResumeRequest::default())
                } else {
                    shape::<ResumeRequest>(j, "POST /v1/runs/{id}/resume")
                }
            })
            .and_then(|r| ctx.registry.resume(id, r.budget, r.input))
            .map(|e| (202, e.to_json())),
        (&Method::POST, ["v1", "runs", id, "confirm"]) => parse_json(body)
            .and_then(|j| shape::<ConfirmRequest>(j, "POST /v1/runs/{id}/confirm"))
            .and_then(|r| ctx.registry.confirm(id, r.request, r.allow))
            .map(|e| (200, e.to_json())),
        (&Method::POST, ["v1", "runs", id, "fork"]) => parse_json(body)
            .and_then(|j| shape::<ForkRequest>(j, "POST /v1/runs/{id}/fork"))
            .and_then(|r| {
                let at = match &r.at {
                    Json::String(s) => s.clone(),
                    other => other.to_string(),
                };
                ctx.registry.fork(id, &at, r.set.as_ref())
            })
            .map(|(e, what)| {
                let mut j = e.to_json();
                j["fork"] = what;
                (202, j)
            }),
        (&Method::GET, ["v1", "runs", id, "steps"]) => {
            ctx.registry.steps(id).map(|j| (200, j))
        }
        (&Method::GET, ["v1", "runs", id, "graph"]) => {
            return match ctx.registry.graph(id) {
                Ok(svg) => Reply::Full {
                    status: 200,
                    content_type: "image/svg+xml",
                    body: svg.into_bytes(),
                    headers: Vec::new(),
                },
                Err(e) => Reply::error(&e),
            };
        }
        (&Method::GET, ["v1", "runs", id, "events"]) => match ctx.registry.events(id) {
            Ok(log) => {
                let after = head
                    .last_event_id
                    .as_deref()
                    .or_else(|| query_param(query, "last_event_id"))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(0);
                return Reply::Events { log, after };
            }
            Err(e) => Err(e),
        },
        (&Method::GET, [".well-known", "agent-card.json"]) => return agent_card(ctx, head, None),
        (&Method::GET, ["a2a", agent, ".well-known", "agent-card.json"]) => {
            return agent_card(ctx, head, Some(agent))
        }
        (&Method::POST, ["a2a"]) => return a2a_post(ctx, head, None, body),
        (&Method::POST, ["a2a", agent]) => return a2a_post(ctx, head, Some(agent), body),
        (_, ["a2a"] | ["a2a", _]) => return Reply::empty(405, "text/plain", vec![("Allow", "POST".into())]),
        (&Method::POST, ["mcp"]) => return mcp_post(ctx, body),
        (_, ["mcp"]) => return Reply::empty(405, "text/plain", vec![("Allow", "POST".into())]),
        (_, ["health" | "metrics" | "console"])
        | (_, ["v1", "programs"])
        | (_, ["v1", "runs", ..])
        | (_, [".well-known", "agent-card.json"])
        | (_, ["a2a", _, ".well-known", "agent-card.json"]) => Err(ApiError::new(
            405,
            "request.method",
            format!("{} is not allowed on {path}", head.method),
            "see docs/serve.md for the endpoints",
        )),
        _ => Err(ApiError::not_found(
            "request.not_found",
            format!("no endpoint {path}"),
            "endpoints: /console, /v1/programs, /v1/runs, /v1/threads, /v1/runs/{id}, /v1/runs/{id}/events, /health, /metrics, /mcp, /a2a, /a2a/{Agent}, /.well-known/agent-card.json",
        )),
    };
    match result {
        Ok((status, body)) => Reply::json(status, &body),
        Err(e) => Reply::error(&e),
    }
}

/// `POST /mcp`: one JSON-RPC message (MCP streamable HTTP transport).
/// Requests are answered with `application/json`; notifications and
/// responses with 202.
fn mcp_post(ctx: &Ctx, body: &[u8]) -> Reply {
    let msg: Json = match serde_json::from_slice(body) {
        Ok(m) => m,
        Err(e) => {
            let err = ais_wire::rpc::error(
                Json::Null,
                ais_wire::rpc::PARSE_ERROR,
                &format!("parse error: {e}"),
                None,
            );
            return Reply::json(400, &err);
        }
    };
    match ctx.mcp.handle(&msg) {
        Some(reply) => Reply::json(200, &reply),
        None => Reply::empty(202, "application/json", Vec::new()),
    }
}

/// `http://host:port` as the client reached this server.
fn base_url(ctx: &Ctx, head: &Head) -> String {
    let host = head
        .host
        .as_deref()
        .map(str::trim)
        .filter(|h| {
            !h.is_empty()
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-:[]_".contains(c))
        })
        .map_or_else(|| ctx.bound.to_string(), str::to_string);
    format!("http://{host}")
}

/// `GET /.well-known/agent-card.json`, `GET /a2a/{Agent}/.well-known/agent-card.json`.
fn agent_card(ctx: &Ctx, head: &Head, agent: Option<&str>) -> Reply {
    let base = base_url(ctx, head);
    match ctx.a2a.card(agent, &base) {
        Some(card) => Reply::json(200, &card),
        None => Reply::error(&ApiError::not_found(
            "a2a.unknown_agent",
            format!("no A2A agent `{}`", agent.unwrap_or("")),
            "agents with entry flows have cards at /a2a/{Agent}/.well-known/agent-card.json",
        )),
    }
}

/// `POST /a2a[/{Agent}]`: one A2A JSON-RPC request, answered with JSON
/// or, for the streaming methods, Server-Sent Events.
fn a2a_post(ctx: &Ctx, head: &Head, agent: Option<&str>, body: &[u8]) -> Reply {
    if !ctx.a2a.knows(agent) {
        return Reply::error(&ApiError::not_found(
            "a2a.unknown_agent",
            format!("no A2A agent `{}`", agent.unwrap_or("")),
            "POST to /a2a or /a2a/{Agent} of an agent with entry flows",
        ));
    }
    let msg: Json = match serde_json::from_slice(body) {
        Ok(m) => m,
        Err(e) => return Reply::json(200, &a2a::parse_error(&e.to_string())),
    };
    let version = head
        .a2a_version
        .clone()
        .or_else(|| query_param(&head.query, "A2A-Version").map(str::to_string));
    match ctx.a2a.handle(agent, version.as_deref(), &msg) {
        a2a::Reply::Json(Some(r)) => Reply::json(200, &r),
        a2a::Reply::Json(None) => Reply::empty(204, "application/json", Vec::new()),
        a2a::Reply::Stream(s) => Reply::Task(s),
    }
}
