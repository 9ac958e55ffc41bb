//! Write cases: inserts (every corpus value as a field and as an `_id`), updates with every
//! operator (and the errors each one raises), deletes and findAndModify. Each case reads the
//! collection back afterwards so that what was stored is compared, not just the counts.

use super::{COLL, Case};
use crate::compare::corpus;
use bson::{Bson, Document, doc};

pub fn inserts() -> Vec<Case> {
    let round_trip = Case::new("insert", "insert/corpus-round-trip")
        .insert(corpus::documents())
        .read_all();
    let mut as_ids = Vec::new();
    for (i, (_, v)) in corpus::operands().into_iter().enumerate() {
        as_ids.push(doc! {"_id": v, "i": i as i32});
    }
    let ids = Case::new("insert", "insert/corpus-values-as-id")
        .step(doc! {"insert": COLL, "documents": as_ids, "ordered": false})
        .step(doc! {"find": COLL, "sort": {"i": 1}, "batchSize": 1000});
    let batches = Case::new("insert", "insert/ordered-unordered-duplicates")
        .step(doc! {"insert": COLL, "documents": [{"_id": 1}, {"_id": 1}, {"_id": 2}]})
        .step(doc! {"insert": COLL, "documents": [{"_id": 3}, {"_id": 3}, {"_id": 4}], "ordered": false})
        .step(doc! {"insert": COLL, "documents": [{"_id": 1.0}]})
        .step(doc! {"insert": COLL, "documents": [{"_id": Bson::Int64(2)}]})
        .read_all();
    let generated = Case::new("insert", "insert/generated-ids-and-odd-names")
        .step(doc! {"insert": COLL, "documents": [{"a": 1}, {"a": 2}]})
        .step(doc! {"find": COLL, "sort": {"a": 1}})
        .step(doc! {"insert": COLL, "documents": [{"_id": 10, "a.b": 1}]})
        .step(doc! {"insert": COLL, "documents": [{"_id": 11, "x": {"$y": 1}}]})
        .step(doc! {"insert": COLL, "documents": [{"_id": 12, "$top": 1}]})
        .step(doc! {"insert": COLL, "documents": []})
        .step(doc! {"insert": COLL, "documents": [1]})
        .step(doc! {"find": COLL, "filter": {"_id": {"$gte": 10}}, "sort": {"_id": 1}});
    vec![round_trip, ids, batches, generated]
}

fn base_docs() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "a": 1, "s": "x", "arr": [1, 2, 3], "o": {"p": 1}},
        doc! {"_id": 2, "a": 2.5, "arr": [{"x": 1}, {"x": 2}], "big": i64::MAX},
        doc! {"_id": 3, "a": Bson::Int32(i32::MAX), "d": "1.5".parse::<bson::Decimal128>().map_or(Bson::Null, Bson::Decimal128)},
        doc! {"_id": 4, "n": null, "arr": [3, 1, 2, 1]},
    ]
}

/// One case per operator: each update runs on a fresh copy of `base_docs`, then all is read back.
fn update_case(name: &str, updates: Vec<Document>) -> Case {
    let mut case = Case::new("update", format!("update/{name}"));
    for u in updates {
        case = case
            .step(doc! {"delete": COLL, "deletes": [{"q": {}, "limit": 0}]})
            .insert(base_docs())
            .step(doc! {"update": COLL, "updates": [u]})
            .read_all();
    }
    case
}

fn all_docs(u: Document) -> Document {
    doc! {"q": {}, "u": u, "multi": true}
}

