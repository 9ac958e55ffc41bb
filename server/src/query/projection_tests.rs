// Proves find projections behave as mongod documents them (inclusion/exclusion, _id, arrays,
// $slice, $elemMatch, positional, computed fields, mixing errors) on hand-written documents.

use super::*;
use bson::RawDocumentBuf;

fn p(spec: Document, d: Document) -> Document {
    p_pos(spec, d, None)
}

fn p_pos(spec: Document, d: Document, pos: Option<usize>) -> Document {
    let raw = RawDocumentBuf::try_from(&d).expect("encodes");
    Projection::parse(&spec)
        .expect("projection parses")
        .apply(&raw, pos)
        .expect("applies")
}

fn code(spec: Document) -> i32 {
    Projection::parse(&spec)
        .expect_err("must be refused")
        .code
        .code()
}

#[test]
fn inclusion_and_id() {
    let d = doc! {"_id": 1, "a": 1, "b": 2, "c": 3};
    assert_eq!(
        p(doc! {"b": 1, "a": 1}, d.clone()),
        doc! {"_id": 1, "a": 1, "b": 2}
    );
    assert_eq!(p(doc! {"a": 1, "_id": 0}, d.clone()), doc! {"a": 1});
    assert_eq!(p(doc! {"a": true}, d.clone()), doc! {"_id": 1, "a": 1});
    assert_eq!(p(doc! {"_id": 1}, d.clone()), doc! {"_id": 1});
    assert_eq!(p(doc! {"_id": 0}, d.clone()), doc! {"a": 1, "b": 2, "c": 3});
    assert_eq!(p(doc! {"zz": 1}, d), doc! {"_id": 1});
}

#[test]
fn exclusion() {
    let d = doc! {"_id": 1, "a": 1, "b": {"c": 1, "d": 2}};
    assert_eq!(
        p(doc! {"a": 0}, d.clone()),
        doc! {"_id": 1, "b": {"c": 1, "d": 2}}
    );
    assert_eq!(
        p(doc! {"b.c": 0, "_id": 0}, d.clone()),
        doc! {"a": 1, "b": {"d": 2}}
    );
    assert_eq!(
        p(doc! {"a": false, "_id": 1}, d),
        doc! {"_id": 1, "b": {"c": 1, "d": 2}}
    );
}

#[test]
fn dotted_paths_through_arrays() {
    let d = doc! {"_id": 1, "a": [{"b": 1, "c": 2}, 5, {"c": 3}, [{"b": 4}]]};
    assert_eq!(
        p(doc! {"a.b": 1, "_id": 0}, d.clone()),
        doc! {"a": [{"b": 1}, {}, [{"b": 4}]]}
    );
    assert_eq!(
        p(doc! {"a.b": 0, "_id": 0}, d),
        doc! {"a": [{"c": 2}, 5, {"c": 3}, [{}]]}
    );
    let nested = doc! {"a": {"b": {"c": 1, "d": 1}, "e": 1}};
    assert_eq!(
        p(doc! {"a": {"b": {"c": 1}}}, nested),
        doc! {"a": {"b": {"c": 1}}}
    );
}

#[test]
fn slice_elem_match_positional() {
    let d = doc! {"_id": 1, "a": [1, 2, 3, 4, 5], "b": 1};
    assert_eq!(
        p(doc! {"a": {"$slice": 2}}, d.clone()),
        doc! {"_id": 1, "a": [1, 2], "b": 1}
    );
    assert_eq!(
        p(doc! {"a": {"$slice": -2}}, d.clone()),
        doc! {"_id": 1, "a": [4, 5], "b": 1}
    );
    assert_eq!(
        p(doc! {"a": {"$slice": [1, 2]}, "b": 1}, d.clone()),
        doc! {"_id": 1, "a": [2, 3], "b": 1}
    );
    assert_eq!(
        p(doc! {"a": {"$slice": [-2, 5]}, "_id": 0, "b": 0}, d.clone()),
        doc! {"a": [4, 5]}
    );
    let e = doc! {"_id": 1, "xs": [{"k": 1}, {"k": 2}, {"k": 2, "z": 1}]};
    assert_eq!(
        p(doc! {"xs": {"$elemMatch": {"k": 2}}}, e.clone()),
        doc! {"_id": 1, "xs": [{"k": 2}]}
    );
    assert_eq!(p(doc! {"xs": {"$elemMatch": {"k": 9}}}, e), doc! {"_id": 1});
    assert_eq!(
        p_pos(doc! {"a.$": 1}, d.clone(), Some(3)),
        doc! {"_id": 1, "a": [4]}
    );
    let r = Projection::parse(&doc! {"a.$": 1})
        .expect("parses")
        .apply(&RawDocumentBuf::try_from(&d).expect("encodes"), None);
    assert_eq!(r.expect_err("no position").code.code(), 51246);
}

