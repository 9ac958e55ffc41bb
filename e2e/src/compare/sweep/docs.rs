//! The sweep's documents: exactly `DOC_BYTES` of BSON each, made from the id alone (any order,
//! any process), with the fields an application document has: an int key `k` (a permutation of
//! `0..N`, so a range of 1,000 `k` values holds exactly 1,000 documents scattered over the
//! collection), a string key `s` with N/10 distinct values, a date, a nested sub-document with an
//! array, and padding. The same values go to PostgreSQL as JSON.

use crate::compare::dataset::Rng;
use bson::{Bson, DateTime, Document, doc};
use serde_json::json;
use std::sync::OnceLock;

/// BSON size of every document.
pub const DOC_BYTES: usize = 300;
/// The secondary indexes the sweep creates before loading.
pub const INDEX_INT: &str = "k";
pub const INDEX_STRING: &str = "s";

const SEED: u64 = 0x5EED_0000_CA1B_0300;
/// 2025-01-01T00:00:00Z; `at` falls in the year after it.
const AT_BASE_MS: i64 = 1_735_689_600_000;
const YEAR_MS: u64 = 365 * 24 * 3600 * 1000;
const CITIES: &[&str] = &[
    "lisbon", "oslo", "kyoto", "lima", "accra", "perth", "quito", "riga", "tunis", "hanoi",
];
const TAGS: &[&str] = &["new", "gift", "promo", "bulk", "retail", "export", "b2b"];
/// An odd multiplier, not a multiple of 5: coprime with every power of ten.
const SCRAMBLE_MUL: u64 = 2_654_435_761;

/// The `k` of document `id` in a collection of `n`: a bijection of `0..n` for `id < n` (ids past
/// `n`, inserted later, keep `k = id`, so `k` stays unique).
pub fn scramble(id: u64, n: u64) -> u64 {
    if id >= n {
        return id;
    }
    let mut mul = SCRAMBLE_MUL % n;
    while gcd(mul, n) != 1 {
        mul += 1;
    }
    ((u128::from(id) * u128::from(mul)) % u128::from(n)) as u64
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The varying values of one document; `bson()` and `json()` render the same values.
struct Fields {
    id: i64,
    k: i64,
    s: String,
    at_ms: i64,
    qty: i32,
    price: f64,
    city: &'static str,
    zip: i32,
    tags: Vec<&'static str>,
    active: bool,
}

impl Fields {
    fn new(id: u64, n: u64) -> Fields {
        let mut rng = Rng::new(SEED ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let cardinality = (n / 10).max(1);
        let tag_count = rng.below(4) as usize;
        Fields {
            id: id as i64,
            k: scramble(id, n) as i64,
            s: format!("cust-{:010}", rng.below(cardinality)),
            at_ms: AT_BASE_MS + rng.below(YEAR_MS) as i64,
            qty: 1 + rng.below(100) as i32,
            price: (rng.unit() * 100_000.0).round() / 100.0,
            city: CITIES[rng.below(CITIES.len() as u64) as usize],
            zip: 10_000 + rng.below(90_000) as i32,
            tags: (0..tag_count)
                .map(|_| TAGS[rng.below(TAGS.len() as u64) as usize])
                .collect(),
            active: rng.below(3) != 0,
        }
    }

    fn bson(&self, pad: &str) -> Document {
        let tags: Vec<Bson> = self.tags.iter().map(|t| Bson::from(*t)).collect();
        doc! {
            "_id": self.id,
            "k": self.k,
            "s": &self.s,
            "at": DateTime::from_millis(self.at_ms),
            "qty": self.qty,
            "price": self.price,
            "sub": {"city": self.city, "zip": self.zip, "tags": tags, "active": self.active},
            "pad": pad,
        }
    }

    /// Padding that brings the document to `DOC_BYTES`: only `city` and the tags vary in length
    /// (an array element costs 8 bytes besides its text), the rest is measured once.
    fn pad_len(&self) -> usize {
        static FIXED: OnceLock<usize> = OnceLock::new();
        let fixed = *FIXED.get_or_init(|| {
            let mut bare = Fields::new(0, 1);
            bare.city = "";
            bare.tags.clear();
            bson_len(&bare.bson(""))
        });
        let varying: usize = self.city.len() + self.tags.iter().map(|t| 8 + t.len()).sum::<usize>();
        DOC_BYTES.saturating_sub(fixed + varying)
    }
}

fn bson_len(d: &Document) -> usize {
    bson::RawDocumentBuf::try_from(d).map_or(0, |r| r.as_bytes().len())
}

fn pad(len: usize) -> String {
    "lorem ipsum dolor sit amet "
        .chars()
        .cycle()
        .take(len)
        .collect()
}

/// Document `id` of a collection of `n` documents.
pub fn document(id: u64, n: u64) -> Document {
    let f = Fields::new(id, n);
    f.bson(&pad(f.pad_len()))
}

/// The same document as JSON for PostgreSQL's `jsonb` (the date as RFC 3339 text).
pub fn json(id: u64, n: u64) -> serde_json::Value {
    let f = Fields::new(id, n);
    let at = DateTime::from_millis(f.at_ms)
        .try_to_rfc3339_string()
        .unwrap_or_default();
    json!({
        "_id": f.id, "k": f.k, "s": f.s, "at": at, "qty": f.qty, "price": f.price,
        "sub": {"city": f.city, "zip": f.zip, "tags": f.tags, "active": f.active},
        "pad": pad(f.pad_len()),
    })
}

/// The string key of document `id` (for point reads by `s`).
pub fn string_key(id: u64, n: u64) -> String {
    Fields::new(id, n).s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_document_has_the_target_size_and_is_deterministic() {
        for id in 0..2_000 {
            let d = document(id, 1_000_000);
            assert_eq!(bson_len(&d), DOC_BYTES, "id {id}: {d}");
        }
        assert_eq!(document(7, 100), document(7, 100));
        assert_ne!(document(7, 100), document(8, 100));
        let j = json(7, 100);
        assert_eq!(j["k"], serde_json::json!(scramble(7, 100)));
        assert_eq!(j["s"].as_str(), Some(string_key(7, 100).as_str()));
    }

    #[test]
    fn scramble_is_a_permutation() {
        for n in [1u64, 2, 10, 1_000, 4_096, 10_007] {
            let mut seen = vec![false; n as usize];
            for id in 0..n {
                let k = scramble(id, n);
                assert!(k < n && !seen[k as usize], "n {n} id {id} k {k}");
                seen[k as usize] = true;
            }
        }
        assert_eq!(scramble(12, 10), 12);
        // Neighbouring ids land far apart.
        assert!(scramble(1, 1_000_000).abs_diff(scramble(2, 1_000_000)) > 1_000);
    }
}
