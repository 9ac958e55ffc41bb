// Proves the array, string and rounding operators answer bad arguments with mongod's own
// location codes (not a generic 2 or 14): one expression per check, evaluated on a document.

use super::*;
use bson::{RawDocumentBuf, doc};

fn code(e: Bson) -> Option<i32> {
    let d = doc! { "xs": [1, 2, 3], "s": "héllo", "o": { "a": 1 } };
    let raw = RawDocumentBuf::try_from(&d).expect("encodes");
    match Expr::parse(&e).and_then(|x| x.evaluate_value(&raw)) {
        Ok(_) => None,
        Err(e) => Some(e.code.code()),
    }
}

fn check(cases: &[(Document, i32)]) {
    for (e, want) in cases {
        assert_eq!(code(Bson::Document(e.clone())), Some(*want), "{e}");
    }
}

#[test]
fn array_operators() {
    check(&[
        (doc! { "$arrayElemAt": [1, 0] }, 28689),
        (doc! { "$arrayElemAt": ["$xs", "a"] }, 28690),
        (doc! { "$arrayElemAt": ["$xs", 1.5] }, 28691),
        (doc! { "$arrayElemAt": ["$xs", 1_i64 << 40] }, 28691),
        (doc! { "$first": [1] }, 28689),
        (doc! { "$last": ["x"] }, 28689),
        (doc! { "$slice": [1, 1] }, 28724),
        (doc! { "$slice": ["$xs", "a"] }, 28725),
        (doc! { "$slice": ["$xs", 0.5] }, 28726),
        (doc! { "$slice": ["$xs", 0, "a"] }, 28727),
        (doc! { "$slice": ["$xs", 0, 1.5] }, 28728),
        (doc! { "$slice": ["$xs", 0, 0] }, 28729),
        (doc! { "$concatArrays": ["$xs", 1] }, 28664),
        (doc! { "$reverseArray": 1 }, 34435),
        (doc! { "$indexOfArray": [1, 1] }, 40090),
        (doc! { "$indexOfArray": ["$xs", 1, "a"] }, 40096),
        (doc! { "$indexOfArray": ["$xs", 1, 0.5] }, 40096),
        (doc! { "$indexOfArray": ["$xs", 1, -1] }, 40097),
        (doc! { "$indexOfArray": ["$xs", 1, 0, -1] }, 40097),
        (doc! { "$anyElementTrue": [1] }, 17041),
        (doc! { "$anyElementTrue": [null] }, 17041),
        (doc! { "$allElementsTrue": [1] }, 17040),
        (doc! { "$range": ["a", 5] }, 34443),
        (doc! { "$range": [0.5, 5] }, 34444),
        (doc! { "$range": [0, "a"] }, 34445),
        (doc! { "$range": [0, 5.5] }, 34446),
        (doc! { "$range": [0, 5, "a"] }, 34447),
        (doc! { "$range": [0, 5, 0.5] }, 34448),
        (doc! { "$range": [0, 5, 0] }, 34449),
        (doc! { "$objectToArray": 1 }, 40390),
        (doc! { "$arrayToObject": 1 }, 40386),
        (doc! { "$arrayToObject": [[1]] }, 40398),
        (
            doc! { "$arrayToObject": [[["a", 1], { "k": "b", "v": 2 }]] },
            40396,
        ),
        (doc! { "$arrayToObject": [[["a", 1, 2]]] }, 40397),
        (doc! { "$arrayToObject": [[[1, 1]]] }, 40395),
        (
            doc! { "$arrayToObject": [[{ "k": "a", "v": 1 }, ["b", 2]]] },
            40391,
        ),
        (doc! { "$arrayToObject": [[{ "k": "a" }]] }, 40392),
        (doc! { "$arrayToObject": [[{ "k": "a", "x": 1 }]] }, 40393),
        (doc! { "$arrayToObject": [[{ "k": 1, "v": 1 }]] }, 40394),
        (doc! { "$arrayToObject": [[["a\u{0}b", 1]]] }, 4940400),
        (doc! { "$sortArray": { "input": 1, "sortBy": 1 } }, 2942504),
        // $zip: the spec at parse time, the inputs when evaluated.
        (doc! { "$zip": 1 }, 34460),
        (doc! { "$zip": { "inputs": "$xs" } }, 34461),
        (doc! { "$zip": { "inputs": ["$xs"], "defaults": 1 } }, 34462),
        (
            doc! { "$zip": { "inputs": ["$xs"], "useLongestLength": 1 } },
            34463,
        ),
        (doc! { "$zip": { "inputs": ["$xs"], "x": 1 } }, 34464),
        (doc! { "$zip": { "inputs": [] } }, 34465),
        (
            doc! { "$zip": { "inputs": ["$xs"], "defaults": [0] } },
            34466,
        ),
        (
            doc! { "$zip": { "inputs": ["$xs", "$xs"], "useLongestLength": true, "defaults": [0] } },
            34467,
        ),
        (doc! { "$zip": { "inputs": ["$xs", 1] } }, 34468),
    ]);
}

