//! Cases that shape answers: projections, sorts (with limit and skip), and aggregation pipelines.

use super::{COLL, Case, find_sorted};
use crate::compare::corpus;
use bson::{Document, doc};

/// Documents with nested fields and arrays of sub-documents, for projections and pipelines.
fn nested_docs() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "arr": [{"x": 1, "y": 2}, {"x": 3, "y": 4}], "s": "one", "k": "p"},
        doc! {"_id": 2, "a": 2.5, "b": {"c": null}, "arr": [1, 2, 3, 4, 5], "s": "two", "k": "q"},
        doc! {"_id": 3, "b": 7, "arr": [], "k": "p"},
        doc! {"_id": 4, "a": null, "b": {"d": [1, {"c": 9}]}, "arr": [[1, 2], {"x": 3}], "k": "q", "n": -0.0},
        doc! {"_id": 5, "a": "str", "arr": {"x": 5}, "k": "r", "n": 10_i64},
    ]
}

pub fn projections() -> Vec<Case> {
    let projections = [
        doc! {"a": 1},
        doc! {"a": 0},
        doc! {"_id": 0, "a": 1},
        doc! {"_id": 0},
        doc! {"b.c": 1},
        doc! {"b.c": 0},
        doc! {"arr.x": 1},
        doc! {"a": true, "s": true},
        doc! {"arr": {"$slice": 1}},
        doc! {"arr": {"$slice": -2}},
        doc! {"arr": {"$slice": [1, 2]}},
        doc! {"arr": {"$slice": [-1, 5]}},
        doc! {"arr": {"$elemMatch": {"x": 3}}},
        doc! {"a": 1, "b": 0},
        doc! {"c": "$b.c"},
        doc! {"lit": {"$literal": 5}},
        doc! {"a": 1, "a.b": 1},
        doc! {},
        doc! {"$nosuch": 1},
    ];
    let mut case = Case::new("projection", "projection/forms").insert(nested_docs());
    for p in projections {
        case = case.step(doc! {"find": COLL, "filter": {}, "sort": {"_id": 1}, "projection": p});
    }
    let positional = Case::new("projection", "projection/positional")
        .insert(nested_docs())
        .step(doc! {"find": COLL, "filter": {"arr.x": 3}, "sort": {"_id": 1}, "projection": {"arr.$": 1}})
        .step(doc! {"find": COLL, "filter": {"arr": {"$gte": 3}}, "sort": {"_id": 1}, "projection": {"arr.$": 1}})
        .step(doc! {"find": COLL, "filter": {}, "sort": {"_id": 1}, "projection": {"arr.$": 1}});
    vec![case, positional]
}

