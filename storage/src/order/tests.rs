// Proves that `compare` is a total order (antisymmetric, transitive) agreeing with mongod's
// documented sort order, identically for raw and owned values, over the frozen edge corpus.

use super::*;
use bson::{RawDocumentBuf, doc};
use std::cmp::Ordering::{Equal, Greater, Less};

/// Each corpus value wrapped as `{v: value}` in raw form, so raw comparisons can be tested.
fn raw_corpus() -> Vec<RawDocumentBuf> {
    corpus()
        .into_iter()
        .map(|v| RawDocumentBuf::try_from(&doc! {"v": v}).expect("corpus encodes"))
        .collect()
}

fn raw_value(d: &RawDocumentBuf) -> RawBsonRef<'_> {
    d.get("v").expect("valid").expect("present")
}

#[test]
fn corpus_is_listed_in_ascending_order() {
    let c = corpus();
    for (i, a) in c.iter().enumerate() {
        for b in &c[i + 1..] {
            assert_ne!(
                compare_bson(a, b),
                Greater,
                "{a:?} should not sort after {b:?}"
            );
        }
    }
}

#[test]
fn antisymmetric_and_raw_agrees_with_owned() {
    let c = corpus();
    let raw = raw_corpus();
    for (i, a) in c.iter().enumerate() {
        assert_eq!(compare_bson(a, a), Equal, "{a:?} equals itself");
        for (j, b) in c.iter().enumerate() {
            let ab = compare_bson(a, b);
            assert_eq!(ab, compare_bson(b, a).reverse(), "{a:?} vs {b:?}");
            assert_eq!(
                ab,
                compare(raw_value(&raw[i]), raw_value(&raw[j])),
                "raw {a:?} vs {b:?}"
            );
            assert_eq!(
                ab,
                compare_raw_bson(raw_value(&raw[i]), b),
                "mixed {a:?} vs {b:?}"
            );
        }
    }
}

#[test]
fn transitive_over_all_triples() {
    let c = corpus();
    let n = c.len();
    let mut table = vec![Equal; n * n];
    for i in 0..n {
        for j in 0..n {
            table[i * n + j] = compare_bson(&c[i], &c[j]);
        }
    }
    for i in 0..n {
        for j in 0..n {
            for k in 0..n {
                let (ij, jk, ik) = (table[i * n + j], table[j * n + k], table[i * n + k]);
                if ij != Greater && jk != Greater {
                    assert_ne!(ik, Greater, "{:?} <= {:?} <= {:?}", c[i], c[j], c[k]);
                }
                if ij == Equal && jk == Equal {
                    assert_eq!(ik, Equal, "{:?} = {:?} = {:?}", c[i], c[j], c[k]);
                }
            }
        }
    }
}

fn cmp(a: Bson, b: Bson) -> std::cmp::Ordering {
    compare_bson(&a, &b)
}

#[test]
fn type_brackets() {
    // mongod: MinKey < undefined < null < numbers < strings < objects < arrays < binData <
    // ObjectId < bool < date < timestamp < regex < code < code with scope < MaxKey.
    assert_eq!(cmp(Bson::MinKey, Bson::Undefined), Less);
    assert_eq!(cmp(Bson::Undefined, Bson::Null), Less);
    assert_eq!(cmp(Bson::Null, Bson::Double(f64::NAN)), Less);
    assert_eq!(
        cmp(Bson::Double(f64::INFINITY), Bson::String(String::new())),
        Less
    );
    assert_eq!(
        cmp(Bson::String("zzz".into()), Bson::Document(doc! {})),
        Less
    );
    assert_eq!(
        cmp(Bson::Document(doc! {"a": [1]}), Bson::Array(vec![])),
        Less
    );
    assert_eq!(
        cmp(
            Bson::Boolean(true),
            Bson::DateTime(bson::DateTime::from_millis(i64::MIN))
        ),
        Less
    );
    assert_eq!(
        cmp(
            Bson::DateTime(bson::DateTime::from_millis(i64::MAX)),
            Bson::Timestamp(bson::Timestamp {
                time: 0,
                increment: 0
            })
        ),
        Less
    );
    assert_eq!(cmp(Bson::JavaScriptCode("z".into()), Bson::MaxKey), Less);
    assert_eq!(
        cmp(Bson::Symbol("b".into()), Bson::String("a".into())),
        Greater
    );
    assert_eq!(
        cmp(Bson::Symbol("a".into()), Bson::String("a".into())),
        Equal
    );
}

