//! Provenance of values (`[policy.sinks.NAME.args.ARG]`, `docs/security.md`):
//! an untrusted value may still reach a guarded argument when the run's
//! input (`@args`), a trusted tool's result or a list in the config holds
//! that very value. The attacker can then only pick among values the user
//! already trusts (a contact, one of the user's accounts, an amount the
//! user wrote), which is what the rule's author accepts for that argument.
//!
//! A pool keeps the words and numbers of the values a source produced in
//! this run: every string field whole, every whitespace-separated word of
//! it (an address inside a sentence), its run of words (a name of several
//! words inside a sentence: `book 'Le Marais Boutique' for me`) and every
//! number, normalised. An
//! argument's value is vouched for when each of its string and number
//! leaves is in one of the pools its rule names, or in its `values` list.

use crate::sync::lock;
use ais_ir::ifc::ArgRule;
use serde_json::Value as Json;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use words::{normalise, Pool, MAX_WHOLE};

mod words;
pub(super) use words::words_run_by;

/// Whole fields kept per listing, at most, and their characters (past
/// either, fewer values are vouched for, never more).
const MAX_ITEMS: usize = 100_000;
const MAX_ITEM_CHARS: usize = 1_000_000;

/// The whole fields of a listing's or a lookup's results: the items a
/// value may be chosen among (`choice`, `lookup`). Never a word of a
/// sentence: a reply that mentions its key in prose vouches for nothing.
#[derive(Default)]
struct Items {
    strings: HashSet<String>,
    numbers: Vec<f64>,
    chars: usize,
}

impl Items {
    /// Keeps the string and number leaves of `v`; with `field`, only those
    /// under an object key named `field` (at any depth).
    fn add(&mut self, v: &Json, field: Option<&str>, depth: u32) {
        if depth > 32 || self.strings.len() + self.numbers.len() >= MAX_ITEMS {
            return;
        }
        match v {
            Json::String(s) => {
                if let Some(inner) = json_in_text(s) {
                    return self.add(&inner, field, depth + 1);
                }
                if field.is_none() && s.len() <= MAX_WHOLE && self.chars + s.len() <= MAX_ITEM_CHARS
                {
                    self.chars += s.len();
                    self.strings.insert(normalise(s));
                }
            }
            Json::Number(n) if field.is_none() => {
                if let Some(f) = n.as_f64() {
                    self.numbers.push(f);
                }
            }
            Json::Array(xs) => xs.iter().for_each(|x| self.add(x, field, depth + 1)),
            Json::Object(m) => {
                for (k, x) in m {
                    // Under the named field every leaf counts.
                    let under = if field == Some(k.as_str()) {
                        None
                    } else {
                        field
                    };
                    self.add(x, under, depth + 1);
                }
            }
            _ => {}
        }
    }

    fn has(&self, leaf: &Leaf) -> bool {
        match leaf {
            Leaf::Word(w) => self.strings.contains(w),
            Leaf::Number(f) => self
                .numbers
                .iter()
                .any(|x| (x - f).abs() <= 1e-9 * f.abs().max(1.0)),
        }
    }
}

/// The values of the sources some argument rule names, in one run.
pub struct ValuePools {
    /// `from`: trusted sources whose values vouch when computed from
    /// trusted data.
    wanted: Vec<String>,
    /// `lookup`: trusted tools whose whole fields vouch however keyed.
    lookups: Vec<String>,
    /// `choice`: `TOOL` or `TOOL:FIELD`, any trust.
    choices: Vec<String>,
    /// `selected`: `TOOL:FIELD`, any trust, kept from calls the request
    /// keyed.
    selected: Vec<String>,
    pools: Mutex<BTreeMap<String, Pool>>,
    /// Keyed by the `selected` entry; apart from `pools`, so that a value
    /// read from them never makes a call keyed by trusted data (`held`).
    selections: Mutex<BTreeMap<String, Pool>>,
    /// Keyed by the `lookup` tool or the `choice` entry.
    items: Mutex<BTreeMap<String, Items>>,
    /// A side-effecting call has run: from then on a ranked choice
    /// (`?max=`) keeps nothing, since the run itself may have changed the
    /// ranking (appended to a file to make it the largest).
    wrote: AtomicBool,
}

