//! A call against what the server says it can do (`probe.rs`): before
//! sending, a tool offer the server cannot render and a completion limit
//! that leaves the prompt no room are errors naming the true cause, and a
//! default limit larger than the room left is lowered to fit; after a
//! reply is cut off, the message names the limit that was sent and, when
//! the server's context filled first, that context.

use super::super::prompt::{LimitSource, Prepared};
use super::super::{LlmError, LlmErrorKind, Turn};
use super::probe;
use super::ServerInfo;
use super::{HttpCore, Reply};
use crate::sync::lock;

/// Tokens assumed per 3 bytes of prompt text when estimating the room
/// left for a default limit: generous to the prompt (English text runs
/// about 4 bytes a token), so a lowered default rarely overflows.
const BYTES_PER_TOKEN: usize = 3;
/// Tokens assumed for the chat template's framing of each message.
const FRAMING_TOKENS: usize = 8;

impl HttpCore {
    /// What the server says about `model`, asked once per model when the
    /// backend probes (`probe`), else nothing.
    pub(super) fn server_info(&self, model: &str) -> ServerInfo {
        if !self.opts.probe {
            return ServerInfo::default();
        }
        self.probe_now(model)
    }

    /// Asks the server (once per model; later calls read the answer).
    pub(super) fn probe_now(&self, model: &str) -> ServerInfo {
        if let Some(known) = lock(&self.servers).get(model) {
            return known.clone();
        }
        let headers: Vec<(String, String)> = self
            .protocol_headers()
            .into_iter()
            .filter(|(k, _)| k != "x-apxm-op")
            .collect();
        let info = probe::probe(
            &self.agent,
            self.opts.protocol,
            &self.opts.base_url,
            model,
            &headers,
        );
        lock(&self.servers).insert(model.to_string(), info.clone());
        info
    }

    /// Checks `p` against the server's stated limits, lowering a default
    /// completion limit that would not fit.
    pub(super) fn fit(&self, p: &mut Prepared) -> Result<(), LlmError> {
        let info = self.server_info(&p.model);
        let source = info.source.as_deref().unwrap_or("the server");
        if !p.tools.is_empty() && info.tools == Some(false) {
            let names: Vec<&str> = p.tools.iter().map(|t| t.name.as_str()).collect();
            return Err(self.fail(
                LlmErrorKind::Unsupported,
                None,
                format!(
                    "the `{}` op offers tools ({}), but {source} says the model's chat template cannot render tools, so the model would never see them; start the server with a template that supports tools (llama-server --jinja --chat-template-file FILE) or use a model whose template does",
                    p.kind.name(),
                    names.join(", ")
                ),
                0,
            ));
        }
        let (Some(context), Some(max)) = (info.context, p.max_tokens) else {
            return Ok(());
        };
        let prompt = estimate_prompt_tokens(p);
        match p.max_tokens_from {
            LimitSource::Default | LimitSource::Server => {
                let room = context.saturating_sub(prompt).max(1);
                if max > room {
                    p.max_tokens = Some(room);
                    p.max_tokens_from = LimitSource::Server;
                }
                Ok(())
            }
            from if max >= context => Err(self.fail(
                LlmErrorKind::ContextOverflow,
                None,
                format!(
                    "max_tokens {max} ({}) leaves no room for the prompt: {source} says one request may use {context} tokens, prompt and completion together; lower max_tokens, or give the server a larger context (llama-server -c N with fewer --parallel slots, vLLM --max-model-len, Ollama num_ctx)",
                    from.describe(p.kind)
                ),
                0,
            )),
            _ => Ok(()),
        }
    }

    /// Why `reply` stopped at the token limit: the limit that was sent and
    /// where it came from, and, when the server's context filled before
    /// that limit, the context.
    pub(super) fn truncated_message(&self, p: &Prepared, reply: &Reply) -> String {
        let reason = &reply.finish_reason;
        let mut m = format!("the reply was cut off (finish reason `{reason}`)");
        let used = reply.usage;
        let info = self.opts.probe.then(|| self.server_info(&p.model));
        let context = info.as_ref().and_then(|i| i.context.map(|c| (c, i)));
        match (p.max_tokens, context) {
            (Some(max), Some((ctx, info)))
                if used.completion_tokens > 0 && used.completion_tokens < u64::from(max) =>
            {
                m.push_str(&format!(
                    " by the server's context before max_tokens {max}: {} says one request may use {ctx} tokens, and this one had {} prompt + {} completion tokens; give the server a larger context or shorten the prompt",
                    info.source.as_deref().unwrap_or("the server"),
                    used.prompt_tokens,
                    used.completion_tokens
                ));
            }
            (Some(max), _) => {
                m.push_str(&format!(
                    " at the completion limit that was sent: max_tokens {max} ({})",
                    p.max_tokens_from.describe(p.kind)
                ));
                if used.completion_tokens > 0 {
                    m.push_str(&format!(
                        "; the reply had {} tokens",
                        used.completion_tokens
                    ));
                }
            }
            (None, _) => m.push_str(
                " by the server: no max_tokens was sent, so the server's own limit (often its context size) applied",
            ),
        }
        m
    }
}

/// A generous estimate of the prompt's tokens (see [`BYTES_PER_TOKEN`]).
fn estimate_prompt_tokens(p: &Prepared) -> u32 {
    let mut bytes = p.system.len();
    let mut messages = 1 + p.messages.len();
    for (_, text) in &p.messages {
        bytes += text.len();
    }
    for turn in &p.turns {
        messages += 1;
        bytes += match turn {
            Turn::Assistant { text, calls } => {
                text.len()
                    + calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments.len())
                        .sum::<usize>()
            }
            Turn::ToolResult { content, .. } => content.len(),
        };
    }
    for t in &p.tools {
        bytes += t.name.len() + t.description.len() + t.parameters.to_string().len();
    }
    let tokens = bytes / BYTES_PER_TOKEN + messages * FRAMING_TOKENS;
    u32::try_from(tokens).unwrap_or(u32::MAX)
}
