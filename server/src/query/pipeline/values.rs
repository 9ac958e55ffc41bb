//! Small value helpers the stages share: encoding an owned document, checking a field path
//! written without `$`, type names for messages, integral arguments, and the byte key under
//! which values that `storage::order` calls equal hash alike.

use super::codes::{self, perr};
use crate::error::{CommandResult, ErrorCode, err};
use bson::{Bson, Document, RawDocumentBuf};

/// Encodes an owned document so that expressions and filters can read it.
pub fn to_raw(doc: &Document) -> CommandResult<RawDocumentBuf> {
    RawDocumentBuf::try_from(doc).map_err(|e| {
        err(
            ErrorCode::BadValue,
            format!("document cannot be encoded: {e}"),
        )
    })
}

/// Decodes a raw document for a stage that works on `Document`s.
pub fn to_doc(raw: &bson::RawDocument) -> CommandResult<Document> {
    Document::try_from(raw).map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))
}

/// Splits and checks a field path written without `$` (`a.b.c`).
pub fn split_field_path(path: &str) -> CommandResult<Vec<String>> {
    if path.is_empty() {
        return Err(perr(
            codes::FIELD_PATH_NULL_STRING,
            "FieldPath cannot be constructed with empty string",
        ));
    }
    if path.ends_with('.') {
        return Err(perr(
            codes::FIELD_PATH_TRAILING_DOT,
            "FieldPath must not end with a '.'.",
        ));
    }
    let parts: Vec<String> = path.split('.').map(str::to_string).collect();
    if parts.iter().any(String::is_empty) {
        return Err(perr(
            codes::FIELD_PATH_EMPTY,
            "FieldPath field names may not be empty strings.",
        ));
    }
    if parts[0].starts_with('$') {
        return Err(perr(
            codes::FIELD_PATH_DOLLAR,
            format!("FieldPath field names may not start with '$'. Given FieldPath: {path}"),
        ));
    }
    Ok(parts)
}

/// mongod's type name of a value, for error messages.
pub fn type_name(v: &Bson) -> &'static str {
    crate::query::types::type_name(crate::query::types::type_code(v))
}

/// A numeric argument as an i64 when it is integral (`5`, `5.0`, `NumberLong(5)`).
pub fn integral(v: &Bson) -> Option<i64> {
    crate::query::types::as_i64_exact(v)
}

/// A byte key equal for values that `storage::order` calls equal (1, 1.0 and 1L share one),
/// used to hash group keys and set members. Under a collation, strings equal in it share one
/// (`"abc"` and `"ABC"` at strength 2).
pub fn value_key(v: &Bson) -> Vec<u8> {
    let mut out = Vec::new();
    let v = crate::query::collator::key(v);
    if let Ok(raw) = bson::RawBson::try_from(v.into_owned()) {
        storage::keycode::encode_value(&mut out, raw.as_raw_bson_ref());
    }
    out
}

/// [`value_key`] of a raw value, written into `out` (cleared first) without decoding it.
pub fn raw_value_key(out: &mut Vec<u8>, v: bson::RawBsonRef<'_>) {
    out.clear();
    crate::query::collator::encode_value(out, v);
}
