//! CSV and TSV: mongoimport's field lists (`--fields a,b.c`, `--fieldFile`, `--headerline`),
//! typed columns (`name.int32()` with `--columnsHaveTypes`), rows to documents (dotted names
//! make subdocuments), and documents back to cells for export.
//!
//! Typed columns accepted: auto, string, int32, int64, double, decimal, boolean,
//! binary(base64|hex), date/date_go/date_ms/date_oracle. Dates must be RFC 3339 whatever layout
//! argument is given (mongoimport's Go/MS/Oracle layouts are not interpreted).

use base64::Engine as _;
use bson::{Binary, Bson, DateTime, Decimal128, Document, spec::BinarySubtype};

use crate::extjson;

/// One column: its (dotted) name and how its cells become values.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Auto,
    String,
    Int32,
    Int64,
    Double,
    Decimal,
    Boolean,
    Date,
    BinaryBase64,
    BinaryHex,
}

/// Parse one field spec; with `typed` the name must end in `.type(arg)`.
pub fn parse_field(spec: &str, typed: bool) -> Result<Field, String> {
    let spec = spec.trim();
    if spec.is_empty() {
        return Err("empty field name".into());
    }
    if !typed {
        return Ok(Field {
            name: spec.to_owned(),
            kind: Kind::Auto,
        });
    }
    let bad = || format!("field {spec:?} has no type (expected name.type(), e.g. age.int32())");
    let open = spec.rfind('(').ok_or_else(bad)?;
    if !spec.ends_with(')') {
        return Err(bad());
    }
    let dot = spec[..open].rfind('.').ok_or_else(bad)?;
    let (name, ty, arg) = (
        &spec[..dot],
        &spec[dot + 1..open],
        &spec[open + 1..spec.len() - 1],
    );
    let kind = match ty {
        "auto" => Kind::Auto,
        "string" => Kind::String,
        "int32" => Kind::Int32,
        "int64" => Kind::Int64,
        "double" => Kind::Double,
        "decimal" => Kind::Decimal,
        "boolean" => Kind::Boolean,
        "date" | "date_go" | "date_ms" | "date_oracle" => Kind::Date,
        "binary" => match arg {
            "base64" => Kind::BinaryBase64,
            "hex" => Kind::BinaryHex,
            _ => {
                return Err(format!(
                    "field {spec:?}: binary encoding must be base64 or hex"
                ));
            }
        },
        _ => return Err(format!("field {spec:?}: unknown type {ty:?}")),
    };
    Ok(Field {
        name: name.to_owned(),
        kind,
    })
}

/// A comma-separated `--fields` list.
pub fn parse_fields(list: &str, typed: bool) -> Result<Vec<Field>, String> {
    list.split(',').map(|s| parse_field(s, typed)).collect()
}

/// One cell to a value.
pub fn cell(kind: Kind, text: &str) -> Result<Bson, String> {
    let bad = |ty: &str| format!("{text:?} is not a valid {ty}");
    Ok(match kind {
        Kind::Auto => auto(text),
        Kind::String => Bson::String(text.to_owned()),
        Kind::Int32 => Bson::Int32(text.trim().parse().map_err(|_| bad("int32"))?),
        Kind::Int64 => Bson::Int64(text.trim().parse().map_err(|_| bad("int64"))?),
        Kind::Double => Bson::Double(text.trim().parse().map_err(|_| bad("double"))?),
        Kind::Decimal => Bson::Decimal128(
            text.trim()
                .parse::<Decimal128>()
                .map_err(|_| bad("decimal"))?,
        ),
        Kind::Boolean => match text.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "t" => Bson::Boolean(true),
            "false" | "0" | "f" | "" => Bson::Boolean(false),
            _ => return Err(bad("boolean")),
        },
        Kind::Date => Bson::DateTime(
            DateTime::parse_rfc3339_str(text.trim()).map_err(|_| bad("RFC 3339 date"))?,
        ),
        Kind::BinaryBase64 => binary(
            base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .map_err(|_| bad("base64 value"))?,
        ),
        Kind::BinaryHex => binary(hex(text.trim()).ok_or_else(|| bad("hex value"))?),
    })
}

