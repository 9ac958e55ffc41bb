// Proves update operators follow mongod's documented semantics (results, nModified exactness,
// type promotion, path creation, array operators, positional forms) and its error codes/messages,
// by applying hand-written updates to hand-written documents.

use super::*;
use bson::doc;

fn ctx() -> ApplyContext {
    ApplyContext {
        is_insert: false,
        positional: None,
        now: DateTime::from_millis(1_700_000_000_000),
    }
}

fn run(update: Document, mut d: Document) -> (Document, bool) {
    let changed = run_with(update, &mut d, None, ctx()).expect("update applies");
    (d, changed)
}

fn run_with(
    update: Document,
    d: &mut Document,
    filters: Option<&[Document]>,
    c: ApplyContext,
) -> CommandResult<bool> {
    Update::parse(&update, filters)?.apply(d, &c)
}

fn apply_err(update: Document, mut d: Document) -> (i32, String) {
    let e = run_with(update, &mut d, None, ctx()).expect_err("update must fail");
    (e.code.code(), e.message)
}

fn parse_err(update: Document) -> (i32, String) {
    let e = Update::parse(&update, None).expect_err("update must be refused");
    (e.code.code(), e.message)
}

#[test]
fn set_unset_and_no_ops() {
    assert_eq!(
        run(doc! {"$set": {"a": 2}}, doc! {"_id": 1, "a": 1}),
        (doc! {"_id": 1, "a": 2}, true)
    );
    assert_eq!(
        run(doc! {"$set": {"a": 1}}, doc! {"_id": 1, "a": 1}),
        (doc! {"_id": 1, "a": 1}, false)
    );
    // A different numeric type is a modification even when equal by value.
    assert!(run(doc! {"$set": {"a": 1.0}}, doc! {"_id": 1, "a": 1}).1);
    assert_eq!(
        run(doc! {"$set": {"z": 1, "b": 1}}, doc! {"_id": 1}).0,
        doc! {"_id": 1, "b": 1, "z": 1}
    );
    assert_eq!(
        run(doc! {"$set": {"a.b.c": 1}}, doc! {"_id": 1}).0,
        doc! {"_id": 1, "a": {"b": {"c": 1}}}
    );
    assert_eq!(
        run(doc! {"$set": {"a.2": 1}}, doc! {"a": [0]}).0,
        doc! {"a": [0, Bson::Null, 1]}
    );
    assert_eq!(
        run(doc! {"$set": {"a.1.b": 1}}, doc! {"a": [0]}).0,
        doc! {"a": [0, {"b": 1}]}
    );
    assert_eq!(
        run(doc! {"$set": {"a.0": 1}}, doc! {}).0,
        doc! {"a": {"0": 1}}
    );
    assert_eq!(
        run(doc! {"$unset": {"a": ""}}, doc! {"a": 1, "b": 2}),
        (doc! {"b": 2}, true)
    );
    assert_eq!(
        run(doc! {"$unset": {"x.y": 1}}, doc! {"a": 1}),
        (doc! {"a": 1}, false)
    );
    assert_eq!(
        run(doc! {"$unset": {"a.1": 1}}, doc! {"a": [1, 2, 3]}).0,
        doc! {"a": [1, Bson::Null, 3]}
    );
    assert_eq!(
        run(doc! {"$set": {}}, doc! {"a": 1}),
        (doc! {"a": 1}, false)
    );
}

#[test]
fn path_creation_errors() {
    let (c, m) = apply_err(doc! {"$set": {"a.b": 1}}, doc! {"_id": 1, "a": 1});
    assert_eq!(
        (c, m.as_str()),
        (28, "Cannot create field 'b' in element {a: 1}")
    );
    let (c, m) = apply_err(doc! {"$set": {"a.b": 1}}, doc! {"_id": 1, "a": Bson::Null});
    assert_eq!(
        (c, m.as_str()),
        (28, "Cannot create field 'b' in element {a: null}")
    );
    let (c, m) = apply_err(doc! {"$set": {"a.b": 1}}, doc! {"_id": 1, "a": [1]});
    assert_eq!(
        (c, m.as_str()),
        (28, "Cannot create field 'b' in element {a: [ 1 ]}")
    );
}

