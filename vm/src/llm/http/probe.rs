//! What a local or self-hosted server says about itself, read once per
//! backend and model before the first call: how many tokens one request
//! may use (prompt and completion together), and whether its chat template
//! can render tool definitions. With these a call fails before it is sent,
//! naming the true cause, instead of after the model has filled the
//! context, and a tool offer the server would silently drop is an error.
//!
//! Where each server states them is its protocol's business
//! ([`WireProtocol::probe`](crate::llm::providers::WireProtocol::probe):
//! llama.cpp's `/props`, vLLM's `/v1/models`, Ollama's `/api/show`); the
//! requests are made here, with the backend's connection and headers.
//!
//! A server that answers none of these (LM Studio, a hosted API, a proxy)
//! gets no check: every probe failure means "unknown", never an error.

use super::Protocol;
use crate::llm::providers::{Prober, ServerInfo};
use serde_json::Value;
use std::time::Duration;

/// Longest wait for one probe request; a local server answers in
/// milliseconds.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Largest probe reply read (`/props` carries the chat template).
const MAX_PROBE_BODY: u64 = 4 << 20;

/// `base_url` without the protocol's path suffix: the server's root.
fn root(base_url: &str) -> &str {
    let base = base_url.split('?').next().unwrap_or(base_url);
    let base = base.trim_end_matches('/');
    let base = base.strip_suffix("/chat/completions").unwrap_or(base);
    let base = base.strip_suffix("/api/chat").unwrap_or(base);
    let base = base.strip_suffix("/api").unwrap_or(base);
    base.strip_suffix("/v1").unwrap_or(base)
}

/// Asks the server at `base_url` about `model`, as its protocol knows how.
/// Never fails: what cannot be read is left unknown.
pub(super) fn probe(
    agent: &ureq::Agent,
    protocol: Protocol,
    base_url: &str,
    model: &str,
    headers: &[(String, String)],
) -> ServerInfo {
    let server = Server {
        agent,
        root: root(base_url),
        headers,
    };
    protocol.wire().probe(&server, model)
}

/// The server being asked, for the protocol's [`Prober`] questions.
struct Server<'a> {
    agent: &'a ureq::Agent,
    root: &'a str,
    headers: &'a [(String, String)],
}

impl Prober for Server<'_> {
    fn root(&self) -> &str {
        self.root
    }

    fn get_json(&self, url: &str) -> Option<Value> {
        get_json(self.agent, url, self.headers)
    }

    fn post_json(&self, url: &str, body: String) -> Option<Value> {
        post_json(self.agent, url, self.headers, body)
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

    #[test]
    fn roots() {
        assert_eq!(root("http://127.0.0.1:8080/v1"), "http://127.0.0.1:8080");
        assert_eq!(root("http://h:1/v1/chat/completions"), "http://h:1");
        assert_eq!(root("http://h:11434"), "http://h:11434");
        assert_eq!(root("http://h:11434/api/chat"), "http://h:11434");
    }
}
