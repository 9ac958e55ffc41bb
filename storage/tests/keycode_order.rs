//! Proves the key encoding agrees with `storage::order`: byte order equals value order, equal
//! values encode identically, descending fields reverse, and decoding gives back equal values.
//! How: every pair of a frozen edge corpus, then seeded random values (CAIRN_SEED overrides).

use bson::spec::BinarySubtype;
use bson::{Binary, Bson, Decimal128, RawBsonRef, doc, oid::ObjectId};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cmp::Ordering;
use storage::keycode::{
    append_record_id, decode_key, decode_value, encode_key, encode_value, split_record_id,
};
use storage::order::compare_bson;

/// Holds a value inside a document so that a `RawBsonRef` can borrow it.
struct Raw(bson::RawDocumentBuf);

impl Raw {
    fn new(value: &Bson) -> Raw {
        let doc = doc! { "v": value.clone() };
        Raw(bson::RawDocumentBuf::try_from(&doc).expect("encodable"))
    }
    fn get(&self) -> RawBsonRef<'_> {
        self.0.get("v").expect("valid").expect("present")
    }
}

fn encode(value: &Bson) -> Vec<u8> {
    let raw = Raw::new(value);
    let mut out = Vec::new();
    encode_value(&mut out, raw.get());
    out
}

fn extra_values() -> Vec<Bson> {
    let two53 = 1i64 << 53;
    let dec = |s: &str| Bson::Decimal128(s.parse::<Decimal128>().expect("decimal"));
    vec![
        Bson::Int64(two53 - 1),
        Bson::Int64(two53),
        Bson::Int64(two53 + 1),
        Bson::Double((two53 - 1) as f64),
        Bson::Double(two53 as f64),
        Bson::Double((two53 + 2) as f64),
        Bson::Int64(i64::MAX),
        Bson::Double(9_223_372_036_854_775_808.0),
        dec("9223372036854775807"),
        dec("9223372036854775808"),
        dec("0.1"),
        dec("0.10000000000000000555111512312578270"),
        dec("1E+400"),
        dec("-1E-400"),
        dec("5.00"),
        Bson::Double(5.0),
        Bson::Int32(5),
        Bson::String("a\0b".into()),
        Bson::String("a\0".into()),
        Bson::String("a".into()),
        Bson::String("a\u{1}".into()),
        Bson::String("é日本".into()),
        Bson::Symbol("a".into()),
        Bson::Document(doc! { "a": -1 }),
        Bson::Document(doc! { "b": 1 }),
        Bson::Document(doc! { "a": 1, "b": "x" }),
        Bson::Document(doc! { "a": "x" }),
        Bson::Document(doc! { "a": { "b": [1, 2] } }),
        Bson::Array(vec![]),
        Bson::Array(vec![Bson::Array(vec![])]),
        Bson::Array(vec![Bson::Int32(1), Bson::Array(vec![Bson::Int32(2)])]),
        Bson::Array(vec![Bson::Int32(1)]),
        Bson::Array(vec![Bson::Int32(1), Bson::Null]),
        Bson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: vec![],
        }),
        Bson::Binary(Binary {
            subtype: BinarySubtype::Uuid,
            bytes: vec![0; 16],
        }),
        Bson::Binary(Binary {
            subtype: BinarySubtype::UserDefined(0x80),
            bytes: vec![1],
        }),
        Bson::ObjectId(ObjectId::from_bytes([0xFF; 12])),
    ]
}

fn all_values() -> Vec<Bson> {
    let mut values = storage::order::corpus();
    values.extend(extra_values());
    values
}

fn check_pair(a: &Bson, b: &Bson) {
    let expected = compare_bson(a, b);
    let (ea, eb) = (encode(a), encode(b));
    assert_eq!(
        ea.cmp(&eb),
        expected,
        "order of {a:?} vs {b:?}: {ea:02x?} vs {eb:02x?}"
    );
    let (ra, rb) = (Raw::new(a), Raw::new(b));
    let (da, db) = (
        encode_key(&[ra.get()], &[true]),
        encode_key(&[rb.get()], &[true]),
    );
    assert_eq!(da.cmp(&db), expected.reverse(), "descending {a:?} vs {b:?}");
}

fn check_round_trip(value: &Bson) {
    let bytes = encode(value);
    let (decoded, used) = decode_value(&bytes).unwrap_or_else(|e| panic!("{value:?}: {e}"));
    assert_eq!(used, bytes.len());
    assert_eq!(
        compare_bson(value, &decoded),
        Ordering::Equal,
        "{value:?} -> {decoded:?}"
    );
    assert_eq!(encode(&decoded), bytes, "re-encoding {value:?}");
}

#[test]
fn corpus_pairs_agree_with_order() {
    let values = all_values();
    for a in &values {
        for b in &values {
            check_pair(a, b);
        }
    }
}

#[test]
fn corpus_values_decode_to_equal_values() {
    for value in all_values() {
        check_round_trip(&value);
    }
}