#[test]
fn inc_mul_min_max() {
    assert_eq!(run(doc! {"$inc": {"a": 1}}, doc! {"a": 1}).0, doc! {"a": 2});
    assert_eq!(
        run(doc! {"$inc": {"a": 1}}, doc! {"a": i32::MAX}).0,
        doc! {"a": i64::from(i32::MAX) + 1}
    );
    assert_eq!(
        run(doc! {"$inc": {"a": 1.5}}, doc! {"a": 1}).0,
        doc! {"a": 2.5}
    );
    assert_eq!(
        run(doc! {"$inc": {"a": 1i64}}, doc! {"a": 1}).0,
        doc! {"a": 2i64}
    );
    assert_eq!(
        run(doc! {"$inc": {"n.x": 5}}, doc! {}).0,
        doc! {"n": {"x": 5}}
    );
    assert!(!run(doc! {"$inc": {"a": 0}}, doc! {"a": 1}).1);
    assert_eq!(run(doc! {"$mul": {"a": 3}}, doc! {"a": 2}).0, doc! {"a": 6});
    assert_eq!(run(doc! {"$mul": {"a": 3i64}}, doc! {}).0, doc! {"a": 0i64});
    assert_eq!(run(doc! {"$min": {"a": 1}}, doc! {"a": 2}).0, doc! {"a": 1});
    assert_eq!(
        run(doc! {"$min": {"a": 3}}, doc! {"a": 2}),
        (doc! {"a": 2}, false)
    );
    assert_eq!(
        run(doc! {"$max": {"a": "s"}}, doc! {"a": 2}).0,
        doc! {"a": "s"}
    );
    assert_eq!(run(doc! {"$max": {"a": 1}}, doc! {}).0, doc! {"a": 1});
    let (c, m) = apply_err(doc! {"$inc": {"a": 1}}, doc! {"_id": 1, "a": "x"});
    assert_eq!(c, 14);
    assert_eq!(
        m,
        "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'a' of non-numeric type string"
    );
    assert_eq!(
        apply_err(doc! {"$inc": {"a": 1i64}}, doc! {"_id": 1, "a": i64::MAX}).0,
        2
    );
    assert_eq!(parse_err(doc! {"$inc": {"a": "1"}}).0, 14);
}

#[test]
fn bit_operator() {
    assert_eq!(
        run(doc! {"$bit": {"a": {"and": 6}}}, doc! {"a": 3}).0,
        doc! {"a": 2}
    );
    assert_eq!(
        run(doc! {"$bit": {"a": {"or": 4i64}}}, doc! {"a": 3}).0,
        doc! {"a": 7i64}
    );
    assert_eq!(
        run(doc! {"$bit": {"a": {"xor": 1, "or": 8}}}, doc! {"a": 1}).0,
        doc! {"a": 8}
    );
    assert_eq!(
        run(doc! {"$bit": {"n": {"or": 5}}}, doc! {}).0,
        doc! {"n": 5}
    );
    assert!(!run(doc! {"$bit": {"a": {"and": -1}}}, doc! {"a": 3}).1);
    assert_eq!(parse_err(doc! {"$bit": {"a": {"not": 1}}}).0, 2);
    assert_eq!(parse_err(doc! {"$bit": {"a": {"and": 1.0}}}).0, 2);
    assert_eq!(
        apply_err(doc! {"$bit": {"a": {"and": 1}}}, doc! {"_id": 1, "a": 1.5}).0,
        2
    );
}

#[test]
fn decimal_arithmetic_is_exact() {
    let dec = |s: &str| Bson::Decimal128(s.parse().expect("decimal"));
    assert_eq!(
        run(doc! {"$inc": {"m": dec("0.2")}}, doc! {"m": dec("0.1")}).0,
        doc! {"m": dec("0.3")}
    );
    assert_eq!(
        run(doc! {"$inc": {"m": 1}}, doc! {"m": dec("0.10")}).0,
        doc! {"m": dec("1.10")}
    );
    assert_eq!(
        run(doc! {"$mul": {"m": dec("1.5")}}, doc! {"m": 2}).0,
        doc! {"m": dec("3.0")}
    );
}

