//! `$or` as an index union: when every branch of a top-level `$or` has an index candidate, each
//! branch scans its cheapest index and the union skips RecordIds already returned (mongod's OR
//! stage). Other top-level conditions next to the `$or` stay in the FETCH filter, so the union is
//! still a superset of the matches. A branch without an index candidate (or a nested `$or`)
//! makes the whole query a collection scan, as in mongod. With a sort that every branch can get
//! from an index (one interval, or points on the fields before the sort), the branches are
//! merged in sort order (SORT_MERGE); otherwise the union is followed by a blocking SORT.

use super::{
    IndexPlan, OR_BRANCHES_MAX, Plan, TRIAL_KEYS_MAX, candidates_of, implies, trial_count,
};
use crate::query::matcher::Filter;
use crate::query::sort::SortSpec;
use bson::{Bson, Document};
use storage::{Collection, IndexInfo};

type Scored = (usize, IndexPlan);

/// The cheapest index plan of one `$or` branch, and the cheapest one that gives `sort`.
fn branch_plans(
    coll: &Collection,
    indexes: &[IndexInfo],
    branch: &Document,
    sort: Option<&Document>,
) -> Option<(Scored, Option<Scored>)> {
    let filter = Filter::parse(branch).ok()?;
    let scored: Vec<Scored> = indexes
        .iter()
        .filter(|ix| !ix.spec.hidden)
        .filter(|ix| {
            ix.spec
                .partial_filter
                .as_ref()
                .is_none_or(|p| implies(branch, p))
        })
        .flat_map(|ix| candidates_of(coll, ix, &filter, sort))
        .filter(|p| !p.field_bounds.is_empty())
        .map(|p| (trial_count(coll, &p, TRIAL_KEYS_MAX), p))
        .collect();
    let sorted = scored
        .iter()
        .filter(|(_, p)| p.provides_sort)
        .min_by_key(|(keys, _)| *keys)
        .cloned();
    let best = scored.into_iter().min_by_key(|(keys, _)| *keys)?;
    Some((best, sorted))
}

/// The union plan of a filter's top-level `$or` with its summed trial key count, if every
/// branch can use an index; a SORT_MERGE when every branch can also give `sort`.
pub fn or_candidate(
    coll: &Collection,
    indexes: &[IndexInfo],
    filter_doc: &Document,
    sort: Option<&Document>,
) -> Option<(usize, Plan)> {
    let Some(Bson::Array(branches)) = filter_doc.get("$or") else {
        return None;
    };
    if branches.is_empty() || branches.len() > OR_BRANCHES_MAX {
        return None;
    }
    let mut plain = (0usize, Vec::with_capacity(branches.len()));
    let mut merged = Some((0usize, Vec::with_capacity(branches.len())));
    for branch in branches {
        let Bson::Document(branch) = branch else {
            return None;
        };
        let ((n, plan), sorted) = branch_plans(coll, indexes, branch, sort)?;
        plain.0 = plain.0.saturating_add(n);
        plain.1.push(plan);
        merged = match (merged, sorted) {
            (Some((total, mut plans)), Some((n, p))) => {
                plans.push(p);
                Some((total.saturating_add(n), plans))
            }
            _ => None,
        };
    }
    let spec = sort.and_then(|s| SortSpec::parse(s).ok().map(|spec| (spec, s.clone())));
    if let (Some((keys, branches)), Some(merge)) = (merged, spec) {
        return Some((
            keys,
            Plan::Or {
                branches,
                merge: Some(merge),
            },
        ));
    }
    let mut branches = plain.1;
    for b in &mut branches {
        // Read in index order; the SORT above orders the union.
        b.provides_sort = false;
    }
    Some((
        plain.0,
        Plan::Or {
            branches,
            merge: None,
        },
    ))
}