#[test]
fn null_arguments_give_null_where_mongod_gives_null() {
    for e in [
        doc! { "$slice": ["$xs", null] },
        doc! { "$slice": ["$xs", 0, null] },
        doc! { "$arrayElemAt": ["$xs", null] },
        doc! { "$split": ["a,b", null] },
        doc! { "$indexOfArray": [null, 1] },
    ] {
        assert_eq!(code(Bson::Document(e.clone())), None, "{e}");
    }
}

#[test]
fn string_operators() {
    check(&[
        (doc! { "$strLenBytes": 1 }, 34473),
        (doc! { "$strLenCP": 1 }, 34471),
        (doc! { "$split": [1, ","] }, 40085),
        (doc! { "$split": ["a", 1] }, 40086),
        (doc! { "$split": ["a", ""] }, 40087),
        (doc! { "$substrBytes": ["abc", "a", 1] }, 16034),
        (doc! { "$substrBytes": ["abc", 0, "a"] }, 16035),
        (doc! { "$substr": ["abc", -1, 1] }, 50752),
        (doc! { "$substrBytes": ["$s", 2, 1] }, 28656),
        (doc! { "$substrBytes": ["$s", 0, 2] }, 28657),
        (doc! { "$substrCP": ["abc", "a", 1] }, 34450),
        (doc! { "$substrCP": ["abc", 0.5, 1] }, 34451),
        (doc! { "$substrCP": ["abc", 0, "a"] }, 34452),
        (doc! { "$substrCP": ["abc", 0, 0.5] }, 34453),
        (doc! { "$substrCP": ["abc", 0, -1] }, 34454),
        (doc! { "$substrCP": ["abc", -1, 1] }, 34455),
        (doc! { "$indexOfBytes": [1, "a"] }, 40091),
        (doc! { "$indexOfBytes": ["a", 1] }, 40092),
        (doc! { "$indexOfBytes": ["a", "a", -1] }, 40097),
        (doc! { "$indexOfBytes": ["a", "a", 0, "x"] }, 40096),
        (doc! { "$indexOfCP": [1, "a"] }, 40093),
        (doc! { "$indexOfCP": ["a", 1] }, 40094),
        (doc! { "$indexOfCP": ["a", "a", 0.5] }, 40096),
        (doc! { "$concat": ["a", 1] }, 16702),
        (doc! { "$trim": { "input": 1 } }, 50699),
        (doc! { "$ltrim": { "input": "a", "chars": 1 } }, 50700),
        (
            doc! { "$replaceOne": { "input": 1, "find": "a", "replacement": "b" } },
            51746,
        ),
        (
            doc! { "$replaceAll": { "input": "a", "find": 1, "replacement": "b" } },
            51745,
        ),
        (
            doc! { "$replaceAll": { "input": null, "find": "a", "replacement": 1 } },
            51744,
        ),
    ]);
}

