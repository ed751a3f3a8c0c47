//! Forking a journaled run: a new run of the same program and arguments
//! whose journal starts as a copy of the original's, with one op's value
//! replaced. Resumed, it replays every effect whose inputs and place are
//! unchanged and executes the others: the ops downstream of the edited one
//! in the dataflow (their inputs hash differently, so their entries miss),
//! and the ops of regions a changed decision now enters (their keys were
//! never journaled). Pure ops are recomputed, as in any resume.
//!
//! Built on the journal's public pieces only: the store's entries, a new
//! run row ([`Journal::begin_in`]), and [`Store::write`].

use super::{load_run_in, Journal, JournalError, Record};
use crate::store::{Entry, Store};
use crate::value::Val;
use serde_json::Value as Json;
use std::sync::Arc;

/// Which journal entry of the original run a fork edits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ForkAt {
    /// The entry's step number (from 1, as `aisc fork RUN` lists them:
    /// the entries in the order they were written, by attempt).
    Step(usize),
    /// The entry whose key starts with this (at least 8 hex digits).
    Key(String),
}

impl ForkAt {
    /// `12` is a step, anything else a key prefix.
    pub fn parse(s: &str) -> ForkAt {
        match s.trim().parse::<usize>() {
            Ok(n) => ForkAt::Step(n),
            Err(_) => ForkAt::Key(s.trim().to_string()),
        }
    }
}

/// A journal entry as listed for choosing a fork point.
#[derive(Clone, Debug, PartialEq)]
pub struct ForkStep {
    /// From 1.
    pub step: usize,
    pub key: String,
    pub op: String,
    pub kind: String,
    pub tokens: i64,
    /// The entry's first value, when it has one (an op's result).
    pub value: Option<Json>,
}

/// What [`fork_in`] made.
#[derive(Clone, Debug, PartialEq)]
pub struct Forked {
    /// The new run's id (`{original}.f{n}`).
    pub id: String,
    /// The entry edited (or, without a value, the fork point).
    pub at: ForkStep,
    /// Entries copied (the edited one included).
    pub copied: usize,
    /// Entries left out: printed lines (a fork prints its own output) and
    /// the `pause` the original waits at.
    pub left_out: usize,
    /// LLM calls and tokens the original journaled (what a run from
    /// scratch would spend again).
    pub original_llm: (i64, i64),
}

fn error(code: &'static str, message: String) -> JournalError {
    JournalError { code, message }
}

/// The first value of an entry's record, for listing and editing.
fn first_value(e: &Entry) -> Option<Json> {
    let rec = Record::decode(e.value.as_deref()?).ok()?;
    match rec {
        Record::Values { values } => {
            let vals = super::decode_vals(&values)?;
            vals.iter()
                .find(|v| !matches!(v, Val::Ord))
                .map(Val::to_json)
        }
        _ => None,
    }
}

/// The entries of `run` in a stable order: as written (the write counter
/// of each attempt), then by key.
fn ordered(store: &dyn Store, run: &str) -> Result<Vec<Entry>, JournalError> {
    let mut entries = store.entries(run)?;
    entries.sort_by(|a, b| a.seq.cmp(&b.seq).then_with(|| a.key.cmp(&b.key)));
    Ok(entries)
}

fn step_of(i: usize, e: &Entry) -> ForkStep {
    ForkStep {
        step: i + 1,
        key: e.key.clone(),
        op: e.op.clone(),
        kind: e.kind.clone(),
        tokens: e.tokens,
        value: first_value(e),
    }
}

/// The run's journal entries in order, for choosing where to fork.
pub fn fork_steps(store: &dyn Store, run: &str) -> Result<Vec<ForkStep>, JournalError> {
    Ok(ordered(store, run)?
        .iter()
        .enumerate()
        .map(|(i, e)| step_of(i, e))
        .collect())
}

/// `entry`'s record with its first value replaced by `value`.
fn edited(step: usize, e: &Entry, value: &Json) -> Result<String, JournalError> {
    let refuse = |why: &str| {
        error(
            "fork.not_editable",
            format!("step {step} (`{}`) {why}", e.op),
        )
    };
    if e.kind != "done" {
        return Err(refuse(&format!(
            "is `{}`, not a completed op: only a completed op's value can be set",
            e.kind
        )));
    }
    let rec = Record::decode(e.value.as_deref().unwrap_or(""))
        .map_err(|why| refuse(&format!("cannot be read ({why})")))?;
    let Record::Values { values } = rec else {
        return Err(refuse(&format!(
            "holds a {} record (a model turn of a tool-calling exchange, a printed line, a decision), not an op's value: fork at the op that uses it",
            rec.kind()
        )));
    };
    let mut vals = super::decode_vals(&values).ok_or_else(|| refuse("holds malformed values"))?;
    let slot = vals
        .iter()
        .position(|v| !matches!(v, Val::Ord))
        .ok_or_else(|| refuse("has no value, only ordering"))?;
    vals[slot] = Val::from_json(value.clone());
    Ok(Record::values(&vals).encode())
}

