//! Load on an HTTP run server: `clients` threads, each with one
//! keep-alive connection, sending the same request back to back for a
//! fixed time; runs per second and latency percentiles.
//!
//! Used by `ais-bench serve-load` against `aisc serve` (`POST
//! /v1/runs?wait=true` of a trivial program) and against the LangGraph
//! baseline (`bench/serve/langgraph_server.py`, the same shape of request).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// One load level.
#[derive(Clone, Debug)]
pub struct Load {
    pub addr: SocketAddr,
    /// `POST` path with its query (`/v1/runs?wait=true`).
    pub path: String,
    pub body: String,
    /// The status a successful request gets.
    pub status: u16,
    /// Text a successful response body contains.
    pub contains: String,
    pub clients: usize,
    /// Requests before this are not measured.
    pub warmup: Duration,
    pub measure: Duration,
}

/// What one load level gave.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub clients: usize,
    /// Successful requests completed in the measured window.
    pub ok: usize,
    /// Failed requests (wrong status or body, connection errors) in it.
    pub errors: usize,
    pub seconds: f64,
    pub per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// The first failure seen, for the report.
    pub first_error: Option<String>,
}

struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    fn open(addr: SocketAddr) -> std::io::Result<Conn> {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Conn {
            reader: BufReader::new(s),
        })
    }

    /// One request on the connection; the status and the body.
    fn post(&mut self, addr: SocketAddr, path: &str, body: &str) -> Result<(u16, String), String> {
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.reader
            .get_mut()
            .write_all(req.as_bytes())
            .map_err(|e| format!("write: {e}"))?;
        let mut line = String::new();
        self.reader
            .read_line(&mut line)
            .map_err(|e| format!("read: {e}"))?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad status line {line:?}"))?;
        let mut length: Option<usize> = None;
        let mut chunked = false;
        loop {
            line.clear();
            self.reader
                .read_line(&mut line)
                .map_err(|e| format!("read: {e}"))?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                let k = k.trim().to_ascii_lowercase();
                if k == "content-length" {
                    length = v.trim().parse().ok();
                } else if k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked") {
                    chunked = true;
                }
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.reader
                    .read_line(&mut line)
                    .map_err(|e| format!("read: {e}"))?;
                let n = usize::from_str_radix(line.trim(), 16)
                    .map_err(|_| format!("bad chunk size {line:?}"))?;
                let mut chunk = vec![0; n + 2];
                self.reader
                    .read_exact(&mut chunk)
                    .map_err(|e| format!("read: {e}"))?;
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        } else {
            let n = length.ok_or("no Content-Length")?;
            body.resize(n, 0);
            self.reader
                .read_exact(&mut body)
                .map_err(|e| format!("read: {e}"))?;
        }
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }
}

/// Runs one load level.
pub fn run(load: &Load) -> Outcome {
    let start = Arc::new(Barrier::new(load.clients + 1));
    let mut handles = Vec::new();
    for _ in 0..load.clients {
        let (load, start) = (load.clone(), start.clone());
        handles.push(std::thread::spawn(move || {
            start.wait();
            let t0 = Instant::now();
            let (from, until) = (t0 + load.warmup, t0 + load.warmup + load.measure);
            let mut lat = Vec::new();
            let mut errors = 0usize;
            let mut first_error = None;
            let mut conn: Option<Conn> = None;
            loop {
                let now = Instant::now();
                if now >= until {
                    break;
                }
                let c = match conn.take() {
                    Some(c) => Ok(c),
                    None => Conn::open(load.addr).map_err(|e| format!("connect: {e}")),
                };
                let r = c.and_then(|mut c| {
                    let r = c.post(load.addr, &load.path, &load.body);
                    if r.is_ok() {
                        conn = Some(c);
                    }
                    r
                });
                let end = Instant::now();
                let counted = now >= from && end <= until;
                match r {
                    Ok((st, body)) if st == load.status && body.contains(&load.contains) => {
                        if counted {
                            lat.push(end.duration_since(now).as_secs_f64() * 1e3);
                        }
                    }
                    Ok((st, body)) => {
                        if counted {
                            errors += 1;
                            first_error.get_or_insert(format!("{st}: {body}"));
                        }
                    }
                    Err(e) => {
                        if counted {
                            errors += 1;
                            first_error.get_or_insert(e);
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            }
            (lat, errors, first_error)
        }));
    }
    start.wait();
    let mut lat = Vec::new();
    let mut out = Outcome {
        clients: load.clients,
        seconds: load.measure.as_secs_f64(),
        ..Outcome::default()
    };
    for h in handles {
        if let Ok((l, e, f)) = h.join() {
            lat.extend(l);
            out.errors += e;
            if out.first_error.is_none() {
                out.first_error = f;
            }
        }
    }
    lat.sort_by(f64::total_cmp);
    out.ok = lat.len();
    out.per_second = out.ok as f64 / out.seconds;
    out.p50_ms = percentile(&lat, 50.0);
    out.p99_ms = percentile(&lat, 99.0);
    out.max_ms = lat.last().copied().unwrap_or(0.0);
    out
}

/// Nearest-rank percentile of sorted samples (0 for none).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank_percentiles() {
        let s: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&s, 50.0), 50.0);
        assert_eq!(percentile(&s, 99.0), 99.0);
        assert_eq!(percentile(&[3.0], 99.0), 3.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }
}
