//! Fixed-bucket histograms of counts kept with atomics, so the commit path records a sync's
//! duration and batch size without a lock. The server turns a snapshot into Prometheus buckets;
//! this crate knows nothing of the exposition format.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Bucket upper bounds of fdatasync durations, in microseconds.
pub const SYNC_US_BOUNDS: &[u64] = &[
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000,
];
/// Bucket upper bounds of group-commit batch sizes, in log records per sync.
pub const BATCH_RECORDS_BOUNDS: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096];
/// Bucket upper bounds of writers made durable per group-commit sync (0: a sync nobody waited
/// for, e.g. the timer's).
pub const WRITERS_BOUNDS: &[u64] = &[0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128];

/// The most buckets a histogram has (its bounds plus one for everything above them).
const BUCKETS_MAX: usize = 16;
const _: () = assert!(
    SYNC_US_BOUNDS.len() < BUCKETS_MAX
        && BATCH_RECORDS_BOUNDS.len() < BUCKETS_MAX
        && WRITERS_BOUNDS.len() < BUCKETS_MAX
);

pub struct Histogram {
    bounds: &'static [u64],
    counts: [AtomicU64; BUCKETS_MAX],
    sum: AtomicU64,
}

/// A histogram's state at one moment: per-bucket (not cumulative) counts, the last one past the
/// highest bound.
#[derive(Clone, Debug, Default)]
pub struct HistogramSnapshot {
    pub bounds: &'static [u64],
    pub counts: Vec<u64>,
    pub sum: u64,
}

impl HistogramSnapshot {
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

impl Histogram {
    pub fn new(bounds: &'static [u64]) -> Histogram {
        debug_assert!(bounds.windows(2).all(|w| w[0] < w[1]));
        Histogram {
            bounds,
            counts: Default::default(),
            sum: AtomicU64::new(0),
        }
    }

    pub fn record(&self, value: u64) {
        let i = self.bounds.partition_point(|&b| b < value);
        self.counts[i].fetch_add(1, Relaxed);
        self.sum.fetch_add(value, Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            bounds: self.bounds,
            counts: self.counts[..=self.bounds.len()]
                .iter()
                .map(|c| c.load(Relaxed))
                .collect(),
            sum: self.sum.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_in_their_bucket() {
        let h = Histogram::new(&[1, 10, 100]);
        for v in [0, 1, 2, 10, 11, 100, 101, 5000] {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!(s.counts, vec![2, 2, 2, 2]);
        assert_eq!(s.count(), 8);
        assert_eq!(s.sum, 5225);
    }
}
