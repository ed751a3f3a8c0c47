//! Webhooks: a run's completion, failure or pause POSTed to a URL, signed
//! (Standard Webhooks, [`sign`]), retried with backoff, journaled
//! (docs/scale-out.md, "Webhooks").
//!
//! A run is subscribed when it is started or queued (`aisc run --webhook`,
//! `POST /v1/runs` `webhooks`, a schedule's runs); the store writes one
//! delivery row per event in the transaction that records the run's state
//! (`crate::store::webhook`); [`deliver::Deliverer`] — in `aisc worker`,
//! `aisc serve` and `aisc run` — claims due rows under a lease and sends
//! them. Delivery is at least once: a receiver dedupes on `webhook-id`.

pub mod deliver;
pub mod guard;
pub mod sign;

use crate::config::webhooks::WebhooksSection;
use crate::store::webhook::{Hook, EVENTS};

/// The most webhooks one run may have.
pub const MAX_HOOKS: usize = 16;

/// The longest URL accepted.
const MAX_URL: usize = 2048;

/// Why a webhook was refused when declared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    #[error("webhook.url: `{url}` is not a webhook URL: {why}")]
    Url { url: String, why: String },
    #[error("webhook.events: `{event}` is not a webhook event (expected some of completed, failed, paused)")]
    Event { event: String },
    #[error("webhook.private: `{url}` names the non-public address {addr}; webhooks may only reach public addresses unless AIS_WEBHOOK_ALLOW_PRIVATE=1 or `[webhooks] allow_private = true`")]
    Private { url: String, addr: String },
    #[error("webhook.count: at most {MAX_HOOKS} webhooks per run, got {0}")]
    TooMany(usize),
    #[error("webhook.secret: no webhook secret: set AIS_WEBHOOK_SECRET (a `whsec_...` base64 secret, or any text), or the variable `[webhooks] secret_env` names, so deliveries are signed")]
    NoSecret,
}

impl WebhookError {
    pub fn code(&self) -> &'static str {
        match self {
            WebhookError::Url { .. } => "webhook.url",
            WebhookError::Event { .. } => "webhook.events",
            WebhookError::Private { .. } => "webhook.private",
            WebhookError::TooMany(_) => "webhook.count",
            WebhookError::NoSecret => "webhook.secret",
        }
    }
}

/// How this process signs and sends deliveries, from the environment.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `AIS_WEBHOOK_SECRET`: without it this process sends nothing (it
    /// never sends an unsigned delivery; another process may).
    pub secret: Option<sign::Secret>,
    /// `AIS_WEBHOOK_ALLOW_PRIVATE=1`: loopback and private addresses are
    /// allowed (a receiver on the same network, tests).
    pub allow_private: bool,
    /// `AIS_WEBHOOK_MAX_ATTEMPTS` (default 10): attempts before a delivery
    /// is marked failed.
    pub max_attempts: i32,
    /// `AIS_WEBHOOK_BACKOFF_MS` (default 1000): the wait before the second
    /// attempt, doubled for each next one (with jitter).
    pub backoff_ms: i64,
    /// `AIS_WEBHOOK_MAX_BACKOFF_MS` (default one hour): the longest wait,
    /// also the most a `Retry-After` is honoured.
    pub max_backoff_ms: i64,
    /// `AIS_WEBHOOK_TIMEOUT_MS` (default 10000): one attempt's time limit.
    pub timeout_ms: u64,
    /// `AIS_WEBHOOK_RETENTION_DAYS` or `retention_days` (default 7), in
    /// ms: how long an ended delivery and its attempts are kept.
    pub retention_ms: i64,
    /// The secrets of `[[webhooks]]` entries with a `secret_env`, by URL:
    /// a delivery to one of these URLs is signed with it.
    pub url_secrets: Vec<(String, sign::Secret)>,
}

/// Default days an ended delivery is kept.
pub const RETENTION_DAYS: i64 = 7;

const DAY_MS: i64 = 86_400_000;

