//! Schedules: a program queued again at every tick of a cron expression in
//! a time zone, by whichever worker of the fleet looks first (docs/
//! scale-out.md, "Schedules").
//!
//! Exactly one run per tick: a tick's run has the id `SCHEDULE-tTICK_MS`,
//! and the store inserts it once (the id is the runs table's key) in the
//! same transaction that moves the schedule to its next tick, under a row
//! lock that other workers skip. A tick missed while no worker was up is
//! fired when one comes back, if it is at most [`CATCH_UP_MS`] old; older
//! ticks are skipped and counted.

use super::NewRun;
use crate::store::rows::JournalError;
use croner::Cron;
use jiff::tz::TimeZone;
use jiff::Timestamp;
use std::str::FromStr;

/// Ticks older than this when a worker first sees them are skipped.
pub const CATCH_UP_MS: i64 = 3_600_000;

/// Ticks fired for one schedule in one look, so a schedule far behind
/// cannot hold its row lock for long; the next look goes on.
pub const MAX_TICKS_PER_LOOK: usize = 100;

/// Why a cron expression or time zone was refused.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error("schedule.cron: `{expr}` is not a cron expression: {why} (five fields `min hour day month weekday`, or six with seconds first)")]
    Cron { expr: String, why: String },
    #[error(
        "schedule.tz: `{tz}` is not a time zone name (an IANA name such as `UTC` or `Europe/Oslo`)"
    )]
    TimeZone { tz: String },
    #[error("schedule.never: `{expr}` has no tick after {after}")]
    Never { expr: String, after: String },
}

/// A cron expression in a time zone.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    cron: Cron,
    expr: String,
    tz: TimeZone,
}

impl CronSchedule {
    /// Parses `expr` (5 fields, or 6 with seconds) in the IANA zone `tz`.
    pub fn parse(expr: &str, tz: &str) -> Result<CronSchedule, ScheduleError> {
        let cron = Cron::from_str(expr).map_err(|e| ScheduleError::Cron {
            expr: expr.to_string(),
            why: e.to_string(),
        })?;
        let zone = TimeZone::get(tz).map_err(|_| ScheduleError::TimeZone { tz: tz.to_string() })?;
        Ok(CronSchedule {
            cron,
            expr: expr.to_string(),
            tz: zone,
        })
    }

    /// The first tick strictly after `ms` (Unix milliseconds), or `None` if
    /// there is none (a date that never comes).
    pub fn next_after(&self, ms: i64) -> Option<i64> {
        let start = Timestamp::from_millisecond(ms)
            .ok()?
            .to_zoned(self.tz.clone());
        let next = self.cron.find_next_occurrence(&start, false).ok()?;
        Some(next.timestamp().as_millisecond())
    }

    /// The first tick after `ms`, or the error naming the expression.
    pub fn first_after(&self, ms: i64) -> Result<i64, ScheduleError> {
        self.next_after(ms).ok_or_else(|| ScheduleError::Never {
            expr: self.expr.clone(),
            after: Timestamp::from_millisecond(ms)
                .map_or_else(|_| ms.to_string(), |t| t.to_string()),
        })
    }
}

/// A schedule to store: the run to queue at each tick, and when.
pub struct NewSchedule<'a> {
    pub id: &'a str,
    pub cron: &'a str,
    pub tz: &'a str,
    /// The first tick (Unix ms).
    pub next_ms: i64,
    /// The run queued at each tick; its `id` is ignored (each tick's run
    /// is `ID-tTICK`).
    pub run: NewRun<'a>,
}

/// A stored schedule, as `aisc schedules` lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ScheduleInfo {
    pub id: String,
    pub cron: String,
    pub tz: String,
    pub program: String,
    pub entry: Option<String>,
    /// The next tick to fire (Unix ms); `None` once there is none.
    pub next_ms: Option<i64>,
    /// Ticks fired (runs queued) so far.
    pub fired: i64,
    /// Ticks skipped: older than the catch-up window when first seen.
    pub skipped: i64,
    pub last_run: Option<String>,
    pub created_ms: i64,
}

/// The run id of a schedule's tick.
pub fn tick_run_id(schedule: &str, tick_ms: i64) -> String {
    format!("{schedule}-t{tick_ms}")
}

