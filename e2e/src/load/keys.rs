//! Which record an operation touches: YCSB's request distributions over record numbers
//! (`uniform`, `zipfian` — scrambled, so the popular records are spread over the key space —
//! and `latest`, skewed towards the newest insert), and the small deterministic random source
//! every worker owns (seeded per worker, so a run is repeatable given `--seed`).
//!
//! The zipfian sampler is the Gray et al. "quickly generating billion-record synthetic databases"
//! method that YCSB uses, with YCSB's constant 0.99. The scrambled form draws from a zipfian over
//! ten billion items and hashes the draw (FNV-1a, 64 bit) into the record count, as YCSB does;
//! `latest` subtracts a zipfian draw over the current record count from the newest record.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// YCSB's zipfian constant.
pub const ZIPFIAN_THETA: f64 = 0.99;
/// Items of the zipfian behind the scrambled distribution (YCSB's), and its zeta for theta 0.99
/// (the sum over i in 1..=ITEMS of 1/i^theta, precomputed by YCSB because it takes minutes).
const SCRAMBLED_ITEMS: u64 = 10_000_000_000;
const SCRAMBLED_ZETA: f64 = 26.469_028_201_783_02;

/// SplitMix64: tiny, fast, statistically fine for choosing keys and field values.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, n); n = 0 gives 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// FNV-1a over the 8 little-endian bytes of `v` (YCSB's `fnvhash64`).
pub fn fnv64(v: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in v.to_le_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

fn zeta(from: u64, to: u64, theta: f64, start_sum: f64) -> f64 {
    (from..to).fold(start_sum, |sum, i| sum + 1.0 / ((i + 1) as f64).powf(theta))
}

/// A zipfian over [0, items) whose item count may grow (zeta is extended incrementally).
#[derive(Clone, Debug)]
pub struct Zipfian {
    items: u64,
    zeta_n: f64,
    zeta_2: f64,
    alpha: f64,
    eta: f64,
}

impl Zipfian {
    pub fn new(items: u64) -> Zipfian {
        Zipfian::with_zeta(items.max(1), zeta(0, items.max(1), ZIPFIAN_THETA, 0.0))
    }

    fn with_zeta(items: u64, zeta_n: f64) -> Zipfian {
        let zeta_2 = zeta(0, 2, ZIPFIAN_THETA, 0.0);
        let mut z = Zipfian {
            items,
            zeta_n,
            zeta_2,
            alpha: 1.0 / (1.0 - ZIPFIAN_THETA),
            eta: 0.0,
        };
        z.eta = z.eta_for();
        z
    }

    fn eta_for(&self) -> f64 {
        let n = self.items as f64;
        (1.0 - (2.0 / n).powf(1.0 - ZIPFIAN_THETA)) / (1.0 - self.zeta_2 / self.zeta_n)
    }

    /// Grow to `items` (never shrinks: a smaller count is ignored).
    fn grow(&mut self, items: u64) {
        if items > self.items {
            self.zeta_n = zeta(self.items, items, ZIPFIAN_THETA, self.zeta_n);
            self.items = items;
            self.eta = self.eta_for();
        }
    }

    /// A draw in [0, items): 0 is the most popular.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let u = rng.unit();
        let uz = u * self.zeta_n;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(ZIPFIAN_THETA) {
            return 1.min(self.items - 1);
        }
        let v = self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha);
        (v as u64).min(self.items - 1)
    }
}

/// The request distributions of YCSB's workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    Uniform,
    Zipfian,
    Latest,
}

impl std::str::FromStr for Distribution {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "uniform" => Ok(Distribution::Uniform),
            "zipfian" => Ok(Distribution::Zipfian),
            "latest" => Ok(Distribution::Latest),
            _ => Err(format!(
                "unknown distribution {s:?} (uniform, zipfian, latest)"
            )),
        }
    }
}

/// The record numbers of one system's table: `0..next` exist or are being inserted.
#[derive(Debug)]
pub struct KeySpace {
    next: AtomicU64,
}

impl KeySpace {
    pub fn new(records: u64) -> Arc<KeySpace> {
        Arc::new(KeySpace {
            next: AtomicU64::new(records),
        })
    }

    /// A fresh record number for an insert.
    pub fn claim(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    pub fn count(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }
}

/// One worker's chooser of existing records.
#[derive(Clone, Debug)]
pub struct Chooser {
    distribution: Distribution,
    scrambled: Zipfian,
    latest: Zipfian,
}

impl Chooser {
    /// `latest` is a zipfian built for `records` (cloned into every worker: building costs
    /// O(records)); the scrambled one is YCSB's fixed ten-billion-item zipfian.
    pub fn new(distribution: Distribution, latest: &Zipfian) -> Chooser {
        Chooser {
            distribution,
            scrambled: Zipfian::with_zeta(SCRAMBLED_ITEMS, SCRAMBLED_ZETA),
            latest: latest.clone(),
        }
    }

    pub fn next(&mut self, rng: &mut Rng, keys: &KeySpace) -> u64 {
        let count = keys.count().max(1);
        match self.distribution {
            Distribution::Uniform => rng.below(count),
            Distribution::Zipfian => fnv64(self.scrambled.sample(rng)) % count,
            Distribution::Latest => {
                self.latest.grow(count);
                (count - 1).saturating_sub(self.latest.sample(rng))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipfian_prefers_low_ranks_and_stays_in_range() {
        let z = Zipfian::new(1000);
        let mut rng = Rng::new(7);
        let mut hist = vec![0u32; 1000];
        for _ in 0..100_000 {
            hist[z.sample(&mut rng) as usize] += 1;
        }
        // theta 0.99: item 0 takes about 1/zeta(1000) = 13% of the draws, item 1 about half that.
        assert!((11_000..15_500).contains(&hist[0]), "{}", hist[0]);
        assert!(hist[1] > hist[10] && hist[10] > hist[500]);
    }

    #[test]
    fn growing_matches_building_at_once() {
        let mut grown = Zipfian::new(10);
        grown.grow(5000);
        let built = Zipfian::new(5000);
        assert!((grown.zeta_n - built.zeta_n).abs() < 1e-9);
        assert!((grown.eta - built.eta).abs() < 1e-12);
    }

    #[test]
    fn choosers_stay_below_the_record_count() {
        let keys = KeySpace::new(500);
        let latest = Zipfian::new(500);
        let mut rng = Rng::new(1);
        for d in [
            Distribution::Uniform,
            Distribution::Zipfian,
            Distribution::Latest,
        ] {
            let mut c = Chooser::new(d, &latest);
            assert!((0..10_000).all(|_| c.next(&mut rng, &keys) < 500));
        }
        // latest: most draws are among the newest records.
        let mut c = Chooser::new(Distribution::Latest, &latest);
        let newest = (0..10_000)
            .filter(|_| c.next(&mut rng, &keys) >= 450)
            .count();
        assert!(newest > 5_000, "{newest}");
        assert_eq!(keys.claim(), 500);
        assert_eq!(keys.count(), 501);
    }

    #[test]
    fn rng_below_is_uniform_enough() {
        let mut rng = Rng::new(3);
        let mut buckets = [0u32; 4];
        for _ in 0..40_000 {
            buckets[rng.below(4) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|b| (9_000..11_000).contains(b)),
            "{buckets:?}"
        );
        assert_eq!(rng.below(0), 0);
    }
}
