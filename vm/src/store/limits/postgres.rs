//! Fleet limits in PostgreSQL (schema version 7): one `backend_calls` row
//! per call in flight, which its process renews every third of
//! [`SLOT_LEASE_MS`] while the call lasts, so a killed worker's slots
//! expire and come back within the lease; one `backend_limits` row per
//! backend with its `Retry-After` pause, its per-minute window (requests
//! and tokens counted in fixed minutes of the database's clock) and
//! counters. A slot is taken under that row's lock (`FOR UPDATE`), so the
//! count of calls in flight and the insert of a new one are one step for
//! the whole fleet.
//!
//! A process told to wait leaves a `backend_waiters` row (schema version
//! 13) with the attained service of the run its next call belongs to,
//! renewed at each of its polls and expiring [`WAITER_LEASE_MS`] after the
//! last: a free slot goes to a process with more only while no live row
//! says less, so the least served run of the fleet goes next.

use super::{BackendLoad, Limiter, Take, POLL, SLOT_LEASE_MS};
use crate::config::FleetLimits;
use crate::store::postgres::{config, describe, pool::Pool, NOW_MS};
use crate::store::JournalError;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

const MINUTE_MS: i64 = 60_000;

/// How long a waiting process's claim to go first outlives its last poll
/// (polls come at most `POLL * 8` apart: see `limits::Gate::dispatch`).
pub const WAITER_LEASE_MS: i64 = 1000;

#[derive(Debug)]
pub struct PgLimiter {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    pool: Pool,
    location: String,
    /// This limiter (`host:pid:start/n`: one per process and store, but
    /// each its own claimant) and a counter name its slots.
    owner: String,
    next: AtomicU64,
    /// Slots this process holds: the only ones it renews.
    held: Mutex<HashSet<String>>,
}

impl PgLimiter {
    /// Connects to `url` (whose schema the run store migrated) and starts
    /// the thread that renews this process's slots.
    pub fn connect(url: &str) -> Result<PgLimiter, JournalError> {
        let (config, location) = config(url)?;
        let inner = Arc::new(Inner {
            pool: Pool::new(config, 4),
            location,
            owner: {
                static INSTANCES: AtomicU64 = AtomicU64::new(0);
                let n = INSTANCES.fetch_add(1, Ordering::Relaxed);
                format!("{}/{n}", crate::store::lease::this_process())
            },
            next: AtomicU64::new(0),
            held: Mutex::default(),
        });
        let weak = Arc::downgrade(&inner);
        std::thread::Builder::new()
            .name("ais-fleet-renew".into())
            .spawn(move || renew_loop(&weak))
            .map_err(|e| {
                JournalError::new(
                    "store.limits",
                    format!("cannot start the slot renewal thread: {e}"),
                )
            })?;
        Ok(PgLimiter { inner })
    }
}

/// Renews the slots of calls still in flight until the limiter is gone.
fn renew_loop(inner: &Weak<Inner>) {
    let period = Duration::from_millis(u64::try_from(SLOT_LEASE_MS / 3).unwrap_or(1000));
    loop {
        std::thread::sleep(period);
        let Some(me) = inner.upgrade() else { return };
        let held: Vec<String> = me.held().iter().cloned().collect();
        if held.is_empty() {
            continue;
        }
        let _ = me.with(|c| {
            c.execute(
                &format!("UPDATE backend_calls SET until_ms = {NOW_MS} + $2 WHERE token = ANY($1)"),
                &[&held, &SLOT_LEASE_MS],
            )
        });
    }
}

impl Inner {
    fn held(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn with<T>(
        &self,
        mut f: impl FnMut(&mut postgres::Client) -> Result<T, postgres::Error>,
    ) -> Result<T, JournalError> {
        let mut last = None;
        for _ in 0..3 {
            let mut c = self.pool.get().map_err(|e| self.err(&e))?;
            match f(&mut c) {
                Ok(v) => return Ok(v),
                Err(e) => {
                    let again = crate::store::postgres::is_retryable(&e) || c.is_closed();
                    last = Some(e);
                    if !again {
                        break;
                    }
                }
            }
        }
        Err(match last {
            Some(e) => self.err(&e),
            None => JournalError::new("store.limits", "no attempt was made"),
        })
    }

    fn err(&self, e: &postgres::Error) -> JournalError {
        JournalError::new(
            "store.limits",
            format!("fleet limits in `{}`: {}", self.location, describe(e)),
        )
    }
}

fn ms(d: i64) -> Duration {
    Duration::from_millis(u64::try_from(d.max(1)).unwrap_or(1))
}

impl Limiter for PgLimiter {
    fn fleet_wide(&self) -> bool {
        true
    }

