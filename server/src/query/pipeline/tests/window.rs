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

#[test]
fn densify_fills_numeric_gaps_per_partition() {
    let input =
        stages_of(bson!([{"p": "a", "x": 1}, {"p": "a", "x": 4}, {"p": "b", "x": 2}, {"p": "b"}]));
    let out = run(
        bson!([{"$densify": {"field": "x", "partitionByFields": ["p"], "range": {"step": 1, "bounds": "full"}}}]),
        input.clone(),
    );
    let pairs: Vec<(Bson, Bson)> = out
        .iter()
        .map(|d| {
            (
                d.get("p").cloned().unwrap_or(Bson::Null),
                d.get("x").cloned().unwrap_or(Bson::Null),
            )
        })
        .collect();
    let expect: Vec<(Bson, Bson)> = [
        ("b", None),
        ("a", Some(1)),
        ("a", Some(2)),
        ("a", Some(3)),
        ("a", Some(4)),
        ("b", Some(1)),
        ("b", Some(2)),
        ("b", Some(3)),
    ]
    .iter()
    .map(|(p, x)| (bson!(*p), x.map_or(Bson::Null, Bson::Int32)))
    .collect();
    assert_eq!(pairs, expect);
    let out = run(
        bson!([{"$densify": {"field": "x", "range": {"step": 2, "bounds": [0, 5]}}}]),
        stages_of(bson!([{"x": 1}])),
    );
    assert_eq!(
        field(&out, "x"),
        vec![
            Bson::Int32(0),
            Bson::Int32(1),
            Bson::Int32(2),
            Bson::Int32(4)
        ]
    );
}

#[test]
fn fill_value_locf_and_linear() {
    let input = stages_of(
        bson!([{"t": 1, "v": 10, "s": "x"}, {"t": 2, "v": null}, {"t": 3}, {"t": 4, "v": 40, "s": null}]),
    );
    let out = run(
        bson!([{"$fill": {"sortBy": {"t": 1}, "output": {"v": {"method": "linear"}, "s": {"method": "locf"}, "z": {"value": 0}}}}]),
        input,
    );
    assert_eq!(
        field(&out, "v"),
        vec![bson!(10), Bson::Double(20.0), Bson::Double(30.0), bson!(40)]
    );
    assert_eq!(
        field(&out, "s"),
        vec![bson!("x"), bson!("x"), bson!("x"), bson!("x")]
    );
    assert_eq!(field(&out, "z"), vec![bson!(0); 4]);
}

#[test]
fn derivative_and_integral() {
    let input = stages_of(bson!([{"t": 0, "v": 0}, {"t": 1, "v": 2}, {"t": 3, "v": 6}]));
    let out = run(
        bson!([{"$setWindowFields": {"sortBy": {"t": 1}, "output": {
            "d": {"$derivative": {"input": "$v"}, "window": {"documents": [-1, 0]}},
            "area": {"$integral": {"input": "$v"}, "window": {"documents": ["unbounded", "current"]}},
        }}}]),
        input,
    );
    assert_eq!(
        field(&out, "d"),
        vec![Bson::Null, Bson::Double(2.0), Bson::Double(2.0)]
    );
    assert_eq!(
        field(&out, "area"),
        vec![Bson::Double(0.0), Bson::Double(1.0), Bson::Double(9.0)]
    );
    assert_eq!(
        fails(
            bson!([{"$setWindowFields": {"sortBy": {"t": 1}, "output": {"d": {"$derivative": {"input": "$v"}}}}}]),
            vec![]
        ),
        5371602
    );
}