#[test]
fn computed_fields() {
    let d = doc! {"_id": 1, "a": 2, "b": 3};
    assert_eq!(
        p(doc! {"s": {"$add": ["$a", "$b"]}, "_id": 0}, d.clone()),
        doc! {"s": 5}
    );
    assert_eq!(
        p(doc! {"a": 1, "lit": "x"}, d.clone()),
        doc! {"_id": 1, "a": 2, "lit": "x"}
    );
    assert_eq!(p(doc! {"c": "$a"}, d.clone()), doc! {"_id": 1, "c": 2});
    assert_eq!(p(doc! {"m": "$missing", "_id": 0}, d.clone()), doc! {});
    assert_eq!(
        p(doc! {"x.y": {"$literal": 1}, "_id": 0}, d),
        doc! {"x": {"y": 1}}
    );
}

#[test]
fn errors_like_mongod() {
    assert_eq!(code(doc! {"a": 1, "b": 0}), 31254);
    assert_eq!(code(doc! {"a": 0, "b": 1}), 31253);
    assert_eq!(code(doc! {"a": 1, "a.b": 1}), 31250);
    assert_eq!(code(doc! {"a.b": 1, "a": 1}), 31249);
    assert_eq!(code(doc! {"a": {"$meta": "searchScore"}}), 238);
    assert_eq!(code(doc! {"a.b": {"$elemMatch": {"x": 1}}}), 31275);
    assert_eq!(code(doc! {"a.$": 1, "b.$": 1}), 31276);
    assert_eq!(code(doc! {"a": {"$slice": [1, 0]}}), 28724);
    assert_eq!(code(doc! {"a": {"$foo": 1}}), 168);
    // _id: 0 is allowed in an inclusion projection and _id: 1 in an exclusion one.
    assert!(Projection::parse(&doc! {"a": 1, "_id": 0}).is_ok());
    assert!(Projection::parse(&doc! {"a": 0, "_id": 1}).is_ok());
}

#[test]
fn corpus_values_survive_inclusion() {
    for v in storage::order::corpus() {
        let d = doc! {"_id": 0, "v": v.clone(), "w": 1};
        let out = p(doc! {"v": 1, "_id": 0}, d);
        let got = out.get("v").expect("kept");
        assert_eq!(
            storage::order::compare_bson(got, &v),
            std::cmp::Ordering::Equal,
            "{v:?}"
        );
        assert_eq!(types::type_code(got), types::type_code(&v));
    }
}

#[test]
fn text_score_fields_are_added_and_keep_the_mode() {
    let d = bson::rawdoc! {"_id": 1, "a": 1, "b": 2, "s": "old"};
    let p = Projection::parse(&doc! {"s": {"$meta": "textScore"}}).unwrap();
    assert!(p.wants_text_score());
    let out = p.apply_scored(&d, None, 1.5).unwrap();
    assert_eq!(
        Document::try_from(out.as_ref()).unwrap(),
        doc! {"_id": 1, "a": 1, "b": 2, "s": 1.5}
    );
    let p = Projection::parse(&doc! {"a": 1, "score": {"$meta": "textScore"}}).unwrap();
    let out = p.apply_scored(&d, None, 0.75).unwrap();
    assert_eq!(
        Document::try_from(out.as_ref()).unwrap(),
        doc! {"_id": 1, "a": 1, "score": 0.75}
    );
}