pub fn updates() -> Vec<Case> {
    vec![
        update_case(
            "$set",
            vec![
                all_docs(doc! {"$set": {"a": 5}}),
                all_docs(doc! {"$set": {"o.p.q": 1}}),
                all_docs(doc! {"$set": {"arr.1": "two"}}),
                all_docs(doc! {"$set": {"arr.6": 7}}),
                all_docs(doc! {"$set": {"_id": 9}}),
                all_docs(doc! {"$set": {"s.t": 1}}),
                all_docs(doc! {"$set": {}}),
                all_docs(doc! {"$set": {"a": 1, "a.b": 2}}),
            ],
        ),
        update_case(
            "$unset",
            vec![
                all_docs(doc! {"$unset": {"a": ""}}),
                all_docs(doc! {"$unset": {"arr.0": 1, "missing": 1}}),
            ],
        ),
        update_case(
            "$inc-$mul",
            vec![
                all_docs(doc! {"$inc": {"a": 1}}),
                all_docs(doc! {"$inc": {"a": Bson::Int64(1), "new": 2.5}}),
                all_docs(doc! {"$inc": {"big": 1}}),
                all_docs(doc! {"$inc": {"s": 1}}),
                all_docs(doc! {"$inc": {"a": "one"}}),
                all_docs(doc! {"$mul": {"a": 2, "m": 3}}),
                all_docs(doc! {"$mul": {"a": -0.0}}),
                all_docs(doc! {"$inc": {"d": 1}}),
            ],
        ),
        update_case(
            "$min-$max",
            vec![
                all_docs(doc! {"$min": {"a": 2}}),
                all_docs(doc! {"$max": {"a": 2, "s": 1}}),
                all_docs(doc! {"$min": {"n": 0, "z": "new"}}),
            ],
        ),
        update_case(
            "$rename",
            vec![
                all_docs(doc! {"$rename": {"a": "b"}}),
                all_docs(doc! {"$rename": {"o.p": "q"}}),
                all_docs(doc! {"$rename": {"a": "s"}}),
                all_docs(doc! {"$rename": {"_id": "x"}}),
                all_docs(doc! {"$rename": {"a": "a"}}),
            ],
        ),
        update_case(
            "array-operators",
            vec![
                all_docs(doc! {"$push": {"arr": 9}}),
                all_docs(doc! {"$push": {"arr": {"$each": [5, 4], "$slice": 3}}}),
                all_docs(doc! {"$push": {"arr": {"$each": [0], "$position": 0}}}),
                all_docs(doc! {"$push": {"arr": {"$each": [7], "$sort": -1}}}),
                all_docs(doc! {"$push": {"s": 1}}),
                all_docs(doc! {"$addToSet": {"arr": 1}}),
                all_docs(doc! {"$addToSet": {"arr": {"$each": [1, 8, 8]}}}),
                all_docs(doc! {"$pop": {"arr": 1}}),
                all_docs(doc! {"$pop": {"arr": -1}}),
                all_docs(doc! {"$pull": {"arr": 1}}),
                all_docs(doc! {"$pull": {"arr": {"$gte": 2}}}),
                all_docs(doc! {"$pull": {"arr": {"x": 1}}}),
                all_docs(doc! {"$pullAll": {"arr": [1, 3]}}),
            ],
        ),
        update_case(
            "positional",
            vec![
                doc! {"q": {"arr": 2}, "u": {"$set": {"arr.$": 20}}, "multi": true},
                all_docs(doc! {"$inc": {"arr.$[]": 10}}),
                doc! {"q": {}, "u": {"$set": {"arr.$[e]": 0}}, "multi": true, "arrayFilters": [{"e": {"$gte": 2}}]},
                doc! {"q": {}, "u": {"$set": {"arr.$": 1}}, "multi": true},
            ],
        ),
        update_case(
            "$bit-$currentDate",
            vec![
                doc! {"q": {"_id": 1}, "u": {"$bit": {"a": {"and": 0}}}},
                doc! {"q": {"_id": 1}, "u": {"$bit": {"a": {"or": 6, "xor": 1}}}},
                doc! {"q": {"_id": 1}, "u": {"$bit": {"s": {"or": 1}}}},
                doc! {"q": {"_id": 1}, "u": {"$currentDate": {"t": {"$type": "nosuch"}}}},
            ],
        ),
        update_case(
            "replacement-upsert-errors",
            vec![
                doc! {"q": {"_id": 1}, "u": {"z": 1}},
                doc! {"q": {"_id": 1}, "u": {"_id": 2, "z": 1}},
                doc! {"q": {"_id": 9, "k": "v"}, "u": {"$set": {"w": 1}, "$setOnInsert": {"ins": true}}, "upsert": true},
                doc! {"q": {"_id": 1}, "u": {"$set": {"w": 1}, "$setOnInsert": {"ins": true}}, "upsert": true},
                doc! {"q": {"a": {"$gt": 100}}, "u": {"z": 1}, "upsert": true},
                doc! {"q": {"_id": 1}, "u": {"$nosuch": {"a": 1}}},
                doc! {"q": {"_id": 1}, "u": {"$set": {"a": 1}, "$inc": {"a": 1}}},
                doc! {"q": {}, "u": {"z": 1}, "multi": true},
                doc! {"q": {"_id": 1}, "u": [{"$set": {"p": "$a"}}]},
            ],
        ),
    ]
}

