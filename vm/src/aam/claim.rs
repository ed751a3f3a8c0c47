//! `claim(queue:, lease_ms:, max_wait_ms:)`, the reference's coordination
//! op: take a job of a named work queue, leased for `lease_ms` (when the
//! lease runs out before the job is claimed again, another claimer may take
//! it; without `lease_ms` a claim is for good), waiting up to `max_wait_ms`
//! for one to arrive. Its three results are the reference's names beside
//! ours: `task_data` (the job), `task_id`, `claim_token`.

use crate::host::HostError;
use crate::llm::CancelToken;
use serde_json::Value as Json;
use std::time::{Duration, Instant};

/// How often an empty queue is asked again while waiting.
const POLL: Duration = Duration::from_millis(20);

/// A non-negative whole number of milliseconds named `k` in `args`.
pub(super) fn millis(args: &Json, k: &str) -> Result<Option<u64>, HostError> {
    match args.get(k) {
        None | Some(Json::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(n) if n >= 0.0 && n.is_finite() => Ok(Some(n as u64)),
            _ => Err(HostError::new(
                "tool.invalid_args",
                format!("`claim`: `{k}` is a number of milliseconds (0 or more), not {v}"),
            )),
        },
    }
}

/// Calls `take` until it gives a job (not `null`) or `max_wait` has
/// passed (`None`: once); the run's cancellation stops the wait.
pub(super) fn waiting<T>(
    max_wait: Option<u64>,
    cancel: &CancelToken,
    mut take: impl FnMut() -> Result<(Json, T), HostError>,
) -> Result<(Json, T), HostError> {
    let deadline = max_wait.map(|ms| Instant::now() + Duration::from_millis(ms));
    loop {
        let got = take()?;
        if !got.0.is_null() {
            return Ok(got);
        }
        let Some(deadline) = deadline else {
            return Ok(got);
        };
        let now = Instant::now();
        if now >= deadline {
            return Ok(got);
        }
        if cancel.is_cancelled() {
            return Err(HostError::new("cancelled", "the run was cancelled"));
        }
        std::thread::sleep(POLL.min(deadline - now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn without_a_wait_an_empty_queue_is_asked_once() {
        let mut asked = 0;
        let got = waiting(None, &CancelToken::new(), || {
            asked += 1;
            Ok((Json::Null, ()))
        })
        .expect("claims");
        assert_eq!((got.0, asked), (Json::Null, 1));
    }

    #[test]
    fn a_wait_asks_again_until_a_job_arrives() {
        let mut asked = 0;
        let got = waiting(Some(600_000), &CancelToken::new(), || {
            asked += 1;
            Ok((
                if asked < 3 {
                    Json::Null
                } else {
                    json!({"id": 1})
                },
                (),
            ))
        })
        .expect("claims");
        assert_eq!((got.0, asked), (json!({"id": 1}), 3));
    }

    #[test]
    fn a_wait_ends_empty_at_its_deadline_or_when_cancelled() {
        let mut asked = 0;
        let got = waiting(Some(30), &CancelToken::new(), || {
            asked += 1;
            Ok((Json::Null, ()))
        })
        .expect("claims");
        assert_eq!(got.0, Json::Null);
        assert!(asked >= 2, "asked again while waiting ({asked})");
        let cancel = CancelToken::new();
        cancel.cancel();
        let err = waiting(Some(600_000), &cancel, || Ok((Json::Null, ()))).expect_err("cancelled");
        assert_eq!(err.code, "cancelled");
    }

    #[test]
    fn lease_and_wait_are_milliseconds() {
        assert_eq!(
            millis(&json!({"lease_ms": 500}), "lease_ms").expect("ms"),
            Some(500)
        );
        assert_eq!(millis(&json!({}), "lease_ms").expect("ms"), None);
        assert!(millis(&json!({"lease_ms": -1}), "lease_ms").is_err());
        assert!(millis(&json!({"lease_ms": "soon"}), "lease_ms").is_err());
    }
}
