//! The memory API (docs/serve.md, "Agent memory"): an agent's long-term
//! memory (the `ltm` tier that `umem(value, "ltm", key)` writes and
//! `qmem`/`memory_search` read) over HTTP, in the store the served runs
//! use. Values read back carry their information-flow labels; values
//! written over HTTP have none (the operator's own).

use super::routes::{parse_json, query_param, shape, Head};
use super::Ctx;
use crate::error::ApiError;
use ais_vm::store::agent::LtmEntry;
use ais_vm::store::AgentStore;
use serde::Deserialize;
use serde_json::{json, Value as Json};
use std::sync::Arc;

/// Entries listed without a `limit`, and at most.
const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1000;
/// Longest key accepted.
const MAX_KEY: usize = 512;

/// `PUT /v1/agents/{agent}/memory/{key}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PutRequest {
    value: Json,
}

fn entry_json(e: &LtmEntry) -> Json {
    json!({"key": e.key, "value": e.value, "updated_ms": e.updated_ms, "labels": e.labels})
}

fn host_error(e: ais_vm::HostError) -> ApiError {
    ApiError::internal(format!("{}: {}", e.code, e.message))
}

fn store(ctx: &Ctx, agent: &str) -> Result<Arc<dyn AgentStore>, ApiError> {
    if !ctx
        .registry
        .programs()
        .iter()
        .any(|p| p.agents().any(|a| a == agent))
    {
        return Err(ApiError::not_found(
            "memory.unknown_agent",
            format!("no served agent `{agent}`"),
            "`GET /v1/programs` lists the served programs and their agents",
        ));
    }
    ctx.registry.agent_store()?.ok_or_else(|| {
        ApiError::conflict(
            "memory.none",
            "`--memory :memory:` keeps no memory outside a run",
            "serve with a memory directory (the default) or `--store`",
        )
    })
}

/// Keys arrive percent-encoded in the path.
fn decode(key: &str) -> Result<String, ApiError> {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = key
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match hex {
                Some(b) => {
                    out.push(b);
                    i += 3;
                    continue;
                }
                None => break,
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    let s = String::from_utf8(out).ok().filter(|s| {
        i >= bytes.len() && !s.is_empty() && s.len() <= MAX_KEY && !s.chars().any(char::is_control)
    });
    s.ok_or_else(|| {
        ApiError::bad_request(
            "memory.bad_key",
            "the key is not 1 to 512 characters of percent-encoded UTF-8 text",
            "percent-encode the key in the path",
        )
    })
}

/// Answers a request under `/v1/agents/{agent}/memory`; `None` when the
/// path is not one.
pub(super) fn route(
    ctx: &Arc<Ctx>,
    head: &Head,
    segs: &[&str],
    body: &[u8],
) -> Option<Result<(u16, Json), ApiError>> {
    use hyper::Method;
    let m = &head.method;
    let ns = ais_vm::aam::LTM_NS;
    Some(match segs {
        ["v1", "agents", agent, "memory"] if m == Method::GET => (|| {
            let s = store(ctx, agent)?;
            let limit = match query_param(&head.query, "limit") {
                None | Some("") => DEFAULT_LIMIT,
                Some(v) => v
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| {
                        ApiError::bad_request(
                            "request.bad_limit",
                            format!("`limit={v}` is not a whole number of 1 or more"),
                            "e.g. ?limit=20",
                        )
                    })?
                    .min(MAX_LIMIT),
            };
            let entries: Vec<Json> = match query_param(&head.query, "q") {
                Some(q) if !q.is_empty() => {
                    let q = decode(&q.replace('+', " "))?;
                    s.search_ranked(Some(agent), ns, &q, limit)
                        .map_err(host_error)?
                        .iter()
                        .map(|(e, score)| {
                            let mut j = entry_json(e);
                            j["score"] = json!(score);
                            j
                        })
                        .collect()
                }
                _ => {
                    let all = s.all(agent, ns).map_err(host_error)?;
                    let skip = all.len().saturating_sub(limit);
                    all.iter().skip(skip).map(entry_json).collect()
                }
            };
            Ok((200, json!({"agent": agent, "entries": entries})))
        })(),
        ["v1", "agents", agent, "memory", key] if m == Method::GET => (|| {
            let s = store(ctx, agent)?;
            let key = decode(key)?;
            match s.get(agent, ns, &key).map_err(host_error)? {
                Some(e) => Ok((200, entry_json(&e))),
                None => Err(ApiError::not_found(
                    "memory.not_found",
                    format!("agent `{agent}` has no memory entry `{key}`"),
                    "`GET /v1/agents/{agent}/memory` lists the entries",
                )),
            }
        })(),
        ["v1", "agents", agent, "memory", key] if m == Method::PUT => (|| {
            let s = store(ctx, agent)?;
            let key = decode(key)?;
            let r = shape::<PutRequest>(parse_json(body)?, "PUT /v1/agents/{agent}/memory/{key}")?;
            s.put(agent, ns, &key, &r.value, None, &[])
                .map_err(host_error)?;
            let e = s.get(agent, ns, &key).map_err(host_error)?;
            Ok((200, e.as_ref().map_or(Json::Null, entry_json)))
        })(),
        ["v1", "agents", agent, "memory", key] if m == Method::DELETE => (|| {
            let s = store(ctx, agent)?;
            let key = decode(key)?;
            if !s.remove(agent, ns, &key).map_err(host_error)? {
                return Err(ApiError::not_found(
                    "memory.not_found",
                    format!("agent `{agent}` has no memory entry `{key}`"),
                    "`GET /v1/agents/{agent}/memory` lists the entries",
                ));
            }
            Ok((200, json!({"key": key, "deleted": true})))
        })(),
        ["v1", "agents", _, "memory", ..] => Err(ApiError::new(
            405,
            "request.method",
            format!("{} is not allowed on {}", head.method, head.path),
            "memory: GET /v1/agents/{agent}/memory[?q=&limit=], GET/PUT/DELETE /v1/agents/{agent}/memory/{key}",
        )),
        _ => return None,
    })
}
