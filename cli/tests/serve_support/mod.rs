//! Starting `aisc serve` on a free loopback port, and a small HTTP/1.1
//! client (std only) for the tests that talk to it.

#![allow(dead_code)]

use serde_json::Value as Json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running `aisc serve`; killed (SIGKILL) and reaped when dropped.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Server {
    /// `aisc serve FILES --listen 127.0.0.1:0 extra...` in `dir` (its HOME
    /// too, so no user configuration is read); returns once it listens.
    pub fn start(dir: &Path, files: &[&str], extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_aisc"));
        cmd.arg("serve").args(files).args(extra);
        if !extra.contains(&"--listen") {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        cmd.current_dir(dir)
            .env("HOME", dir)
            .env_remove("OPENAI_API_KEY")
            .env_remove("AIS_SERVE_TOKEN")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("aisc serve starts");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let addr = rest.split_whitespace().next().unwrap_or("").to_string();
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(Ok(addr));
                    }
                } else if let Some(tx) = &tx {
                    let _ = tx.send(Err(line));
                }
            }
        });
        let mut seen = Vec::new();
        loop {
            match rx.recv_timeout(Duration::from_secs(120)) {
                Ok(Ok(addr)) => {
                    return Server {
                        child,
                        addr: addr.parse().expect("address"),
                    }
                }
                Ok(Err(line)) => seen.push(line),
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("aisc serve did not start: {}", seen.join("\n"));
                }
            }
        }
    }

    pub fn get(&self, path: &str) -> Resp {
        request(self.addr, "GET", path, &[], None)
    }

    pub fn post(&self, path: &str, body: &str) -> Resp {
        request(
            self.addr,
            "POST",
            path,
            &[("Content-Type", "application/json")],
            Some(body.as_bytes()),
        )
    }

    /// Polls `GET /v1/runs/{id}` until the run has ended.
    pub fn wait_final(&self, id: &str) -> Json {
        for _ in 0..6000 {
            let r = self.get(&format!("/v1/runs/{id}"));
            let j = r.json();
            if !matches!(j["status"].as_str(), Some("queued" | "running")) {
                return j;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("run {id} did not end");
    }

    /// Polls until the run's status is `status`.
    pub fn wait_status(&self, id: &str, status: &str) -> Json {
        for _ in 0..6000 {
            let j = self.get(&format!("/v1/runs/{id}")).json();
            if j["status"] == status {
                return j;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("run {id} never became {status}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    pub fn json(&self) -> Json {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One request on its own connection (`Connection: close`); the whole
/// response, de-chunked.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Resp {
    let mut s = TcpStream::connect(addr).expect("connect");
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        head.push_str(&format!("Content-Length: {}\r\n", b.len()));
    }
    head.push_str("\r\n");
    // The server may answer (413) and close before the whole body is sent.
    let _ = s.write_all(head.as_bytes());
    if let Some(b) = body {
        let _ = s.write_all(b);
    }
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    parse(&raw)
}

pub fn parse(raw: &[u8]) -> Resp {
    let text = String::from_utf8_lossy(raw);
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    Resp {
        status,
        headers,
        body,
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            out.push_str(rest.get(..n.min(rest.len())).unwrap_or(""));
            break;
        }
        out.push_str(&rest[..n]);
        s = rest.get(n + 2..).unwrap_or("");
    }
    out
}

/// The events of an SSE body: `(id, event, data)`, comments skipped.
pub fn sse_events(body: &str) -> Vec<(u64, String, Json)> {
    let mut out = Vec::new();
    for block in body.split("\n\n") {
        let (mut id, mut ev, mut data) = (None, None, None);
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id: ") {
                id = v.parse::<u64>().ok();
            } else if let Some(v) = line.strip_prefix("event: ") {
                ev = Some(v.to_string());
            } else if let Some(v) = line.strip_prefix("data: ") {
                data = serde_json::from_str::<Json>(v).ok();
            }
        }
        if let (Some(i), Some(e), Some(d)) = (id, ev, data) {
            out.push((i, e, d));
        }
    }
    out
}

/// Writes `text` to `dir/name`; returns the name.
pub fn write(dir: &Path, name: &str, text: &str) -> String {
    std::fs::write(dir.join(name), text).expect("write");
    name.to_string()
}

/// A configuration whose default backend is the mock server at `url`.
pub fn mock_config(dir: &Path, url: &str) -> String {
    write(
        dir,
        "config.toml",
        &format!(
            "default_backend = \"m\"\n[[llm_backends]]\nname = \"m\"\nprotocol = \"openai\"\nbase_url = \"{url}\"\nretries = 0\n"
        ),
    )
}

/// `aisc ARGS` in `dir`, to completion.
pub fn aisc(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_aisc"))
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("AIS_SERVE_TOKEN")
        .output()
        .expect("aisc runs")
}

/// The python of the test virtual environment that `./test` provisions
/// (`scripts/provision/python.sh`: `$AIS_PY_VENV`, default `target/py`),
/// after checking that it has `packages` at their pinned versions
/// (`name==version`) and that `import_check` runs. Fails the test, naming
/// the fix, otherwise: the tests that use it are `#[ignore = "needs the
/// ... SDK: run ./test"]`, and no test installs anything.
pub fn sdk_venv(name: &str, packages: &[&str], import_check: &str) -> std::path::PathBuf {
    let venv = std::env::var_os("AIS_PY_VENV")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/py"));
    let python = venv.join("bin").join("python");
    let pins = packages
        .iter()
        .map(|p| {
            let (n, v) = p.split_once("==").expect("a pinned package, name==version");
            format!("({n:?}, {v:?})")
        })
        .collect::<Vec<_>>()
        .join(", ");
    let check = format!(
        "import importlib.metadata as m\n\
         for n, v in [{pins}]:\n    \
         assert m.version(n) == v, f'{{n}} is {{m.version(n)}}, not {{v}}'\n\
         {import_check}\n"
    );
    let o = Command::new(&python).args(["-c", &check]).output();
    let why = match &o {
        Err(e) => format!("{} does not run: {e}", python.display()),
        Ok(o) if !o.status.success() => String::from_utf8_lossy(&o.stderr).into_owned(),
        Ok(_) => return python,
    };
    panic!(
        "needs the {name} SDK ({}) in the virtual environment {}: {why}\n\
         Run ./test, which provisions it (scripts/provision/python.sh), or point AIS_PY_VENV at one.",
        packages.join(" "),
        venv.display()
    )
}

/// `aisc worker ARGS` in `dir` (its HOME too), with `env` added and neither
/// `AIS_STORE` nor `OPENAI_API_KEY` from the test's environment. Its stderr
/// is piped when ARGS has `--listen` (read the address with
/// [`probes_address`]), else dropped.
pub fn worker(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_aisc"));
    cmd.arg("worker")
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("AIS_STORE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(if args.contains(&"--listen") {
            Stdio::piped()
        } else {
            Stdio::null()
        });
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("aisc worker starts")
}

/// The address a worker started with `--listen` serves its probes on (it
/// prints `worker probes on http://ADDR`); its stderr is drained after, so
/// it never blocks on a full pipe.
pub fn probes_address(worker: &mut Child) -> SocketAddr {
    let mut lines = BufReader::new(worker.stderr.take().expect("a piped stderr")).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the worker printed its probes' address")
            .expect("stderr");
        if let Some(rest) = line.strip_prefix("worker probes on http://") {
            break rest
                .split_whitespace()
                .next()
                .and_then(|a| a.parse().ok())
                .expect("an address");
        }
    };
    std::thread::spawn(move || for _ in lines {});
    addr
}
