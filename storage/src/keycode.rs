//! Order-preserving byte encoding of BSON values for index keys: for any two values,
//! `storage::order::compare(a, b) == encode(a).cmp(&encode(b))` (plain byte comparison), and
//! values that compare equal (int32 5, int64 5, double 5.0, decimal128 5.00) encode to identical
//! bytes, which unique indexes rely on. Each value encoding is prefix-free, so a compound key is
//! the concatenation of its fields; a descending field has all of its bytes inverted (`!b`),
//! which reverses that field's order. A key stored in a B+tree ends with the RecordId as 8
//! big-endian bytes. This module must not depend on where keys are stored.
//!
//! Byte layout of one value (`T` = type byte; `~` marks bytes inverted for negative numbers):
//!
//! | BSON value              | T    | body                                                        |
//! |-------------------------|------|-------------------------------------------------------------|
//! | MinKey                  | 0x0A | —                                                           |
//! | undefined               | 0x0F | —  (mongod orders undefined below null)                     |
//! | null (and missing)      | 0x14 | —                                                           |
//! | number NaN              | 0x1E | —  (every NaN, double or decimal, is one value)             |
//! | number -inf             | 0x1F | —                                                           |
//! | number < 0              | 0x20 | ~exp10 (u16 BE, +0x8000) ~digit pairs ~0x00                 |
//! | number 0 (±0, 0E±n)     | 0x21 | —                                                           |
//! | number > 0              | 0x22 | exp10 (u16 BE, +0x8000) digit pairs 0x00                    |
//! | number +inf             | 0x23 | —                                                           |
//! | string, symbol          | 0x3C | bytes, 0x00 -> 0x01 0x01, 0x01 -> 0x01 0x02; then 0x00      |
//! | object                  | 0x46 | per field: bracket(value) name 0x00 value; then 0x00        |
//! | array                   | 0x50 | per element: value; then 0x00                               |
//! | binData                 | 0x5A | length (u32 BE) subtype (u8) bytes                          |
//! | ObjectId                | 0x64 | 12 bytes                                                    |
//! | false / true            | 0x6E / 0x6F | —                                                    |
//! | date                    | 0x78 | millis as i64 BE with the sign bit flipped                  |
//! | timestamp               | 0x82 | (time << 32 | increment) as u64 BE                          |
//! | regex                   | 0x8C | pattern 0x00 options 0x00                                   |
//! | DBPointer               | 0x96 | namespace length (u32 BE) namespace bytes ObjectId          |
//! | JavaScript              | 0xA0 | as string                                                   |
//! | JavaScript with scope   | 0xAA | code as string, then scope as object body                   |
//! | MaxKey                  | 0xF0 | —                                                           |
//!
//! Numbers: a finite non-zero value is `0.d1d2..dn × 10^exp10` exactly (doubles expanded to
//! their exact decimal value), no leading/trailing zero digit; digits are packed two per byte as
//! `10*a + b + 1` (a last odd digit `a` as `10*a + 1`), so byte order is digit order and 0x00 ends
//! the shorter of two digit strings first. `bracket(value)` in objects is the type byte of the
//! value's mongod type bracket (numbers 0x1E, bool 0x6E, others their T), because mongod compares
//! an object field's type bracket before its name and the name before the value.
//!
//! Decoding (`decode_key`) returns every type, with two losses: a number comes back as the
//! narrowest of int32/int64/double/decimal128 that holds its value (5.0 -> int32 5, -0.0 -> 0,
//! every NaN -> double NaN), and a symbol comes back as a string. All else decodes losslessly.

mod number;

use bson::raw::{RawArray, RawDocument};
use bson::{Bson, RawBsonRef};
use number::Canonical;

