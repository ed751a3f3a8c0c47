//! The HTTP/1.1 listener (tiny_http: synchronous, no async runtime),
//! routing, authentication, limits and Server-Sent Events.

use crate::a2a::{self, A2a};
use crate::engine::BudgetSpec;
use crate::error::ApiError;
use crate::events::EventLog;
use crate::mcp::Mcp;
use crate::registry::{Registry, Status};
use serde::Deserialize;
use serde_json::{json, Value as Json};
use std::io::{Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tiny_http::{Header, Method, Request, Response};

/// How the server listens.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// `host:port` (`127.0.0.1:8080` by default; port 0: any free port).
    pub listen: String,
    /// The bearer token every request must carry (required on a
    /// non-loopback address).
    pub token: Option<String>,
    /// The environment variable the token came from (for messages).
    pub token_var: String,
    /// Largest request body, in bytes.
    pub max_body: usize,
    /// Threads answering requests.
    pub http_threads: usize,
    /// Event streams open at once.
    pub max_streams: usize,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            listen: "127.0.0.1:8080".into(),
            token: None,
            token_var: "AIS_SERVE_TOKEN".into(),
            max_body: 1 << 20,
            http_threads: 16,
            max_streams: 256,
        }
    }
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("--listen `{0}`: {1}")]
    Address(String, String),
    #[error("--listen `{addr}` is not a loopback address, and every request to it must be authenticated: set {var} to a bearer token")]
    TokenRequired { addr: String, var: String },
    #[error("cannot listen on `{0}`: {1}")]
    Bind(String, String),
}

struct Ctx {
    registry: Arc<Registry>,
    mcp: Arc<Mcp>,
    a2a: Arc<A2a>,
    config: ServeConfig,
    streams: AtomicUsize,
    /// The address bound (agent card URLs when a request has no Host).
    bound: SocketAddr,
}

/// Listens and answers until the process ends. `on_ready` gets the
/// address actually bound (port 0 picks one).
pub fn serve(
    config: ServeConfig,
    registry: Arc<Registry>,
    mcp: Arc<Mcp>,
    on_ready: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    let addrs: Vec<SocketAddr> = config
        .listen
        .to_socket_addrs()
        .map_err(|e| ServeError::Address(config.listen.clone(), e.to_string()))?
        .collect();
    let Some(addr) = addrs.first().copied() else {
        return Err(ServeError::Address(
            config.listen.clone(),
            "resolves to no address".into(),
        ));
    };
    if addrs.iter().any(|a| !a.ip().is_loopback()) && config.token.is_none() {
        return Err(ServeError::TokenRequired {
            addr: config.listen.clone(),
            var: config.token_var.clone(),
        });
    }
    let server = tiny_http::Server::http(addr)
        .map_err(|e| ServeError::Bind(config.listen.clone(), e.to_string()))?;
    let bound = server.server_addr().to_ip().unwrap_or(addr);
    let server = Arc::new(server);
    let a2a = Arc::new(A2a::new(registry.clone(), config.token.is_some()));
    let ctx = Arc::new(Ctx {
        registry,
        mcp,
        a2a,
        config: config.clone(),
        streams: AtomicUsize::new(0),
        bound,
    });
    let mut handles = Vec::new();
    for i in 0..config.http_threads.max(1) {
        let (server, ctx) = (server.clone(), ctx.clone());
        let h = std::thread::Builder::new()
            .name(format!("ais-serve-http-{i}"))
            .spawn(move || {
                while let Ok(req) = server.recv() {
                    handle(&ctx, req);
                }
            })
            .map_err(|e| ServeError::Bind(config.listen.clone(), e.to_string()))?;
        handles.push(h);
    }
    on_ready(bound);
    for h in handles {
        let _ = h.join();
    }
    Ok(())
}

fn header(name: &str, value: &str) -> Option<Header> {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).ok()
}

fn header_value<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    req.headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

fn respond(
    ctx: &Ctx,
    req: Request,
    status: u16,
    content_type: &str,
    body: Vec<u8>,
    extra: &[(&str, String)],
) {
    ctx.registry.observe_http(status);
    let mut r = Response::from_data(body).with_status_code(status);
    if let Some(h) = header("Content-Type", content_type) {
        r.add_header(h);
    }
    for (n, v) in extra {
        if let Some(h) = header(n, v) {
            r.add_header(h);
        }
    }
    // A client that went away is not the server's problem.
    let _ = req.respond(r);
}

fn respond_json(ctx: &Ctx, req: Request, status: u16, body: &Json) {
    respond(
        ctx,
        req,
        status,
        "application/json",
        format!("{body}\n").into_bytes(),
        &[],
    );
}

