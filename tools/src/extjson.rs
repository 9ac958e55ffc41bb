//! Extended JSON v2, both ways, exact: every BSON value written in canonical mode reads back to
//! the same bytes, and so does every value written in relaxed mode except where relaxed mode is
//! lossy by definition (an int64 that fits in 32 bits reads back as an int32; NaN payload bits).
//!
//! Why not `bson`'s own `serde_json::Value` conversions: `serde_json::Map` sorts keys unless the
//! `preserve_order` feature is on workspace-wide, which would reorder fields. So JSON text is
//! parsed into [`Json`], an order-keeping tree, and converted here; output is written straight
//! to a `String`. Reading accepts the legacy forms mongoimport accepts (`{$date: <millis>}`,
//! `{$binary: "..", $type: ".."}`, `{$regex, $options}`); an object whose keys are not exactly a
//! wrapper's stays a plain document (so query operators such as `$gt` pass through).

use std::fmt::Write as _;

use base64::Engine as _;
use bson::{
    Binary, Bson, DateTime, Decimal128, Document, JavaScriptCodeWithScope, Regex, Timestamp,
    oid::ObjectId, spec::BinarySubtype,
};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A parsed JSON value with object keys in file order.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    /// Above `i64::MAX`: becomes a double, as in mongoimport.
    UInt(u64),
    Float(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(i64::try_from(v).map_or(Json::UInt(v), Json::Int))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Json, E> {
        Ok(Json::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Json, E> {
        Ok(Json::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element()? {
            items.push(v);
        }
        Ok(Json::Arr(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut fields = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Json>()? {
            fields.push((k, v));
        }
        Ok(Json::Obj(fields))
    }
}

/// Parse one JSON text (syntax errors carry serde_json's line and column).
pub fn parse(text: &str) -> Result<Json, serde_json::Error> {
    serde_json::from_str(text)
}

/// Parse JSON text that must be a document (an object) in Extended JSON.
pub fn parse_document(text: &str) -> Result<Document, String> {
    let json = parse(text).map_err(|e| e.to_string())?;
    to_document(json)
}

/// One JSON line to a document; a syntax error names its column (the caller names the line).
pub fn parse_line(text: &str) -> Result<Document, String> {
    match parse(text) {
        Ok(json) => to_document(json),
        Err(e) => {
            let msg = e.to_string();
            let what = msg.rfind(" at line ").map_or(msg.as_str(), |i| &msg[..i]);
            Err(format!("{what} at column {}", e.column()))
        }
    }
}

/// An Extended JSON object to a document; anything else is an error.
pub fn to_document(json: Json) -> Result<Document, String> {
    match to_bson(json)? {
        Bson::Document(d) => Ok(d),
        other => Err(format!("expected a document, found {}", type_name(&other))),
    }
}

fn type_name(b: &Bson) -> &'static str {
    match b {
        Bson::Array(_) => "an array",
        Bson::String(_) => "a string",
        Bson::Null => "null",
        Bson::Boolean(_) => "a boolean",
        _ => "a scalar value",
    }
}

/// Any Extended JSON value to BSON.
pub fn to_bson(json: Json) -> Result<Bson, String> {
    Ok(match json {
        Json::Null => Bson::Null,
        Json::Bool(b) => Bson::Boolean(b),
        Json::Int(i) => i32::try_from(i).map_or(Bson::Int64(i), Bson::Int32),
        Json::UInt(u) => Bson::Double(u as f64),
        Json::Float(f) => Bson::Double(f),
        Json::Str(s) => Bson::String(s),
        Json::Arr(items) => Bson::Array(items.into_iter().map(to_bson).collect::<Result<_, _>>()?),
        Json::Obj(fields) => {
            if fields.first().is_some_and(|(k, _)| k.starts_with('$'))
                && let Some(b) = wrapper(&fields)
            {
                return b;
            }
            let mut doc = Document::new();
            for (k, v) in fields {
                let v = to_bson(v).map_err(|e| format!("{k}: {e}"))?;
                doc.insert(k, v);
            }
            Bson::Document(doc)
        }
    })
}

fn str_of<'a>(j: &'a Json, what: &str) -> Result<&'a str, String> {
    match j {
        Json::Str(s) => Ok(s),
        _ => Err(format!("{what} must be a string")),
    }
}

fn field<'a>(fields: &'a [(String, Json)], name: &str) -> Option<&'a Json> {
    fields.iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

fn u32_of(j: Option<&Json>, what: &str) -> Result<u32, String> {
    match j {
        Some(Json::Int(i)) => u32::try_from(*i).map_err(|_| format!("{what} out of range")),
        _ => Err(format!("{what} must be an unsigned 32-bit integer")),
    }
}

/// The value of a type wrapper, or None when the keys are not exactly a wrapper's.
fn wrapper(fields: &[(String, Json)]) -> Option<Result<Bson, String>> {
    let mut keys: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort_unstable();
    let first = &fields[0].1;
    let get = |k: &str| field(fields, k);
    Some(match keys.as_slice() {
        ["$oid"] => str_of(first, "$oid").and_then(|s| {
            ObjectId::parse_str(s)
                .map(Bson::ObjectId)
                .map_err(|e| format!("bad $oid: {e}"))
        }),
        ["$symbol"] => str_of(first, "$symbol").map(|s| Bson::Symbol(s.to_owned())),
        ["$numberInt"] => str_of(first, "$numberInt").and_then(|s| {
            s.parse::<i32>()
                .map(Bson::Int32)
                .map_err(|_| format!("bad $numberInt {s:?}"))
        }),
        ["$numberLong"] => str_of(first, "$numberLong").and_then(|s| {
            s.parse::<i64>()
                .map(Bson::Int64)
                .map_err(|_| format!("bad $numberLong {s:?}"))
        }),
        ["$numberDouble"] => str_of(first, "$numberDouble")
            .and_then(parse_double)
            .map(Bson::Double),
        ["$numberDecimal"] => str_of(first, "$numberDecimal").and_then(|s| {
            s.parse::<Decimal128>()
                .map(Bson::Decimal128)
                .map_err(|e| format!("bad $numberDecimal {s:?}: {e}"))
        }),
        ["$binary"] => match first {
            Json::Obj(inner) => binary(field(inner, "base64"), field(inner, "subType")),
            _ => Err("$binary must be {base64, subType}".into()),
        },
        ["$binary", "$type"] => binary(get("$binary"), get("$type")),
        ["$uuid"] => str_of(first, "$uuid").and_then(|s| {
            bson::Uuid::parse_str(s)
                .map(|u| Bson::Binary(Binary::from_uuid(u)))
                .map_err(|e| format!("bad $uuid: {e}"))
        }),
        ["$code"] => str_of(first, "$code").map(|s| Bson::JavaScriptCode(s.to_owned())),
        ["$code", "$scope"] => code_with_scope(get("$code"), get("$scope")),
        ["$timestamp"] => match first {
            Json::Obj(inner) => (|| {
                Ok(Bson::Timestamp(Timestamp {
                    time: u32_of(field(inner, "t"), "$timestamp.t")?,
                    increment: u32_of(field(inner, "i"), "$timestamp.i")?,
                }))
            })(),
            _ => Err("$timestamp must be {t, i}".into()),
        },
        ["$regularExpression"] => match first {
            Json::Obj(inner) => regex(field(inner, "pattern"), field(inner, "options")),
            _ => Err("$regularExpression must be {pattern, options}".into()),
        },
        ["$options", "$regex"] if matches!(get("$regex"), Some(Json::Str(_))) => {
            regex(get("$regex"), get("$options"))
        }
        ["$date"] => date(first),
        ["$minKey"] if *first == Json::Int(1) => Ok(Bson::MinKey),
        ["$maxKey"] if *first == Json::Int(1) => Ok(Bson::MaxKey),
        ["$undefined"] if *first == Json::Bool(true) => Ok(Bson::Undefined),
        ["$dbPointer"] => db_pointer(first),
        _ => return None,
    })
}

fn parse_double(s: &str) -> Result<f64, String> {
    match s {
        "Infinity" => Ok(f64::INFINITY),
        "-Infinity" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        "-NaN" => Ok(-f64::NAN),
        // Rust's parser would also take "inf" or "nan"; the spec's strings are the ones above.
        _ if s
            .bytes()
            .any(|b| b.is_ascii_alphabetic() && b != b'e' && b != b'E') =>
        {
            Err(format!("bad $numberDouble {s:?}"))
        }
        _ => s.parse().map_err(|_| format!("bad $numberDouble {s:?}")),
    }
}

fn binary(b64: Option<&Json>, subtype: Option<&Json>) -> Result<Bson, String> {
    let b64 = str_of(b64.ok_or("$binary needs base64")?, "$binary.base64")?;
    let st = str_of(subtype.ok_or("$binary needs subType")?, "$binary.subType")?;
    let st = u8::from_str_radix(st, 16).map_err(|_| format!("bad binary subType {st:?}"))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| format!("bad base64: {e}"))?;
    Ok(Bson::Binary(Binary {
        subtype: BinarySubtype::from(st),
        bytes,
    }))
}