#[test]
fn round_and_trunc() {
    check(&[
        (doc! { "$round": ["a"] }, 51081),
        (doc! { "$trunc": ["a", 1] }, 51081),
        (doc! { "$round": [1.5, 0.5] }, 51082),
        (doc! { "$round": [1.5, "a"] }, 51082),
        (doc! { "$trunc": [1.5, 101] }, 51083),
        (doc! { "$round": [1.5, -21] }, 51083),
    ]);
    assert_eq!(code(Bson::Document(doc! { "$round": [1.5, 100] })), None);
}

#[test]
fn variable_and_control_operators() {
    check(&[
        (doc! { "$let": 1 }, 16874),
        (doc! { "$let": { "vars": {}, "in": 1, "x": 1 } }, 16875),
        (doc! { "$let": { "in": 1 } }, 16876),
        (doc! { "$let": { "vars": {} } }, 16877),
        (doc! { "$let": { "vars": 1, "in": 1 } }, 10065),
        (doc! { "$map": [] }, 16878),
        (
            doc! { "$map": { "input": "$xs", "in": 1, "limit": 1 } },
            16879,
        ),
        (doc! { "$map": { "in": 1 } }, 16880),
        (doc! { "$map": { "input": "$xs" } }, 16882),
        (doc! { "$filter": "x" }, 28646),
        (
            doc! { "$filter": { "input": "$xs", "cond": true, "x": 1 } },
            28647,
        ),
        (doc! { "$filter": { "cond": true } }, 28648),
        (doc! { "$filter": { "input": "$xs" } }, 28650),
        (doc! { "$reduce": 1 }, 40075),
        (
            doc! { "$reduce": { "input": [], "initialValue": 0, "in": 1, "x": 1 } },
            40076,
        ),
        (doc! { "$reduce": { "initialValue": 0, "in": 1 } }, 40077),
        (doc! { "$reduce": { "input": [], "in": 1 } }, 40078),
        (
            doc! { "$reduce": { "input": [], "initialValue": 0 } },
            40079,
        ),
        (doc! { "$switch": 1 }, 40060),
        (doc! { "$switch": { "branches": 1 } }, 40061),
        (doc! { "$switch": { "branches": [1] } }, 40062),
        (
            doc! { "$switch": { "branches": [{ "case": true, "then": 1, "x": 1 }] } },
            40063,
        ),
        (doc! { "$switch": { "branches": [{ "then": 1 }] } }, 40064),
        (
            doc! { "$switch": { "branches": [{ "case": true }] } },
            40065,
        ),
        (
            doc! { "$switch": { "branches": [{ "case": true, "then": 1 }], "x": 1 } },
            40067,
        ),
        (doc! { "$switch": { "branches": [] } }, 40068),
        (doc! { "$switch": { "default": 1 } }, 40068),
        (
            doc! { "$cond": { "if": true, "then": 1, "else": 2, "x": 1 } },
            17083,
        ),
        (doc! { "$cond": { "then": 1, "else": 2 } }, 17080),
        (doc! { "$cond": { "if": true, "else": 2 } }, 17081),
        (doc! { "$cond": { "if": true, "then": 1 } }, 17082),
        (doc! { "$cond": [true, 1] }, 16020),
        (doc! { "$map": { "input": 1, "in": 1 } }, 16883),
        (doc! { "$filter": { "input": 1, "cond": true } }, 28651),
        (
            doc! { "$reduce": { "input": 1, "initialValue": 0, "in": 1 } },
            40080,
        ),
        (
            doc! { "$filter": { "input": "$xs", "cond": true, "limit": 0.5 } },
            327391,
        ),
        (
            doc! { "$filter": { "input": "$xs", "cond": true, "limit": "a" } },
            327391,
        ),
        (
            doc! { "$filter": { "input": "$xs", "cond": true, "limit": 0 } },
            327392,
        ),
    ]);
    // An empty input answers before its limit is read; a null limit means none.
    assert_eq!(
        code(Bson::Document(
            doc! { "$filter": { "input": [], "cond": true, "limit": 0 } }
        )),
        None
    );
    assert_eq!(
        code(Bson::Document(
            doc! { "$filter": { "input": "$xs", "cond": true, "limit": null } }
        )),
        None
    );
    // The shapes mongod accepts still evaluate.
    for e in [
        doc! { "$let": { "vars": { "v": 1 }, "in": "$$v" } },
        doc! { "$map": { "input": "$xs", "as": "x", "in": "$$x" } },
        doc! { "$filter": { "input": "$xs", "cond": true, "limit": 1 } },
        doc! { "$reduce": { "input": "$xs", "initialValue": 0, "in": { "$add": ["$$value", "$$this"] } } },
        doc! { "$switch": { "branches": [{ "case": false, "then": 1 }], "default": 2 } },
    ] {
        assert_eq!(code(Bson::Document(e.clone())), None, "{e}");
    }
}

