//! Text index entries: which strings are indexed with which weight and language, and that the
//! score grows with term frequency and weight. Direct calls on hand-made documents.

use super::*;
use bson::{RawDocumentBuf, doc};

fn spec(weights: Document, extra: Document) -> TextSpec {
    let mut e = doc! { "weights": weights };
    e.extend(extra);
    TextSpec::from_index(&doc! { "_fts": "text", "_ftsx": 1 }, &e)
        .unwrap()
        .unwrap()
}

fn raw(d: Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(&d).unwrap()
}

fn score(s: &TextSpec, d: Document, term: &str) -> f64 {
    s.scores(&raw(d)).unwrap().get(term).copied().unwrap_or(0.0)
}

#[test]
fn other_indexes_have_no_text_spec() {
    assert!(
        TextSpec::from_index(&doc! { "a": 1 }, &Document::new())
            .unwrap()
            .is_none()
    );
}

#[test]
fn bad_weights_and_languages_are_refused() {
    let key = doc! { "_fts": "text", "_ftsx": 1 };
    for extra in [
        doc! {},
        doc! { "weights": { "a": "x" } },
        doc! { "weights": { "a": 0 } },
        doc! { "weights": { "a": 100_000 } },
        doc! { "weights": { "a": 1 }, "default_language": "klingon" },
    ] {
        assert!(TextSpec::from_index(&key, &extra).is_err(), "{extra}");
    }
}

#[test]
fn entries_are_term_and_score_per_distinct_term() {
    let s = spec(doc! { "title": 1, "body": 1 }, doc! {});
    let d = raw(doc! { "title": "Coffee shop", "body": "coffee, more coffee", "n": "coffee" });
    let keys = s.extract(&d).unwrap();
    // "more" is a stop word; "n" is not indexed.
    assert_eq!(keys.keys.len(), 2);
    assert!(keys.multikey);
    let coffee = keys
        .keys
        .iter()
        .find(|k| k.starts_with(&term_prefix("coffe")))
        .unwrap();
    let expected = s.scores(&d).unwrap()["coffe"];
    assert_eq!(entry_score(coffee), Some(expected));
    assert!(s.extract(&raw(doc! { "n": "x" })).unwrap().keys.is_empty());
}

#[test]
fn arrays_and_embedded_paths_are_indexed() {
    let s = spec(doc! { "tags": 1, "a.b": 1 }, doc! {});
    let d = raw(doc! { "tags": ["red fox", "blue"], "a": [{ "b": "quick" }, { "b": 5 }] });
    let terms: Vec<String> = s.scores(&d).unwrap().into_keys().collect();
    assert_eq!(terms, ["blue", "fox", "quick", "red"]);
}

#[test]
fn wildcard_indexes_every_string_with_path_weights() {
    let s = spec(doc! { "$**": 1, "title": 10 }, doc! {});
    let d = doc! { "title": "apple", "x": { "y": ["apple"] }, "z": 3 };
    let all = score(&s, d.clone(), "appl");
    let only_x = score(&s, doc! { "x": { "y": ["apple"] } }, "appl");
    let only_title = score(&s, doc! { "title": "apple" }, "appl");
    assert!(only_title > 9.0 * only_x);
    assert!((all - only_x - only_title).abs() < 1e-9);
}

#[test]
fn score_grows_with_frequency_and_weight() {
    let s = spec(doc! { "a": 1, "b": 5 }, doc! {});
    let mut text = String::from("alpha beta gamma");
    let mut last = score(&s, doc! { "a": text.clone() }, "alpha");
    for _ in 0..20 {
        text.push_str(" alpha");
        let now = score(&s, doc! { "a": text.clone() }, "alpha");
        assert!(now > last, "{text}: {now} <= {last}");
        last = now;
    }
    let light = score(&s, doc! { "a": "alpha beta" }, "alpha");
    let heavy = score(&s, doc! { "b": "alpha beta" }, "alpha");
    assert!((heavy - 5.0 * light).abs() < 1e-9);
}

#[test]
fn language_override_picks_the_stemmer() {
    let s = spec(doc! { "t": 1 }, doc! { "default_language": "spanish" });
    let terms = |d: Document| -> Vec<String> { s.scores(&raw(d)).unwrap().into_keys().collect() };
    assert_eq!(terms(doc! { "t": "corriendo y los" }), ["corr"]);
    assert_eq!(
        terms(doc! { "t": "running and the", "language": "english" }),
        ["run"]
    );
    let err = s
        .scores(&raw(doc! { "t": "x", "language": "klingon" }))
        .unwrap_err();
    assert_eq!(err.code(), 17262);
    let custom = spec(doc! { "t": 1 }, doc! { "language_override": "idioma" });
    assert_eq!(
        custom
            .language_of(&raw(doc! { "idioma": "de" }))
            .unwrap()
            .name,
        "german"
    );
}

#[test]
fn compound_keys_put_prefix_values_first_and_suffix_values_last() {
    let key = doc! { "cat": -1, "_fts": "text", "_ftsx": 1, "year": 1 };
    let s = TextSpec::from_index(&key, &doc! { "weights": { "body": 1 } })
        .unwrap()
        .unwrap();
    assert_eq!(s.prefix, vec![(vec!["cat".to_string()], true)]);
    assert_eq!(s.suffix, vec![(vec!["year".to_string()], false)]);
    let d = raw(doc! { "cat": "tools", "body": "hammer and nails", "year": 2020 });
    let keys = s.extract(&d).unwrap();
    assert_eq!(keys.keys.len(), 2);
    assert_eq!(keys.multikey_fields, [false, true, false, false]);
    let tools = RawBsonRef::String("tools");
    let hammer = keys
        .keys
        .iter()
        .find(|k| k.starts_with(&s.term_prefix(&[tools], "hammer")))
        .unwrap();
    assert_eq!(s.entry_score(hammer), Some(s.scores(&d).unwrap()["hammer"]));
    // Another prefix value gives other keys; a missing prefix field reads as null.
    assert!(!hammer.starts_with(&s.term_prefix(&[RawBsonRef::String("toys")], "hammer")));
    let no_cat = s.extract(&raw(doc! { "body": "hammer" })).unwrap();
    assert!(no_cat.keys[0].starts_with(&s.term_prefix(&[RawBsonRef::Null], "hammer")));
    // An array in a prefix field is mongod's 16675.
    let e = s
        .extract(&raw(doc! { "cat": ["a"], "body": "hammer" }))
        .unwrap_err();
    assert_eq!(e.code(), 16675);
}

#[test]
fn a_suffix_array_is_stored_whole() {
    let key = doc! { "_fts": "text", "_ftsx": 1, "tags": 1 };
    let s = TextSpec::from_index(&key, &doc! { "weights": { "body": 1 } })
        .unwrap()
        .unwrap();
    let keys = s
        .extract(&raw(doc! { "body": "hammer", "tags": [1, "x"] }))
        .unwrap();
    let decoded = keycode::decode_key(&keys.keys[0], &[false, false, false]).unwrap();
    assert_eq!(
        decoded[2],
        Bson::Array(vec![Bson::Int32(1), Bson::from("x")])
    );
}
