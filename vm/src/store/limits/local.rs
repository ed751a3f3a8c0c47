//! Fleet limits held inside one process: the member for a SQLite store
//! (one machine, and several `aisc` processes on it each count their own
//! calls: the limits are per process there, docs/scale-out.md).

use super::{BackendLoad, Limiter, Take, POLL};
use crate::config::FleetLimits;
use crate::store::JournalError;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const MINUTE: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
pub struct LocalLimiter {
    backends: Mutex<HashMap<String, Local>>,
    next: std::sync::atomic::AtomicU64,
}

#[derive(Debug)]
struct Local {
    in_flight: i64,
    peak: i64,
    waits: i64,
    paused_until: Option<Instant>,
    window: Instant,
    requests: u64,
    tokens: u64,
}

impl Local {
    fn new() -> Local {
        Local {
            in_flight: 0,
            peak: 0,
            waits: 0,
            paused_until: None,
            window: Instant::now(),
            requests: 0,
            tokens: 0,
        }
    }
}

impl LocalLimiter {
    fn with<T>(&self, backend: &str, f: impl FnOnce(&mut Local) -> T) -> T {
        let mut all = self.backends.lock().unwrap_or_else(|p| p.into_inner());
        f(all.entry(backend.to_string()).or_insert_with(Local::new))
    }
}

impl Limiter for LocalLimiter {
    fn fleet_wide(&self) -> bool {
        false
    }

    /// `service` does not matter here: this process's gate already
    /// starts its least served run's call first.
    fn try_take(
        &self,
        backend: &str,
        limits: &FleetLimits,
        _service: u64,
    ) -> Result<Take, JournalError> {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(self.with(backend, |b| {
            let now = Instant::now();
            if let Some(until) = b.paused_until.filter(|u| *u > now) {
                b.waits += 1;
                return Take::Wait(until - now);
            }
            if now.duration_since(b.window) >= MINUTE {
                b.window = now;
                b.requests = 0;
                b.tokens = 0;
            }
            let next_window = (b.window + MINUTE).saturating_duration_since(now);
            let over_rate = limits.requests_per_minute.is_some_and(|r| b.requests >= r)
                || limits.tokens_per_minute.is_some_and(|t| b.tokens >= t);
            if over_rate {
                b.waits += 1;
                return Take::Wait(next_window);
            }
            let full = limits
                .concurrency
                .is_some_and(|c| b.in_flight >= i64::try_from(c).unwrap_or(i64::MAX));
            if full {
                b.waits += 1;
                return Take::Wait(POLL);
            }
            b.in_flight += 1;
            b.peak = b.peak.max(b.in_flight);
            b.requests += 1;
            Take::Slot(format!("local#{n}"))
        }))
    }

    fn give_back(&self, backend: &str, _token: &str, tokens: u64) -> Result<(), JournalError> {
        self.with(backend, |b| {
            b.in_flight = (b.in_flight - 1).max(0);
            b.tokens += tokens;
        });
        Ok(())
    }

    fn pause(&self, backend: &str, pause: Duration) -> Result<(), JournalError> {
        let until = Instant::now() + pause;
        self.with(backend, |b| {
            b.paused_until = Some(b.paused_until.map_or(until, |u| u.max(until)));
        });
        Ok(())
    }

    fn load(&self) -> Result<Vec<(String, BackendLoad)>, JournalError> {
        let all = self.backends.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let mut out: Vec<(String, BackendLoad)> = all
            .iter()
            .map(|(k, b)| {
                let paused = b
                    .paused_until
                    .map_or(0, |u| u.saturating_duration_since(now).as_millis());
                (
                    k.clone(),
                    BackendLoad {
                        in_flight: b.in_flight,
                        peak: b.peak,
                        waits: b.waits,
                        paused_ms: i64::try_from(paused).unwrap_or(i64::MAX),
                    },
                )
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}
