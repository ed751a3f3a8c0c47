//! A loopback OTLP/HTTP collector for tests: it accepts `POST /v1/traces`
//! in protobuf, decodes every span (a generic wire-format reader, written
//! apart from the VM's encoder so that it checks it), and answers 200.

use serde_json::{json, Map, Value as Json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A span as received.
#[derive(Clone, Debug, PartialEq)]
pub struct ReceivedSpan {
    pub trace_id: String,
    pub span_id: String,
    pub parent: Option<String>,
    pub name: String,
    /// `SpanKind`: 1 internal, 3 client.
    pub kind: u64,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    pub attributes: Map<String, Json>,
    /// Each event's name and attributes.
    pub events: Vec<(String, Map<String, Json>)>,
    /// `Status.code`: 0 unset, 2 error.
    pub status_code: u64,
    /// The resource's `service.name`.
    pub service: String,
}

impl ReceivedSpan {
    pub fn attr(&self, k: &str) -> &Json {
        self.attributes.get(k).unwrap_or(&Json::Null)
    }
}

/// A request as received: its headers (lower-case names) and spans.
#[derive(Clone, Debug)]
pub struct Received {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub spans: Vec<ReceivedSpan>,
    /// The body did not decode: why.
    pub error: Option<String>,
}

#[derive(Default)]
struct Shared {
    requests: Mutex<Vec<Received>>,
    stop: AtomicBool,
}

/// The collector; stops when dropped.
pub struct Collector {
    addr: std::net::SocketAddr,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Collector {
    pub fn start() -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().expect("local address");
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let s = s.clone();
                std::thread::spawn(move || serve(conn, &s));
            }
        });
        Collector {
            addr,
            shared,
            thread: Some(thread),
        }
    }

    /// The base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Received> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.requests().into_iter().flat_map(|r| r.spans).collect()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(conn: TcpStream, s: &Shared) {
    let mut r = BufReader::new(match conn.try_clone() {
        Ok(c) => c,
        Err(_) => return,
    });
    let mut w = conn;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
        let mut headers = Vec::new();
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
                if k == "content-length" {
                    len = v.parse().unwrap_or(0);
                }
                headers.push((k, v));
            }
        }
        let mut body = vec![0u8; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        let (spans, error) = match decode_request(&body) {
            Ok(s) => (s, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        s.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Received {
                path,
                headers,
                spans,
                error,
            });
        let ok =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if w.write_all(ok).is_err() {
            return;
        }
    }
}

/// One protobuf field.
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    /// (skipped: no field we read is one)
    Fixed32,
}

fn varint(b: &[u8], i: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*i).ok_or("varint past the end")?;
        *i += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint too long".into())
}

fn fields(b: &[u8]) -> Result<Vec<(u64, Wire<'_>)>, String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let key = varint(b, &mut i)?;
        let (field, wire) = (key >> 3, key & 7);
        let take = |i: &mut usize, n: usize| -> Result<&[u8], String> {
            let s = b.get(*i..*i + n).ok_or("field past the end")?;
            *i += n;
            Ok(s)
        };
        let w = match wire {
            0 => Wire::Varint(varint(b, &mut i)?),
            1 => Wire::Fixed64(u64::from_le_bytes(
                take(&mut i, 8)?.try_into().map_err(|_| "fixed64")?,
            )),
            2 => {
                let n = usize::try_from(varint(b, &mut i)?).map_err(|_| "length")?;
                Wire::Bytes(take(&mut i, n)?)
            }
            5 => {
                take(&mut i, 4)?;
                Wire::Fixed32
            }
            w => return Err(format!("wire type {w}")),
        };
        out.push((field, w));
    }
    Ok(out)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn any_value(b: &[u8]) -> Result<Json, String> {
    // The value is the oneof's one field.
    if let Some((f, w)) = fields(b)?.into_iter().next() {
        return Ok(match (f, w) {
            (1, Wire::Bytes(s)) => json!(text(s)),
            (2, Wire::Varint(v)) => json!(v != 0),
            (3, Wire::Varint(v)) => json!(v as i64),
            (4, Wire::Fixed64(v)) => json!(f64::from_bits(v)),
            (5, Wire::Bytes(a)) => {
                let mut items = Vec::new();
                for (f, w) in fields(a)? {
                    if let (1, Wire::Bytes(v)) = (f, w) {
                        items.push(any_value(v)?);
                    }
                }
                Json::Array(items)
            }
            (f, _) => return Err(format!("AnyValue field {f}")),
        });
    }
    Ok(Json::Null)
}

