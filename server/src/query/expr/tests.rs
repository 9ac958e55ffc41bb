// Proves the expression operators compute what mongod documents for them (types, null and
// missing handling, variables, errors) by evaluating hand-written expressions on documents.

use super::*;
use bson::{RawDocumentBuf, doc};

fn eval_on(e: Bson, d: Document) -> CommandResult<Option<Bson>> {
    let raw = RawDocumentBuf::try_from(&d).expect("encodes");
    Expr::parse(&e)?.evaluate_value(&raw)
}

fn ev(e: Bson) -> Bson {
    eval_on(e, doc! {"a": 2, "s": " Hi ", "xs": [3, 1, 2], "t": bson::DateTime::from_millis(1_700_000_000_123)})
        .expect("evaluates")
        .unwrap_or(Bson::String("<missing>".into()))
}

fn code(e: Bson) -> i32 {
    eval_on(e, doc! {"a": "x"})
        .expect_err("must fail")
        .code
        .code()
}

#[test]
fn arithmetic_and_comparison() {
    assert_eq!(ev(Bson::Document(doc! {"$add": ["$a", 1]})), Bson::Int32(3));
    assert_eq!(
        ev(Bson::Document(doc! {"$add": [i32::MAX, 1]})),
        Bson::Int64(i64::from(i32::MAX) + 1)
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$subtract": [5, 7.5]})),
        Bson::Double(-2.5)
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$multiply": [2, 3i64]})),
        Bson::Int64(6)
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$divide": [1, 4]})),
        Bson::Double(0.25)
    );
    assert_eq!(ev(Bson::Document(doc! {"$mod": [7, 3]})), Bson::Int32(1));
    assert_eq!(ev(Bson::Document(doc! {"$abs": -3})), Bson::Int32(3));
    assert_eq!(
        ev(Bson::Document(doc! {"$add": ["$missing", 1]})),
        Bson::Null
    );
    assert_eq!(ev(Bson::Document(doc! {"$cmp": ["$a", 1]})), Bson::Int32(1));
    assert_eq!(
        ev(Bson::Document(doc! {"$lt": ["$missing", Bson::Null]})),
        Bson::Boolean(true)
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$round": [2.5]})),
        Bson::Double(2.0)
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$round": [1.2345, 2]})),
        Bson::Double(1.23)
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$trunc": [-1.7]})),
        Bson::Double(-1.0)
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$pow": [2, 10]})),
        Bson::Int32(1024)
    );
    assert_eq!(ev(Bson::Document(doc! {"$sqrt": 16})), Bson::Double(4.0));
    assert_eq!(ev(Bson::Document(doc! {"$sum": "$xs"})), Bson::Int32(6));
    let dec = |s: &str| Bson::Decimal128(s.parse().expect("decimal"));
    assert_eq!(
        ev(Bson::Document(doc! {"$add": [dec("0.1"), dec("0.2")]})),
        dec("0.3")
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$subtract": [dec("1.00"), dec("0.01")]}
        )),
        dec("0.99")
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$multiply": [dec("1.1"), 3]})),
        dec("3.3")
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$sum": [1, "x", 2.5]})),
        Bson::Double(3.5)
    );
    assert_eq!(ev(Bson::Document(doc! {"$avg": "$xs"})), Bson::Double(2.0));
    assert_eq!(ev(Bson::Document(doc! {"$max": "$xs"})), Bson::Int32(3));
    assert_eq!(
        ev(Bson::Document(doc! {"$min": [5, Bson::Null, 2]})),
        Bson::Int32(2)
    );
}

