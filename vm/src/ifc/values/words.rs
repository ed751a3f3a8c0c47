//! The words of the text a source produced (a tool's reply, the run's
//! input): every string whole, each word of it, its runs of words and its
//! numbers, normalised, so that a value found inside a sentence can be
//! vouched for by the words it is made of.

use super::json_in_text;
use serde_json::Value as Json;
use std::collections::HashSet;

/// Words kept per source, at most: a source producing more keeps its
/// first words only (fewer values vouched for, never more).
const MAX_WORDS: usize = 100_000;
/// Strings longer than this are kept as words only, not whole.
pub(super) const MAX_WHOLE: usize = 4096;
/// Characters of word runs kept per source, at most (as for `MAX_WORDS`:
/// past it, fewer values are vouched for, never more).
const MAX_RUN_CHARS: usize = 1_000_000;

#[derive(Default)]
pub(super) struct Pool {
    pub(super) words: HashSet<String>,
    pub(super) numbers: Vec<f64>,
    /// Each string's normalised words, one space apart and one on either
    /// side, so that a value of several words matches only whole words in
    /// a row.
    pub(super) runs: Vec<String>,
    pub(super) run_chars: usize,
}

impl Pool {
    pub(super) fn add(&mut self, v: &Json, depth: u32) {
        if self.words.len() >= MAX_WORDS || depth > 32 {
            return;
        }
        match v {
            Json::String(s) => {
                if let Some(inner) = json_in_text(s) {
                    self.add(&inner, depth + 1);
                }
                if s.len() <= MAX_WHOLE {
                    self.word(s);
                }
                // Items of a list written as text (`Le Petit Parc, Hotel
                // Lumiere`; one per line), then every word.
                for item in s.split(['\n', ';', '|']).flat_map(|l| l.split(", ")) {
                    self.word(item);
                    // `Landlord Ltd: GB11...`: the value after a label.
                    if let Some((_, v)) = item.split_once(": ") {
                        self.word(v);
                    }
                }
                for w in s.split(char::is_whitespace) {
                    self.word(w);
                    // `www.our-company.com.They sent`: a sentence's end
                    // without its space; its two words as well.
                    for (a, b) in sentence_joints(w) {
                        self.word(a);
                        self.word(b);
                    }
                    if self.words.len() >= MAX_WORDS {
                        return;
                    }
                }
                let run = words_run(s);
                if run.matches(' ').count() > 2 && self.run_chars + run.len() <= MAX_RUN_CHARS {
                    self.run_chars += run.len();
                    self.runs.push(run);
                }
            }
            Json::Number(n) => {
                if let Some(f) = n.as_f64() {
                    self.numbers.push(f);
                }
                self.word(&n.to_string());
            }
            Json::Bool(b) => self.word(&b.to_string()),
            Json::Array(xs) => xs.iter().for_each(|x| self.add(x, depth + 1)),
            Json::Object(m) => m.values().for_each(|x| self.add(x, depth + 1)),
            Json::Null => {}
        }
    }

    pub(super) fn word(&mut self, w: &str) {
        let n = normalise(w);
        if n.is_empty() {
            return;
        }
        if let Some(f) = number_of(&n) {
            self.numbers.push(f);
        }
        self.words.insert(n);
    }

    pub(super) fn has_word(&self, w: &str) -> bool {
        self.words.contains(w)
            || number_of(w).is_some_and(|f| self.has_number(f))
            || self.has_run(w)
    }

    /// Does some string hold `w`'s words (two or more) in a row?
    pub(super) fn has_run(&self, w: &str) -> bool {
        let run = words_run(w);
        run.matches(' ').count() > 2 && self.runs.iter().any(|r| r.contains(&run))
    }

    pub(super) fn has_number(&self, f: f64) -> bool {
        self.numbers
            .iter()
            .any(|x| (x - f).abs() <= 1e-9 * f.abs().max(1.0))
    }
}

/// Lower case, without surrounding punctuation and a `mailto:` prefix.
pub(super) fn normalise(w: &str) -> String {
    let t = w.trim_matches(|c: char| c.is_whitespace() || "\"'`()[]{}<>.,;:!?".contains(c));
    let t = t.strip_prefix("mailto:").unwrap_or(t);
    t.to_lowercase()
}

/// The places where `w` joins two sentences without a space: a `.`
/// after a lower-case letter or a digit and before a capitalised word of
/// letters only (`…company.com.They`); never inside a name such as
/// `docs.Google.com` or `v1.2`.
pub(super) fn sentence_joints(w: &str) -> impl Iterator<Item = (&str, &str)> {
    w.match_indices('.').filter_map(move |(i, _)| {
        let (a, b) = (&w[..i], &w[i + 1..]);
        let before = a.chars().last()?;
        let word = b.trim_end_matches(|c: char| "\"'`)]}.,;:!?".contains(c));
        let mut cs = word.chars();
        let first = cs.next()?;
        let joint = (before.is_ascii_lowercase() || before.is_ascii_digit())
            && first.is_ascii_uppercase()
            && word.len() > 1
            && cs.all(|c| c.is_ascii_lowercase());
        joint.then_some((a, b))
    })
}

/// ` w1 w2 … `: the normalised words of `s`, one space apart and around.
pub(super) fn words_run(s: &str) -> String {
    words_run_by(s, normalise)
}

/// ` w1 w2 … `: the words of `s` as `normalise` makes them, the empty ones
/// left out, one space apart and around (so a run is found inside another
/// only at word boundaries).
pub(in crate::ifc) fn words_run_by(s: &str, normalise: impl Fn(&str) -> String) -> String {
    let mut run = String::from(" ");
    for w in s
        .split_whitespace()
        .map(normalise)
        .filter(|w| !w.is_empty())
    {
        run.push_str(&w);
        run.push(' ');
    }
    run
}

/// A word read as an amount: `1,250.00`, `$950`, `950€`.
pub(super) fn number_of(w: &str) -> Option<f64> {
    let t = w.trim_matches(|c: char| "$€£¥".contains(c));
    if t.is_empty() || !t.starts_with(|c: char| c.is_ascii_digit() || c == '-') {
        return None;
    }
    t.replace(',', "")
        .parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
}