impl Default for Settings {
    fn default() -> Self {
        Settings {
            secret: None,
            allow_private: false,
            max_attempts: 10,
            backoff_ms: 1000,
            max_backoff_ms: 3_600_000,
            timeout_ms: 10_000,
            retention_ms: RETENTION_DAYS * DAY_MS,
            url_secrets: Vec::new(),
        }
    }
}

/// The `[webhooks]` section of this process's configuration, once the
/// edge has read it ([`configure`]).
static CONFIGURED: std::sync::OnceLock<WebhooksSection> = std::sync::OnceLock::new();

/// Makes `[webhooks]` of the configuration this process loaded the base
/// of [`Settings::from_process`] (the first call wins).
pub fn configure(section: &WebhooksSection) {
    let _ = CONFIGURED.set(section.clone());
}

impl Settings {
    /// The settings of the environment `var` reads (`std::env::var` in
    /// the product).
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Settings {
        Settings::from_config(&WebhooksSection::default(), var)
    }

    /// The settings of `[webhooks]` with the environment over it: each
    /// `AIS_WEBHOOK_*` variable wins over its key; the secret is read from
    /// the variable `secret_env` names, else `AIS_WEBHOOK_SECRET`.
    pub fn from_config(file: &WebhooksSection, var: impl Fn(&str) -> Option<String>) -> Settings {
        let d = Settings::default();
        let num = |name: &str, key: Option<i64>, default: i64, max: i64| {
            var(name)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .or(key)
                .map_or(default, |v| v.clamp(1, max))
        };
        let secret = file
            .secret_env
            .as_deref()
            .and_then(&var)
            .or_else(|| var("AIS_WEBHOOK_SECRET"));
        Settings {
            secret: secret.and_then(|s| sign::Secret::parse(&s)),
            allow_private: var("AIS_WEBHOOK_ALLOW_PRIVATE")
                .map_or(file.allow_private.unwrap_or(false), |v| {
                    matches!(v.trim(), "1" | "true" | "yes")
                }),
            max_attempts: i32::try_from(num(
                "AIS_WEBHOOK_MAX_ATTEMPTS",
                file.max_attempts,
                10,
                100,
            ))
            .unwrap_or(10),
            backoff_ms: num(
                "AIS_WEBHOOK_BACKOFF_MS",
                file.backoff_ms,
                d.backoff_ms,
                86_400_000,
            ),
            max_backoff_ms: num(
                "AIS_WEBHOOK_MAX_BACKOFF_MS",
                file.max_backoff_ms,
                d.max_backoff_ms,
                86_400_000,
            ),
            timeout_ms: u64::try_from(
                num("AIS_WEBHOOK_TIMEOUT_MS", file.timeout_ms, 10_000, 600_000).max(100),
            )
            .unwrap_or(10_000),
            // 0 is allowed: ended deliveries are deleted at the next prune.
            retention_ms: var("AIS_WEBHOOK_RETENTION_DAYS")
                .and_then(|v| v.trim().parse::<i64>().ok())
                .or(file.retention_days)
                .map_or(RETENTION_DAYS, |d| d.clamp(0, 36_500))
                * DAY_MS,
            url_secrets: file
                .hooks
                .iter()
                .filter_map(|h| {
                    let text = var(h.secret_env.as_deref()?)?;
                    Some((h.url.clone(), sign::Secret::parse(&text)?))
                })
                .collect(),
        }
    }

    /// The secret a delivery to `url` is signed with: its `[[webhooks]]`
    /// entry's, else the process's.
    pub fn secret_for(&self, url: &str) -> Option<&sign::Secret> {
        self.url_secrets
            .iter()
            .find(|(u, _)| u == url)
            .map(|(_, s)| s)
            .or(self.secret.as_ref())
    }

    /// The settings of this process: its configuration's `[webhooks]` (if
    /// [`configure`]d) under its environment.
    pub fn from_process() -> Settings {
        let file = CONFIGURED.get().cloned().unwrap_or_default();
        Settings::from_config(&file, |k| std::env::var(k).ok())
    }
}