fn key_value(b: &[u8], into: &mut Map<String, Json>) -> Result<(), String> {
    let (mut k, mut v) = (String::new(), Json::Null);
    for (f, w) in fields(b)? {
        match (f, w) {
            (1, Wire::Bytes(s)) => k = text(s),
            (2, Wire::Bytes(a)) => v = any_value(a)?,
            _ => {}
        }
    }
    into.insert(k, v);
    Ok(())
}

fn span(b: &[u8], service: &str) -> Result<ReceivedSpan, String> {
    let mut s = ReceivedSpan {
        trace_id: String::new(),
        span_id: String::new(),
        parent: None,
        name: String::new(),
        kind: 0,
        start_unix_ns: 0,
        end_unix_ns: 0,
        attributes: Map::new(),
        events: Vec::new(),
        status_code: 0,
        service: service.to_string(),
    };
    for (f, w) in fields(b)? {
        match (f, w) {
            (1, Wire::Bytes(x)) => s.trace_id = hex(x),
            (2, Wire::Bytes(x)) => s.span_id = hex(x),
            (4, Wire::Bytes(x)) if !x.is_empty() => s.parent = Some(hex(x)),
            (5, Wire::Bytes(x)) => s.name = text(x),
            (6, Wire::Varint(k)) => s.kind = k,
            (7, Wire::Fixed64(t)) => s.start_unix_ns = t,
            (8, Wire::Fixed64(t)) => s.end_unix_ns = t,
            (9, Wire::Bytes(kv)) => key_value(kv, &mut s.attributes)?,
            (11, Wire::Bytes(e)) => {
                let (mut name, mut attrs) = (String::new(), Map::new());
                for (f, w) in fields(e)? {
                    match (f, w) {
                        (2, Wire::Bytes(n)) => name = text(n),
                        (3, Wire::Bytes(kv)) => key_value(kv, &mut attrs)?,
                        _ => {}
                    }
                }
                s.events.push((name, attrs));
            }
            (15, Wire::Bytes(st)) => {
                for (f, w) in fields(st)? {
                    if let (3, Wire::Varint(c)) = (f, w) {
                        s.status_code = c;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(s)
}

/// The spans of an `ExportTraceServiceRequest`.
pub fn decode_request(b: &[u8]) -> Result<Vec<ReceivedSpan>, String> {
    let mut out = Vec::new();
    for (f, w) in fields(b)? {
        let (1, Wire::Bytes(rs)) = (f, w) else {
            continue;
        };
        let mut service = String::new();
        let mut scopes = Vec::new();
        for (f, w) in fields(rs)? {
            match (f, w) {
                (1, Wire::Bytes(res)) => {
                    let mut attrs = Map::new();
                    for (f, w) in fields(res)? {
                        if let (1, Wire::Bytes(kv)) = (f, w) {
                            key_value(kv, &mut attrs)?;
                        }
                    }
                    service = attrs
                        .get("service.name")
                        .and_then(Json::as_str)
                        .unwrap_or("")
                        .to_string();
                }
                (2, Wire::Bytes(ss)) => scopes.push(ss),
                _ => {}
            }
        }
        for ss in scopes {
            for (f, w) in fields(ss)? {
                if let (2, Wire::Bytes(sp)) = (f, w) {
                    out.push(span(sp, &service)?);
                }
            }
        }
    }
    Ok(out)
}
