use super::*;
use bson::doc;

fn collator(spec: Document) -> Arc<Collator> {
    for_spec(&Spec::parse(&spec).unwrap()).unwrap().unwrap()
}

fn equal(c: &Collator, a: &str, b: &str) -> bool {
    c.compare(a, b) == Ordering::Equal
}

/// Accents, case, numbers, punctuation and the locale-specific letters of the issue.
pub(crate) const CORPUS: &[&str] = include!("corpus.in");

#[test]
fn strength_equality_tables() {
    // (left, right, equal at strength 1, 2, 3)
    let table = [
        ("a", "A", [true, true, false]),
        ("a", "á", [true, false, false]),
        ("A", "á", [true, false, false]),
        ("a", "b", [false, false, false]),
        ("ß", "ss", [true, false, false]),
        ("résumé", "RESUME", [true, false, false]),
        ("Straße", "strasse", [true, false, false]),
        ("abc", "abc", [true, true, true]),
    ];
    for strength in 1..=3 {
        let c = collator(doc! {"locale": "en", "strength": strength});
        for (a, b, want) in table {
            assert_eq!(
                equal(&c, a, b),
                want[strength as usize - 1],
                "{a} vs {b} at {strength}"
            );
        }
    }
}

#[test]
fn turkish_dotless_i() {
    let tr = collator(doc! {"locale": "tr", "strength": 2});
    let en = collator(doc! {"locale": "en", "strength": 2});
    assert!(equal(&tr, "I", "ı") && equal(&tr, "İ", "i"));
    assert!(!equal(&tr, "I", "i"));
    assert!(equal(&en, "I", "i"));
    // Turkish puts dotless ı before i.
    let tr3 = collator(doc! {"locale": "tr"});
    assert_eq!(tr3.compare("ı", "i"), Ordering::Less);
    assert_eq!(tr3.compare("h", "ı"), Ordering::Less);
}

#[test]
fn swedish_letters_follow_z() {
    let sv = collator(doc! {"locale": "sv"});
    let mut words = vec!["ö", "z", "ä", "å", "a"];
    words.sort_by(|a, b| sv.compare(a, b));
    assert_eq!(words, ["a", "z", "å", "ä", "ö"]);
    let de = collator(doc! {"locale": "de", "strength": 1});
    assert!(equal(&de, "ä", "a"));
}

#[test]
fn options_change_the_order() {
    let plain = collator(doc! {"locale": "en"});
    let numeric = collator(doc! {"locale": "en", "numericOrdering": true});
    assert_eq!(plain.compare("10", "2"), Ordering::Less);
    assert_eq!(numeric.compare("10", "2"), Ordering::Greater);
    assert_eq!(numeric.compare("ab2", "ab10"), Ordering::Less);
    let upper = collator(doc! {"locale": "en", "caseFirst": "upper"});
    let lower = collator(doc! {"locale": "en", "caseFirst": "lower"});
    assert_eq!(upper.compare("A", "a"), Ordering::Less);
    assert_eq!(lower.compare("a", "A"), Ordering::Less);
    let shifted = collator(doc! {"locale": "en", "alternate": "shifted"});
    assert!(equal(&shifted, "a-b", "ab") && equal(&shifted, "a b", "ab"));
    assert!(!equal(&plain, "a-b", "ab"));
    let space = collator(doc! {"locale": "en", "alternate": "shifted", "maxVariable": "space"});
    assert!(equal(&space, "a b", "ab") && !equal(&space, "a-b", "ab"));
    let quaternary = collator(doc! {"locale": "en", "alternate": "shifted", "strength": 4});
    assert!(!equal(&quaternary, "a-b", "ab"));
    let case_level = collator(doc! {"locale": "en", "strength": 1, "caseLevel": true});
    assert!(!equal(&case_level, "a", "A") && equal(&case_level, "a", "á"));
    let identical = collator(doc! {"locale": "en", "strength": 5});
    assert!(!equal(&identical, "a", "A"));
}

#[test]
fn key_strings_order_as_the_collator() {
    for spec in [
        doc! {"locale": "en"},
        doc! {"locale": "en", "strength": 1},
        doc! {"locale": "en", "strength": 2},
        doc! {"locale": "tr"},
        doc! {"locale": "de@collation=phonebook"},
        doc! {"locale": "en", "numericOrdering": true, "caseFirst": "upper"},
        doc! {"locale": "en", "alternate": "shifted", "strength": 4},
    ] {
        let c = collator(spec.clone());
        for a in CORPUS {
            for b in CORPUS {
                let by_key = c.key_string(a).as_bytes().cmp(c.key_string(b).as_bytes());
                assert_eq!(by_key, c.compare(a, b), "{a:?} vs {b:?} under {spec}");
            }
        }
    }
}

#[test]
fn nested_strings_collate_and_other_types_keep_their_bracket() {
    let c = collator(doc! {"locale": "en", "strength": 2});
    let _in = scope(Some(c));
    assert_eq!(
        compare_bson(
            &Bson::from(doc! {"a": ["X", "y"]}),
            &Bson::from(doc! {"a": ["x", "Y"]})
        ),
        Ordering::Equal
    );
    // Field names never collate.
    assert_ne!(
        compare_bson(&Bson::from(doc! {"A": 1}), &Bson::from(doc! {"a": 1})),
        Ordering::Equal
    );
    // A string still sorts after every number.
    assert_eq!(
        compare_bson(&Bson::from(""), &Bson::from(1e300)),
        Ordering::Greater
    );
    assert_eq!(key(&Bson::from("ABC")), key(&Bson::from("abc")));
    assert_eq!(key(&Bson::Int32(3)).into_owned(), Bson::Int32(3));
}

#[test]
fn scope_restores_the_simple_collation() {
    {
        let _in = scope(Some(collator(doc! {"locale": "en", "strength": 1})));
        assert_eq!(compare_bson(&"a".into(), &"A".into()), Ordering::Equal);
    }
    assert!(current().is_none());
    assert_ne!(compare_bson(&"a".into(), &"A".into()), Ordering::Equal);
}

#[test]
fn locales() {
    let code = |l: &str| {
        Spec::parse(&doc! {"locale": l})
            .and_then(|s| for_spec(&s))
            .map(|_| 0)
            .unwrap_or_else(|e| e.code.code())
    };
    for ok in [
        "en",
        "en_US",
        "fr_CA",
        "zh_Hant",
        "de@collation=phonebook",
        "sr_Latn",
    ] {
        assert_eq!(code(ok), 0, "{ok}");
    }
    for bad in ["xx", "abc", "en@collation=nonsense", "en@colour=red"] {
        assert_eq!(code(bad), 2, "{bad}");
    }
    let backwards = Spec::parse(&doc! {"locale": "en", "backwards": true}).unwrap();
    assert_eq!(for_spec(&backwards).unwrap_err().code.code(), 2);
}
