//! `$text` parsing and matching against hand-made documents, with the query bound to a text
//! spec built here (no collection): phrases, negation, sensitivity, languages, placement.

use super::*;
use bson::{RawDocumentBuf, doc};

fn spec(weights: Document, default_language: &str) -> TextSpec {
    let extra = doc! { "weights": weights, "default_language": default_language };
    TextSpec::from_index(&doc! { "_fts": "text", "_ftsx": 1 }, &extra)
        .unwrap()
        .unwrap()
}

fn query(text: Document, lang: &str) -> TextQuery {
    let q = TextQuery::parse(&Bson::Document(text)).unwrap();
    q.bind("t_text", spec(doc! { "t": 1 }, lang));
    q
}

fn hit(q: &TextQuery, t: &str) -> bool {
    q.matches(&RawDocumentBuf::try_from(&doc! { "t": t }).unwrap())
        .unwrap()
}

#[test]
fn search_strings_split_into_words_phrases_and_negations() {
    let s = parse_search(r#"coffee -tea "iced latte" -"hot chocolate" ice-cream"#);
    assert_eq!(s.words, ["coffee", "ice", "cream"]);
    assert_eq!(s.negated_words, ["tea"]);
    assert_eq!(s.phrases, ["iced latte"]);
    assert_eq!(s.negated_phrases, ["hot chocolate"]);
    let open = parse_search(r#"a "unclosed phrase"#);
    assert_eq!(open.phrases, ["unclosed phrase"]);
    assert_eq!(parse_search("  -- \"\" ").words.len(), 0);
}

#[test]
fn any_term_matches_after_stemming() {
    let q = query(doc! { "$search": "running shoes" }, "english");
    assert!(hit(&q, "He runs every day"));
    assert!(hit(&q, "a SHOE"));
    assert!(!hit(&q, "walking boots"));
    assert_eq!(q.bound().unwrap().lookup, ["run", "shoe"]);
}

#[test]
fn phrases_must_all_be_present_and_negations_absent() {
    let q = query(doc! { "$search": "\"sea salt\" caramel" }, "english");
    assert!(hit(&q, "Caramel with SEA salt"));
    assert!(hit(&q, "sea salt chocolate"));
    assert!(!hit(&q, "salt of the sea, caramel"));
    let q = query(doc! { "$search": "caramel -salted" }, "english");
    assert!(hit(&q, "caramel cake"));
    assert!(!hit(&q, "caramel with salt"), "negation is stemmed too");
    let q = query(doc! { "$search": "cake -\"sea salt\"" }, "english");
    assert!(hit(&q, "cake with salt"));
    assert!(!hit(&q, "cake with sea salt"));
    let only_negated = query(doc! { "$search": "-cake" }, "english");
    assert!(!hit(&only_negated, "pie"));
}

#[test]
fn case_and_diacritic_sensitivity() {
    let q = query(doc! { "$search": "Café" }, "english");
    assert!(hit(&q, "cafe"));
    let q = query(
        doc! { "$search": "Café", "$caseSensitive": true },
        "english",
    );
    assert!(hit(&q, "Cafe"));
    assert!(!hit(&q, "cafe"));
    let q = query(
        doc! { "$search": "café", "$diacriticSensitive": true },
        "english",
    );
    assert!(hit(&q, "CAFÉ"));
    assert!(!hit(&q, "cafe"));
    let q = query(
        doc! { "$search": "\"Sea Salt\"", "$caseSensitive": true },
        "english",
    );
    assert!(hit(&q, "Sea Salt"));
    assert!(!hit(&q, "sea salt"));
}

#[test]
fn languages_stem_and_stop_differently() {
    let es = query(doc! { "$search": "corriendo" }, "spanish");
    assert!(hit(&es, "él corre"));
    let stop = query(doc! { "$search": "the" }, "english");
    assert!(!hit(&stop, "the end"), "a stop word is no term");
    let none = query(doc! { "$search": "the", "$language": "none" }, "english");
    // The query's language stems the query; the document is English, where "the" is dropped.
    assert!(!hit(&none, "the end"));
    let de = query(doc! { "$search": "häuser" }, "german");
    assert!(hit(&de, "Das Haus"));
    let ru = query(doc! { "$search": "книги" }, "russian");
    assert!(hit(&ru, "новая книга"));
    let fr = query(doc! { "$search": "chantaient" }, "french");
    assert!(hit(&fr, "elle chante"));
}

#[test]
fn bad_operands_are_refused() {
    for bad in [
        Bson::Int32(1),
        Bson::Document(doc! {}),
        Bson::Document(doc! { "$search": 1 }),
        Bson::Document(doc! { "$search": "x", "$language": "klingon" }),
        Bson::Document(doc! { "$search": "x", "$caseSensitive": 1 }),
        Bson::Document(doc! { "$search": "x", "$diacriticSensitive": "yes" }),
        Bson::Document(doc! { "$search": "x", "other": 1 }),
    ] {
        let e = TextQuery::parse(&bad).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadValue, "{bad}");
    }
}

#[test]
fn placement_follows_mongod() {
    let parse = |d: Document| Filter::parse(&d).map(|_| ()).map_err(|e| e.code);
    assert!(parse(doc! { "$text": { "$search": "a" }, "x": 1 }).is_ok());
    assert!(parse(doc! { "$and": [{ "$text": { "$search": "a" } }, { "x": 1 }] }).is_ok());
    for nested in [
        doc! { "$or": [{ "$text": { "$search": "a" } }, { "x": 1 }] },
        doc! { "$nor": [{ "$text": { "$search": "a" } }] },
        doc! { "a": { "$elemMatch": { "$text": { "$search": "a" } } } },
        doc! { "$and": [{ "$text": { "$search": "a" } }, { "$text": { "$search": "b" } }] },
    ] {
        assert_eq!(parse(nested.clone()), Err(ErrorCode::BadValue), "{nested}");
    }
}

#[test]
fn an_unbound_query_needs_a_text_index() {
    let q = TextQuery::parse(&Bson::Document(doc! { "$search": "a" })).unwrap();
    let d = RawDocumentBuf::try_from(&doc! { "t": "a" }).unwrap();
    assert_eq!(q.matches(&d).unwrap_err().code, ErrorCode::IndexNotFound);
}
