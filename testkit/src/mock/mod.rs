//! A loopback mock of the three provider protocols, for tests and
//! benchmarks.
//!
//! [`MockServer::start`] listens on `127.0.0.1:0` and serves (HTTP/1.1,
//! keep-alive):
//! - `POST …/chat/completions` (OpenAI Chat Completions),
//! - `POST …/v1/messages` (Anthropic Messages),
//! - `POST …/api/chat` (Ollama),
//! - `POST …/models/{model}:generateContent` and
//!   `:streamGenerateContent` (Gemini).
//!
//! By default every request gets a well-formed reply in its protocol's shape:
//! text echoing the prompt, or, when the request carries a JSON schema
//! (`response_format`, `format`, or a ```` ```json ```` block in the system
//! prompt), a JSON value valid against it. Latency can be set globally, per
//! model and per op kind (the `x-apxm-op` header our backends send); it
//! counts from the moment the request is read. Faults are scripted with
//! [`MockServer::push`]: status codes with headers (429 + `Retry-After`,
//! 500, 503…), raw bodies, malformed and truncated bodies, stalls and
//! hang-ups. Requests are counted and kept for inspection.
//!
//! One thread serves every connection ([`server`]), so the mock costs the
//! machine it shares with the measured client one wake-up per burst of
//! requests, not one per request.
//!
//! Bounded: at most [`MAX_CONNECTIONS`] open connections, request heads of
//! 64 KiB, bodies of 8 MiB. Dropping the server stops it and joins its
//! thread.

mod gemini;
mod http1;
mod server;
mod stream;

pub use stream::MockCall;

use ais_vm::llm::jsonschema;
use ais_vm::sync::lock;
use serde_json::{json, Value};
use server::{EventLoop, Pending, LISTENER, WAKER};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub const MAX_CONNECTIONS: usize = 256;
const MAX_HEAD: usize = 64 << 10;
const MAX_BODY: usize = 8 << 20;

/// A scripted answer for the next request.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum MockReply {
    /// The default, well-formed reply.
    #[default]
    Normal,
    /// A well-formed reply whose assistant text is this.
    Content(String),
    /// Status, extra headers and raw body.
    Status {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// `200` with a body that is not JSON.
    Malformed,
    /// `200` announcing more bytes than it sends, then closing.
    Truncated,
    /// Waits this long, then answers normally (ends early when the server stops).
    Stall(Duration),
    /// Closes the connection without answering.
    Hangup,
    /// A reply that calls tools (several: parallel calls in one turn),
    /// with this text beside them (may be empty). Names and arguments go
    /// out exactly as given, so unknown tools and bad arguments can be
    /// scripted. Streamed when the request asks for a stream.
    ToolCalls { text: String, calls: Vec<MockCall> },
    /// A streamed normal reply cut off after its first text event: the
    /// connection closes with no terminal event and no chunked-body end.
    /// Like `Truncated` for a request that did not ask for a stream.
    StreamCut,
    /// A streamed normal reply with an event that is not JSON after its
    /// first text event.
    StreamMalformed,
    /// A normal streamed reply framed by closing the connection (no
    /// `content-length`, not chunked).
    StreamUntilClose,
}

impl MockReply {
    /// `429` with `Retry-After: <seconds>`.
    pub fn rate_limited(retry_after: &str) -> MockReply {
        MockReply::Status {
            status: 429,
            headers: vec![("retry-after".into(), retry_after.into())],
            body: json!({"error": {"message": "Rate limit reached", "type": "rate_limit_error", "code": "rate_limit_exceeded"}}).to_string(),
        }
    }

    /// `429` with `retry-after-ms: <ms>` (OpenAI's form).
    pub fn rate_limited_ms(ms: u64) -> MockReply {
        MockReply::Status {
            status: 429,
            headers: vec![("retry-after-ms".into(), ms.to_string())],
            body: json!({"error": {"message": "Rate limit reached", "type": "rate_limit_error"}})
                .to_string(),
        }
    }

    /// An error status with an OpenAI-style error body.
    pub fn error(status: u16, message: &str) -> MockReply {
        MockReply::Status {
            status,
            headers: Vec::new(),
            body: json!({"error": {"message": message, "type": "server_error"}}).to_string(),
        }
    }

    /// `429 insufficient_quota`, OpenAI's spend-limit error.
    pub fn insufficient_quota() -> MockReply {
        MockReply::Status {
            status: 429,
            headers: vec![("retry-after".into(), "1".into())],
            body: json!({"error": {"message": "You exceeded your current quota, please check your plan and billing details.", "type": "insufficient_quota", "code": "insufficient_quota"}}).to_string(),
        }
    }

