//! The webhook outbox as the store keeps it (docs/scale-out.md,
//! "Webhooks"): a run's subscriptions (`Hook`: a URL and the events it
//! wants), and one delivery row per event, written in the same transaction
//! that records the run's terminal or paused state, so a process killed
//! between "run completed" and "webhook sent" neither loses the event nor
//! creates it twice. The delivery loop (`crate::webhook`) claims due rows
//! under a lease, POSTs them, and records each attempt here.
//!
//! Defined below both stores (and below `crate::webhook`, which signs and
//! sends), so the stores build the same rows and bodies.

use serde::Serialize;
use serde_json::{json, Value as Json};
use sha2::{Digest, Sha256};

/// The events a subscription can ask for: a run's statuses that end an
/// attempt (`completed`, `failed`) or wait for a person (`paused`).
pub const EVENTS: [&str; 3] = ["completed", "failed", "paused"];

/// The most bytes of a run's result or error text a body carries; longer
/// ones are cut, and the body says so (`truncated`).
pub const MAX_TEXT: usize = 64 * 1024;

/// A subscription: POST these events of the run to `url`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hook {
    pub url: String,
    /// Comma-separated names from [`EVENTS`].
    pub events: String,
}

impl Hook {
    /// Whether this subscription wants a run that ended with `status`.
    pub fn wants(&self, status: &str) -> bool {
        wants(&self.events, status)
    }
}

/// Whether the comma-separated `events` name `status`.
pub fn wants(events: &str, status: &str) -> bool {
    events.split(',').any(|e| e.trim() == status)
}

/// What a delivery's body says about the run (read in the transaction that
/// records its state).
#[derive(Debug, Clone, Default)]
pub struct RunFacts<'a> {
    pub run: &'a str,
    pub program: &'a str,
    pub entry: Option<&'a str>,
    /// `completed`, `failed` or `paused`.
    pub status: &'a str,
    /// The entry flow's value as JSON text.
    pub result: Option<&'a str>,
    pub error: Option<&'a str>,
    pub llm_calls: i64,
    pub tokens: i64,
    /// The attempt of a run with a retry policy (PostgreSQL).
    pub attempt: Option<i32>,
    pub ended_ms: i64,
}

/// A delivery row to insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDelivery {
    /// Stable across attempts (`webhook-id`): receivers dedupe on it.
    pub id: String,
    pub url: String,
    pub event: String,
    pub body: String,
}

/// The deliveries of a run that just reached `facts.status`: one per
/// subscription that wants it. `seq` is the number of deliveries the run
/// already has for that URL (a run can pause, resume and pause again:
/// each is its own event with its own id).
pub fn plan(hooks: &[Hook], facts: &RunFacts<'_>, seq: impl Fn(&str) -> i64) -> Vec<NewDelivery> {
    hooks
        .iter()
        .filter(|h| h.wants(facts.status))
        .map(|h| {
            let id = delivery_id(facts.run, &h.url, facts.status, seq(&h.url));
            NewDelivery {
                body: body(&id, facts),
                id,
                url: h.url.clone(),
                event: facts.status.to_string(),
            }
        })
        .collect()
}

/// `msg_` and 32 hex digits of a hash of the run, URL, event and its
/// sequence number: the same event always gets the same id.
pub fn delivery_id(run: &str, url: &str, event: &str, seq: i64) -> String {
    let mut h = Sha256::new();
    for part in [run, url, event, &seq.to_string()] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    format!("msg_{}", &super::hex(&h.finalize())[..32])
}

/// `text` cut to at most [`MAX_TEXT`] bytes at a character boundary;
/// `true` when cut.
fn bounded(text: &str) -> (&str, bool) {
    if text.len() <= MAX_TEXT {
        return (text, false);
    }
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

/// Whether `c` looks like an error code (`arith.div_by_zero`).
fn is_code(c: &str) -> bool {
    !c.is_empty()
        && c.len() <= 64
        && c.chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '.' || ch == '_')
        && c.contains(['.', '_'])
}

