//! The delivery loop: claims due deliveries from the store under a lease,
//! POSTs each signed, and records the attempt and what becomes of the
//! delivery (delivered; retried later on a connection error, a timeout, a
//! 5xx, 408 or 429 — honouring `Retry-After` — with exponential backoff and
//! jitter; failed after the last attempt, or at once on another answer).
//! Any number of processes may run it on one store: a row is held by one
//! claim at a time.

use super::guard::GuardedResolver;
use super::Settings;
use crate::llm::secret::{redact_url, Masker};
use crate::store::webhook::{Attempt, Due, Outcome};
use crate::store::{JournalError, Store};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Deliveries claimed per look (and sent at once, one thread each).
const BATCH: i64 = 8;

/// How often an idle loop looks for due deliveries.
pub const LOOK_EVERY: Duration = Duration::from_millis(200);

/// How often the loop deletes ended deliveries past their retention.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// Rows deleted per statement when pruning, and statements per pass.
pub const PRUNE_BATCH: i64 = 500;
const PRUNE_BATCHES: usize = 10;

/// The most bytes of a receiver's answer read (and dropped).
const MAX_ANSWER: u64 = 64 * 1024;

/// Sends the deliveries of one store.
pub struct Deliverer {
    store: Arc<dyn Store>,
    settings: Settings,
    agent: ureq::Agent,
    /// This process as the owner of its claims.
    owner: String,
    /// Masks the secret (and URL credentials) in recorded errors.
    masker: Masker,
}

impl std::fmt::Debug for Deliverer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliverer")
            .field("store", &self.store.location())
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

/// One attempt as the loop reports it (a log line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    pub due: Due,
    pub attempt: Attempt,
    /// `false`: the claim was lost before the attempt was recorded.
    pub recorded: bool,
}

impl Sent {
    /// `webhook msg_... (run R, completed) to URL: delivered (HTTP 200,
    /// attempt 1)`; the URL's credentials masked.
    pub fn line(&self) -> String {
        let a = &self.attempt;
        let what = match (&a.outcome, a.http_status, &a.error) {
            (Outcome::Delivered, Some(s), _) => format!("delivered (HTTP {s}, "),
            (o, s, e) => {
                let why = match (s, e) {
                    (_, Some(e)) => e.clone(),
                    (Some(s), None) => format!("HTTP {s}"),
                    (None, None) => "no answer".into(),
                };
                match o {
                    Outcome::Retry { next_ms } => format!(
                        "{why}; retried in {:.1}s (",
                        (next_ms - a.at_ms).max(0) as f64 / 1000.0
                    ),
                    _ => format!("{why}; failed for good ("),
                }
            }
        };
        let lost = if self.recorded {
            ""
        } else {
            "; not recorded: another process claimed it meanwhile"
        };
        format!(
            "webhook {} (run {}, {}) to {}: {what}attempt {}){lost}",
            self.due.id,
            self.due.run,
            self.due.event,
            redact_url(&self.due.url),
            a.n
        )
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A number in `[0, 1)` that differs between calls and processes (jitter;
/// not for secrets).
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// The wait before attempt `n + 1` after attempt `n` failed: `base *
/// 2^(n-1)`, at most `max`, scaled by a jitter in `[0.5, 1)`; never less
/// than a `Retry-After` (itself at most `max`).
pub fn backoff_ms(settings: &Settings, n: i32, retry_after_ms: Option<i64>, jitter: f64) -> i64 {
    let shift = u32::try_from(n.saturating_sub(1)).unwrap_or(0).min(40);
    let full = settings
        .backoff_ms
        .saturating_mul(1i64 << shift)
        .min(settings.max_backoff_ms);
    let jittered = (full as f64 * (0.5 + jitter.clamp(0.0, 1.0) / 2.0)) as i64;
    match retry_after_ms {
        Some(ra) => jittered.max(ra.min(settings.max_backoff_ms)),
        None => jittered,
    }
    .max(1)
}

/// A `Retry-After` value in milliseconds: delay-seconds, or an HTTP date.
fn retry_after(value: &str, now: i64) -> Option<i64> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<i64>() {
        return Some(secs.max(0).saturating_mul(1000));
    }
    let at = jiff::fmt::rfc2822::parse(v).ok()?;
    Some((at.timestamp().as_millisecond() - now).max(0))
}

/// Whether an answer's status is worth another attempt.
fn retryable_status(status: u16) -> bool {
    status >= 500 || status == 408 || status == 429
}

impl Deliverer {
    /// The deliverer of `store`; `None` when `settings` has no secret
    /// (this process then sends nothing: never an unsigned delivery).
    pub fn new(store: Arc<dyn Store>, settings: Settings) -> Option<Deliverer> {
        if settings.secret.is_none() && settings.url_secrets.is_empty() {
            return None;
        }
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_millis(settings.timeout_ms)))
            .http_status_as_error(false)
            // A redirect could lead past the address guard's first answer
            // and would resend the signed body elsewhere: not followed.
            .max_redirects(0)
            // A proxy from the environment would hide the destination from
            // the guard.
            .proxy(None)
            .user_agent("aisc-webhooks")
            .build();
        let agent = ureq::Agent::with_parts(
            config,
            ureq::unversioned::transport::DefaultConnector::default(),
            GuardedResolver::new(settings.allow_private),
        );
        let mut masker = Masker::new();
        for secret in settings
            .secret
            .iter()
            .chain(settings.url_secrets.iter().map(|(_, s)| s))
        {
            masker.add(secret.text());
        }
        Some(Deliverer {
            store,
            settings,
            agent,
            owner: format!("{}/webhooks", crate::store::lease::this_process()),
            masker,
        })
    }