fn respond_error(ctx: &Ctx, req: Request, e: &ApiError) {
    let mut extra = Vec::new();
    if let Some(s) = e.retry_after {
        extra.push(("Retry-After", s.to_string()));
    }
    if e.status == 413 {
        // The rest of the body is not read.
        extra.push(("Connection", "close".to_string()));
    }
    respond(
        ctx,
        req,
        e.status,
        "application/json",
        format!("{}\n", e.to_json()).into_bytes(),
        &extra,
    );
}

/// Compares without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn authorized(req: &Request, token: &str) -> bool {
    let Some(v) = header_value(req, "Authorization") else {
        return false;
    };
    let Some(given) = v
        .strip_prefix("Bearer ")
        .or_else(|| v.strip_prefix("bearer "))
    else {
        return false;
    };
    same(given.trim().as_bytes(), token.as_bytes())
}

fn query_param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn read_body(req: &mut Request, max: usize) -> Result<Vec<u8>, ApiError> {
    let too_large = || {
        ApiError::new(
            413,
            "request.too_large",
            format!("the request body is larger than {max} bytes"),
            "send a smaller body (the limit is `--max-body`)",
        )
    };
    if req.body_length().is_some_and(|n| n > max) {
        return Err(too_large());
    }
    let mut buf = Vec::new();
    req.as_reader()
        .take(max as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| {
            ApiError::bad_request(
                "request.unreadable",
                format!("cannot read the request body: {e}"),
                "send the whole body",
            )
        })?;
    if buf.len() > max {
        return Err(too_large());
    }
    Ok(buf)
}

fn parse_json(body: &[u8]) -> Result<Json, ApiError> {
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
struct StartRequest {
    program: String,
    entry: Option<String>,
    #[serde(default)]
    args: Json,
    #[serde(default)]
    budget: BudgetSpec,
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

fn shape<T: for<'de> Deserialize<'de>>(j: Json, what: &str) -> Result<T, ApiError> {
    serde_json::from_value(j).map_err(|e| {
        ApiError::bad_request(
            "request.invalid",
            format!("{what}: {e}"),
            "see docs/serve.md for the request's fields",
        )
    })
}

fn handle(ctx: &Arc<Ctx>, mut req: Request) {
    if let Some(token) = &ctx.config.token {
        if !authorized(&req, token) {
            // No information: no body, no hint.
            respond(
                ctx,
                req,
                401,
                "text/plain",
                Vec::new(),
                &[("WWW-Authenticate", "Bearer".into())],
            );
            return;
        }
    }
    let url = req.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((url.as_str(), ""));
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let method = req.method().clone();
    let result: Result<(u16, Json), ApiError> = match (&method, segs.as_slice()) {
        (Method::Get, ["health"]) => {
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
        (Method::Post, ["v1", "reload"]) => ctx.registry.reload().map(|programs| {
            ctx.a2a.refresh();
            ctx.mcp.refresh();
            (
                200,
                json!({"programs": programs.iter().map(|p| p.file.clone()).collect::<Vec<_>>()}),
            )
        }),
        (Method::Get, ["metrics"]) => {
            let text = ctx.registry.metrics_text();
            respond(
                ctx,
                req,
                200,
                "text/plain; version=0.0.4",
                text.into_bytes(),
                &[],
            );
            return;
        }
        (Method::Post, ["v1", "runs"]) => read_body(&mut req, ctx.config.max_body)
            .and_then(|b| parse_json(&b))
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
                ctx.registry
                    .start_run(&r.program, r.entry.as_deref(), &r.args, r.budget)
            })
            .map(|e| {
                if query_param(query, "wait") == Some("true") {
                    e.wait();
                }
                (201, e.to_json())
            }),
        (Method::Get, ["v1", "runs"]) => {
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
        (Method::Get, ["v1", "runs", id]) => ctx.registry.describe(id).map(|j| (200, j)),
        (Method::Post, ["v1", "runs", id, "cancel"]) => {
            ctx.registry.cancel(id).map(|e| (202, e.to_json()))
        }
        (Method::Post, ["v1", "runs", id, "resume"]) => read_body(&mut req, ctx.config.max_body)
            .and_then(|b| parse_json(&b))
            .and_then(|j| {
                if j.is_null() {
                    Ok(ResumeRequest::default())
                } else {
                    shape::<ResumeRequest>(j, "POST /v1/runs/{id}/resume")
                }
            })
            .and_then(|r| ctx.registry.resume(id, r.budget, r.input))
            .map(|e| (202, e.to_json())),
        (Method::Get, ["v1", "runs", id, "events"]) => match ctx.registry.events(id) {
            Ok(log) => {
                let after = header_value(&req, "Last-Event-ID")
                    .or_else(|| query_param(query, "last_event_id"))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(0);
                stream(ctx, req, log, after);
                return;
            }
            Err(e) => Err(e),
        },
        (Method::Get, [".well-known", "agent-card.json"]) => {
            agent_card(ctx, req, None);
            return;
        }
        (Method::Get, ["a2a", agent, ".well-known", "agent-card.json"]) => {
            let agent = (*agent).to_string();
            agent_card(ctx, req, Some(&agent));
            return;
        }
        (Method::Post, ["a2a"]) => {
            a2a_post(ctx, req, None, query);
            return;
        }
        (Method::Post, ["a2a", agent]) => {
            let agent = (*agent).to_string();
            a2a_post(ctx, req, Some(&agent), query);
            return;
        }
        (_, ["a2a"] | ["a2a", _]) => {
            respond(
                ctx,
                req,
                405,
                "text/plain",
                Vec::new(),
                &[("Allow", "POST".into())],
            );
            return;
        }
        (Method::Post, ["mcp"]) => {
            mcp_post(ctx, req);
            return;
        }
        (_, ["mcp"]) => {
            respond(
                ctx,
                req,
                405,
                "text/plain",
                Vec::new(),
                &[("Allow", "POST".into())],
            );
            return;
        }
        (_, ["health" | "metrics"])
        | (_, ["v1", "runs", ..])
        | (_, [".well-known", "agent-card.json"])
        | (_, ["a2a", _, ".well-known", "agent-card.json"]) => Err(ApiError::new(
            405,
            "request.method",
            format!("{method} is not allowed on {path}"),
            "see docs/serve.md for the endpoints",
        )),
        _ => Err(ApiError::not_found(
            "request.not_found",
            format!("no endpoint {path}"),
            "endpoints: /v1/runs, /v1/runs/{id}, /v1/runs/{id}/events, /health, /metrics, /mcp, /a2a, /a2a/{Agent}, /.well-known/agent-card.json",
        )),
    };
    match result {
        Ok((status, body)) => respond_json(ctx, req, status, &body),
        Err(e) => respond_error(ctx, req, &e),
    }
}

/// `POST /mcp`: one JSON-RPC message (MCP streamable HTTP transport).
/// Requests are answered with `application/json`; notifications and
/// responses with 202.
fn mcp_post(ctx: &Ctx, req: Request) {
    let Some(mut req) = allowed_origin(ctx, req) else {
        return;
    };
    let body = match read_body(&mut req, ctx.config.max_body) {
        Ok(b) => b,
        Err(e) => return respond_error(ctx, req, &e),
    };
    let msg: Json = match serde_json::from_slice(&body) {
        Ok(m) => m,
        Err(e) => {
            let err = json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32700, "message": format!("parse error: {e}")}});
            return respond_json(ctx, req, 400, &err);
        }
    };
    match ctx.mcp.handle(&msg) {
        Some(reply) => respond_json(ctx, req, 200, &reply),
        None => respond(ctx, req, 202, "application/json", Vec::new(), &[]),
    }
}

