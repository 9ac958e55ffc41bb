//! Execution of the key-only plans `planner::keyscan` chooses: COUNT_SCAN counts the entries of
//! one interval whose key passes the filter; DISTINCT_SCAN seeks past each distinct leading value
//! and returns it from the key when it decodes exactly, else from the group's first document
//! that holds one (the rule is in `planner::keyscan`'s module note).

use crate::error::{CommandResult, ErrorCode, err};
use crate::planner::IndexPlan;
use crate::planner::covered::decodes_exactly;
use crate::planner::keyscan::points_only;
use crate::query::matcher::Filter;
use bson::{Bson, Document, RawDocumentBuf};
use std::ops::Bound;
use storage::{Collection, Direction};

/// Index entries read per step of a COUNT_SCAN.
const COUNT_CHUNK_COUNT: usize = 1024;

/// What a key-only plan read.
#[derive(Debug, Default, Clone, Copy)]
pub struct KeyStats {
    pub keys_examined: u64,
    pub docs_examined: u64,
}

/// Whether a key's leading value passes the filter, as the document's value would.
fn key_matches(filter: &Filter, path: &[String], v: &Bson) -> bool {
    if filter.is_empty() {
        return true;
    }
    let mut doc = Document::new();
    crate::query::path::set_path(&mut doc, path, v.clone());
    RawDocumentBuf::try_from(&doc).is_ok_and(|raw| filter.matches(&raw))
}

fn leading_value(key: &[u8], pattern: &Document) -> CommandResult<Bson> {
    let descending: Vec<bool> = pattern
        .values()
        .map(|v| crate::query::types::as_f64(v).is_some_and(|f| f < 0.0))
        .collect();
    storage::keycode::decode_key(key, &descending)
        .ok()
        .and_then(|mut v| (!v.is_empty()).then(|| v.swap_remove(0)))
        .ok_or_else(|| err(ErrorCode::InternalError, "undecodable index key"))
}

fn serr(e: storage::StorageError) -> crate::error::CommandError {
    crate::error::storage_error(e, "", "")
}

/// Count the entries of a COUNT_SCAN plan whose key passes the filter.
pub fn count_keys(
    coll: &Collection,
    plan: &IndexPlan,
    filter: &Filter,
    stats: &mut KeyStats,
) -> CommandResult<u64> {
    let Some((field, _)) = plan.field_bounds.first() else {
        return Ok(0);
    };
    let path: Vec<String> = field.split('.').map(str::to_owned).collect();
    let exact = points_only(filter);
    let mut n = 0u64;
    for (lo, hi) in &plan.intervals {
        let mut after: Option<(Vec<u8>, u64)> = None;
        loop {
            let resume = after.as_ref().map(|(k, r)| (k.as_slice(), *r));
            let entries = coll
                .index_scan(
                    &plan.index_name,
                    Bound::Included(lo),
                    Bound::Excluded(hi),
                    Direction::Forward,
                    resume,
                    COUNT_CHUNK_COUNT,
                )
                .map_err(serr)?;
            stats.keys_examined += entries.len() as u64;
            if exact {
                n += entries.len() as u64;
            } else {
                for (key, _) in &entries {
                    if key_matches(filter, &path, &leading_value(key, &plan.key_pattern)?) {
                        n += 1;
                    }
                }
            }
            match entries.last() {
                Some((k, r)) if entries.len() == COUNT_CHUNK_COUNT => after = Some((k.clone(), *r)),
                _ => break,
            }
        }
    }
    Ok(n)
}

/// The stored value of a key group whose key value does not decode exactly: the first document
/// of the group that holds one (none when every document lacks the field).
fn stored_value(
    coll: &Collection,
    plan: &IndexPlan,
    group: (&[u8], &[u8]),
    path: &[&str],
    stats: &mut KeyStats,
) -> CommandResult<Option<Bson>> {
    let mut after: Option<(Vec<u8>, u64)> = None;
    loop {
        let resume = after.as_ref().map(|(k, r)| (k.as_slice(), *r));
        let entries = coll
            .index_scan(
                &plan.index_name,
                Bound::Included(group.0),
                Bound::Excluded(group.1),
                Direction::Forward,
                resume,
                COUNT_CHUNK_COUNT,
            )
            .map_err(serr)?;
        stats.keys_examined += entries.len() as u64;
        for (_, rid) in &entries {
            let Some(doc) = coll.get(*rid).map_err(serr)? else {
                continue;
            };
            stats.docs_examined += 1;
            let d = Document::try_from(doc.as_ref())
                .map_err(|e| err(ErrorCode::InvalidBSON, e.to_string()))?;
            let mut values = Vec::new();
            crate::query::path::values_at(&Bson::Document(d), path, &mut values);
            if let Some(v) = values.into_iter().next() {
                return Ok(Some(v));
            }
        }
        match entries.last() {
            Some((k, r)) if entries.len() == COUNT_CHUNK_COUNT => after = Some((k.clone(), *r)),
            _ => return Ok(None),
        }
    }
}

/// The distinct values of the leading field within the plan's bounds that pass the filter, in
/// index order.
pub fn distinct_keys(
    coll: &Collection,
    plan: &IndexPlan,
    filter: &Filter,
    field: &str,
    stats: &mut KeyStats,
) -> CommandResult<Vec<Bson>> {
    let path: Vec<String> = field.split('.').map(str::to_owned).collect();
    let path_refs: Vec<&str> = field.split('.').collect();
    let mut out = Vec::new();
    for (lo, hi) in &plan.intervals {
        let mut lower = lo.clone();
        loop {
            let entries = coll
                .index_scan(
                    &plan.index_name,
                    Bound::Included(&lower),
                    Bound::Excluded(hi),
                    Direction::Forward,
                    None,
                    1,
                )
                .map_err(serr)?;
            let Some((key, _)) = entries.first() else {
                break;
            };
            stats.keys_examined += 1;
            let v = leading_value(key, &plan.key_pattern)?;
            let prefix = storage::encode_index_key(&plan.key_pattern, std::slice::from_ref(&v));
            let next = storage::keys::prefix_end(&prefix);
            if next.as_slice() <= key.as_slice() {
                // Re-encoding must reproduce the key's leading bytes; never loop on a key.
                return Err(err(
                    ErrorCode::InternalError,
                    "index key does not re-encode",
                ));
            }
            if key_matches(filter, &path, &v) {
                if decodes_exactly(&v) {
                    out.push(v);
                } else if let Some(stored) =
                    stored_value(coll, plan, (&prefix, &next), &path_refs, stats)?
                {
                    out.push(stored);
                }
            }
            lower = next;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn only_single_point_conditions_skip_the_key_check() {
        let exact = |d: Document| points_only(&Filter::parse(&d).unwrap());
        assert!(exact(doc! { "a": 5 }));
        assert!(exact(doc! { "a": { "$in": ["x", 2] } }));
        assert!(!exact(doc! { "a": null }));
        assert!(!exact(doc! { "a": { "$gt": 5 } }));
        assert!(!exact(
            doc! { "$and": [ { "a": { "$in": [1, 2] } }, { "a": { "$in": [2, 3] } } ] }
        ));
    }
}
