//! The frozen corpus of edge values every differential case draws from. Frozen means: entries are
//! only ever appended, never reordered or changed, so a case's `_id`s and answers stay comparable
//! across versions of this tool. Each entry has a stable name used in case names.

use bson::{
    Binary, Bson, DateTime, Decimal128, Document, JavaScriptCodeWithScope, Regex, Timestamp, doc,
    oid::ObjectId, spec::BinarySubtype,
};

/// The ObjectIds the corpus itself uses; any other ObjectId in an answer was generated.
pub fn known_object_ids() -> Vec<ObjectId> {
    vec![fixed_oid(1), fixed_oid(2)]
}

fn fixed_oid(n: u8) -> ObjectId {
    ObjectId::from_bytes([0x65, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, n])
}

/// Milliseconds of 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z: the range ISO dates cover.
const DATE_YEAR_1_MS: i64 = -62_135_596_800_000;
const DATE_YEAR_9999_END_MS: i64 = 253_402_300_799_999;
/// 2^53: above it not every integer is an exact double.
const TWO_POW_53: i64 = 9_007_199_254_740_992;

fn dec(s: &str) -> Bson {
    // The literals below are valid; a parse failure is our bug, so fall back loudly to a string.
    s.parse::<Decimal128>()
        .map(Bson::Decimal128)
        .unwrap_or_else(|_| Bson::String(format!("bad decimal literal {s}")))
}

fn regex(pattern: &str, options: &str) -> Bson {
    match (pattern.try_into(), options.try_into()) {
        (Ok(pattern), Ok(options)) => Bson::RegularExpression(Regex { pattern, options }),
        _ => Bson::String(format!("bad regex literal {pattern}")),
    }
}

fn bin(subtype: BinarySubtype, bytes: &[u8]) -> Bson {
    Bson::Binary(Binary {
        subtype,
        bytes: bytes.to_vec(),
    })
}

