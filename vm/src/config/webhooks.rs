//! `[webhooks]`: how this process signs and sends webhook deliveries
//! (`crate::webhook::Settings`; docs/scale-out.md, "Webhooks"), and the
//! webhooks every run of this process gets. Every key is optional; the
//! `AIS_WEBHOOK_*` environment variables win over it.
//!
//! Two forms: `[[webhooks]]` entries (a subscription each: `url`,
//! `events`, `secret_env`), or a `[webhooks]` table with the settings and
//! its subscriptions under `[[webhooks.hooks]]` (TOML cannot have both a
//! `[webhooks]` table and `[[webhooks]]` entries in one file).

use serde::Deserialize;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "toml::Value")]
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
    /// Days an ended delivery (delivered or failed) and its attempts are
    /// kept before the delivery loop deletes them (default 7).
    pub retention_days: Option<i64>,
    /// Subscriptions added to every run this process starts, queues or
    /// takes (`[[webhooks]]`).
    pub hooks: Vec<HookEntry>,
}

/// One `[[webhooks]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookEntry {
    pub url: String,
    /// Some of `completed`, `failed`, `paused` (a list, or one
    /// comma-separated string); default all three.
    #[serde(default)]
    pub events: Option<Events>,
    /// The variable holding this URL's signing secret (default: the
    /// process's, `[webhooks] secret_env` or `AIS_WEBHOOK_SECRET`).
    pub secret_env: Option<String>,
}

/// `events = ["completed", "failed"]` or `events = "completed,failed"`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Events {
    List(Vec<String>),
    Text(String),
}

impl Events {
    /// As `--webhook-events` takes them.
    pub fn joined(&self) -> String {
        match self {
            Events::List(l) => l.join(","),
            Events::Text(t) => t.clone(),
        }
    }
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    secret_env: Option<String>,
    allow_private: Option<bool>,
    max_attempts: Option<i64>,
    backoff_ms: Option<i64>,
    max_backoff_ms: Option<i64>,
    timeout_ms: Option<i64>,
    retention_days: Option<i64>,
    #[serde(default)]
    hooks: Vec<HookEntry>,
}

/// Either form, read by its shape so that an error names the key at
/// fault (an unknown key, a missing `url`).
impl TryFrom<toml::Value> for WebhooksSection {
    type Error = String;

    fn try_from(v: toml::Value) -> Result<Self, String> {
        if v.is_array() {
            let hooks: Vec<HookEntry> = v
                .try_into()
                .map_err(|e: toml::de::Error| format!("[[webhooks]]: {}", e.message()))?;
            return Ok(WebhooksSection {
                hooks,
                ..WebhooksSection::default()
            });
        }
        let t: Table = v
            .try_into()
            .map_err(|e: toml::de::Error| format!("[webhooks]: {}", e.message()))?;
        Ok(WebhooksSection {
            secret_env: t.secret_env,
            allow_private: t.allow_private,
            max_attempts: t.max_attempts,
            backoff_ms: t.backoff_ms,
            max_backoff_ms: t.max_backoff_ms,
            timeout_ms: t.timeout_ms,
            retention_days: t.retention_days,
            hooks: t.hooks,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct File {
        #[serde(default)]
        webhooks: WebhooksSection,
    }

    #[test]
    fn both_forms_read_and_unknown_keys_are_refused() {
        let f: File = toml::from_str(
            "[[webhooks]]\nurl = \"https://a.example/h\"\nevents = [\"completed\", \"failed\"]\nsecret_env = \"A_KEY\"\n\
             [[webhooks]]\nurl = \"https://b.example/h\"\n",
        )
        .unwrap();
        assert_eq!(f.webhooks.hooks.len(), 2);
        assert_eq!(
            f.webhooks.hooks[0].events.as_ref().map(Events::joined),
            Some("completed,failed".into())
        );
        assert_eq!(f.webhooks.hooks[0].secret_env.as_deref(), Some("A_KEY"));
        assert_eq!(f.webhooks.hooks[1].events, None);
        let f: File = toml::from_str(
            "[webhooks]\nmax_attempts = 3\nretention_days = 2\n[[webhooks.hooks]]\nurl = \"https://a.example/h\"\nevents = \"paused\"\n",
        )
        .unwrap();
        assert_eq!(f.webhooks.max_attempts, Some(3));
        assert_eq!(f.webhooks.retention_days, Some(2));
        assert_eq!(
            f.webhooks.hooks[0].events.as_ref().map(Events::joined),
            Some("paused".into())
        );
        let e = toml::from_str::<File>("[webhooks]\nmax_atempts = 3\n").unwrap_err();
        assert!(e.to_string().contains("max_atempts"), "{e}");
        assert!(
            toml::from_str::<File>("[[webhooks]]\nurl = \"https://a/\"\nsecret = \"x\"\n").is_err()
        );
        assert!(toml::from_str::<File>("")
            .unwrap()
            .webhooks
            .hooks
            .is_empty());
    }
}
