// Proves the matcher follows mongod's documented filter semantics (arrays, null/missing, type
// brackets, NaN, every operator) and its parse errors, by matching hand-written cases.

use super::*;
use bson::{Bson, RawDocumentBuf, doc};

fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(d).expect("test document encodes")
}

fn m(filter: Document, d: Document) -> bool {
    Filter::parse(&filter)
        .expect("filter parses")
        .matches(&raw(&d))
}

fn parse_err(filter: Document) -> (i32, String) {
    let e = Filter::parse(&filter).expect_err("filter must be refused");
    (e.code.code(), e.message)
}

#[test]
fn equality_and_arrays() {
    assert!(m(doc! {"a": 1}, doc! {"a": 1.0}));
    assert!(m(doc! {"a": 1}, doc! {"a": [3, 1]}));
    assert!(m(doc! {"a": [3, 1]}, doc! {"a": [3, 1]}));
    assert!(!m(doc! {"a": [1, 3]}, doc! {"a": [3, 1]}));
    assert!(m(doc! {"a": [1]}, doc! {"a": [[1], 2]}));
    assert!(!m(doc! {"a": 1}, doc! {"a": [[1]]}));
    assert!(m(doc! {"a.b": 2}, doc! {"a": [{"b": 1}, {"b": 2}]}));
    assert!(m(doc! {"a.1": 2}, doc! {"a": [1, 2]}));
    assert!(m(doc! {"a.b": {"c": 1}}, doc! {"a": {"b": {"c": 1}}}));
    assert!(!m(
        doc! {"a.b": {"c": 1}},
        doc! {"a": {"b": {"c": 1, "d": 2}}}
    ));
    assert!(m(doc! {"a": "x"}, doc! {"a": Bson::Symbol("x".into())}));
    assert!(m(doc! {}, doc! {"anything": 1}));
}

#[test]
fn null_matches_missing_but_not_undefined() {
    assert!(m(doc! {"a": Bson::Null}, doc! {}));
    assert!(m(doc! {"a": Bson::Null}, doc! {"a": Bson::Null}));
    // mongod 8.0: undefined is no longer equal to null.
    assert!(!m(doc! {"a": Bson::Null}, doc! {"a": Bson::Undefined}));
    assert!(!m(doc! {"a": Bson::Null}, doc! {"a": [1, Bson::Undefined]}));
    assert!(m(
        doc! {"a": {"$ne": Bson::Null}},
        doc! {"a": Bson::Undefined}
    ));
    assert!(m(doc! {"a": Bson::Null}, doc! {"a": [1, Bson::Null]}));
    assert!(!m(doc! {"a": Bson::Null}, doc! {"a": []}));
    assert!(!m(doc! {"a": Bson::Null}, doc! {"a": 0}));
    assert!(m(doc! {"a.b": Bson::Null}, doc! {"a": 5}));
    assert!(m(doc! {"a.b": Bson::Null}, doc! {"a": [{"c": 1}]}));
    assert!(!m(doc! {"a.b": Bson::Null}, doc! {"a": [{"b": 1}]}));
    assert!(m(doc! {"a": {"$ne": Bson::Null}}, doc! {"a": 1}));
    assert!(!m(doc! {"a": {"$ne": Bson::Null}}, doc! {}));
    assert!(m(doc! {"a": {"$gte": Bson::Null}}, doc! {}));
    assert!(!m(doc! {"a": {"$gt": Bson::Null}}, doc! {}));
    assert!(m(doc! {"a": {"$in": [Bson::Null, 5]}}, doc! {}));
    assert!(!m(doc! {"a": {"$nin": [Bson::Null]}}, doc! {"b": 1}));
}

#[test]
fn comparisons_are_type_bracketed() {
    assert!(m(doc! {"a": {"$gt": 5}}, doc! {"a": 6i64}));
    assert!(!m(doc! {"a": {"$gt": 5}}, doc! {"a": "6"}));
    assert!(!m(doc! {"a": {"$lt": "a"}}, doc! {"a": 1}));
    assert!(
        m(doc! {"a": {"$gt": 1, "$lt": 3}}, doc! {"a": [0, 5]}),
        "elements may satisfy each bound separately"
    );
    assert!(!m(
        doc! {"a": {"$elemMatch": {"$gt": 1, "$lt": 3}}},
        doc! {"a": [0, 5]}
    ));
    assert!(m(doc! {"a": {"$gt": Bson::MinKey}}, doc! {"a": "x"}));
    assert!(m(doc! {"a": {"$gt": Bson::MinKey}}, doc! {}));
    assert!(m(doc! {"a": {"$lt": Bson::MaxKey}}, doc! {"a": {"b": 1}}));
    assert!(m(doc! {"a": {"$gte": [1]}}, doc! {"a": [1, 2]}));
    assert!(m(
        doc! {"a": {"$lt": bson::DateTime::from_millis(5)}},
        doc! {"a": bson::DateTime::from_millis(-62_167_219_200_000i64)}
    ));
    assert!(m(
        doc! {"a": {"$gt": 9_007_199_254_740_992i64}},
        doc! {"a": 9_007_199_254_740_993i64}
    ));
    assert!(!m(
        doc! {"a": {"$gt": 9_007_199_254_740_992.0}},
        doc! {"a": 9_007_199_254_740_992i64}
    ));
}