pub fn deletes() -> Vec<Case> {
    vec![
        Case::new("delete", "delete/limits-and-filters")
            .insert(corpus::documents())
            .step(doc! {"delete": COLL, "deletes": [{"q": {"v": {"$type": "number"}}, "limit": 1}]})
            .step(doc! {"delete": COLL, "deletes": [{"q": {"v": {"$type": "string"}}, "limit": 0}]})
            .step(doc! {"delete": COLL, "deletes": [{"q": {"v": null}, "limit": 0}, {"q": {"_id": 60}, "limit": 1}]})
            .step(doc! {"delete": COLL, "deletes": [{"q": {}, "limit": 2}]})
            .step(doc! {"delete": COLL, "deletes": [{"q": {"$bad": 1}, "limit": 0}]})
            .step(doc! {"delete": "nosuchcoll", "deletes": [{"q": {}, "limit": 0}]})
            .step(doc! {"find": COLL, "sort": {"_id": 1}, "projection": {"_id": 1}, "batchSize": 1000}),
    ]
}

pub fn find_and_modify() -> Vec<Case> {
    vec![
        Case::new("findAndModify", "findAndModify/forms")
            .insert(base_docs())
            .step(doc! {"findAndModify": COLL, "query": {"_id": 1}, "update": {"$inc": {"a": 1}}})
            .step(doc! {"findAndModify": COLL, "query": {"_id": 1}, "update": {"$inc": {"a": 1}}, "new": true})
            .step(doc! {"findAndModify": COLL, "query": {}, "sort": {"_id": -1}, "update": {"$set": {"top": 1}}, "new": true, "fields": {"top": 1}})
            .step(doc! {"findAndModify": COLL, "query": {"_id": 7}, "update": {"$set": {"u": 1}}, "upsert": true, "new": true})
            .step(doc! {"findAndModify": COLL, "query": {"_id": 8}, "update": {"$set": {"u": 1}}, "upsert": true})
            .step(doc! {"findAndModify": COLL, "query": {"_id": 2}, "remove": true})
            .step(doc! {"findAndModify": COLL, "query": {"_id": 99}, "remove": true})
            .step(doc! {"findAndModify": COLL, "query": {"_id": 99}, "update": {"$set": {"a": 1}}})
            .step(doc! {"findAndModify": COLL, "query": {"_id": 3}, "update": {"z": 1}, "new": true})
            .step(doc! {"findAndModify": COLL, "query": {}, "remove": true, "update": {"$set": {"a": 1}}})
            .step(doc! {"findAndModify": COLL, "query": {}})
            .step(doc! {"findAndModify": COLL, "query": {"_id": 1}, "update": {"$set": {"_id": 5}}})
            .read_all(),
    ]
}
