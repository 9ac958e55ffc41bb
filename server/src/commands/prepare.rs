//! What a document to insert must be before it is stored, checked and made without decoding
//! it: `_id` first (generated when missing, moved to the front when elsewhere), no second
//! top-level `_id`, nesting and size within mongod's limits, an `_id` value mongod accepts. A
//! document whose `_id` is already first comes back borrowed as it was sent; the others are
//! built once, element bytes copied (repeated field names survive, as in mongod).

use crate::error::{CommandResult, ErrorCode, err};
use crate::limits;
use bson::{Bson, Document, RawDocument, RawDocumentBuf, doc};
use std::borrow::Cow;

/// Check an `_id` value mongod would refuse to store.
fn check_id(id: &Bson) -> CommandResult<()> {
    match id {
        Bson::Array(_) => Err(err(
            ErrorCode::InvalidIdField,
            "The '_id' value cannot be of type array",
        )),
        Bson::RegularExpression(_) => {
            Err(err(ErrorCode::InvalidIdField, "can't use a regex for _id"))
        }
        Bson::Undefined => Err(err(
            ErrorCode::InvalidIdField,
            "can't use a undefined for _id",
        )),
        Bson::Document(d) if d.keys().any(|k| k.starts_with('$')) => Err(err(
            ErrorCode::DollarPrefixedFieldName,
            format!(
                "_id fields may not contain '$'-prefixed fields: {} is not valid for storage.",
                d.keys().next().map_or("", |k| k)
            ),
        )),
        _ => Ok(()),
    }
}

/// What mongod refuses in a document to insert before looking at values: a second top-level
/// `_id` (other repeated names are stored, as mongod 8.0 still does) and nesting deeper than
/// `STORED_NESTING_DEPTH_MAX` levels. Works on the bytes: a `Document` would hide the repeat.
fn check_shape(raw: &bson::RawDocument) -> CommandResult<()> {
    let bad = |e: bson::error::Error| err(ErrorCode::InvalidBSON, e.to_string());
    let mut ids = 0;
    for elem in raw.iter() {
        if elem.map_err(bad)?.0.as_str() == "_id" {
            ids += 1;
        }
    }
    if ids > 1 {
        return Err(err(
            ErrorCode::BadValue,
            "can't have multiple _id fields in one document",
        ));
    }
    // Each level costs at least 7 bytes (type, empty key, an empty document), so a small
    // document cannot be too deep and skips the walk.
    if raw.as_bytes().len() < limits::STORED_NESTING_DEPTH_MAX * 7 {
        return Ok(());
    }
    let mut stack = vec![raw.iter()];
    while let Some(top) = stack.last_mut() {
        let Some(elem) = top.next() else {
            stack.pop();
            continue;
        };
        let inner = match elem.map_err(bad)?.1 {
            bson::RawBsonRef::Document(d) => d,
            bson::RawBsonRef::Array(a) => {
                bson::RawDocument::from_bytes(a.as_bytes()).map_err(bad)?
            }
            _ => continue,
        };
        if stack.len() == limits::STORED_NESTING_DEPTH_MAX {
            return Err(err(
                ErrorCode::Overflow,
                format!(
                    "cannot insert document because it exceeds {} levels of nesting",
                    limits::STORED_NESTING_DEPTH_MAX
                ),
            ));
        }
        stack.push(inner.iter());
    }
    Ok(())
}