#[test]
fn conditionals_and_variables() {
    assert_eq!(
        ev(Bson::Document(
            doc! {"$cond": {"if": {"$gt": ["$a", 1]}, "then": "big", "else": "small"}}
        )),
        Bson::String("big".into())
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$ifNull": ["$missing", Bson::Null, "d"]}
        )),
        Bson::String("d".into())
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$switch": {"branches": [{"case": false, "then": 1}, {"case": true, "then": 2}]}}
        )),
        Bson::Int32(2)
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$let": {"vars": {"x": 10}, "in": {"$add": ["$$x", "$a"]}}}
        )),
        Bson::Int32(12)
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$map": {"input": "$xs", "as": "v", "in": {"$multiply": ["$$v", 10]}}}
        )),
        Bson::Array(vec![30.into(), 10.into(), 20.into()])
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$filter": {"input": "$xs", "cond": {"$gte": ["$$this", 2]}}}
        )),
        Bson::Array(vec![3.into(), 2.into()])
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$reduce": {"input": "$xs", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}}
        )),
        Bson::Int32(6)
    );
    assert_eq!(
        ev(Bson::String("$$REMOVE".into())),
        Bson::String("<missing>".into())
    );
    assert_eq!(ev(Bson::Document(doc! {"$getField": "a"})), Bson::Int32(2));
    assert_eq!(
        Expr::parse(&Bson::String("$$nope".into()))
            .expect_err("unbound")
            .code
            .code(),
        17276
    );
    assert_eq!(
        code(Bson::Document(
            doc! {"$switch": {"branches": [{"case": false, "then": 1}]}}
        )),
        2
    );
}

#[test]
fn arrays_strings_objects() {
    assert_eq!(
        ev(Bson::Document(doc! {"$arrayElemAt": ["$xs", -1]})),
        Bson::Int32(2)
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$arrayElemAt": ["$xs", 9]})),
        Bson::String("<missing>".into())
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$concatArrays": ["$xs", [4]]})),
        Bson::Array(vec![3.into(), 1.into(), 2.into(), 4.into()])
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$slice": ["$xs", -2]})),
        Bson::Array(vec![1.into(), 2.into()])
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$slice": ["$xs", 1, 1]})),
        Bson::Array(vec![1.into()])
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$indexOfArray": ["$xs", 2]})),
        Bson::Int32(2)
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$range": [0, 6, 2]})),
        Bson::Array(vec![0.into(), 2.into(), 4.into()])
    );
    assert_eq!(ev(Bson::Document(doc! {"$size": "$xs"})), Bson::Int32(3));
    assert_eq!(
        ev(Bson::Document(doc! {"$in": [1, "$xs"]})),
        Bson::Boolean(true)
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$isArray": ["$xs"]})),
        Bson::Boolean(true)
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$trim": {"input": "$s"}})),
        Bson::String("Hi".into())
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$toUpper": "$s"})),
        Bson::String(" HI ".into())
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$concat": ["a", "b"]})),
        Bson::String("ab".into())
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$split": ["a,b", ","]})),
        Bson::Array(vec!["a".into(), "b".into()])
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$substrCP": ["héllo", 1, 3]})),
        Bson::String("éll".into())
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$strLenCP": "héllo"})),
        Bson::Int32(5)
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$strLenBytes": "héllo"})),
        Bson::Int32(6)
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$mergeObjects": [{"a": 1}, Bson::Null, {"b": 2, "a": 3}]}
        )),
        Bson::Document(doc! {"a": 3, "b": 2})
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$objectToArray": {"k1": 1}})),
        Bson::Array(vec![Bson::Document(doc! {"k": "k1", "v": 1})])
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$arrayToObject": [[["x", 1]]]})),
        Bson::Document(doc! {"x": 1})
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$type": "$missing"})),
        Bson::String("missing".into())
    );
    assert_eq!(code(Bson::Document(doc! {"$size": "$a"})), 17124);
    assert_eq!(code(Bson::Document(doc! {"$concat": ["$a", 1]})), 16702);
}

