//! BSON type codes and names as the query language spells them: `$type` operands, the `$type`
//! expression, and type names in error messages; and the small value coercions every layer
//! shares (numbers as f64/i64, mongod's truthiness of command arguments and of expressions).

use bson::{Bson, RawBsonRef};

/// A UUID's 16 bytes as 8-4-4-4-12 lower-case hex (other lengths: plain hex).
pub fn uuid_text(bytes: &[u8]) -> String {
    // Every request with a session names it: written digit by digit, not through `format!`.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let uuid = bytes.len() == 16;
    let mut out = String::with_capacity(bytes.len() * 2 + 4);
    for (i, b) in bytes.iter().enumerate() {
        if uuid && matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// The `$type` number of a value: the BSON element type byte, with MinKey as -1.
pub fn type_code_raw(v: RawBsonRef<'_>) -> i32 {
    match v {
        RawBsonRef::MinKey => -1,
        other => i32::from(other.element_type() as u8),
    }
}

/// The `$type` number of an owned value.
pub fn type_code(v: &Bson) -> i32 {
    match v {
        Bson::MinKey => -1,
        other => i32::from(other.element_type() as u8),
    }
}

/// `(alias, code)` pairs mongod accepts for `$type`.
const TYPE_ALIASES: &[(&str, i32)] = &[
    ("double", 1),
    ("string", 2),
    ("object", 3),
    ("array", 4),
    ("binData", 5),
    ("undefined", 6),
    ("objectId", 7),
    ("bool", 8),
    ("date", 9),
    ("null", 10),
    ("regex", 11),
    ("dbPointer", 12),
    ("javascript", 13),
    ("symbol", 14),
    ("javascriptWithScope", 15),
    ("int", 16),
    ("timestamp", 17),
    ("long", 18),
    ("decimal", 19),
    ("minKey", -1),
    ("maxKey", 127),
];

/// The code behind a type alias ("number" is handled by the caller: it names four codes).
pub fn code_for_alias(alias: &str) -> Option<i32> {
    TYPE_ALIASES
        .iter()
        .find(|(name, _)| *name == alias)
        .map(|(_, c)| *c)
}

/// True for a code mongod knows.
pub fn is_valid_code(code: i32) -> bool {
    TYPE_ALIASES.iter().any(|(_, c)| *c == code)
}

/// mongod's name of a type code ("double", "objectId", ...); "missing" for absent values.
pub fn type_name(code: i32) -> &'static str {
    TYPE_ALIASES
        .iter()
        .find(|(_, c)| *c == code)
        .map(|(n, _)| *n)
        .unwrap_or("missing")
}

/// The numeric type codes: double, int, long, decimal.
pub const NUMBER_CODES: [i32; 4] = [1, 16, 18, 19];

pub fn is_number(v: &Bson) -> bool {
    matches!(
        v,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
    )
}

/// Converts a raw value to an owned one; invalid nested bytes become Null.
pub fn to_owned(v: RawBsonRef<'_>) -> Bson {
    Bson::try_from(bson::RawBson::from(v)).unwrap_or(Bson::Null)
}

/// A decimal128 as the nearest double (for arithmetic and integral checks, not for ordering).
pub fn decimal_to_f64(d: bson::Decimal128) -> f64 {
    use storage::order::number::{Decimal, decode_decimal};
    match decode_decimal(d.bytes()) {
        Decimal::NaN => f64::NAN,
        Decimal::Infinity { negative: true } => f64::NEG_INFINITY,
        Decimal::Infinity { negative: false } => f64::INFINITY,
        Decimal::Finite {
            negative,
            coefficient,
            exponent,
        } => {
            // Parsing the decimal text is the simplest correctly rounded conversion.
            let text = format!(
                "{}{coefficient}e{exponent}",
                if negative { "-" } else { "" }
            );
            text.parse().unwrap_or(f64::NAN)
        }
    }
}

/// A numeric value as a double.
pub fn as_f64(v: &Bson) -> Option<f64> {
    match v {
        Bson::Int32(i) => Some(f64::from(*i)),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        Bson::Decimal128(d) => Some(decimal_to_f64(*d)),
        _ => None,
    }
}

/// A numeric value as an i64 when it is integral and in range.
pub fn as_i64_exact(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        _ => f64_to_i64_exact(as_f64(v)?),
    }
}

/// `d` as an i64 when it is integral and within range.
pub fn f64_to_i64_exact(d: f64) -> Option<i64> {
    // 2^63 is exactly representable; anything at or above it does not fit.
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    if d.fract() == 0.0 && (-TWO_POW_63..TWO_POW_63).contains(&d) {
        Some(d as i64)
    } else {
        None
    }
}

/// The raw counterpart of [`as_f64`].
pub fn raw_as_f64(v: RawBsonRef<'_>) -> Option<f64> {
    match v {
        RawBsonRef::Int32(i) => Some(f64::from(i)),
        RawBsonRef::Int64(i) => Some(i as f64),
        RawBsonRef::Double(d) => Some(d),
        RawBsonRef::Decimal128(d) => Some(decimal_to_f64(d)),
        _ => None,
    }
}

/// Truthiness as the aggregation language defines it: false, null, undefined, missing and
/// numeric zero are false; everything else is true.
pub fn is_truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Null | Bson::Undefined => false,
        Bson::Int32(i) => *i != 0,
        Bson::Int64(i) => *i != 0,
        Bson::Double(d) => *d != 0.0,
        Bson::Decimal128(_) => as_f64(v).is_some_and(|d| d != 0.0),
        _ => true,
    }
}

/// Read a field as an integer the way mongod's `parseNumber` does (int32, int64 or integral double).
pub fn as_i64(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(*i as i64),
        Bson::Int64(i) => Some(*i),
        Bson::Double(f) if f.fract() == 0.0 && f.is_finite() => Some(*f as i64),
        _ => None,
    }
}

/// mongod's truthiness for command arguments (`{nameOnly: 1}` is true).
pub fn truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Int32(i) => *i != 0,
        Bson::Int64(i) => *i != 0,
        Bson::Double(f) => *f != 0.0,
        Bson::Null | Bson::Undefined => false,
        _ => true,
    }
}

#[cfg(test)]
mod uuid_text_tests {
    use super::uuid_text;

    #[test]
    fn uuids_are_8_4_4_4_12_and_other_lengths_plain_hex() {
        let bytes: Vec<u8> = (0u8..16).map(|i| i * 17).collect();
        assert_eq!(uuid_text(&bytes), "00112233-4455-6677-8899-aabbccddeeff");
        assert_eq!(uuid_text(&[0xab, 0x01]), "ab01");
        assert_eq!(uuid_text(&[]), "");
    }
}
