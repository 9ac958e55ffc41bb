//! mongod's 64-bit hash of a BSON value, the key a `{field: "hashed"}` index stores (as an
//! int64), so keys and explain bounds read as mongod's do. Pure function, no state.
//!
//! The value is the first 8 bytes (little-endian) of an MD5 digest over: the seed (int32 0,
//! little-endian), then the value's canonical type (its sort-order bracket number, int32 LE),
//! then its body. Bodies: every number becomes an int64 (doubles truncated toward zero; NaN 0;
//! beyond the int64 range clamped, except that exactly 2^63 wraps to -2^63, an old quirk kept for
//! compatibility); null, undefined, MinKey and MaxKey have none; containers hash each element
//! as canonical type, field name with its NUL, body, and end with an end-of-object marker (type
//! 0, empty name); every other type hashes the bytes its BSON value occupies. Numbers that
//! compare equal therefore hash equal (1, 1L, 1.0), and so do 1.5 and 1, which is why a hashed
//! index only narrows an equality and the fetch re-checks.

use bson::RawBsonRef;
use bson::raw::RawDocument;
use md5::{Digest, Md5};

/// The seed mongod's hashed indexes use.
const SEED: i32 = 0;
/// Canonical type of the end-of-object marker (and of undefined).
const CANONICAL_EOO: i32 = 0;

/// mongod's hash of `value` with the default seed.
pub fn hash64(value: RawBsonRef<'_>) -> i64 {
    let mut md5 = Md5::new();
    md5.update(SEED.to_le_bytes());
    hash_into(&mut md5, value, None);
    let digest = md5.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_le_bytes(first)
}

/// `hash64` of an owned value (query bounds). A value the bson crate cannot serialize (a key
/// holding NUL, which no client can send) hashes as null.
pub fn hash64_bson(value: &bson::Bson) -> i64 {
    let holder = bson::doc! { "v": value.clone() };
    match bson::RawDocumentBuf::try_from(&holder) {
        Ok(raw) => hash64(raw.get("v").ok().flatten().unwrap_or(RawBsonRef::Null)),
        Err(_) => hash64(RawBsonRef::Null),
    }
}

/// mongod's sort-order bracket numbers, as the hash uses them.
fn canonical_type(value: RawBsonRef<'_>) -> i32 {
    match value {
        RawBsonRef::MinKey => -1,
        RawBsonRef::Undefined => 0,
        RawBsonRef::Null => 5,
        RawBsonRef::Double(_)
        | RawBsonRef::Int32(_)
        | RawBsonRef::Int64(_)
        | RawBsonRef::Decimal128(_) => 10,
        RawBsonRef::String(_) | RawBsonRef::Symbol(_) => 15,
        RawBsonRef::Document(_) => 20,
        RawBsonRef::Array(_) => 25,
        RawBsonRef::Binary(_) => 30,
        RawBsonRef::ObjectId(_) => 35,
        RawBsonRef::Boolean(_) => 40,
        RawBsonRef::DateTime(_) => 45,
        RawBsonRef::Timestamp(_) => 47,
        RawBsonRef::RegularExpression(_) => 50,
        RawBsonRef::DbPointer(_) => 55,
        RawBsonRef::JavaScriptCode(_) => 60,
        RawBsonRef::JavaScriptCodeWithScope(_) => 65,
        RawBsonRef::MaxKey => 127,
    }
}

