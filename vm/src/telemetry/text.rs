//! The text telemetry keeps of a run: prompts, replies and tool arguments,
//! cut at a configurable size, left out with `redact`, and with known
//! secrets (API keys) scrubbed before anything is kept.

use serde::{Deserialize, Serialize};

// The policy is a setting (`[telemetry]`), defined with the
// configuration so `config` needs nothing of `telemetry`; what it does to
// text is here.
pub use crate::config::{TextPolicy, DEFAULT_TEXT_LIMIT};

impl TextPolicy {
    /// The text as telemetry keeps it, or `None` when redacted.
    pub fn keep(&self, text: &str) -> Option<String> {
        if self.redact {
            return None;
        }
        let mut owned = text.to_string();
        // Short strings would scrub ordinary words; keys are long. Every
        // encoding a server may echo a key in (base64, percent-encoded,
        // JSON-escaped) is scrubbed too.
        for s in self.secrets.iter().filter(|s| s.len() >= 8) {
            for form in crate::llm::secret::encoded_forms(s) {
                if form.len() >= 8 && owned.contains(form.as_str()) {
                    owned = owned.replace(form.as_str(), "[secret]");
                }
            }
        }
        Some(truncate(&owned, self.limit))
    }
}

/// `text` cut to at most `limit` bytes on a character boundary, with a note
/// of its full length when cut.
pub fn truncate(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let mut end = limit;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [truncated: {} bytes in all]", &text[..end], text.len())
}

/// One message of the request an LLM op sent, as telemetry keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MessageRecord {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    pub text: String,
}

/// What a non-LLM op adds to its event: the tool it called, with which
/// arguments, and the error code of a failure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpDetail {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The tool's arguments as JSON text (policy applied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
    /// The dotted error code, when the op failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The information-flow sources of the op's result (`crate::ifc`: the
    /// tools, memory and inputs it derives from), by name; empty when it
    /// has none or the policy is off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    /// Some of `sources` are untrusted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untrusted: bool,
}

/// The messages an LLM request sends, as telemetry keeps them: the system
/// prompt (the op's own, else its kind's default; a config's
/// `[instruction]` override is the backend's and not seen here), the user
/// message, then the earlier turns of a tool-calling exchange. Empty when
/// redacted.
pub fn prompt_messages(req: &crate::llm::LlmRequest, policy: &TextPolicy) -> Vec<MessageRecord> {
    use crate::llm::prompt::{prepare, Instructions, Models};
    use crate::llm::Turn;
    if policy.redact {
        return Vec::new();
    }
    let p = prepare(
        req,
        &Instructions::default(),
        &Models::default(),
        "",
        None,
        None,
        None,
    );
    let mut out = Vec::with_capacity(2 + p.turns.len());
    let mut push = |role: &str, text: &str| {
        if let Some(text) = policy.keep(text) {
            out.push(MessageRecord {
                role: role.to_string(),
                text,
            });
        }
    };
    push("system", &p.system);
    for (role, text) in &p.messages {
        push(role, text);
    }
    for t in &p.turns {
        match t {
            Turn::Assistant { text, calls } => {
                let mut s = text.clone();
                for c in calls {
                    if !s.is_empty() {
                        s.push('\n');
                    }
                    s.push_str(&format!("→ {}({})", c.name, c.arguments));
                }
                push("assistant", &s);
            }
            Turn::ToolResult { name, content, .. } => push("tool", &format!("{name}: {content}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_cuts_on_a_character_boundary_and_scrubs_secrets() {
        let p = TextPolicy {
            limit: 5,
            redact: false,
            secrets: vec!["sk-abcdefgh".into(), "short".into()],
        };
        // "é" is two bytes: a cut at 5 would split it.
        assert_eq!(
            p.keep("abcdéfg").as_deref(),
            Some("abcd… [truncated: 8 bytes in all]")
        );
        let p = TextPolicy { limit: 100, ..p };
        assert_eq!(
            p.keep("key sk-abcdefgh, short").as_deref(),
            Some("key [secret], short")
        );
        let p = TextPolicy { redact: true, ..p };
        assert_eq!(p.keep("anything"), None);
    }
}
