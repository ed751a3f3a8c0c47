//! Retry policies of queued runs and the dead-letter view: a run that
//! fails with an error of a class its policy names is queued again (its
//! journal kept, so completed calls are replayed, not repeated) after a
//! backoff, until its last attempt; then it is dead. `aisc runs --dead`
//! lists dead runs, `aisc runs requeue ID [--set k=v]` puts one back
//! (docs/scale-out.md). Kept in `runs` rows of the PostgreSQL store.

/// When and how often a failed run is tried again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all (the first included); at least 1.
    pub attempts: i32,
    /// Wait before attempt `n + 1`: `backoff_ms * 2^(n - 1)`.
    pub backoff_ms: i64,
    /// Error classes (codes, or their prefixes up to a dot: `llm`,
    /// `llm.timeout`) that are retried; empty: every failure but a cancel.
    pub on: Vec<String>,
}

impl RetryPolicy {
    /// Whether a failure of class `class` is retried.
    pub fn retries(on: &str, class: &str) -> bool {
        if class == "cancelled" {
            return false;
        }
        let on: Vec<&str> = on
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        on.is_empty()
            || on.iter().any(|c| {
                class == *c
                    || class
                        .strip_prefix(c)
                        .is_some_and(|rest| rest.starts_with('.'))
            })
    }
}

/// What became of a failed run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterFailure {
    /// No policy (or the failure was not recorded under this fence): it
    /// stays failed.
    Stays,
    /// Queued for attempt `attempt` of `of`, taken no sooner than
    /// `in_ms` from now.
    Requeued { attempt: i32, of: i32, in_ms: i64 },
    /// Its last attempt failed (or the class is not retried): dead.
    Dead { attempts: i32 },
}

/// A dead letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadRun {
    pub id: String,
    pub program: String,
    pub attempts: i32,
    /// The last attempt's error.
    pub reason: String,
    pub ended_ms: Option<i64>,
    pub key: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::RetryPolicy;

    #[test]
    fn classes_match_whole_codes_or_dotted_prefixes() {
        assert!(RetryPolicy::retries("", "llm.timeout"));
        assert!(!RetryPolicy::retries("", "cancelled"));
        assert!(RetryPolicy::retries("llm", "llm.timeout"));
        assert!(RetryPolicy::retries("tool, llm.timeout", "llm.timeout"));
        assert!(!RetryPolicy::retries("llm", "llmx.timeout"));
        assert!(!RetryPolicy::retries("llm.timeout", "llm.rate_limited"));
        assert!(!RetryPolicy::retries("tool", "arith.div_by_zero"));
    }
}
