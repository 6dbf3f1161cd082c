//! Times per element as log-scale histograms: recorded from any thread with one relaxed
//! atomic add, merged across epochs, read as quantiles (the p50 / p99 of the run report).
//!
//! A bucket covers a quarter of an octave (values from `2^k·(1 + j/4)` to
//! `2^k·(1 + (j+1)/4)` nanoseconds), so a quantile is known to within 12 % of its value;
//! it is reported as the bucket's geometric middle.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Sub-buckets per octave.
const SUB: usize = 4;
/// Octaves of nanoseconds covered: 1 ns to 2^40 ns (18 minutes).
const OCTAVES: usize = 40;
const BUCKETS: usize = OCTAVES * SUB;

/// The bucket of `ns` (0 for 0 and 1 ns).
fn bucket(ns: u64) -> usize {
    if ns < 2 {
        return 0;
    }
    let octave = 63 - ns.leading_zeros() as usize;
    // The two bits below the leading one.
    let sub = if octave >= 2 {
        ((ns >> (octave - 2)) & 3) as usize
    } else {
        ((ns << (2 - octave)) & 3) as usize
    };
    (octave * SUB + sub).min(BUCKETS - 1)
}

/// The geometric middle of bucket `b`, in seconds.
fn middle_seconds(b: usize) -> f64 {
    let (octave, sub) = (b / SUB, b % SUB);
    let lo = (1u64 << octave) as f64 * (1.0 + sub as f64 / SUB as f64);
    let hi = (1u64 << octave) as f64 * (1.0 + (sub + 1) as f64 / SUB as f64);
    (lo * hi).sqrt() / 1e9
}

/// A live histogram of times per element (see the [module](self)).
#[derive(Debug)]
pub(crate) struct TimeHistogram {
    counts: Box<[AtomicU64]>,
}

impl Default for TimeHistogram {
    fn default() -> Self {
        TimeHistogram {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl TimeHistogram {
    /// Records `n` elements that took `ns` nanoseconds each.
    pub(crate) fn record(&self, ns: u64, n: u64) {
        if n > 0 {
            self.counts[bucket(ns)].fetch_add(n, Relaxed);
        }
    }

    /// The counts now.
    pub(crate) fn snapshot(&self) -> TimeDistribution {
        TimeDistribution {
            counts: self.counts.iter().map(|c| c.load(Relaxed)).collect(),
        }
    }
}

/// A snapshot of times per element: counts per bucket, mergeable, read as quantiles.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimeDistribution {
    counts: Vec<u64>,
}

impl TimeDistribution {
    /// Elements counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The time (seconds) below which a fraction `q` (0..=1) of the elements took, to
    /// within the bucket width (12 %); `None` without elements.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        // The element of rank ceil(q·total) (at least the first).
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(middle_seconds(b));
            }
        }
        None
    }

    /// Adds `other`'s counts (another epoch of the same stage).
    pub fn merge(&mut self, other: &TimeDistribution) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_quarter_octaves() {
        let mut last = 0;
        for ns in 0..100_000u64 {
            let b = bucket(ns);
            assert!(b >= last, "{ns}");
            last = b;
        }
        // 1 µs and 1.3 µs are in neighbouring quarter-octave buckets (1024·1.25 = 1280).
        assert_eq!(bucket(1279) + 1, bucket(1280));
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_are_within_the_bucket_width() {
        let h = TimeHistogram::default();
        // 98 elements of 10 µs, 2 of 5 ms: p50 is about 10 µs, p99 about 5 ms.
        h.record(10_000, 98);
        h.record(5_000_000, 2);
        let d = h.snapshot();
        assert_eq!(d.count(), 100);
        let p50 = d.quantile(0.5).unwrap();
        let p99 = d.quantile(0.99).unwrap();
        assert!((p50 / 10e-6 - 1.0).abs() < 0.12, "{p50}");
        assert!((p99 / 5e-3 - 1.0).abs() < 0.12, "{p99}");
        assert_eq!(TimeDistribution::default().quantile(0.5), None);
    }

    #[test]
    fn merging_adds_counts() {
        let (a, b) = (TimeHistogram::default(), TimeHistogram::default());
        a.record(1_000, 3);
        b.record(1_000_000, 3);
        let mut d = a.snapshot();
        d.merge(&b.snapshot());
        assert_eq!(d.count(), 6);
        assert!(d.quantile(1.0).unwrap() > 0.9e-3);
        let mut empty = TimeDistribution::default();
        empty.merge(&d);
        assert_eq!(empty, d);
    }
}