/// The tool a `choice` entry names and the field it keeps, if any.
fn choice_parts(spec: &str) -> (&str, Option<&str>) {
    match spec.split_once(':') {
        Some((tool, field)) => (tool, Some(field)),
        None => (spec, None),
    }
}

impl ValuePools {
    pub fn new(wanted: Vec<String>) -> ValuePools {
        ValuePools::with_items(wanted, Vec::new(), Vec::new())
    }

    /// Pools for `from` sources, `lookup` tools and `choice` listings.
    pub fn with_items(
        wanted: Vec<String>,
        lookups: Vec<String>,
        choices: Vec<String>,
    ) -> ValuePools {
        ValuePools {
            wanted,
            lookups,
            choices,
            selected: Vec::new(),
            pools: Mutex::new(BTreeMap::new()),
            items: Mutex::new(BTreeMap::new()),
            selections: Mutex::new(BTreeMap::new()),
            wrote: AtomicBool::new(false),
        }
    }

    /// Also keeps the fields `selected` entries (`TOOL:FIELD`) name.
    pub fn selecting(mut self, selected: Vec<String>) -> ValuePools {
        self.selected = selected;
        self
    }

    /// Does some rule compare values against `source`? (One comparison
    /// per completed tool call when none does.)
    #[inline]
    pub fn wants(&self, source: &str) -> bool {
        self.wanted.iter().any(|s| s == source)
            || self.lookups.iter().any(|s| s == source)
            || self.choices.iter().any(|c| choice_parts(c).0 == source)
            || self.selected.iter().any(|c| choice_parts(c).0 == source)
    }

    /// A side-effecting call ran: later listings rank nothing (`?max=`).
    pub fn note_effect(&self) {
        self.wrote.store(true, Ordering::Release);
    }

    /// Keeps a value `source` computed from trusted data.
    pub fn note(&self, source: &str, v: &Json) {
        self.note_read(source, v, true);
    }

    /// Keeps a value `source` produced: for `from` only when `vouches` (it
    /// was computed from trusted data); its whole fields for `lookup` and
    /// `choice` in any case (a ranked choice, `?max=`, only when
    /// `vouches`).
    pub fn note_read(&self, source: &str, v: &Json, vouches: bool) {
        self.note_keyed(source, None, v, vouches);
    }

    /// [`ValuePools::note_read`] of a call whose arguments were `key`
    /// (a record condition `?KEY=@key` compares against them).
    pub fn note_keyed(&self, source: &str, key: Option<&Json>, v: &Json, vouches: bool) {
        if vouches && self.wanted.iter().any(|s| s == source) {
            lock(&self.pools)
                .entry(source.to_string())
                .or_default()
                .add(v, 0);
        }
        if vouches {
            for spec in &self.selected {
                let (tool, field) = choice_parts(spec);
                if tool == source {
                    let mut sel = lock(&self.selections);
                    let pool = sel.entry(spec.clone()).or_default();
                    for x in selected_fields(field, key, v) {
                        if let Json::Object(entries) = &x {
                            entries.keys().for_each(|k| pool.word(k));
                        }
                        pool.add(&x, 0);
                    }
                }
            }
        }
        let mut items = None;
        if self.lookups.iter().any(|s| s == source) {
            items
                .get_or_insert_with(|| lock(&self.items))
                .entry(source.to_string())
                .or_default()
                .add(v, None, 0);
        }
        for spec in &self.choices {
            let (tool, field) = choice_parts(spec);
            if tool != source {
                continue;
            }
            if let Some((field, key)) = field.and_then(ranked) {
                // Ranked over the listing the request asked for: a call
                // keyed by injected data (a search matching only the
                // target) would rank the attacker's pick first.
                if !vouches || self.wrote.load(Ordering::Acquire) {
                    continue;
                }
                let entry = items
                    .get_or_insert_with(|| lock(&self.items))
                    .entry(format!("choice {spec}"))
                    .or_default();
                for x in top_ranked(v, field, key) {
                    entry.add(&x, None, 0);
                }
            } else {
                items
                    .get_or_insert_with(|| lock(&self.items))
                    .entry(format!("choice {spec}"))
                    .or_default()
                    .add(v, field, 0);
            }
        }
    }