    /// An OpenAI reply with this `finish_reason`, some text and usage
    /// (10 prompt, 5 completion tokens).
    pub fn openai_finish(reason: &str) -> MockReply {
        MockReply::json(json!({
            "model": "mock",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "partial answ"}, "finish_reason": reason}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        }))
    }

    /// An Anthropic reply with this `stop_reason` and usage (10 in, 5 out).
    pub fn anthropic_stop(reason: &str) -> MockReply {
        MockReply::json(json!({
            "type": "message", "role": "assistant", "model": "mock",
            "content": [{"type": "text", "text": "partial answ"}],
            "stop_reason": reason,
            "usage": {"input_tokens": 10, "output_tokens": 5}
        }))
    }

    /// An Ollama reply with this `done_reason` and counts (10 in, 5 out).
    pub fn ollama_done(reason: &str) -> MockReply {
        MockReply::json(json!({
            "model": "mock", "done": true, "done_reason": reason,
            "message": {"role": "assistant", "content": "partial answ"},
            "prompt_eval_count": 10, "eval_count": 5
        }))
    }

    /// Tool calls `(name, arguments)` in one turn, without text.
    pub fn tool_calls(calls: &[(&str, &str)]) -> MockReply {
        MockReply::ToolCalls {
            text: String::new(),
            calls: calls
                .iter()
                .map(|(name, arguments)| MockCall::new(name, arguments))
                .collect(),
        }
    }

    /// `200` with exactly this JSON body.
    pub fn json(body: Value) -> MockReply {
        MockReply::Status {
            status: 200,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }
}

/// A request the server received.
#[derive(Clone, Debug, PartialEq)]
pub struct MockRequest {
    pub method: String,
    pub path: String,
    /// Header names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`Null` when it was not JSON).
    pub body: Value,
}

impl MockRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Latency {
    default: Duration,
    by_model: HashMap<String, Duration>,
    by_kind: HashMap<String, Duration>,
}

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    script: Mutex<VecDeque<MockReply>>,
    latency: Mutex<Latency>,
    /// Time between the events of a streamed reply.
    stream_interval: Mutex<Duration>,
    /// Shared with the event loop's own use of the request, so logging one
    /// does not copy it.
    requests: Mutex<Vec<Arc<MockRequest>>>,
    count: AtomicUsize,
    /// Requests that were not completions (see [`MockServer::probes`]).
    probes: Mutex<Vec<Arc<MockRequest>>>,
    /// Fixed JSON answers by path, for requests that are not completions.
    routes: Mutex<HashMap<String, Value>>,
    /// Completion requests (by number) whose reply's first / last byte
    /// has gone out, in that order.
    replies_started: Mutex<Vec<usize>>,
    replies_ended: Mutex<Vec<usize>>,
    /// What had gone out when each completion request arrived.
    arrivals: Mutex<Vec<Arrival>>,
}

/// What the server had answered when a completion request arrived (in
/// request order, [`MockServer::arrivals`]): the order of requests and
/// replies, without clocks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Arrival {
    /// Requests (numbered from 0 in arrival order, as in
    /// [`MockServer::requests`]) whose reply's first byte had been sent (a
    /// streamed reply's head).
    pub replies_started: Vec<usize>,
    /// Requests whose reply had been sent in full.
    pub replies_ended: Vec<usize>,
}

/// The mock server; stops when dropped.
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    waker: mio::Waker,
    thread: Option<JoinHandle<()>>,
}

