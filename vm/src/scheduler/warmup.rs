//! Fan-out warm-up of the provider's prompt cache
//! (`docs/runtime.md#prompt-cache-warm-up`).
//!
//! A provider caches a request's prefix once the request has been answered
//! (Anthropic: "available after the first response begins"), so calls sent
//! together with one long shared prefix (a fan-out over one document) all
//! pay for it in full. When LLM calls of one *class* (the backend's
//! [`SharedPrefix`]: same backend, model, system text, tools and leading
//! context blocks) are ready together and the prefix is at least the
//! provider's minimum, the first one (the *leader*) goes alone and the
//! others are held until its reply starts (its first streamed text, or its
//! whole reply when it is not streamed). They then read the prefix at the
//! cached price (0.1× at both providers). Calls of a class that arrive
//! after its leader's reply started go at once, and so does everything
//! once the leader failed (the class is cold again).
//!
//! When a hold is worth its time (`cache_warmup = "auto"`, the default):
//! the hold delays a call by the leader's remaining time to first token
//! `R` (the backend's observed time to first token of calls that missed
//! the cache, minus how long the leader has been out). A call is held when
//! - the scheduler's estimate puts it off the critical path (its region
//!   has slack; `critical.rs`): the wait is absorbed, or
//! - the backend's observed latencies say a cache hit answers at least
//!   `R` sooner than a miss (providers cut time to first token on a hit,
//!   most for long prefixes): the call ends no later than it would have.
//!
//! With no observation yet, only calls off the critical path are held.
//! `always` holds every call that can read the leader's prefix; `off`
//! (a backend's `cache_warmup`) never holds.
//!
//! A call of a class that goes while its leader is out (not held) cannot
//! read the prefix: it is sent without cache breakpoints, so it pays no
//! cache write (1.25× at Anthropic) for a prefix the leader writes anyway.
//!
//! A held call keeps its place in the backend's concurrency limit (it has
//! been admitted), so the hold never lets another call overtake it. The
//! held calls are the scheduler's (`T`: `llm_calls::Pending`); this
//! module only decides and keeps them.

use crate::llm::cache::{SharedPrefix, WarmupMode};
use crate::llm::{Attempt, LlmRequest};
use crate::sync::lock;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Weight of a new observation in the latency averages.
const EWMA: f64 = 0.3;

pub(super) struct Warmup<T> {
    state: Mutex<State<T>>,
}

impl<T> Default for Warmup<T> {
    fn default() -> Self {
        Warmup {
            state: Mutex::new(State {
                classes: HashMap::new(),
                leaders: HashMap::new(),
                held: HashMap::new(),
                spec_held: HashMap::new(),
                seen: HashMap::new(),
                holds: 0,
            }),
        }
    }
}

struct State<T> {
    /// Classes whose leader is out, or whose prefix is cached.
    classes: HashMap<u64, Class>,
    /// The class of each leader in flight, by call token.
    leaders: HashMap<u64, u64>,
    /// Held calls by class, in the order they were held.
    held: HashMap<u64, Vec<(u64, T)>>,
    /// Held speculated calls by class (their index in the speculation
    /// table), in the order they were held.
    spec_held: HashMap<u64, Vec<usize>>,
    /// Latency seen per backend (the request's `backend:`, `None`: the
    /// run's default).
    seen: HashMap<Option<String>, Observed>,
    /// Calls held so far (the run's summary).
    holds: u64,
}

enum Class {
    /// The leader (its token) is out since this moment.
    Leading(Instant),
    /// A call of the class has been answered: its prefix is cached.
    Warm,
}

/// What a call of a class does now.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Admit {
    /// Goes now (first of its class, its prefix is cached, too short to
    /// cache, or a hold would cost the run time).
    Go,
    /// Goes now and leads its class: tell [`Warmup::release`] when its
    /// reply starts.
    Lead,
    /// Goes now beside its class's leader, so it cannot read the prefix
    /// (it is not cached yet): its cache breakpoints are dropped, as a
    /// write it pays for (1.25× at Anthropic) would be one the leader
    /// makes anyway.
    Cold,
    /// Waits for the leader's reply to start.
    Hold,
}

/// Exponentially weighted latencies of one backend's calls, split by
/// whether they read the cache.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Observed {
    /// Time to first token (whole latency when not streamed) of misses.
    pub(super) first_miss: Option<f64>,
    /// Whole latency of misses and of hits.
    pub(super) miss: Option<f64>,
    pub(super) hit: Option<f64>,
}