#[test]
fn conversions_and_dates() {
    assert_eq!(ev(Bson::Document(doc! {"$toInt": "42"})), Bson::Int32(42));
    assert_eq!(ev(Bson::Document(doc! {"$toLong": 2.9})), Bson::Int64(2));
    assert_eq!(
        ev(Bson::Document(doc! {"$toDouble": true})),
        Bson::Double(1.0)
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$toString": 5})),
        Bson::String("5".into())
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$toBool": 0})),
        Bson::Boolean(false)
    );
    assert_eq!(ev(Bson::Document(doc! {"$toInt": Bson::Null})), Bson::Null);
    assert_eq!(
        ev(Bson::Document(doc! {"$isNumber": "$a"})),
        Bson::Boolean(true)
    );
    // 1_700_000_000_123 ms is 2023-11-14T22:13:20.123Z, a Tuesday, day 318 of the year.
    assert_eq!(ev(Bson::Document(doc! {"$year": "$t"})), Bson::Int32(2023));
    assert_eq!(ev(Bson::Document(doc! {"$month": "$t"})), Bson::Int32(11));
    assert_eq!(
        ev(Bson::Document(doc! {"$dayOfMonth": "$t"})),
        Bson::Int32(14)
    );
    assert_eq!(ev(Bson::Document(doc! {"$hour": "$t"})), Bson::Int32(22));
    assert_eq!(
        ev(Bson::Document(doc! {"$millisecond": "$t"})),
        Bson::Int32(123)
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$dayOfWeek": "$t"})),
        Bson::Int32(3)
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$dayOfYear": "$t"})),
        Bson::Int32(318)
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$dateToString": {"date": "$t"}})),
        Bson::String("2023-11-14T22:13:20.123Z".into())
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$dateToString": {"date": "$t", "format": "%Y/%j"}}
        )),
        Bson::String("2023/318".into())
    );
    let year0 = eval_on(
        Bson::Document(doc! {"$year": "$d"}),
        doc! {"d": bson::DateTime::from_millis(-62_167_219_200_000)},
    );
    assert_eq!(year0.expect("ok"), Some(Bson::Int32(0)));
    let leap = eval_on(
        Bson::Document(doc! {"$dayOfYear": "$d"}),
        doc! {"d": bson::DateTime::from_millis(951_782_400_000)},
    );
    assert_eq!(
        leap.expect("ok"),
        Some(Bson::Int32(60)),
        "2000-02-29 is day 60"
    );
}

#[test]
fn parse_errors() {
    let p = |e: Document| {
        Expr::parse(&Bson::Document(e))
            .expect_err("refused")
            .code
            .code()
    };
    assert_eq!(p(doc! {"$foo": 1}), 168);
    assert_eq!(p(doc! {"$eq": [1]}), 16020);
    assert_eq!(p(doc! {"$add": 1, "$sub": 2}), 15983);
    assert_eq!(p(doc! {"$cond": {"then": 1, "else": 2}}), 17080);
    assert_eq!(p(doc! {"$cond": {"if": true, "then": 1}}), 17082);
    assert_eq!(p(doc! {"$map": {"input": [], "in": "$$zz"}}), 17276);
}

#[test]
fn sets_regex_replace_convert() {
    let arr = |v: Vec<i32>| Bson::Array(v.into_iter().map(Bson::Int32).collect());
    assert_eq!(
        ev(Bson::Document(doc! {"$setUnion": [[1, 2], [2, 3]]})),
        arr(vec![1, 2, 3])
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$setIntersection": [[1, 2, 3], [3, 1]]}
        )),
        arr(vec![1, 3])
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$setDifference": [[1, 2, 3], [2]]})),
        arr(vec![1, 3])
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$setEquals": [[1, 2, 2], [2, 1]]})),
        Bson::Boolean(true)
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$setIsSubset": [[1], [1, 2]]})),
        Bson::Boolean(true)
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$regexMatch": {"input": "Hello", "regex": "^h", "options": "i"}}
        )),
        Bson::Boolean(true)
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$regexFind": {"input": "aé-b12", "regex": "([a-z])(\\d+)"}}
        )),
        Bson::Document(doc! {"match": "b12", "idx": 3, "captures": ["b", "12"]})
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$regexFindAll": {"input": "a1b2", "regex": "\\d"}}
        ))
        .as_array()
        .map(Vec::len),
        Some(2)
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$replaceAll": {"input": "a-b-c", "find": "-", "replacement": "+"}}
        )),
        Bson::String("a+b+c".into())
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$replaceOne": {"input": "a-b-c", "find": "-", "replacement": ""}}
        )),
        Bson::String("ab-c".into())
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$sortArray": {"input": "$xs", "sortBy": -1}}
        )),
        arr(vec![3, 2, 1])
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$sortArray": {"input": [{"k": 2}, {"k": 1}], "sortBy": {"k": 1}}}
        )),
        Bson::Array(vec![
            Bson::Document(doc! {"k": 1}),
            Bson::Document(doc! {"k": 2})
        ])
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$convert": {"input": "12", "to": "int"}}
        )),
        Bson::Int32(12)
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$convert": {"input": "x", "to": "int", "onError": -1}}
        )),
        Bson::Int32(-1)
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$convert": {"input": "$missing", "to": "int", "onNull": 0}}
        )),
        Bson::Int32(0)
    );
    let oid = "65a1b2c3d4e5f60718293a4b";
    assert_eq!(
        ev(Bson::Document(doc! {"$toObjectId": oid})),
        Bson::ObjectId(bson::oid::ObjectId::parse_str(oid).expect("hex"))
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$toDate": 0i64})),
        Bson::DateTime(bson::DateTime::from_millis(0))
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$indexOfCP": ["héllo", "l"]})),
        Bson::Int32(2)
    );
    assert!(
        matches!(ev(Bson::Document(doc! {"$rand": {}})), Bson::Double(d) if (0.0..1.0).contains(&d))
    );
}

