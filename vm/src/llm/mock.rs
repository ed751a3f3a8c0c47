//! A loopback mock of the three provider protocols, for tests and
//! benchmarks.
//!
//! [`MockServer::start`] listens on `127.0.0.1:0` and serves, one thread per
//! connection (HTTP/1.1, keep-alive):
//! - `POST …/chat/completions` (OpenAI Chat Completions),
//! - `POST …/v1/messages` (Anthropic Messages),
//! - `POST …/api/chat` (Ollama).
//!
//! By default every request gets a well-formed reply in its protocol's shape:
//! text echoing the prompt, or, when the request carries a JSON schema
//! (`response_format`, `format`, or a ```` ```json ```` block in the system
//! prompt), a JSON value valid against it. Latency can be set globally, per
//! model and per op kind (the `x-apxm-op` header our backends send). Faults
//! are scripted with [`MockServer::push`]: status codes with headers (429 +
//! `Retry-After`, 500, 503…), raw bodies, malformed and truncated bodies,
//! stalls and hang-ups. Requests are counted and kept for inspection.
//!
//! Replies due after a latency are written by one responder thread, so the
//! mock costs little CPU at the instant a fan-out of calls completes.
//!
//! Bounded: at most [`MAX_CONNECTIONS`] open connections, request heads of
//! 64 KiB, bodies of 8 MiB. Dropping the server stops it and joins its
//! threads.

use super::jsonschema;
use crate::sync::{lock, wait_until};
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub const MAX_CONNECTIONS: usize = 256;
const MAX_HEAD: usize = 64 << 10;
const MAX_BODY: usize = 8 << 20;

/// A scripted answer for the next request.
#[derive(Clone, Debug, PartialEq)]
pub enum MockReply {
    /// The default, well-formed reply.
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
    /// Set with `stop`; latency waits watch it (no polling).
    stopped: (Mutex<bool>, std::sync::Condvar),
    /// The open connections, shut down on stop so their blocking reads end
    /// (idle keep-alive connections are not polled).
    conns: Mutex<HashMap<u64, TcpStream>>,
    next_conn: AtomicUsize,
    script: Mutex<VecDeque<MockReply>>,
    latency: Mutex<Latency>,
    /// Shared with the connection threads' own use of the request, so
    /// logging one does not copy it.
    requests: Mutex<Vec<Arc<MockRequest>>>,
    count: AtomicUsize,
    open: AtomicUsize,
    threads: Mutex<Vec<JoinHandle<()>>>,
    responder: Responder,
}

/// The mock server; stops when dropped.
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
    responder: Option<JoinHandle<()>>,
}

impl MockServer {
    pub fn start() -> io::Result<MockServer> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let s = Arc::clone(&shared);
        let responder = std::thread::Builder::new()
            .name("mock-responder".into())
            .spawn(move || s.responder.run())?;
        let s = Arc::clone(&shared);
        let accept = match std::thread::Builder::new()
            .name("mock-accept".into())
            .spawn(move || accept_loop(listener, s))
        {
            Ok(h) => h,
            Err(e) => {
                shared.responder.stop();
                let _ = responder.join();
                return Err(e);
            }
        };
        Ok(MockServer {
            addr,
            shared,
            accept: Some(accept),
            responder: Some(responder),
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

    /// Requests received so far.
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
        *lock(&self.shared.stopped.0) = true;
        self.shared.stopped.1.notify_all();
        for c in lock(&self.shared.conns).values() {
            let _ = c.shutdown(Shutdown::Both);
        }
        // Wake the blocking accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
        let threads: Vec<JoinHandle<()>> = lock(&self.shared.threads).drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
        self.shared.responder.stop();
        if let Some(h) = self.responder.take() {
            let _ = h.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        let loopback = stream
            .peer_addr()
            .map(|a| a.ip().is_loopback())
            .unwrap_or(false);
        if !loopback || shared.open.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            let _ = stream.shutdown(Shutdown::Both);
            continue;
        }
        shared.open.fetch_add(1, Ordering::SeqCst);
        let id = shared.next_conn.fetch_add(1, Ordering::SeqCst) as u64;
        if let Ok(c) = stream.try_clone() {
            lock(&shared.conns).insert(id, c);
        }
        // A stop between the check above and the registration: end it here.
        if shared.stop.load(Ordering::SeqCst) {
            let _ = stream.shutdown(Shutdown::Both);
        }
        let s = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name("mock-conn".into())
            .spawn(move || {
                serve(stream, &s);
                lock(&s.conns).remove(&id);
                s.open.fetch_sub(1, Ordering::SeqCst);
            });
        match spawned {
            Ok(h) => {
                let mut threads = lock(&shared.threads);
                threads.retain(|t| !t.is_finished());
                threads.push(h);
            }
            Err(_) => {
                shared.open.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

/// Sleeps `d` unless the server stops first; false when stopped.
fn wait(shared: &Shared, d: Duration) -> bool {
    let (m, cv) = &shared.stopped;
    let g = lock(m);
    let (g, _) = cv
        .wait_timeout_while(g, d, |stopped| !*stopped)
        .unwrap_or_else(|e| e.into_inner());
    !*g
}

struct Head {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
}

/// Reads more bytes into `buf`; `Ok(false)` at EOF or on stop.
fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>, shared: &Shared) -> io::Result<bool> {
    let mut chunk = [0u8; 8192];
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            return Ok(false);
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return Ok(true);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads one request; `None` when the connection ends or is invalid.
fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    shared: &Shared,
) -> Option<(Head, Vec<u8>)> {
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD || !fill(stream, buf, shared).ok()? {
            return None;
        }
    };
    let head_text = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    buf.drain(..head_end + 4);
    let mut lines = head_text.split("\r\n");
    let mut first = lines.next()?.split_whitespace();
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let get = |k: &str| {
        headers
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    let body = if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        read_chunked(stream, buf, shared)?
    } else {
        let len: usize = get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if len > MAX_BODY {
            return None;
        }
        while buf.len() < len {
            if !fill(stream, buf, shared).ok()? {
                return None;
            }
        }
        buf.drain(..len).collect()
    };
    Some((
        Head {
            method,
            path,
            headers,
        },
        body,
    ))
}

fn read_chunked(stream: &mut TcpStream, buf: &mut Vec<u8>, shared: &Shared) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(i) = find(buf, b"\r\n") {
                break i;
            }
            if buf.len() > MAX_HEAD || !fill(stream, buf, shared).ok()? {
                return None;
            }
        };
        let size_text = String::from_utf8_lossy(&buf[..line_end]).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        buf.drain(..line_end + 2);
        if body.len() + size > MAX_BODY {
            return None;
        }
        while buf.len() < size + 2 {
            if !fill(stream, buf, shared).ok()? {
                return None;
            }
        }
        body.extend(buf.drain(..size));
        buf.drain(..2);
        if size == 0 {
            return Some(body);
        }
    }
}