/// A subscription as declared (`--webhook URL --webhook-events LIST`):
/// checked, with its events normalised (default: all three).
pub fn declare(url: &str, events: Option<&str>, settings: &Settings) -> Result<Hook, WebhookError> {
    let bad = |why: &str| WebhookError::Url {
        url: crate::llm::secret::redact_url(url),
        why: why.to_string(),
    };
    if url.len() > MAX_URL {
        return Err(bad("longer than 2048 bytes"));
    }
    let uri: ureq::http::Uri = url.parse().map_err(|_| bad("it does not parse"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(bad("it must start with http:// or https://")),
    }
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| bad("it has no host"))?;
    if let Some(ip) = guard::literal_host(host) {
        if !settings.allow_private && !guard::is_public(ip) {
            return Err(WebhookError::Private {
                url: crate::llm::secret::redact_url(url),
                addr: ip.to_string(),
            });
        }
    }
    let mut wanted = Vec::new();
    for e in events.unwrap_or("completed,failed,paused").split(',') {
        let e = e.trim();
        if e.is_empty() {
            continue;
        }
        if !EVENTS.contains(&e) {
            return Err(WebhookError::Event {
                event: e.to_string(),
            });
        }
        if !wanted.contains(&e) {
            wanted.push(e);
        }
    }
    if wanted.is_empty() {
        return Err(WebhookError::Event {
            event: events.unwrap_or_default().to_string(),
        });
    }
    // In the order of EVENTS, so equal lists compare equal.
    let events = EVENTS
        .iter()
        .filter(|e| wanted.contains(e))
        .copied()
        .collect::<Vec<_>>()
        .join(",");
    Ok(Hook {
        url: url.to_string(),
        events,
    })
}

/// The `[[webhooks]]` of this process's configuration ([`configure`]),
/// checked as `--webhook` is: added to every run it starts, queues or
/// takes.
pub fn configured_hooks() -> Result<Vec<Hook>, WebhookError> {
    let Some(file) = CONFIGURED.get() else {
        return Ok(Vec::new());
    };
    let settings = Settings::from_process();
    file.hooks
        .iter()
        .map(|h| {
            declare(
                &h.url,
                h.events.as_ref().map(|e| e.joined()).as_deref(),
                &settings,
            )
        })
        .collect()
}

/// `hooks` (a run's own) with `extra` (the configuration's) added, except
/// where the run has the URL already (its own events win); at most
/// [`MAX_HOOKS`].
pub fn merge(mut hooks: Vec<Hook>, extra: &[Hook]) -> Result<Vec<Hook>, WebhookError> {
    for h in extra {
        if !hooks.iter().any(|o| o.url == h.url) {
            hooks.push(h.clone());
        }
    }
    if hooks.len() > MAX_HOOKS {
        return Err(WebhookError::TooMany(hooks.len()));
    }
    Ok(hooks)
}

