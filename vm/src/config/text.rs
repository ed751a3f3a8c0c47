//! `[telemetry]`'s text policy: what run events keep of prompts, replies
//! and tool arguments (applied by `crate::telemetry::TextPolicy::keep`).

/// The default most bytes kept of one prompt message, reply or tool
/// argument text.
pub const DEFAULT_TEXT_LIMIT: usize = 4096;

/// How telemetry keeps user text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextPolicy {
    /// Most bytes kept of one text (cut on a character boundary, with a
    /// note saying how long it was); 0 keeps none.
    pub limit: usize,
    /// Keep no prompts, replies or tool arguments at all.
    pub redact: bool,
    /// Strings never written (the selected backend's API key, ...): each
    /// occurrence becomes `[secret]`. Strings under 8 bytes are ignored.
    pub secrets: Vec<String>,
}

impl Default for TextPolicy {
    fn default() -> Self {
        TextPolicy {
            limit: DEFAULT_TEXT_LIMIT,
            redact: false,
            secrets: Vec::new(),
        }
    }
}
