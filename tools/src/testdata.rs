//! Test data shared by the unit tests and the end-to-end tests: one document holding every BSON
//! type with the edge values that break naive converters.

use bson::{
    Binary, Bson, DateTime, Decimal128, Document, JavaScriptCodeWithScope, Regex, Timestamp, doc,
    oid::ObjectId, spec::BinarySubtype,
};

/// One field of every BSON type (and subtype), with edge values.
pub fn every_type() -> Document {
    let cws = JavaScriptCodeWithScope {
        code: "function(){return x}".into(),
        scope: doc! { "x": 1, "b": { "z": 1, "a": 2 } },
    };
    let ptr = Bson::try_from(serde_json::json!({"$dbPointer": {"$ref": "db.c", "$id": {"$oid": "57e193d7a9cc81b4027498b5"}}}))
        .expect("dbpointer");
    let dec = |s: &str| s.parse::<Decimal128>().expect("decimal");
    let mut d = doc! {
        "_id": ObjectId::parse_str("57e193d7a9cc81b4027498b5").expect("oid"),
        "double": 1.5, "whole": 5.0, "negzero": -0.0, "tiny": 5e-324, "huge": 1.7976931348623157e308,
        "third": 1.0 / 3.0, "inf": f64::INFINITY, "ninf": f64::NEG_INFINITY, "nan": f64::NAN,
        "str": "h\u{e9}llo \"q\" \\ \n\t\u{1}", "doc": { "z": 1, "a": { "y": 2, "b": 3 } },
        "arr": [1, "two", { "three": 3 }, [4]], "empty_doc": {}, "empty_arr": [],
        "bin0": Binary { subtype: BinarySubtype::Generic, bytes: vec![0, 1, 2, 255] },
        "bin_empty": Binary { subtype: BinarySubtype::Generic, bytes: vec![] },
        "bin3": Binary { subtype: BinarySubtype::UuidOld, bytes: vec![7; 16] },
        "bin4": Binary { subtype: BinarySubtype::Uuid, bytes: vec![9; 16] },
        "bin80": Binary { subtype: BinarySubtype::UserDefined(0x80), bytes: vec![1] },
    };
    d.extend(doc! {
        "undef": Bson::Undefined, "t": true, "f": false,
        "date": DateTime::from_millis(1_600_000_000_123), "epoch": DateTime::from_millis(0),
        "pre1970": DateTime::from_millis(-86_400_001), "y10k": DateTime::from_millis(253_402_300_800_000),
        "min_date": DateTime::from_millis(i64::MIN), "null": Bson::Null,
        "regex": Regex { pattern: "^a\\.b/".try_into().expect("cs"), options: "imsx".try_into().expect("cs") },
        "ptr": ptr, "code": Bson::JavaScriptCode("1+1".into()), "sym": Bson::Symbol("s".into()),
        "cws": cws,
    });
    d.extend(doc! {
        "i32": 7, "i32min": i32::MIN, "i64": 7i64, "i64max": i64::MAX, "i64min": i64::MIN,
        "ts": Timestamp { time: 4_000_000_000, increment: 7 },
        "dec": dec("1.234567890123456789012345678901234E-6143"), "dec_nan": dec("NaN"),
        "dec_negzero": dec("-0.00"), "dec_inf": dec("-Infinity"), "dec_big": dec("9.999999999999999999999999999999999E+6144"),
        "minkey": Bson::MinKey, "maxkey": Bson::MaxKey,
    });
    d
}