#[test]
fn nan_rules() {
    assert!(m(doc! {"a": f64::NAN}, doc! {"a": f64::NAN}));
    assert!(!m(doc! {"a": {"$gt": f64::NAN}}, doc! {"a": 1}));
    assert!(!m(doc! {"a": {"$lt": 1}}, doc! {"a": f64::NAN}));
    assert!(m(doc! {"a": {"$gte": f64::NAN}}, doc! {"a": f64::NAN}));
    assert!(m(doc! {"a": 0}, doc! {"a": -0.0}));
}

#[test]
fn logical_operators() {
    assert!(m(doc! {"$or": [{"a": 1}, {"b": 1}]}, doc! {"b": 1}));
    assert!(!m(doc! {"$and": [{"a": 1}, {"b": 1}]}, doc! {"b": 1}));
    assert!(m(doc! {"$nor": [{"a": 1}, {"b": 1}]}, doc! {"c": 1}));
    assert!(m(doc! {"a": {"$not": {"$gt": 5}}}, doc! {"a": 3}));
    assert!(m(doc! {"a": {"$not": {"$gt": 5}}}, doc! {}));
    assert!(!m(doc! {"a": {"$ne": 1}}, doc! {"a": [1, 2]}));
    assert!(!m(doc! {"a": {"$nin": [1, 9]}}, doc! {"a": [1, 2]}));
    assert!(m(
        doc! {"a": {"$not": bson::Regex { pattern: "^x".try_into().expect("cstr"), options: "".try_into().expect("cstr") }}},
        doc! {"a": "y"}
    ));
}

#[test]
fn element_and_evaluation_operators() {
    assert!(m(doc! {"a": {"$exists": true}}, doc! {"a": Bson::Null}));
    assert!(m(doc! {"a": {"$exists": false}}, doc! {"b": 1}));
    assert!(!m(doc! {"a.b": {"$exists": true}}, doc! {"a": [1]}));
    assert!(m(doc! {"a": {"$type": "number"}}, doc! {"a": 1i64}));
    assert!(m(doc! {"a": {"$type": "array"}}, doc! {"a": []}));
    assert!(m(doc! {"a": {"$type": 2}}, doc! {"a": ["x"]}));
    assert!(m(
        doc! {"a": {"$type": ["bool", "null"]}},
        doc! {"a": Bson::Null}
    ));
    assert!(m(doc! {"a": {"$type": -1}}, doc! {"a": Bson::MinKey}));
    assert!(m(
        doc! {"a": {"$regex": "^ab", "$options": "i"}},
        doc! {"a": "ABc"}
    ));
    assert!(m(doc! {"a": {"$regex": "b"}}, doc! {"a": ["x", "abc"]}));
    assert!(!m(doc! {"a": {"$regex": "1"}}, doc! {"a": 1}));
    assert!(m(
        doc! {"a": {"$in": [bson::Regex { pattern: "^z".try_into().expect("cstr"), options: "".try_into().expect("cstr") }]}},
        doc! {"a": "zz"}
    ));
    assert!(m(doc! {"a": {"$mod": [4, 1]}}, doc! {"a": 5.9}));
    assert!(m(doc! {"a": {"$mod": [-4, -1]}}, doc! {"a": -5i64}));
    assert!(!m(doc! {"a": {"$mod": [4, 1]}}, doc! {"a": "5"}));
}

