//! Proves every `$group` accumulator's result and result type on edge values.
//! How: groups a small input under `_id: null` and compares the accumulated field.

use super::{fails, run};
use bson::{Bson, Decimal128, Document, bson, doc};

/// The value of `{$group: {_id: null, r: acc}}` over documents `{v: value}`.
fn acc(spec: Bson, values: Vec<Option<Bson>>) -> Bson {
    let input: Vec<Document> = values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let mut d = doc! {"i": i32::try_from(i).unwrap_or(0)};
            if let Some(v) = v {
                d.insert("v", v);
            }
            d
        })
        .collect();
    let out = run(bson!([{"$group": {"_id": null, "r": spec}}]), input);
    out.first()
        .and_then(|d| d.get("r"))
        .cloned()
        .unwrap_or(Bson::Undefined)
}

fn some(values: Vec<Bson>) -> Vec<Option<Bson>> {
    values.into_iter().map(Some).collect()
}

fn dec(s: &str) -> Bson {
    Bson::Decimal128(
        s.parse::<Decimal128>()
            .unwrap_or(Decimal128::from_bytes([0; 16])),
    )
}

#[test]
fn sum_widens_like_mongod() {
    let sum = bson!({"$sum": "$v"});
    assert_eq!(
        acc(sum.clone(), some(vec![Bson::Int32(1), Bson::Int32(2)])),
        Bson::Int32(3)
    );
    assert_eq!(
        acc(
            sum.clone(),
            some(vec![Bson::Int32(i32::MAX), Bson::Int32(1)])
        ),
        Bson::Int64(1 << 31)
    );
    assert_eq!(
        acc(sum.clone(), some(vec![Bson::Int32(1), Bson::Int64(2)])),
        Bson::Int64(3)
    );
    assert_eq!(
        acc(
            sum.clone(),
            some(vec![Bson::Int64(i64::MAX), Bson::Int64(1)])
        ),
        Bson::Double(i64::MAX as f64 + 1.0)
    );
    assert_eq!(
        acc(sum.clone(), some(vec![Bson::Int32(1), Bson::Double(0.5)])),
        Bson::Double(1.5)
    );
    assert_eq!(
        acc(sum.clone(), some(vec![Bson::Int32(1), dec("2.5")])),
        dec("3.5")
    );
    assert_eq!(
        acc(sum.clone(), some(vec![dec("0.1"), dec("0.2")])),
        dec("0.3")
    );
    // `$sum` and `$add` share one decimal adder: past 34 digits both round half to even.
    let wide = vec![dec("9999999999999999999999999999999999"), dec("0.5")];
    let expected = dec("1.000000000000000000000000000000000E+34");
    assert_eq!(acc(sum.clone(), some(wide.clone())), expected);
    assert_eq!(
        crate::query::decimal::add(&wide[0], &wide[1]),
        Some(expected)
    );
    assert_eq!(
        acc(sum.clone(), some(vec![dec("1.10"), Bson::Double(0.25)])),
        dec("1.35")
    );
    let nan = acc(
        sum.clone(),
        some(vec![Bson::Int32(1), Bson::Double(f64::NAN)]),
    );
    assert!(matches!(nan, Bson::Double(d) if d.is_nan()));
    // Non-numbers, nulls, arrays and missing values are ignored; no numbers sums to int 0.
    assert_eq!(
        acc(
            sum.clone(),
            vec![
                Some(bson!("x")),
                Some(Bson::Null),
                Some(bson!([1, 2])),
                None
            ]
        ),
        Bson::Int32(0)
    );
    assert_eq!(acc(bson!({"$sum": 1}), vec![None, None]), Bson::Int32(2));
    assert_eq!(
        fails(
            bson!([{"$group": {"_id": null, "r": {"$sum": [1, 2]}}}]),
            vec![]
        ),
        40237
    );
}

