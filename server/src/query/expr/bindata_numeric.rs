//! Numbers to and from binData in `$convert` (mongod 8.1), and binData in `$toInt`, `$toLong`
//! and `$toDouble`. The bytes are a two's-complement integer or an IEEE 754 float in
//! `byteOrder` ("little" unless given): an int reads 1, 2 or 4 bytes, a long 1, 2, 4 or 8, a
//! double 4 (single precision, widened) or 8; an int writes 4 bytes, a long and a double 8. Any
//! subtype converts. A length the target cannot read is ConversionFailure (which `onError`
//! catches); a bad `byteOrder` fails with its own code, past `onError`.

use super::args::{Value, is_nullish, type_name};
use crate::error::{CommandResult, ErrorCode, err};
use bson::spec::BinarySubtype;
use bson::{Binary, Bson};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ByteOrder {
    Little,
    Big,
}

/// `byteOrder`: absent or null is little-endian.
pub(super) fn parse_byte_order(v: &Value) -> CommandResult<ByteOrder> {
    if is_nullish(v) {
        return Ok(ByteOrder::Little);
    }
    match v {
        Some(Bson::String(s)) if s == "little" => Ok(ByteOrder::Little),
        Some(Bson::String(s)) if s == "big" => Ok(ByteOrder::Big),
        Some(Bson::String(s)) => Err(err(
            ErrorCode::Location9130002,
            format!("$convert's 'byteOrder' must be 'little' or 'big', not '{s}'"),
        )),
        other => Err(err(
            ErrorCode::Location9130001,
            format!(
                "$convert requires that 'byteOrder' be a string, found: {}",
                type_name(other)
            ),
        )),
    }
}

/// `bytes` in little-endian order (the order the readers below take).
fn little(bytes: &[u8], order: ByteOrder) -> Vec<u8> {
    let mut b = bytes.to_vec();
    if order == ByteOrder::Big {
        b.reverse();
    }
    b
}

/// A signed integer of 1, 2, 4 or 8 little-endian bytes.
fn read_int(b: &[u8]) -> Option<i64> {
    Some(match *b {
        [x] => i64::from(x as i8),
        [x, y] => i64::from(i16::from_le_bytes([x, y])),
        [a, b, c, d] => i64::from(i32::from_le_bytes([a, b, c, d])),
        _ => i64::from_le_bytes(b.try_into().ok()?),
    })
}

/// binData to `to` ("int", "long" or "double").
pub(super) fn to_number(b: &Binary, to: &str, order: ByteOrder) -> CommandResult<Bson> {
    let bytes = little(&b.bytes, order);
    let n = bytes.len();
    let out = match to {
        "int" if matches!(n, 1 | 2 | 4) => read_int(&bytes).map(|i| Bson::Int32(i as i32)),
        "long" if matches!(n, 1 | 2 | 4 | 8) => read_int(&bytes).map(Bson::Int64),
        "double" if n == 4 => bytes
            .try_into()
            .ok()
            .map(|a: [u8; 4]| Bson::Double(f64::from(f32::from_le_bytes(a)))),
        "double" if n == 8 => bytes
            .try_into()
            .ok()
            .map(|a: [u8; 8]| Bson::Double(f64::from_le_bytes(a))),
        _ => None,
    };
    out.ok_or_else(|| {
        err(
            ErrorCode::ConversionFailure,
            format!(
                "Failed to convert a BinData of {n} bytes to {to} in $convert with no onError value: the length must be {}",
                match to {
                    "int" => "1, 2 or 4",
                    "long" => "1, 2, 4 or 8",
                    _ => "4 or 8",
                }
            ),
        )
    })
}

/// An int, long or double to binData of `subtype`; `None` for any other input.
pub(super) fn from_number(v: &Bson, subtype: BinarySubtype, order: ByteOrder) -> Option<Bson> {
    let le = match v {
        Bson::Int32(i) => i.to_le_bytes().to_vec(),
        Bson::Int64(i) => i.to_le_bytes().to_vec(),
        Bson::Double(f) => f.to_le_bytes().to_vec(),
        _ => return None,
    };
    Some(Bson::Binary(Binary {
        subtype,
        bytes: little(&le, order),
    }))
}

#[cfg(test)]
mod tests {
    //! The cases of mongod's numeric BinData `$convert` suite (jstests/aggregation/expressions/
    //! convert_bindata_numeric.js), written out here.
    use super::super::Expr;
    use bson::spec::BinarySubtype;
    use bson::{Binary, Bson, Document, doc};

    fn bin(subtype: u8, hex: &str) -> Bson {
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        Bson::Binary(Binary {
            subtype: BinarySubtype::from(subtype),
            bytes,
        })
    }

    fn eval(spec: Document) -> Result<Option<Bson>, crate::error::CommandError> {
        let raw = bson::RawDocumentBuf::try_from(&doc! {}).unwrap();
        Expr::parse(&Bson::Document(spec))?.evaluate_value(&raw)
    }

