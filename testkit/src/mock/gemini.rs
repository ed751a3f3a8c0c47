//! The mock's Gemini shapes (`…/models/{model}:generateContent`,
//! `:streamGenerateContent?alt=sse`).

use super::{MockCall, MockRequest};
use serde_json::{json, Value};

/// True for a Gemini path (the method follows the model after a colon).
pub(super) fn is_gemini(path: &str) -> bool {
    path.ends_with(":generateContent") || path.ends_with(":streamGenerateContent")
}

pub(super) fn wants_stream(req: &MockRequest) -> bool {
    req.path
        .split('?')
        .next()
        .is_some_and(|p| p.ends_with(":streamGenerateContent"))
}

/// The model named in the path.
pub(super) fn model(req: &MockRequest) -> String {
    let path = req.path.split('?').next().unwrap_or(&req.path);
    let name = path.rsplit('/').next().unwrap_or("");
    name.split(':').next().unwrap_or("").to_string()
}

/// `generationConfig.responseJsonSchema`.
pub(super) fn schema(req: &MockRequest) -> Option<Value> {
    req.body
        .pointer("/generationConfig/responseJsonSchema")
        .cloned()
}

/// The system instruction's text.
pub(super) fn system(req: &MockRequest) -> Option<String> {
    req.body
        .pointer("/systemInstruction/parts/0/text")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The text of the last `user` content.
pub(super) fn last_user(req: &MockRequest) -> String {
    req.body
        .get("contents")
        .and_then(Value::as_array)
        .and_then(|c| {
            c.iter()
                .rev()
                .find(|x| x.get("role").and_then(Value::as_str) == Some("user"))
        })
        .and_then(|x| x.pointer("/parts/0/text"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

pub(super) fn body(
    model: &str,
    text: &str,
    calls: &[MockCall],
    prompt: u64,
    completion: u64,
) -> Value {
    let mut parts = Vec::new();
    if !text.is_empty() || calls.is_empty() {
        parts.push(json!({"text": text}));
    }
    for c in calls {
        parts.push(json!({"functionCall": {"name": c.name, "args": c.input()}}));
    }
    json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": completion, "totalTokenCount": prompt + completion},
        "modelVersion": model,
    })
}

/// A reply's events: text pieces, then the calls with the finish reason
/// and the usage. The index of the first text event is returned too.
pub(super) fn events(body: &Value, pieces: impl Fn(&str) -> Vec<String>) -> (Vec<String>, usize) {
    let c = &body["candidates"][0];
    let parts = c["content"]["parts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let text: String = parts
        .iter()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    let calls: Vec<Value> = parts
        .iter()
        .filter(|p| p.get("functionCall").is_some())
        .cloned()
        .collect();
    let chunk = |parts: Vec<Value>| {
        json!({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
               "modelVersion": body["modelVersion"]})
    };
    let mut out = Vec::new();
    for p in pieces(&text) {
        out.push(format!("data: {}\r\n\r\n", chunk(vec![json!({"text": p})])));
    }
    let mut last = chunk(calls);
    last["candidates"][0]["finishReason"] = c["finishReason"].clone();
    last["usageMetadata"] = body["usageMetadata"].clone();
    out.push(format!("data: {last}\r\n\r\n"));
    (out, 0)
}
