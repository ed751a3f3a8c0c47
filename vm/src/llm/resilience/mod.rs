//! Resilience wrappers around other backends (docs/backends.md, "Hedged
//! requests and fallback chains"):
//!
//! - [`Hedge`]: a critical-path call still unanswered after the backend's
//!   observed latency quantile (`hedge = { after = "p95" }`) gets a second
//!   request; the first answer wins and the other request is cancelled;
//!   at most `max_extra` extra requests per request sent.
//! - [`Fallback`]: a call that fails with a rate limit, a server error, a
//!   timeout or an unreachable server is sent to the next backend of the
//!   chain (`fallback = ["b2", "b3"]`).
//!
//! Both implement [`LlmBackend`] over other backends and change nothing
//! the VM sees but where the reply came from: one call, one outcome, one
//! journal entry; every request sent is in the call's attempts.

mod fallback;
mod hedge;
pub mod history;
mod sketch;

pub use fallback::{falls_back, Fallback};
pub use hedge::{Hedge, HedgeStats};
pub use sketch::LatencySketch;

use crate::sync::lock;
use history::HistoryWarning;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The latency history this process uses (`history`): its file and what
/// it held when attached.
struct Attached {
    path: PathBuf,
    loaded: history::Loaded,
}

static ATTACHED: Mutex<Option<Attached>> = Mutex::new(None);
/// Held while a save reads, merges and writes, so the runs of one
/// process that end together do not overwrite each other's latencies.
static SAVING: Mutex<()> = Mutex::new(());

/// Uses `dir/latency.json` as this process's latency history: reads it
/// (once per path) and seeds every hedged backend with it, including
/// those built later ([`seed_from_history`]). The backends of the process
/// share one history, so a second directory replaces the first.
pub fn attach_history(dir: &Path) -> Option<HistoryWarning> {
    let path = dir.join(history::FILE);
    if lock(&ATTACHED).as_ref().is_some_and(|a| a.path == path) {
        return None;
    }
    let (loaded, warning) = history::load(&path);
    *lock(&ATTACHED) = Some(Attached {
        path,
        loaded: loaded.clone(),
    });
    // Without ATTACHED held: building a hedge takes the registry's lock
    // and then ATTACHED's (`seed_from_history`).
    hedge::seed_all(|name, seed| loaded.seed(name, seed));
    warning
}

/// Seeds the sketches of hedged backend `name` from the attached history
/// (nothing when none is attached).
fn seed_from_history(name: &str, seed: hedge::Seed<'_>) {
    if let Some(a) = lock(&ATTACHED).as_ref() {
        a.loaded.seed(name, seed);
    }
}

/// Merges the latencies the hedged backends observed since the last save
/// into the attached history file. Nothing happens when no history is
/// attached or nothing was observed.
pub fn save_history() -> Option<HistoryWarning> {
    let path = lock(&ATTACHED).as_ref()?.path.clone();
    let _saving = lock(&SAVING);
    history::merge_into(&path, hedge::take_fresh())
}

/// How a hedged call's attempts are told apart: their message starts so.
const HEDGE_NOTE: &str = "hedged ";

/// The hedge's note on an attempt (`None`: not part of a hedged call),
/// for telemetry.
pub fn hedge_note(a: &crate::llm::Attempt) -> Option<String> {
    a.message
        .as_ref()
        .filter(|m| m.starts_with(HEDGE_NOTE))
        .cloned()
}

/// When a hedge is sent (`hedge.after`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HedgeAfter {
    /// After this quantile (0.5 to 0.999) of the latency the backend has
    /// shown for the op kind (`"p95"`).
    Quantile(f64),
    /// After a fixed delay (`"250ms"`, `"2s"`).
    Fixed(Duration),
}

impl HedgeAfter {
    /// Parses `"p95"`, `"p99.9"`, `"250ms"`, `"2s"`; `None` when it is
    /// none of those.
    pub fn parse(s: &str) -> Option<HedgeAfter> {
        let s = s.trim();
        if let Some(q) = s.strip_prefix('p') {
            let q: f64 = q.parse().ok()?;
            return (50.0..=99.9)
                .contains(&q)
                .then_some(HedgeAfter::Quantile(q / 100.0));
        }
        let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
            (n, 1e-3)
        } else if let Some(n) = s.strip_suffix('s') {
            (n, 1.0)
        } else {
            return None;
        };
        let v: f64 = num.trim().parse().ok()?;
        (v.is_finite() && v > 0.0 && v * scale <= 3600.0)
            .then(|| HedgeAfter::Fixed(Duration::from_secs_f64(v * scale)))
    }

    /// As written in the configuration.
    pub fn label(&self) -> String {
        match self {
            HedgeAfter::Quantile(q) => format!("p{}", q * 100.0),
            HedgeAfter::Fixed(d) => format!("{}ms", d.as_millis()),
        }
    }
}

/// A backend's `hedge = { after, max_extra }`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HedgeConfig {
    pub after: HedgeAfter,
    /// Extra requests allowed per request sent (0 to 1; default 0.1).
    pub max_extra: f64,
}

impl Default for HedgeConfig {
    fn default() -> Self {
        HedgeConfig {
            after: HedgeAfter::Quantile(0.95),
            max_extra: 0.1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hedge_after_parses_quantiles_and_delays() {
        assert_eq!(HedgeAfter::parse("p95"), Some(HedgeAfter::Quantile(0.95)));
        assert_eq!(
            HedgeAfter::parse("250ms"),
            Some(HedgeAfter::Fixed(Duration::from_millis(250)))
        );
        assert_eq!(
            HedgeAfter::parse("2s"),
            Some(HedgeAfter::Fixed(Duration::from_secs(2)))
        );
        for bad in ["p20", "p100", "fast", "-1s", "0ms", "p", ""] {
            assert_eq!(HedgeAfter::parse(bad), None, "{bad}");
        }
    }
}