#[test]
fn calendar_arithmetic() {
    let at = |ms: i64| Bson::DateTime(bson::DateTime::from_millis(ms));
    // 2024-01-31T00:00Z plus one month is 2024-02-29 (leap year, day clamped).
    let jan31 = 1_706_659_200_000i64;
    let feb29 = 1_709_164_800_000i64;
    let e = doc! {"$dateAdd": {"startDate": at(jan31), "unit": "month", "amount": 1}};
    assert_eq!(ev(Bson::Document(e)), at(feb29));
    let e = doc! {"$dateSubtract": {"startDate": at(feb29), "unit": "day", "amount": 29}};
    assert_eq!(ev(Bson::Document(e)), at(jan31));
    let e = doc! {"$dateDiff": {"startDate": at(jan31), "endDate": at(feb29), "unit": "month"}};
    assert_eq!(ev(Bson::Document(e)), Bson::Int64(1));
    let e = doc! {"$dateDiff": {"startDate": at(jan31), "endDate": at(feb29), "unit": "day"}};
    assert_eq!(ev(Bson::Document(e)), Bson::Int64(29));
    let e = doc! {"$dateDiff": {"startDate": at(0), "endDate": at(jan31), "unit": "year"}};
    assert_eq!(ev(Bson::Document(e)), Bson::Int64(54));
}

#[test]
fn date_parts_weeks_trunc_and_objects() {
    let at = |ms: i64| Bson::DateTime(bson::DateTime::from_millis(ms));
    // 2023-11-14 (the `t` field) is a Tuesday in ISO week 46 and Sunday-based week 46.
    assert_eq!(
        ev(Bson::Document(doc! {"$isoDayOfWeek": "$t"})),
        Bson::Int32(2)
    );
    assert_eq!(ev(Bson::Document(doc! {"$isoWeek": "$t"})), Bson::Int32(46));
    assert_eq!(ev(Bson::Document(doc! {"$week": "$t"})), Bson::Int32(46));
    // 2021-01-01 is a Friday: ISO week 53 of 2020.
    let jan1_2021 = eval_on(
        Bson::Document(doc! {"$isoWeekYear": "$d"}),
        doc! {"d": at(1_609_459_200_000)},
    );
    assert_eq!(jan1_2021.expect("ok"), Some(Bson::Int64(2020)));
    let parts = ev(Bson::Document(doc! {"$dateToParts": {"date": "$t"}}));
    assert_eq!(
        parts,
        Bson::Document(
            doc! {"year": 2023, "month": 11, "day": 14, "hour": 22, "minute": 13, "second": 20, "millisecond": 123}
        )
    );
    let back = ev(Bson::Document(
        doc! {"$dateFromParts": {"year": 2023, "month": 11, "day": 14, "hour": 22, "minute": 13, "second": 20, "millisecond": 123}},
    ));
    assert_eq!(back, at(1_700_000_000_123));
    assert_eq!(
        ev(Bson::Document(
            doc! {"$dateFromParts": {"year": 2023, "month": 14}}
        )),
        at(1_706_745_600_000),
        "month 14 carries into 2024-02"
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$dateFromString": {"dateString": "2023-11-14T22:13:20.123Z"}}
        )),
        at(1_700_000_000_123)
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$dateFromString": {"dateString": "2023-11-14"}}
        )),
        at(1_699_920_000_000)
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$dateFromString": {"dateString": "14/11/2023", "format": "%d/%m/%Y"}}
        )),
        at(1_699_920_000_000)
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$dateFromString": {"dateString": "nope", "onError": 0}}
        )),
        Bson::Int32(0)
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$dateTrunc": {"date": "$t", "unit": "day"}}
        )),
        at(1_699_920_000_000)
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$dateTrunc": {"date": "$t", "unit": "month"}}
        )),
        at(1_698_796_800_000)
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$dateTrunc": {"date": "$t", "unit": "hour", "binSize": 6}}
        )),
        at(1_699_984_800_000),
        "6-hour bins start at 00, 06, 12, 18"
    );
    // Weeks start on Sunday by default: 2023-11-12.
    assert_eq!(
        ev(Bson::Document(
            doc! {"$dateTrunc": {"date": "$t", "unit": "week"}}
        )),
        at(1_699_747_200_000)
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$setField": {"field": "x", "input": {"a": 1}, "value": 2}}
        )),
        Bson::Document(doc! {"a": 1, "x": 2})
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$unsetField": {"field": "a", "input": {"a": 1, "b": 2}}}
        )),
        Bson::Document(doc! {"b": 2})
    );
    assert_eq!(
        ev(Bson::Document(
            doc! {"$zip": {"inputs": [[1, 2], ["a"]], "useLongestLength": true, "defaults": [0, "z"]}}
        )),
        bson::bson!([[1, "a"], [2, "z"]])
    );
    assert_eq!(
        eval_on(
            Bson::Document(
                doc! {"$dateTrunc": {"date": "$t", "unit": "day", "timezone": "Europe/Paris"}}
            ),
            doc! {"t": at(0)}
        )
        .expect("tz"),
        // 1970-01-01T01:00 in Paris truncates to local midnight, 23:00Z the day before.
        Some(at(-3_600_000))
    );
}

