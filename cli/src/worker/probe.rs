//! `aisc worker --listen ADDR`: `/health`, `/ready` and `/metrics` for an
//! orchestrator's probes and autoscaler (docs/scale-out.md, "Worker
//! endpoints"). Three read-only GET routes on one thread, answering one
//! request per connection: a probe endpoint needs no more, and a slow or
//! oversized request costs one bounded read (8 KiB, 2 s), never a thread.

use ais_vm::store::{Claim, Store};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The most of a request that is read (its line and headers).
const MAX_REQUEST: usize = 8 * 1024;

/// What the endpoints report, borrowed from the running worker.
pub(super) struct Probe<'a> {
    pub store: &'a dyn Store,
    pub running: &'a Mutex<Vec<Claim>>,
    /// Slots still taking runs.
    pub live: &'a AtomicUsize,
    /// Set by SIGTERM/SIGINT: the worker drains and is no longer ready.
    pub stop: &'a AtomicBool,
    /// Set when the worker is done: the server thread ends.
    pub done: &'a AtomicBool,
    pub slots: u64,
    pub lease_ms: i64,
    /// The store's fleet limits, when this worker's backend has any.
    pub limiter: Option<&'a dyn ais_vm::store::limits::Limiter>,
}

/// Binds `addr` (before the worker starts, so a bad address is an error at
/// once).
pub(super) fn bind(addr: &str) -> std::io::Result<TcpListener> {
    let l = TcpListener::bind(addr)?;
    // Non-blocking accept, so the thread notices `done`.
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Serves until `p.done` is set.
pub(super) fn serve(listener: &TcpListener, p: &Probe<'_>) {
    while !p.done.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((conn, _)) => answer(conn, p),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn answer(mut conn: TcpStream, p: &Probe<'_>) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = conn.set_write_timeout(Some(Duration::from_secs(2)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_REQUEST {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let (status, kind, body) = route(&buf, p);
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(body.as_bytes());
}

const TEXT: &str = "text/plain; charset=utf-8";
const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

fn route(request: &[u8], p: &Probe<'_>) -> (&'static str, &'static str, String) {
    let line = request.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return ("400 Bad Request", TEXT, "bad request\n".into());
    };
    if method != "GET" && method != "HEAD" {
        return ("405 Method Not Allowed", TEXT, "GET only\n".into());
    }
    match path.split('?').next().unwrap_or_default() {
        // Alive: the process answers and has slots taking runs.
        "/health" if p.live.load(Ordering::SeqCst) > 0 => ("200 OK", TEXT, "ok\n".into()),
        "/health" => ("503 Service Unavailable", TEXT, "no slot running\n".into()),
        // Ready: not draining, and the store answers.
        "/ready" if p.stop.load(Ordering::SeqCst) => {
            ("503 Service Unavailable", TEXT, "stopping\n".into())
        }
        "/ready" => match p.store.status() {
            Ok(_) => ("200 OK", TEXT, "ready\n".into()),
            Err(e) => (
                "503 Service Unavailable",
                TEXT,
                format!("store unavailable: {e}\n"),
            ),
        },
        "/metrics" => ("200 OK", PROMETHEUS, metrics(p)),
        _ => ("404 Not Found", TEXT, "not found\n".into()),
    }
}

/// This worker's own series, then the fleet's as every server reports them
/// (`ais_serve::render_store`), read from the store now.
fn metrics(p: &Probe<'_>) -> String {
    let held = super::lock(p.running).len();
    let mut out = String::new();
    let gauges: [(&str, &str, String); 4] = [
        (
            "ais_worker_leases_held",
            "Runs this worker holds a lease on (its runs in flight).",
            held.to_string(),
        ),
        (
            "ais_worker_slots",
            "Runs this worker executes at once (--concurrency).",
            p.slots.to_string(),
        ),
        (
            "ais_worker_lease_seconds",
            "The lease this worker takes runs under; renewed every third of it.",
            format!("{}", p.lease_ms as f64 / 1000.0),
        ),
        (
            "ais_worker_draining",
            "1 after a stop signal: the worker takes no more runs.",
            u8::from(p.stop.load(Ordering::SeqCst)).to_string(),
        ),
    ];
    for (name, help, value) in gauges {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        let _ = writeln!(out, "{name} {value}");
    }
    let status = p.store.status().ok();
    let _ = writeln!(
        out,
        "# HELP ais_worker_store_up Whether the store answered this scrape."
    );
    let _ = writeln!(out, "# TYPE ais_worker_store_up gauge");
    let _ = writeln!(out, "ais_worker_store_up {}", u8::from(status.is_some()));
    if let Some(s) = status {
        out.push_str(&ais_serve::render_store(&s));
        if let Ok(v) = p.store.queue_view() {
            out.push_str(&ais_serve::render_queue(&v));
        }
        if let Ok(c) = p.store.delivery_counts() {
            out.push_str(&c.prometheus());
        }
    }
    if let Some(Ok(load)) = p.limiter.map(|l| l.load()) {
        out.push_str(&fleet_limits(&load));
    }
    out
}

/// The fleet's load per limited backend (every process's calls), read
/// from the store.
fn fleet_limits(load: &[(String, ais_vm::store::limits::BackendLoad)]) -> String {
    let mut out = String::new();
    type Pick = fn(&ais_vm::store::limits::BackendLoad) -> f64;
    let series: [(&str, &str, &str, Pick); 4] = [
        (
            "ais_fleet_backend_in_flight",
            "gauge",
            "Calls in flight to a limited backend across the fleet.",
            |l| l.in_flight as f64,
        ),
        (
            "ais_fleet_backend_in_flight_peak",
            "gauge",
            "The most calls ever in flight at once to a limited backend across the fleet.",
            |l| l.peak as f64,
        ),
        (
            "ais_fleet_backend_waits_total",
            "counter",
            "Requests for a slot of a limited backend that were told to wait.",
            |l| l.waits as f64,
        ),
        (
            "ais_fleet_backend_paused_seconds",
            "gauge",
            "Time left of a Retry-After pause of a backend, for every process.",
            |l| l.paused_ms as f64 / 1000.0,
        ),
    ];
    for (name, kind, help, pick) in series {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (backend, l) in load {
            let _ = writeln!(
                out,
                "{name}{{backend=\"{}\"}} {}",
                backend.replace(['\\', '"', '\n'], "_"),
                pick(l)
            );
        }
    }
    out
}
