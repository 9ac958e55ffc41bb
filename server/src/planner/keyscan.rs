//! Plans that read index keys and never fetch a document: COUNT_SCAN for `count` and
//! DISTINCT_SCAN for `distinct`.
//!
//! Both apply when the filter is empty or only indexable conditions (equality, `$in`, ranges)
//! on one field, the leading field of a visible, non-multikey, non-partial index. Bounds are a
//! superset, so each key's decoded leading value is checked against the filter: with no arrays
//! and every condition on that field, the value in the key decides the match (`null` stands for
//! a missing field, which the conditions treat alike). COUNT_SCAN needs bounds (one interval);
//! DISTINCT_SCAN also runs on the whole index. DISTINCT_SCAN seeks past each distinct leading
//! value (`prefix_end` of its encoding) and returns the value from the key when it decodes
//! exactly (see `covered`); for a number it fetches the group's first document (to return the
//! stored numeric type) and for `null` the group's documents until one holds an explicit null.
//! Collations (`collated`): an index serves only queries of its own collation; a collated
//! index holds sort keys, so it gives only a COUNT_SCAN of one exact point, counted without
//! decoding keys, and never a DISTINCT_SCAN.

//!
//! This module chooses the plans; `crate::exec::keyscan` runs them.

use super::IndexPlan;
use super::bounds::op_intervals;
use crate::query::matcher::{Filter, Op};
use bson::{Bson, Document};
use storage::IndexInfo;
use storage::order::compare_bson;

/// Whether the filter is only indexable conditions on `field` (the empty filter counts).
fn only_on(filter: &Filter, field: &str) -> bool {
    match filter {
        Filter::And(children) => children.iter().all(|f| only_on(f, field)),
        Filter::Path { path, op, .. } => path == field && op_intervals(op, false).is_some(),
        _ => false,
    }
}

/// Whether the filter is one equality (or `$in`) to values whose point bounds hold exactly the
/// matching keys: then every key in the bounds counts without being decoded.
pub fn points_only(filter: &Filter) -> bool {
    let exact = |v: &Bson| {
        !matches!(
            v,
            Bson::Null
                | Bson::Undefined
                | Bson::Document(_)
                | Bson::Array(_)
                | Bson::RegularExpression(_)
                | Bson::MinKey
                | Bson::MaxKey
        )
    };
    match filter {
        // Two conditions on the field keep only one's bounds (see `field_intervals`).
        Filter::And(children) => children.len() == 1 && points_only(&children[0]),
        Filter::Path { op: Op::Eq(v), .. } => exact(v),
        Filter::Path {
            op: Op::In { values, regexes },
            ..
        } => regexes.is_empty() && values.iter().all(exact),
        _ => false,
    }
}

/// The key-only plan over an index led by `field`, if the rule of the module note holds.
/// `hint` (an index name) limits the choice to that index.
pub fn key_plan(
    indexes: &[IndexInfo],
    field: &str,
    filter: &Filter,
    hint: Option<&str>,
) -> Option<IndexPlan> {
    key_plan_for(indexes, field, filter, hint, false)
}

/// [`key_plan`]; with `collated_points`, an index of the query's (non-simple) collation may be
/// read too: the caller only counts the keys of exact points, never decodes them.
fn key_plan_for(
    indexes: &[IndexInfo],
    field: &str,
    filter: &Filter,
    hint: Option<&str>,
    collated_points: bool,
) -> Option<IndexPlan> {
    // A transaction's reads see its snapshot, which index entries do not show.
    if !only_on(filter, field) || crate::txn::active() {
        return None;
    }
    // An index of another collation than the query's keys equal values apart; a collated
    // index holds sort keys, not the values a key check or DISTINCT_SCAN needs.
    let usable = |ix: &IndexInfo| match super::collated::fit(ix) {
        super::collated::Fit::Same(None) => true,
        super::collated::Fit::Same(Some(_)) => collated_points,
        super::collated::Fit::Apart => false,
    };
    indexes
        .iter()
        .filter(|ix| hint.map_or(!ix.spec.hidden, |h| ix.spec.name == h))
        .filter(|ix| !ix.multikey && ix.spec.partial_filter.is_none())
        .filter(|ix| usable(ix))
        .filter(|ix| super::is_plain(&ix.spec.key))
        .filter(|ix| ix.spec.key.keys().next().is_some_and(|k| k == field))
        .filter_map(|ix| super::index_candidate(ix, filter, None, true))
        .min_by_key(|p| p.key_pattern.len())
}

/// The COUNT_SCAN plan of a `count`: bounds from the filter in one interval.
pub fn count_plan(indexes: &[IndexInfo], filter: &Filter, hint: Option<&str>) -> Option<IndexPlan> {
    let field = super::bounds::conjunction(filter).first()?.0.to_string();
    let mut plan = key_plan_for(indexes, &field, filter, hint, points_only(filter))
        .filter(|p| !p.field_bounds.is_empty() && p.intervals.len() == 1)?;
    tighten(&mut plan, filter);
    Some(plan)
}

/// Make the ends of a COUNT_SCAN's interval exclusive where the filter's `$gt` / `$lt` is the
/// bound (the planner's bounds are inclusive supersets), so equal keys are not even read. Each
/// key is still checked against the filter, so this only saves reads.
fn tighten(plan: &mut IndexPlan, filter: &Filter) {
    let (Some((_, ivs)), Some(bytes)) = (plan.field_bounds.first(), plan.intervals.first_mut())
    else {
        return;
    };
    let Some(iv) = ivs.first() else { return };
    let preds = super::bounds::conjunction(filter);
    let strict = |pick: fn(&Op) -> Option<&Bson>, v: &Bson| {
        preds
            .iter()
            .any(|(_, op)| pick(op).is_some_and(|w| compare_bson(w, v).is_eq()))
    };
    let gt = strict(|op| if let Op::Gt(w) = op { Some(w) } else { None }, &iv.lo);
    let lt = strict(|op| if let Op::Lt(w) = op { Some(w) } else { None }, &iv.hi);
    let descending = leading_descending(&plan.key_pattern);
    let enc = |v: &Bson| storage::encode_index_key(&plan.key_pattern, std::slice::from_ref(v));
    // In byte order a descending field's low value comes last.
    let (low_exclusive, high_exclusive) = if descending { (lt, gt) } else { (gt, lt) };
    let (low_value, high_value) = if descending {
        (&iv.hi, &iv.lo)
    } else {
        (&iv.lo, &iv.hi)
    };
    if low_exclusive {
        bytes.0 = storage::keys::prefix_end(&enc(low_value));
    }
    if high_exclusive {
        bytes.1 = enc(high_value);
    }
}

/// Whether the key pattern's first field is descending.
pub fn leading_descending(pattern: &Document) -> bool {
    pattern
        .values()
        .next()
        .and_then(crate::query::types::as_f64)
        .is_some_and(|f| f < 0.0)
}
