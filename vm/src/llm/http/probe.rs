//! What a local or self-hosted server says about itself, read once per
//! backend and model before the first call: how many tokens one request
//! may use (prompt and completion together), and whether its chat template
//! can render tool definitions. With these a call fails before it is sent,
//! naming the true cause, instead of after the model has filled the
//! context, and a tool offer the server would silently drop is an error.
//!
//! Read where the server states them:
//! - llama.cpp: `GET /props` — `default_generation_settings.n_ctx` (the
//!   context of one slot, i.e. of one request) and
//!   `chat_template_caps.supports_tools`;
//! - vLLM: `GET /v1/models` — `max_model_len` of the model;
//! - Ollama: `POST /api/show` — `num_ctx` in the model's `parameters` (its
//!   default context is not stated, so none is assumed) and `tools` in its
//!   `capabilities`.
//!
//! A server that answers none of these (LM Studio, a hosted API, a proxy)
//! gets no check: every probe failure means "unknown", never an error.

use super::Protocol;
use serde_json::Value;
use std::time::Duration;

/// Longest wait for one probe request; a local server answers in
/// milliseconds.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Largest probe reply read (`/props` carries the chat template).
const MAX_PROBE_BODY: u64 = 4 << 20;

/// A server's own statement of its limits; `None` fields were not stated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerInfo {
    /// Tokens one request may use, prompt and completion together.
    pub context: Option<u32>,
    /// Whether the server renders tool definitions for the model.
    pub tools: Option<bool>,
    /// Where the facts were read, for messages (`llama.cpp /props`).
    pub source: Option<String>,
}

impl ServerInfo {
    pub fn is_known(&self) -> bool {
        self.context.is_some() || self.tools.is_some()
    }
}

/// `base_url` without the protocol's path suffix: the server's root.
fn root(base_url: &str) -> &str {
    let base = base_url.split('?').next().unwrap_or(base_url);
    let base = base.trim_end_matches('/');
    let base = base.strip_suffix("/chat/completions").unwrap_or(base);
    let base = base.strip_suffix("/api/chat").unwrap_or(base);
    let base = base.strip_suffix("/api").unwrap_or(base);
    base.strip_suffix("/v1").unwrap_or(base)
}

/// Asks the server at `base_url` about `model`. Never fails: what cannot
/// be read is left unknown.
pub(super) fn probe(
    agent: &ureq::Agent,
    protocol: Protocol,
    base_url: &str,
    model: &str,
    headers: &[(String, String)],
) -> ServerInfo {
    let root = root(base_url);
    match protocol {
        Protocol::OpenAi => {
            if let Some(props) = get_json(agent, &format!("{root}/props"), headers) {
                let info = llama_props(&props);
                if info.is_known() {
                    return info;
                }
            }
            get_json(agent, &format!("{root}/v1/models"), headers)
                .map(|v| vllm_models(&v, model))
                .unwrap_or_default()
        }
        Protocol::Ollama => {
            let body = serde_json::json!({ "model": model }).to_string();
            post_json(agent, &format!("{root}/api/show"), headers, body)
                .map(|v| ollama_show(&v))
                .unwrap_or_default()
        }
        Protocol::Anthropic => ServerInfo::default(),
    }
}

/// llama.cpp's `/props`.
pub(crate) fn llama_props(v: &Value) -> ServerInfo {
    let context = v
        .pointer("/default_generation_settings/n_ctx")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n > 0);
    let tools = v
        .pointer("/chat_template_caps/supports_tools")
        .and_then(Value::as_bool);
    ServerInfo {
        context,
        tools,
        source: (context.is_some() || tools.is_some()).then(|| "llama.cpp /props".into()),
    }
}

/// vLLM's `/v1/models`: the entry of `model` (or the only one).
pub(crate) fn vllm_models(v: &Value, model: &str) -> ServerInfo {
    let Some(data) = v.get("data").and_then(Value::as_array) else {
        return ServerInfo::default();
    };
    let entry = data
        .iter()
        .find(|m| m.get("id").and_then(Value::as_str) == Some(model))
        .or(match data.as_slice() {
            [only] => Some(only),
            _ => None,
        });
    let context = entry
        .and_then(|m| m.get("max_model_len"))
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n > 0);
    ServerInfo {
        context,
        tools: None,
        source: context.map(|_| "vLLM /v1/models max_model_len".into()),
    }
}

/// Ollama's `/api/show`.
pub(crate) fn ollama_show(v: &Value) -> ServerInfo {
    let context = v
        .get("parameters")
        .and_then(Value::as_str)
        .and_then(|p| {
            p.lines().find_map(|l| {
                let mut w = l.split_whitespace();
                (w.next() == Some("num_ctx"))
                    .then(|| w.next()?.parse::<u32>().ok())
                    .flatten()
            })
        })
        .filter(|n| *n > 0);
    let tools = v
        .get("capabilities")
        .and_then(Value::as_array)
        .map(|c| c.iter().any(|x| x.as_str() == Some("tools")));
    ServerInfo {
        context,
        tools,
        source: (context.is_some() || tools.is_some()).then(|| "Ollama /api/show".into()),
    }
}

fn get_json(agent: &ureq::Agent, url: &str, headers: &[(String, String)]) -> Option<Value> {
    let mut req = agent
        .get(url)
        .config()
        .timeout_global(Some(PROBE_TIMEOUT))
        .build();
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    read_json(req.call().ok()?)
}

fn post_json(
    agent: &ureq::Agent,
    url: &str,
    headers: &[(String, String)],
    body: String,
) -> Option<Value> {
    let mut req = agent
        .post(url)
        .config()
        .timeout_global(Some(PROBE_TIMEOUT))
        .build()
        .content_type("application/json");
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    read_json(req.send(body).ok()?)
}

fn read_json(mut resp: ureq::http::Response<ureq::Body>) -> Option<Value> {
    if resp.status().as_u16() != 200 {
        return None;
    }
    let text = resp
        .body_mut()
        .with_config()
        .limit(MAX_PROBE_BODY)
        .read_to_string()
        .ok()?;
    serde_json::from_str(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn roots() {
        assert_eq!(root("http://127.0.0.1:8080/v1"), "http://127.0.0.1:8080");
        assert_eq!(root("http://h:1/v1/chat/completions"), "http://h:1");
        assert_eq!(root("http://h:11434"), "http://h:11434");
        assert_eq!(root("http://h:11434/api/chat"), "http://h:11434");
    }

    #[test]
    fn llama_cpp_props() {
        let v = json!({"default_generation_settings": {"n_ctx": 2048},
            "chat_template_caps": {"supports_tools": false}});
        let i = llama_props(&v);
        assert_eq!((i.context, i.tools), (Some(2048), Some(false)));
        assert_eq!(llama_props(&json!({"x": 1})), ServerInfo::default());
    }

    #[test]
    fn vllm_and_ollama() {
        let v = json!({"data": [{"id": "a", "max_model_len": 4096}, {"id": "b", "max_model_len": 8192}]});
        assert_eq!(vllm_models(&v, "b").context, Some(8192));
        assert_eq!(vllm_models(&v, "c").context, None);
        let o = json!({"parameters": "stop \"<x>\"\nnum_ctx                        8192", "capabilities": ["completion"]});
        let i = ollama_show(&o);
        assert_eq!((i.context, i.tools), (Some(8192), Some(false)));
    }
}
