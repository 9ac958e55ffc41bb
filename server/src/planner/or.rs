//! `$or` as an index union: when every branch of a top-level `$or` has an index candidate, each
//! branch scans its cheapest index and the union skips RecordIds already returned (mongod's OR
//! stage). Other top-level conditions next to the `$or` stay in the FETCH filter, so the union is
//! still a superset of the matches. A branch without an index candidate (or a nested `$or`)
//! makes the whole query a collection scan, as in mongod. With a sort, the union is followed by
//! a blocking SORT (no SORT_MERGE).

use super::{IndexPlan, OR_BRANCHES_MAX, TRIAL_KEYS_MAX, implies, index_candidate, trial_count};
use crate::query::matcher::Filter;
use bson::{Bson, Document};
use storage::{Collection, IndexInfo};

/// The cheapest index plan of one `$or` branch and its trial key count.
fn branch_plan(
    coll: &Collection,
    indexes: &[IndexInfo],
    branch: &Document,
) -> Option<(usize, IndexPlan)> {
    let filter = Filter::parse(branch).ok()?;
    indexes
        .iter()
        .filter(|ix| !ix.spec.hidden)
        .filter(|ix| {
            ix.spec
                .partial_filter
                .as_ref()
                .is_none_or(|p| implies(branch, p))
        })
        .filter_map(|ix| index_candidate(ix, &filter, None, false))
        .filter(|p| !p.field_bounds.is_empty())
        .map(|p| (trial_count(coll, &p, TRIAL_KEYS_MAX), p))
        .min_by_key(|(keys, _)| *keys)
}

/// The union plan of a filter's top-level `$or` with its summed trial key count, if every
/// branch can use an index.
pub fn or_candidate(
    coll: &Collection,
    indexes: &[IndexInfo],
    filter_doc: &Document,
) -> Option<(usize, Vec<IndexPlan>)> {
    let Some(Bson::Array(branches)) = filter_doc.get("$or") else {
        return None;
    };
    if branches.is_empty() || branches.len() > OR_BRANCHES_MAX {
        return None;
    }
    let mut keys = 0usize;
    let mut plans = Vec::with_capacity(branches.len());
    for branch in branches {
        let Bson::Document(branch) = branch else {
            return None;
        };
        let (n, plan) = branch_plan(coll, indexes, branch)?;
        keys = keys.saturating_add(n);
        plans.push(plan);
    }
    Some((keys, plans))
}