    fn try_take(
        &self,
        backend: &str,
        limits: &FleetLimits,
        service: u64,
    ) -> Result<Take, JournalError> {
        let me = &self.inner;
        let service = i64::try_from(service).unwrap_or(i64::MAX);
        let token = format!("{}#{}", me.owner, me.next.fetch_add(1, Ordering::Relaxed));
        let cap = |v: Option<u64>| v.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        let (conc, rpm, tpm) = (
            cap(limits.concurrency),
            cap(limits.requests_per_minute),
            cap(limits.tokens_per_minute),
        );
        let take = me.with(|c| {
            let mut tx = c.transaction()?;
            tx.execute(
                "INSERT INTO backend_limits (backend) VALUES ($1) ON CONFLICT (backend) DO NOTHING",
                &[&backend],
            )?;
            let row = tx.query_one(
                &format!(
                    "SELECT paused_until_ms, window_ms, requests, tokens, {NOW_MS} FROM backend_limits
                     WHERE backend = $1 FOR UPDATE"
                ),
                &[&backend],
            )?;
            let (paused, window, requests, tokens, now): (i64, i64, i64, i64, i64) =
                (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
            let this_window = now - now % MINUTE_MS;
            let (requests, tokens) = if window == this_window {
                (requests, tokens)
            } else {
                (0, 0)
            };
            let wait = |tx: &mut postgres::Transaction<'_>| {
                tx.execute(
                    "UPDATE backend_limits SET waits = waits + 1 WHERE backend = $1",
                    &[&backend],
                )
            };
            if paused > now {
                wait(&mut tx)?;
                tx.commit()?;
                return Ok(Take::Wait(ms(paused - now)));
            }
            if rpm.is_some_and(|r| requests >= r) || tpm.is_some_and(|t| tokens >= t) {
                wait(&mut tx)?;
                tx.commit()?;
                return Ok(Take::Wait(ms(this_window + MINUTE_MS - now)));
            }
            tx.execute(
                "DELETE FROM backend_calls WHERE backend = $1 AND until_ms <= $2",
                &[&backend, &now],
            )?;
            // The calls in flight, and whether a process whose next call's
            // run is less served waits (it goes first): one round trip.
            let row = tx.query_one(
                "SELECT (SELECT COUNT(*) FROM backend_calls WHERE backend = $1),
                 EXISTS (SELECT 1 FROM backend_waiters WHERE backend = $1
                 AND owner <> $2 AND until_ms > $3 AND service < $4)",
                &[&backend, &me.owner, &now, &service],
            )?;
            let (in_flight, behind): (i64, bool) = (row.get(0), row.get(1));
            if conc.is_some_and(|c| in_flight >= c) || behind {
                wait(&mut tx)?;
                tx.execute(
                    "INSERT INTO backend_waiters (backend, owner, service, until_ms)
                     VALUES ($1, $2, $3, $4) ON CONFLICT (backend, owner)
                     DO UPDATE SET service = EXCLUDED.service, until_ms = EXCLUDED.until_ms",
                    &[&backend, &me.owner, &service, &(now + WAITER_LEASE_MS)],
                )?;
                tx.commit()?;
                return Ok(Take::Wait(POLL));
            }
            tx.execute(
                "INSERT INTO backend_calls (token, backend, owner, until_ms) VALUES ($1, $2, $3, $4)",
                &[&token, &backend, &me.owner, &(now + SLOT_LEASE_MS)],
            )?;
            tx.execute(
                "UPDATE backend_limits SET window_ms = $2, requests = $3::bigint + 1, tokens = $4::bigint,
                 peak = GREATEST(peak, $5) WHERE backend = $1",
                &[&backend, &this_window, &requests, &tokens, &(in_flight + 1)],
            )?;
            tx.commit()?;
            Ok(Take::Slot(token.clone()))
        })?;
        if let Take::Slot(t) = &take {
            me.held().insert(t.clone());
        }
        Ok(take)
    }

    fn give_back(&self, backend: &str, token: &str, tokens: u64) -> Result<(), JournalError> {
        let me = &self.inner;
        // Not renewed any more, whatever the store says now.
        me.held().remove(token);
        let tokens = i64::try_from(tokens).unwrap_or(i64::MAX);
        me.with(|c| {
            let mut tx = c.transaction()?;
            tx.execute("DELETE FROM backend_calls WHERE token = $1", &[&token])?;
            if tokens > 0 {
                tx.execute(
                    &format!(
                        "UPDATE backend_limits SET tokens = tokens + $2
                         WHERE backend = $1 AND window_ms = {NOW_MS} - {NOW_MS} % {MINUTE_MS}"
                    ),
                    &[&backend, &tokens],
                )?;
            }
            tx.commit()
        })
    }

    fn stop_waiting(&self, backend: &str) -> Result<(), JournalError> {
        let owner = &self.inner.owner;
        self.inner.with(|c| {
            c.execute(
                "DELETE FROM backend_waiters WHERE backend = $1 AND owner = $2",
                &[&backend, owner],
            )
        })?;
        Ok(())
    }

    fn pause(&self, backend: &str, pause: Duration) -> Result<(), JournalError> {
        let pause_ms = i64::try_from(pause.as_millis()).unwrap_or(i64::MAX / 2);
        self.inner.with(|c| {
            c.execute(
                &format!(
                    "INSERT INTO backend_limits (backend, paused_until_ms) VALUES ($1, {NOW_MS} + $2)
                     ON CONFLICT (backend) DO UPDATE SET paused_until_ms =
                     GREATEST(backend_limits.paused_until_ms, EXCLUDED.paused_until_ms)"
                ),
                &[&backend, &pause_ms],
            )
        })?;
        Ok(())
    }

    fn load(&self) -> Result<Vec<(String, BackendLoad)>, JournalError> {
        self.inner.with(|c| {
            let rows = c.query(
                &format!(
                    "SELECT l.backend, l.peak, l.waits, GREATEST(l.paused_until_ms - {NOW_MS}, 0),
                     (SELECT COUNT(*) FROM backend_calls b
                      WHERE b.backend = l.backend AND b.until_ms > {NOW_MS})
                     FROM backend_limits l ORDER BY l.backend"
                ),
                &[],
            )?;
            Ok(rows
                .iter()
                .map(|r| {
                    (
                        r.get(0),
                        BackendLoad {
                            peak: r.get(1),
                            waits: r.get(2),
                            paused_ms: r.get(3),
                            in_flight: r.get(4),
                        },
                    )
                })
                .collect())
        })
    }
}
