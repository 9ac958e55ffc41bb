//! Filter cases: every query operator family run over the whole edge-value corpus, so type
//! bracketing, numeric equivalence across types, NaN, ±0, null-versus-missing and array traversal
//! are all exercised by each operator.

use super::{Case, cond, find_ids};
use crate::compare::corpus;
use bson::{Bson, Document, bson, doc};

pub fn all() -> Vec<Case> {
    let mut cases = comparisons();
    cases.extend(sets());
    cases.push(element());
    cases.push(types());
    cases.push(logical());
    cases.push(evaluation());
    cases.push(arrays());
    cases.push(bitwise());
    cases.push(paths());
    cases
}

/// A case over the corpus with one `find` per filter.
fn over_corpus(name: &str, filters: impl IntoIterator<Item = Document>) -> Case {
    let mut case = Case::new("filter", name).insert(corpus::documents());
    for f in filters {
        case = case.step(find_ids(f));
    }
    case
}

/// `$eq $ne $gt $gte $lt $lte`, each against every corpus value.
fn comparisons() -> Vec<Case> {
    ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]
        .into_iter()
        .map(|op| {
            let filters = corpus::operands()
                .into_iter()
                .map(move |(_, v)| cond("v", op, v));
            over_corpus(&format!("filter/{op}"), filters)
        })
        .collect()
}

fn sets() -> Vec<Case> {
    let lists: Vec<Bson> = vec![
        bson!([]),
        bson!([null]),
        bson!([1, "a"]),
        bson!([[]]),
        bson!([0.0, -0.0]),
        bson!([f64::NAN]),
        bson!([{"a": 1}]),
        bson!([[1, [2, [3]]]]),
        Bson::Array(vec![corpus_value("regex"), Bson::Int32(2)]),
        Bson::Array(vec![
            corpus_value("decimal_nan"),
            corpus_value("date_epoch"),
        ]),
    ];
    let mut cases = Vec::new();
    for op in ["$in", "$nin"] {
        let mut filters: Vec<Document> = lists.iter().map(|l| cond("v", op, l.clone())).collect();
        // Not an array: mongod rejects it with BadValue.
        filters.push(cond("v", op, Bson::Int32(1)));
        cases.push(over_corpus(&format!("filter/{op}"), filters));
    }
    cases
}

fn corpus_value(name: &str) -> Bson {
    corpus::operands()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map_or(Bson::Null, |(_, v)| v)
}

fn element() -> Case {
    over_corpus(
        "filter/$exists",
        [
            doc! {"v": {"$exists": true}},
            doc! {"v": {"$exists": false}},
            doc! {"v": {"$exists": 0}},
            doc! {"v.a": {"$exists": true}},
            doc! {"v.0": {"$exists": true}},
            doc! {"v": null},
            doc! {"v": {"$ne": null}},
            doc! {"v.a": null},
        ],
    )
}

fn types() -> Case {
    let aliases = [
        "double",
        "string",
        "object",
        "array",
        "binData",
        "undefined",
        "objectId",
        "bool",
        "date",
        "null",
        "regex",
        "javascript",
        "symbol",
        "javascriptWithScope",
        "int",
        "timestamp",
        "long",
        "decimal",
        "minKey",
        "maxKey",
        "number",
    ];
    let mut filters: Vec<Document> = aliases.iter().map(|a| doc! {"v": {"$type": *a}}).collect();
    filters.extend([1, 2, 4, 16, 18, 19, -1, 127].map(|n| doc! {"v": {"$type": n}}));
    filters.push(doc! {"v": {"$type": ["int", "long"]}});
    filters.push(doc! {"v": {"$type": "nosuchtype"}});
    filters.push(doc! {"v": {"$type": 1000}});
    over_corpus("filter/$type", filters)
}

fn logical() -> Case {
    over_corpus(
        "filter/logical",
        [
            doc! {"$and": [{"v": {"$gte": 0}}, {"v": {"$lt": 2}}]},
            doc! {"$or": [{"v": null}, {"v": "a"}]},
            doc! {"$nor": [{"v": {"$type": "number"}}, {"v": {"$type": "string"}}]},
            doc! {"v": {"$not": {"$gt": 1}}},
            doc! {"v": {"$not": {"$regex": "^a"}}},
            doc! {"$and": []},
            doc! {"$or": [{}]},
            doc! {"v": {"$not": 1}},
            doc! {"$and": {"v": 1}},
            doc! {"$nosuchop": 1},
            doc! {"v": {"$nosuchop": 1}},
        ],
    )
}

fn evaluation() -> Case {
    over_corpus(
        "filter/evaluation",
        [
            doc! {"v": {"$regex": "^a"}},
            doc! {"v": {"$regex": "^a", "$options": "i"}},
            doc! {"v": {"$regex": "("}},
            doc! {"v": {"$mod": [2, 0]}},
            doc! {"v": {"$mod": [2, 1]}},
            doc! {"v": {"$mod": [-2, 0]}},
            doc! {"v": {"$mod": [0, 0]}},
            doc! {"v": {"$mod": [2]}},
            doc! {"v": {"$mod": [1.5, 0.5]}},
            doc! {"$expr": {"$eq": ["$v", 1]}},
            doc! {"$expr": {"$gt": ["$v", 1]}},
            doc! {"$jsonSchema": {"required": ["v"]}},
            doc! {"$comment": "hello", "v": 1},
        ],
    )
}

fn arrays() -> Case {
    over_corpus(
        "filter/arrays",
        [
            doc! {"v": {"$size": 0}},
            doc! {"v": {"$size": 1}},
            doc! {"v": {"$size": 3}},
            doc! {"v": {"$size": -1}},
            doc! {"v": {"$size": 1.5}},
            doc! {"v": {"$all": [1]}},
            doc! {"v": {"$all": []}},
            doc! {"v": {"$all": [[]]}},
            doc! {"v": {"$all": [2, "a"]}},
            doc! {"v": {"$elemMatch": {"$gte": 1}}},
            doc! {"v": {"$elemMatch": {"a": 1}}},
            doc! {"v": {"$elemMatch": {"a": {"$gte": 1}, "b": "x"}}},
            doc! {"v": [1]},
            doc! {"v": 3},
            doc! {"v": [2]},
            doc! {"v": []},
        ],
    )
}

fn bitwise() -> Case {
    let mut filters = Vec::new();
    for op in [
        "$bitsAllSet",
        "$bitsAnySet",
        "$bitsAllClear",
        "$bitsAnyClear",
    ] {
        filters.push(cond("v", op, Bson::Int32(1)));
        filters.push(cond("v", op, bson!([0, 1])));
        filters.push(cond("v", op, bson!([63])));
        filters.push(cond("v", op, Bson::Int32(-1)));
    }
    filters.push(cond("v", "$bitsAllSet", Bson::String("x".into())));
    over_corpus("filter/bitwise", filters)
}

fn paths() -> Case {
    over_corpus(
        "filter/paths",
        [
            doc! {"v.a": 1},
            doc! {"v.a": 2},
            doc! {"v.a.b": null},
            doc! {"v.0": 1},
            doc! {"v.1.0": 2},
            doc! {"v.1": [2, [3]]},
            doc! {"v.b": "x"},
            doc! {"v.a": {"$gt": 1}},
            doc! {"v": {"a": 1}},
            doc! {"v": {"a": {"b": null}}},
            doc! {"v": {}},
            doc! {"_id": {"$in": [1, 3, 5]}},
            doc! {"_id": {"$gte": 10, "$lt": 14}},
        ],
    )
}