#[test]
fn avg_and_std_dev() {
    let avg = bson!({"$avg": "$v"});
    assert_eq!(
        acc(avg.clone(), some(vec![Bson::Int32(1), Bson::Int64(2)])),
        Bson::Double(1.5)
    );
    assert_eq!(acc(avg.clone(), vec![Some(bson!("x")), None]), Bson::Null);
    assert_eq!(acc(avg.clone(), some(vec![dec("1"), dec("2")])), dec("1.5"));
    let pop = acc(
        bson!({"$stdDevPop": "$v"}),
        some(vec![
            bson!(2),
            bson!(4),
            bson!(4),
            bson!(4),
            bson!(5),
            bson!(5),
            bson!(7),
            bson!(9),
        ]),
    );
    assert_eq!(pop, Bson::Double(2.0));
    assert_eq!(
        acc(bson!({"$stdDevSamp": "$v"}), some(vec![bson!(1)])),
        Bson::Null
    );
    assert_eq!(
        acc(bson!({"$stdDevSamp": "$v"}), some(vec![bson!(1), bson!(3)])),
        Bson::Double(2f64.sqrt())
    );
}

#[test]
fn min_max_skip_nulls_and_cross_types() {
    let values = vec![
        Some(Bson::Null),
        Some(bson!(5)),
        None,
        Some(bson!("a")),
        Some(bson!(2.5)),
    ];
    assert_eq!(acc(bson!({"$min": "$v"}), values.clone()), bson!(2.5));
    assert_eq!(acc(bson!({"$max": "$v"}), values.clone()), bson!("a"));
    assert_eq!(
        acc(bson!({"$max": "$v"}), vec![Some(Bson::Null), None]),
        Bson::Null
    );
    let date = Bson::DateTime(bson::DateTime::from_millis(5));
    assert_eq!(
        acc(bson!({"$max": "$v"}), some(vec![bson!(true), date.clone()])),
        date
    );
    assert_eq!(
        acc(bson!({"$maxN": {"input": "$v", "n": 2}}), values.clone()),
        bson!(["a", 5])
    );
    assert_eq!(
        acc(bson!({"$minN": {"input": "$v", "n": 5}}), values),
        bson!([2.5, 5, "a"])
    );
}

#[test]
fn first_last_push_add_to_set() {
    let values = vec![
        None,
        Some(bson!(1)),
        Some(Bson::Null),
        Some(bson!(1.0)),
        Some(bson!([1])),
    ];
    assert_eq!(acc(bson!({"$first": "$v"}), values.clone()), Bson::Null);
    assert_eq!(acc(bson!({"$last": "$v"}), values.clone()), bson!([1]));
    assert_eq!(
        acc(bson!({"$push": "$v"}), values.clone()),
        bson!([1, null, 1.0, [1]])
    );
    assert_eq!(
        acc(bson!({"$addToSet": "$v"}), values.clone()),
        bson!([1, null, [1]])
    );
    assert_eq!(
        acc(bson!({"$firstN": {"input": "$v", "n": 2}}), values.clone()),
        bson!([null, 1])
    );
    assert_eq!(
        acc(bson!({"$lastN": {"input": "$v", "n": 2}}), values),
        bson!([1.0, [1]])
    );
    assert_eq!(
        fails(
            bson!([{"$group": {"_id": null, "r": {"$firstN": {"input": "$v", "n": 0}}}}]),
            vec![]
        ),
        5787908
    );
    assert_eq!(
        fails(
            bson!([{"$group": {"_id": null, "r": {"$firstN": {"input": "$v", "n": 1.5}}}}]),
            vec![]
        ),
        5787903
    );
    assert_eq!(
        fails(
            bson!([{"$group": {"_id": null, "r": {"$maxN": [1]}}}]),
            vec![]
        ),
        40237
    );
}

#[test]
fn percentile_and_median() {
    let values = vec![
        Some(bson!(10)),
        None,
        Some(Bson::Null),
        Some(bson!("x")),
        Some(bson!(5.5)),
        Some(bson!(27_i64)),
    ];
    assert_eq!(
        acc(
            bson!({"$percentile": {"input": "$v", "p": [0.0, 0.5, 1.0], "method": "approximate"}}),
            values.clone()
        ),
        bson!([5.5, 10.0, 27.0])
    );
    assert_eq!(
        acc(
            bson!({"$median": {"input": "$v", "method": "approximate"}}),
            values
        ),
        bson!(10.0)
    );
    assert_eq!(
        acc(
            bson!({"$percentile": {"input": "$v", "p": [0.5, 0.9], "method": "approximate"}}),
            vec![Some(bson!("a"))]
        ),
        bson!([null, null])
    );
    assert_eq!(
        fails(
            bson!([{"$group": {"_id": null, "r": {"$median": "$v"}}}]),
            vec![]
        ),
        7436100
    );
    assert_eq!(
        fails(
            bson!([{"$group": {"_id": null, "r": {"$percentile": 1}}}]),
            vec![]
        ),
        7429703
    );
    // An array is refused by `$group` itself before the accumulator's parser sees it.
    assert_eq!(
        fails(
            bson!([{"$group": {"_id": null, "r": {"$percentile": []}}}]),
            vec![]
        ),
        40237
    );
}

