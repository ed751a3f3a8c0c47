//! The latency a backend has shown, per op kind: the last answers'
//! latencies, and the quantile that decides when a call is late enough to
//! hedge, counting the calls still in flight (a fan-out's slowest calls
//! are exactly the ones that have not answered yet).

use std::collections::VecDeque;
use std::time::Duration;

/// Answers remembered per op kind (also per kind in the history file).
pub(super) const WINDOW: usize = 256;
/// Observations (answers plus calls in flight old enough to count)
/// needed before a quantile is trusted.
const MIN_SAMPLES: usize = 16;

/// Latencies of the last [`WINDOW`] answers of one op kind.
#[derive(Clone, Debug, Default)]
pub struct LatencySketch {
    recent: VecDeque<Duration>,
}

impl LatencySketch {
    pub fn record(&mut self, latency: Duration) {
        if self.recent.len() == WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(latency);
    }

    /// Puts latencies observed before this process (oldest first) behind
    /// the ones it has seen, keeping the newest [`WINDOW`].
    pub fn seed(&mut self, older: &[Duration]) {
        let room = WINDOW - self.recent.len();
        let start = older.len().saturating_sub(room);
        for &d in older[start..].iter().rev() {
            self.recent.push_front(d);
        }
    }

    /// The latencies remembered, oldest first.
    pub fn latencies(&self) -> impl Iterator<Item = Duration> + '_ {
        self.recent.iter().copied()
    }

    pub fn len(&self) -> usize {
        self.recent.len()
    }

    pub fn is_empty(&self) -> bool {
        self.recent.is_empty()
    }

    /// The `q` quantile of the latency, or `None` while too little is known.
    ///
    /// `in_flight` holds how long each call still out has waited so far.
    /// A call out for longer than a candidate `x` is known to take more
    /// than `x`, so it counts against `x`; one out for less is unknown
    /// and left out. The result is the smallest answered latency `x` with
    /// `answered ≤ x  ≥  q × (answered + in flight longer than x)`. With
    /// no history, a fan-out of 64 whose 61 fastest calls have answered
    /// gets the 61st answer's latency as its p95.
    pub fn quantile(&self, q: f64, in_flight: &[Duration]) -> Option<Duration> {
        let mut done: Vec<Duration> = self.recent.iter().copied().collect();
        done.sort_unstable();
        let mut waiting: Vec<Duration> = in_flight.to_vec();
        waiting.sort_unstable();
        let total_waiting = waiting.len();
        // `w`: how many calls in flight have waited at most `x` so far.
        let mut w = 0;
        for (i, &x) in done.iter().enumerate() {
            while w < total_waiting && waiting[w] <= x {
                w += 1;
            }
            let below = (i + 1) as f64;
            let counted = done.len() + (total_waiting - w);
            if counted >= MIN_SAMPLES && below >= q * counted as f64 {
                return Some(x);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn too_few_answers_give_no_quantile() {
        let mut s = LatencySketch::default();
        for i in 0..(MIN_SAMPLES as u64 - 1) {
            s.record(ms(10 + i));
        }
        assert_eq!(s.quantile(0.95, &[]), None);
        s.record(ms(100));
        assert_eq!(s.quantile(0.5, &[]), Some(ms(17)));
    }

    #[test]
    fn slow_calls_in_flight_count_as_slower() {
        // A cold fan-out of 64: 61 answered (10..=70 ms), 3 still out at 200 ms.
        let mut s = LatencySketch::default();
        for i in 0..61 {
            s.record(ms(10 + i));
        }
        let out = [ms(200); 3];
        assert_eq!(s.quantile(0.95, &out), Some(ms(70)));
        // With 10 still out the 95th percentile is not known yet.
        assert_eq!(s.quantile(0.95, &[ms(200); 10]), None);
    }

    #[test]
    fn young_calls_in_flight_are_left_out() {
        let mut s = LatencySketch::default();
        for i in 0..100 {
            s.record(ms(i + 1));
        }
        // 64 calls just started say nothing about the tail.
        assert_eq!(s.quantile(0.95, &[ms(0); 64]), Some(ms(95)));
    }

    #[test]
    fn seeded_history_sits_behind_new_answers() {
        let mut s = LatencySketch::default();
        s.record(ms(1));
        s.seed(
            &(0..WINDOW as u64 + 10)
                .map(|i| ms(100 + i))
                .collect::<Vec<_>>(),
        );
        let all: Vec<_> = s.latencies().collect();
        assert_eq!(all.len(), WINDOW);
        // The newest seeded latencies survive, in order, before the answer
        // this process saw.
        assert_eq!(all[0], ms(100 + 11));
        assert_eq!(all[WINDOW - 2], ms(100 + WINDOW as u64 + 9));
        assert_eq!(all[WINDOW - 1], ms(1));
    }

    #[test]
    fn the_window_forgets_old_answers() {
        let mut s = LatencySketch::default();
        for _ in 0..WINDOW {
            s.record(ms(1000));
        }
        for _ in 0..WINDOW {
            s.record(ms(10));
        }
        assert_eq!(s.len(), WINDOW);
        assert_eq!(s.quantile(0.99, &[]), Some(ms(10)));
    }
}
