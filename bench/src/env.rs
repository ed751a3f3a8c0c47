//! The benchmark's environment: the mock LLM server with fixed latencies
//! per latency class, a config file pointing at it, the VM backend built
//! from that file, and a host whose tools take a fixed time.

use ais_testkit::mock::MockServer;
use ais_testkit::MemoryHost;
use ais_vm::config::{Config, Env, Flags, Settings};
use ais_vm::host::HostError;
use ais_vm::llm::LlmBackend;
use serde_json::{json, Value as Json};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Model names per latency class; the mock's latency is keyed by model, so
/// the AIS VM and the LangGraph scripts (which send the same model names)
/// get identical latencies.
pub const MODEL_ASK: &str = "bench-ask";
pub const MODEL_THINK: &str = "bench-think";
pub const MODEL_REASON: &str = "bench-reason";

/// Backend name in the generated config.
pub const BACKEND: &str = "mock";

/// In-flight requests the VM may send to the mock (≥ the widest fan-out).
pub const CONCURRENCY: usize = 64;

/// Fixed latencies (ms) of the mock per latency class, and of every tool.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Latencies {
    pub ask_ms: u64,
    pub think_ms: u64,
    pub reason_ms: u64,
    pub tool_ms: u64,
}

impl Default for Latencies {
    /// The defaults: ask 100 ms, think 300 ms, reason 1 s; tools
    /// 50 ms (the op table's tool:ask ratio, 500:1000).
    fn default() -> Self {
        Latencies {
            ask_ms: 100,
            think_ms: 300,
            reason_ms: 1000,
            tool_ms: 50,
        }
    }
}

/// Starts the mock (loopback, random port) with the latencies set per model.
/// It stops when dropped.
pub fn start_mock(lat: &Latencies) -> io::Result<MockServer> {
    let server = MockServer::start()?;
    server.set_model_latency(MODEL_ASK, Duration::from_millis(lat.ask_ms));
    server.set_model_latency(MODEL_THINK, Duration::from_millis(lat.think_ms));
    server.set_model_latency(MODEL_REASON, Duration::from_millis(lat.reason_ms));
    Ok(server)
}

/// The `.apxm/config.toml` text for a run against the mock at `base_url`
/// (OpenAI protocol, no retries: a failed call is a failed run; whole
/// replies, not streamed, like the LangGraph side and the measurements in
/// docs/benchmarks.md).
pub fn config_text(base_url: &str) -> String {
    format!(
        "default_backend = \"{BACKEND}\"\n\n\
         [[llm_backends]]\n\
         name = \"{BACKEND}\"\n\
         protocol = \"openai\"\n\
         base_url = \"{base_url}\"\n\
         concurrency = {CONCURRENCY}\n\
         retries = 0\n\
         stream = false\n\
         timeout_s = 120\n\n\
         [llm_backends.models]\n\
         ask = \"{MODEL_ASK}\"\n\
         think = \"{MODEL_THINK}\"\n\
         reason = \"{MODEL_REASON}\"\n"
    )
}

/// Writes the config for `base_url` into `dir` and returns its path.
pub fn write_config(dir: &Path, base_url: &str) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("config.toml");
    std::fs::write(&path, config_text(base_url))?;
    Ok(path)
}

/// The VM backend `aisc run --config PATH` would use (the same wrappers:
/// token accounting), built in process.
pub fn backend(config_path: &Path) -> Result<Arc<dyn LlmBackend>, String> {
    let config = Config::load(config_path).map_err(|e| e.to_string())?;
    let cwd = config_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let flags = Flags {
        backend: Some(BACKEND.into()),
        ..Flags::default()
    };
    let settings =
        Settings::resolve(config, &flags, &Env::empty(cwd)).map_err(|e| e.to_string())?;
    settings
        .build_run()
        .map(|r| r.backend)
        .map_err(|e| e.to_string())
}

/// The canned reply of each benchmark tool (the LangGraph scripts'
/// `Runtime.tool` returns the same values).
pub fn tool_reply(name: &str, args: &Json) -> Result<Json, HostError> {
    let s = |k: &str| args.get(k).and_then(Json::as_str).unwrap_or("").to_string();
    Ok(match name {
        "http_get" => json!({"url": s("url"), "quote": {"last_price": 182.4, "currency": "USD"}}),
        "calculator" => json!(20.08),
        "json_query" => {
            let mut doc = args.get("document").cloned().unwrap_or(Json::Null);
            // The document may arrive as JSON text.
            if let Json::String(t) = &doc {
                if let Ok(v) = serde_json::from_str::<Json>(t) {
                    doc = v;
                }
            }
            let path = s("path");
            for part in path
                .trim_start_matches('$')
                .split('.')
                .filter(|p| !p.is_empty())
            {
                doc = doc.get(part).cloned().unwrap_or(Json::Null);
            }
            doc
        }
        "read_file" => json!(format!(
            "Analyst notes from {}: margins stable, guidance raised.",
            s("path")
        )),
        "now" => json!("2025-01-01T00:00:00Z"),
        "web_search" => {
            let q = s("query");
            json!({"query": q, "results": (0..3).map(|i| json!({"title": format!("Result {i} for {q}"), "url": format!("https://example.com/{i}")})).collect::<Vec<_>>()})
        }
        other => {
            return Err(HostError::new(
                "tool.unknown",
                format!("no tool named `{other}`"),
            ))
        }
    })
}

/// The benchmark tools, each taking `tool_ms`.
pub const TOOLS: &[&str] = &[
    "http_get",
    "calculator",
    "json_query",
    "read_file",
    "now",
    "web_search",
];

/// An in-memory host with the benchmark tools registered.
pub fn host(tool_ms: u64) -> Arc<MemoryHost> {
    let host = MemoryHost::new();
    for &name in TOOLS {
        host.register_tool(name, move |args| {
            std::thread::sleep(Duration::from_millis(tool_ms));
            tool_reply(name, args)
        });
    }
    Arc::new(host)
}