fn hash_into(md5: &mut Md5, value: RawBsonRef<'_>, name: Option<&str>) {
    md5.update(canonical_type(value).to_le_bytes());
    if let Some(name) = name {
        md5.update(name.as_bytes());
        md5.update([0]);
    }
    match value {
        RawBsonRef::MinKey | RawBsonRef::MaxKey | RawBsonRef::Null | RawBsonRef::Undefined => {}
        RawBsonRef::Int32(v) => md5.update(i64::from(v).to_le_bytes()),
        RawBsonRef::Int64(v) => md5.update(v.to_le_bytes()),
        RawBsonRef::Double(v) => md5.update(double_as_i64(v).to_le_bytes()),
        RawBsonRef::Decimal128(d) => md5.update(decimal_as_i64(&d).to_le_bytes()),
        RawBsonRef::String(s) | RawBsonRef::Symbol(s) | RawBsonRef::JavaScriptCode(s) => {
            string_body(md5, s)
        }
        RawBsonRef::Document(doc) => object_body(md5, doc),
        RawBsonRef::Array(array) => {
            for (i, value) in array.into_iter().map_while(Result::ok).enumerate() {
                hash_into(md5, value, Some(&i.to_string()));
            }
            end_of_object(md5);
        }
        RawBsonRef::Binary(bin) => {
            // The BSON value: length, subtype, bytes (the old subtype 2 nests a second length).
            let old = u8::from(bin.subtype) == 2;
            let inner = bin.bytes.len() as u32;
            let outer = if old { inner + 4 } else { inner };
            md5.update(outer.to_le_bytes());
            md5.update([u8::from(bin.subtype)]);
            if old {
                md5.update(inner.to_le_bytes());
            }
            md5.update(bin.bytes);
        }
        RawBsonRef::ObjectId(oid) => md5.update(oid.bytes()),
        RawBsonRef::Boolean(b) => md5.update([u8::from(b)]),
        RawBsonRef::DateTime(d) => md5.update(d.timestamp_millis().to_le_bytes()),
        RawBsonRef::Timestamp(ts) => {
            md5.update(ts.increment.to_le_bytes());
            md5.update(ts.time.to_le_bytes());
        }
        RawBsonRef::RegularExpression(re) => {
            md5.update(re.pattern.as_str().as_bytes());
            md5.update([0]);
            md5.update(re.options.as_str().as_bytes());
            md5.update([0]);
        }
        RawBsonRef::DbPointer(p) => {
            // The raw value is a string (namespace) then the ObjectId; read it back from BSON.
            let holder = bson::rawdoc! { "p": RawBsonRef::DbPointer(p) };
            let bytes = holder.as_bytes();
            // Document header (4), type (1), "p\0" (2); value up to the trailing 0 of the doc.
            if bytes.len() > 8 {
                md5.update(&bytes[7..bytes.len() - 1]);
            }
        }
        RawBsonRef::JavaScriptCodeWithScope(cws) => {
            md5.update(cws.code.as_bytes());
            md5.update([0]);
            object_body(md5, cws.scope);
        }
    }
}

fn string_body(md5: &mut Md5, s: &str) {
    md5.update((s.len() as u32 + 1).to_le_bytes());
    md5.update(s.as_bytes());
    md5.update([0]);
}

fn object_body(md5: &mut Md5, doc: &RawDocument) {
    for (name, value) in doc.into_iter().map_while(Result::ok) {
        hash_into(md5, value, Some(name.as_str()));
    }
    end_of_object(md5);
}

fn end_of_object(md5: &mut Md5) {
    md5.update(CANONICAL_EOO.to_le_bytes());
    md5.update([0]);
}

/// 2^63 as a double: the one value that wraps instead of clamping.
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

fn double_as_i64(v: f64) -> i64 {
    if v.is_nan() {
        0
    } else if v == TWO_POW_63 {
        i64::MIN
    } else {
        // `as` truncates toward zero and saturates at both ends, as mongod's conversion does.
        v as i64
    }
}

/// Decimals convert through their value rounded half to even, clamped; NaN is 0.
fn decimal_as_i64(d: &bson::Decimal128) -> i64 {
    let Ok(v) = d.to_string().parse::<f64>() else {
        return 0;
    };
    if v.is_nan() {
        return 0;
    }
    v.round_ties_even() as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    fn hash_of(doc: &RawDocument) -> i64 {
        hash64(doc.get("v").unwrap().unwrap())
    }

    #[test]
    fn matches_mongod_self_check() {
        // mongod checks this value at start-up: hash of {check: 42}'s element.
        assert_eq!(hash_of(&rawdoc! { "v": 42 }), -944302157085130861);
    }

    #[test]
    fn equal_numbers_hash_equal() {
        let one = hash_of(&rawdoc! { "v": 1 });
        assert_eq!(one, hash_of(&rawdoc! { "v": 1i64 }));
        assert_eq!(one, hash_of(&rawdoc! { "v": 1.0 }));
        assert_eq!(one, hash_of(&rawdoc! { "v": 1.9 }), "doubles truncate");
        assert_ne!(one, hash_of(&rawdoc! { "v": "1" }));
        assert_eq!(
            hash_of(&rawdoc! { "v": f64::NAN }),
            hash_of(&rawdoc! { "v": 0 })
        );
        assert_eq!(
            hash_of(&rawdoc! { "v": TWO_POW_63 }),
            hash_of(&rawdoc! { "v": i64::MIN })
        );
        assert_eq!(
            hash_of(&rawdoc! { "v": 1e300 }),
            hash_of(&rawdoc! { "v": i64::MAX })
        );
    }

    #[test]
    fn containers_hash_their_names() {
        let a = hash_of(&rawdoc! { "v": { "a": 1 } });
        let b = hash_of(&rawdoc! { "v": { "b": 1 } });
        assert_ne!(a, b);
        assert_ne!(
            hash_of(&rawdoc! { "v": [1, 2] }),
            hash_of(&rawdoc! { "v": { "0": 1, "1": 2 } }),
            "arrays and objects differ by canonical type"
        );
        assert_ne!(hash64(RawBsonRef::Null), hash64(RawBsonRef::Undefined));
    }
}