impl MockServer {
    pub fn start() -> io::Result<MockServer> {
        let std_listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let mut listener = mio::net::TcpListener::from_std(std_listener);
        let poll = mio::Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, mio::Interest::READABLE)?;
        let waker = mio::Waker::new(poll.registry(), WAKER)?;
        let shared = Arc::new(Shared::default());
        let event_loop = EventLoop::new(poll, listener, Arc::clone(&shared));
        let thread = std::thread::Builder::new()
            .name("mock-server".into())
            .spawn(move || event_loop.run())?;
        Ok(MockServer {
            addr,
            shared,
            waker,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (Anthropic and Ollama base URL).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1` (OpenAI base URL).
    pub fn openai_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues a scripted reply; queued replies are used in order, then
    /// replies are normal again.
    pub fn push(&self, reply: MockReply) -> &MockServer {
        lock(&self.shared.script).push_back(reply);
        self
    }

    /// Queues `reply` `n` times.
    pub fn push_n(&self, reply: MockReply, n: usize) -> &MockServer {
        let mut q = lock(&self.shared.script);
        for _ in 0..n {
            q.push_back(reply.clone());
        }
        drop(q);
        self
    }

    /// Latency of every normal reply.
    pub fn set_latency(&self, d: Duration) {
        lock(&self.shared.latency).default = d;
    }

    /// Time between consecutive events of a streamed reply (default 0:
    /// all at once, still as separate events). The first event goes out at
    /// the reply's latency, so a reply of `n` events ends
    /// `(n - 1) × d` later.
    pub fn set_stream_interval(&self, d: Duration) {
        *lock(&self.shared.stream_interval) = d;
    }

    /// Latency for requests naming `model` (wins over kind and default).
    pub fn set_model_latency(&self, model: &str, d: Duration) {
        lock(&self.shared.latency)
            .by_model
            .insert(model.to_string(), d);
    }

    /// Latency for requests whose `x-apxm-op` header is `kind` (`ask`, `plan`…).
    pub fn set_kind_latency(&self, kind: &str, d: Duration) {
        lock(&self.shared.latency)
            .by_kind
            .insert(kind.to_string(), d);
    }

    /// Answers `GET`/`POST path` (not a completion route) with `200` and
    /// this JSON, e.g. llama.cpp's `/props`.
    pub fn set_route(&self, path: &str, body: Value) {
        lock(&self.shared.routes).insert(path.to_string(), body);
    }

    /// Requests that were not completions (a backend's questions about
    /// the server), in order; never counted in [`request_count`](Self::request_count).
    pub fn probes(&self) -> Vec<MockRequest> {
        lock(&self.shared.probes)
            .iter()
            .map(|r| MockRequest::clone(r))
            .collect()
    }

    /// Completion requests received so far.
    pub fn request_count(&self) -> usize {
        self.shared.count.load(Ordering::SeqCst)
    }

    /// Copies of the requests received so far.
    pub fn requests(&self) -> Vec<MockRequest> {
        lock(&self.shared.requests)
            .iter()
            .map(|r| MockRequest::clone(r))
            .collect()
    }

    /// For each completion request received so far, in order, which
    /// replies had started and ended when it arrived.
    pub fn arrivals(&self) -> Vec<Arrival> {
        lock(&self.shared.arrivals).clone()
    }

    /// The last request received.
    pub fn last_request(&self) -> Option<MockRequest> {
        lock(&self.shared.requests)
            .last()
            .map(|r| MockRequest::clone(r))
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // If the wake-up cannot be sent the loop still sees `stop` at its
        // next event or due reply; there is nothing better to do in drop.
        let _ = self.waker.wake();
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}

/// The reply to `req`, received at `received`, given its scripted answer:
/// its pieces, in order.
fn reply_for(
    shared: &Shared,
    req: &MockRequest,
    reply: MockReply,
    received: Instant,
) -> Vec<Pending> {
    let now = |bytes: Vec<u8>, close: bool| {
        vec![Pending {
            at: received,
            bytes,
            close,
            first: None,
            last: None,
        }]
    };
    let streams = stream::wants_stream(req);
    match reply {
        MockReply::Hangup => now(Vec::new(), true),
        MockReply::Status {
            status,
            headers,
            body,
        } => now(response_bytes(status, &headers, &body), false),
        MockReply::Malformed => now(
            response_bytes(200, &[], "{\"choices\": [{\"message\": {\"content\": \"cut"),
            false,
        ),
        MockReply::ToolCalls { text, calls } => {
            answer(shared, req, Some(text), calls, received, stream::Cut::None)
        }
        MockReply::StreamCut if streams => {
            answer(shared, req, None, Vec::new(), received, stream::Cut::Close)
        }
        MockReply::StreamMalformed if streams => answer(
            shared,
            req,
            None,
            Vec::new(),
            received,
            stream::Cut::Malformed,
        ),
        MockReply::StreamUntilClose if streams => answer(
            shared,
            req,
            None,
            Vec::new(),
            received,
            stream::Cut::UntilClose,
        ),
        MockReply::StreamUntilClose => {
            answer(shared, req, None, Vec::new(), received, stream::Cut::None)
        }
        MockReply::Truncated | MockReply::StreamCut | MockReply::StreamMalformed => {
            let body = normal_body(req, None, &[]).to_string();
            let half = &body[..body.len() / 2];
            let out = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{half}", body.len());
            now(out.into_bytes(), true)
        }
        // The normal latency follows the stall.
        MockReply::Stall(d) => answer(
            shared,
            req,
            None,
            Vec::new(),
            received + d,
            stream::Cut::None,
        ),
        MockReply::Content(text) => answer(
            shared,
            req,
            Some(text),
            Vec::new(),
            received,
            stream::Cut::None,
        ),
        MockReply::Normal => answer(shared, req, None, Vec::new(), received, stream::Cut::None),
    }
}

/// The normal reply (text, or `text` and tool `calls`), due the configured
/// latency after `from`; streamed when the request asks, ended as `cut`
/// says.
fn answer(
    shared: &Shared,
    req: &MockRequest,
    text: Option<String>,
    calls: Vec<MockCall>,
    from: Instant,
    cut: stream::Cut,
) -> Vec<Pending> {
    // Anthropic's forced tool (`tool_choice: {type: "tool"}`, how a
    // structured reply is asked for): the reply calls it, with an input
    // valid against its schema.
    let (text, calls) = match forced_tool(req) {
        Some(call) if text.is_none() && calls.is_empty() => (Some(String::new()), vec![call]),
        _ => (text, calls),
    };
    let model = req.body.get("model").and_then(Value::as_str).unwrap_or("");
    let delay = {
        let l = lock(&shared.latency);
        l.by_model
            .get(model)
            .or_else(|| req.header("x-apxm-op").and_then(|k| l.by_kind.get(k)))
            .copied()
            .unwrap_or(l.default)
    };
    let at = from + delay;
    let bytes = if req.method != "POST" || protocol_of(&req.path).is_none() {
        let body = json!({"error": {"message": format!("no route for {} {}", req.method, req.path), "type": "not_found"}});
        response_bytes(404, &[], &body.to_string())
    } else if stream::wants_stream(req) {
        let proto = protocol_of(&req.path).unwrap_or(Proto::OpenAi);
        let body = normal_body(req, text, &calls);
        let every = *lock(&shared.stream_interval);
        return stream::pieces(proto, &body, &calls, at, every, cut);
    } else {
        response_bytes(200, &[], &normal_body(req, text, &calls).to_string())
    };
    vec![Pending {
        at,
        bytes,
        close: false,
        first: None,
        last: None,
    }]
}

/// The call an Anthropic request's `tool_choice: {type: "tool", name}`
/// forces, its input made from the tool's `input_schema`.
fn forced_tool(req: &MockRequest) -> Option<MockCall> {
    if protocol_of(&req.path) != Some(Proto::Anthropic) {
        return None;
    }
    let choice = req.body.get("tool_choice")?;
    if choice.get("type").and_then(Value::as_str) != Some("tool") {
        return None;
    }
    let name = choice.get("name").and_then(Value::as_str)?;
    let tool = req
        .body
        .get("tools")
        .and_then(Value::as_array)?
        .iter()
        .find(|t| t.get("name").and_then(Value::as_str) == Some(name))?;
    let schema = tool.get("input_schema")?;
    let input = jsonschema::generate(schema, &mut |p| format!("mock {p}"));
    Some(MockCall::new(name, &input.to_string()))
}

fn response_bytes(status: u16, headers: &[(String, String)], body: &str) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(body);
    out.into_bytes()
}

/// Writes replies that are due later, all from one thread: a fan-out of
/// slow requests costs the server one wake-up when they are due, not one

#[derive(Clone, Copy, PartialEq, Eq)]
enum Proto {
    OpenAi,
    Anthropic,
    Ollama,
    Gemini,
}

fn protocol_of(path: &str) -> Option<Proto> {
    let path = path.split('?').next().unwrap_or(path);
    if path.ends_with("/chat/completions") {
        Some(Proto::OpenAi)
    } else if path.ends_with("/v1/messages") {
        Some(Proto::Anthropic)
    } else if path.ends_with("/api/chat") {
        Some(Proto::Ollama)
    } else if gemini::is_gemini(path) {
        Some(Proto::Gemini)
    } else {
        None
    }
}

/// The schema a request asks its reply to follow, if any.
fn requested_schema(req: &MockRequest, proto: Proto) -> Option<Value> {
    let b = &req.body;
    let explicit = match proto {
        Proto::OpenAi => b.pointer("/response_format/json_schema/schema").cloned(),
        Proto::Ollama => b.get("format").filter(|f| f.is_object()).cloned(),
        Proto::Gemini => gemini::schema(req),
        Proto::Anthropic => None,
    };
    explicit.or_else(|| {
        let system = match proto {
            Proto::Anthropic => b.get("system").and_then(Value::as_str).map(str::to_string),
            Proto::Gemini => gemini::system(req),
            _ => b
                .get("messages")
                .and_then(Value::as_array)
                .and_then(|m| {
                    m.iter()
                        .find(|x| x.get("role").and_then(Value::as_str) == Some("system"))
                })
                .and_then(|x| x.get("content"))
                .and_then(Value::as_str)
                .map(str::to_string),
        }?;
        let start = system.find("```json")? + "```json".len();
        let end = system[start..].find("```")? + start;
        serde_json::from_str(system[start..end].trim()).ok()
    })
}