fn regex(pattern: Option<&Json>, options: Option<&Json>) -> Result<Bson, String> {
    let pattern = str_of(pattern.ok_or("regex needs a pattern")?, "regex pattern")?;
    let options = str_of(options.ok_or("regex needs options")?, "regex options")?;
    let cs =
        |s: &str| bson::raw::CString::try_from(s.to_owned()).map_err(|e| format!("bad regex: {e}"));
    Ok(Bson::RegularExpression(Regex {
        pattern: cs(pattern)?,
        options: cs(options)?,
    }))
}

fn code_with_scope(code: Option<&Json>, scope: Option<&Json>) -> Result<Bson, String> {
    let code = str_of(code.ok_or("$code missing")?, "$code")?;
    let scope = to_document(scope.cloned().ok_or("$scope missing")?)?;
    Ok(Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope {
        code: code.to_owned(),
        scope,
    }))
}

fn date(v: &Json) -> Result<Bson, String> {
    let ms = match v {
        Json::Str(s) => {
            return DateTime::parse_rfc3339_str(s)
                .map(Bson::DateTime)
                .map_err(|e| format!("bad $date {s:?}: {e}"));
        }
        Json::Int(ms) => *ms,
        Json::Obj(inner) => match inner.as_slice() {
            [(k, Json::Str(s))] if k == "$numberLong" => s
                .parse()
                .map_err(|_| format!("bad $date.$numberLong {s:?}"))?,
            _ => return Err("$date must be a string, a number or {$numberLong}".into()),
        },
        _ => return Err("$date must be a string, a number or {$numberLong}".into()),
    };
    Ok(Bson::DateTime(DateTime::from_millis(ms)))
}

