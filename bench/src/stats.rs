//! Summary statistics of repeated measurements.

use serde::{Deserialize, Serialize};

/// Mean ± sample standard deviation and percentiles of a set of samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub n: usize,
    pub mean: f64,
    pub std: f64,
    pub p50: f64,
    pub p95: f64,
    pub min: f64,
    pub max: f64,
}

impl Stats {
    /// `None` for no samples.
    pub fn of(samples: &[f64]) -> Option<Stats> {
        if samples.is_empty() {
            return None;
        }
        let n = samples.len();
        let mean = samples.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        Some(Stats {
            n,
            mean,
            std: var.sqrt(),
            p50: percentile(&s, 50.0),
            p95: percentile(&s, 95.0),
            min: s[0],
            max: s[n - 1],
        })
    }

    /// `mean ± std` with one decimal.
    pub fn pm(&self) -> String {
        format!("{:.1} ± {:.1}", self.mean, self.std)
    }
}

/// Linear-interpolation percentile of sorted, non-empty samples.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        1 => sorted[0],
        n => {
            let rank = (p / 100.0).clamp(0.0, 1.0) * (n - 1) as f64;
            let lo = rank.floor() as usize;
            let hi = rank.ceil() as usize;
            let w = rank - lo as f64;
            sorted[lo] * (1.0 - w) + sorted[hi.min(n - 1)] * w
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_stats() {
        let s = Stats::of(&[1.0, 2.0, 3.0, 4.0]).expect("samples");
        assert_eq!(s.mean, 2.5);
        assert_eq!(s.p50, 2.5);
        assert!((s.std - 1.2909944).abs() < 1e-6);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 4.0);
        assert!(Stats::of(&[]).is_none());
        assert_eq!(Stats::of(&[7.0]).map(|s| (s.p95, s.std)), Some((7.0, 0.0)));
    }
}