fn last_user(req: &MockRequest) -> String {
    if protocol_of(&req.path) == Some(Proto::Gemini) {
        return gemini::last_user(req);
    }
    req.body
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| {
            m.iter()
                .rev()
                .find(|x| x.get("role").and_then(Value::as_str) == Some("user"))
        })
        .and_then(|x| x.get("content"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn approx_tokens(s: &str) -> u64 {
    (s.len() as u64).div_ceil(4).max(1)
}

/// [`approx_tokens`] of `v`'s compact JSON text, without building the text.
fn approx_tokens_of(v: &Value) -> u64 {
    struct Count(usize);
    impl io::Write for Count {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    let _ = serde_json::to_writer(&mut n, v);
    (n.0 as u64).div_ceil(4).max(1)
}

fn normal_body(req: &MockRequest, text: Option<String>, calls: &[MockCall]) -> Value {
    let proto = protocol_of(&req.path).unwrap_or(Proto::OpenAi);
    let model = req
        .body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("mock-model")
        .to_string();
    let model = if proto == Proto::Gemini {
        gemini::model(req)
    } else {
        model
    };
    let user = last_user(req);
    let text = text.unwrap_or_else(|| match requested_schema(req, proto) {
        Some(s) => jsonschema::generate(&s, &mut |p| format!("mock {p}")).to_string(),
        None => {
            let short: String = user.chars().take(80).collect();
            format!("mock reply to: {short}")
        }
    });
    let prompt_tokens = approx_tokens_of(&req.body);
    let completion_tokens = approx_tokens(&text)
        + calls
            .iter()
            .map(|c| approx_tokens(&c.arguments))
            .sum::<u64>();
    match proto {
        Proto::OpenAi => {
            let mut message = json!({"role": "assistant", "content": text});
            let mut finish = "stop";
            if !calls.is_empty() {
                if text.is_empty() {
                    message["content"] = Value::Null;
                }
                message["tool_calls"] = calls
                    .iter()
                    .enumerate()
                    .map(|(i, c)| json!({"id": c.id(i), "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                    .collect();
                finish = "tool_calls";
            }
            json!({
                "id": "chatcmpl-mock",
                "object": "chat.completion",
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}
            })
        }
        Proto::Anthropic => {
            let mut content = Vec::new();
            if !text.is_empty() || calls.is_empty() {
                content.push(json!({"type": "text", "text": text}));
            }
            for (i, c) in calls.iter().enumerate() {
                content.push(
                    json!({"type": "tool_use", "id": c.id(i), "name": c.name, "input": c.input()}),
                );
            }
            let stop = if calls.is_empty() {
                "end_turn"
            } else {
                "tool_use"
            };
            json!({
                "id": "msg_mock",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": stop,
                "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens}
            })
        }
        Proto::Gemini => gemini::body(&model, &text, calls, prompt_tokens, completion_tokens),
        Proto::Ollama => {
            let mut message = json!({"role": "assistant", "content": text});
            if !calls.is_empty() {
                message["tool_calls"] = calls
                    .iter()
                    .map(|c| json!({"function": {"name": c.name, "arguments": c.input()}}))
                    .collect();
            }
            json!({
                "model": model,
                "message": message,
                "done": true,
                "done_reason": "stop",
                "prompt_eval_count": prompt_tokens,
                "eval_count": completion_tokens
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_estimate_counts_the_compact_json_text() {
        let v = json!({"model": "m", "messages": [{"role": "user", "content": "héllo \"x\"\n"}]});
        assert_eq!(approx_tokens_of(&v), approx_tokens(&v.to_string()));
        assert_eq!(approx_tokens_of(&json!({})), 1);
    }
}
