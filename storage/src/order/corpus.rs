//! A frozen corpus of edge values, one or more per type bracket, reused by every test that must
//! hold "for all values" (order laws here, key encoding, matcher, sort). Append only: tests
//! elsewhere may refer to the shape of this list.

use super::number::{decimal_infinity, decimal_nan, encode_decimal};
use bson::spec::BinarySubtype;
use bson::{
    Binary, Bson, DateTime, Decimal128, JavaScriptCodeWithScope, Regex, Timestamp, doc,
    oid::ObjectId,
};

fn dec(negative: bool, coefficient: u128, exponent: i32) -> Bson {
    Bson::Decimal128(Decimal128::from_bytes(encode_decimal(
        negative,
        coefficient,
        exponent,
    )))
}

fn bin(subtype: BinarySubtype, bytes: &[u8]) -> Bson {
    Bson::Binary(Binary {
        subtype,
        bytes: bytes.to_vec(),
    })
}

fn regex(pattern: &str, options: &str) -> Bson {
    match (pattern.try_into(), options.try_into()) {
        (Ok(pattern), Ok(options)) => Bson::RegularExpression(Regex { pattern, options }),
        _ => Bson::Null,
    }
}

/// Milliseconds of 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z.
const YEAR_0_MS: i64 = -62_167_219_200_000;
const YEAR_9999_END_MS: i64 = 253_402_300_799_999;

fn numbers() -> Vec<Bson> {
    let two53 = 1i64 << 53;
    vec![
        Bson::Double(f64::NAN),
        Bson::Decimal128(Decimal128::from_bytes(decimal_nan())),
        Bson::Double(f64::NEG_INFINITY),
        Bson::Decimal128(Decimal128::from_bytes(decimal_infinity(true))),
        dec(true, 9_999_999_999_999_999_999_999_999_999_999_999, 6111),
        Bson::Double(f64::MIN),
        Bson::Int64(i64::MIN),
        Bson::Int32(i32::MIN),
        Bson::Double(-1.5),
        Bson::Int32(-1),
        Bson::Double(-0.0),
        Bson::Double(0.0),
        Bson::Int32(0),
        Bson::Int64(0),
        dec(true, 0, 0),
        dec(false, 0, -6176),
        dec(false, 1, -6176),
        Bson::Double(5e-324),
        dec(false, 1, -1),
        Bson::Double(0.1),
        Bson::Double(0.5),
        Bson::Int32(1),
        Bson::Int64(1),
        Bson::Double(1.0),
        dec(false, 100, -2),
        dec(false, 15, -1),
        Bson::Int32(i32::MAX),
        Bson::Int64(two53 - 1),
        Bson::Int64(two53),
        Bson::Double(two53 as f64),
        Bson::Int64(two53 + 1),
        Bson::Double((two53 + 2) as f64),
        Bson::Int64(i64::MAX),
        Bson::Double(9_223_372_036_854_775_808.0),
        dec(false, 9_223_372_036_854_775_808, 0),
        Bson::Double(f64::MAX),
        dec(false, 9_999_999_999_999_999_999_999_999_999_999_999, 6111),
        Bson::Double(f64::INFINITY),
        Bson::Decimal128(Decimal128::from_bytes(decimal_infinity(false))),
    ]
}

fn strings_and_objects() -> Vec<Bson> {
    vec![
        Bson::String(String::new()),
        Bson::String("\0".into()),
        Bson::String("B".into()),
        Bson::String("a".into()),
        Bson::Symbol("a".into()),
        Bson::String("a\0b".into()),
        Bson::String("ab".into()),
        Bson::String("é".into()),
        Bson::String("日本".into()),
        Bson::String("\u{1F600}".into()),
        Bson::Document(doc! {}),
        Bson::Document(doc! {"a": Bson::Null}),
        Bson::Document(doc! {"a": 1}),
        Bson::Document(doc! {"a": 1.0}),
        Bson::Document(doc! {"a": 1, "b": 1}),
        Bson::Document(doc! {"b": 1}),
        Bson::Document(doc! {"a": "x"}),
        Bson::Document(doc! {"a": {"b": [1, 2]}}),
        Bson::Array(vec![]),
        Bson::Array(vec![Bson::Null]),
        Bson::Array(vec![Bson::Int32(1)]),
        Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)]),
        Bson::Array(vec![Bson::Int32(2)]),
        Bson::Array(vec![Bson::Document(doc! {"a": 1})]),
        Bson::Array(vec![Bson::Array(vec![])]),
        Bson::Array(vec![
            Bson::Array(vec![Bson::Int32(1)]),
            Bson::String("x".into()),
        ]),
    ]
}

fn others() -> Vec<Bson> {
    vec![
        bin(BinarySubtype::Generic, &[]),
        bin(BinarySubtype::UserDefined(0x80), &[]),
        bin(BinarySubtype::Generic, &[0]),
        bin(BinarySubtype::Generic, &[0xff]),
        bin(BinarySubtype::Generic, &[1u8; 16]),
        bin(BinarySubtype::Uuid, &[1u8; 16]),
        Bson::ObjectId(ObjectId::from_bytes([0; 12])),
        Bson::ObjectId(ObjectId::from_bytes([
            0x65, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
        ])),
        Bson::ObjectId(ObjectId::from_bytes([0xff; 12])),
        Bson::Boolean(false),
        Bson::Boolean(true),
        Bson::DateTime(DateTime::from_millis(i64::MIN)),
        Bson::DateTime(DateTime::from_millis(YEAR_0_MS)),
        Bson::DateTime(DateTime::from_millis(-1)),
        Bson::DateTime(DateTime::from_millis(0)),
        Bson::DateTime(DateTime::from_millis(YEAR_9999_END_MS)),
        Bson::DateTime(DateTime::from_millis(i64::MAX)),
        Bson::Timestamp(Timestamp {
            time: 0,
            increment: 0,
        }),
        Bson::Timestamp(Timestamp {
            time: 1,
            increment: 0,
        }),
        Bson::Timestamp(Timestamp {
            time: u32::MAX,
            increment: u32::MAX,
        }),
        regex("", ""),
        regex("a", ""),
        regex("a", "i"),
        regex("a.*b", "imsx"),
        Bson::JavaScriptCode(String::new()),
        Bson::JavaScriptCode("function() { return 1; }".into()),
        Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope {
            code: "x".into(),
            scope: doc! {"x": 1},
        }),
    ]
}

/// The edge-value corpus: every BSON type, numeric boundaries, nesting, odd strings. It is
/// listed in ascending mongod order (neighbours may be equal, e.g. `1`, `1L`, `1.0`).
pub fn corpus() -> Vec<Bson> {
    let mut all = vec![Bson::MinKey, Bson::Undefined, Bson::Null];
    all.extend(numbers());
    all.extend(strings_and_objects());
    all.extend(others());
    all.push(Bson::MaxKey);
    all
}
