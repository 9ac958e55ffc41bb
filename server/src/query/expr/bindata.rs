//! The binData conversions mongod 8.0 added to `$convert` (and `$toString`, `$toUUID`): a
//! string to binData and back under a `format` (base64, base64url, hex, utf8, uuid; `auto`
//! when writing a string: a UUID for a 16-byte subtype-4 value, base64 otherwise), binData to
//! binData of the same subtype. A failed conversion is ConversionFailure (which `onError`
//! catches); a bad `format` or `subtype` argument fails with its own code, past `onError`.
//! Numbers to and from binData (`byteOrder`, 8.1) are `bindata_numeric`'s.

use super::args::{Value, is_nullish, type_name};
use crate::error::{CommandError, CommandResult, ErrorCode, err};
use crate::query::types;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bson::spec::BinarySubtype;
use bson::{Binary, Bson};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    Auto,
    Base64,
    Base64Url,
    Hex,
    Utf8,
    Uuid,
}

const UUID_SUBTYPE: u8 = 4;
const UUID_BYTES: usize = 16;

/// `format`: absent or null is none; otherwise one of mongod's names.
pub(super) fn parse_format(v: &Value) -> CommandResult<Option<Format>> {
    if is_nullish(v) {
        return Ok(None);
    }
    let Some(Bson::String(s)) = v else {
        let shown = v.as_ref().map(ToString::to_string).unwrap_or_default();
        return Err(err(
            ErrorCode::Location4341114,
            format!(
                "$convert requires that 'format' be a string, found: {} with value {shown}",
                type_name(v)
            ),
        ));
    };
    Ok(Some(match s.as_str() {
        "auto" => Format::Auto,
        "base64" => Format::Base64,
        "base64url" => Format::Base64Url,
        "hex" => Format::Hex,
        "utf8" => Format::Utf8,
        "uuid" => Format::Uuid,
        other => {
            return Err(err(
                ErrorCode::Location4341125,
                format!("Invalid 'format' argument for $convert: {other}"),
            ));
        }
    }))
}

/// The `format` a string <-> binData conversion needs (4341115 when it was not given).
pub(super) fn require_format(
    format: Option<Format>,
    from: &str,
    to: &str,
) -> CommandResult<Format> {
    format.ok_or_else(|| {
        // "speficied" is mongod's spelling.
        err(
            ErrorCode::Location4341115,
            format!("Format must be speficied when converting from '{from}' to '{to}'"),
        )
    })
}

/// `to.subtype`: an integral number naming a predefined (0-9) or user (128-255) subtype.
pub(super) fn subtype(v: &Bson) -> CommandResult<BinarySubtype> {
    if !types::is_number(v) {
        return Err(err(
            ErrorCode::Location4341108,
            format!(
                "For BinData, $convert's 'subtype' argument must be a number, but is {}",
                types::type_name(types::type_code(v))
            ),
        ));
    }
    let Some(code) = types::as_i64_exact(v) else {
        return Err(err(
            ErrorCode::Location4341106,
            "In $convert, numeric 'subtype' argument is not an integer",
        ));
    };
    match u8::try_from(code) {
        Ok(c) if c <= 9 || c >= 128 => Ok(BinarySubtype::from(c)),
        _ => Err(err(
            ErrorCode::Location4341107,
            format!(
                "In $convert, numeric value for 'subtype' does not correspond to a BinData type: {code}"
            ),
        )),
    }
}

fn failure(message: String) -> CommandError {
    err(ErrorCode::ConversionFailure, message)
}

/// A string to binData of `subtype`; the uuid format goes with the UUID subtype and only it.
pub(super) fn from_string(s: &str, format: Format, subtype: BinarySubtype) -> CommandResult<Bson> {
    let decoded = decode(s, format, subtype).map_err(|reason| {
        failure(format!(
            "Failed to parse BinData '{s}' in $convert with no onError value: {reason}"
        ))
    })?;
    Ok(Bson::Binary(Binary {
        subtype,
        bytes: decoded,
    }))
}