#[test]
fn equal_numbers_encode_identically() {
    let five = [
        Bson::Int32(5),
        Bson::Int64(5),
        Bson::Double(5.0),
        Bson::Decimal128("5.000".parse().expect("d")),
    ];
    for v in &five {
        assert_eq!(encode(v), encode(&five[0]));
    }
    assert_eq!(encode(&Bson::Double(-0.0)), encode(&Bson::Int32(0)));
    assert_eq!(
        encode(&Bson::Decimal128("NaN".parse().expect("d"))),
        encode(&Bson::Double(f64::NAN))
    );
}

#[test]
fn compound_keys_with_mixed_directions() {
    let values = all_values();
    let raws: Vec<Raw> = values.iter().map(Raw::new).collect();
    let mut rng = StdRng::seed_from_u64(seed());
    for _ in 0..2000 {
        let (i, j, k, l) = (
            pick(&mut rng, &raws),
            pick(&mut rng, &raws),
            pick(&mut rng, &raws),
            pick(&mut rng, &raws),
        );
        let dirs = [rng.random::<bool>(), rng.random::<bool>()];
        let ka = encode_key(&[raws[i].get(), raws[j].get()], &dirs);
        let kb = encode_key(&[raws[k].get(), raws[l].get()], &dirs);
        let first = compare_bson(&values[i], &values[k]);
        let second = compare_bson(&values[j], &values[l]);
        let flip = |o: Ordering, d: bool| if d { o.reverse() } else { o };
        let expected = flip(first, dirs[0]).then(flip(second, dirs[1]));
        assert_eq!(ka.cmp(&kb), expected, "seed {}: {i} {j} vs {k} {l}", seed());
        let decoded = decode_key(&ka, &dirs).expect("decodes");
        assert_eq!(compare_bson(&decoded[0], &values[i]), Ordering::Equal);
        assert_eq!(compare_bson(&decoded[1], &values[j]), Ordering::Equal);
    }
}

#[test]
fn owned_values_encode_like_raw_ones() {
    for value in all_values() {
        let mut owned = Vec::new();
        storage::keycode::encode_bson_value(&mut owned, &value);
        assert_eq!(owned, encode(&value), "{value:?}");
    }
    let pair = [Bson::Int32(1), Bson::String("x".into())];
    let (a, b) = (Raw::new(&pair[0]), Raw::new(&pair[1]));
    assert_eq!(
        storage::keycode::encode_bson_key(&pair, &[false, true]),
        encode_key(&[a.get(), b.get()], &[false, true])
    );
}

#[test]
fn record_id_suffix_splits_back() {
    let raw = Raw::new(&Bson::String("k".into()));
    let mut key = encode_key(&[raw.get()], &[false]);
    let bare = key.clone();
    append_record_id(&mut key, 0x0102_0304_0506_0708);
    assert_eq!(split_record_id(&key), (&bare[..], 0x0102_0304_0506_0708));
}

#[test]
fn random_values_agree_with_order() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let values: Vec<Bson> = (0..400).map(|_| random_value(&mut rng, 0)).collect();
    for a in &values {
        check_round_trip(a);
        for b in values.iter().take(200) {
            let result = std::panic::catch_unwind(|| check_pair(a, b));
            assert!(result.is_ok(), "failed with CAIRN_SEED={seed}");
        }
    }
}

#[test]
fn garbage_never_panics() {
    let mut rng = StdRng::seed_from_u64(seed());
    for _ in 0..20_000 {
        let len = rng.random_range(0..24);
        let bytes: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        let _ = decode_key(&bytes, &[rng.random(), rng.random()]);
    }
}

fn seed() -> u64 {
    std::env::var("CAIRN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed)
}

fn pick(rng: &mut StdRng, items: &[Raw]) -> usize {
    rng.random_range(0..items.len())
}

fn random_value(rng: &mut StdRng, depth: usize) -> Bson {
    let top = if depth > 2 { 9 } else { 12 };
    match rng.random_range(0..top) {
        0 => Bson::Int32(rng.random_range(-1000..1000)),
        1 => Bson::Int64(rng.random::<i64>() >> rng.random_range(0..64)),
        2 => Bson::Double(f64::from_bits(rng.random())),
        3 => Bson::Double(f64::from(rng.random_range(-1000..1000)) / 8.0),
        4 => {
            let text = format!(
                "{}E{}",
                rng.random::<u64>() >> rng.random_range(0..64),
                rng.random_range(-40..40)
            );
            Bson::Decimal128(text.parse().expect("decimal"))
        }
        5 => Bson::String(
            (0..rng.random_range(0..4))
                .map(|_| ['a', 'b', '\0', 'é'][rng.random_range(0..4)])
                .collect(),
        ),
        6 => Bson::Boolean(rng.random()),
        7 => Bson::DateTime(bson::DateTime::from_millis(
            rng.random::<i64>() >> rng.random_range(0..64),
        )),
        8 => Bson::Null,
        9 => Bson::Array(
            (0..rng.random_range(0..3))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        10 => {
            let mut doc = bson::Document::new();
            for _ in 0..rng.random_range(0..3) {
                let key = ["a", "b", "ab"][rng.random_range(0..3)];
                doc.insert(key, random_value(rng, depth + 1));
            }
            Bson::Document(doc)
        }
        _ => Bson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: vec![rng.random(); rng.random_range(0..3)],
        }),
    }
}