/// The first id `{run}.f{n}` not taken.
fn fork_id(store: &dyn Store, run: &str) -> Result<String, JournalError> {
    for n in 1..10_000 {
        let id = format!("{run}.f{n}");
        if store.run_row(&id)?.is_none() {
            return Ok(id);
        }
    }
    Err(error(
        "fork.too_many",
        format!("run `{run}` has 9999 forks already"),
    ))
}

/// Forks run `run` of `store` at `at`, its value replaced by `value` (none:
/// kept, so the fork reproduces the original). The new run is journaled as
/// failed ("forked, not run yet"): [`Journal::resume_in`] runs it.
pub fn fork_in(
    store: &Arc<dyn Store>,
    run: &str,
    at: &ForkAt,
    value: Option<&Json>,
) -> Result<Forked, JournalError> {
    let stored = load_run_in(store.as_ref(), run)?;
    let mut entries = ordered(store.as_ref(), run)?;
    let target = match at {
        ForkAt::Step(n) => n.checked_sub(1).filter(|&i| i < entries.len()),
        ForkAt::Key(k) if k.len() >= 8 => {
            let hits: Vec<usize> = (0..entries.len())
                .filter(|&i| entries[i].key.starts_with(k.as_str()))
                .collect();
            if hits.len() > 1 {
                return Err(error(
                    "fork.ambiguous",
                    format!(
                        "{} journal entries of run `{run}` have keys starting with `{k}`",
                        hits.len()
                    ),
                ));
            }
            hits.first().copied()
        }
        ForkAt::Key(k) => {
            return Err(error(
                "fork.bad_op",
                format!("`{k}` is neither a step number nor a key prefix of at least 8 hex digits"),
            ))
        }
    };
    let Some(target) = target else {
        return Err(error(
            "fork.no_op",
            match at {
                ForkAt::Step(n) => format!(
                    "run `{run}` has no step {n} ({} journal entries)",
                    entries.len()
                ),
                ForkAt::Key(k) => {
                    format!("run `{run}` has no journal entry with a key starting `{k}`")
                }
            },
        ));
    };
    if let Some(v) = value {
        let text = edited(target + 1, &entries[target], v)?;
        entries[target].value = Some(text);
        // The value is a person's: its label is recomputed, not copied.
        entries[target].labels = None;
    }
    let at_step = step_of(target, &entries[target]);
    let original_llm = store.usage(run, &super::llm_op_names())?;
    let total = entries.len();
    // Printed lines are left out (a fork prints its own output), and so is
    // a `pause` the original waits at (the fork asks again when it gets
    // there, perhaps with another question).
    let left_out = |e: &Entry| {
        e.kind == "waiting"
            || e.value
                .as_deref()
                .and_then(|v| Record::decode(v).ok())
                .is_some_and(|r| matches!(r, Record::Printed { .. }))
    };
    entries.retain(|e| !left_out(e));
    let id = fork_id(store.as_ref(), run)?;
    let journal = Journal::begin_in(
        store.clone(),
        &id,
        &stored.info.program,
        &stored.artifact,
        stored.info.entry.as_deref(),
        &stored.args,
    )?;
    store.write(&id, journal.fence(), &entries)?;
    journal.finish(Err(&format!(
        "forked from {run} at step {}, not run yet",
        at_step.step
    )))?;
    Ok(Forked {
        id,
        at: at_step,
        copied: entries.len(),
        left_out: total - entries.len(),
        original_llm,
    })
}

/// What a fork's run spent against what it took from the original.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForkCost {
    /// LLM calls (and their tokens) the fork made itself.
    pub executed: (u64, u64),
    /// LLM calls (and their tokens) it replayed from the original.
    pub replayed: (u64, u64),
}

/// Compares the LLM entries of `fork` with those of `original`: an entry
/// with the same key, inputs and value was replayed, one with the same key
/// and inputs but another value is the edited one (not counted), any other
/// was made by the fork.
pub fn fork_cost(store: &dyn Store, original: &str, fork: &str) -> Result<ForkCost, JournalError> {
    let llm = super::llm_op_names();
    let before: std::collections::HashMap<String, Entry> = store
        .entries(original)?
        .into_iter()
        .map(|e| (e.key.clone(), e))
        .collect();
    let mut cost = ForkCost::default();
    for e in store.entries(fork)? {
        if e.kind != "done" || !llm.contains(&e.op.as_str()) {
            continue;
        }
        let tokens = u64::try_from(e.tokens).unwrap_or(0);
        let (same, edited) = match before.get(&e.key) {
            Some(o) if o.hash == e.hash => (o.value == e.value, o.value != e.value),
            _ => (false, false),
        };
        // Same inputs, another value: the one set by hand (a call with the
        // same inputs is replayed, never made again).
        if edited {
            continue;
        }
        let slot = if same {
            &mut cost.replayed
        } else {
            &mut cost.executed
        };
        slot.0 += 1;
        slot.1 += tokens;
    }
    Ok(cost)
}
