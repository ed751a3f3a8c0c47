//! What the journal stores for one effect: typed, versioned records.
//!
//! Every entry's `value` column holds one [`Record`], serialised with its
//! format version (`{"v": 2, "kind": ..., ...}`). These are the journal's
//! own types: an in-memory type of the runtime (an LLM reply, a host
//! message) is converted into a record, never serialised on the side, so
//! changing it cannot silently change what old journals mean.
//!
//! Reading is strict: a value that is not a record this binary knows is
//! `journal.unreadable` (the run stops with it), never a silent miss that
//! would repeat a paid-for or side-effecting call.
//!
//! Old journals: version 1 (before records were typed) stored a bare
//! tagged list of values (`[{"v": ...}, ...]`), and a model turn as that
//! list holding the provider reply's fields. Both are still read
//! ([`Record::decode`], [`ModelTurn::from_v1`]); nothing writes them. A
//! version newer than [`RECORD_VERSION`] is refused with
//! `journal.unreadable` (resume it with the `aisc` that wrote it).

use crate::value::Val;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

/// The record format this binary writes (and the newest it reads).
pub const RECORD_VERSION: u64 = 2;

/// The code of a journal value that cannot be read.
pub const UNREADABLE: &str = "journal.unreadable";

/// One journaled outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// An op's results (tool call, memory op, message, pause answer...),
    /// tagged so lists and ordering tokens round-trip.
    Values { values: Json },
    /// One model turn: of a tool-calling exchange or a planner round.
    ModelTurn(ModelTurn),
    /// A printed line, journaled before it is shown. `n` is its place in
    /// the run's output (0-based, over every attempt); `agent` printed it.
    Printed { n: u64, agent: String, line: String },
    /// A person's decision for a side effect in doubt (`aisc resume
    /// --in-doubt`).
    Resolved { decision: Resolution },
}

/// What to do with a side effect that an earlier attempt started and
/// never recorded as completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// Call it again, with the same idempotency key.
    Retry,
    /// Treat it as done; its result is `null`.
    Skip,
    /// Treat it as failed (`journal.in_doubt_failed`, catchable).
    Fail,
}

impl Resolution {
    pub fn parse(s: &str) -> Option<Resolution> {
        match s {
            "retry" => Some(Resolution::Retry),
            "skip" => Some(Resolution::Skip),
            "fail" => Some(Resolution::Fail),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Resolution::Retry => "retry",
            Resolution::Skip => "skip",
            Resolution::Fail => "fail",
        }
    }
}

/// A model's reply as the journal keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelTurn {
    pub text: String,
    /// The reply parsed as JSON, when the request had a schema.
    #[serde(default)]
    pub json: Option<Json>,
    #[serde(default)]
    pub calls: Vec<TurnCall>,
    pub model: String,
    pub finish_reason: String,
    #[serde(default)]
    pub simulated: bool,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// A tool call a model asked for in a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// The provider reply's fields as version 1 stored them.
#[derive(Deserialize)]
struct TurnV1 {
    text: String,
    #[serde(default)]
    json: Option<Json>,
    #[serde(default)]
    tool_calls: Vec<TurnCall>,
    model: String,
    finish_reason: String,
    #[serde(default)]
    simulated: bool,
    usage: UsageV1,
}

#[derive(Deserialize)]
struct UsageV1 {
    prompt_tokens: u64,
    completion_tokens: u64,
}

impl ModelTurn {
    /// A model turn written by version 1 (the reply inside a value list).
    pub fn from_v1(values: &[Val]) -> Result<ModelTurn, String> {
        let v = values.first().ok_or("an empty value list")?;
        let t: TurnV1 = serde_json::from_value(v.to_json()).map_err(|e| e.to_string())?;
        Ok(ModelTurn {
            text: t.text,
            json: t.json,
            calls: t.tool_calls,
            model: t.model,
            finish_reason: t.finish_reason,
            simulated: t.simulated,
            prompt_tokens: t.usage.prompt_tokens,
            completion_tokens: t.usage.completion_tokens,
        })
    }
}

#[derive(Serialize)]
struct Versioned<'a> {
    v: u64,
    #[serde(flatten)]
    record: &'a Record,
}

impl Record {
    /// An op's results.
    pub fn values(vs: &[Val]) -> Record {
        Record::Values {
            values: encode_vals(vs),
        }
    }

    /// The stored text (current version).
    pub fn encode(&self) -> String {
        serde_json::to_string(&Versioned {
            v: RECORD_VERSION,
            record: self,
        })
        .unwrap_or_else(|_| "null".into())
    }

