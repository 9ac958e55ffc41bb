//! Values printed the way mongod prints them inside error messages (`{a: 1}`, `"x"`,
//! `ObjectId('...')`), because clients and tests compare those messages.

use bson::{Bson, Document};

/// `{ a: 1, b: "x" }`, as mongod's `BSONObj::toString`.
pub fn document(d: &Document) -> String {
    if d.is_empty() {
        return "{}".to_string();
    }
    let fields: Vec<String> = d
        .iter()
        .map(|(k, v)| format!("{k}: {}", value(v)))
        .collect();
    format!("{{ {} }}", fields.join(", "))
}

/// One value as mongod prints it.
pub fn value(v: &Bson) -> String {
    match v {
        Bson::Document(d) => document(d),
        Bson::Array(items) => {
            if items.is_empty() {
                return "[]".to_string();
            }
            let parts: Vec<String> = items.iter().map(value).collect();
            format!("[ {} ]", parts.join(", "))
        }
        Bson::String(s) => format!("\"{s}\""),
        Bson::Double(d) => {
            if d.fract() == 0.0 && d.is_finite() {
                format!("{d:.1}")
            } else {
                format!("{d}")
            }
        }
        Bson::Int64(i) => i.to_string(),
        Bson::Int32(i) => i.to_string(),
        Bson::ObjectId(o) => format!("ObjectId('{o}')"),
        Bson::Null => "null".to_string(),
        Bson::Undefined => "undefined".to_string(),
        Bson::Boolean(b) => b.to_string(),
        Bson::DateTime(d) => format!("new Date({})", d.timestamp_millis()),
        Bson::Decimal128(d) => format!("NumberDecimal(\"{d}\")"),
        other => other.to_string(),
    }
}

/// An element `{name: value}` as in "Cannot create field 'b' in element {a: 1}".
pub fn element(name: &str, v: &Bson) -> String {
    format!("{{{name}: {}}}", value(v))
}

/// `{_id: <id>}` for messages that name the document.
pub fn id_of(doc: &Document) -> String {
    match doc.get("_id") {
        Some(id) => element("_id", id),
        None => "{}".to_string(),
    }
}