#[test]
fn rename_and_current_date_and_set_on_insert() {
    assert_eq!(
        run(doc! {"$rename": {"a": "b"}}, doc! {"a": 1, "c": 2}).0,
        doc! {"c": 2, "b": 1}
    );
    assert_eq!(
        run(doc! {"$rename": {"a": "x.y"}}, doc! {"a": 1}).0,
        doc! {"x": {"y": 1}}
    );
    assert_eq!(
        run(doc! {"$rename": {"q": "b"}}, doc! {"a": 1}),
        (doc! {"a": 1}, false)
    );
    assert_eq!(parse_err(doc! {"$rename": {"a": "a"}}).0, 2);
    assert_eq!(parse_err(doc! {"$rename": {"a": "a.b"}}).0, 2);
    assert_eq!(parse_err(doc! {"$rename": {"a": 1}}).0, 2);
    let (d, changed) = run(
        doc! {"$currentDate": {"t": true, "s": {"$type": "timestamp"}}},
        doc! {},
    );
    assert!(changed);
    assert_eq!(
        d.get("t"),
        Some(&Bson::DateTime(DateTime::from_millis(1_700_000_000_000)))
    );
    assert!(matches!(d.get("s"), Some(Bson::Timestamp(_))));
    assert_eq!(
        run(doc! {"$setOnInsert": {"a": 1}}, doc! {}),
        (doc! {}, false)
    );
    let mut d = doc! {};
    run_with(
        doc! {"$setOnInsert": {"a": 1}},
        &mut d,
        None,
        ApplyContext {
            is_insert: true,
            ..ctx()
        },
    )
    .expect("ok");
    assert_eq!(d, doc! {"a": 1});
}

#[test]
fn push_and_modifiers() {
    assert_eq!(run(doc! {"$push": {"a": 1}}, doc! {}).0, doc! {"a": [1]});
    assert_eq!(
        run(doc! {"$push": {"a": [1]}}, doc! {"a": [0]}).0,
        doc! {"a": [0, [1]]}
    );
    assert_eq!(
        run(
            doc! {"$push": {"a": {"$each": [3, 1], "$sort": 1}}},
            doc! {"a": [2]}
        )
        .0,
        doc! {"a": [1, 2, 3]}
    );
    assert_eq!(
        run(
            doc! {"$push": {"a": {"$each": [3, 4], "$slice": -2}}},
            doc! {"a": [1, 2]}
        )
        .0,
        doc! {"a": [3, 4]}
    );
    assert_eq!(
        run(
            doc! {"$push": {"a": {"$each": [9], "$position": 0}}},
            doc! {"a": [1, 2]}
        )
        .0,
        doc! {"a": [9, 1, 2]}
    );
    assert_eq!(
        run(
            doc! {"$push": {"a": {"$each": [9], "$position": -1}}},
            doc! {"a": [1, 2]}
        )
        .0,
        doc! {"a": [1, 9, 2]}
    );
    let scores = doc! {"a": [{"s": 3}, {"s": 1}]};
    assert_eq!(
        run(
            doc! {"$push": {"a": {"$each": [{"s": 2}], "$sort": {"s": -1}, "$slice": 2}}},
            scores
        )
        .0,
        doc! {"a": [{"s": 3}, {"s": 2}]}
    );
    assert!(!run(doc! {"$push": {"a": {"$each": []}}}, doc! {"a": [1]}).1);
    let (c, m) = apply_err(doc! {"$push": {"a": 1}}, doc! {"_id": 1, "a": 1});
    assert_eq!(
        (c, m.as_str()),
        (
            2,
            "The field 'a' must be an array but is of type int in document {_id: 1}"
        )
    );
    assert_eq!(parse_err(doc! {"$push": {"a": {"$each": 1}}}).0, 2);
    assert_eq!(
        parse_err(doc! {"$push": {"a": {"$each": [1], "$bogus": 1}}}).1,
        "Unrecognized clause in $push: $bogus"
    );
}

#[test]
fn add_to_set_pop_pull() {
    assert_eq!(
        run(doc! {"$addToSet": {"a": 1}}, doc! {"a": [1.0, 2]}),
        (doc! {"a": [1.0, 2]}, false)
    );
    assert_eq!(
        run(
            doc! {"$addToSet": {"a": {"$each": [3, 3, 4]}}},
            doc! {"a": [3]}
        )
        .0,
        doc! {"a": [3, 4]}
    );
    assert_eq!(
        run(doc! {"$addToSet": {"a": 1}}, doc! {}).0,
        doc! {"a": [1]}
    );
    assert_eq!(apply_err(doc! {"$addToSet": {"a": 1}}, doc! {"a": 5}).0, 2);
    assert_eq!(
        run(doc! {"$pop": {"a": 1}}, doc! {"a": [1, 2]}).0,
        doc! {"a": [1]}
    );
    assert_eq!(
        run(doc! {"$pop": {"a": -1}}, doc! {"a": [1, 2]}).0,
        doc! {"a": [2]}
    );
    assert!(!run(doc! {"$pop": {"a": 1}}, doc! {"a": []}).1);
    assert_eq!(apply_err(doc! {"$pop": {"a": 1}}, doc! {"a": 5}).0, 14);
    assert_eq!(parse_err(doc! {"$pop": {"a": 2}}).0, 9);
    assert_eq!(
        run(doc! {"$pull": {"a": 2}}, doc! {"a": [1, 2, 2.0, 3]}).0,
        doc! {"a": [1, 3]}
    );
    assert_eq!(
        run(doc! {"$pull": {"a": {"$gte": 2}}}, doc! {"a": [1, 2, 3]}).0,
        doc! {"a": [1]}
    );
    assert_eq!(
        run(
            doc! {"$pull": {"a": {"k": 1}}},
            doc! {"a": [{"k": 1, "x": 2}, {"k": 2}, 1]}
        )
        .0,
        doc! {"a": [{"k": 2}, 1]}
    );
    assert!(!run(doc! {"$pull": {"a": 9}}, doc! {"a": [1]}).1);
    assert_eq!(
        run(doc! {"$pullAll": {"a": [1, 3]}}, doc! {"a": [1, 2, 3, 1]}).0,
        doc! {"a": [2]}
    );
}