fn fold(avg: &mut Option<f64>, x: f64) {
    *avg = Some(avg.map_or(x, |a| a + EWMA * (x - a)));
}

impl Observed {
    /// Whether a call ends no later when it waits `wait` for a cache hit
    /// than when it goes now and misses; `None`: not known yet.
    pub(super) fn hit_pays_for(&self, wait: Duration) -> Option<bool> {
        let (miss, hit) = (self.miss?, self.hit?);
        Some(wait.as_secs_f64() <= miss - hit)
    }

    /// The expected rest of a leader's time to first token after
    /// `elapsed`; `None`: not known yet.
    pub(super) fn remaining_first(&self, elapsed: Duration) -> Option<Duration> {
        let first = self.first_miss.or(self.miss)?;
        Some(Duration::from_secs_f64(
            (first - elapsed.as_secs_f64()).max(0.0),
        ))
    }
}

/// The hold rule of `auto` (module documentation): hold when the call is
/// off the critical path, or when a hit pays for the expected wait.
pub(super) fn worth_holding(
    mode: WarmupMode,
    critical: bool,
    seen: &Observed,
    leader_out: Duration,
) -> bool {
    match mode {
        WarmupMode::Off => false,
        WarmupMode::Always => true,
        WarmupMode::Auto => {
            !critical
                || seen
                    .remaining_first(leader_out)
                    .and_then(|wait| seen.hit_pays_for(wait))
                    .unwrap_or(false)
        }
    }
}

impl<T> Warmup<T> {
    /// Decides for call `token` of class `prefix` (on the critical path or
    /// not, to backend `backend`: the request's `backend:`), and holds
    /// `pending` when it must wait (returned otherwise).
    pub(super) fn admit(
        &self,
        token: u64,
        prefix: &SharedPrefix,
        critical: bool,
        backend: &Option<String>,
        pending: T,
    ) -> (Admit, Option<T>) {
        if !prefix.cacheable() {
            return (Admit::Go, Some(pending));
        }
        let mut g = lock(&self.state);
        match g.classes.get(&prefix.class) {
            None => {
                g.classes
                    .insert(prefix.class, Class::Leading(Instant::now()));
                g.leaders.insert(token, prefix.class);
                (Admit::Lead, Some(pending))
            }
            Some(Class::Warm) => (Admit::Go, Some(pending)),
            Some(Class::Leading(since)) => {
                let seen = g.seen.get(backend).copied().unwrap_or_default();
                if !worth_holding(prefix.mode, critical, &seen, since.elapsed()) {
                    return (Admit::Cold, Some(pending));
                }
                g.holds += 1;
                g.held
                    .entry(prefix.class)
                    .or_default()
                    .push((token, pending));
                (Admit::Hold, None)
            }
        }
    }

    /// Whether speculated call `index` (of the speculation table) waits
    /// for the leader of its class: it does whenever a leader is out,
    /// unless the backend's `cache_warmup` is `off`. A speculated call is
    /// ahead of its branch, off the critical path by construction, so the
    /// wait costs the run nothing and the call reads the prefix at the
    /// cached price (else it would pay for a prefix the leader is writing).
    pub(super) fn hold_speculated(&self, prefix: &SharedPrefix, index: usize) -> bool {
        if !prefix.cacheable() || prefix.mode == WarmupMode::Off {
            return false;
        }
        let mut g = lock(&self.state);
        if !matches!(g.classes.get(&prefix.class), Some(Class::Leading(_))) {
            return false;
        }
        g.holds += 1;
        g.spec_held.entry(prefix.class).or_default().push(index);
        true
    }

    /// Leader `token`'s reply started (`ok`), or the leader ended without
    /// a reply: its class is warm (or cold again), and the calls it held
    /// go, with the speculated calls it held (their table indices).
    /// Nothing when `token` leads nothing (any more).
    pub(super) fn release(&self, token: u64, ok: bool) -> (Vec<(u64, T)>, Vec<usize>) {
        let mut g = lock(&self.state);
        let Some(class) = g.leaders.remove(&token) else {
            return (Vec::new(), Vec::new());
        };
        if ok {
            g.classes.insert(class, Class::Warm);
        } else {
            g.classes.remove(&class);
        }
        (
            g.held.remove(&class).unwrap_or_default(),
            g.spec_held.remove(&class).unwrap_or_default(),
        )
    }