#[test]
fn regex_find_all_indexes_in_code_points_and_builders_stop_at_the_bson_limit() {
    let all = |input: &str, regex: &str| {
        ev(Bson::Document(
            doc! {"$regexFindAll": {"input": input, "regex": regex}},
        ))
    };
    let idx = |r: Bson| -> Vec<i32> {
        r.as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_document().unwrap().get_i32("idx").unwrap())
            .collect()
    };
    // Positions count code points (é and 字 are several bytes), with and without groups.
    assert_eq!(idx(all("aé字b1é2", "\\d")), vec![4, 6]);
    assert_eq!(idx(all("aé字b1é2", "(\\d)")), vec![4, 6]);
    assert_eq!(
        all("x1y22", "(\\d)(\\d)?"),
        Bson::Array(vec![
            Bson::Document(doc! {"match": "1", "idx": 1, "captures": ["1", Bson::Null]}),
            Bson::Document(doc! {"match": "22", "idx": 3, "captures": ["2", "2"]}),
        ])
    );
    // Every character of 4 MiB matches: the result would pass 16 MiB.
    let big = "a".repeat(4 << 20);
    let e = eval_on(
        Bson::Document(doc! {"$regexFindAll": {"input": "$s", "regex": "a"}}),
        doc! { "s": big.clone() },
    )
    .unwrap_err();
    assert_eq!(e.code.code(), 51151);
    let e = eval_on(
        Bson::Document(doc! {"$concat": ["$s", "$s", "$s", "$s", "$s"]}),
        doc! { "s": big.clone() },
    )
    .unwrap_err();
    assert_eq!(e.code.code(), 10334);
    let e = eval_on(
        Bson::Document(doc! {"$concatArrays": ["$a", "$a", "$a", "$a", "$a"]}),
        doc! { "a": [big] },
    )
    .unwrap_err();
    assert_eq!(e.code.code(), 10334);
}

#[test]
fn decimal_operators_are_exact_at_the_edges() {
    let dec = |s: &str| Bson::Decimal128(s.parse().expect("decimal"));
    let max = "9.999999999999999999999999999999999E+6144";
    let text = |e: Document| match ev(Bson::Document(e)) {
        Bson::Decimal128(d) => d.to_string(),
        other => format!("{other:?}"),
    };
    assert_eq!(text(doc! { "$abs": dec(&format!("-{max}")) }), max);
    assert_eq!(text(doc! { "$abs": dec("-1E-6176") }), "1E-6176");
    assert_eq!(
        text(doc! { "$divide": [dec("1"), dec("1E-6176")] }),
        "Infinity"
    );
    assert_eq!(text(doc! { "$divide": [dec("1"), 8] }), "0.125");
    assert_eq!(text(doc! { "$mod": [dec("10.5"), 3] }), "1.5");
    assert_eq!(text(doc! { "$subtract": [dec("0.3"), dec("0.1")] }), "0.2");
    assert_eq!(text(doc! { "$round": [dec("2.675"), 2] }), "2.68");
    assert_eq!(text(doc! { "$trunc": [dec("-2.679"), 1] }), "-2.6");
    assert_eq!(text(doc! { "$toDecimal": 2.5 }), "2.50000000000000");
    assert_eq!(text(doc! { "$toDecimal": i64::MAX }), "9223372036854775807");
    assert_eq!(
        code(Bson::Document(doc! { "$divide": [dec("1"), dec("-0")] })),
        16608
    );
    assert_eq!(
        code(Bson::Document(doc! { "$mod": [dec("1"), dec("0E+3")] })),
        16610
    );
}