#[test]
fn array_operators() {
    assert!(m(doc! {"a": {"$all": [1, 2]}}, doc! {"a": [2, 3, 1]}));
    assert!(!m(doc! {"a": {"$all": [1, 4]}}, doc! {"a": [2, 3, 1]}));
    assert!(!m(doc! {"a": {"$all": []}}, doc! {"a": []}));
    assert!(m(doc! {"a": {"$all": [1]}}, doc! {"a": 1}));
    assert!(m(doc! {"a": {"$size": 2}}, doc! {"a": [1, [2, 3]]}));
    assert!(!m(doc! {"a": {"$size": 1}}, doc! {"a": 1}));
    assert!(m(
        doc! {"a": {"$elemMatch": {"b": 1, "c": {"$gt": 1}}}},
        doc! {"a": [{"b": 1, "c": 1}, {"b": 1, "c": 2}]}
    ));
    assert!(!m(
        doc! {"a": {"$elemMatch": {"b": 1, "c": {"$gt": 1}}}},
        doc! {"a": [{"b": 1, "c": 1}, {"b": 2, "c": 2}]}
    ));
    assert!(m(
        doc! {"a": {"$elemMatch": {"$in": [4, 5]}}},
        doc! {"a": [1, 5]}
    ));
    assert!(!m(doc! {"a": {"$elemMatch": {"$gte": 0}}}, doc! {"a": 5}));
    assert!(m(
        doc! {"a": {"$all": [{"$elemMatch": {"x": 1}}, {"$elemMatch": {"y": 1}}]}},
        doc! {"a": [{"x": 1}, {"y": 1}]}
    ));
}

#[test]
fn long_in_lists_are_searched_like_short_ones() {
    let list: Vec<Bson> = (0..40)
        .map(|i| {
            if i % 2 == 0 {
                Bson::Int32(i)
            } else {
                Bson::String(i.to_string())
            }
        })
        .collect();
    let f = Filter::parse(&doc! {"a": {"$in": list.clone()}}).expect("parses");
    for probe in [
        Bson::Int64(4),
        Bson::Double(6.0),
        Bson::String("7".into()),
        Bson::Int32(7),
        Bson::Null,
    ] {
        let expected = list
            .iter()
            .any(|x| storage::order::compare_bson(x, &probe) == std::cmp::Ordering::Equal);
        assert_eq!(
            f.matches(&raw(&doc! {"a": probe.clone()})),
            expected,
            "{probe:?}"
        );
    }
    let with_null = Filter::parse(
        &doc! {"a": {"$in": (0..20).map(Bson::Int32).chain([Bson::Null]).collect::<Vec<_>>()}},
    )
    .expect("parses");
    assert!(
        !with_null.matches(&raw(&doc! {"a": Bson::Undefined})),
        "8.0"
    );
    assert!(with_null.matches(&raw(&doc! {"b": 1})));
    assert!(with_null.matches(&raw(&doc! {"a": [100, 3]})));
}

#[test]
fn bitwise_operators() {
    assert!(m(doc! {"a": {"$bitsAllSet": [0, 2]}}, doc! {"a": 5}));
    assert!(m(doc! {"a": {"$bitsAllSet": 5}}, doc! {"a": 7i64}));
    assert!(!m(doc! {"a": {"$bitsAllClear": 1}}, doc! {"a": 5}));
    assert!(m(doc! {"a": {"$bitsAnySet": [1, 2]}}, doc! {"a": 4.0}));
    assert!(!m(doc! {"a": {"$bitsAnySet": [1]}}, doc! {"a": 4.5}));
    assert!(m(doc! {"a": {"$bitsAnyClear": [200]}}, doc! {"a": 4}));
    assert!(m(doc! {"a": {"$bitsAllSet": [200]}}, doc! {"a": -1}));
    let bin = Bson::Binary(bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes: vec![0b10, 0b1],
    });
    assert!(m(
        doc! {"a": {"$bitsAllSet": [1, 8]}},
        doc! {"a": bin.clone()}
    ));
    assert!(m(doc! {"a": {"$bitsAllSet": bin}}, doc! {"a": 0x102}));
}