#[test]
fn documents_compare_type_then_name_then_value_then_length() {
    // A smaller-ranked value wins even with a larger field name.
    assert_eq!(
        cmp(
            Bson::Document(doc! {"z": 1}),
            Bson::Document(doc! {"a": "s"})
        ),
        Less
    );
    assert_eq!(
        cmp(Bson::Document(doc! {"a": 1}), Bson::Document(doc! {"b": 0})),
        Less
    );
    assert_eq!(
        cmp(
            Bson::Document(doc! {"a": 2}),
            Bson::Document(doc! {"a": 1, "b": 1})
        ),
        Greater
    );
    assert_eq!(
        cmp(
            Bson::Document(doc! {"a": 1}),
            Bson::Document(doc! {"a": 1, "b": 1})
        ),
        Less
    );
    assert_eq!(
        cmp(
            Bson::Document(doc! {"a": 1i64}),
            Bson::Document(doc! {"a": 1.0})
        ),
        Equal
    );
    assert_eq!(
        compare_docs(
            &RawDocumentBuf::try_from(&doc! {"x": [1, 2]}).expect("encodes"),
            &RawDocumentBuf::try_from(&doc! {"x": [1, 3]}).expect("encodes"),
        ),
        Less
    );
    assert_eq!(compare_documents(&doc! {"b": 1}, &doc! {"a": 1}), Greater);
}

#[test]
fn arrays_binary_regex_timestamps() {
    assert_eq!(
        cmp(
            Bson::Array(vec![1.into(), 2.into()]),
            Bson::Array(vec![2.into()])
        ),
        Less
    );
    assert_eq!(
        cmp(Bson::Array(vec![]), Bson::Array(vec![Bson::MinKey])),
        Less
    );
    let bin = |subtype: u8, bytes: &[u8]| {
        Bson::Binary(bson::Binary {
            subtype: subtype.into(),
            bytes: bytes.to_vec(),
        })
    };
    // Length first, then subtype, then bytes.
    assert_eq!(cmp(bin(0x80, &[1]), bin(0, &[1, 0])), Less);
    assert_eq!(cmp(bin(4, &[0]), bin(0, &[9])), Greater);
    assert_eq!(cmp(bin(0, &[1, 2]), bin(0, &[1, 3])), Less);
    let ts = |time, increment| Bson::Timestamp(bson::Timestamp { time, increment });
    assert_eq!(cmp(ts(u32::MAX, 0), ts(1, u32::MAX)), Greater);
    let re = |p: &str, o: &str| {
        Bson::RegularExpression(bson::Regex {
            pattern: p.try_into().expect("cstr"),
            options: o.try_into().expect("cstr"),
        })
    };
    assert_eq!(cmp(re("a", "i"), re("a", "")), Greater);
    assert_eq!(cmp(re("a", "z"), re("b", "")), Less);
}

#[test]
fn ranks_match_mongod_canonical_types() {
    assert_eq!(canonical_type_rank_bson(&Bson::MinKey), -1);
    assert_eq!(canonical_type_rank_bson(&Bson::Undefined), 0);
    assert_eq!(canonical_type_rank_bson(&Bson::Null), 5);
    assert_eq!(canonical_type_rank_bson(&Bson::Int64(3)), 10);
    assert_eq!(canonical_type_rank_bson(&Bson::Symbol("x".into())), 15);
    assert_eq!(canonical_type_rank_bson(&Bson::MaxKey), 127);
    let raw = RawDocumentBuf::try_from(&doc! {"v": 1.5}).expect("encodes");
    assert_eq!(canonical_type_rank(raw_value(&raw)), 10);
}

/// Throughput of `compare` over every corpus pair (run with `--release -- --ignored`).
#[test]
#[ignore = "measurement, not a check"]
fn measure_compare_throughput() {
    let raw = raw_corpus();
    let values: Vec<RawBsonRef<'_>> = raw.iter().map(raw_value).collect();
    let rounds = 200;
    let start = std::time::Instant::now();
    let mut less = 0usize;
    for _ in 0..rounds {
        for a in &values {
            for b in &values {
                less += usize::from(compare(*a, *b) == Less);
            }
        }
    }
    let n = rounds * values.len() * values.len();
    let ns = start.elapsed().as_nanos() / n as u128;
    println!("compare: {n} pairs, {ns} ns/pair ({less} less)");
}

