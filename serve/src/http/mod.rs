//! The HTTP/1.1 server: hyper 1 on a tokio runtime confined to this
//! crate (the VM stays synchronous: runs execute on the registry's
//! executor threads, and requests are answered on the runtime's blocking
//! pool, see `routes`).
//!
//! Bounds, all configurable ([`ServeConfig`]): request head size (431),
//! a read timeout for the head, the body and the idle time between two
//! requests of a kept-alive connection (a lying `Content-Length` gets 408
//! or a closed connection, never a thread), the body size (413), open
//! connections (more wait in the listen backlog), event streams in all and
//! per run (`stream`). Malformed request lines and paths that are not
//! ASCII get 400 from hyper. Without a token, `guard` refuses foreign
//! `Host` and `Origin` headers (403).

mod guard;
mod memory;
mod routes;
mod stream;
mod threads;

use crate::a2a::{A2a, TaskFrames};
use crate::error::ApiError;
use crate::mcp::Mcp;
use crate::registry::Registry;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_LENGTH};
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use routes::{Head, Reply};
use std::convert::Infallible;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

/// The body of every response.
pub(crate) type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// How the server listens, and its bounds.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// `host:port` (`127.0.0.1:8080` by default; port 0: any free port).
    pub listen: String,
    /// The bearer token every request must carry (required on a
    /// non-loopback address).
    pub token: Option<String>,
    /// The environment variable the token came from (for messages).
    pub token_var: String,
    /// Largest request body, in bytes (413).
    pub max_body: usize,
    /// Largest request line and headers, in bytes (431).
    pub max_header_bytes: usize,
    /// How long reading a request's head, or its body, may take, and how
    /// long a kept-alive connection may sit idle.
    pub read_timeout: Duration,
    /// Requests being answered at once (threads of the blocking pool; a
    /// request that waits for its run holds one).
    pub http_threads: usize,
    /// Connections open at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Event streams open at once (503 beyond).
    pub max_streams: usize,
    /// Event streams following one run at once (429 beyond).
    pub max_streams_per_run: usize,
    /// Origins, besides the server's own, allowed to send requests to a
    /// server without a token (`http://localhost:3000`).
    pub allowed_origins: Vec<String>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            listen: "127.0.0.1:8080".into(),
            token: None,
            token_var: "AIS_SERVE_TOKEN".into(),
            max_body: 1 << 20,
            max_header_bytes: 64 << 10,
            read_timeout: Duration::from_secs(30),
            http_threads: 16,
            max_connections: 1024,
            max_streams: 256,
            max_streams_per_run: 32,
            allowed_origins: Vec::new(),
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
    #[error("cannot start the HTTP runtime: {0}")]
    Runtime(String),
}

pub(crate) struct Ctx {
    registry: Arc<Registry>,
    mcp: Arc<Mcp>,
    a2a: Arc<A2a>,
    config: ServeConfig,
    /// Event streams open now.
    streams: AtomicUsize,
    /// The address bound (agent card URLs when a request has no Host; the
    /// port a tokenless server's Host and Origin must name).
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(config.http_threads.max(1))
        .thread_name("ais-serve-http")
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| ServeError::Runtime(e.to_string()))?;
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| ServeError::Bind(config.listen.clone(), e.to_string()))?;
    let bound = listener.local_addr().unwrap_or(addr);
    let a2a = Arc::new(A2a::new(registry.clone(), config.token.is_some()));
    let ctx = Arc::new(Ctx {
        registry,
        mcp,
        a2a,
        config,
        streams: AtomicUsize::new(0),
        bound,
    });
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)
            .map_err(|e| ServeError::Bind(ctx.config.listen.clone(), e.to_string()))?;
        on_ready(bound);
        accept(ctx, listener).await;
        Ok(())
    })
}

async fn accept(ctx: Arc<Ctx>, listener: tokio::net::TcpListener) {
    let open = Arc::new(tokio::sync::Semaphore::new(
        ctx.config.max_connections.max(1),
    ));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(ctx.config.read_timeout)
        .max_buf_size(ctx.config.max_header_bytes.max(8192))
        .max_header_size(ctx.config.max_header_bytes);
    loop {
        let Ok(permit) = open.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            // Out of descriptors and the like: the next accept may work.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let conn = http.serve_connection(
            TokioIo::new(stream),
            hyper::service::service_fn({
                let ctx = ctx.clone();
                move |req| handle(ctx.clone(), req)
            }),
        );
        tokio::spawn(async move {
            // A client that went away, or broke the protocol (hyper
            // answered it), is not the server's problem.
            let _ = conn.await;
            drop(permit);
        });
    }
}