fn decode(s: &str, format: Format, subtype: BinarySubtype) -> Result<Vec<u8>, String> {
    let is_uuid_subtype = u8::from(subtype) == UUID_SUBTYPE;
    if (format == Format::Uuid) != is_uuid_subtype {
        return Err("Only the 'uuid' format is allowed with the UUID subtype".into());
    }
    match format {
        Format::Base64 => STANDARD.decode(s).map_err(|e| e.to_string()),
        Format::Base64Url => URL_SAFE_NO_PAD
            .decode(s.trim_end_matches('='))
            .map_err(|e| e.to_string()),
        Format::Hex => decode_hex(s),
        Format::Utf8 => Ok(s.as_bytes().to_vec()),
        Format::Uuid => parse_uuid(s),
        Format::Auto => Err("Invalid format 'auto'".into()),
    }
}

fn decode_hex(s: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) {
        return Err("Hex blob has an odd number of digits".into());
    }
    s.as_bytes()
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(|| format!("Invalid hexadecimal digits in '{s}'"))
        })
        .collect()
}

/// The canonical 8-4-4-4-12 form only, as mongod's `UUID::parse`.
fn parse_uuid(s: &str) -> Result<Vec<u8>, String> {
    let bad = || format!("Invalid UUID string: {s}");
    let groups: Vec<&str> = s.split('-').collect();
    let lengths: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    if lengths != [8, 4, 4, 4, 12] {
        return Err(bad());
    }
    let bytes = decode_hex(&groups.concat()).map_err(|_| bad())?;
    debug_assert_eq!(bytes.len(), UUID_BYTES);
    Ok(bytes)
}

/// binData as text in `format` (`$toString` uses `auto`).
pub(super) fn to_string(b: &Binary, format: Format) -> CommandResult<String> {
    let is_uuid = u8::from(b.subtype) == UUID_SUBTYPE && b.bytes.len() == UUID_BYTES;
    let encoded = match format {
        Format::Auto | Format::Uuid if is_uuid => Ok(crate::query::types::uuid_text(&b.bytes)),
        Format::Uuid => Err("BinData does not represent a valid UUID"),
        Format::Auto | Format::Base64 => Ok(STANDARD.encode(&b.bytes)),
        Format::Base64Url => Ok(URL_SAFE_NO_PAD.encode(&b.bytes)),
        Format::Hex => Ok(hex_upper(&b.bytes)),
        Format::Utf8 => String::from_utf8(b.bytes.clone())
            .map_err(|_| "BinData does not represent a valid UTF-8 string"),
    };
    encoded.map_err(|reason| {
        failure(format!(
            "Failed to convert 'BinData({}, {})' to string in $convert with no onError value: {reason}",
            u8::from(b.subtype),
            hex_upper(&b.bytes)
        ))
    })
}