/// `{v: dbPointer(ns, oid)}` built from bytes: the bson crate cannot construct one otherwise.
fn db_pointer_doc(ns: &str, oid_byte: u8) -> RawDocumentBuf {
    let mut value = Vec::new();
    value.extend_from_slice(&(i32::try_from(ns.len() + 1).expect("short")).to_le_bytes());
    value.extend_from_slice(ns.as_bytes());
    value.push(0);
    value.extend_from_slice(&[oid_byte; 12]);
    let mut body = vec![0x0C, b'v', 0];
    body.extend_from_slice(&value);
    body.push(0);
    let mut bytes = (i32::try_from(body.len() + 4).expect("short"))
        .to_le_bytes()
        .to_vec();
    bytes.extend_from_slice(&body);
    RawDocumentBuf::from_bytes(bytes).expect("valid dbPointer document")
}

#[test]
fn db_pointers_order_by_namespace_length_then_bytes() {
    let (short, long, long_hi) = (
        db_pointer_doc("zz", 9),
        db_pointer_doc("aaa", 1),
        db_pointer_doc("aaa", 2),
    );
    let (a, b, c) = (raw_value(&short), raw_value(&long), raw_value(&long_hi));
    assert_eq!(compare(a, b), Less);
    assert_eq!(compare(b, c), Less);
    assert_eq!(compare(c, c), Equal);
    let owned = Bson::try_from(bson::RawBson::from(b)).expect("converts");
    assert_eq!(compare_raw_bson(b, &owned), Equal);
    assert_eq!(compare_raw_bson(a, &owned), Less);
    // Between regex and javascript.
    assert_eq!(
        compare_raw_bson(a, &Bson::JavaScriptCode(String::new())),
        Less
    );
    let re = Bson::RegularExpression(bson::Regex {
        pattern: "z".try_into().expect("cstr"),
        options: "".try_into().expect("cstr"),
    });
    assert_eq!(compare_raw_bson(a, &re), Greater);
}

/// Random nested values built from corpus atoms (seed from ORDER_FUZZ_SEED, printed on failure).
fn random_values(count: usize) -> (u64, Vec<Bson>) {
    use rand::{Rng, SeedableRng};
    let seed = std::env::var("ORDER_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let atoms = corpus();
    fn build(rng: &mut rand::rngs::StdRng, atoms: &[Bson], depth: usize) -> Bson {
        match rng.random_range(0..6) {
            0 if depth < 3 => Bson::Array(
                (0..rng.random_range(0..3))
                    .map(|_| build(rng, atoms, depth + 1))
                    .collect(),
            ),
            1 if depth < 3 => {
                let mut d = bson::Document::new();
                for name in ["a", "b"] {
                    if rng.random_bool(0.5) {
                        d.insert(name, build(rng, atoms, depth + 1));
                    }
                }
                Bson::Document(d)
            }
            _ => atoms[rng.random_range(0..atoms.len())].clone(),
        }
    }
    (
        seed,
        (0..count).map(|_| build(&mut rng, &atoms, 0)).collect(),
    )
}

#[test]
fn random_nested_values_are_totally_ordered() {
    let (seed, values) = random_values(60);
    let raws: Vec<RawDocumentBuf> = values
        .iter()
        .map(|v| RawDocumentBuf::try_from(&doc! {"v": v.clone()}).expect("encodes"))
        .collect();
    for (i, a) in values.iter().enumerate() {
        for (j, b) in values.iter().enumerate() {
            let ab = compare_bson(a, b);
            assert_eq!(
                ab,
                compare(raw_value(&raws[i]), raw_value(&raws[j])),
                "seed {seed}: {a:?} vs {b:?}"
            );
            for c in &values {
                if ab != Greater && compare_bson(b, c) != Greater {
                    assert_ne!(
                        compare_bson(a, c),
                        Greater,
                        "seed {seed}: {a:?} <= {b:?} <= {c:?}"
                    );
                }
            }
        }
    }
    // Sorting with the order and re-checking neighbours catches any inconsistency left.
    let mut sorted = values.clone();
    sorted.sort_by(compare_bson);
    assert!(
        sorted
            .windows(2)
            .all(|w| compare_bson(&w[0], &w[1]) != Greater),
        "seed {seed}"
    );
}
