//! Proves index key extraction follows mongod's rules: dotted paths, multikey arrays, positional
//! steps, null for missing, undefined for [], parallel-array errors, sparse, deduplication,
//! hashed fields (mongod's hash as an int64, arrays refused with 16766).
//! How: hand-written documents and the keys expected for them, built with the key encoding.

use bson::{Bson, RawDocumentBuf, doc, rawdoc};
use storage::keycode::{append_record_id, encode_key};
use storage::keys::{KeyError, KeyPattern, prefix_end};

fn raw(value: Bson) -> RawDocumentBuf {
    RawDocumentBuf::try_from(&doc! { "v": value }).expect("encodable")
}

/// The key for one value per field, with the given directions.
fn key(values: &[Bson], descending: &[bool]) -> Vec<u8> {
    let holders: Vec<RawDocumentBuf> = values.iter().cloned().map(raw).collect();
    let refs: Vec<_> = holders
        .iter()
        .map(|h| h.get("v").expect("ok").expect("present"))
        .collect();
    encode_key(&refs, descending)
}

fn keys_of(pattern: bson::Document, document: RawDocumentBuf) -> (Vec<Vec<u8>>, bool) {
    let pattern = KeyPattern::parse(&pattern).expect("valid pattern");
    let extracted = pattern.extract(&document, false).expect("extracts");
    (extracted.keys, extracted.multikey)
}

fn sorted(mut keys: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    keys.sort();
    keys
}

#[test]
fn scalar_missing_and_null() {
    assert_eq!(
        keys_of(doc! {"a": 1}, rawdoc! {"a": 5}),
        (vec![key(&[Bson::Int32(5)], &[false])], false)
    );
    assert_eq!(
        keys_of(doc! {"a": 1}, rawdoc! {"b": 5}),
        (vec![key(&[Bson::Null], &[false])], false)
    );
    assert_eq!(
        keys_of(doc! {"a": 1}, rawdoc! {"a": null}),
        (vec![key(&[Bson::Null], &[false])], false)
    );
}

#[test]
fn arrays_are_multikey_and_deduplicated() {
    let (keys, multikey) = keys_of(doc! {"a": 1}, rawdoc! {"a": [1, 2, 2, 1.0, 2_i64]});
    assert!(multikey);
    assert_eq!(
        keys,
        sorted(vec![
            key(&[Bson::Int32(1)], &[false]),
            key(&[Bson::Int32(2)], &[false])
        ])
    );
    let (keys, multikey) = keys_of(doc! {"a": 1}, rawdoc! {"a": []});
    assert_eq!(
        (keys, multikey),
        (vec![key(&[Bson::Undefined], &[false])], true)
    );
    let (keys, multikey) = keys_of(doc! {"a": 1}, rawdoc! {"a": [[1, 2]]});
    let inner = Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)]);
    assert_eq!((keys, multikey), (vec![key(&[inner], &[false])], true));
}

#[test]
fn dotted_paths_through_documents_and_arrays() {
    let ab = || doc! {"a.b": 1};
    assert_eq!(
        keys_of(ab(), rawdoc! {"a": {"b": 3}}).0,
        vec![key(&[Bson::Int32(3)], &[false])]
    );
    assert_eq!(
        keys_of(ab(), rawdoc! {"a": 3}).0,
        vec![key(&[Bson::Null], &[false])]
    );
    let (keys, multikey) = keys_of(ab(), rawdoc! {"a": [{"b": 1}, {"c": 2}]});
    assert!(multikey);
    assert_eq!(
        keys,
        sorted(vec![
            key(&[Bson::Null], &[false]),
            key(&[Bson::Int32(1)], &[false])
        ])
    );
    let (keys, multikey) = keys_of(ab(), rawdoc! {"a": [1, 2]});
    assert_eq!((keys, multikey), (vec![key(&[Bson::Null], &[false])], true));
    let (keys, _) = keys_of(ab(), rawdoc! {"a": [{"b": [7, 8]}, {"b": 7}]});
    assert_eq!(
        keys,
        sorted(vec![
            key(&[Bson::Int32(7)], &[false]),
            key(&[Bson::Int32(8)], &[false])
        ])
    );
}

#[test]
fn numeric_steps_pick_array_positions() {
    let (keys, multikey) = keys_of(doc! {"a.1": 1}, rawdoc! {"a": [5, 6]});
    assert_eq!(
        (keys, multikey),
        (vec![key(&[Bson::Int32(6)], &[false])], false)
    );
    assert_eq!(
        keys_of(doc! {"a.1": 1}, rawdoc! {"a": [5]}).0,
        vec![key(&[Bson::Null], &[false])]
    );
    assert_eq!(
        keys_of(doc! {"a.0.b": 1}, rawdoc! {"a": [{"b": 4}]}).0,
        vec![key(&[Bson::Int32(4)], &[false])]
    );
    assert_eq!(
        keys_of(doc! {"a.1": 1}, rawdoc! {"a": {"1": "x"}}).0,
        vec![key(&[Bson::String("x".into())], &[false])]
    );
}

#[test]
fn compound_keys_and_directions() {
    let (keys, multikey) = keys_of(doc! {"a": 1, "b": -1}, rawdoc! {"a": [1, 2], "b": 3});
    assert!(multikey);
    let expected = sorted(vec![
        key(&[Bson::Int32(1), Bson::Int32(3)], &[false, true]),
        key(&[Bson::Int32(2), Bson::Int32(3)], &[false, true]),
    ]);
    assert_eq!(keys, expected);
    let pattern = KeyPattern::parse(&doc! {"a": 1, "b": -1.0}).expect("valid");
    assert_eq!(pattern.descending(), vec![false, true]);
}