fn hex_upper(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// binData to binData: only to its own subtype.
pub(super) fn to_bindata(b: &Binary, subtype: BinarySubtype) -> CommandResult<Bson> {
    if b.subtype != subtype {
        return Err(failure(
            "Conversions between different BinData subtypes are not supported".into(),
        ));
    }
    Ok(Bson::Binary(b.clone()))
}

/// `$toUUID`: a UUID string or a UUID binData to a UUID binData; null gives null.
pub(super) fn to_uuid(v: &Value) -> CommandResult<Value> {
    let uuid = BinarySubtype::from(UUID_SUBTYPE);
    Ok(Some(match v {
        _ if is_nullish(v) => Bson::Null,
        Some(Bson::String(s)) => from_string(s, Format::Uuid, uuid)?,
        Some(Bson::Binary(b)) => to_bindata(b, uuid)?,
        other => {
            return Err(failure(format!(
                "Unsupported conversion from {} to binData in $convert with no onError value",
                type_name(other)
            )));
        }
    }))
}

#[cfg(test)]
mod tests {
    //! The cases of mongod's own BinData `$convert` suite (jstests/aggregation/expressions/
    //! convert_bindata.js), each written out here.
    use super::super::Expr;
    use bson::spec::BinarySubtype;
    use bson::{Binary, Bson, Document, doc};

    const UUID: &str = "867dee52-c331-484e-92d1-c56479b8e67e";
    const B64: &str = "hn3uUsMxSE6S0cVkebjmfg==";

    fn bin(subtype: u8, b64: &str) -> Bson {
        use base64::Engine as _;
        Bson::Binary(Binary {
            subtype: BinarySubtype::from(subtype),
            bytes: base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
        })
    }

    fn eval(spec: Document) -> Result<Option<Bson>, crate::error::CommandError> {
        let root = doc! { "u": bin(4, B64), "g": bin(0, B64), "x": bin(255, B64) };
        let raw = bson::RawDocumentBuf::try_from(&root).unwrap();
        Expr::parse(&Bson::Document(spec))?.evaluate_value(&raw)
    }

    fn convert(
        input: Bson,
        to: Bson,
        format: Option<&str>,
    ) -> Result<Option<Bson>, crate::error::CommandError> {
        let mut spec = doc! { "input": input, "to": to };
        if let Some(f) = format {
            spec.insert("format", f);
        }
        eval(doc! { "$convert": spec })
    }

    fn ok(input: Bson, to: Bson, format: Option<&str>) -> Bson {
        convert(input, to, format).unwrap().unwrap()
    }

    fn code(input: Bson, to: Bson, format: Option<&str>) -> i32 {
        convert(input, to, format).unwrap_err().code.code()
    }

    #[test]
    fn strings_to_bindata() {
        let to = |subtype: i32| Bson::Document(doc! { "type": "binData", "subtype": subtype });
        assert_eq!(ok(UUID.into(), to(4), Some("uuid")), bin(4, B64));
        assert_eq!(ok(B64.into(), to(0), Some("base64")), bin(0, B64));
        assert_eq!(
            ok("hn3uUsMxSE6S0cVkebjmfg".into(), to(0), Some("base64url")),
            bin(0, B64)
        );
        assert_eq!(
            ok(
                "867DEE52C331484E92D1C56479B8E67E".into(),
                to(0),
                Some("hex")
            ),
            bin(0, B64)
        );
        assert_eq!(
            ok("🙂😎".into(), to(0), Some("utf8")),
            bin(0, "8J+ZgvCfmI4=")
        );
        // `to: "binData"` means subtype 0.
        assert_eq!(
            ok(B64.into(), "binData".into(), Some("base64")),
            bin(0, B64)
        );
    }

    #[test]
    fn bindata_to_strings() {
        assert_eq!(
            ok(bin(4, B64), "string".into(), Some("uuid")),
            Bson::String(UUID.into())
        );
        assert_eq!(
            ok(bin(4, B64), "string".into(), Some("auto")),
            Bson::String(UUID.into())
        );
        assert_eq!(
            ok(bin(0, B64), "string".into(), Some("auto")),
            Bson::String(B64.into())
        );
        assert_eq!(
            ok(bin(4, B64), "string".into(), Some("base64")),
            Bson::String(B64.into())
        );
        assert_eq!(
            ok(bin(0, B64), "string".into(), Some("base64url")),
            Bson::String("hn3uUsMxSE6S0cVkebjmfg".into())
        );
        assert_eq!(
            ok(bin(0, B64), "string".into(), Some("hex")),
            Bson::String("867DEE52C331484E92D1C56479B8E67E".into())
        );
        assert_eq!(
            ok(bin(0, "8J+ZgvCfmI4="), "string".into(), Some("utf8")),
            Bson::String("🙂😎".into())
        );
        assert_eq!(
            eval(doc! { "$toString": "$u" }).unwrap(),
            Some(Bson::String(UUID.into()))
        );
        assert_eq!(
            eval(doc! { "$toString": "$g" }).unwrap(),
            Some(Bson::String(B64.into()))
        );
    }

    #[test]
    fn identity_and_to_uuid() {
        let to = |subtype: i32| Bson::Document(doc! { "type": "binData", "subtype": subtype });
        assert_eq!(ok(bin(4, B64), to(4), None), bin(4, B64));
        assert_eq!(ok(bin(0, B64), to(0), None), bin(0, B64));
        assert_eq!(ok(bin(0, B64), "binData".into(), None), bin(0, B64));
        assert_eq!(eval(doc! { "$toUUID": UUID }).unwrap(), Some(bin(4, B64)));
        assert_eq!(eval(doc! { "$toUUID": "$u" }).unwrap(), Some(bin(4, B64)));
        assert_eq!(
            eval(doc! { "$toUUID": "$missing" }).unwrap(),
            Some(Bson::Null)
        );
        assert_eq!(
            eval(doc! { "$toUUID": "not-a-uuid" })
                .unwrap_err()
                .code
                .code(),
            241
        );
        assert_eq!(eval(doc! { "$toUUID": 1 }).unwrap_err().code.code(), 241);
    }

    #[test]
    fn illegal_conversions_fail_with_241_and_take_on_error() {
        let to = |subtype: i32| Bson::Document(doc! { "type": "binData", "subtype": subtype });
        let oid =
            Bson::ObjectId(bson::oid::ObjectId::parse_str("0123456789abcdef01234567").unwrap());
        let cases: Vec<(Bson, Bson, Option<&str>)> = vec![
            (oid.clone(), to(4), None),
            (oid, to(0), None),
            (UUID.into(), to(0), Some("uuid")),
            ("867dee--52-c331-484e-".into(), to(4), Some("uuid")),
            ("867dee--52-c331-484e-".into(), to(0), Some("base64")),
            ("867dee--52-c331-484e-".into(), to(0), Some("base64url")),
            ("867dee--52-c331-484e-zx".into(), to(0), Some("hex")),
            (UUID.into(), to(0), Some("auto")),
            (B64.into(), to(4), Some("base64")),
            (B64.into(), to(4), Some("auto")),
            (bin(4, B64), to(0), None),
            (bin(0, B64), to(4), None),
            (bin(4, B64), to(255), None),
            (bin(255, B64), to(0), None),
            (bin(0, "/w=="), "string".into(), Some("utf8")),
            (bin(0, B64), "string".into(), Some("uuid")),
        ];
        for (input, target, format) in cases {
            let shown = format!("{input} -> {target} ({format:?})");
            assert_eq!(code(input.clone(), target.clone(), format), 241, "{shown}");
            let mut spec = doc! { "input": input, "to": target, "onError": "ERROR" };
            if let Some(f) = format {
                spec.insert("format", f);
            }
            assert_eq!(
                eval(doc! { "$convert": spec }).unwrap(),
                Some(Bson::String("ERROR".into())),
                "{shown}"
            );
        }
    }

    #[test]
    fn bad_arguments_fail_past_on_error() {
        let with = |to: Bson, format: Bson| {
            let spec = doc! { "input": B64, "to": to, "format": format, "onError": null };
            eval(doc! { "$convert": spec }).unwrap_err().code.code()
        };
        let to = |subtype: Bson| Bson::Document(doc! { "type": "binData", "subtype": subtype });
        for bad in [-1, 1000, 256, 127] {
            assert_eq!(
                with(to(bad.into()), "base64".into()),
                4341107,
                "subtype {bad}"
            );
        }
        assert_eq!(with(to(1.5.into()), "base64".into()), 4341106);
        assert_eq!(with(to("0".into()), "base64".into()), 4341108);
        assert_eq!(with(to(0.into()), 1.into()), 4341114);
        assert_eq!(with(to(0.into()), "base32".into()), 4341125);
        assert_eq!(with((-2).into(), "base64".into()), 9);
        assert_eq!(
            with(Bson::Document(doc! { "type": -2 }), "base64".into()),
            9
        );
        assert_eq!(with(1.5.into(), "base64".into()), 9);
        assert_eq!(with("nope".into(), "base64".into()), 2);
        // string <-> binData needs a format.
        assert_eq!(code(B64.into(), to(0.into()), None), 4341115);
        assert_eq!(code(bin(0, B64), "string".into(), None), 4341115);
    }

    #[test]
    fn nulls() {
        assert_eq!(
            eval(doc! { "$convert": { "input": null, "to": null, "onNull": "NULL" } }).unwrap(),
            Some(Bson::String("NULL".into()))
        );
        assert_eq!(
            eval(doc! { "$convert": { "input": "$g", "to": null } }).unwrap(),
            Some(Bson::Null)
        );
    }
}