#[test]
fn numeric_conversions_fail_as_mongod() {
    let dec = |s: &str| Bson::Decimal128(s.parse().expect("decimal"));
    // Out of the target's range: ConversionFailure, never a saturated value.
    assert_eq!(
        code(Bson::Document(doc! { "$toInt": 2_147_483_648_i64 })),
        241
    );
    assert_eq!(
        code(Bson::Document(doc! { "$toInt": 2_147_483_648.0 })),
        241
    );
    assert_eq!(code(Bson::Document(doc! { "$toLong": 9.3e18 })), 241);
    assert_eq!(code(Bson::Document(doc! { "$toLong": dec("1E+19") })), 241);
    assert_eq!(code(Bson::Document(doc! { "$toInt": dec("NaN") })), 241);
    assert_eq!(code(Bson::Document(doc! { "$toInt": "12x" })), 241);
    assert_eq!(
        ev(Bson::Document(
            doc! { "$toLong": dec("9223372036854775807.9") }
        )),
        Bson::Int64(i64::MAX)
    );
    assert_eq!(
        ev(Bson::Document(doc! { "$toInt": dec("-2147483648.5") })),
        Bson::Int32(i32::MIN)
    );
    assert_eq!(
        ev(Bson::Document(doc! { "$toInt": 2_147_483_647.9 })),
        Bson::Int32(i32::MAX)
    );
}

#[test]
fn operator_location_codes() {
    let at = Bson::DateTime(bson::DateTime::from_millis(0));
    let cases = [
        (
            doc! { "$dateAdd": { "startDate": at.clone(), "unit": "day", "amount": 1.5 } },
            5166405,
        ),
        (
            doc! { "$dateSubtract": { "startDate": at, "unit": "day", "amount": "x" } },
            5166405,
        ),
        (doc! { "$concat": ["a", "$"] }, 16872),
        (doc! { "$concat": ["a", "$b."] }, 40353),
        (doc! { "$concat": ["a", "$b..c"] }, 15998),
        (doc! { "$year": "2020-01-01" }, 16006),
        (doc! { "$dayOfWeek": 5 }, 16006),
        (doc! { "$toUpper": { "$literal": { "a": 1 } } }, 16007),
        (
            doc! { "$convert": { "input": { "$literal": { "a": 1 } }, "to": "int" } },
            241,
        ),
    ];
    for (e, want) in cases {
        assert_eq!(code(Bson::Document(e.clone())), want, "{e}");
    }
}

#[test]
fn std_dev_over_arrays_and_arguments() {
    // Population: the mean of [3, 1, 2] is 2, the squared deviations sum to 2, 2/3 under the root.
    let pop = ev(Bson::Document(doc! {"$stdDevPop": "$xs"}));
    assert!(matches!(pop, Bson::Double(f) if (f - (2.0f64 / 3.0).sqrt()).abs() < 1e-12));
    assert_eq!(
        ev(Bson::Document(doc! {"$stdDevSamp": "$xs"})),
        Bson::Double(1.0)
    );
    // Several arguments are the values; non-numbers are ignored.
    assert_eq!(
        ev(Bson::Document(doc! {"$stdDevSamp": [1, "x", 3, null]})),
        Bson::Double(2.0f64.sqrt())
    );
    assert_eq!(
        ev(Bson::Document(doc! {"$stdDevPop": "$a"})),
        Bson::Double(0.0)
    );
    // One value has no sample deviation; no numbers have none at all.
    assert_eq!(ev(Bson::Document(doc! {"$stdDevSamp": "$a"})), Bson::Null);
    assert_eq!(
        ev(Bson::Document(doc! {"$stdDevPop": "$missing"})),
        Bson::Null
    );
    assert_eq!(ev(Bson::Document(doc! {"$stdDevPop": [[]]})), Bson::Null);
}