    fn convert(
        input: Bson,
        to: Bson,
        order: &str,
    ) -> Result<Option<Bson>, crate::error::CommandError> {
        let input = doc! { "$literal": input };
        eval(doc! { "$convert": { "input": input, "to": to, "byteOrder": order } })
    }

    fn ok(input: Bson, to: Bson, order: &str) -> Bson {
        convert(input, to, order).unwrap().unwrap()
    }

    fn code(input: Bson, to: Bson, order: &str) -> i32 {
        convert(input, to, order).unwrap_err().code.code()
    }

    #[test]
    fn bindata_to_numbers() {
        assert_eq!(ok(bin(0, "0000002A"), "int".into(), "big"), Bson::Int32(42));
        assert_eq!(ok(bin(0, "FE89"), "int".into(), "big"), Bson::Int32(-375));
        assert_eq!(ok(bin(0, "02"), "int".into(), "little"), Bson::Int32(2));
        assert_eq!(
            ok(bin(0, "00000000000000C8"), "long".into(), "big"),
            Bson::Int64(200)
        );
        assert_eq!(
            ok(bin(0, "A2020000"), "long".into(), "little"),
            Bson::Int64(674)
        );
        assert_eq!(
            ok(bin(0, "C7CF"), "long".into(), "little"),
            Bson::Int64(-12345)
        );
        assert_eq!(ok(bin(0, "F4"), "long".into(), "big"), Bson::Int64(-12));
        assert_eq!(
            ok(bin(0, "C004000000000000"), "double".into(), "big"),
            Bson::Double(-2.5)
        );
        assert_eq!(
            ok(bin(0, "41533333"), "double".into(), "big"),
            Bson::Double(13.199999809265137)
        );
        assert_eq!(
            ok(bin(5, "000000000000E0BF"), "double".into(), "little"),
            Bson::Double(-0.5)
        );
        let nan = ok(bin(0, "0100807F"), "double".into(), "little");
        assert!(nan.as_f64().unwrap().is_nan());
        assert_eq!(
            ok(bin(0, "FFF0000000000000"), "double".into(), "big"),
            Bson::Double(f64::NEG_INFINITY)
        );
    }

    #[test]
    fn numbers_to_bindata() {
        assert_eq!(
            ok(Bson::Int32(-375), "binData".into(), "big"),
            bin(0, "FFFFFE89")
        );
        let to = Bson::Document(doc! { "type": "binData", "subtype": 4 });
        assert_eq!(ok(Bson::Int64(200), to, "big"), bin(4, "00000000000000C8"));
        assert_eq!(
            ok(Bson::Double(-2.5), "binData".into(), "big"),
            bin(0, "C004000000000000")
        );
        assert_eq!(
            ok(Bson::Double(813245678.98), "binData".into(), "big"),
            bin(0, "41C83C92777D70A4")
        );
        // Round trip, little-endian by default.
        let spec = doc! { "$convert": { "input": { "$convert": { "input": 7, "to": "binData" } }, "to": "int" } };
        assert_eq!(eval(spec).unwrap(), Some(Bson::Int32(7)));
    }

    #[test]
    fn failures_and_argument_errors() {
        let dec = Bson::Decimal128("1.5".parse().unwrap());
        assert_eq!(code(dec, "binData".into(), "big"), 241);
        assert_eq!(code(bin(0, "00000000000000C8"), "int".into(), "big"), 241);
        assert_eq!(code(bin(0, "0100807F00"), "double".into(), "little"), 241);
        assert_eq!(code(bin(0, "0000002A"), "int".into(), "weird"), 9130002);
        assert_eq!(code(Bson::Int64(200), "binData".into(), "silly"), 9130002);
        let spec = doc! { "$convert": { "input": 200, "to": "binData", "byteOrder": 1 } };
        assert_eq!(eval(spec).unwrap_err().code.code(), 9130001);
        // onError catches a wrong length, not a bad byteOrder.
        let caught = doc! { "$convert": {
            "input": { "$literal": bin(0, "0102030405") }, "to": "int", "onError": "bad"
        } };
        assert_eq!(eval(caught).unwrap(), Some(Bson::String("bad".into())));
    }

    #[test]
    fn shortcuts_read_little_endian() {
        let lit = |b: Bson| doc! { "$literal": b };
        assert_eq!(
            eval(doc! { "$toInt": lit(bin(0, "02")) }).unwrap(),
            Some(Bson::Int32(2))
        );
        assert_eq!(
            eval(doc! { "$toLong": lit(bin(6, "A2020000")) }).unwrap(),
            Some(Bson::Int64(674))
        );
        assert_eq!(
            eval(doc! { "$toDouble": lit(bin(0, "CDCCCCCCCCCC04C0")) }).unwrap(),
            Some(Bson::Double(-2.6))
        );
    }
}