#[test]
fn date_arithmetic_operators() {
    let at = bson::DateTime::from_millis(0);
    check(&[
        (
            doc! { "$dateAdd": { "startDate": "x", "unit": "day", "amount": 1 } },
            5166403,
        ),
        (
            doc! { "$dateAdd": { "startDate": at, "unit": 1, "amount": 1 } },
            5439013,
        ),
        (
            doc! { "$dateAdd": { "startDate": at, "unit": "fortnight", "amount": 1 } },
            9,
        ),
        (
            doc! { "$dateAdd": { "startDate": at, "unit": "day", "amount": 1.5 } },
            5166405,
        ),
        (
            doc! { "$dateSubtract": { "startDate": at, "unit": "day", "amount": i64::MIN } },
            6045000,
        ),
        (
            doc! { "$dateDiff": { "startDate": "x", "endDate": at, "unit": "day" } },
            5166307,
        ),
        (
            doc! { "$dateDiff": { "startDate": at, "endDate": 1, "unit": "day" } },
            5166307,
        ),
        (
            doc! { "$dateDiff": { "startDate": at, "endDate": at, "unit": true } },
            5439013,
        ),
        (
            doc! { "$dateDiff": { "startDate": at, "endDate": at, "unit": "week", "startOfWeek": 1 } },
            5439015,
        ),
        (
            doc! { "$dateDiff": { "startDate": at, "endDate": at, "unit": "week", "startOfWeek": "x" } },
            5439016,
        ),
        (doc! { "$dateTrunc": { "date": 1, "unit": "day" } }, 5166307),
        (
            doc! { "$dateTrunc": { "date": at, "unit": "day", "binSize": 1.5 } },
            5439017,
        ),
        (
            doc! { "$dateTrunc": { "date": at, "unit": "day", "binSize": "a" } },
            5439017,
        ),
        (
            doc! { "$dateTrunc": { "date": at, "unit": "day", "binSize": 0 } },
            5439018,
        ),
        (doc! { "$dateTrunc": { "date": at, "unit": 1 } }, 5439013),
    ]);
}

#[test]
fn regex_operators() {
    let with_flags = bson::Regex {
        pattern: "a".try_into().expect("cstr"),
        options: "i".try_into().expect("cstr"),
    };
    check(&[
        (doc! { "$regexMatch": { "input": 1, "regex": "a" } }, 51104),
        (doc! { "$regexMatch": { "input": "a", "regex": 1 } }, 51105),
        (
            doc! { "$regexFind": { "input": "a", "regex": "a", "options": 1 } },
            51106,
        ),
        (
            doc! { "$regexFindAll": { "input": "a", "regex": with_flags, "options": "m" } },
            51107,
        ),
        (
            doc! { "$regexMatch": { "input": "a", "regex": "a", "options": "q" } },
            51108,
        ),
        (
            doc! { "$regexMatch": { "input": "a", "regex": "a\u{0}" } },
            51109,
        ),
        (
            doc! { "$regexMatch": { "input": "a", "regex": "(" } },
            51111,
        ),
        // The pattern is checked before the input's type.
        (doc! { "$regexMatch": { "input": 1, "regex": "(" } }, 51111),
    ]);
    assert_eq!(
        code(Bson::Document(
            doc! { "$regexMatch": { "input": null, "regex": "a" } }
        )),
        None
    );
}

