//! Indexes and collations: which bounds and orders an index may give a query, given the
//! index's collation (its `collation` option, `None`: simple) and the query's (the current
//! collator of `query::collator`).
//!
//! mongod's rule, kept here: an index whose collation is the query's gives bounds and sort as
//! usual; its keys hold strings as sort-key strings (`storage::keys::KeyCollation`), so string
//! bound values are mapped the same way (`map_intervals`). An index with another collation
//! (a simple index under a collated query included) still gives bounds on a field whose
//! interval ends are neither strings nor objects nor arrays (a string key sits in the string
//! bracket whatever its order), and never a sort. Bounds stay a superset either way: every
//! fetched document meets the whole filter again under the query's collation.

use super::bounds::{ValueInterval, field_intervals_by, op_intervals};
use crate::query::collation::Spec;
use crate::query::collator::{self, Collator};
use crate::query::matcher::Op;
use bson::{Bson, Document};
use std::sync::Arc;
use storage::IndexInfo;
use storage::order::compare_bson;

/// How an index's collation relates to the current query's.
pub enum Fit {
    /// The same collation: bounds (mapped by this collator, `None`: simple) and sort.
    Same(Option<Arc<Collator>>),
    /// Another collation: bounds on non-string values only, no sort.
    Apart,
}

/// The compiled collation of an index spec's `collation` option (`Ok(None)`: simple).
pub fn of_spec(collation: Option<&Document>) -> Result<Option<Arc<Collator>>, String> {
    let Some(c) = collation else {
        return Ok(None);
    };
    let spec = Spec::parse(c).map_err(|e| e.message)?;
    collator::for_spec(&spec).map_err(|e| e.message)
}

/// How `ix` fits the current query's collation.
pub fn fit(ix: &IndexInfo) -> Fit {
    let query = collator::current();
    match of_spec(ix.spec.collation()) {
        Ok(None) if query.is_none() => Fit::Same(None),
        Ok(Some(c)) if query.as_ref().is_some_and(|q| q.spec() == c.spec()) => Fit::Same(Some(c)),
        _ => Fit::Apart,
    }
}

/// The value an IDHACK looks up for `{_id: id}`, if the query may have one: mongod's rule is
/// that the query's collation is the collection's default (the `_id` index's). The value comes
/// as the `_id` index keys it (strings mapped).
pub fn id_lookup(coll: &storage::Collection, id: &Bson) -> Option<Bson> {
    let query = collator::current();
    match (query, of_spec(coll.default_collation().as_ref())) {
        (None, Ok(None)) => Some(id.clone()),
        (Some(q), Ok(Some(c))) if q.spec() == c.spec() => Some(c.key(id).into_owned()),
        _ => None,
    }
}

/// Whether a value's order can depend on a collation (strings, possibly inside objects and
/// arrays).
fn collatable(v: &Bson) -> bool {
    matches!(
        v,
        Bson::String(_) | Bson::Symbol(_) | Bson::Document(_) | Bson::Array(_)
    )
}

/// Whether an index of another collation may bound a field by these intervals.
pub fn usable_apart(ivs: &[ValueInterval]) -> bool {
    ivs.iter()
        .all(|iv| !collatable(&iv.lo) && !collatable(&iv.hi))
}

/// The intervals of one field of an index that fits the query as `fit` says. Each operator's
/// intervals are taken into the index's key space (or dropped) before the operators of the
/// field are intersected: an intersection in the simple order could be empty where the
/// collated one is not.
pub fn field_intervals(
    fit: &Fit,
    preds: &[(&str, &Op)],
    field: &str,
    multikey: bool,
    sparse: bool,
) -> Option<Vec<ValueInterval>> {
    field_intervals_by(preds, field, multikey, |op| {
        let ivs = op_intervals(op, sparse)?;
        match fit {
            Fit::Same(None) => Some(ivs),
            Fit::Same(Some(c)) => Some(map_intervals(c, ivs)),
            Fit::Apart => usable_apart(&ivs).then_some(ivs),
        }
    })
}

/// Intervals in the key space of an index collated by `c`: strings (at any depth) become their
/// sort-key strings, then the intervals are put back in key order without repeats (values
/// equal under the collation share one key). A lower end that is the empty string (the string
/// bracket's start) stays as it is: it sorts below every key string.
pub fn map_intervals(c: &Collator, ivs: Vec<ValueInterval>) -> Vec<ValueInterval> {
    let mut out: Vec<ValueInterval> = ivs
        .into_iter()
        .map(|iv| ValueInterval {
            lo: match &iv.lo {
                Bson::String(s) if s.is_empty() => iv.lo.clone(),
                lo => c.key(lo).into_owned(),
            },
            hi: c.key(&iv.hi).into_owned(),
        })
        .collect();
    out.sort_by(|a, b| compare_bson(&a.lo, &b.lo));
    out.dedup_by(|a, b| compare_bson(&a.lo, &b.lo).is_eq() && compare_bson(&a.hi, &b.hi).is_eq());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::collation::Spec;
    use bson::doc;

    fn strength2() -> Arc<Collator> {
        let spec = Spec::parse(&doc! { "locale": "en", "strength": 2 }).unwrap();
        collator::for_spec(&spec).unwrap().unwrap()
    }

    #[test]
    fn mapped_points_merge_case_variants_and_follow_key_order() {
        let c = strength2();
        let ivs = vec![
            ValueInterval::point(Bson::String("b".into())),
            ValueInterval::point(Bson::String("ABC".into())),
            ValueInterval::point(Bson::String("abc".into())),
            ValueInterval::point(Bson::Int32(7)),
        ];
        let mapped = map_intervals(&c, ivs);
        assert_eq!(mapped.len(), 3, "ABC and abc are one key at strength 2");
        assert_eq!(mapped[0].lo, Bson::Int32(7), "numbers before strings");
        assert_eq!(mapped[1].lo, Bson::String(c.key_string("abc")));
        assert_eq!(mapped[2].lo, Bson::String(c.key_string("B")));
    }

    #[test]
    fn range_ends_map_and_the_bracket_start_stays() {
        let c = strength2();
        let iv = ValueInterval {
            lo: Bson::String(String::new()),
            hi: Bson::String("m".into()),
        };
        let mapped = map_intervals(&c, vec![iv]);
        assert_eq!(mapped[0].lo, Bson::String(String::new()));
        assert_eq!(mapped[0].hi, Bson::String(c.key_string("m")));
    }

    #[test]
    fn only_non_string_ends_are_usable_apart() {
        assert!(usable_apart(&[ValueInterval::point(Bson::Int32(1))]));
        assert!(usable_apart(&[ValueInterval {
            lo: Bson::Int32(1),
            hi: Bson::Double(f64::INFINITY),
        }]));
        assert!(!usable_apart(&[ValueInterval::point(Bson::String(
            "a".into()
        ))]));
        assert!(!usable_apart(&[
            ValueInterval::point(Bson::Int32(1)),
            ValueInterval::point(Bson::Document(doc! { "a": 1 })),
        ]));
    }
}