#[test]
fn expr_and_schema() {
    assert!(m(
        doc! {"$expr": {"$gt": ["$a", "$b"]}},
        doc! {"a": 2, "b": 1}
    ));
    assert!(!m(
        doc! {"$expr": {"$eq": ["$missing", Bson::Null]}},
        doc! {}
    ));
    assert!(m(
        doc! {"$expr": {"$eq": [{"$add": ["$a", 1]}, 3]}},
        doc! {"a": 2}
    ));
    let f = Filter::parse(&doc! {"$expr": {"$divide": [1, "$z"]}}).expect("parses");
    assert_eq!(
        f.try_matches(&raw(&doc! {"z": 0}))
            .expect_err("divide by zero")
            .code
            .code(),
        16608
    );
    let schema = doc! {"$jsonSchema": {
        "bsonType": "object", "required": ["name"],
        "properties": {"name": {"bsonType": "string", "minLength": 2}, "age": {"bsonType": "int", "minimum": 0}},
    }};
    assert!(m(schema.clone(), doc! {"name": "ab", "age": 3}));
    assert!(!m(schema.clone(), doc! {"name": "a"}));
    assert!(!m(schema.clone(), doc! {"age": 3}));
    assert!(!m(schema, doc! {"name": "abc", "age": -1}));
    assert!(!m(
        doc! {"$jsonSchema": {"additionalProperties": false, "properties": {"_id": {}}}},
        doc! {"_id": 1, "x": 1}
    ));
    assert!(m(
        doc! {"$jsonSchema": {"properties": {"t": {"enum": [1, "a"]}}}},
        doc! {"t": "a"}
    ));
}

#[test]
fn positional_details() {
    let f = Filter::parse(&doc! {"a.b": 2}).expect("parses");
    let d = f
        .try_matches(&raw(&doc! {"a": [{"b": 1}, {"b": 2}]}))
        .expect("ok")
        .expect("matches");
    assert_eq!(d.array_pos, Some(1));
    let f = Filter::parse(&doc! {"a": {"$elemMatch": {"$gt": 4}}}).expect("parses");
    let d = f
        .try_matches(&raw(&doc! {"a": [1, 5, 9]}))
        .expect("ok")
        .expect("matches");
    assert_eq!(d.array_pos, Some(1));
    let f = Filter::parse(&doc! {"x": 1}).expect("parses");
    assert_eq!(
        f.try_matches(&raw(&doc! {"x": 1})).expect("ok"),
        Some(MatchDetails { array_pos: None })
    );
}

#[test]
fn parse_errors_like_mongod() {
    assert_eq!(
        parse_err(doc! {"a": {"$foo": 1}}),
        (2, "unknown operator: $foo".into())
    );
    assert_eq!(
        parse_err(doc! {"a": {"$gt": 1, "b": 1}}).1,
        "unknown operator: b"
    );
    assert!(
        parse_err(doc! {"$foo": 1})
            .1
            .starts_with("unknown top level operator: $foo")
    );
    assert_eq!(
        parse_err(doc! {"a": {"$in": 1}}),
        (2, "$in needs an array".into())
    );
    assert_eq!(
        parse_err(doc! {"a": {"$nin": 1}}),
        (2, "$nin needs an array".into())
    );
    assert_eq!(
        parse_err(doc! {"a": {"$size": "x"}}),
        (2, "$size needs a number".into())
    );
    assert_eq!(
        parse_err(doc! {"$and": []}),
        (2, "$and/$or/$nor must be a nonempty array".into())
    );
    assert_eq!(
        parse_err(doc! {"$or": [1]}).1,
        "$or/$and/$nor entries need to be full objects"
    );
    assert_eq!(
        parse_err(doc! {"a": {"$regex": "a", "$options": "q"}}).0,
        51108
    );
    assert_eq!(
        parse_err(doc! {"a": {"$options": "i"}}).1,
        "$options needs a $regex"
    );
    assert_eq!(
        parse_err(doc! {"a": {"$not": {}}}).1,
        "$not cannot be empty"
    );
    assert_eq!(
        parse_err(doc! {"a": {"$not": 1}}).1,
        "$not needs a regex or a document"
    );
    assert_eq!(
        parse_err(doc! {"a": {"$type": "foo"}}).1,
        "Unknown type name alias: foo"
    );
    assert_eq!(
        parse_err(doc! {"a": {"$mod": [0, 1]}}).1,
        "divisor cannot be 0"
    );
    assert_eq!(
        parse_err(doc! {"a": {"$mod": [1]}}).1,
        "malformed mod, not enough elements"
    );
    assert_eq!(
        parse_err(doc! {"a": {"$elemMatch": 1}}).1,
        "$elemMatch needs an Object"
    );
    assert_eq!(parse_err(doc! {"a": {"$all": 1}}).1, "$all needs an array");
    assert_eq!(
        parse_err(doc! {"a": Bson::Undefined}).1,
        "cannot compare to undefined"
    );
    assert!(m(doc! {"$where": "this.a > 1"}, doc! {"a": 2}));
    assert!(!m(
        doc! {"$where": "function() { return this.a > 1; }"},
        doc! {"a": 1}
    ));
    assert_eq!(parse_err(doc! {"$expr": {"$foo": 1}}).0, 168);
    assert_eq!(parse_err(doc! {"a": {"$bitsAllSet": -1}}).0, 2);
    assert_eq!(parse_err(doc! {"$jsonSchema": {"foo": 1}}).0, 9);
}