    /// A claim's lease: an attempt's time limit and a margin, so a row is
    /// not claimed again while its attempt may still be under way.
    fn lease_ms(&self) -> i64 {
        i64::try_from(self.settings.timeout_ms)
            .unwrap_or(600_000)
            .saturating_mul(2)
            .saturating_add(5_000)
    }

    /// Claims the due deliveries (a batch) and sends them at once; returns
    /// what each attempt did. Empty when nothing is due.
    pub fn pump(&self) -> Result<Vec<Sent>, JournalError> {
        let due = self
            .store
            .claim_deliveries(&self.owner, self.lease_ms(), BATCH)?;
        let mut out = Vec::with_capacity(due.len());
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = due
                .into_iter()
                .map(|d| s.spawn(move || self.deliver(d)))
                .collect();
            handles.into_iter().map(|h| h.join()).collect()
        });
        for r in results {
            match r {
                Ok(Ok(Some(sent))) => out.push(sent),
                Ok(Ok(None)) => {}
                Ok(Err(e)) => return Err(e),
                // A panicking attempt leaves its row claimed; the lease
                // runs out and it is tried again.
                Err(_) => {}
            }
        }
        Ok(out)
    }

    /// Sends `due` once and records the attempt. A delivery to a URL this
    /// process has no secret for (its `[[webhooks]]` entry names a
    /// variable unset here, and there is no process secret) is not sent:
    /// its claim runs out and a process with the secret takes it.
    fn deliver(&self, due: Due) -> Result<Option<Sent>, JournalError> {
        let n = due.attempts + 1;
        let Some(secret) = self.settings.secret_for(&due.url) else {
            return Ok(None);
        };
        let attempt = self.attempt(&due, n, secret);
        let recorded = self.store.record_attempt(&self.owner, &attempt)?;
        Ok(Some(Sent {
            due,
            attempt,
            recorded,
        }))
    }

    /// One POST of `due` as attempt `n`.
    fn attempt(&self, due: &Due, n: i32, secret: &super::sign::Secret) -> Attempt {
        let at_ms = now_ms();
        let timestamp = at_ms / 1000;
        let signature = secret.sign(&due.id, timestamp, &due.body);
        let started = Instant::now();
        let sent = self
            .agent
            .post(&due.url)
            .header("content-type", "application/json")
            .header("webhook-id", &due.id)
            .header("webhook-timestamp", &timestamp.to_string())
            .header("webhook-signature", &signature)
            .send(due.body.as_str());
        let duration_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
        let (http_status, error, retry, after) = match sent {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let after = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| retry_after(v, now_ms()));
                // Read (bounded) so the receiver is not cut off mid-answer.
                let mut body = resp.into_body();
                let _ = std::io::copy(
                    &mut std::io::Read::take(body.as_reader(), MAX_ANSWER),
                    &mut std::io::sink(),
                );
                if (200..300).contains(&status) {
                    (Some(i32::from(status)), None, false, None)
                } else {
                    let why = if (300..400).contains(&status) {
                        format!("HTTP {status}: redirects are not followed")
                    } else {
                        format!("HTTP {status}")
                    };
                    (
                        Some(i32::from(status)),
                        Some(why),
                        retryable_status(status),
                        after,
                    )
                }
            }
            Err(e) => {
                // Refused by the address guard: another attempt would be
                // refused too.
                let refused = matches!(&e, ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::PermissionDenied);
                let why = match &e {
                    ureq::Error::Timeout(t) => format!("timed out ({t})"),
                    ureq::Error::ConnectionFailed => "connection failed".into(),
                    ureq::Error::HostNotFound => "host not found".into(),
                    other => other.to_string(),
                };
                (None, Some(why), !refused, None)
            }
        };
        let outcome = if error.is_none() {
            Outcome::Delivered
        } else if retry && n < self.settings.max_attempts {
            Outcome::Retry {
                next_ms: now_ms() + backoff_ms(&self.settings, n, after, jitter()),
            }
        } else {
            Outcome::Failed
        };
        let mut masker = self.masker.clone();
        masker.add_url(&due.url);
        Attempt {
            delivery: due.id.clone(),
            n,
            at_ms,
            duration_ms,
            http_status,
            error: error.map(|e| masker.mask(&e)),
            outcome,
        }
    }

    /// Sends due deliveries until `stop`; `log` gets a line per attempt and
    /// per store error (the next look tries again). After `stop`, one more
    /// look sends what is due then.
    pub fn run(&self, stop: &AtomicBool, log: &(dyn Fn(&str) + Sync)) {
        let mut pruned_at: Option<Instant> = None;
        loop {
            let stopping = stop.load(Ordering::SeqCst);
            if pruned_at.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
                pruned_at = Some(Instant::now());
                if let Err(e) = self.prune() {
                    log(&format!("error: webhooks: pruning ended deliveries: {e}"));
                }
            }
            match self.pump() {
                Ok(sent) => {
                    for s in &sent {
                        log(&s.line());
                    }
                    if !sent.is_empty() && !stopping {
                        continue;
                    }
                }
                Err(e) => log(&format!("error: webhooks: {e}")),
            }
            if stopping {
                return;
            }
            std::thread::sleep(LOOK_EVERY);
        }
    }

    /// Deletes ended deliveries (delivered or failed) older than the
    /// retention, with their attempts, in batches of [`PRUNE_BATCH`] and
    /// at most [`PRUNE_BATCHES`] per call (a backlog is worked off over
    /// the next looks, never in one long transaction). Returns how many.
    pub fn prune(&self) -> Result<i64, JournalError> {
        let before = now_ms().saturating_sub(self.settings.retention_ms);
        let mut total = 0;
        for _ in 0..PRUNE_BATCHES {
            let n = self.store.prune_deliveries(before, PRUNE_BATCH)?;
            total += n;
            if n < PRUNE_BATCH {
                break;
            }
        }
        Ok(total)
    }

    /// Sends the deliveries of run `run` that are due or become due within
    /// `within` (`aisc run`: its own run's events before it exits); `log`
    /// gets a line per attempt. Returns the deliveries still pending.
    pub fn flush_run(&self, run: &str, within: Duration, log: &dyn Fn(&str)) -> usize {
        let until = Instant::now() + within;
        loop {
            let pending = || {
                self.store
                    .deliveries(run)
                    .map_or(0, |d| d.iter().filter(|d| d.status == "pending").count())
            };
            match self.pump() {
                Ok(sent) => sent.iter().for_each(|s| log(&s.line())),
                Err(e) => log(&format!("error: webhooks: {e}")),
            }
            let left = pending();
            if left == 0 || Instant::now() >= until {
                return left;
            }
            std::thread::sleep(LOOK_EVERY.min(until.saturating_duration_since(Instant::now())));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_honours_retry_after() {
        let s = Settings {
            backoff_ms: 1000,
            max_backoff_ms: 10_000,
            ..Settings::default()
        };
        assert_eq!(backoff_ms(&s, 1, None, 0.0), 500);
        assert_eq!(backoff_ms(&s, 1, None, 1.0), 1000);
        assert_eq!(backoff_ms(&s, 3, None, 1.0), 4000);
        assert_eq!(backoff_ms(&s, 30, None, 1.0), 10_000, "capped");
        assert_eq!(backoff_ms(&s, 1, Some(7000), 0.0), 7000, "Retry-After wins");
        assert_eq!(
            backoff_ms(&s, 1, Some(99_000), 0.0),
            10_000,
            "and is capped"
        );
        let j = jitter();
        assert!((0.0..1.0).contains(&j));
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        assert_eq!(retry_after("3", 0), Some(3000));
        assert_eq!(
            retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1_445_412_470_000),
            Some(10_000)
        );
        assert_eq!(retry_after("soon", 0), None);
        assert!(retryable_status(503) && retryable_status(429) && retryable_status(408));
        assert!(!retryable_status(404) && !retryable_status(301));
    }
}
