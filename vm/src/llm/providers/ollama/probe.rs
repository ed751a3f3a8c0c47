//! What an Ollama server states about a model: `POST /api/show` —
//! `num_ctx` in the model's `parameters` (its default context is not
//! stated, so none is assumed) and `tools` in its `capabilities`.

use crate::llm::providers::ServerInfo;
use crate::llm::providers::Prober;
use serde_json::Value;

pub(super) fn probe(server: &dyn Prober, model: &str) -> ServerInfo {
    let body = serde_json::json!({ "model": model }).to_string();
    server
        .post_json(&format!("{}/api/show", server.root()), body)
        .map(|v| ollama_show(&v))
        .unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ollama_show_reads_context_and_tools() {
        let o = json!({"parameters": "stop \"<x>\"\nnum_ctx                        8192", "capabilities": ["completion"]});
        let i = ollama_show(&o);
        assert_eq!((i.context, i.tools), (Some(8192), Some(false)));
    }
}