#[test]
fn merge_objects() {
    let values = vec![
        Some(bson!({"a": 1, "b": 1})),
        None,
        Some(Bson::Null),
        Some(bson!({"b": 2})),
    ];
    assert_eq!(
        acc(bson!({"$mergeObjects": "$v"}), values),
        bson!({"a": 1, "b": 2})
    );
    assert_eq!(
        fails(
            bson!([{"$group": {"_id": null, "r": {"$mergeObjects": "$v"}}}]),
            vec![doc! {"v": 1}]
        ),
        40400
    );
}

#[test]
fn top_bottom_and_n() {
    let input: Vec<Option<Bson>> = some(vec![bson!(3), bson!(1), bson!(2), bson!(1)]);
    let spec = |op: &str, n: Option<i32>| {
        let mut d = doc! {"sortBy": {"v": 1}, "output": ["$v", "$i"]};
        if let Some(n) = n {
            d.insert("n", n);
        }
        let mut outer = Document::new();
        outer.insert(op, d);
        Bson::Document(outer)
    };
    assert_eq!(acc(spec("$top", None), input.clone()), bson!([1, 1]));
    assert_eq!(acc(spec("$bottom", None), input.clone()), bson!([3, 0]));
    assert_eq!(
        acc(spec("$topN", Some(3)), input.clone()),
        bson!([[1, 1], [1, 3], [2, 2]])
    );
    assert_eq!(
        acc(spec("$bottomN", Some(2)), input.clone()),
        bson!([[2, 2], [3, 0]])
    );
    let many: Vec<Option<Bson>> = (0..100)
        .map(|i| Some(Bson::Int32((i * 37) % 100)))
        .collect();
    assert_eq!(
        acc(
            bson!({"$topN": {"sortBy": {"v": -1}, "output": "$v", "n": 3}}),
            many
        ),
        bson!([99, 98, 97])
    );
}

/// Accumulators' argument errors carry mongod's codes, checked when `$group` is parsed (an
/// empty input still fails).
#[test]
fn accumulator_argument_codes() {
    let cases = [
        // An array argument is refused for every accumulator, not only the unary ones.
        (bson!({"$count": [1]}), 40237),
        (bson!({"$top": [1]}), 40237),
        (bson!({"$stdDevPop": [1, 2]}), 40237),
        (bson!({"$median": []}), 40237),
        (bson!({"$nope": [1]}), 40237),
        // $count takes exactly {}.
        (bson!({"$count": {"a": 1}}), 14),
        (bson!({"$count": 1}), 14),
        // $top/$bottom family (accumulatorNParseArgs).
        (bson!({"$top": 1}), 5788001),
        (
            bson!({"$bottom": {"output": "$v", "sortBy": {"v": 1}, "n": 1}}),
            5788002,
        ),
        (
            bson!({"$topN": {"output": "$v", "sortBy": {"v": 1}}}),
            5788003,
        ),
        (bson!({"$bottomN": {"n": 1, "sortBy": {"v": 1}}}), 5788004),
        (bson!({"$top": {"output": "$v"}}), 5788005),
        (bson!({"$top": {"output": "$v", "sortBy": 1}}), 10065),
        // $firstN/$maxN keep their own (5787801, 5787900, 5787901, 5787906, 5787907).
        (bson!({"$firstN": 1}), 5787801),
        (bson!({"$maxN": {"input": "$v"}}), 5787906),
        (bson!({"$minN": {"n": 1}}), 5787907),
    ];
    for (spec, want) in cases {
        let got = fails(
            bson!([{"$group": {"_id": null, "r": spec.clone()}}]),
            vec![],
        );
        assert_eq!(got, want, "{spec}");
    }
    assert_eq!(acc(bson!({"$count": {}}), vec![None, None]), Bson::Int32(2));
    assert_eq!(
        acc(
            bson!({"$topN": {"n": 1, "output": "$v", "sortBy": {"v": -1}}}),
            some(vec![Bson::Int32(1), Bson::Int32(3)])
        ),
        bson!([3])
    );
}