#[test]
fn positional_forms() {
    let mut d = doc! {"a": [1, 2, 3]};
    run_with(
        doc! {"$set": {"a.$": 9}},
        &mut d,
        None,
        ApplyContext {
            positional: Some(1),
            ..ctx()
        },
    )
    .expect("ok");
    assert_eq!(d, doc! {"a": [1, 9, 3]});
    let e = run_with(doc! {"$set": {"a.$": 9}}, &mut doc! {"a": [1]}, None, ctx())
        .expect_err("no match");
    assert_eq!(
        e.message,
        "The positional operator did not find the match needed from the query."
    );
    assert_eq!(
        run(doc! {"$inc": {"a.$[]": 1}}, doc! {"a": [1, 2]}).0,
        doc! {"a": [2, 3]}
    );
    assert_eq!(
        run(
            doc! {"$set": {"a.$[].b": 0}},
            doc! {"a": [{"b": 1}, {"c": 1}]}
        )
        .0,
        doc! {"a": [{"b": 0}, {"c": 1, "b": 0}]}
    );
    let filters = [doc! {"x": {"$gt": 1}}];
    let mut d = doc! {"a": [1, 2, 3]};
    run_with(doc! {"$set": {"a.$[x]": 0}}, &mut d, Some(&filters), ctx()).expect("ok");
    assert_eq!(d, doc! {"a": [1, 0, 0]});
    let filters = [doc! {"e.k": 1}];
    let mut d = doc! {"a": [{"k": 1, "v": 0}, {"k": 2, "v": 0}]};
    run_with(
        doc! {"$set": {"a.$[e].v": 5}},
        &mut d,
        Some(&filters),
        ctx(),
    )
    .expect("ok");
    assert_eq!(d, doc! {"a": [{"k": 1, "v": 5}, {"k": 2, "v": 0}]});
    let filters = [doc! {"$or": [{"e.k": 2}, {"e.v": 5}]}];
    run_with(
        doc! {"$inc": {"a.$[e].v": 1}},
        &mut d,
        Some(&filters),
        ctx(),
    )
    .expect("ok");
    assert_eq!(d, doc! {"a": [{"k": 1, "v": 6}, {"k": 2, "v": 1}]});
    assert_eq!(apply_err(doc! {"$set": {"a.$[]": 1}}, doc! {"a": 1}).0, 2);
    let (c, m) = apply_err(doc! {"$set": {"a.$[].b": 1}}, doc! {"a": [{"b": 0}, 7]});
    assert_eq!(
        (c, m.as_str()),
        (28, "Cannot create field 'b' in element {1: 7}")
    );
    assert_eq!(apply_err(doc! {"$set": {"q.$[].b": 1}}, doc! {"a": 1}).0, 2);
}

#[test]
fn array_filter_errors() {
    let e = Update::parse(&doc! {"$set": {"a.$[x]": 1}}, None).expect_err("missing filter");
    assert_eq!(
        (e.code.code(), e.message.as_str()),
        (
            2,
            "No array filter found for identifier 'x' in path 'a.$[x]'"
        )
    );
    let e = Update::parse(&doc! {"$set": {"a": 1}}, Some(&[doc! {"x": 1}])).expect_err("unused");
    assert_eq!(e.code.code(), 9);
    assert!(
        e.message
            .starts_with("The array filter for identifier 'x' was not used in the update")
    );
    let e = Update::parse(
        &doc! {"$set": {"a.$[x]": 1}},
        Some(&[doc! {"x": 1}, doc! {"x": 2}]),
    )
    .expect_err("dup");
    assert_eq!(e.code.code(), 9);
    let e =
        Update::parse(&doc! {"$set": {"a.$[X]": 1}}, Some(&[doc! {"X": 1}])).expect_err("bad id");
    assert_eq!(e.code.code(), 2);
}

