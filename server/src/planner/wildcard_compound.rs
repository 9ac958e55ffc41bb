//! Plans over a compound wildcard index (`storage::wildcard`, e.g. `{tenant: 1, "attrs.$**": 1}`),
//! whose keys are `[regular values before the wildcard term..., path, value, regular values
//! after...]`, all ascending. Candidates: one per path of the filter's top-level conjunction
//! that the wildcard term covers (the regular fields bounded by their predicates, the path as a
//! point, the value by the path's predicates, as `wildcard` does for a plain wildcard index),
//! and, when a regular field before the wildcard term has predicates, one that reads every
//! path of the keys in those bounds. Explain's key pattern is mongod's: the regular fields,
//! with `$_path` and the path in the wildcard term's place.
//!
//! These plans never provide a sort and are never covered. Regular fields are never multikey
//! (the index refuses arrays there), so their predicates intersect. Bounds that would multiply
//! into more than `INTERVALS_MAX` byte intervals stop at the last field that fits: a superset,
//! which the filter (applied to every fetched document) narrows.

use super::bounds::{
    ValueInterval, byte_intervals, conjunction, field_intervals, field_intervals_by,
};
use super::wildcard::{plannable_path, value_intervals};
use super::{IndexFlags, IndexPlan};
use crate::query::matcher::{Filter, Op};
use bson::{Bson, Document};
use storage::wildcard::{PATH_FIELD, WildcardSpec};
use storage::{Collection, Direction, IndexInfo};

/// The most byte intervals one plan's bounds may multiply into.
const INTERVALS_MAX: usize = 512;

/// The candidate plans of a compound wildcard index for a filter.
pub fn candidates(
    coll: &Collection,
    ix: &IndexInfo,
    spec: &WildcardSpec,
    filter: &Filter,
) -> Vec<IndexPlan> {
    let preds = conjunction(filter);
    let regular = spec.regular_fields();
    let regular_bounds: Vec<Option<Vec<ValueInterval>>> = regular
        .iter()
        .map(|(_, p)| field_intervals(&preds, p, false, false))
        .collect();
    let mut paths: Vec<&str> = preds
        .iter()
        .map(|(p, _)| *p)
        .filter(|p| !regular.iter().any(|(_, r)| r == p))
        .collect();
    paths.sort_unstable();
    paths.dedup();
    let mut out: Vec<IndexPlan> = paths
        .into_iter()
        .filter_map(|path| {
            let values = path_values(coll, ix, spec, &preds, path)?;
            Some(plan(ix, spec, &regular_bounds, Some((path, values))))
        })
        .collect();
    let leading_bounded = regular
        .iter()
        .zip(&regular_bounds)
        .any(|((position, _), b)| *position < spec.position() && b.is_some());
    if leading_bounded {
        out.push(plan(ix, spec, &regular_bounds, None));
    }
    out
}

/// The value intervals of `path` under the wildcard term, and whether it is multikey.
fn path_values(
    coll: &Collection,
    ix: &IndexInfo,
    spec: &WildcardSpec,
    preds: &[(&str, &Op)],
    path: &str,
) -> Option<(Vec<ValueInterval>, bool)> {
    let (_, multikey) = plannable_path(coll, ix, spec, path)?;
    let values = field_intervals_by(preds, path, multikey, value_intervals)?;
    Some((values, multikey))
}

fn every_value() -> Vec<ValueInterval> {
    vec![ValueInterval {
        lo: Bson::MinKey,
        hi: Bson::MaxKey,
    }]
}

/// The plan for one wildcard path (or, with `None`, for every path), in key-pattern order.
fn plan(
    ix: &IndexInfo,
    spec: &WildcardSpec,
    regular_bounds: &[Option<Vec<ValueInterval>>],
    wild: Option<(&str, (Vec<ValueInterval>, bool))>,
) -> IndexPlan {
    let mut key_pattern = Document::new();
    let mut field_bounds = Vec::new();
    // Per key slot (path and value are two), for the byte intervals.
    let mut slots: Vec<Vec<ValueInterval>> = Vec::new();
    let mut regular = regular_bounds.iter();
    for (i, (field, kind)) in ix.spec.key.iter().enumerate() {
        if i == spec.position() {
            key_pattern.insert(PATH_FIELD, 1);
            match &wild {
                Some((path, (values, _))) => {
                    let point = vec![ValueInterval::point(Bson::String(path.to_string()))];
                    key_pattern.insert(*path, 1);
                    field_bounds.push((PATH_FIELD.to_owned(), point.clone()));
                    field_bounds.push((path.to_string(), values.clone()));
                    slots.push(point);
                    slots.push(values.clone());
                }
                None => {
                    field_bounds.push((PATH_FIELD.to_owned(), every_value()));
                    slots.push(every_value());
                    slots.push(every_value());
                }
            }
            continue;
        }
        let bounds = regular
            .next()
            .cloned()
            .flatten()
            .unwrap_or_else(every_value);
        key_pattern.insert(field.clone(), kind.clone());
        field_bounds.push((field.clone(), bounds.clone()));
        slots.push(bounds);
    }
    let pattern: Document = (0..slots.len())
        .map(|i| (format!("f{i}"), Bson::Int32(1)))
        .collect();
    let intervals = byte_intervals(&pattern, &bounded_prefix(&slots));
    IndexPlan {
        index_name: ix.spec.name.clone(),
        key_pattern,
        // Every path of a document (or several values of a multikey one) may fall in the bounds.
        multikey: wild.as_ref().is_none_or(|(_, (_, multikey))| *multikey),
        field_bounds,
        intervals,
        direction: Direction::Forward,
        provides_sort: false,
        flags: IndexFlags::of(ix),
    }
}

/// The leading slots whose bounds constrain the scan: up to the last one that is not every
/// value, and no further than the product of interval counts allows.
fn bounded_prefix(slots: &[Vec<ValueInterval>]) -> Vec<Vec<ValueInterval>> {
    let all = every_value();
    let last = slots.iter().rposition(|s| *s != all).map_or(0, |i| i + 1);
    let mut product = 1usize;
    let mut out = Vec::new();
    for s in &slots[..last] {
        product = product.saturating_mul(s.len().max(1));
        if product > INTERVALS_MAX {
            break;
        }
        out.push(s.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(lo: i32, hi: i32) -> ValueInterval {
        ValueInterval {
            lo: Bson::Int32(lo),
            hi: Bson::Int32(hi),
        }
    }

    #[test]
    fn the_prefix_stops_at_the_last_bounded_slot_and_at_the_product_limit() {
        let slots = vec![vec![iv(1, 1)], every_value(), vec![iv(2, 3)], every_value()];
        assert_eq!(bounded_prefix(&slots).len(), 3);
        assert!(bounded_prefix(&[every_value(), every_value()]).is_empty());
        let wide: Vec<ValueInterval> = (0..100).map(|i| iv(i, i)).collect();
        assert_eq!(bounded_prefix(&[wide.clone(), wide.clone(), wide]).len(), 1);
    }
}