pub const TYPE_MIN_KEY: u8 = 0x0A;
pub const TYPE_UNDEFINED: u8 = 0x0F;
pub const TYPE_NULL: u8 = 0x14;
pub const TYPE_NUMBER_NAN: u8 = 0x1E;
pub const TYPE_NUMBER_NEG_INF: u8 = 0x1F;
pub const TYPE_NUMBER_NEG: u8 = 0x20;
pub const TYPE_NUMBER_ZERO: u8 = 0x21;
pub const TYPE_NUMBER_POS: u8 = 0x22;
pub const TYPE_NUMBER_POS_INF: u8 = 0x23;
pub const TYPE_STRING: u8 = 0x3C;
pub const TYPE_OBJECT: u8 = 0x46;
pub const TYPE_ARRAY: u8 = 0x50;
pub const TYPE_BINARY: u8 = 0x5A;
pub const TYPE_OBJECT_ID: u8 = 0x64;
pub const TYPE_FALSE: u8 = 0x6E;
pub const TYPE_TRUE: u8 = 0x6F;
pub const TYPE_DATE: u8 = 0x78;
pub const TYPE_TIMESTAMP: u8 = 0x82;
pub const TYPE_REGEX: u8 = 0x8C;
pub const TYPE_DB_POINTER: u8 = 0x96;
pub const TYPE_CODE: u8 = 0xA0;
pub const TYPE_CODE_WITH_SCOPE: u8 = 0xAA;
pub const TYPE_MAX_KEY: u8 = 0xF0;

/// Ends objects, arrays, strings and digit runs; below every type byte.
const END: u8 = 0x00;
/// Strings escape 0x00 as 0x01 0x01 and 0x01 as 0x01 0x02, so the terminator never occurs inside
/// a string body: the encoding stays prefix-free (needed for inverted, descending fields).
const ESCAPE: u8 = 0x01;
const EXPONENT_BIAS: i32 = 0x8000;
pub const RECORD_ID_SIZE: usize = 8;
const OBJECT_ID_SIZE: usize = 12;

/// Appends the encoding of one value.
pub fn encode_value(out: &mut Vec<u8>, value: RawBsonRef<'_>) {
    match value {
        RawBsonRef::MinKey => out.push(TYPE_MIN_KEY),
        RawBsonRef::Undefined => out.push(TYPE_UNDEFINED),
        RawBsonRef::Null => out.push(TYPE_NULL),
        RawBsonRef::Int32(v) => encode_integer(out, v < 0, u64::from(v.unsigned_abs())),
        RawBsonRef::Int64(v) => encode_integer(out, v < 0, v.unsigned_abs()),
        // Integral doubles below 2^64 convert to u64 exactly, so they share the fast path.
        RawBsonRef::Double(v) if v.fract() == 0.0 && v.abs() < TWO_POW_64 => {
            encode_integer(out, v < 0.0, v.abs() as u64)
        }
        RawBsonRef::Double(v) => encode_number(out, &number::from_f64(v)),
        RawBsonRef::Decimal128(v) => encode_number(out, &number::from_decimal128(v)),
        RawBsonRef::String(s) | RawBsonRef::Symbol(s) => {
            out.push(TYPE_STRING);
            encode_string(out, s.as_bytes());
        }
        RawBsonRef::Document(doc) => {
            out.push(TYPE_OBJECT);
            encode_object_body(out, doc);
        }
        RawBsonRef::Array(array) => encode_array(out, array),
        RawBsonRef::Binary(bin) => {
            out.push(TYPE_BINARY);
            // BSON caps a value at 16 MiB, far below u32::MAX.
            out.extend_from_slice(&(bin.bytes.len() as u32).to_be_bytes());
            out.push(u8::from(bin.subtype));
            out.extend_from_slice(bin.bytes);
        }
        RawBsonRef::ObjectId(oid) => {
            out.push(TYPE_OBJECT_ID);
            out.extend_from_slice(&oid.bytes());
        }
        RawBsonRef::Boolean(b) => out.push(if b { TYPE_TRUE } else { TYPE_FALSE }),
        RawBsonRef::DateTime(date) => {
            out.push(TYPE_DATE);
            let flipped = (date.timestamp_millis() as u64) ^ (1 << 63);
            out.extend_from_slice(&flipped.to_be_bytes());
        }
        RawBsonRef::Timestamp(ts) => {
            out.push(TYPE_TIMESTAMP);
            let combined = (u64::from(ts.time) << 32) | u64::from(ts.increment);
            out.extend_from_slice(&combined.to_be_bytes());
        }
        RawBsonRef::RegularExpression(regex) => {
            out.push(TYPE_REGEX);
            out.extend_from_slice(regex.pattern.as_str().as_bytes());
            out.push(END);
            out.extend_from_slice(regex.options.as_str().as_bytes());
            out.push(END);
        }
        RawBsonRef::DbPointer(_) => encode_db_pointer(out, value),
        RawBsonRef::JavaScriptCode(code) => {
            out.push(TYPE_CODE);
            encode_string(out, code.as_bytes());
        }
        RawBsonRef::JavaScriptCodeWithScope(cws) => {
            out.push(TYPE_CODE_WITH_SCOPE);
            encode_string(out, cws.code.as_bytes());
            encode_object_body(out, cws.scope);
        }
        RawBsonRef::MaxKey => out.push(TYPE_MAX_KEY),
    }
}