pub fn sorts() -> Vec<Case> {
    let specs = [
        doc! {"v": 1, "_id": 1},
        doc! {"v": -1, "_id": 1},
        doc! {"v": 1, "_id": -1},
        doc! {"missing": 1, "_id": 1},
        doc! {"v.a": 1, "_id": 1},
        doc! {"_id": -1},
    ];
    let mut by_type = Case::new("sort", "sort/corpus-type-order").insert(corpus::documents());
    for s in specs {
        by_type = by_type.step(
            doc! {"find": COLL, "filter": {}, "sort": s, "projection": {"_id": 1}, "batchSize": 1000},
        );
    }
    let windows = Case::new("sort", "sort/limit-skip-batch")
        .insert(corpus::documents())
        .step(doc! {"find": COLL, "sort": {"v": 1, "_id": 1}, "limit": 5, "projection": {"_id": 1}})
        .step(
            doc! {"find": COLL, "sort": {"v": -1, "_id": 1}, "skip": 60, "projection": {"_id": 1}},
        )
        .step(doc! {"find": COLL, "sort": {"_id": 1}, "skip": 3, "limit": 4})
        .step(doc! {"find": COLL, "sort": {"_id": 1}, "limit": -3})
        .step(doc! {"find": COLL, "sort": {"_id": 1}, "skip": -1})
        .step(doc! {"find": COLL, "sort": {"_id": 1}, "batchSize": -1})
        .step(doc! {"find": COLL, "sort": {"_id": 1}, "batchSize": 2, "projection": {"_id": 1}})
        .step(doc! {"find": COLL, "sort": {"v": 2}})
        .step(doc! {"find": COLL, "sort": {"v": "up"}})
        .step(doc! {"find": COLL, "sort": {"$natural": 1}, "limit": 3, "projection": {"_id": 1}})
        .step(doc! {"count": COLL, "query": {"v": {"$type": "number"}}})
        .step(doc! {"count": COLL, "query": {}, "skip": 10, "limit": 5})
        .step_unordered(doc! {"distinct": COLL, "key": "v", "query": {"v": {"$type": "string"}}});
    let nested = Case::new("sort", "sort/nested-and-arrays")
        .insert(nested_docs())
        .step(doc! {"find": COLL, "sort": {"arr": 1, "_id": 1}, "projection": {"_id": 1}})
        .step(doc! {"find": COLL, "sort": {"arr": -1, "_id": 1}, "projection": {"_id": 1}})
        .step(doc! {"find": COLL, "sort": {"arr.x": 1, "_id": 1}, "projection": {"_id": 1}})
        .step(doc! {"find": COLL, "sort": {"b.c": -1, "_id": 1}, "projection": {"_id": 1}})
        .step(doc! {"find": COLL, "sort": {"k": 1, "a": -1}, "projection": {"_id": 1}});
    vec![by_type, windows, nested]
}

pub fn aggregations() -> Vec<Case> {
    let pipelines = [
        vec![doc! {"$match": {"k": "p"}}, doc! {"$sort": {"_id": 1}}],
        vec![
            doc! {"$project": {"a": 1, "k": 1}},
            doc! {"$sort": {"_id": -1}},
        ],
        vec![
            doc! {"$addFields": {"two": {"$add": [1, 1]}}},
            doc! {"$sort": {"_id": 1}},
            doc! {"$limit": 2},
        ],
        vec![
            doc! {"$sort": {"_id": 1}},
            doc! {"$skip": 2},
            doc! {"$limit": 2},
        ],
        vec![
            doc! {"$unwind": "$arr"},
            doc! {"$sort": {"_id": 1, "arr": 1}},
        ],
        vec![doc! {"$count": "n"}],
        vec![doc! {"$nosuchstage": {}}],
    ];
    let mut case = Case::new("aggregate", "aggregate/stages").insert(nested_docs());
    for p in pipelines {
        case = case.step(doc! {"aggregate": COLL, "pipeline": p, "cursor": {}});
    }
    let group = Case::new("aggregate", "aggregate/group")
        .insert(nested_docs())
        .step_unordered(doc! {"aggregate": COLL, "pipeline": [
        {"$group": {"_id": "$k", "n": {"$sum": 1}, "first": {"$min": "$_id"}}}], "cursor": {}})
        .step_unordered(doc! {"aggregate": COLL, "pipeline": [
        {"$group": {"_id": null, "total": {"$sum": "$a"}, "avg": {"$avg": "$a"}}}], "cursor": {}})
        .step(doc! {"aggregate": COLL, "pipeline": [{"$match": {}}]});
    let numeric = Case::new("aggregate", "aggregate/corpus-sort-group")
        .insert(corpus::documents())
        .step(doc! {"aggregate": COLL, "pipeline": [
        {"$sort": {"v": 1, "_id": 1}}, {"$project": {"_id": 1}}], "cursor": {"batchSize": 1000}})
        .step_unordered(doc! {"aggregate": COLL, "pipeline": [
        {"$group": {"_id": {"$type": "$v"}, "n": {"$sum": 1}}}], "cursor": {}})
        .step(find_sorted(doc! {"_id": 0}));
    vec![case, group, numeric]
}
