//! `[webhooks]`: how this process signs and sends webhook deliveries
//! (`crate::webhook::Settings`; docs/scale-out.md, "Webhooks"). Every key
//! is optional; the `AIS_WEBHOOK_*` environment variables win over it.

use serde::Deserialize;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhooksSection {
    /// The environment variable holding the signing secret (default
    /// `AIS_WEBHOOK_SECRET`): the secret itself is never in the file.
    pub secret_env: Option<String>,
    /// Allow loopback and private addresses.
    pub allow_private: Option<bool>,
    pub max_attempts: Option<i64>,
    pub backoff_ms: Option<i64>,
    pub max_backoff_ms: Option<i64>,
    pub timeout_ms: Option<i64>,
}