fn binary(bytes: Vec<u8>) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    })
}

fn hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Untyped cells: integers that fit become int32 or int64, other numbers doubles, the rest
/// strings (as mongoimport).
fn auto(text: &str) -> Bson {
    if let Ok(i) = text.parse::<i64>() {
        return i32::try_from(i).map_or(Bson::Int64(i), Bson::Int32);
    }
    let numeric = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'));
    match text.parse::<f64>() {
        Ok(f) if numeric => Bson::Double(f),
        _ => Bson::String(text.to_owned()),
    }
}

/// Put `value` at a dotted path, making subdocuments as needed.
pub fn set_path(doc: &mut Document, path: &str, value: Bson) -> Result<(), String> {
    match path.split_once('.') {
        None => {
            doc.insert(path, value);
            Ok(())
        }
        Some((head, rest)) => {
            let sub = doc
                .entry(head.to_owned())
                .or_insert_with(|| Bson::Document(Document::new()));
            match sub {
                Bson::Document(d) => set_path(d, rest, value),
                _ => Err(format!(
                    "field {head:?} is both a value and a parent of {rest:?}"
                )),
            }
        }
    }
}

/// One row to a document; a row with a different number of cells than fields is an error.
pub fn row(
    fields: &[Field],
    cells: &csv::StringRecord,
    ignore_blanks: bool,
) -> Result<Document, String> {
    if cells.len() != fields.len() {
        return Err(format!(
            "{} values for {} fields",
            cells.len(),
            fields.len()
        ));
    }
    let mut doc = Document::new();
    for (f, text) in fields.iter().zip(cells.iter()) {
        if ignore_blanks && text.is_empty() {
            continue;
        }
        let v = cell(f.kind, text).map_err(|e| format!("field {:?}: {e}", f.name))?;
        set_path(&mut doc, &f.name, v)?;
    }
    Ok(doc)
}

/// A value as a CSV/TSV cell for export: strings raw, numbers and booleans as text, anything
/// else in relaxed Extended JSON; a missing field is an empty cell.
pub fn export_cell(v: Option<&Bson>) -> String {
    match v {
        None => String::new(),
        Some(Bson::String(s)) => s.clone(),
        Some(Bson::Int32(i)) => i.to_string(),
        Some(Bson::Int64(i)) => i.to_string(),
        Some(Bson::Double(f)) if f.is_finite() => format!("{f}"),
        Some(Bson::Boolean(b)) => b.to_string(),
        Some(Bson::Null) => String::new(),
        Some(other) => {
            let mut d = Document::new();
            d.insert("v", other.clone());
            let mut s = String::new();
            extjson::write_document(&mut s, &d, extjson::Mode::Relaxed, false);
            // Strip the `{"v":` wrapper and the closing brace.
            s.get(5..s.len() - 1).unwrap_or_default().to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_fields_and_rows() {
        let fields = parse_fields(
            "name.string(),age.int32(),a.b.int64(),ok.boolean(),bin.binary(hex)",
            true,
        )
        .expect("fields");
        assert_eq!(fields[2].name, "a.b");
        let rec = csv::StringRecord::from(vec!["007", "41", "9", "true", "00ff"]);
        let d = row(&fields, &rec, false).expect("row");
        assert_eq!(d.get_str("name").expect("name"), "007");
        assert_eq!(d.get_i32("age").expect("age"), 41);
        assert_eq!(d.get_document("a").expect("a").get_i64("b").expect("b"), 9);
        assert!(parse_field("age", true).is_err());
        assert!(parse_field("age.float()", true).is_err());
        let short = csv::StringRecord::from(vec!["x"]);
        assert_eq!(
            row(&fields, &short, false).unwrap_err(),
            "1 values for 5 fields"
        );
    }

    #[test]
    fn auto_cells() {
        assert_eq!(auto("12"), Bson::Int32(12));
        assert_eq!(auto("12345678901"), Bson::Int64(12_345_678_901));
        assert_eq!(auto("1.5"), Bson::Double(1.5));
        assert_eq!(auto("inf"), Bson::String("inf".into()));
        assert_eq!(auto(""), Bson::String(String::new()));
    }
}