/// Appends the encoding of an owned value (query bounds, `min`/`max` arguments). A value the
/// bson crate cannot serialize (a key holding NUL, which no client can send) encodes as null.
pub fn encode_bson_value(out: &mut Vec<u8>, value: &Bson) {
    let holder = bson::doc! { "v": value.clone() };
    match bson::RawDocumentBuf::try_from(&holder) {
        Ok(raw) => encode_value(out, raw.get("v").ok().flatten().unwrap_or(RawBsonRef::Null)),
        Err(_) => out.push(TYPE_NULL),
    }
}

/// `encode_key` for owned values.
pub fn encode_bson_key(values: &[Bson], descending: &[bool]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, value) in values.iter().enumerate() {
        let start = out.len();
        encode_bson_value(&mut out, value);
        if descending.get(i).copied().unwrap_or(false) {
            invert(&mut out[start..]);
        }
    }
    out
}

/// Encodes a compound key; `descending[i]` inverts field `i` (missing entries are ascending).
pub fn encode_key(values: &[RawBsonRef<'_>], descending: &[bool]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 * values.len() + RECORD_ID_SIZE);
    for (i, value) in values.iter().enumerate() {
        let start = out.len();
        encode_value(&mut out, *value);
        if descending.get(i).copied().unwrap_or(false) {
            invert(&mut out[start..]);
        }
    }
    out
}

/// Inverts bytes in place: the encoding of the same field in descending order.
pub fn invert(bytes: &mut [u8]) {
    for b in bytes {
        *b = !*b;
    }
}

pub fn append_record_id(key: &mut Vec<u8>, record_id: u64) {
    key.extend_from_slice(&record_id.to_be_bytes());
}

/// Splits a stored key into its encoded values and RecordId; a key shorter than 8 bytes (never
/// written by `append_record_id`) yields RecordId 0 and the whole key.
pub fn split_record_id(key: &[u8]) -> (&[u8], u64) {
    let Some(cut) = key.len().checked_sub(RECORD_ID_SIZE) else {
        return (key, 0);
    };
    let mut id = [0u8; RECORD_ID_SIZE];
    id.copy_from_slice(&key[cut..]);
    (&key[..cut], u64::from_be_bytes(id))
}

/// The type byte of the value's type bracket, written before an object field's name.
fn bracket(value: RawBsonRef<'_>) -> u8 {
    match value {
        RawBsonRef::Int32(_)
        | RawBsonRef::Int64(_)
        | RawBsonRef::Double(_)
        | RawBsonRef::Decimal128(_) => TYPE_NUMBER_NAN,
        RawBsonRef::Boolean(_) => TYPE_FALSE,
        RawBsonRef::MinKey => TYPE_MIN_KEY,
        RawBsonRef::Undefined => TYPE_UNDEFINED,
        RawBsonRef::Null => TYPE_NULL,
        RawBsonRef::String(_) | RawBsonRef::Symbol(_) => TYPE_STRING,
        RawBsonRef::Document(_) => TYPE_OBJECT,
        RawBsonRef::Array(_) => TYPE_ARRAY,
        RawBsonRef::Binary(_) => TYPE_BINARY,
        RawBsonRef::ObjectId(_) => TYPE_OBJECT_ID,
        RawBsonRef::DateTime(_) => TYPE_DATE,
        RawBsonRef::Timestamp(_) => TYPE_TIMESTAMP,
        RawBsonRef::RegularExpression(_) => TYPE_REGEX,
        RawBsonRef::DbPointer(_) => TYPE_DB_POINTER,
        RawBsonRef::JavaScriptCode(_) => TYPE_CODE,
        RawBsonRef::JavaScriptCodeWithScope(_) => TYPE_CODE_WITH_SCOPE,
        RawBsonRef::MaxKey => TYPE_MAX_KEY,
    }
}

const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

/// The number layout for an integer, without the general path's allocations. Must produce the
/// same bytes as `encode_number` (the property tests compare both through `order`).
fn encode_integer(out: &mut Vec<u8>, negative: bool, magnitude: u64) {
    if magnitude == 0 {
        return out.push(TYPE_NUMBER_ZERO);
    }
    // Least significant digit first.
    let mut digits = [0u8; 20];
    let mut len = 0;
    let mut rest = magnitude;
    while rest > 0 {
        digits[len] = (rest % 10) as u8;
        rest /= 10;
        len += 1;
    }
    let lowest = digits.iter().position(|&d| d != 0).unwrap_or(0);
    out.push(if negative {
        TYPE_NUMBER_NEG
    } else {
        TYPE_NUMBER_POS
    });
    let start = out.len();
    out.extend_from_slice(&((len as i32 + EXPONENT_BIAS) as u16).to_be_bytes());
    let mut i = len;
    while i > lowest {
        let low = if i >= lowest + 2 { digits[i - 2] } else { 0 };
        out.push(digits[i - 1] * 10 + low + 1);
        i = i.saturating_sub(2);
    }
    out.push(END);
    if negative {
        invert(&mut out[start..]);
    }
}

fn encode_number(out: &mut Vec<u8>, number: &Canonical) {
    let (type_byte, magnitude) = match number {
        Canonical::NaN => return out.push(TYPE_NUMBER_NAN),
        Canonical::NegInf => return out.push(TYPE_NUMBER_NEG_INF),
        Canonical::Zero => return out.push(TYPE_NUMBER_ZERO),
        Canonical::PosInf => return out.push(TYPE_NUMBER_POS_INF),
        Canonical::Neg(m) => (TYPE_NUMBER_NEG, m),
        Canonical::Pos(m) => (TYPE_NUMBER_POS, m),
    };
    out.push(type_byte);
    let start = out.len();
    // exp10 lies in -6175..=6145 (decimal128) so the biased value fits a u16.
    let biased = (magnitude.exp10 + EXPONENT_BIAS) as u16;
    out.extend_from_slice(&biased.to_be_bytes());
    for pair in magnitude.digits.chunks(2) {
        let low = pair.get(1).copied().unwrap_or(0);
        out.push(pair[0] * 10 + low + 1);
    }
    out.push(END);
    if type_byte == TYPE_NUMBER_NEG {
        invert(&mut out[start..]);
    }
}

fn encode_string(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        if b <= ESCAPE {
            out.push(ESCAPE);
            out.push(b + 1);
        } else {
            out.push(b);
        }
    }
    out.push(END);
}

