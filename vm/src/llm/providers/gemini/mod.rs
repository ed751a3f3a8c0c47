//! Google Gemini API (`POST {base_url}/models/{model}:generateContent`,
//! streamed: `:streamGenerateContent?alt=sse`). The key goes in the
//! `x-goog-api-key` header, never in the URL (URLs end up in logs).
//!
//! `request.rs` writes the body (`systemInstruction`, `contents` with
//! `functionCall` / `functionResponse` parts, `tools.functionDeclarations`,
//! `generationConfig`), `response.rs` reads a reply (candidate parts,
//! `finishReason`, `usageMetadata`, errors), `stream.rs` the Server-Sent
//! Events of a streamed one (each a whole response chunk).
//!
//! Prompt caching is implicit on Gemini 2.5 models: a request whose
//! prefix was seen recently is billed at the cached rate, and
//! `usageMetadata.cachedContentTokenCount` says how much was.

mod request;
mod response;
mod stream;

use super::prelude::*;

pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

/// The protocol, as registered.
pub static PROTOCOL: Gemini = Gemini;

/// The Gemini API (`generateContent`).
pub struct Gemini;

impl WireProtocol for Gemini {
    fn name(&self) -> &'static str {
        "gemini"
    }

    fn default_base_url(&self) -> &'static str {
        DEFAULT_BASE_URL
    }

    /// `{base}/models`; the model and the method follow per call.
    fn endpoint(&self, base: &str) -> String {
        let base = base.trim_end_matches('/');
        if base.ends_with("/models") {
            base.to_string()
        } else {
            format!("{base}/models")
        }
    }

    /// Implicit caching: from 4096 tokens on the Pro models, 1024 on the
    /// others (Gemini 2.5's documented minimums).
    fn cache_min_tokens(&self, p: &Prepared) -> Option<u64> {
        Some(if p.model.contains("pro") { 4096 } else { 1024 })
    }

    fn request_url(&self, endpoint: &str, model: &str, stream: bool) -> String {
        let (url, query) = match endpoint.split_once('?') {
            Some((u, q)) => (u, Some(q)),
            None => (endpoint, None),
        };
        // `models/gemini-…` (the API's resource name) and `gemini-…` alike.
        let model = model.strip_prefix("models/").unwrap_or(model);
        let mut out = if stream {
            format!("{url}/{model}:streamGenerateContent?alt=sse")
        } else {
            format!("{url}/{model}:generateContent")
        };
        if let Some(q) = query {
            out.push(if stream { '&' } else { '?' });
            out.push_str(q);
        }
        out
    }

    fn headers(&self, key: Option<&Secret>) -> Vec<(&'static str, String)> {
        match key {
            Some(k) if !k.is_empty() => vec![("x-goog-api-key", k.expose().to_string())],
            _ => Vec::new(),
        }
    }

    fn body(&self, p: &Prepared, o: &BodyOptions) -> Value {
        request::body(p, o.structured)
    }

    fn parse(&self, v: &Value) -> Result<Reply, String> {
        response::parse(v)
    }

    fn usage(&self, v: &Value) -> Usage {
        response::usage(v)
    }

    fn incomplete(&self, reason: &str) -> Option<Incomplete> {
        incomplete(reason)
    }

    /// Gemini 2.5: implicitly cached input costs a quarter of the input price.
    fn cache_multipliers(&self) -> (f64, f64) {
        (0.25, 1.0)
    }

    fn error_detail(&self, body: &str) -> ErrorDetail {
        response::error_detail(body)
    }

    fn stream_event(
        &self,
        s: &mut StreamState,
        v: &Value,
        deltas: &mut Vec<String>,
    ) -> Result<(), String> {
        stream::event(s, v, deltas)
    }
}

/// The error a `finishReason` (or a prompt's `blockReason`) stands for,
/// when the reply is not a complete answer.
pub(crate) fn incomplete(reason: &str) -> Option<Incomplete> {
    match reason {
        "MAX_TOKENS" => Some(Incomplete::Truncated),
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            Some(Incomplete::ContentFilter)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_the_model_and_keep_the_query() {
        let g = &PROTOCOL;
        let e = g.endpoint("https://generativelanguage.googleapis.com/v1beta/");
        assert_eq!(
            g.request_url(&e, "gemini-2.5-flash", false),
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
        );
        assert_eq!(
            g.request_url(&format!("{e}?x=1"), "models/g", true),
            "https://generativelanguage.googleapis.com/v1beta/models/g:streamGenerateContent?alt=sse&x=1"
        );
        let h = g.headers(Some(&Secret::new("k")));
        assert_eq!(h, vec![("x-goog-api-key", "k".to_string())]);
    }

    #[test]
    fn finish_reasons() {
        assert_eq!(incomplete("MAX_TOKENS"), Some(Incomplete::Truncated));
        assert_eq!(incomplete("SAFETY"), Some(Incomplete::ContentFilter));
        assert_eq!(incomplete("STOP"), None);
    }
}
