//! YCSB's core workloads A–F and the durable single insert, as operation mixes over one table of
//! `records` records with `fields` string fields of `field_bytes` bytes each (YCSB's defaults:
//! 10 fields of 100 bytes). Reads read the whole record, updates write one field, scans read
//! 1..=`scan_length_max` records in key order from a chosen key (uniform length), and a
//! read-modify-write reads a record and then updates one of its fields.

use crate::load::keys::{Distribution, Rng};

/// What one operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

/// A named mix of operations (proportions sum to 1) and its request distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Workload {
    A,
    B,
    C,
    D,
    E,
    F,
    /// Durable single inserts (w:1, j:true; PostgreSQL synchronous_commit on), nothing else.
    Insert,
}

impl Workload {
    pub const ALL: [Workload; 7] = [
        Workload::A,
        Workload::B,
        Workload::C,
        Workload::D,
        Workload::E,
        Workload::F,
        Workload::Insert,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::A => "A",
            Workload::B => "B",
            Workload::C => "C",
            Workload::D => "D",
            Workload::E => "E",
            Workload::F => "F",
            Workload::Insert => "insert",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Workload::A => "50% read, 50% update, zipfian",
            Workload::B => "95% read, 5% update, zipfian",
            Workload::C => "100% read, zipfian",
            Workload::D => "95% read, 5% insert, latest",
            Workload::E => "95% scan (1-100), 5% insert, zipfian",
            Workload::F => "50% read, 50% read-modify-write, zipfian",
            Workload::Insert => "100% durable single insert",
        }
    }

    /// (operation, proportion) pairs.
    pub fn mix(self) -> &'static [(Op, f64)] {
        match self {
            Workload::A => &[(Op::Read, 0.5), (Op::Update, 0.5)],
            Workload::B => &[(Op::Read, 0.95), (Op::Update, 0.05)],
            Workload::C => &[(Op::Read, 1.0)],
            Workload::D => &[(Op::Read, 0.95), (Op::Insert, 0.05)],
            Workload::E => &[(Op::Scan, 0.95), (Op::Insert, 0.05)],
            Workload::F => &[(Op::Read, 0.5), (Op::ReadModifyWrite, 0.5)],
            Workload::Insert => &[(Op::Insert, 1.0)],
        }
    }

    pub fn distribution(self) -> Distribution {
        match self {
            Workload::D => Distribution::Latest,
            _ => Distribution::Zipfian,
        }
    }

    pub fn choose(self, rng: &mut Rng) -> Op {
        let mix = self.mix();
        let mut u = rng.unit();
        for (op, p) in mix {
            if u < *p {
                return *op;
            }
            u -= p;
        }
        mix[mix.len() - 1].0
    }
}

impl std::str::FromStr for Workload {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Workload::ALL
            .into_iter()
            .find(|w| w.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown workload {s:?} (A, B, C, D, E, F, insert)"))
    }
}

/// The shape of a record.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Shape {
    pub fields: usize,
    pub field_bytes: usize,
    pub scan_length_max: u64,
}

impl Shape {
    pub fn field_name(i: usize) -> String {
        format!("field{i}")
    }

    /// A field value: printable ASCII, no quote or backslash (so it is its own JSON string).
    pub fn value(&self, rng: &mut Rng) -> String {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        let mut bytes = Vec::with_capacity(self.field_bytes);
        while bytes.len() < self.field_bytes {
            let bits = rng.next_u64().to_le_bytes();
            let take = (self.field_bytes - bytes.len()).min(bits.len());
            bytes.extend(
                bits[..take]
                    .iter()
                    .map(|&b| ALPHABET[usize::from(b) % ALPHABET.len()]),
            );
        }
        String::from_utf8(bytes).expect("the alphabet is ASCII")
    }

    /// (name, value) of every field of a new record.
    pub fn record(&self, rng: &mut Rng) -> Vec<(String, String)> {
        (0..self.fields)
            .map(|i| (Shape::field_name(i), self.value(rng)))
            .collect()
    }

    /// Bytes of one record as the BSON document an insert sends (`_id` an int64): what a
    /// durable insert must at least make durable, and what the group-commit floor appends per
    /// acknowledgement.
    pub fn document_bytes(&self) -> usize {
        let mut d = bson::doc! { "_id": 0i64 };
        for i in 0..self.fields {
            d.insert(Shape::field_name(i), "x".repeat(self.field_bytes));
        }
        d.to_vec().map_or(0, |v| v.len())
    }

    pub fn scan_length(&self, rng: &mut Rng) -> u64 {
        1 + rng.below(self.scan_length_max.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_sum_to_one_and_names_round_trip() {
        for w in Workload::ALL {
            let sum: f64 = w.mix().iter().map(|(_, p)| p).sum();
            assert!((sum - 1.0).abs() < 1e-9, "{w:?}");
            assert_eq!(w.name().parse::<Workload>(), Ok(w));
        }
        assert!("z".parse::<Workload>().is_err());
    }

    #[test]
    fn choose_follows_the_mix() {
        let mut rng = Rng::new(5);
        let updates = (0..20_000)
            .filter(|_| Workload::B.choose(&mut rng) == Op::Update)
            .count();
        assert!((700..1300).contains(&updates), "{updates}");
        assert!((0..100).all(|_| Workload::C.choose(&mut rng) == Op::Read));
    }

    #[test]
    fn records_have_the_asked_shape() {
        let shape = Shape {
            fields: 3,
            field_bytes: 17,
            scan_length_max: 100,
        };
        let mut rng = Rng::new(9);
        let r = shape.record(&mut rng);
        assert_eq!(r.len(), 3);
        assert!(r.iter().all(|(_, v)| v.len() == 17 && v.is_ascii()));
        assert_eq!(r[2].0, "field2");
        assert!((0..1000).all(|_| (1..=100).contains(&shape.scan_length(&mut rng))));
    }
}