    /// Does every string and number of `v` come from trusted data (a
    /// `from` source's values this run)? A trusted lookup keyed by such
    /// values was computed from trusted data.
    pub fn held(&self, v: &Json) -> bool {
        let pools = lock(&self.pools);
        let mut leaves = Vec::new();
        leaves_of(v, &mut leaves, 0);
        leaves.iter().all(|leaf| match leaf {
            Leaf::Word(w) => w.is_empty() || pools.values().any(|p| p.has_word(w)),
            Leaf::Number(f) => pools.values().any(|p| p.has_number(*f)),
        })
    }

    /// Is `v` vouched for by `rule`: every string and number in it is in
    /// the rule's `values` or in a pool of a trusted source its `from`
    /// names? `trusted` is the policy's judgement of a source.
    pub fn vouches(&self, rule: &ArgRule, v: &Json, trusted: &dyn Fn(&str) -> bool) -> bool {
        let mut listed = Pool::default();
        for x in &rule.values {
            listed.add(x, 0);
        }
        let pools = lock(&self.pools);
        let selections = lock(&self.selections);
        let from: Vec<&Pool> = rule
            .from
            .iter()
            .filter(|s| trusted(s))
            .filter_map(|s| pools.get(s.as_str()))
            .chain(rule.selected.iter().filter_map(|s| selections.get(s)))
            .chain(std::iter::once(&listed))
            .collect();
        let items = lock(&self.items);
        let chosen: Vec<&Items> = rule
            .lookup
            .iter()
            .filter(|s| trusted(s))
            .map(String::clone)
            .chain(rule.choice.iter().map(|c| format!("choice {c}")))
            .filter_map(|k| items.get(&k))
            .collect();
        let mut leaves = Vec::new();
        leaves_of(v, &mut leaves, 0);
        // Nothing to vouch for (null, an empty list: no recipient, no
        // amount) passes, as an empty string does.
        leaves.iter().all(|leaf| {
            chosen.iter().any(|i| i.has(leaf))
                || match leaf {
                    Leaf::Word(w) => w.is_empty() || from.iter().any(|p| p.has_word(w)),
                    Leaf::Number(f) => from.iter().any(|p| p.has_number(*f)),
                }
        })
    }
}

/// `FIELD?max=KEY`: the field, and the numeric field whose greatest value
/// picks the record (`id?max=size`: the largest file's id).
fn ranked(field: &str) -> Option<(&str, &str)> {
    let (field, cond) = field.split_once('?')?;
    Some((field, cond.strip_prefix("max=")?))
}

/// The `field` values of the records of one listing `v` (objects holding
/// `field` and a number under `key`, at any depth) whose `key` is the
/// greatest: several when they tie. Text inside a record is never parsed
/// for records (a file's content could hold a forged one); only a reply
/// that is JSON text as a whole is read as its JSON.
fn top_ranked(v: &Json, field: &str, key: &str) -> Vec<Json> {
    fn walk<'a>(v: &'a Json, field: &str, key: &str, out: &mut Vec<(f64, &'a Json)>, depth: u32) {
        if depth > 32 {
            return;
        }
        match v {
            Json::Array(xs) => xs.iter().for_each(|x| walk(x, field, key, out, depth + 1)),
            Json::Object(m) => {
                if let (Some(f), Some(n)) = (m.get(field), m.get(key).and_then(Json::as_f64)) {
                    out.push((n, f));
                }
                m.values().for_each(|x| walk(x, field, key, out, depth + 1));
            }
            _ => {}
        }
    }
    let parsed;
    let v = match v.as_str().and_then(json_in_text) {
        Some(inner) => {
            parsed = inner;
            &parsed
        }
        None => v,
    };
    let mut found = Vec::new();
    walk(v, field, key, &mut found, 0);
    let top = found
        .iter()
        .map(|(n, _)| *n)
        .fold(f64::NEG_INFINITY, f64::max);
    found
        .into_iter()
        .filter(|(n, _)| *n == top)
        .map(|(_, f)| f.clone())
        .collect()
}

/// `FIELD?KEY=PATTERN`: the field, and the condition a record must meet
/// for its field to count (its `KEY` is a string matching `PATTERN`, `*`
/// any characters, case-insensitively; `@key`: a string made of the words
/// of the call's arguments, the record the request named by its name).
fn record_condition(field: Option<&str>) -> (Option<&str>, Option<(&str, &str)>) {
    match field.and_then(|f| f.split_once('?')) {
        Some((f, cond)) => match cond.split_once('=') {
            Some(kv) => (Some(f), Some(kv)),
            // A malformed condition admits no record.
            None => (Some(f), Some(("", "\u{0}"))),
        },
        None => (field, None),
    }
}