/// What one look at a due schedule decided: the ticks to fire (each gets a
/// run), how many were skipped, and the schedule's next tick.
#[derive(Debug, PartialEq, Eq)]
pub struct TickPlan {
    pub fire: Vec<i64>,
    pub skipped: i64,
    pub next_ms: Option<i64>,
}

/// Plans the ticks of a schedule whose next tick is `next_ms`, at `now_ms`
/// (the store's clock): every due tick within the catch-up window, at most
/// [`MAX_TICKS_PER_LOOK`]; older ones skipped.
pub fn plan_ticks(cron: &CronSchedule, next_ms: i64, now_ms: i64) -> TickPlan {
    let mut plan = TickPlan {
        fire: Vec::new(),
        skipped: 0,
        next_ms: Some(next_ms),
    };
    while let Some(tick) = plan.next_ms {
        if tick > now_ms || plan.fire.len() >= MAX_TICKS_PER_LOOK {
            break;
        }
        if now_ms - tick > CATCH_UP_MS {
            plan.skipped += 1;
        } else {
            plan.fire.push(tick);
        }
        plan.next_ms = cron.next_after(tick);
    }
    plan
}

/// Refused by stores without a shared queue.
pub(crate) fn no_schedules(backend: &str) -> JournalError {
    JournalError::new(
        "store.unsupported",
        format!("the {backend} store has no schedules: they live in a shared store that workers take runs from (`--store postgres://...`)"),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ms(s: &str) -> i64 {
        s.parse::<Timestamp>().unwrap().as_millisecond()
    }

    #[test]
    fn ticks_follow_the_time_zone_across_daylight_saving() {
        let oslo = CronSchedule::parse("0 9 * * *", "Europe/Oslo").unwrap();
        // Winter: 09:00 in Oslo is 08:00 UTC; summer: 07:00 UTC.
        assert_eq!(
            oslo.next_after(ms("2026-01-10T12:00:00Z")),
            Some(ms("2026-01-11T08:00:00Z"))
        );
        assert_eq!(
            oslo.next_after(ms("2026-07-10T12:00:00Z")),
            Some(ms("2026-07-11T07:00:00Z"))
        );
        let utc = CronSchedule::parse("*/15 * * * * *", "UTC").unwrap();
        assert_eq!(
            utc.next_after(ms("2026-01-10T12:00:00Z")),
            Some(ms("2026-01-10T12:00:15Z"))
        );
    }

    #[test]
    fn bad_expressions_and_zones_are_refused_with_the_reason() {
        let e = CronSchedule::parse("61 * * * *", "UTC").unwrap_err();
        assert!(
            e.to_string().starts_with("schedule.cron: `61 * * * *`"),
            "{e}"
        );
        let e = CronSchedule::parse("* * * * *", "Mars/Olympus").unwrap_err();
        assert!(e.to_string().starts_with("schedule.tz:"), "{e}");
        let e = CronSchedule::parse("0 0 31 2 *", "UTC").unwrap();
        assert!(e.first_after(ms("2026-01-01T00:00:00Z")).is_err());
    }

    #[test]
    fn due_ticks_are_fired_once_each_and_old_ones_skipped() {
        let every_minute = CronSchedule::parse("* * * * *", "UTC").unwrap();
        let now = ms("2026-01-10T12:00:30Z");
        // Three ticks due: each fired, the next is in the future.
        let plan = plan_ticks(&every_minute, ms("2026-01-10T11:58:00Z"), now);
        assert_eq!(
            plan,
            TickPlan {
                fire: vec![
                    ms("2026-01-10T11:58:00Z"),
                    ms("2026-01-10T11:59:00Z"),
                    ms("2026-01-10T12:00:00Z")
                ],
                skipped: 0,
                next_ms: Some(ms("2026-01-10T12:01:00Z")),
            }
        );
        // Two hours behind: ticks more than an hour old (10:00 to 11:00,
        // it is 12:00:30) are skipped, the last hour's fired.
        let plan = plan_ticks(&every_minute, ms("2026-01-10T10:00:00Z"), now);
        assert_eq!(plan.skipped, 61);
        assert_eq!(plan.fire.first(), Some(&ms("2026-01-10T11:01:00Z")));
        assert_eq!(plan.fire.len(), 60);
        // Not due yet: nothing.
        let plan = plan_ticks(&every_minute, ms("2026-01-10T12:01:00Z"), now);
        assert!(plan.fire.is_empty() && plan.skipped == 0);
    }
}
