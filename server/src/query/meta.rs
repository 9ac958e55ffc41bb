//! Per-document metadata in the aggregation pipeline: the `$text` score that
//! `{$meta: "textScore"}` reads.
//!
//! Design: the score travels *inside* the document, as one reserved top-level field
//! ([`TEXT_SCORE_FIELD`]) that the text source puts first in each match (so reading it stops
//! at the first element). Every stage that keeps a
//! document's top-level fields (`$match`, `$limit`, `$skip`, `$sort` and its spill files,
//! `$unwind`, `$addFields`, an exclusion `$project`, `$lookup`) carries it with no code of its
//! own; the two that build a new document from the old one carry it on purpose when the
//! pipeline has a score (an inclusion `$project` includes the field, `$replaceRoot` copies it),
//! and stages that make new documents (`$group`, `$bucket`, `$count`, ...) drop it, as mongod
//! drops metadata there. `{$meta: "textScore"}` parses to a read of the field, so it works in
//! every expression (`$project`, `$addFields`, `$group`, `$replaceRoot`, ...) and `$sort` sorts
//! on it descending. The field never leaves the server: the pipeline's output (cursor batches
//! and `$out`/`$merge` writes) goes through [`strip`] when the pipeline has a score. A pipeline
//! without `$text` pays nothing: no field is added, nothing is stripped.
//!
//! What this must not do: be visible to clients. Known seams: an expression that looks at the
//! whole document (`$$ROOT` in `$objectToArray` or `$bsonSize`) sees the field while the
//! pipeline runs (stripping at the exit removes it from documents nested under `$$ROOT`).

use crate::error::{CommandResult, ErrorCode, err};
use bson::{Bson, Document, RawDocumentBuf};

/// The reserved field holding a document's text score while it is in a pipeline. A stored
/// document cannot have it (top-level names starting with `$` are refused on insert).
pub const TEXT_SCORE_FIELD: &str = "$__textScore";

/// `$meta` kinds mongod knows; all but `textScore` read as missing here (mongod gives missing
/// when the metadata is absent, and cairn never produces them).
const KNOWN_KINDS: &[&str] = &[
    "textScore",
    "randVal",
    "searchScore",
    "searchHighlights",
    "searchScoreDetails",
    "searchSequenceToken",
    "geoNearDistance",
    "geoNearPoint",
    "recordId",
    "indexKey",
    "sortKey",
    "vectorSearchScore",
];

/// What `{$meta: arg}` reads: `Some(true)` the text score, `Some(false)` a kind that is always
/// missing; mongod's 17307/17308 for a bad argument.
pub fn parse_kind(arg: &Bson) -> CommandResult<bool> {
    let Bson::String(kind) = arg else {
        return Err(err(
            ErrorCode::Location17307,
            "$meta only supports string arguments",
        ));
    };
    if !KNOWN_KINDS.contains(&kind.as_str()) {
        return Err(err(
            ErrorCode::Location17308,
            format!("Unsupported argument to $meta: {kind}"),
        ));
    }
    Ok(kind == "textScore")
}

/// True when a stage specification asks for the text score anywhere (`{$meta: "textScore"}`
/// as an expression or a sort direction, sub-pipelines included).
pub fn wants_text_score(spec: &Bson) -> bool {
    match spec {
        Bson::Document(d) => {
            crate::query::sort::is_text_score(spec) || d.values().any(wants_text_score)
        }
        Bson::Array(items) => items.iter().any(wants_text_score),
        _ => false,
    }
}

/// mongod's error for a score asked of documents that have none.
pub fn unavailable() -> crate::error::CommandError {
    err(
        ErrorCode::Location40218,
        "query requires text score metadata, but it is not available",
    )
}

/// `raw` with its score as the first field: one copy of the bytes, and reads of the field
/// (`$meta`, a `$sort` on the score) find it without walking the document.
pub fn with_score(raw: &RawDocumentBuf, score: f64) -> CommandResult<RawDocumentBuf> {
    let body = raw.as_bytes().get(4..).unwrap_or_default();
    // type byte, name, NUL, f64
    let element_len = 1 + TEXT_SCORE_FIELD.len() + 1 + 8;
    let total = i32::try_from(4 + element_len + body.len()).map_err(|_| {
        err(
            ErrorCode::BSONObjectTooLarge,
            "document too large for its score",
        )
    })?;
    let mut bytes = Vec::with_capacity(4 + element_len + body.len());
    bytes.extend_from_slice(&total.to_le_bytes());
    bytes.push(0x01);
    bytes.extend_from_slice(TEXT_SCORE_FIELD.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(&score.to_le_bytes());
    bytes.extend_from_slice(body);
    RawDocumentBuf::from_bytes(bytes).map_err(|e| err(ErrorCode::InternalError, e.to_string()))
}

/// Removes the score field from `doc` and from every document nested in it.
pub fn strip(doc: &mut Document) {
    doc.remove(TEXT_SCORE_FIELD);
    for (_, v) in doc.iter_mut() {
        strip_value(v);
    }
}

fn strip_value(v: &mut Bson) {
    match v {
        Bson::Document(d) => strip(d),
        Bson::Array(items) => items.iter_mut().for_each(strip_value),
        _ => {}
    }
}

/// [`strip`] for a raw document: decoded and re-encoded only when the field occurs in it.
pub fn strip_raw(raw: RawDocumentBuf) -> CommandResult<RawDocumentBuf> {
    if !contains_bytes(raw.as_bytes(), TEXT_SCORE_FIELD.as_bytes()) {
        return Ok(raw);
    }
    let mut d =
        Document::try_from(raw.as_ref()).map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))?;
    strip(&mut d);
    RawDocumentBuf::try_from(&d).map_err(|e| err(ErrorCode::InternalError, e.to_string()))
}

fn contains_bytes(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn kinds_follow_mongod() {
        assert!(parse_kind(&Bson::String("textScore".into())).unwrap());
        assert!(!parse_kind(&Bson::String("indexKey".into())).unwrap());
        let code = |v: Bson| parse_kind(&v).unwrap_err().code;
        assert_eq!(code(Bson::String("bogus".into())), ErrorCode::Location17308);
        assert_eq!(code(Bson::Int32(1)), ErrorCode::Location17307);
    }

    #[test]
    fn wanted_anywhere_in_a_spec() {
        let spec = Bson::Document(doc! { "a": { "$add": [1, { "$meta": "textScore" }] } });
        assert!(wants_text_score(&spec));
        assert!(!wants_text_score(&Bson::Document(doc! { "a": "$b" })));
    }

    #[test]
    fn stripping_reaches_nested_copies() {
        let raw = with_score(&RawDocumentBuf::try_from(&doc! { "a": 1 }).unwrap(), 1.5).unwrap();
        let first = raw.iter().next().unwrap().unwrap();
        assert_eq!(
            (first.0.as_str(), first.1.as_f64()),
            (TEXT_SCORE_FIELD, Some(1.5))
        );
        let mut outer = doc! { "x": [ { "r": Document::try_from(raw.as_ref()).unwrap() } ] };
        outer.insert(TEXT_SCORE_FIELD, 2.0);
        strip(&mut outer);
        assert_eq!(outer, doc! { "x": [ { "r": { "a": 1 } } ] });
        let plain = RawDocumentBuf::try_from(&doc! { "a": 1 }).unwrap();
        assert_eq!(strip_raw(plain.clone()).unwrap(), plain);
        assert_eq!(strip_raw(raw).unwrap(), plain);
    }
}