/// Does `s` match `pattern` (`*`: any characters), case-insensitively?
fn glob(pattern: &str, s: &str) -> bool {
    let (p, s) = (pattern.to_lowercase(), s.to_lowercase());
    let parts: Vec<&str> = p.split('*').collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return p == s;
    };
    let Some(mut rest) = s.strip_prefix(first) else {
        return false;
    };
    for m in middle {
        match rest.find(m) {
            Some(i) => rest = &rest[i + m.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The words of a name or a key: letters and digits, lower case.
fn name_words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Is `name` the key's words, in order, and nothing else (but a file
/// extension: `vacation-plans.docx` is named by `vacation plans`)? A
/// name that merely contains them (`tips-for-team-building.docx` for
/// `team building`) is another record.
fn names_key(name: &str, key: Option<&Json>) -> bool {
    let mut wanted = Vec::new();
    if let Some(k) = key {
        let mut leaves = Vec::new();
        leaves_of(k, &mut leaves, 0);
        for l in leaves {
            if let Leaf::Word(w) = l {
                wanted.extend(name_words(&w));
            }
        }
    }
    let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
    !wanted.is_empty() && (name_words(name) == wanted || name_words(stem) == wanted)
}

/// The values of the fields a `selected` entry's `FIELD?CONDITION` part
/// names (all of `v` without one) in the records of `v` that meet the
/// condition; `key`: the arguments of the call that returned `v`.
pub(super) fn selected_fields(field: Option<&str>, key: Option<&Json>, v: &Json) -> Vec<Json> {
    let (field, only) = record_condition(field);
    let Some(field) = field else {
        return vec![v.clone()];
    };
    let mut out = Vec::new();
    collect_field(v, field, only, key, &mut out, 0);
    out
}

/// Pushes onto `out` the values under the object keys named `field` (at
/// any depth) of the records that meet `only`.
fn collect_field(
    v: &Json,
    field: &str,
    only: Option<(&str, &str)>,
    key: Option<&Json>,
    out: &mut Vec<Json>,
    depth: u32,
) {
    if depth > 32 {
        return;
    }
    match v {
        Json::String(s) => {
            if let Some(inner) = json_in_text(s) {
                collect_field(&inner, field, only, key, out, depth + 1);
            }
        }
        Json::Array(xs) => xs
            .iter()
            .for_each(|x| collect_field(x, field, only, key, out, depth + 1)),
        Json::Object(m) => {
            let meets = only.is_none_or(|(k, pattern)| {
                m.get(k).and_then(Json::as_str).is_some_and(|s| {
                    if pattern == "@key" {
                        names_key(s, key)
                    } else {
                        glob(pattern, s)
                    }
                })
            });
            for (k, x) in m {
                if k != field {
                    collect_field(x, field, only, key, out, depth + 1);
                } else if meets {
                    out.push(x.clone());
                }
            }
        }
        _ => {}
    }
}

enum Leaf {
    Word(String),
    Number(f64),
}

fn leaves_of(v: &Json, out: &mut Vec<Leaf>, depth: u32) {
    if depth > 32 {
        // Too deep to judge: a leaf nothing holds.
        out.push(Leaf::Word("\u{0}".into()));
        return;
    }
    match v {
        Json::String(s) => out.push(Leaf::Word(normalise(s))),
        Json::Number(n) => out.push(match n.as_f64() {
            Some(f) => Leaf::Number(f),
            None => Leaf::Word(n.to_string()),
        }),
        Json::Bool(b) => out.push(Leaf::Word(b.to_string())),
        Json::Array(xs) => xs.iter().for_each(|x| leaves_of(x, out, depth + 1)),
        Json::Object(m) => m.values().for_each(|x| leaves_of(x, out, depth + 1)),
        Json::Null => {}
    }
}

/// Text holding JSON (a tool's reply as a string): that JSON, whose
/// fields are read like a structured reply's.
fn json_in_text(s: &str) -> Option<Json> {
    let t = s.trim_start();
    if t.starts_with('{') || t.starts_with('[') {
        serde_json::from_str(s).ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests;