/// `(name, value)` pairs; `None` stands for "field missing".
pub fn values() -> Vec<(&'static str, Option<Bson>)> {
    vec![
        ("missing", None),
        ("null", Some(Bson::Null)),
        ("int32_zero", Some(Bson::Int32(0))),
        ("int32_one", Some(Bson::Int32(1))),
        ("int32_minus_one", Some(Bson::Int32(-1))),
        ("int32_min", Some(Bson::Int32(i32::MIN))),
        ("int32_max", Some(Bson::Int32(i32::MAX))),
        ("int64_one", Some(Bson::Int64(1))),
        ("int64_min", Some(Bson::Int64(i64::MIN))),
        ("int64_max", Some(Bson::Int64(i64::MAX))),
        ("int64_2p53", Some(Bson::Int64(TWO_POW_53))),
        ("int64_2p53_plus_1", Some(Bson::Int64(TWO_POW_53 + 1))),
        (
            "int64_minus_2p53_minus_1",
            Some(Bson::Int64(-TWO_POW_53 - 1)),
        ),
        ("double_zero", Some(Bson::Double(0.0))),
        ("double_minus_zero", Some(Bson::Double(-0.0))),
        ("double_one", Some(Bson::Double(1.0))),
        ("double_one_half", Some(Bson::Double(1.5))),
        ("double_minus_one_half", Some(Bson::Double(-1.5))),
        ("double_2p53", Some(Bson::Double(TWO_POW_53 as f64))),
        ("double_nan", Some(Bson::Double(f64::NAN))),
        ("double_inf", Some(Bson::Double(f64::INFINITY))),
        ("double_minus_inf", Some(Bson::Double(f64::NEG_INFINITY))),
        ("double_max", Some(Bson::Double(f64::MAX))),
        ("double_min_subnormal", Some(Bson::Double(5e-324))),
        ("decimal_zero", Some(dec("0"))),
        ("decimal_minus_zero", Some(dec("-0"))),
        ("decimal_one", Some(dec("1.0"))),
        ("decimal_one_half", Some(dec("1.5"))),
        ("decimal_nan", Some(dec("NaN"))),
        ("decimal_inf", Some(dec("Infinity"))),
        (
            "decimal_big",
            Some(dec("9.999999999999999999999999999999999E+6144")),
        ),
        ("string_empty", Some(Bson::String(String::new()))),
        ("string_a", Some(Bson::String("a".into()))),
        ("string_upper_a", Some(Bson::String("A".into()))),
        ("string_ab", Some(Bson::String("ab".into()))),
        ("string_unicode", Some(Bson::String("é🐟".into()))),
        ("string_one", Some(Bson::String("1".into()))),
        ("doc_empty", Some(Bson::Document(Document::new()))),
        ("doc_a1", Some(Bson::Document(doc! {"a": 1}))),
        (
            "doc_nested_null",
            Some(Bson::Document(doc! {"a": {"b": null}})),
        ),
        ("array_empty", Some(Bson::Array(vec![]))),
        ("array_one", Some(Bson::Array(vec![Bson::Int32(1)]))),
        (
            "array_mixed",
            Some(Bson::Array(vec![Bson::Int32(2), "a".into(), Bson::Null])),
        ),
        ("array_nested", Some(bson::bson!([1, [2, [3]]]))),
        (
            "array_of_docs",
            Some(bson::bson!([{"a": 1}, {"a": 2, "b": "x"}])),
        ),
        ("array_of_empty", Some(bson::bson!([[]]))),
        ("binary_empty", Some(bin(BinarySubtype::Generic, &[]))),
        (
            "binary_bytes",
            Some(bin(BinarySubtype::Generic, &[0, 1, 255])),
        ),
        ("binary_uuid", Some(bin(BinarySubtype::Uuid, &[7; 16]))),
        (
            "binary_user",
            Some(bin(BinarySubtype::UserDefined(0x80), &[1])),
        ),
        ("object_id", Some(Bson::ObjectId(fixed_oid(1)))),
        ("bool_false", Some(Bson::Boolean(false))),
        ("bool_true", Some(Bson::Boolean(true))),
        ("date_epoch", Some(Bson::DateTime(DateTime::from_millis(0)))),
        (
            "date_before_epoch",
            Some(Bson::DateTime(DateTime::from_millis(-1))),
        ),
        (
            "date_year_1",
            Some(Bson::DateTime(DateTime::from_millis(DATE_YEAR_1_MS))),
        ),
        (
            "date_year_9999",
            Some(Bson::DateTime(DateTime::from_millis(DATE_YEAR_9999_END_MS))),
        ),
        (
            "date_min",
            Some(Bson::DateTime(DateTime::from_millis(i64::MIN))),
        ),
        (
            "date_max",
            Some(Bson::DateTime(DateTime::from_millis(i64::MAX))),
        ),
        (
            "timestamp_small",
            Some(Bson::Timestamp(Timestamp {
                time: 1,
                increment: 1,
            })),
        ),
        (
            "timestamp_max",
            Some(Bson::Timestamp(Timestamp {
                time: u32::MAX,
                increment: u32::MAX,
            })),
        ),
        ("regex", Some(regex("^a", "i"))),
        (
            "code",
            Some(Bson::JavaScriptCode("function() { return 1; }".into())),
        ),
        (
            "code_with_scope",
            Some(Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope {
                code: "x".into(),
                scope: doc! {"x": 1},
            })),
        ),
        ("symbol", Some(Bson::Symbol("sym".into()))),
        ("undefined", Some(Bson::Undefined)),
        ("min_key", Some(Bson::MinKey)),
        ("max_key", Some(Bson::MaxKey)),
    ]
}

/// One document per corpus value: `{_id: <index>, v: <value>}` (no `v` for "missing").
pub fn documents() -> Vec<Document> {
    values()
        .into_iter()
        .enumerate()
        .map(|(i, (_, v))| {
            let mut d = doc! {"_id": i as i32};
            if let Some(v) = v {
                d.insert("v", v);
            }
            d
        })
        .collect()
}

/// The values usable as query operands (all but "missing").
pub fn operands() -> Vec<(&'static str, Bson)> {
    values()
        .into_iter()
        .filter_map(|(n, v)| v.map(|v| (n, v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_literals_are_valid_and_names_unique() {
        let vals = values();
        let mut names: Vec<_> = vals.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), vals.len());
        for (name, v) in &vals {
            if let Some(Bson::String(s)) = v {
                assert!(!s.starts_with("bad "), "{name}: {s}");
            }
        }
        assert_eq!(documents().len(), vals.len());
    }
}