fn db_pointer(v: &Json) -> Result<Bson, String> {
    let Json::Obj(inner) = v else {
        return Err("$dbPointer must be {$ref, $id}".into());
    };
    let ns = str_of(field(inner, "$ref").ok_or("$dbPointer needs $ref")?, "$ref")?;
    let Some(Bson::ObjectId(id)) = field(inner, "$id").cloned().map(to_bson).transpose()? else {
        return Err("$dbPointer.$id must be an $oid".into());
    };
    // DbPointer's fields are private in the bson crate; its own parser builds one.
    let value = serde_json::json!({ "$dbPointer": { "$ref": ns, "$id": { "$oid": id.to_hex() } } });
    Bson::try_from(value).map_err(|e| e.to_string())
}

/// Output mode: canonical keeps every type; relaxed writes numbers and recent dates plainly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    Canonical,
    Relaxed,
}

/// Write `doc` as one line (or indented when `pretty`).
pub fn write_document(out: &mut String, doc: &Document, mode: Mode, pretty: bool) {
    let indent = if pretty { Some(0) } else { None };
    write_doc(out, doc, mode, indent);
}

fn newline(out: &mut String, indent: Option<usize>) {
    if let Some(n) = indent {
        out.push('\n');
        for _ in 0..n {
            out.push_str("  ");
        }
    }
}