/// A document ready to store: `_id` present (generated when missing) and first, size checked.
/// A document whose `_id` is already first is kept as it is; otherwise the document is built
/// again in one pass, `_id` first and every other element copied as its bytes (never decoded,
/// so repeated field names survive, as in mongod).
pub fn prepare_for_storage<'a>(
    raw: impl Into<Cow<'a, RawDocument>>,
) -> CommandResult<Cow<'a, RawDocument>> {
    let raw = raw.into();
    check_shape(&raw)?;
    let bad = |e: bson::error::Error| err(ErrorCode::InvalidBSON, e.to_string());
    let mut found = None;
    for (n, elem) in raw.iter().enumerate() {
        let (key, value) = elem.map_err(bad)?;
        if key == "_id" {
            found = Some((n, value));
            break;
        }
    }
    if let Some((n, value)) = found {
        check_id(&Bson::try_from(value).map_err(bad)?)?;
        if n == 0 {
            check_size(&raw)?;
            return Ok(raw);
        }
    }
    let generated;
    let id = match found {
        Some((_, value)) => value,
        None => {
            generated = bson::oid::ObjectId::new();
            bson::RawBsonRef::ObjectId(generated)
        }
    };
    // Room for the whole result up front: the appends below never move the buffer.
    let mut bytes = Vec::with_capacity(raw.as_bytes().len() + PREPENDED_ID_BYTES_MAX);
    bytes.extend_from_slice(&EMPTY_DOCUMENT);
    let mut out = RawDocumentBuf::from_bytes(bytes).map_err(bad)?;
    out.append(bson::cstr!("_id"), id);
    for elem in raw.iter() {
        let (key, value) = elem.map_err(bad)?;
        if key != "_id" {
            out.append(key, value);
        }
    }
    check_size(&out)?;
    Ok(Cow::Owned(out))
}

/// An empty BSON document: its length (5) and the terminating zero.
const EMPTY_DOCUMENT: [u8; 5] = [5, 0, 0, 0, 0];
/// A generated `_id` element: type, "_id\0", a 12-byte ObjectId.
const PREPENDED_ID_BYTES_MAX: usize = 1 + 4 + 12;

pub fn prepare_document(mut doc: Document) -> CommandResult<RawDocumentBuf> {
    let id = doc
        .remove("_id")
        .unwrap_or_else(|| Bson::ObjectId(bson::oid::ObjectId::new()));
    check_id(&id)?;
    let mut out = doc! { "_id": id };
    out.extend(doc);
    let raw =
        RawDocumentBuf::try_from(&out).map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))?;
    check_size(&raw)?;
    Ok(raw)
}

fn check_size(raw: &RawDocument) -> CommandResult<()> {
    let n = raw.as_bytes().len();
    if n > limits::BSON_OBJECT_SIZE_MAX {
        return Err(err(
            ErrorCode::BSONObjectTooLarge,
            format!(
                "object to insert too large. size in bytes: {n}, max size: {}",
                limits::BSON_OBJECT_SIZE_MAX
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(d: Document) -> RawDocumentBuf {
        RawDocumentBuf::try_from(&d).expect("encodes")
    }

    fn keys(d: &RawDocument) -> Vec<String> {
        d.iter()
            .map(|e| e.expect("element").0.as_str().to_string())
            .collect()
    }

    #[test]
    fn a_document_with_id_first_is_kept_borrowed() {
        let d = raw(doc! {"_id": 1, "a": 1});
        let out = prepare_for_storage(d.as_ref()).expect("valid");
        assert!(matches!(out, Cow::Borrowed(_)));
        assert_eq!(out.as_bytes(), d.as_bytes());
    }

    #[test]
    fn id_is_generated_or_moved_first_and_repeated_fields_survive() {
        // A repeated name cannot be built with `doc!`: append it to the raw bytes.
        let mut d = raw(doc! {"a": 1});
        d.append(bson::cstr!("a"), 2);
        let out = prepare_for_storage(d.as_ref()).expect("valid");
        assert_eq!(keys(&out), ["_id", "a", "a"]);
        assert!(out.get_object_id("_id").is_ok());
        let mut d = raw(doc! {"a": 1, "_id": "x"});
        d.append(bson::cstr!("a"), 2);
        let out = prepare_for_storage(d).expect("valid");
        assert_eq!(keys(&out), ["_id", "a", "a"]);
        assert_eq!(out.get_str("_id").ok(), Some("x"));
    }

    #[test]
    fn refusals_are_mongods() {
        let code = |d: RawDocumentBuf| prepare_for_storage(d).err().map(|e| e.code);
        let mut two = raw(doc! {"_id": 1});
        two.append(bson::cstr!("_id"), 2);
        assert_eq!(code(two), Some(ErrorCode::BadValue));
        assert_eq!(
            code(raw(doc! {"a": 1, "_id": [1]})),
            Some(ErrorCode::InvalidIdField)
        );
        let big = "x".repeat(limits::BSON_OBJECT_SIZE_MAX);
        assert_eq!(
            code(raw(doc! {"s": big})),
            Some(ErrorCode::BSONObjectTooLarge)
        );
    }
}