#[test]
fn equality_fields_for_upserts() {
    let f = Filter::parse(
        &doc! {"_id": 1, "a.b": {"$eq": 2}, "c": {"$gt": 1}, "$and": [{"d": 3}], "e": {"$in": [4]}},
    )
    .expect("parses");
    let fields = f.equality_fields();
    let names: Vec<&str> = fields.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(names, ["_id", "a.b", "d", "e"]);
}

#[test]
fn corpus_equality_is_reflexive_and_never_panics() {
    // Every corpus value matches itself by equality (except undefined, which cannot be a
    // filter operand), and every operator runs over every value without panicking.
    for v in storage::order::corpus() {
        if matches!(v, Bson::Undefined) {
            continue;
        }
        let d = doc! {"a": v.clone()};
        if matches!(v, Bson::RegularExpression(_)) {
            assert!(m(doc! {"a": {"$eq": v.clone()}}, d.clone()), "{v:?}");
        } else {
            assert!(m(doc! {"a": v.clone()}, d.clone()), "{v:?}");
            assert!(m(doc! {"a": {"$in": [v.clone()]}}, d.clone()), "{v:?}");
        }
        for op in ["$gt", "$gte", "$lt", "$lte", "$ne"] {
            for other in storage::order::corpus() {
                if matches!(other, Bson::Undefined | Bson::RegularExpression(_)) {
                    continue;
                }
                let _ = m(doc! {"a": {op: other}}, d.clone());
            }
        }
    }
}

#[test]
fn geo_within_without_an_index() {
    let poly = doc! {"$geometry": {"type": "Polygon", "coordinates": [[[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]], [[4, 4], [6, 4], [6, 6], [4, 6], [4, 4]]]}};
    assert!(m(
        doc! {"loc": {"$geoWithin": poly.clone()}},
        doc! {"loc": {"type": "Point", "coordinates": [1, 1]}}
    ));
    assert!(
        !m(
            doc! {"loc": {"$geoWithin": poly.clone()}},
            doc! {"loc": {"type": "Point", "coordinates": [5, 5]}}
        ),
        "inside the hole"
    );
    assert!(
        m(
            doc! {"loc": {"$geoWithin": poly.clone()}},
            doc! {"loc": [10, 5]}
        ),
        "on the boundary"
    );
    assert!(!m(
        doc! {"loc": {"$geoWithin": poly}},
        doc! {"loc": [11, 5]}
    ));
    assert!(m(
        doc! {"loc": {"$geoWithin": {"$box": [[0, 0], [2, 2]]}}},
        doc! {"loc": {"lng": 1, "lat": 2}}
    ));
    assert!(m(
        doc! {"loc": {"$geoWithin": {"$center": [[0, 0], 5]}}},
        doc! {"loc": [3, 4]}
    ));
    assert!(!m(
        doc! {"loc": {"$geoWithin": {"$center": [[0, 0], 4.9]}}},
        doc! {"loc": [3, 4]}
    ));
    // One degree of longitude on the equator is about 0.01745 radians.
    assert!(m(
        doc! {"loc": {"$geoWithin": {"$centerSphere": [[0, 0], 0.0175]}}},
        doc! {"loc": [1, 0]}
    ));
    assert!(!m(
        doc! {"loc": {"$geoWithin": {"$centerSphere": [[0, 0], 0.017]}}},
        doc! {"loc": [1, 0]}
    ));
    assert!(m(
        doc! {"locs": {"$geoWithin": {"$polygon": [[0, 0], [3, 0], [0, 3]]}}},
        doc! {"locs": [[9, 9], [1, 1]]}
    ));
    assert!(!m(
        doc! {"loc": {"$geoWithin": {"$box": [[0, 0], [2, 2]]}}},
        doc! {"loc": "here"}
    ));
    assert_eq!(parse_err(doc! {"loc": {"$geoWithin": {"$square": 1}}}).0, 2);
    assert!(m(
        doc! {"loc": {"$near": [0, 0], "$maxDistance": 2}},
        doc! {"loc": [1, 1]}
    ));
    assert_eq!(
        parse_err(doc! {"loc": {"$near": [0, 0], "$maxDistance": -1}}).0,
        2
    );
}
