//! `$sort`: sort keys as mongod builds them (an array contributes its smallest element to an
//! ascending key and its largest to a descending one; missing reads as null), compared with
//! `storage::order`. The sort is stable. When a `$limit` follows (possibly after `$skip`s),
//! only the best `skip + limit` documents are kept: a top-k that holds O(k) memory.

use super::Stage;
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::path;
use crate::query::pipeline::DocStream;
use crate::query::pipeline::codes::{self, perr};
use crate::query::pipeline::common::{RunCx, doc_size_bytes, integral, to_raw};
use crate::query::types;
use bson::{Bson, Document, RawDocument};
use std::cmp::Ordering;
use std::ops::ControlFlow;
use storage::order;

/// A parsed sort specification.
#[derive(Debug, Clone)]
pub struct SortKeys {
    keys: Vec<(Vec<String>, bool)>,
}

impl SortKeys {
    /// Parses `{field: 1 | -1, ...}`.
    pub fn parse(spec: &Document) -> CommandResult<SortKeys> {
        if spec.is_empty() {
            return Err(perr(
                codes::SORT_EMPTY,
                "$sort stage must have at least one sort key",
            ));
        }
        let mut keys = Vec::with_capacity(spec.len());
        for (field, dir) in spec {
            let descending = match dir {
                Bson::Document(d) if d.contains_key("$meta") => {
                    return Err(err(
                        ErrorCode::NotImplemented,
                        format!("$sort by {{$meta: ...}} on '{field}' is not supported by cairn"),
                    ));
                }
                Bson::Document(_) => {
                    return Err(perr(
                        codes::SORT_BAD_KEY,
                        format!("Illegal key in $sort specification: {field}: {dir}"),
                    ));
                }
                other => match integral(other) {
                    Some(1) => false,
                    Some(-1) => true,
                    _ if types::is_number(other) => {
                        return Err(perr(
                            codes::SORT_BAD_ORDER,
                            "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
                        ));
                    }
                    _ => {
                        return Err(perr(
                            codes::SORT_BAD_KEY,
                            format!("Illegal key in $sort specification: {field}: {dir}"),
                        ));
                    }
                },
            };
            if field.is_empty() || field.split('.').any(str::is_empty) || field.starts_with('$') {
                return Err(perr(
                    codes::FIELD_PATH_EMPTY,
                    format!(
                        "FieldPath field names may not be empty strings or start with '$': {field}"
                    ),
                ));
            }
            keys.push((path::split(field), descending));
        }
        Ok(SortKeys { keys })
    }

    /// The sort key of a document.
    pub fn key_of(&self, doc: &RawDocument) -> Vec<Bson> {
        self.keys
            .iter()
            .map(|(p, descending)| key_for_path(doc, p, *descending))
            .collect()
    }

    /// Compares two sort keys made by [`SortKeys::key_of`].
    pub fn compare(&self, a: &[Bson], b: &[Bson]) -> Ordering {
        for (i, (_, descending)) in self.keys.iter().enumerate() {
            let (Some(x), Some(y)) = (a.get(i), b.get(i)) else {
                break;
            };
            let o = order::compare_bson(x, y);
            let o = if *descending { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }

    /// The single path when the specification has exactly one key (for `$setWindowFields`).
    pub fn single_path(&self) -> Option<(&[String], bool)> {
        match self.keys.as_slice() {
            [(p, d)] => Some((p.as_slice(), *d)),
            _ => None,
        }
    }
}

/// The smallest (ascending) or largest (descending) value `path` reaches; arrays stand for
/// their elements; missing is null; an empty array is undefined (below null).
fn key_for_path(doc: &RawDocument, path: &[String], descending: bool) -> Bson {
    let mut best: Option<Bson> = None;
    let mut saw_any = false;
    let _ = path::walk::<()>(doc, path, &mut |c| {
        let v = match c.value {
            Some(bson::RawBsonRef::Array(_)) if !c.expanded => return ControlFlow::Continue(()),
            Some(v) => types::to_owned(v),
            None => Bson::Null,
        };
        saw_any = true;
        let better = best.as_ref().is_none_or(|b| {
            let o = order::compare_bson(&v, b);
            if descending {
                o == Ordering::Greater
            } else {
                o == Ordering::Less
            }
        });
        if better {
            best = Some(v);
        }
        ControlFlow::Continue(())
    });
    match best {
        Some(b) => b,
        None if saw_any => Bson::Null,
        None => Bson::Undefined,
    }
}

/// How many documents a `$sort` must keep given the stages after it.
pub fn top_k_bound(following: &[Document]) -> Option<u64> {
    let mut skipped: u64 = 0;
    for stage in following {
        let (name, value) = stage.iter().next()?;
        let n = integral(value).and_then(|n| u64::try_from(n).ok())?;
        match name.as_str() {
            "$limit" => return skipped.checked_add(n),
            "$skip" => skipped = skipped.checked_add(n)?,
            _ => return None,
        }
    }
    None
}

/// `$sort`.
#[derive(Debug)]
pub struct Sort {
    keys: SortKeys,
    top_k: Option<u64>,
}

impl Sort {
    pub fn parse(spec: &Bson, top_k: Option<u64>) -> CommandResult<Sort> {
        let Bson::Document(d) = spec else {
            return Err(perr(
                codes::SORT_NOT_OBJECT,
                "the $sort key specification must be an object",
            ));
        };
        Ok(Sort {
            keys: SortKeys::parse(d)?,
            top_k,
        })
    }
}

impl Stage for Sort {
    fn run<'a>(&'a self, input: DocStream<'a>, cx: RunCx<'a>) -> CommandResult<DocStream<'a>> {
        let sorted = sort_documents(&self.keys, input, self.top_k, cx)?;
        Ok(Box::new(sorted.into_iter().map(Ok)))
    }
}

/// Sorts a stream (stable), keeping only the first `top_k` when given.
pub fn sort_documents(
    keys: &SortKeys,
    input: DocStream<'_>,
    top_k: Option<u64>,
    cx: RunCx<'_>,
) -> CommandResult<Vec<Document>> {
    let keep = top_k.map(|k| usize::try_from(k).unwrap_or(usize::MAX));
    let mut rows: Vec<(Vec<Bson>, Document)> = Vec::new();
    let mut used_bytes = 0usize;
    for item in input {
        let doc = item?;
        let key = keys.key_of(&to_raw(&doc)?);
        used_bytes += doc_size_bytes(&doc);
        rows.push((key, doc));
        if let Some(k) = keep
            && rows.len() >= k.saturating_mul(2).max(2)
        {
            // Amortised top-k: sorting then truncating at 2k keeps O(n log k) work.
            rows.sort_by(|a, b| keys.compare(&a.0, &b.0));
            rows.truncate(k);
            used_bytes = rows.iter().map(|(_, d)| doc_size_bytes(d)).sum();
        }
        cx.charge(used_bytes, "Sort")?;
    }
    rows.sort_by(|a, b| keys.compare(&a.0, &b.0));
    if let Some(k) = keep {
        rows.truncate(k);
    }
    Ok(rows.into_iter().map(|(_, d)| d).collect())
}