fn header(req: &Request<Incoming>, name: &str) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn response(ctx: &Ctx, reply: Reply) -> Response<Body> {
    let Reply::Full {
        status,
        content_type,
        body,
        headers,
    } = reply
    else {
        return response(
            ctx,
            Reply::error(&ApiError::internal("a stream reply outside a stream")),
        );
    };
    ctx.registry.observe_http(status);
    let mut r = Response::new(Full::new(Bytes::from(body)).boxed());
    *r.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(content_type) {
        h.insert(hyper::header::CONTENT_TYPE, v);
    }
    for (name, value) in headers {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    }
    r
}

fn sse_response(ctx: &Ctx, body: Body) -> Response<Body> {
    ctx.registry.observe_http(200);
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static(ais_wire::sse::CONTENT_TYPE),
    );
    h.insert(
        hyper::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    h.insert("X-Accel-Buffering", HeaderValue::from_static("no"));
    r
}

/// Reads the body: at most `max_body` bytes, within the read timeout.
async fn read_body(ctx: &Ctx, req: Request<Incoming>) -> Result<Bytes, ApiError> {
    let max = ctx.config.max_body;
    let too_large = || {
        ApiError::new(
            413,
            "request.too_large",
            format!("the request body is larger than {max} bytes"),
            "send a smaller body (the limit is `--max-body`)",
        )
    };
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let timeout = ctx.config.read_timeout;
    let read = Limited::new(req.into_body(), max).collect();
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(body)) => Ok(body.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(e)) => Err(ApiError::bad_request(
            "request.unreadable",
            format!("cannot read the request body: {e}"),
            "send the whole body",
        )),
        Err(_) => Err(ApiError::new(
            408,
            "request.timeout",
            format!(
                "the request body did not arrive within {} s",
                timeout.as_secs_f64()
            ),
            "send the whole body promptly, as many bytes as Content-Length says (the limit is `--read-timeout`)",
        )),
    }
}

async fn handle(ctx: Arc<Ctx>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    // The console's files are static: a browser must be able to load them
    // before the page can ask for the token.
    let public =
        req.method() == hyper::Method::GET && crate::console::asset(req.uri().path()).is_some();
    if let (Some(token), false) = (&ctx.config.token, public) {
        if !guard::authorized(header(&req, "Authorization").as_deref(), token) {
            // No information: no body, no hint.
            return Ok(response(
                &ctx,
                Reply::Full {
                    status: 401,
                    content_type: "text/plain",
                    body: Vec::new(),
                    headers: vec![("WWW-Authenticate", "Bearer".into())],
                },
            ));
        }
    } else if ctx.config.token.is_some() {
        // A console file under a token: nothing to check.
    } else if let Err(e) = guard::check_tokenless(
        header(&req, "Host").as_deref(),
        header(&req, "Origin").as_deref(),
        ctx.bound,
        &ctx.config.allowed_origins,
    ) {
        return Ok(response(&ctx, Reply::error(&e)));
    }
    let head = Head {
        method: req.method().clone(),
        path: req.uri().path().to_string(),
        query: req.uri().query().unwrap_or("").to_string(),
        last_event_id: header(&req, "Last-Event-ID"),
        a2a_version: header(&req, "A2A-Version"),
        host: header(&req, "Host"),
    };
    let body = if matches!(
        head.method,
        hyper::Method::POST | hyper::Method::PUT | hyper::Method::PATCH
    ) {
        match read_body(&ctx, req).await {
            Ok(b) => b,
            Err(e) => return Ok(response(&ctx, Reply::error(&e))),
        }
    } else {
        Bytes::new()
    };
    let c = ctx.clone();
    let reply = tokio::task::spawn_blocking(move || answer(&c, &head, &body))
        .await
        .unwrap_or_else(|_| Reply::error(&ApiError::internal("the request's handler panicked")));
    let opened = match reply {
        Reply::Events { log, after } => stream::open(&ctx, stream::LogFrames(log), after),
        Reply::Task(s) => stream::open(&ctx, TaskFrames::new(ctx.a2a.clone(), s), 0),
        full => return Ok(response(&ctx, full)),
    };
    Ok(match opened {
        Ok(body) => sse_response(&ctx, body),
        Err(e) => response(&ctx, Reply::error(&e)),
    })
}

/// Answers one request: the thread and memory endpoints, else the rest
/// (`routes`). Dispatched here so that `routes` does not depend on the
/// modules that use its request helpers.
fn answer(ctx: &Arc<Ctx>, head: &Head, body: &[u8]) -> Reply {
    let segs: Vec<&str> = head.path.trim_matches('/').split('/').collect();
    if let Some(r) =
        threads::route(ctx, head, &segs, body).or_else(|| memory::route(ctx, head, &segs, body))
    {
        return match r {
            Ok((status, body)) => Reply::json(status, &body),
            Err(e) => Reply::error(&e),
        };
    }
    routes::route(ctx, head, &segs, body)
}