    /// Notes a settled call's latency, split by whether it read the cache.
    pub(super) fn observe(&self, req: &LlmRequest, attempts: &[Attempt]) {
        let Some(a) = attempts.last().filter(|a| a.error.is_none()) else {
            return;
        };
        let mut g = lock(&self.state);
        let seen = g.seen.entry(req.backend.clone()).or_default();
        let whole = a.latency.as_secs_f64();
        if a.usage.cache_read_tokens > 0 {
            fold(&mut seen.hit, whole);
        } else {
            fold(&mut seen.miss, whole);
            fold(
                &mut seen.first_miss,
                a.first_token.map_or(whole, |d| d.as_secs_f64()),
            );
        }
    }

    /// The run is over: the calls still held, which never started.
    pub(super) fn take_all(&self) -> Vec<(u64, T)> {
        let mut g = lock(&self.state);
        g.leaders.clear();
        // Held speculated calls never started: the speculation table
        // discards them at its close.
        g.spec_held.clear();
        g.held.drain().flat_map(|(_, calls)| calls).collect()
    }

    /// Calls held so far.
    pub(super) fn holds(&self) -> u64 {
        lock(&self.state).holds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(first: f64, miss: f64, hit: f64) -> Observed {
        Observed {
            first_miss: Some(first),
            miss: Some(miss),
            hit: Some(hit),
        }
    }

    #[test]
    fn off_the_critical_path_a_call_is_held() {
        let none = Observed::default();
        assert!(worth_holding(
            WarmupMode::Auto,
            false,
            &none,
            Duration::ZERO
        ));
    }

    #[test]
    fn on_the_critical_path_only_a_faster_hit_pays_for_the_wait() {
        let d = Duration::ZERO;
        // Nothing observed yet: the wait is not known to pay.
        assert!(!worth_holding(
            WarmupMode::Auto,
            true,
            &Observed::default(),
            d
        ));
        // Hits as slow as misses (the benchmark server): never held.
        assert!(!worth_holding(
            WarmupMode::Auto,
            true,
            &seen(0.2, 0.25, 0.25),
            d
        ));
        // A hit saves 1.5 s of a 2 s call whose first token takes 1 s.
        assert!(worth_holding(
            WarmupMode::Auto,
            true,
            &seen(1.0, 2.0, 0.5),
            d
        ));
        // ... but not 0.5 s when the first token takes 1 s.
        assert!(!worth_holding(
            WarmupMode::Auto,
            true,
            &seen(1.0, 2.0, 1.5),
            d
        ));
        // ... unless the leader has been out 0.6 s already.
        let out = Duration::from_millis(600);
        assert!(worth_holding(
            WarmupMode::Auto,
            true,
            &seen(1.0, 2.0, 1.5),
            out
        ));
    }

    #[test]
    fn modes_off_and_always_ignore_latency() {
        let fast_hits = seen(1.0, 2.0, 0.1);
        assert!(!worth_holding(
            WarmupMode::Off,
            false,
            &fast_hits,
            Duration::ZERO
        ));
        assert!(worth_holding(
            WarmupMode::Always,
            true,
            &Observed::default(),
            Duration::ZERO
        ));
    }

    #[test]
    fn speculated_calls_wait_for_a_leader_out_and_go_with_its_release() {
        let prefix = |mode| SharedPrefix {
            class: 7,
            tokens: 2000,
            min_tokens: 1024,
            mode,
        };
        let w: Warmup<u32> = Warmup::default();
        // No leader yet: a speculated call goes at once.
        assert!(!w.hold_speculated(&prefix(WarmupMode::Auto), 0));
        let (admit, _) = w.admit(1, &prefix(WarmupMode::Auto), true, &None, 10);
        assert_eq!(admit, Admit::Lead);
        // The leader is out: speculated calls wait, unless the warm-up is off.
        assert!(w.hold_speculated(&prefix(WarmupMode::Auto), 3));
        assert!(w.hold_speculated(&prefix(WarmupMode::Always), 4));
        assert!(!w.hold_speculated(&prefix(WarmupMode::Off), 5));
        assert_eq!(w.holds(), 2);
        // Its reply started: they go, in the order they were held.
        let (held, speculated) = w.release(1, true);
        assert!(held.is_empty());
        assert_eq!(speculated, vec![3, 4]);
        // The class is warm: nothing waits any more.
        assert!(!w.hold_speculated(&prefix(WarmupMode::Auto), 6));
    }

    #[test]
    fn averages_follow_new_observations() {
        let mut a = None;
        fold(&mut a, 1.0);
        assert_eq!(a, Some(1.0));
        fold(&mut a, 2.0);
        assert!(a.is_some_and(|v| (v - 1.3).abs() < 1e-9), "{a:?}");
    }
}
