//! Memory semantics of the AAM: `qmem`/`umem` on the three tiers, the
//! memory tools (`memory_search`, `store_fact`) and work queues
//! (`enqueue`, `claim`), over the host's agent store
//! ([`crate::store::AgentStore`]); and where the labels of what tiers that
//! outlive a run hold are kept (docs/security.md, "Labels across runs").

use super::ltm::text_of;
use super::{episodic, AamHost, LTM_NS, TRACE_QUERY};
use crate::host::{flow, HostError};
use crate::store::MemQuery;
use ais_ir::Tier;
use serde_json::{json, Value as Json};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Where the sources written into tiers that outlive a run are kept (as
/// long-term memory entries `TIER/SOURCE` of a name no agent can have), for
/// later runs' information-flow labels (`Host::stored_labels`).
const LABELS_OWNER: &str = "@ifc";
const LABELS_NS: &str = "labels";

/// The labels a value written into `tier` now is stored with: the sources
/// of what it was computed from, and the tier's own source as the mark
/// that they were recorded. Outside a labelled call (labels off) none:
/// such a value reads as one of unknown provenance.
fn written_labels(tier: &str) -> Vec<String> {
    if !flow::active() {
        return Vec::new();
    }
    let mut labels = flow::writing();
    let own = format!("@memory.{tier}");
    if !labels.contains(&own) {
        labels.push(own);
    }
    labels
}

/// The labels an episodic note was stored with (none recorded: empty).
fn note_labels(record: &Json) -> Vec<String> {
    record
        .get("labels")
        .and_then(Json::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Json::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The key `umem(value)` stores under when no key is given: `#` and the
/// first 16 hex digits of the SHA-256 of the value's JSON text.
pub fn content_key(value: &Json) -> String {
    use sha2::{Digest, Sha256};
    let text = serde_json::to_string(value).unwrap_or_default();
    let d = Sha256::digest(text.as_bytes());
    let hex: String = d.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("#{hex}")
}

/// The hash a fact's key is made of: the journal's input hash of the text
/// (SHA-256 of its tagged JSON, 128 bits in hex), computed here so keys of
/// facts stored before stay the same.
fn content_hash(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let tagged = json!([{ "v": text }]).to_string();
    let h = Sha256::digest(tagged.as_bytes());
    h[..16].iter().map(|b| format!("{b:02x}")).collect()
}

impl AamHost {
    pub(super) fn query(&self, agent: &str, tier: Tier, q: &str) -> Result<Json, HostError> {
        let list = |xs: Vec<Json>| Ok(Json::Array(xs));
        let query = MemQuery::parse(q);
        match tier {
            Tier::Stm => {
                if let Some(k) = query.exact_key() {
                    if let Some(v) = self.stm_get(agent, k)? {
                        return Ok(v);
                    }
                }
                let all = self.stm_entries(agent)?;
                list(
                    all.into_iter()
                        .filter(|(k, v, _)| query.matches(k, v))
                        .map(|(_, v, _)| v)
                        .collect(),
                )
            }
            Tier::Ltm => {
                let rows = match query {
                    MemQuery::Everything => self.ltm.all(agent, LTM_NS)?,
                    MemQuery::Prefix(p) => self.ltm.prefix(agent, LTM_NS, p)?,
                    MemQuery::Words { exact, .. } => {
                        if let Some(e) = self.ltm.get(agent, LTM_NS, exact)? {
                            self.read_labels("ltm", &e.labels)?;
                            return Ok(e.value);
                        }
                        self.ltm.search_all(agent, LTM_NS, q)?
                    }
                };
                for e in &rows {
                    self.read_labels("ltm", &e.labels)?;
                }
                list(rows.into_iter().map(|e| e.value).collect())
            }
            Tier::Episodic => {
                if q == TRACE_QUERY {
                    // This run's transitions of the agent (for reflection).
                    return list(self.episodic.select(&episodic::Filter {
                        agent: Some(agent),
                        run: Some(&self.run_id),
                        notes: Some(false),
                    })?);
                }
                let recs = self.episodic.select(&episodic::Filter {
                    agent: Some(agent),
                    notes: Some(true),
                    ..episodic::Filter::default()
                })?;
                let key_of = |r: &Json| -> String {
                    match r.get("op").and_then(Json::as_str) {
                        Some("note") => r
                            .get("key")
                            .and_then(Json::as_str)
                            .unwrap_or("")
                            .to_string(),
                        Some(op) => op.to_string(),
                        None => String::new(),
                    }
                };
                let value_of = |r: &Json| -> Json {
                    if r.get("op").and_then(Json::as_str) == Some("note") {
                        r.get("value").cloned().unwrap_or(Json::Null)
                    } else {
                        r.clone()
                    }
                };
                if let Some(k) = query.exact_key() {
                    if let Some(r) = recs.iter().rev().find(|r| key_of(r) == k) {
                        self.read_labels("episodic", &note_labels(r))?;
                        return Ok(value_of(r));
                    }
                }
                let hits: Vec<&Json> = recs
                    .iter()
                    .filter(|r| query.matches(&key_of(r), &value_of(r)))
                    .collect();
                for r in &hits {
                    self.read_labels("episodic", &note_labels(r))?;
                }
                list(hits.into_iter().map(value_of).collect())
            }
        }
    }

    pub(super) fn update(
        &self,
        agent: &str,
        tier: Tier,
        value: &Json,
        key: Option<&Json>,
    ) -> Result<Json, HostError> {
        let key = key.map(text_of);
        match tier {
            Tier::Stm => {
                let k = key.unwrap_or_else(|| content_key(value));
                self.stm_put(agent, &k, value)?;
                Ok(json!({"key": k}))
            }
            Tier::Ltm => {
                let k = key.unwrap_or_else(|| content_key(value));
                // The value keeps the labels of what it was computed from,
                // so a later read (any run, any process) carries exactly
                // those (docs/security.md, "Labels across runs").
                self.ltm
                    .put(agent, LTM_NS, &k, value, None, &written_labels("ltm"))?;
                Ok(json!({"key": k}))
            }
            Tier::Episodic => {
                let ms = ais_stdlib::time::unix_ms();
                self.episodic.append(json!({
                    "run": self.run_id,
                    "seq": self.seq.fetch_add(1, Ordering::Relaxed) + 1,
                    "time": ais_stdlib::time::rfc3339(ms),
                    "agent": agent,
                    "op": "note",
                    "key": key,
                    "value": value,
                    "labels": written_labels("episodic"),
                }))?;
                Ok(json!({"key": key}))
            }
        }
    }

    /// `qmem`, logged.
    pub(super) fn mem_query_logged(
        &self,
        agent: &str,
        tier: Tier,
        query: &Json,
    ) -> Result<Json, HostError> {
        let t0 = Instant::now();
        let q = text_of(query);
        let r = self.query(agent, tier, &q);
        self.log(
            agent,
            "qmem",
            json!({"tier": tier.name(), "query": q}),
            r.as_ref(),
            t0,
        );
        r
    }

    /// `umem`, logged (an episodic note is its own record).
    pub(super) fn mem_update_logged(
        &self,
        agent: &str,
        tier: Tier,
        value: &Json,
        key: Option<&Json>,
    ) -> Result<(), HostError> {
        let t0 = Instant::now();
        let r = self.update(agent, tier, value, key);
        if tier != Tier::Episodic || r.is_err() {
            let inputs = json!({"tier": tier.name(), "key": key, "value": value});
            self.log(agent, "umem", inputs, r.as_ref(), t0);
        }
        r.map(|_| ())
    }

    /// The `memory_search` tool.
    pub(super) fn memory_search(&self, agent: &str, args: &Json) -> Result<Json, HostError> {
        let q = args.get("query").and_then(Json::as_str).unwrap_or("");
        let limit = args
            .get("limit")
            .and_then(Json::as_u64)
            .map_or(10, |l| usize::try_from(l).unwrap_or(usize::MAX));
        // Only entries carrying every tag asked for (facts stored
        // with `store_fact`); the search then keeps `limit` of them.
        let tags: Vec<&str> = args
            .get("tags")
            .and_then(Json::as_array)
            .map(|a| a.iter().filter_map(Json::as_str).collect())
            .unwrap_or_default();
        let has_tags = |v: &Json| {
            let of = v.get("tags").and_then(Json::as_array);
            tags.iter()
                .all(|t| of.is_some_and(|a| a.iter().any(|x| x == t)))
        };
        let wide = if tags.is_empty() { limit } else { usize::MAX };
        let hits = if q.trim().is_empty() && !tags.is_empty() {
            // Tags alone: every tagged entry, newest first.
            let mut all = self.ltm.all(agent, LTM_NS)?;
            all.reverse();
            all.into_iter().map(|e| (e, 0.0)).collect()
        } else {
            self.ltm.search_ranked(Some(agent), LTM_NS, q, wide)?
        };
        // The result carries the labels of every entry it returns.
        let hits: Vec<_> = hits
            .into_iter()
            .filter(|(e, _)| has_tags(&e.value))
            .take(limit)
            .collect();
        for (e, _) in &hits {
            self.read_labels("ltm", &e.labels)?;
        }
        Ok(Json::Array(
            hits.into_iter()
                .map(|(e, s)| json!({"key": e.key, "value": e.value, "score": s}))
                .collect(),
        ))
    }

    /// The `store_fact` tool.
    pub(super) fn store_fact(&self, agent: &str, args: &Json) -> Result<Json, HostError> {
        let text = args.get("text").and_then(Json::as_str).unwrap_or("");
        let tags = args.get("tags").cloned().unwrap_or_else(|| json!([]));
        let source = args.get("source").cloned().unwrap_or(Json::Null);
        // The same fact stored twice is one entry (its key is its
        // content), so a resumed or repeated run does not duplicate it.
        let key = format!("fact:{}", &content_hash(text)[..16]);
        let value = json!({"text": text, "tags": tags, "source": source});
        // The fact keeps the labels of the text it was given.
        self.ltm
            .put(agent, LTM_NS, &key, &value, None, &written_labels("ltm"))?;
        Ok(json!({"key": key}))
    }

    /// The `enqueue` and `claim` tools.
    pub(super) fn queue_op(
        &self,
        agent: &str,
        op: &str,
        args: &Json,
        cancel: &crate::llm::CancelToken,
    ) -> Result<Json, HostError> {
        let queue = args.get("queue").and_then(Json::as_str).unwrap_or("");
        let by = format!("{}/{agent}", self.run_id);
        match op {
            "enqueue" => self.ltm.enqueue(
                queue,
                args.get("job").unwrap_or(&Json::Null),
                &by,
                &flow::writing(),
            ),
            _ => {
                // `lease_ms`, `max_wait_ms`: `super::claim`.
                let lease = super::claim::millis(args, "lease_ms")?;
                let wait = super::claim::millis(args, "max_wait_ms")?;
                let (mut got, labels) =
                    super::claim::waiting(wait, cancel, || self.ltm.claim(queue, &by, lease))?;
                flow::read(&labels);
                // The reference's names for the same facts.
                if let Some(o) = got.as_object_mut() {
                    let id = o.get("id").cloned().unwrap_or(Json::Null);
                    let job = o.get("job").cloned().unwrap_or(Json::Null);
                    o.insert("claim_token".into(), json!(format!("{queue}:{id}:{by}")));
                    o.insert("task_id".into(), json!(id.to_string()));
                    o.insert("task_data".into(), job);
                }
                Ok(got)
            }
        }
    }

    /// Does `tier` outlive the run here, so its sources must be kept for
    /// later runs' labels? Long-term memory and the episodic log always;
    /// beliefs only where the store keeps them beyond the run.
    fn keeps_labels(&self, tier: &str) -> bool {
        match tier {
            "ltm" | "episodic" => true,
            "belief" => self.ltm.agent_state_outlives_run(),
            _ => false,
        }
    }

    /// Reports to the labelled call reading a value of `tier` the labels
    /// it was stored with; a value stored without them (before labels were
    /// kept per value, or with labels off) carries everything the tier was
    /// ever recorded to hold, as every read did before.
    fn read_labels(&self, tier: &str, labels: &[String]) -> Result<(), HostError> {
        if !flow::active() {
            return Ok(());
        }
        if labels.is_empty() {
            flow::read(&self.labels_kept(tier)?);
        } else {
            flow::read(labels);
        }
        Ok(())
    }

    /// The sources recorded for everything ever written into `tier`: the
    /// provenance of values stored without labels of their own.
    pub(super) fn labels_kept(&self, tier: &str) -> Result<Vec<String>, HostError> {
        if !self.keeps_labels(tier) {
            return Ok(Vec::new());
        }
        let prefix = format!("{tier}/");
        Ok(self
            .ltm
            .prefix(LABELS_OWNER, LABELS_NS, &prefix)?
            .into_iter()
            .filter_map(|e| e.key.strip_prefix(&prefix).map(str::to_string))
            .collect())
    }

    /// `Host::store_labels`.
    pub(super) fn keep_labels(&self, tier: &str, names: &[String]) -> Result<(), HostError> {
        if !self.keeps_labels(tier) {
            return Ok(());
        }
        for n in names {
            self.ltm.put(
                LABELS_OWNER,
                LABELS_NS,
                &format!("{tier}/{n}"),
                &Json::Bool(true),
                None,
                &[],
            )?;
        }
        Ok(())
    }
}