/// A run's error text as `{code, message}`: the code the text ends with
/// (`... [arith.div_by_zero]`, as a run's failure is recorded) or starts
/// with (`llm.timeout: ...`), else `run.failed`.
pub fn error_json(text: &str) -> Json {
    let (text, cut) = bounded(text);
    let suffix = text
        .strip_suffix(']')
        .and_then(|t| t.rsplit_once(" ["))
        .filter(|(_, c)| is_code(c))
        .map(|(m, c)| (c, m));
    let prefix = text.split_once(": ").filter(|(c, _)| is_code(c));
    let (code, message) = suffix.or(prefix).unwrap_or(("run.failed", text));
    let mut e = json!({"code": code, "message": message});
    if cut {
        e["truncated"] = Json::Bool(true);
    }
    e
}

/// The body of a delivery, in the Standard Webhooks shape: `type`,
/// `timestamp` (when the run reached its state), `data`.
pub fn body(id: &str, f: &RunFacts<'_>) -> String {
    let mut data = json!({
        "run_id": f.run,
        "program": f.program,
        "entry": f.entry,
        "status": f.status,
        "cost": {"llm_calls": f.llm_calls, "tokens": f.tokens},
    });
    if let Some(a) = f.attempt {
        data["attempt"] = json!(a);
    }
    match f.status {
        "completed" => {
            let text = f.result.unwrap_or("null");
            let (cut, was_cut) = bounded(text);
            data["result"] = if was_cut {
                data["result_truncated"] = Json::Bool(true);
                Json::String(cut.to_string())
            } else {
                serde_json::from_str(text).unwrap_or_else(|_| Json::String(text.to_string()))
            };
        }
        "paused" => {
            let waiting = f.error.unwrap_or_default();
            let message = waiting
                .strip_prefix("waiting for input: ")
                .unwrap_or(waiting);
            data["waiting_for"] = Json::String(bounded(message).0.to_string());
        }
        _ => data["error"] = error_json(f.error.unwrap_or("the run failed")),
    }
    json!({
        "id": id,
        "type": format!("run.{}", f.status),
        "timestamp": ais_stdlib::time::rfc3339(u64::try_from(f.ended_ms).unwrap_or(0)),
        "data": data,
    })
    .to_string()
}

/// A due delivery a process claimed (under a lease) to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    pub id: String,
    pub run: String,
    pub url: String,
    pub event: String,
    pub body: String,
    /// Attempts made before this one.
    pub attempts: i32,
}

/// How an attempt ended, and what becomes of the delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The receiver answered 2xx.
    Delivered,
    /// Tried again no sooner than `next_ms` (epoch milliseconds).
    Retry { next_ms: i64 },
    /// No more attempts (bounded attempts used up, or a refusal that
    /// another attempt would not change).
    Failed,
}

impl Outcome {
    pub fn status(&self) -> &'static str {
        match self {
            Outcome::Delivered => "delivered",
            Outcome::Retry { .. } => "pending",
            Outcome::Failed => "failed",
        }
    }
}

/// One attempt to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub delivery: String,
    /// 1-based.
    pub n: i32,
    pub at_ms: i64,
    pub duration_ms: i64,
    /// The receiver's HTTP status, when it answered.
    pub http_status: Option<i32>,
    /// Why it did not count as delivered (secrets masked).
    pub error: Option<String>,
    pub outcome: Outcome,
}

/// One attempt as stored, for `aisc runs show`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptInfo {
    pub n: i32,
    pub at_ms: i64,
    pub duration_ms: i64,
    pub http_status: Option<i32>,
    pub error: Option<String>,
}