fn serve(mut stream: TcpStream, shared: &Shared) {
    // Replies are written whole; no need to wait for ACKs of small writes.
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::new();
    while let Some((head, body)) = read_request(&mut stream, &mut buf, shared) {
        // The latency counts from here: the request is in, and the time
        // this thread spends on it (or waiting for a CPU) is not added.
        let received = std::time::Instant::now();
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let request = MockRequest {
            method: head.method,
            path: head.path,
            headers: head.headers,
            body,
        };
        let close = request
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let request = Arc::new(request);
        lock(&shared.requests).push(Arc::clone(&request));
        shared.count.fetch_add(1, Ordering::SeqCst);
        let scripted = lock(&shared.script)
            .pop_front()
            .unwrap_or(MockReply::Normal);
        let keep = respond(&mut stream, shared, &request, scripted, !close, received);
        if !keep || close {
            break;
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}

fn write_response(
    stream: &mut TcpStream,
    status: u16,
    headers: &[(String, String)],
    body: &str,
) -> bool {
    let out = response_bytes(status, headers, body);
    stream.write_all(&out).and_then(|()| stream.flush()).is_ok()
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
/// thread switch each (the mock shares the machine with what it measures).
#[derive(Default)]
struct Responder {
    state: Mutex<ResponderState>,
    cv: std::sync::Condvar,
}

#[derive(Default)]
struct ResponderState {
    due: std::collections::BinaryHeap<std::cmp::Reverse<Due>>,
    seq: u64,
    stop: bool,
}

struct Due {
    at: std::time::Instant,
    seq: u64,
    stream: TcpStream,
    bytes: Vec<u8>,
}

impl PartialEq for Due {
    fn eq(&self, other: &Due) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Due {}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Due) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Due {
    fn cmp(&self, other: &Due) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl Responder {
    fn schedule(&self, at: std::time::Instant, stream: TcpStream, bytes: Vec<u8>) {
        let mut g = lock(&self.state);
        g.seq += 1;
        let seq = g.seq;
        let earliest = g.due.peek().map(|std::cmp::Reverse(d)| d.at);
        g.due.push(std::cmp::Reverse(Due {
            at,
            seq,
            stream,
            bytes,
        }));
        drop(g);
        if earliest.is_none_or(|t| at < t) {
            self.cv.notify_one();
        }
    }

    fn stop(&self) {
        lock(&self.state).stop = true;
        self.cv.notify_all();
    }

    fn run(&self) {
        let mut g = lock(&self.state);
        loop {
            if g.stop {
                return;
            }
            let now = std::time::Instant::now();
            let mut ready = Vec::new();
            while g.due.peek().is_some_and(|std::cmp::Reverse(d)| d.at <= now) {
                if let Some(std::cmp::Reverse(d)) = g.due.pop() {
                    ready.push(d);
                }
            }
            if !ready.is_empty() {
                drop(g);
                for mut d in ready {
                    // A failed write breaks the connection; its reader sees it.
                    let _ = d.stream.write_all(&d.bytes);
                }
                g = lock(&self.state);
                continue;
            }
            // On time, not a timer overshoot late: the latency is the
            // configured one for every client alike.
            let next = g.due.peek().map(|std::cmp::Reverse(d)| d.at);
            g = wait_until(&self.state, &self.cv, g, next);
        }
    }
}

/// Answers one request; false when the connection must close. `later`: the
/// connection stays open after this reply (see [`answer`]).
fn respond(
    stream: &mut TcpStream,
    shared: &Shared,
    req: &MockRequest,
    reply: MockReply,
    later: bool,
    received: std::time::Instant,
) -> bool {
    match reply {
        MockReply::Hangup => false,
        MockReply::Status {
            status,
            headers,
            body,
        } => write_response(stream, status, &headers, &body),
        MockReply::Malformed => write_response(
            stream,
            200,
            &[],
            "{\"choices\": [{\"message\": {\"content\": \"cut",
        ),
        MockReply::Truncated => {
            let body = normal_body(req, None).to_string();
            let half = &body[..body.len() / 2];
            let out = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{half}", body.len());
            let _ = stream.write_all(out.as_bytes());
            let _ = stream.flush();
            false
        }
        MockReply::Stall(d) => {
            if !wait(shared, d) {
                return false;
            }
            // The normal latency follows the stall.
            answer(stream, shared, req, None, later, std::time::Instant::now())
        }
        MockReply::Content(text) => answer(stream, shared, req, Some(text), later, received),
        MockReply::Normal => answer(stream, shared, req, None, later, received),
    }
}

/// Writes the normal reply the configured latency after the request was
/// `received`: from the responder thread when `later` (the connection stays
/// open), else here.
fn answer(
    stream: &mut TcpStream,
    shared: &Shared,
    req: &MockRequest,
    text: Option<String>,
    later: bool,
    received: std::time::Instant,
) -> bool {
    let model = req.body.get("model").and_then(Value::as_str).unwrap_or("");
    let delay = {
        let l = lock(&shared.latency);
        l.by_model
            .get(model)
            .or_else(|| req.header("x-apxm-op").and_then(|k| l.by_kind.get(k)))
            .copied()
            .unwrap_or(l.default)
    };
    let bytes = if req.method != "POST" || protocol_of(&req.path).is_none() {
        let body = json!({"error": {"message": format!("no route for {} {}", req.method, req.path), "type": "not_found"}});
        response_bytes(404, &[], &body.to_string())
    } else {
        response_bytes(200, &[], &normal_body(req, text).to_string())
    };
    if !delay.is_zero() {
        // The client waits for this reply before its next request on the
        // connection, so the responder can write it while this thread
        // goes back to reading.
        let at = received + delay;
        if let (true, Ok(copy)) = (later, stream.try_clone()) {
            shared.responder.schedule(at, copy, bytes);
            return true;
        }
        if !wait(
            shared,
            at.saturating_duration_since(std::time::Instant::now()),
        ) {
            return false;
        }
    }
    stream
        .write_all(&bytes)
        .and_then(|()| stream.flush())
        .is_ok()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Proto {
    OpenAi,
    Anthropic,
    Ollama,
}

fn protocol_of(path: &str) -> Option<Proto> {
    let path = path.split('?').next().unwrap_or(path);
    if path.ends_with("/chat/completions") {
        Some(Proto::OpenAi)
    } else if path.ends_with("/v1/messages") {
        Some(Proto::Anthropic)
    } else if path.ends_with("/api/chat") {
        Some(Proto::Ollama)
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
        Proto::Anthropic => None,
    };
    explicit.or_else(|| {
        let system = match proto {
            Proto::Anthropic => b.get("system").and_then(Value::as_str).map(str::to_string),
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

fn normal_body(req: &MockRequest, text: Option<String>) -> Value {
    let proto = protocol_of(&req.path).unwrap_or(Proto::OpenAi);
    let model = req
        .body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("mock-model")
        .to_string();
    let user = last_user(req);
    let text = text.unwrap_or_else(|| match requested_schema(req, proto) {
        Some(s) => jsonschema::generate(&s, &mut |p| format!("mock {p}")).to_string(),
        None => {
            let short: String = user.chars().take(80).collect();
            format!("mock reply to: {short}")
        }
    });
    let prompt_tokens = approx_tokens_of(&req.body);
    let completion_tokens = approx_tokens(&text);
    match proto {
        Proto::OpenAi => json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}
        }),
        Proto::Anthropic => json!({
            "id": "msg_mock",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens}
        }),
        Proto::Ollama => json!({
            "model": model,
            "message": {"role": "assistant", "content": text},
            "done": true,
            "done_reason": "stop",
            "prompt_eval_count": prompt_tokens,
            "eval_count": completion_tokens
        }),
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
