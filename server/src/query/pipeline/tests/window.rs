//! Proves `$setWindowFields` partitions, orders and computes windowed values like mongod.
//! How: small partitions with hand-computed running sums, ranks, shifts and range windows.

use super::{fails, run, stages_of};
use bson::{Bson, Document, bson};

fn field(out: &[Document], name: &str) -> Vec<Bson> {
    out.iter()
        .map(|d| d.get(name).cloned().unwrap_or(Bson::Undefined))
        .collect()
}

#[test]
fn running_sums_ranks_and_shift() {
    let input = stages_of(bson!([
        {"p": "a", "t": 3, "v": 30}, {"p": "b", "t": 1, "v": 5}, {"p": "a", "t": 1, "v": 10},
        {"p": "a", "t": 2, "v": 20}, {"p": "a", "t": 2, "v": 25},
    ]));
    let out = run(
        bson!([{"$setWindowFields": {"partitionBy": "$p", "sortBy": {"t": 1}, "output": {
            "run": {"$sum": "$v", "window": {"documents": ["unbounded", "current"]}},
            "total": {"$sum": "$v"},
            "mov": {"$avg": "$v", "window": {"documents": [-1, 1]}},
            "rank": {"$rank": {}}, "dense": {"$denseRank": {}}, "num": {"$documentNumber": {}},
            "prev": {"$shift": {"output": "$v", "by": -1, "default": "none"}},
            "all": {"$push": "$v", "window": {"range": [-1, 0]}},
        }}}]),
        input,
    );
    assert_eq!(
        field(&out, "p"),
        bson!(["a", "a", "a", "a", "b"])
            .as_array()
            .cloned()
            .unwrap_or_default()
    );
    assert_eq!(
        field(&out, "run"),
        vec![
            Bson::Int32(10),
            Bson::Int32(30),
            Bson::Int32(55),
            Bson::Int32(85),
            Bson::Int32(5)
        ]
    );
    assert_eq!(
        field(&out, "total"),
        vec![Bson::Int32(85); 4]
            .into_iter()
            .chain([Bson::Int32(5)])
            .collect::<Vec<_>>()
    );
    assert_eq!(field(&out, "mov")[0], Bson::Double(15.0));
    assert_eq!(
        field(&out, "rank"),
        vec![
            Bson::Int32(1),
            Bson::Int32(2),
            Bson::Int32(2),
            Bson::Int32(4),
            Bson::Int32(1)
        ]
    );
    assert_eq!(
        field(&out, "dense"),
        vec![
            Bson::Int32(1),
            Bson::Int32(2),
            Bson::Int32(2),
            Bson::Int32(3),
            Bson::Int32(1)
        ]
    );
    assert_eq!(
        field(&out, "num"),
        vec![
            Bson::Int32(1),
            Bson::Int32(2),
            Bson::Int32(3),
            Bson::Int32(4),
            Bson::Int32(1)
        ]
    );
    assert_eq!(
        field(&out, "prev"),
        vec![
            bson!("none"),
            bson!(10),
            bson!(20),
            bson!(25),
            bson!("none")
        ]
    );
    assert_eq!(field(&out, "all")[3], bson!([20, 25, 30]));
}

#[test]
fn window_errors() {
    assert_eq!(
        fails(
            bson!([{"$setWindowFields": {"output": {"r": {"$rank": {}}}}}]),
            vec![]
        ),
        5371602
    );
    assert_eq!(
        fails(
            bson!([{"$setWindowFields": {"sortBy": {"a": 1}, "output": {"r": {"$bogus": 1}}}}]),
            vec![]
        ),
        5371602
    );
    assert_eq!(
        fails(
            bson!([{"$setWindowFields": {"sortBy": {"a": 1}, "output": {"r": {"$sum": 1, "window": {"documents": [1, -1]}}}}}]),
            vec![]
        ),
        5371602
    );
}
