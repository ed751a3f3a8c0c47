//! A run's attained service: how many of its LLM calls have been given a
//! slot so far. Admission orders waiting calls by it, least first
//! (Autellix's program-level least-attained-service): a server's fair
//! share (`ais_serve::fair`) counts it per run and stamps each call with
//! it, and the fleet's slots (`store::limits`) read it to order the calls
//! of one process and to let the fleet's least-served run go next.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The attained service of the run a call belongs to, shared by all its
/// calls (read when a slot frees, not when the call queued). A call of no
/// counted run reads 0. Not part of what is asked: equal to any other.
#[derive(Clone, Debug, Default)]
pub struct Attained(Option<Arc<AtomicU64>>);

impl Attained {
    /// The run's counter, shared with whoever counts its service.
    pub fn of(counter: &Arc<AtomicU64>) -> Attained {
        Attained(Some(Arc::clone(counter)))
    }

    /// Calls of the run given a slot so far (0 for an uncounted call).
    pub fn get(&self) -> u64 {
        self.0.as_ref().map_or(0, |c| c.load(Ordering::Relaxed))
    }
}

impl PartialEq for Attained {
    fn eq(&self, _: &Attained) -> bool {
        true
    }
}
