//! The threads endpoints (docs/serve.md, "Threads"), modelled on the
//! Agent Protocol and LangGraph Platform: `/v1/threads`, a thread, its
//! state (versioned: `PUT`/`PATCH` with `version` answer 409 when it
//! moved), its history, and runs on it.

use super::routes::{parse_json, query_param, shape, Head, StartRequest};
use super::Ctx;
use crate::error::ApiError;
use crate::registry::Multitask;
use serde::Deserialize;
use serde_json::{json, Map, Value as Json};
use std::sync::Arc;

/// Runs listed by `GET /v1/threads/{id}/history` without a `limit`.
const DEFAULT_HISTORY: usize = 100;
/// Largest `limit` of a listing.
const MAX_LIST: usize = 1000;

/// `POST /v1/threads`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CreateRequest {
    #[serde(default)]
    thread_id: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Json>>,
}

/// `PUT`/`PATCH /v1/threads/{id}/state`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StateRequest {
    values: Map<String, Json>,
    /// Apply only if the state is still at this version.
    #[serde(default)]
    version: Option<i64>,
}

fn limit(query: &str, default: usize) -> Result<usize, ApiError> {
    match query_param(query, "limit") {
        None | Some("") => Ok(default),
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| *n >= 1)
            .map(|n| n.min(MAX_LIST))
            .ok_or_else(|| {
                ApiError::bad_request(
                    "request.bad_limit",
                    format!("`limit={v}` is not a whole number of 1 or more"),
                    "e.g. ?limit=20",
                )
            }),
    }
}

fn object_or_empty(body: &[u8]) -> Result<Json, ApiError> {
    let j = parse_json(body)?;
    match j {
        Json::Null => Ok(Json::Object(Map::new())),
        Json::Object(_) => Ok(j),
        _ => Err(ApiError::bad_request(
            "request.invalid",
            "the body must be a JSON object",
            "see docs/serve.md, \"Threads\"",
        )),
    }
}

/// Answers a request under `/v1/threads`; `None` when the path is not one.
pub(super) fn route(
    ctx: &Arc<Ctx>,
    head: &Head,
    segs: &[&str],
    body: &[u8],
) -> Option<Result<(u16, Json), ApiError>> {
    use hyper::Method;
    let reg = &ctx.registry;
    let query = head.query.as_str();
    let m = &head.method;
    Some(match segs {
        ["v1", "threads"] if m == Method::POST => object_or_empty(body)
            .and_then(|j| shape::<CreateRequest>(j, "POST /v1/threads"))
            .and_then(|r| {
                reg.create_thread(
                    r.thread_id.as_deref(),
                    &Json::Object(r.metadata.unwrap_or_default()),
                )
            })
            .map(|j| (201, j)),
        ["v1", "threads"] if m == Method::GET => {
            limit(query, DEFAULT_HISTORY).and_then(|n| reg.threads(n).map(|j| (200, j)))
        }
        ["v1", "threads", id] if m == Method::GET => reg.thread(id).map(|j| (200, j)),
        ["v1", "threads", id] if m == Method::DELETE => reg.delete_thread(id).map(|j| (200, j)),
        ["v1", "threads", id, "state"] if m == Method::GET => {
            reg.thread_state(id).map(|j| (200, j))
        }
        ["v1", "threads", id, "state"] if m == Method::PUT || m == Method::PATCH => {
            let merge = m == Method::PATCH;
            parse_json(body)
                .and_then(|j| shape::<StateRequest>(j, "the state request"))
                .and_then(|r| reg.edit_thread_state(id, &r.values, r.version, merge))
                .map(|j| (200, j))
        }
        ["v1", "threads", id, "history"] if m == Method::GET => limit(query, DEFAULT_HISTORY)
            .and_then(|n| reg.thread_history(id, n))
            .map(|j| (200, j)),
        ["v1", "threads", id, "runs"] if m == Method::POST => start_run(ctx, id, query, body),
        ["v1", "threads", ..] => Err(ApiError::new(
            405,
            "request.method",
            format!("{} is not allowed on {}", head.method, head.path),
            "threads: POST/GET /v1/threads, GET/DELETE /v1/threads/{id}, GET/PUT/PATCH /v1/threads/{id}/state, GET /v1/threads/{id}/history, POST /v1/threads/{id}/runs",
        )),
        _ => return None,
    })
}

/// `POST /v1/threads/{id}/runs`: `POST /v1/runs`'s body, plus
/// `multitask_strategy` (`enqueue`, the default, or `reject`).
fn start_run(ctx: &Arc<Ctx>, id: &str, query: &str, body: &[u8]) -> Result<(u16, Json), ApiError> {
    let mut j = parse_json(body)?;
    let Some(obj) = j.as_object_mut() else {
        return Err(ApiError::bad_request(
            "request.invalid",
            "the body must be a JSON object",
            "send `{\"program\": \"file.ais\", \"args\": {...}}`",
        ));
    };
    let multitask = match obj.remove("multitask_strategy") {
        None | Some(Json::Null) => Multitask::default(),
        Some(Json::String(s)) => Multitask::parse(&s).ok_or_else(|| {
            ApiError::bad_request(
                "request.invalid",
                format!("`multitask_strategy` is `{s}`"),
                "`enqueue` (wait for the thread's earlier runs) or `reject`",
            )
        })?,
        Some(other) => {
            return Err(ApiError::bad_request(
                "request.invalid",
                format!("`multitask_strategy` is {other}"),
                "`enqueue` or `reject`",
            ))
        }
    };
    let r = shape::<StartRequest>(j, "POST /v1/threads/{id}/runs")?;
    let queue = r.queue_options()?;
    let hooks = r.hooks()?;
    let e = ctx.registry.start_thread_run(
        id,
        &r.program,
        r.entry.as_deref(),
        &r.args,
        r.budget,
        queue,
        hooks,
        multitask,
        false,
    )?;
    if query_param(query, "wait") == Some("true") {
        e.wait();
    }
    let mut out = e.to_json();
    out["thread_id"] = json!(id);
    Ok((201, out))
}