fn encode_object_body(out: &mut Vec<u8>, doc: &RawDocument) {
    for element in doc.iter_elements() {
        // Raw documents handed to the index layer were validated when they arrived; a malformed
        // element ends the body so that encoding never panics.
        let Ok(element) = element else { break };
        let Ok(value) = element.value() else { break };
        out.push(bracket(value));
        out.extend_from_slice(element.key().as_str().as_bytes());
        out.push(END);
        encode_value(out, value);
    }
    out.push(END);
}

fn encode_array(out: &mut Vec<u8>, array: &RawArray) {
    out.push(TYPE_ARRAY);
    for value in array {
        let Ok(value) = value else { break };
        encode_value(out, value);
    }
    out.push(END);
}

/// DBPointer's fields are private in the bson crate, so the namespace and id are read back from
/// the element's own BSON bytes: `[0x0C] "" 0x00 [i32 len] ns 0x00 [12-byte oid]`.
fn encode_db_pointer(out: &mut Vec<u8>, value: RawBsonRef<'_>) {
    let mut doc = bson::RawDocumentBuf::new();
    doc.append(bson::cstr!(""), value);
    let bytes = doc.as_bytes();
    // Layout: doc length (4), type (1), empty key terminator (1), string length (4).
    let ns_start = 4 + 1 + 1 + 4;
    let ns_end = bytes.len().saturating_sub(1 + OBJECT_ID_SIZE + 1);
    let namespace = bytes.get(ns_start..ns_end).unwrap_or(&[]);
    let oid = bytes
        .get(ns_end + 1..ns_end + 1 + OBJECT_ID_SIZE)
        .unwrap_or(&[]);
    out.push(TYPE_DB_POINTER);
    out.extend_from_slice(&(namespace.len() as u32).to_be_bytes());
    out.extend_from_slice(namespace);
    out.extend_from_slice(oid);
}

mod decode;
pub use decode::{KeycodeError, decode_key, decode_value};