#[test]
fn parallel_arrays_are_refused_like_mongod() {
    let pattern = KeyPattern::parse(&doc! {"a": 1, "b": 1}).expect("valid");
    let error = pattern
        .extract(&rawdoc! {"a": [1, 2], "b": [1, 2]}, false)
        .expect_err("parallel");
    assert_eq!(error, KeyError::ParallelArrays("b".into(), "a".into()));
    assert_eq!(error.to_string(), "cannot index parallel arrays [b] [a]");
    assert_eq!(error.code(), 171);
    let nested = KeyPattern::parse(&doc! {"x.a": 1, "y.b": 1}).expect("valid");
    let error = nested
        .extract(&rawdoc! {"x": {"a": [1]}, "y": {"b": [2]}}, false)
        .expect_err("parallel");
    assert_eq!(error.to_string(), "cannot index parallel arrays [b] [a]");
}

#[test]
fn fields_sharing_one_array_combine() {
    let (keys, multikey) = keys_of(
        doc! {"a.b": 1, "a.c": 1},
        rawdoc! {"a": [{"b": 1, "c": 2}, {"b": 3, "c": 4}]},
    );
    assert!(multikey);
    let mut expected = Vec::new();
    for b in [1, 3] {
        for c in [2, 4] {
            expected.push(key(&[Bson::Int32(b), Bson::Int32(c)], &[false, false]));
        }
    }
    assert_eq!(keys, sorted(expected));
}

#[test]
fn sparse_skips_only_documents_missing_every_field() {
    let single = KeyPattern::parse(&doc! {"a": 1}).expect("valid");
    assert!(
        single
            .extract(&rawdoc! {"b": 1}, true)
            .expect("ok")
            .keys
            .is_empty()
    );
    assert_eq!(
        single
            .extract(&rawdoc! {"a": null}, true)
            .expect("ok")
            .keys
            .len(),
        1
    );
    assert!(single.extract(&rawdoc! {"a": [{"c": 1}]}, true).is_ok());
    let dotted = KeyPattern::parse(&doc! {"a.b": 1}).expect("valid");
    assert!(
        dotted
            .extract(&rawdoc! {"a": [{"c": 1}, {"c": 2}]}, true)
            .expect("ok")
            .keys
            .is_empty()
    );
    let compound = KeyPattern::parse(&doc! {"a": 1, "b": 1}).expect("valid");
    let keys = compound.extract(&rawdoc! {"b": 2}, true).expect("ok").keys;
    assert_eq!(
        keys,
        vec![key(&[Bson::Null, Bson::Int32(2)], &[false, false])]
    );
}

#[test]
fn bad_patterns_are_rejected() {
    for bad in [
        doc! {},
        doc! {"a": 0},
        doc! {"a..b": 1},
        doc! {"$a": 1},
        doc! {"a": true},
        doc! {"a": f64::NAN},
    ] {
        assert!(
            matches!(KeyPattern::parse(&bad), Err(KeyError::BadPattern(_))),
            "{bad}"
        );
    }
    assert_eq!(
        KeyPattern::parse(&doc! {"a": "text"}),
        Err(KeyError::UnsupportedType("text".into()))
    );
}

#[test]
fn prefix_end_bounds_every_key_with_that_prefix() {
    let prefix = key(&[Bson::Int32(5)], &[false]);
    let end = prefix_end(&prefix);
    for second in [Bson::MaxKey, Bson::MinKey] {
        for descending in [false, true] {
            let mut full = key(&[Bson::Int32(5), second.clone()], &[false, descending]);
            append_record_id(&mut full, u64::MAX);
            assert!(full < end && full > prefix);
        }
    }
    let mut bare = prefix.clone();
    append_record_id(&mut bare, u64::MAX);
    assert!(bare < end);
    assert!(key(&[Bson::Int32(6)], &[false]) > end);
}

#[test]
fn hashed_fields_store_the_hash() {
    let hash = |v: Bson| storage::hashed::hash64(raw(v).get("v").expect("ok").expect("present"));
    assert_eq!(
        keys_of(doc! {"a": "hashed"}, rawdoc! {"a": 42}),
        (
            vec![key(&[Bson::Int64(hash(Bson::Int32(42)))], &[false])],
            false
        )
    );
    assert_eq!(
        keys_of(doc! {"a": "hashed"}, rawdoc! {"b": 1}).0,
        vec![key(&[Bson::Int64(hash(Bson::Null))], &[false])],
        "missing hashes as null"
    );
    assert_eq!(
        keys_of(doc! {"b": -1, "a": "hashed"}, rawdoc! {"a": "x", "b": 2}).0,
        vec![key(
            &[Bson::Int32(2), Bson::Int64(hash(Bson::String("x".into())))],
            &[true, false]
        )]
    );
    let pattern = KeyPattern::parse(&doc! {"a.b": "hashed"}).expect("valid");
    for document in [rawdoc! {"a": {"b": [1]}}, rawdoc! {"a": [{"b": 1}]}] {
        let error = pattern
            .extract(&document, false)
            .expect_err("arrays refused");
        assert_eq!(error, KeyError::HashedArray("a.b".into()));
        assert_eq!(error.code(), 16766);
    }
}