/// DNS rebinding: a browser page of another site must not reach a local
/// server (without a token, the only protection).
/// The request, or `None` once it was refused with 403 for a foreign
/// `Origin` (browsers on other sites must not drive a loopback server).
fn allowed_origin(ctx: &Ctx, req: Request) -> Option<Request> {
    if !foreign_origin(ctx, &req) {
        return Some(req);
    }
    respond(
        ctx,
        req,
        403,
        "text/plain",
        b"origin not allowed\n".to_vec(),
        &[],
    );
    None
}

fn foreign_origin(ctx: &Ctx, req: &Request) -> bool {
    let Some(origin) = header_value(req, "Origin") else {
        return false;
    };
    let host = origin
        .split("://")
        .nth(1)
        .unwrap_or(origin)
        .split(['/', ':'])
        .next()
        .unwrap_or("");
    let local = matches!(host, "localhost" | "127.0.0.1" | "[" | "[::1]");
    !local && ctx.config.token.is_none()
}

/// `http://host:port` as the client reached this server.
fn base_url(ctx: &Ctx, req: &Request) -> String {
    let host = header_value(req, "Host")
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
fn agent_card(ctx: &Ctx, req: Request, agent: Option<&str>) {
    let base = base_url(ctx, &req);
    match ctx.a2a.card(agent, &base) {
        Some(card) => respond_json(ctx, req, 200, &card),
        None => respond_error(
            ctx,
            req,
            &ApiError::not_found(
                "a2a.unknown_agent",
                format!("no A2A agent `{}`", agent.unwrap_or("")),
                "agents with entry flows have cards at /a2a/{Agent}/.well-known/agent-card.json",
            ),
        ),
    }
}

/// `POST /a2a[/{Agent}]`: one A2A JSON-RPC request, answered with JSON
/// or, for the streaming methods, Server-Sent Events.
fn a2a_post(ctx: &Arc<Ctx>, req: Request, agent: Option<&str>, query: &str) {
    let Some(mut req) = allowed_origin(ctx, req) else {
        return;
    };
    if !ctx.a2a.knows(agent) {
        let e = ApiError::not_found(
            "a2a.unknown_agent",
            format!("no A2A agent `{}`", agent.unwrap_or("")),
            "POST to /a2a or /a2a/{Agent} of an agent with entry flows",
        );
        return respond_error(ctx, req, &e);
    }
    let body = match read_body(&mut req, ctx.config.max_body) {
        Ok(b) => b,
        Err(e) => return respond_error(ctx, req, &e),
    };
    let msg: Json = match serde_json::from_slice(&body) {
        Ok(m) => m,
        Err(e) => return respond_json(ctx, req, 200, &a2a::parse_error(&e.to_string())),
    };
    let version = header_value(&req, "A2A-Version")
        .map(str::to_string)
        .or_else(|| query_param(query, "A2A-Version").map(str::to_string));
    match ctx.a2a.handle(agent, version.as_deref(), &msg) {
        a2a::Reply::Json(Some(r)) => respond_json(ctx, req, 200, &r),
        a2a::Reply::Json(None) => respond(ctx, req, 204, "application/json", Vec::new(), &[]),
        a2a::Reply::Stream(s) => {
            let a = ctx.a2a.clone();
            spawn_sse(ctx, req, move |emit| a.stream(&s, emit));
        }
    }
}

/// Writes one chunk of a chunked body.
fn chunk(w: &mut dyn Write, data: &[u8]) -> std::io::Result<()> {
    write!(w, "{:x}\r\n", data.len())?;
    w.write_all(data)?;
    w.write_all(b"\r\n")?;
    w.flush()
}

/// `GET /v1/runs/{id}/events`: the events after `after`, then each new one
/// as it happens, until the run's `done` event; a comment every 15 s
/// keeps idle connections open. Runs on a thread of its own.
fn stream(ctx: &Arc<Ctx>, req: Request, log: Arc<EventLog>, after: u64) {
    spawn_sse(ctx, req, move |emit| write_log(&log, after, emit));
}

/// Answers `req` with a Server-Sent Events body written by `body` on a
/// thread of its own (through its `emit`, false once the client is gone);
/// at most `max_streams` at once, else 503.
fn spawn_sse(
    ctx: &Arc<Ctx>,
    req: Request,
    body: impl FnOnce(&mut dyn FnMut(&[u8]) -> bool) + Send + 'static,
) {
    if ctx.streams.fetch_add(1, Ordering::SeqCst) >= ctx.config.max_streams {
        ctx.streams.fetch_sub(1, Ordering::SeqCst);
        let e = ApiError::new(
            503,
            "server.too_many_streams",
            format!("{} event streams are open", ctx.config.max_streams),
            "retry after the number of seconds in Retry-After",
        )
        .with_retry_after(1);
        return respond_error(ctx, req, &e);
    }
    ctx.registry.observe_http(200);
    let c = ctx.clone();
    let spawned = std::thread::Builder::new()
        .name("ais-serve-sse".into())
        .spawn(move || {
            let mut w = req.into_writer();
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nX-Accel-Buffering: no\r\n\r\n";
            let mut ok = w
                .write_all(head.as_bytes())
                .and_then(|()| w.flush())
                .is_ok();
            if ok {
                body(&mut |data: &[u8]| {
                    ok = chunk(&mut w, data).is_ok();
                    ok
                });
            }
            if ok {
                let _ = w.write_all(b"0\r\n\r\n").and_then(|()| w.flush());
            }
            c.streams.fetch_sub(1, Ordering::SeqCst);
        });
    if spawned.is_err() {
        ctx.streams.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The events of a run's log after `after`, then each new one as it
/// happens, until its `done` event; a comment every 15 s keeps idle
/// connections open.
fn write_log(log: &EventLog, after: u64, emit: &mut dyn FnMut(&[u8]) -> bool) {
    let mut last = after;
    loop {
        let (events, done) = log.after(last, Duration::from_secs(15));
        if events.is_empty() && !done {
            if !emit(b": keep-alive\n\n") {
                return;
            }
            continue;
        }
        let mut text = String::new();
        for e in &events {
            text.push_str(&e.sse());
            last = e.id;
        }
        if !text.is_empty() && !emit(text.as_bytes()) {
            return;
        }
        if done {
            return;
        }
    }
}
