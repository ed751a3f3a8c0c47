//! What a request shares with others through the provider's prompt cache,
//! for the scheduler's fan-out warm-up (`scheduler/warmup.rs`,
//! `docs/runtime.md#prompt-cache-warm-up`).
//!
//! Providers cache a request's prefix once it has been answered (OpenAI
//! automatically from 1024 tokens, Anthropic at `cache_control`
//! breakpoints above a per-model minimum); requests sent together with the
//! same prefix all miss. A backend describes a request's shareable prefix
//! as a [`SharedPrefix`]: an identity (two requests with the same one send
//! the same first bytes), its estimated size, and the provider's minimum.

use super::prompt::Prepared;
use serde::{Deserialize, Serialize};
use std::hash::{Hash, Hasher};

/// A backend's `cache_warmup` setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WarmupMode {
    /// Hold a call behind another with its prefix when that costs the run
    /// no time by the backend's observed latency (`scheduler/warmup.rs`).
    #[default]
    Auto,
    /// Never hold a call.
    Off,
    /// Hold every call that can read what another call of its prefix is
    /// writing, whatever it costs in time (measurements).
    Always,
}

impl WarmupMode {
    pub fn name(self) -> &'static str {
        match self {
            WarmupMode::Auto => "auto",
            WarmupMode::Off => "off",
            WarmupMode::Always => "always",
        }
    }
}

/// The part of a request that other requests can read from the provider's
/// cache once this one has been answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedPrefix {
    /// Requests with the same class send the same prefix (backend, model,
    /// system text, tools, the context blocks rendered first, cache key).
    pub class: u64,
    /// Estimated tokens of the prefix (4 bytes a token).
    pub tokens: u64,
    /// The provider's minimum cacheable prefix for the request's model.
    pub min_tokens: u64,
    /// The backend's setting.
    pub mode: WarmupMode,
}

impl SharedPrefix {
    /// Whether the provider caches a prefix this long at all.
    pub fn cacheable(&self) -> bool {
        self.tokens >= self.min_tokens
    }
}

/// Bytes per token of the size estimate (English text; the benchmark
/// server counts the same).
const BYTES_PER_TOKEN: u64 = 4;

/// The shared prefix of prepared request `p` on backend `backend`:
/// system text, tools, and the context blocks the hints render before the
/// prompt (`cache_prefix`). `None` when there is nothing but the system
/// text and no cache key says the calls belong together (every call of a
/// kind has the same system text: holding on it alone would serialise
/// unrelated calls).
pub fn shared_prefix(
    backend: &str,
    p: &Prepared,
    blocks: &[&super::ContextBlock],
    min_tokens: u64,
    mode: WarmupMode,
) -> Option<SharedPrefix> {
    if blocks.is_empty() && p.tools.is_empty() && p.cache.key.is_none() {
        return None;
    }
    let mut h = std::hash::DefaultHasher::new();
    backend.hash(&mut h);
    p.model.hash(&mut h);
    p.system.hash(&mut h);
    p.cache.key.hash(&mut h);
    let mut bytes = p.system.len() as u64;
    for t in &p.tools {
        let params = t.parameters.to_string();
        (&t.name, &t.description, &params).hash(&mut h);
        bytes += (t.name.len() + t.description.len() + params.len()) as u64;
    }
    for b in blocks {
        (&b.label, &b.text).hash(&mut h);
        bytes += (b.label.len() + b.text.len()) as u64;
    }
    Some(SharedPrefix {
        class: h.finish(),
        tokens: bytes / BYTES_PER_TOKEN,
        min_tokens,
        mode,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{CacheHints, ContextBlock, LlmOpKind, LlmRequest};

    fn prepared(prompt: &str, doc: &str, prefix: bool) -> (Prepared, Vec<ContextBlock>) {
        let mut r = LlmRequest {
            kind: LlmOpKind::Ask,
            agent: "A".into(),
            system: None,
            prompt: prompt.into(),
            context: vec![ContextBlock {
                label: "doc".into(),
                text: doc.into(),
            }],
            model: None,
            temperature: None,
            max_tokens: None,
            json_schema: None,
            budget_tokens: None,
            backend: None,
            tools: Vec::new(),
            turns: Vec::new(),
            cache: Default::default(),
            on_text: None,
            critical: false,
            attained: Default::default(),
        };
        if prefix {
            r.cache = CacheHints {
                key: Some("k#0".into()),
                points: Vec::new(),
                prefix: vec![0],
            };
        }
        let p = crate::llm::prompt::prepare(
            &r,
            &Default::default(),
            &Default::default(),
            "m",
            None,
            None,
            None,
        );
        (p, r.context)
    }

    #[test]
    fn calls_with_one_prefix_share_a_class_and_others_do_not() {
        let doc = "word ".repeat(1000);
        let (a, ca) = prepared("first question", &doc, true);
        let (b, cb) = prepared("second question", &doc, true);
        let (c, cc) = prepared("first question", "another document", true);
        let sa = shared_prefix("x", &a, &[&ca[0]], 1024, WarmupMode::Auto);
        let sb = shared_prefix("x", &b, &[&cb[0]], 1024, WarmupMode::Auto);
        let sc = shared_prefix("x", &c, &[&cc[0]], 1024, WarmupMode::Auto);
        let (sa, sb, sc) = (sa.expect("a"), sb.expect("b"), sc.expect("c"));
        assert_eq!(sa.class, sb.class, "the prompt is not part of the prefix");
        assert_ne!(sa.class, sc.class);
        assert!(sa.tokens >= 1250 && sa.cacheable(), "{sa:?}");
        assert!(!sc.cacheable(), "a short document is below the minimum");
        let other_backend = shared_prefix("y", &a, &[&ca[0]], 1024, WarmupMode::Auto).expect("y");
        assert_ne!(sa.class, other_backend.class);
    }

    #[test]
    fn nothing_shared_without_blocks_tools_or_key() {
        let (p, _) = prepared("q", "doc", false);
        assert_eq!(shared_prefix("x", &p, &[], 1024, WarmupMode::Auto), None);
    }
}