#[test]
fn object_operators() {
    check(&[
        (doc! { "$mergeObjects": ["$o", 1] }, 40400),
        (
            doc! { "$setField": { "field": "a", "input": 1, "value": 1 } },
            4161105,
        ),
        (
            doc! { "$unsetField": { "field": "a", "input": 1 } },
            4161105,
        ),
        (
            doc! { "$getField": { "field": { "$add": [1, 1] }, "input": "$o" } },
            3041704,
        ),
    ]);
}

#[test]
fn named_argument_documents() {
    let at = bson::DateTime::from_millis(0);
    check(&[
        // Dates: not a document, an unknown field, a missing one.
        (doc! { "$dateFromParts": 1 }, 40519),
        (doc! { "$dateFromParts": { "year": 2020, "x": 1 } }, 40518),
        (doc! { "$dateFromParts": { "month": 1 } }, 40516),
        (
            doc! { "$dateFromParts": { "year": 2020, "isoWeek": 1 } },
            40489,
        ),
        (
            doc! { "$dateFromParts": { "isoWeekYear": 2020, "month": 1 } },
            40525,
        ),
        (doc! { "$dateToParts": "x" }, 40524),
        (doc! { "$dateToParts": { "date": at, "x": 1 } }, 40520),
        (doc! { "$dateToParts": { "timezone": "UTC" } }, 40522),
        (doc! { "$dateFromString": [] }, 40540),
        (
            doc! { "$dateFromString": { "dateString": "x", "y": 1 } },
            40541,
        ),
        (doc! { "$dateFromString": { "format": "%Y" } }, 40542),
        (doc! { "$dateToString": 1 }, 18629),
        (doc! { "$dateToString": { "date": at, "x": 1 } }, 18534),
        (doc! { "$dateToString": { "format": "%Y" } }, 18628),
        (doc! { "$dateAdd": 1 }, 5166400),
        (
            doc! { "$dateSubtract": { "startDate": at, "unit": "day", "amount": 1, "x": 1 } },
            5166401,
        ),
        (
            doc! { "$dateAdd": { "startDate": at, "unit": "day" } },
            5166402,
        ),
        (doc! { "$dateDiff": 1 }, 5166301),
        (
            doc! { "$dateDiff": { "startDate": at, "endDate": at, "unit": "day", "x": 1 } },
            5166302,
        ),
        (
            doc! { "$dateDiff": { "endDate": at, "unit": "day" } },
            5166303,
        ),
        (
            doc! { "$dateDiff": { "startDate": at, "unit": "day" } },
            5166304,
        ),
        (
            doc! { "$dateDiff": { "startDate": at, "endDate": at } },
            5166305,
        ),
        (doc! { "$dateTrunc": "A" }, 5439007),
        (doc! { "$dateTrunc": { "endDate": 1 } }, 5439008),
        (doc! { "$dateTrunc": { "unit": "week" } }, 5439009),
        (doc! { "$dateTrunc": { "date": at } }, 5439010),
        // $convert answers FailedToParse for all three.
        (doc! { "$convert": 1 }, 9),
        (doc! { "$convert": { "input": 1, "to": "int", "x": 1 } }, 9),
        (doc! { "$convert": { "to": "int" } }, 9),
        // Strings.
        (doc! { "$trim": "x" }, 50696),
        (doc! { "$ltrim": { "input": "a", "x": 1 } }, 50694),
        (doc! { "$rtrim": { "chars": "a" } }, 50695),
        (doc! { "$regexMatch": "a" }, 51103),
        (
            doc! { "$regexFind": { "input": "a", "regex": "a", "x": 1 } },
            31024,
        ),
        (doc! { "$regexFindAll": { "regex": "a" } }, 31022),
        (doc! { "$regexMatch": { "input": "a" } }, 31023),
        (doc! { "$replaceOne": 1 }, 51751),
        (
            doc! { "$replaceAll": { "input": "a", "find": "a", "replacement": "b", "x": 1 } },
            51750,
        ),
        (
            doc! { "$replaceOne": { "find": "a", "replacement": "b" } },
            51749,
        ),
        (
            doc! { "$replaceAll": { "input": "a", "replacement": "b" } },
            51748,
        ),
        (doc! { "$replaceAll": { "input": "a", "find": "a" } }, 51747),
        // Arrays and objects.
        (doc! { "$sortArray": [] }, 2942500),
        (
            doc! { "$sortArray": { "input": [], "sortBy": 1, "x": 1 } },
            2942501,
        ),
        (doc! { "$sortArray": { "sortBy": 1 } }, 2942502),
        (doc! { "$sortArray": { "input": [] } }, 2942503),
        (doc! { "$sortArray": { "input": [], "sortBy": 2 } }, 2942506),
        (doc! { "$setField": 1 }, 4161100),
        (
            doc! { "$setField": { "field": "a", "input": {}, "value": 1, "x": 1 } },
            4161101,
        ),
        (doc! { "$setField": { "input": {}, "value": 1 } }, 4161102),
        (doc! { "$setField": { "field": "a", "input": {} } }, 4161103),
        (doc! { "$unsetField": { "field": "a" } }, 4161109),
        (
            doc! { "$setField": { "field": { "$concat": ["a"] }, "input": {}, "value": 1 } },
            4161106,
        ),
        (
            doc! { "$setField": { "field": 1, "input": {}, "value": 1 } },
            4161107,
        ),
        (
            doc! { "$unsetField": { "field": "$a", "input": {} } },
            4161108,
        ),
        (doc! { "$getField": { "field": "a", "x": 1 } }, 3041701),
        (doc! { "$getField": { "input": "$o" } }, 3041702),
        (doc! { "$getField": { "field": 1, "input": "$o" } }, 5654602),
        (doc! { "$getField": true }, 5654602),
    ]);
    // A `$literal` string is a constant field; a `$` name through `$literal` is allowed.
    for ok in [
        doc! { "$setField": { "field": { "$literal": "$a" }, "input": {}, "value": 1 } },
        doc! { "$getField": { "field": { "$literal": "$a" }, "input": "$o" } },
        doc! { "$dateFromParts": { "isoWeekYear": 2020, "isoWeek": 2 } },
        doc! { "$trim": { "input": null } },
    ] {
        assert_eq!(code(Bson::Document(ok.clone())), None, "{ok}");
    }
}