#[test]
fn parse_errors_and_conflicts() {
    let (c, m) = parse_err(doc! {"$set": {"a": 1}, "$inc": {"a.b": 1}});
    assert_eq!(
        (c, m.as_str()),
        (40, "Updating the path 'a.b' would create a conflict at 'a'")
    );
    let (c, m) = parse_err(doc! {"$set": {"a.b": 1, "a": 1}});
    assert_eq!(
        (c, m.as_str()),
        (40, "Updating the path 'a' would create a conflict at 'a'")
    );
    assert_eq!(
        parse_err(doc! {"$rename": {"a": "b"}, "$set": {"b": 1}}).0,
        40
    );
    let (c, m) = parse_err(doc! {"$foo": {"a": 1}});
    assert_eq!(c, 9);
    assert!(m.starts_with("Unknown modifier: $foo"));
    assert_eq!(parse_err(doc! {"$set": {"a": 1}, "b": 1}).0, 9);
    assert_eq!(parse_err(doc! {"$set": 5}).0, 9);
    assert_eq!(parse_err(doc! {"a": 1, "$set": {"b": 1}}).0, 52);
    assert_eq!(parse_err(doc! {"$set": {"a..b": 1}}).0, 56);
    assert_eq!(parse_err(doc! {"$set": {"$x": 1}}).0, 52);
}

#[test]
fn id_is_immutable() {
    let (c, m) = apply_err(doc! {"$set": {"_id": 2}}, doc! {"_id": 1});
    assert_eq!(
        (c, m.as_str()),
        (
            66,
            "Performing an update on the path '_id' would modify the immutable field '_id'"
        )
    );
    assert_eq!(
        run(doc! {"$set": {"_id": 1}}, doc! {"_id": 1}),
        (doc! {"_id": 1}, false)
    );
    assert_eq!(
        apply_err(doc! {"$unset": {"_id": 1}}, doc! {"_id": 1}).0,
        66
    );
    assert_eq!(
        apply_err(doc! {"$set": {"_id.a": 1}}, doc! {"_id": {"a": 0}}).0,
        66
    );
    assert_eq!(run(doc! {"$set": {"_id": 5}}, doc! {}).0, doc! {"_id": 5});
}

#[test]
fn replacement() {
    let u = Update::parse(&doc! {"b": 2}, None).expect("parses");
    assert!(u.is_replacement());
    let mut d = doc! {"_id": 1, "a": 1};
    assert!(u.apply(&mut d, &ctx()).expect("ok"));
    assert_eq!(d, doc! {"_id": 1, "b": 2});
    assert!(!u.apply(&mut d, &ctx()).expect("ok"));
    let u = Update::parse(&doc! {"_id": 2}, None).expect("parses");
    assert_eq!(
        u.apply(&mut d, &ctx()).expect_err("id changes").code.code(),
        66
    );
}

#[test]
fn upsert_seed_rules() {
    let f = Filter::parse(&doc! {"_id": 7, "a.b": 1, "c": {"$gt": 1}, "$and": [{"d": 2}]})
        .expect("parses");
    assert_eq!(
        upsert_seed(&f).expect("seed"),
        doc! {"_id": 7, "a": {"b": 1}, "d": 2}
    );
    let f = Filter::parse(&doc! {"a": 1, "$and": [{"a": 2}]}).expect("parses");
    assert_eq!(upsert_seed(&f).expect_err("twice").code.code(), 54);
    let f = Filter::parse(&doc! {"a": 1, "a.b": 2}).expect("parses");
    assert_eq!(upsert_seed(&f).expect_err("prefix").code.code(), 54);
}

#[test]
fn corpus_values_set_and_compare() {
    // Every corpus value can be $set, $min/$max'd against every other, and $addToSet'd without
    // panicking, and setting a value onto itself is never a modification.
    let corpus = storage::order::corpus();
    for v in &corpus {
        let (d, changed) = run(doc! {"$set": {"a": v.clone()}}, doc! {"a": v.clone()});
        assert!(!changed, "{v:?}");
        assert!(d.get("a").is_some_and(|x| apply::identical(x, v)));
        for w in &corpus {
            let _ = run(doc! {"$max": {"a": w.clone()}}, doc! {"a": v.clone()});
            let _ = run(
                doc! {"$addToSet": {"a": w.clone()}},
                doc! {"a": [v.clone()]},
            );
        }
    }
}
