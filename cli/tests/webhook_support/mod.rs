//! What the webhook tests share: the programs, an isolated `aisc`, and the
//! receiver: an HTTP server on loopback (a
//! thread per connection) that checks every signature with the secret,
//! keeps what it got, and answers as the test scripts it.
#![allow(dead_code, clippy::unwrap_used)]

use ais_vm::webhook::sign::Secret;
use serde_json::Value as Json;
use std::collections::{BTreeSet, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A run that completes, one that fails and one that pauses.
pub const OK: &str =
    "agent T {\n    @entry flow main(n: str) -> str {\n        return \"done \" + n\n    }\n}\n";
pub const FAILS: &str = "agent T {\n    @entry flow main(n: str) -> str {\n        let _z = 1 / 0\n        return n\n    }\n}\n";
pub const PAUSES: &str = "agent T {\n    @entry flow main(n: str) -> str {\n        let a = pause(\"Approve {n}?\")\n        return \"answer {a}\"\n    }\n}\n";

/// `aisc ARGS` in `dir` with `env` and nothing of the caller's provider
/// key, store or webhook settings.
pub fn aisc(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_aisc"));
    c.args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("NO_COLOR", "1")
        .env_remove("OPENAI_API_KEY")
        .env_remove("AIS_STORE")
        .env_remove("AIS_WEBHOOK_SECRET")
        .env_remove("AIS_WEBHOOK_ALLOW_PRIVATE");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// Its stdout and stderr, as text.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `aisc runs show ID --json`'s `webhooks`.
pub fn deliveries(dir: &Path, id: &str, store: &[&str]) -> Vec<Json> {
    let mut args = vec!["runs", "show", id, "--json"];
    args.extend_from_slice(store);
    let o = aisc(dir, &args, &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("MfKQ9r8"), "the secret never prints");
    let j: Json = serde_json::from_slice(&o.stdout).unwrap();
    j["webhooks"].as_array().cloned().unwrap_or_default()
}

/// The run ids of `aisc runs --json`.
pub fn run_ids(dir: &Path, store: &[&str]) -> Vec<String> {
    let mut args = vec!["runs", "--json"];
    args.extend_from_slice(store);
    let o = aisc(dir, &args, &[]);
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Json>(l).ok())
        .map(|j| j["id"].as_str().unwrap().to_string())
        .collect()
}

/// Polls `done` every 50 ms, for at most two minutes.
pub fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..2400 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("gave up waiting for {what}");
}

/// The secret every `aisc` of the tests signs with.
pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// How the receiver answers one request.
#[derive(Debug, Clone)]
pub enum Answer {
    Status(u16, Option<&'static str>),
    /// Waits this long before answering 200 (a delivery in flight).
    Hang(Duration),
}

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Got {
    pub id: String,
    pub signed: bool,
    pub body: Json,
    /// The status it answered.
    pub answered: u16,
}

/// The receiver: a loopback listener and what it got.
pub struct Receiver {
    pub addr: SocketAddr,
    pub got: Arc<Mutex<Vec<Got>>>,
    pub script: Arc<Mutex<VecDeque<Answer>>>,
    pub hanging: Arc<AtomicBool>,
    pub stop: Arc<AtomicBool>,
}

impl Receiver {
    pub fn start(script: Vec<Answer>) -> Receiver {
        Receiver::on(TcpListener::bind("127.0.0.1:0").unwrap(), script)
    }

    pub fn on(listener: TcpListener, script: Vec<Answer>) -> Receiver {
        let addr = listener.local_addr().unwrap();
        let r = Receiver {
            addr,
            got: Arc::default(),
            script: Arc::new(Mutex::new(script.into())),
            hanging: Arc::default(),
            stop: Arc::default(),
        };
        let (got, script, hanging, stop) = (
            r.got.clone(),
            r.script.clone(),
            r.hanging.clone(),
            r.stop.clone(),
        );
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (got, script, hanging) = (got.clone(), script.clone(), hanging.clone());
                std::thread::spawn(move || serve_one(conn, &got, &script, &hanging));
            }
        });
        r
    }

    pub fn url(&self) -> String {
        format!("http://{}/hooks/ais", self.addr)
    }

    pub fn got(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    /// The ids answered 2xx.
    pub fn delivered(&self) -> BTreeSet<String> {
        self.got()
            .into_iter()
            .filter(|g| g.answered == 200)
            .map(|g| g.id)
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve_one(
    conn: TcpStream,
    got: &Mutex<Vec<Got>>,
    script: &Mutex<VecDeque<Answer>>,
    hanging: &AtomicBool,
) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end().to_string();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let len: usize = header("content-length").parse().unwrap_or(0);
    let mut body = vec![0; len];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let body = String::from_utf8(body).unwrap();
    let id = header("webhook-id");
    let ts: i64 = header("webhook-timestamp").parse().unwrap_or(0);
    let signed =
        Secret::parse(SECRET)
            .unwrap()
            .verify(&id, ts, &body, &header("webhook-signature"));
    let answer = script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(Answer::Status(200, None));
    let (status, retry_after) = match answer {
        Answer::Status(s, r) => (s, r),
        Answer::Hang(d) => {
            hanging.store(true, Ordering::SeqCst);
            std::thread::sleep(d);
            (200, None)
        }
    };
    let mut conn = conn;
    let extra = retry_after
        .map(|r| format!("Retry-After: {r}\r\n"))
        .unwrap_or_default();
    let written = write!(
        conn,
        "HTTP/1.1 {status} X\r\nContent-Length: 2\r\nConnection: close\r\n{extra}\r\nok"
    )
    .and_then(|()| conn.flush());
    // An answer the sender never read (it was killed) was not delivered.
    let answered = if written.is_ok() { status } else { 0 };
    got.lock().unwrap().push(Got {
        id,
        signed,
        body: serde_json::from_str(&body).unwrap_or(Json::Null),
        answered,
    });
}