/// Declares every `urls` with the same `events` (at most [`MAX_HOOKS`]).
pub fn declare_all(
    urls: &[String],
    events: Option<&str>,
    settings: &Settings,
) -> Result<Vec<Hook>, WebhookError> {
    if urls.len() > MAX_HOOKS {
        return Err(WebhookError::TooMany(urls.len()));
    }
    urls.iter().map(|u| declare(u, events, settings)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_are_checked_and_normalised() {
        let s = Settings::default();
        let h = declare("https://hooks.example.com/x", Some("paused, completed"), &s)
            .expect("public URL");
        assert_eq!(h.events, "completed,paused");
        assert_eq!(
            declare("https://hooks.example.com/x", None, &s)
                .expect("default events")
                .events,
            "completed,failed,paused"
        );
        assert_eq!(
            declare("http://127.0.0.1:9/x", None, &s).map_err(|e| e.code()),
            Err("webhook.private")
        );
        assert_eq!(
            declare("http://169.254.169.254/latest", None, &s).map_err(|e| e.code()),
            Err("webhook.private")
        );
        assert_eq!(
            declare("ftp://example.com/x", None, &s).map_err(|e| e.code()),
            Err("webhook.url")
        );
        assert_eq!(
            declare("https://example.com/x", Some("done"), &s).map_err(|e| e.code()),
            Err("webhook.events")
        );
        let open = Settings {
            allow_private: true,
            ..Settings::default()
        };
        assert!(declare("http://127.0.0.1:9/x", None, &open).is_ok());
        let many = vec!["https://example.com/".to_string(); MAX_HOOKS + 1];
        assert_eq!(
            declare_all(&many, None, &s).map_err(|e| e.code()),
            Err("webhook.count")
        );
    }

    #[test]
    fn settings_come_from_the_environment_and_are_bounded() {
        let s = Settings::from_env(|k| match k {
            "AIS_WEBHOOK_SECRET" => Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into()),
            "AIS_WEBHOOK_ALLOW_PRIVATE" => Some("1".into()),
            "AIS_WEBHOOK_MAX_ATTEMPTS" => Some("100000".into()),
            "AIS_WEBHOOK_BACKOFF_MS" => Some("-5".into()),
            _ => None,
        });
        assert!(s.secret.is_some());
        assert!(s.allow_private);
        assert_eq!(s.max_attempts, 100);
        assert_eq!(s.backoff_ms, 1);
        assert_eq!(s.timeout_ms, 10_000);
        assert!(
            !format!("{s:?}").contains("MfKQ9r8"),
            "the secret never prints"
        );
        // `[webhooks]` under the environment.
        let file = WebhooksSection {
            secret_env: Some("HOOK_KEY".into()),
            allow_private: Some(true),
            max_attempts: Some(4),
            ..WebhooksSection::default()
        };
        let s = Settings::from_config(&file, |k| match k {
            "HOOK_KEY" => Some("text secret".into()),
            "AIS_WEBHOOK_MAX_ATTEMPTS" => Some("6".into()),
            _ => None,
        });
        assert_eq!(s.secret, sign::Secret::parse("text secret"));
        assert!(s.allow_private);
        assert_eq!(s.max_attempts, 6, "the environment wins");
        let s = Settings::from_config(&file, |k| match k {
            "AIS_WEBHOOK_ALLOW_PRIVATE" => Some("0".into()),
            _ => None,
        });
        assert!(!s.allow_private && s.secret.is_none());
        assert_eq!(s.max_attempts, 4);
        assert_eq!(s.retention_ms, RETENTION_DAYS * DAY_MS);
    }

    #[test]
    fn configured_hooks_have_their_own_secrets_and_merge_under_a_runs_own() {
        use crate::config::webhooks::{Events, HookEntry};
        let file = WebhooksSection {
            retention_days: Some(2),
            hooks: vec![
                HookEntry {
                    url: "https://a.example/h".into(),
                    events: Some(Events::List(vec!["failed".into()])),
                    secret_env: Some("A_KEY".into()),
                },
                HookEntry {
                    url: "https://b.example/h".into(),
                    events: None,
                    secret_env: Some("UNSET".into()),
                },
            ],
            ..WebhooksSection::default()
        };
        let s = Settings::from_config(&file, |k| match k {
            "A_KEY" => Some("a secret".into()),
            "AIS_WEBHOOK_SECRET" => Some("process secret".into()),
            _ => None,
        });
        assert_eq!(s.retention_ms, 2 * DAY_MS);
        assert_eq!(
            s.secret_for("https://a.example/h"),
            sign::Secret::parse("a secret").as_ref()
        );
        assert_eq!(
            s.secret_for("https://b.example/h"),
            sign::Secret::parse("process secret").as_ref(),
            "an unset secret_env falls back to the process's"
        );
        assert!(!format!("{s:?}").contains("a secret"));
        let own = vec![Hook {
            url: "https://a.example/h".into(),
            events: "completed".into(),
        }];
        let extra = vec![
            Hook {
                url: "https://a.example/h".into(),
                events: "failed".into(),
            },
            Hook {
                url: "https://b.example/h".into(),
                events: "completed,failed,paused".into(),
            },
        ];
        let m = merge(own, &extra).expect("two hooks");
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].events, "completed", "the run's own events win");
        let many = vec![extra[1].clone(); MAX_HOOKS];
        assert_eq!(
            merge(many, &extra[..1]).map_err(|e| e.code()),
            Err("webhook.count")
        );
    }
}