fn write_doc(out: &mut String, doc: &Document, mode: Mode, indent: Option<usize>) {
    out.push('{');
    let inner = indent.map(|n| n + 1);
    for (i, (k, v)) in doc.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        newline(out, inner);
        write_str(out, k);
        out.push(':');
        if indent.is_some() {
            out.push(' ');
        }
        write_value(out, v, mode, inner);
    }
    if !doc.is_empty() {
        newline(out, indent);
    }
    out.push('}');
}

fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `{"$key":"text"}`
fn wrap_str(out: &mut String, key: &str, text: &str) {
    out.push_str("{\"");
    out.push_str(key);
    out.push_str("\":");
    write_str(out, text);
    out.push('}');
}

/// Shortest text that parses back to exactly `f` ("1.0", "1e300", "-0.0").
fn double_text(f: f64) -> String {
    if f.is_nan() {
        // The spec has one NaN string; the sign survives, other payload bits do not.
        if f.is_sign_negative() { "-NaN" } else { "NaN" }.to_owned()
    } else if f.is_infinite() {
        if f < 0.0 { "-Infinity" } else { "Infinity" }.to_owned()
    } else {
        format!("{f:?}")
    }
}

fn write_value(out: &mut String, v: &Bson, mode: Mode, indent: Option<usize>) {
    let canonical = mode == Mode::Canonical;
    match v {
        Bson::Double(f) if !canonical && f.is_finite() => out.push_str(&double_text(*f)),
        Bson::Double(f) => wrap_str(out, "$numberDouble", &double_text(*f)),
        Bson::String(s) => write_str(out, s),
        Bson::Document(d) => write_doc(out, d, mode, indent),
        Bson::Array(items) => {
            out.push('[');
            let inner = indent.map(|n| n + 1);
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, inner);
                write_value(out, item, mode, inner);
            }
            if !items.is_empty() {
                newline(out, indent);
            }
            out.push(']');
        }
        Bson::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Bson::Null => out.push_str("null"),
        Bson::Int32(i) if canonical => wrap_str(out, "$numberInt", &i.to_string()),
        Bson::Int32(i) => {
            let _ = write!(out, "{i}");
        }
        Bson::Int64(i) if canonical => wrap_str(out, "$numberLong", &i.to_string()),
        Bson::Int64(i) => {
            let _ = write!(out, "{i}");
        }
        Bson::Decimal128(d) => wrap_str(out, "$numberDecimal", &d.to_string()),
        Bson::ObjectId(id) => wrap_str(out, "$oid", &id.to_hex()),
        Bson::Symbol(s) => wrap_str(out, "$symbol", s),
        Bson::JavaScriptCode(c) => wrap_str(out, "$code", c),
        Bson::JavaScriptCodeWithScope(cws) => {
            out.push_str("{\"$code\":");
            write_str(out, &cws.code);
            out.push_str(",\"$scope\":");
            write_doc(out, &cws.scope, mode, None);
            out.push('}');
        }
        Bson::Binary(b) => {
            out.push_str("{\"$binary\":{\"base64\":\"");
            out.push_str(&base64::engine::general_purpose::STANDARD.encode(&b.bytes));
            let _ = write!(out, "\",\"subType\":\"{:02x}\"}}}}", u8::from(b.subtype));
        }
        Bson::DateTime(d) => write_date(out, *d, canonical),
        Bson::Timestamp(ts) => {
            let _ = write!(
                out,
                "{{\"$timestamp\":{{\"t\":{},\"i\":{}}}}}",
                ts.time, ts.increment
            );
        }
        Bson::RegularExpression(re) => {
            out.push_str("{\"$regularExpression\":{\"pattern\":");
            write_str(out, re.pattern.as_str());
            out.push_str(",\"options\":");
            write_str(out, re.options.as_str());
            out.push_str("}}");
        }
        Bson::MinKey => out.push_str("{\"$minKey\":1}"),
        Bson::MaxKey => out.push_str("{\"$maxKey\":1}"),
        Bson::Undefined => out.push_str("{\"$undefined\":true}"),
        Bson::DbPointer(_) => out.push_str(&v.clone().into_canonical_extjson().to_string()),
    }
}