// mongod 8.0 (expression.cpp, makeConversionAlias): the `$to*` shorthands are `$convert` aliases
// whose parser counts the arguments itself and raises 50723, not the fixed-arity 16020.
#[test]
fn conversion_shorthand_argument_count() {
    for op in [
        "$toString",
        "$toObjectId",
        "$toDate",
        "$toDouble",
        "$toInt",
        "$toLong",
        "$toDecimal",
        "$toBool",
        "$toUUID",
    ] {
        let mut two = Document::new();
        two.insert(op, vec![Bson::Int32(1), Bson::Int32(2)]);
        let mut none = Document::new();
        none.insert(op, Vec::<Bson>::new());
        check(&[(two, 50723), (none, 50723)]);
    }
    // One argument, bare or wrapped in an array, is accepted.
    assert_eq!(code(Bson::Document(doc! { "$toInt": ["1"] })), None);
    assert_eq!(code(Bson::Document(doc! { "$toLong": "1" })), None);
}

// mongod 8.0 (createSortSpecObject): `sortBy` is a literal: a bad pattern document 2942505, a
// number other than 1/-1 2942506, any other type 2942507, all when the expression is parsed.
#[test]
fn sort_array_sort_by() {
    check(&[
        (
            doc! { "$sortArray": { "input": "$xs", "sortBy": {} } },
            2942505,
        ),
        (
            doc! { "$sortArray": { "input": "$xs", "sortBy": { "a": 2 } } },
            2942505,
        ),
        (
            doc! { "$sortArray": { "input": "$xs", "sortBy": { "a": "x" } } },
            2942505,
        ),
        (
            doc! { "$sortArray": { "input": "$xs", "sortBy": { "a..b": 1 } } },
            2942505,
        ),
        (
            doc! { "$sortArray": { "input": "$xs", "sortBy": 0.5 } },
            2942506,
        ),
        (
            doc! { "$sortArray": { "input": "$xs", "sortBy": "a" } },
            2942507,
        ),
        (
            doc! { "$sortArray": { "input": "$xs", "sortBy": "$o" } },
            2942507,
        ),
        (
            doc! { "$sortArray": { "input": "$xs", "sortBy": true } },
            2942507,
        ),
        (
            doc! { "$sortArray": { "input": "$xs", "sortBy": [1] } },
            2942507,
        ),
        // Read before the fields after it: the unknown field comes later.
        (
            doc! { "$sortArray": { "input": [], "sortBy": "a", "x": 1 } },
            2942507,
        ),
    ]);
    for ok in [
        doc! { "$sortArray": { "input": "$xs", "sortBy": -1 } },
        doc! { "$sortArray": { "input": "$xs", "sortBy": { "a.b": -1 } } },
    ] {
        assert_eq!(code(Bson::Document(ok.clone())), None, "{ok}");
    }
}

