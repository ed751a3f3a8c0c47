//! What an OpenAI-compatible server states about itself: llama.cpp's
//! `GET /props` (`default_generation_settings.n_ctx`, the context of one
//! slot, i.e. of one request, and `chat_template_caps.supports_tools`),
//! else vLLM's `GET /v1/models` (`max_model_len` of the model).

use crate::llm::providers::ServerInfo;
use crate::llm::providers::Prober;
use serde_json::Value;

pub(super) fn probe(server: &dyn Prober, model: &str) -> ServerInfo {
    let root = server.root();
    if let Some(props) = server.get_json(&format!("{root}/props")) {
        let info = llama_props(&props);
        if info.is_known() {
            return info;
        }
    }
    server
        .get_json(&format!("{root}/v1/models"))
        .map(|v| vllm_models(&v, model))
        .unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn llama_cpp_props() {
        let v = json!({"default_generation_settings": {"n_ctx": 2048},
            "chat_template_caps": {"supports_tools": false}});
        let i = llama_props(&v);
        assert_eq!((i.context, i.tools), (Some(2048), Some(false)));
        assert_eq!(llama_props(&json!({"x": 1})), ServerInfo::default());
    }

    #[test]
    fn vllm() {
        let v = json!({"data": [{"id": "a", "max_model_len": 4096}, {"id": "b", "max_model_len": 8192}]});
        assert_eq!(vllm_models(&v, "b").context, Some(8192));
        assert_eq!(vllm_models(&v, "c").context, None);
    }
}