    /// Reads a stored value: the current version, or version 1's bare
    /// value list; anything else is an error message.
    pub fn decode(text: &str) -> Result<Record, String> {
        let j: Json = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        if j.is_array() {
            return Ok(Record::Values { values: j });
        }
        match j.get("v").and_then(Json::as_u64) {
            Some(RECORD_VERSION) => serde_json::from_value(j).map_err(|e| e.to_string()),
            Some(v) => Err(format!(
                "record version {v}; this aisc reads versions 1 to {RECORD_VERSION}"
            )),
            None => Err("no record version".into()),
        }
    }

    /// The results of a `Values` record.
    pub fn into_vals(self) -> Result<Vec<Val>, String> {
        match self {
            Record::Values { values } => {
                decode_vals(&values).ok_or_else(|| "a malformed value list".to_string())
            }
            other => Err(format!(
                "a {} record where values were expected",
                other.kind()
            )),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Record::Values { .. } => "values",
            Record::ModelTurn(_) => "model_turn",
            Record::Printed { .. } => "printed",
            Record::Resolved { .. } => "resolved",
        }
    }
}

/// Encodes an op's results (tagged, so lists and tokens round-trip).
pub fn encode_vals(vs: &[Val]) -> Json {
    fn enc(v: &Val) -> Json {
        match v {
            Val::Ord => json!({"ord": true}),
            Val::List(xs) => json!({"list": xs.iter().map(enc).collect::<Vec<_>>()}),
            other => json!({"v": other.to_json()}),
        }
    }
    Json::Array(vs.iter().map(enc).collect())
}

/// Decodes [`encode_vals`]; `None` on anything malformed.
pub fn decode_vals(j: &Json) -> Option<Vec<Val>> {
    fn dec(j: &Json) -> Option<Val> {
        let o = j.as_object()?;
        if o.contains_key("ord") {
            return Some(Val::Ord);
        }
        if let Some(xs) = o.get("list") {
            let xs: Option<Vec<Val>> = xs.as_array()?.iter().map(dec).collect();
            return Some(Val::List(xs?.into()));
        }
        o.get("v").cloned().map(Val::from_json)
    }
    j.as_array()?.iter().map(dec).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_with_their_version() {
        let turn = Record::ModelTurn(ModelTurn {
            text: "hi".into(),
            json: Some(json!({"a": 1})),
            calls: vec![TurnCall {
                id: "c1".into(),
                name: "search".into(),
                arguments: "{}".into(),
            }],
            model: "m".into(),
            finish_reason: "tool_calls".into(),
            simulated: false,
            prompt_tokens: 3,
            completion_tokens: 4,
        });
        for r in [
            turn,
            Record::values(&[Val::str("x"), Val::Ord]),
            Record::Printed {
                n: 7,
                agent: "A".into(),
                line: "a line".into(),
            },
            Record::Resolved {
                decision: Resolution::Skip,
            },
        ] {
            let text = r.encode();
            assert!(text.starts_with(r#"{"v":2,"kind":"#), "{text}");
            assert_eq!(Record::decode(&text), Ok(r));
        }
    }

    #[test]
    fn version_1_values_and_turns_are_read() {
        let v1 = encode_vals(&[Val::Num(3.0)]).to_string();
        assert_eq!(
            Record::decode(&v1).and_then(Record::into_vals),
            Ok(vec![Val::Num(3.0)])
        );
        let reply = json!({"text": "t", "json": null, "usage": {"prompt_tokens": 1, "completion_tokens": 2},
            "finish_reason": "stop", "model": "m", "latency": {"secs": 0, "nanos": 5},
            "simulated": true, "tool_calls": []});
        let t = ModelTurn::from_v1(&[Val::from_json(reply)]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (t.text.as_str(), t.completion_tokens, t.simulated),
            ("t", 2, true)
        );
    }

    #[test]
    fn unknown_versions_and_garbage_are_errors() {
        assert!(Record::decode(r#"{"v":3,"kind":"values","values":[]}"#)
            .is_err_and(|e| e.contains("version 3")));
        assert!(Record::decode(r#"{"kind":"values"}"#).is_err());
        assert!(Record::decode("not json").is_err());
        assert!(Record::decode(r#"{"v":2,"kind":"nope"}"#).is_err());
        assert!(Record::values(&[]).into_vals().is_ok());
        assert!(Record::Printed {
            n: 0,
            agent: String::new(),
            line: String::new()
        }
        .into_vals()
        .is_err());
    }
}