// mongod 8.0 (ConvertTargetTypeInfo::parse, computeTargetType): a `to` document contributes only
// `type` and `subtype`; a missing or null `type` is FailedToParse like any `to` that is neither a
// string nor a number; a null `subtype` is not defaulted and fails a binData target (4341108).
#[test]
fn convert_to_document() {
    check(&[
        (
            doc! { "$convert": { "input": 1, "to": { "subtype": 0 } } },
            9,
        ),
        (
            doc! { "$convert": { "input": 1, "to": { "type": null } } },
            9,
        ),
        (
            doc! { "$convert": { "input": 1, "to": { "type": true } } },
            9,
        ),
        (
            doc! { "$convert": { "input": 1, "to": { "type": { "a": 1 } } } },
            9,
        ),
        (
            doc! { "$convert": { "input": 1, "to": { "type": 1.5 } } },
            9,
        ),
        (
            doc! { "$convert": { "input": 1, "to": { "type": "nope" } } },
            2,
        ),
        (
            doc! { "$convert": { "input": "AA==", "to": { "type": "binData", "subtype": null }, "format": "base64" } },
            4341108,
        ),
        (
            doc! { "$convert": { "input": "AA==", "to": { "type": "binData", "subtype": "x" }, "format": "base64" } },
            4341108,
        ),
        // onError does not catch a bad `to`.
        (
            doc! { "$convert": { "input": 1, "to": {}, "onError": 0 } },
            9,
        ),
    ]);
    // Other fields of the `to` document are ignored.
    let raw = RawDocumentBuf::try_from(&doc! {}).expect("encodes");
    let e = Expr::parse(&Bson::Document(
        doc! { "$convert": { "input": "7", "to": { "type": "int", "x": 1 } } },
    ))
    .expect("parses");
    assert_eq!(
        e.evaluate_value(&raw).expect("evaluates"),
        Some(Bson::Int32(7))
    );
}
