//! The generated dataset the workloads run on: user records from a seeded generator, so the same
//! seed and count give byte-identical documents on every machine and every run (the generator is
//! our own SplitMix64, not a library RNG whose stream could change between versions).

use bson::{Bson, DateTime, Document, doc};

/// Default seed; any run with the same seed and count sees the same data.
pub const SEED: u64 = 0x00C0_FFEE_CA1B_0001;

const FIRST_NAMES: &[&str] = &[
    "ada",
    "alan",
    "barbara",
    "claude",
    "donald",
    "edsger",
    "frances",
    "grace",
    "hedy",
    "ivan",
    "john",
    "katherine",
    "leslie",
    "margaret",
    "niklaus",
    "radia",
    "shafi",
    "tim",
    "whitfield",
];
const LAST_NAMES: &[&str] = &[
    "allen",
    "backus",
    "corbato",
    "dijkstra",
    "engelbart",
    "floyd",
    "goldwasser",
    "hamilton",
    "hoare",
    "knuth",
    "lamport",
    "liskov",
    "mccarthy",
    "perlman",
    "ritchie",
    "thompson",
    "wirth",
];
const TAGS: &[&str] = &[
    "admin", "beta", "billing", "dev", "ops", "sales", "support", "vip",
];
const WORDS: &[&str] = &[
    "lorem", "ipsum", "dolor", "sit", "amet", "cairn", "stone", "path", "river", "north", "quiet",
];
/// 2024-01-01T00:00:00Z: created_at values fall in the year after it.
const CREATED_BASE_MS: i64 = 1_704_067_200_000;
const YEAR_MS: i64 = 365 * 24 * 3600 * 1000;

/// SplitMix64: tiny, fast, and fixed forever.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0; the tiny modulo bias is irrelevant for test data).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// The user record with id `id`; each id has its own stream so records can be made in any order.
pub fn user(seed: u64, id: i64) -> Document {
    let mut rng = Rng::new(seed ^ (id as u64).wrapping_mul(0xA24B_AED4_963E_E407));
    let first = rng.pick(FIRST_NAMES);
    let last = rng.pick(LAST_NAMES);
    let created_ms = CREATED_BASE_MS + rng.below(YEAR_MS as u64) as i64;
    let tag_count = rng.below(4);
    let tags: Vec<Bson> = (0..tag_count).map(|_| Bson::from(rng.pick(TAGS))).collect();
    let words: Vec<&str> = (0..8 + rng.below(16)).map(|_| rng.pick(WORDS)).collect();
    doc! {
        "_id": id,
        "username": format!("{first}.{last}{id}"),
        "email": format!("{first}.{last}.{id}@example.com"),
        "first_name": first,
        "last_name": last,
        "age": (18 + rng.below(70)) as i32,
        "height": 150.0 + (rng.unit() * 500.0).round() / 10.0,
        "weight": 45.0 + (rng.unit() * 700.0).round() / 10.0,
        "balance": (rng.unit() * 1_000_000.0).round() / 100.0,
        "is_active": rng.below(4) != 0,
        "created_at": DateTime::from_millis(created_ms),
        "updated_at": DateTime::from_millis(created_ms + rng.below(30 * 24 * 3600 * 1000) as i64),
        "login_count": rng.below(1000) as i64,
        "score": rng.unit() * 100.0,
        "description": words.join(" "),
        "tags": tags,
    }
}

/// Records `first..first + count`.
pub fn users(seed: u64, first: i64, count: i64) -> Vec<Document> {
    (first..first + count).map(|id| user(seed, id)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_is_deterministic_and_fields_complete() {
        assert_eq!(user(SEED, 42), user(SEED, 42));
        assert_ne!(user(SEED, 42), user(SEED, 43));
        assert_ne!(user(SEED, 42), user(SEED + 1, 42));
        let u = user(SEED, 7);
        for f in [
            "username",
            "email",
            "first_name",
            "last_name",
            "age",
            "height",
            "weight",
            "balance",
            "is_active",
            "created_at",
            "updated_at",
            "login_count",
            "score",
            "description",
            "tags",
        ] {
            assert!(u.contains_key(f), "missing {f}");
        }
        // Pinned first value: the stream must never change.
        assert_eq!(Rng::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
        let age = u.get_i32("age").unwrap_or(0);
        assert!((18..88).contains(&age));
    }
}