/// A delivery with its attempts, for `aisc runs show`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeliveryInfo {
    pub id: String,
    pub url: String,
    pub event: String,
    /// `pending`, `delivered` or `failed`.
    pub status: String,
    pub created_ms: i64,
    pub next_ms: i64,
    pub ended_ms: Option<i64>,
    pub attempts: Vec<AttemptInfo>,
}

/// Deliveries by status, for `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Counts {
    pub pending: i64,
    pub delivered: i64,
    pub failed: i64,
    /// Attempts made in all.
    pub attempts: i64,
}

impl Counts {
    /// Adds `n` rows of `status`.
    pub fn add(&mut self, status: &str, n: i64) {
        match status {
            "pending" => self.pending += n,
            "delivered" => self.delivered += n,
            "failed" => self.failed += n,
            _ => {}
        }
    }

    /// The Prometheus text of these counts.
    pub fn prometheus(&self) -> String {
        let mut out = String::from(
            "# HELP ais_webhook_deliveries Webhook deliveries in the store, by status.\n\
             # TYPE ais_webhook_deliveries gauge\n",
        );
        for (s, n) in [
            ("pending", self.pending),
            ("delivered", self.delivered),
            ("failed", self.failed),
        ] {
            out.push_str(&format!("ais_webhook_deliveries{{status=\"{s}\"}} {n}\n"));
        }
        out.push_str(&format!(
            "# HELP ais_webhook_attempts_total Webhook delivery attempts recorded in the store.\n\
             # TYPE ais_webhook_attempts_total counter\nais_webhook_attempts_total {}\n",
            self.attempts
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(status: &'static str) -> RunFacts<'static> {
        RunFacts {
            run: "r1",
            program: "p.ais",
            status,
            result: Some("{\"a\":1}"),
            error: Some("llm.timeout: the backend did not answer"),
            llm_calls: 2,
            tokens: 30,
            ended_ms: 1_700_000_000_000,
            ..RunFacts::default()
        }
    }

    #[test]
    fn one_delivery_per_wanting_hook_with_stable_ids() {
        let hooks = [
            Hook {
                url: "https://a.example/h".into(),
                events: "completed,failed".into(),
            },
            Hook {
                url: "https://b.example/h".into(),
                events: "paused".into(),
            },
        ];
        let d = plan(&hooks, &facts("completed"), |_| 0);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].url, "https://a.example/h");
        assert_eq!(
            d,
            plan(&hooks, &facts("completed"), |_| 0),
            "same event, same id"
        );
        assert_ne!(d[0].id, plan(&hooks, &facts("completed"), |_| 1)[0].id);
        let body: Json = serde_json::from_str(&d[0].body).expect("json body");
        assert_eq!(body["type"], "run.completed");
        assert_eq!(body["id"], Json::String(d[0].id.clone()));
        assert_eq!(body["data"]["result"]["a"], 1);
        assert_eq!(body["data"]["cost"]["tokens"], 30);
        assert_eq!(plan(&hooks, &facts("paused"), |_| 0).len(), 1);
    }

    #[test]
    fn failures_carry_a_code_and_long_texts_are_cut() {
        let d = body("msg_x", &facts("failed"));
        let v: Json = serde_json::from_str(&d).expect("json");
        assert_eq!(v["data"]["error"]["code"], "llm.timeout");
        assert_eq!(v["data"]["error"]["message"], "the backend did not answer");
        assert_eq!(error_json("plain words: here")["code"], "run.failed");
        let e = error_json("`div` in @T.main failed: division by zero [arith.div_by_zero]");
        assert_eq!(e["code"], "arith.div_by_zero");
        assert_eq!(e["message"], "`div` in @T.main failed: division by zero");
        let long = "é".repeat(MAX_TEXT);
        let mut f = facts("completed");
        f.result = Some(&long);
        let v: Json = serde_json::from_str(&body("m", &f)).expect("json");
        assert_eq!(v["data"]["result_truncated"], true);
        assert!(v["data"]["result"].as_str().map_or(0, str::len) <= MAX_TEXT);
    }
}
