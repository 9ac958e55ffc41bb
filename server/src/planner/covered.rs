//! Covered queries: an inclusion projection answered from index keys alone (mongod's
//! PROJECTION_COVERED over IXSCAN, no FETCH).
//!
//! The rule: the winning plan scans one index that is not multikey; the projection includes only
//! fields of its key pattern (and excludes `_id` unless `_id` is a key field); the filter and the
//! sort touch only key fields, through plain path operators (no `$expr`, `$where`, `$elemMatch`,
//! geo). For each index entry the needed key fields are decoded and the document is rebuilt from
//! them; the filter, the projection and the sort then run on that document exactly as on the
//! stored one. Our key decoding returns numbers as their narrowest type, a symbol as a string and
//! cannot tell a missing field from `null`, so an entry is rebuilt only when every needed value
//! is a string, ObjectId, bool, date, timestamp, binary, MinKey or MaxKey; any other value
//! (numbers, null, embedded documents, ...) fetches that one document instead and counts it in
//! `totalDocsExamined`. Results are therefore identical to a fetching plan.

use super::Plan;
use crate::query::matcher::{Filter, Op};
use bson::{Bson, Document};

/// How to rebuild a document from an index key (plan data; `exec::covered` rebuilds).
#[derive(Debug, Clone)]
pub struct Covered {
    /// `(position in the key pattern, dotted path split)` of every field needed.
    pub(crate) fields: Vec<(usize, Vec<String>)>,
    pub(crate) descending: Vec<bool>,
}

/// Whether a decoded key value is exactly the stored value (see the module note).
pub fn decodes_exactly(v: &Bson) -> bool {
    matches!(
        v,
        Bson::String(_)
            | Bson::ObjectId(_)
            | Bson::Boolean(_)
            | Bson::DateTime(_)
            | Bson::Timestamp(_)
            | Bson::Binary(_)
            | Bson::MinKey
            | Bson::MaxKey
    )
}

/// Every path the filter reads, or None when it reads something else (whole documents,
/// expressions, array elements).
pub fn filter_paths<'a>(filter: &'a Filter, out: &mut Vec<&'a str>) -> bool {
    match filter {
        Filter::And(c) | Filter::Or(c) | Filter::Nor(c) => c.iter().all(|f| filter_paths(f, out)),
        Filter::Not(f) => filter_paths(f, out),
        Filter::Const(_) => true,
        Filter::Path { path, op, .. } => {
            let plain = !matches!(
                op,
                Op::ElemMatchObject(_) | Op::ElemMatchValue(_) | Op::GeoWithin(_)
            );
            out.push(path.as_str());
            plain && !path.is_empty()
        }
        Filter::Expr(_) | Filter::Schema(_) | Filter::Text(_) => false,
    }
}

/// The projected fields when the projection is a plain inclusion of key fields (with `_id`
/// excluded unless it is a key field).
fn projected_fields<'a>(projection: &'a Document, key: &'a Document) -> Option<Vec<&'a str>> {
    let mut fields = Vec::new();
    let mut id_excluded = false;
    for (k, v) in projection {
        let on = match v {
            Bson::Boolean(b) => *b,
            Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) => {
                crate::query::types::as_f64(v).is_some_and(|f| f != 0.0)
            }
            _ => return None,
        };
        match (k.as_str(), on) {
            ("_id", false) => id_excluded = true,
            (_, false) => return None,
            (k, true) if k.starts_with('$') || k.contains(".$") => return None,
            (k, true) => fields.push(k),
        }
    }
    if !id_excluded && !fields.contains(&"_id") {
        // `_id` is included by default.
        fields.push("_id");
    }
    (!fields.is_empty() && fields.iter().all(|f| key.contains_key(*f))).then_some(fields)
}

/// The covering of a plan for a projection, filter and sort, if the rule above allows one.
pub fn covering(
    plan: &Plan,
    projection: Option<&Document>,
    filter: &Filter,
    sort: Option<&Document>,
) -> Option<Covered> {
    let Plan::Index(p) = plan else { return None };
    // A transaction's keys are current, not its snapshot: its documents are always fetched.
    // A collated index's strings are sort keys: mongod fetches, so do we.
    if p.multikey
        || !super::is_plain(&p.key_pattern)
        || crate::txn::active()
        || p.flags.collation.is_some()
    {
        return None;
    }
    let mut needed = projected_fields(projection?, &p.key_pattern)?;
    if !filter_paths(filter, &mut needed) {
        return None;
    }
    needed.extend(sort.into_iter().flat_map(|s| s.keys().map(String::as_str)));
    needed.sort_unstable();
    needed.dedup();
    // A field and its own sub-path cannot both be rebuilt into one document.
    let nested = needed
        .windows(2)
        .any(|w| w[1].strip_prefix(w[0]).is_some_and(|r| r.starts_with('.')));
    if nested || !needed.iter().all(|f| p.key_pattern.contains_key(*f)) {
        return None;
    }
    let positions: Vec<&String> = p.key_pattern.keys().collect();
    let mut fields: Vec<(usize, Vec<String>)> = needed
        .iter()
        .filter_map(|f| {
            let pos = positions.iter().position(|k| k.as_str() == *f)?;
            Some((pos, f.split('.').map(str::to_owned).collect()))
        })
        .collect();
    // mongod's covered projection lists fields in key-pattern order.
    fields.sort_by_key(|(pos, _)| *pos);
    let descending = p
        .key_pattern
        .values()
        .map(|v| crate::query::types::as_f64(v).is_some_and(|f| f < 0.0))
        .collect();
    Some(Covered { fields, descending })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn projections_that_cover() {
        let key = doc! { "a": 1, "b.c": -1 };
        assert!(projected_fields(&doc! { "a": 1, "_id": 0 }, &key).is_some());
        assert!(projected_fields(&doc! { "a": 1 }, &key).is_none(), "_id");
        assert!(projected_fields(&doc! { "x": 1, "_id": 0 }, &key).is_none());
        assert!(projected_fields(&doc! { "a": 0 }, &key).is_none());
        assert!(projected_fields(&doc! { "a": { "$slice": 1 }, "_id": 0 }, &key).is_none());
        assert!(projected_fields(&doc! { "_id": 1 }, &doc! { "_id": 1 }).is_some());
    }

    #[test]
    fn rebuild_from_keys() {
        let pattern = doc! { "a": 1, "b.c": -1 };
        let key =
            storage::encode_index_key(&pattern, &[Bson::String("x".into()), Bson::Boolean(true)]);
        let c = Covered {
            fields: vec![(0, vec!["a".into()]), (1, vec!["b".into(), "c".into()])],
            descending: vec![false, true],
        };
        let d = c.rebuild(&key).unwrap();
        assert_eq!(
            Document::try_from(d.as_ref()).unwrap(),
            doc! { "a": "x", "b": { "c": true } }
        );
        let lossy = storage::encode_index_key(&pattern, &[Bson::Double(1.0), Bson::Null]);
        assert!(c.rebuild(&lossy).is_none(), "numbers and null fetch");
    }
}