fn write_date(out: &mut String, d: DateTime, canonical: bool) {
    let ms = d.timestamp_millis();
    // Relaxed mode writes ISO-8601 only for years 1970..=9999, as the spec says.
    const YEAR_10000_MS: i64 = 253_402_300_800_000;
    if !canonical
        && (0..YEAR_10000_MS).contains(&ms)
        && let Ok(s) = d.try_to_rfc3339_string()
    {
        out.push_str("{\"$date\":");
        write_str(out, &s);
        out.push('}');
        return;
    }
    let _ = write!(out, "{{\"$date\":{{\"$numberLong\":\"{ms}\"}}}}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::every_type;
    use bson::RawDocumentBuf;

    fn bytes(d: &Document) -> Vec<u8> {
        RawDocumentBuf::try_from(d).expect("raw").into_bytes()
    }

    #[test]
    fn canonical_round_trip_is_byte_exact() {
        let d = every_type();
        for pretty in [false, true] {
            let mut s = String::new();
            write_document(&mut s, &d, Mode::Canonical, pretty);
            let back = parse_document(&s).expect("parse");
            assert_eq!(bytes(&back), bytes(&d), "{s}");
        }
    }

    #[test]
    fn relaxed_round_trip_is_exact_but_for_small_int64() {
        let mut d = every_type();
        let mut s = String::new();
        write_document(&mut s, &d, Mode::Relaxed, false);
        let back = parse_document(&s).expect("parse");
        // Relaxed mode writes int64 7 as plain 7, which reads as int32 by definition.
        assert_eq!(back.get("i64"), Some(&Bson::Int32(7)));
        d.insert("i64", 7);
        assert_eq!(bytes(&back), bytes(&d), "{s}");
        assert!(
            s.contains(r#""date":{"$date":"2020-09-13T12:26:40.123Z"}"#),
            "{s}"
        );
        assert!(
            s.contains(r#""pre1970":{"$date":{"$numberLong":"-86400001"}}"#),
            "{s}"
        );
        assert!(s.contains(r#""whole":5.0,"#), "{s}");
    }

    #[test]
    fn reads_legacy_forms_and_keeps_operators() {
        let d = parse_document(
            r#"{"d":{"$date":86400000},"b":{"$binary":"AQI=","$type":"05"},"r":{"$regex":"a","$options":"i"},
                "q":{"$gt":{"$numberLong":"5"}},"big":18446744073709551615,"u":{"$uuid":"00112233-4455-6677-8899-aabbccddeeff"}}"#,
        )
        .expect("parse");
        assert_eq!(
            d.get("d"),
            Some(&Bson::DateTime(DateTime::from_millis(86_400_000)))
        );
        assert!(
            matches!(d.get("b"), Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Md5 && b.bytes == [1, 2])
        );
        assert!(matches!(d.get("r"), Some(Bson::RegularExpression(_))));
        assert_eq!(
            d.get_document("q").expect("q").get("$gt"),
            Some(&Bson::Int64(5))
        );
        assert_eq!(d.get("big"), Some(&Bson::Double(18446744073709551615.0)));
        assert!(matches!(d.get("u"), Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Uuid));
    }

    #[test]
    fn malformed_wrappers_are_errors() {
        for bad in [
            r#"{"a":{"$oid":"zz"}}"#,
            r#"{"a":{"$numberInt":"1.5"}}"#,
            r#"{"a":{"$numberDouble":"inf"}}"#,
            r#"{"a":{"$binary":{"base64":"!!","subType":"00"}}}"#,
            r#"{"a":{"$date":"yesterday"}}"#,
            r#"{"a":{"$timestamp":{"t":-1,"i":0}}}"#,
            r#"[1]"#,
        ] {
            assert!(parse_document(bad).is_err(), "{bad}");
        }
    }
}
