//! `find` with `min` / `max`: a hinted index scan bounded to `[min, max)` in index order.
//! Each bound is a document naming the key pattern's fields in order (mongod's rule); the
//! filter still applies to every fetched document.

use super::IndexPlan;
use super::bounds::ValueInterval;
use crate::error::{CommandError, CommandResult, ErrorCode, err};
use bson::{Bson, Document};
use storage::{Direction, IndexInfo};

/// A mongod error whose code has no row in our error table: the reply carries mongod's number.
fn located(code: i32, message: &str) -> CommandError {
    err(
        ErrorCode::from_code(code).unwrap_or(ErrorCode::BadValue),
        message,
    )
}

/// mongod's error when `min`/`max` come without a hint.
pub fn hint_required() -> CommandError {
    located(
        51173,
        "When using min()/max() a hint of which index to use must be provided",
    )
}

fn inconsistent() -> CommandError {
    located(51174, "The index chosen is not consistent with min/max")
}

/// The values of a bound document, in key-pattern order, if its fields are the pattern's.
fn bound_values(bound: &Document, pattern: &Document) -> CommandResult<Vec<Bson>> {
    if bound.len() != pattern.len() || !bound.keys().zip(pattern.keys()).all(|(a, b)| a == b) {
        return Err(inconsistent());
    }
    Ok(bound.values().cloned().collect())
}

/// The plan of a hinted index scan between `min` (inclusive) and `max` (exclusive).
pub fn min_max_plan(
    ix: &IndexInfo,
    min: Option<&Document>,
    max: Option<&Document>,
    sort: Option<&Document>,
) -> CommandResult<IndexPlan> {
    let pattern = &ix.spec.key;
    // A collated index is ordered by its collation: `min`/`max` strings are placed by it too.
    let collator = super::collated::of_spec(ix.spec.collation()).ok().flatten();
    let keyed = |values: Vec<Bson>| match &collator {
        Some(c) => values.iter().map(|v| c.key(v).into_owned()).collect(),
        None => values,
    };
    let lo_values = min
        .map(|m| bound_values(m, pattern))
        .transpose()?
        .map(keyed);
    let hi_values = max
        .map(|m| bound_values(m, pattern))
        .transpose()?
        .map(keyed);
    let lo = lo_values
        .as_ref()
        .map_or_else(Vec::new, |v| storage::encode_index_key(pattern, v));
    let hi = hi_values
        .as_ref()
        .map_or_else(|| vec![0xFF; 64], |v| storage::encode_index_key(pattern, v));
    // An empty range (min at or above max) reads nothing.
    let intervals = if lo < hi { vec![(lo, hi)] } else { vec![] };
    let field_bounds = pattern
        .keys()
        .enumerate()
        .map(|(i, f)| {
            let pick = |vals: &Option<Vec<Bson>>, dflt: Bson| {
                vals.as_ref()
                    .and_then(|v| v.get(i).cloned())
                    .unwrap_or(dflt)
            };
            let iv = ValueInterval {
                lo: pick(&lo_values, Bson::MinKey),
                hi: pick(&hi_values, Bson::MaxKey),
            };
            (f.clone(), vec![iv])
        })
        .collect();
    let sort_dir = sort
        .and_then(|s| super::sort_direction(pattern, s))
        .filter(|_| !ix.multikey);
    Ok(IndexPlan {
        index_name: ix.spec.name.clone(),
        key_pattern: pattern.clone(),
        multikey: ix.multikey,
        field_bounds,
        intervals,
        direction: sort_dir.unwrap_or(Direction::Forward),
        provides_sort: sort_dir.is_some(),
        flags: super::IndexFlags::of(ix),
    })
}

/// The choice for a `find` with `min` and/or `max`: the hinted index (`hint` None: the
/// caller had no index hint, which mongod refuses).
pub fn choose_bounded(
    coll: &storage::Collection,
    hint: Option<&str>,
    min: Option<&Document>,
    max: Option<&Document>,
    sort: Option<&Document>,
) -> CommandResult<super::Choice> {
    let name = hint.ok_or_else(hint_required)?;
    let ix = coll
        .indexes()
        .into_iter()
        .find(|i| i.spec.name == name)
        .ok_or_else(inconsistent)?;
    Ok(super::Choice {
        winner: super::Plan::Index(min_max_plan(&ix, min, max, sort)?),
        rejected: vec![],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn bounds_must_name_the_pattern_fields_in_order() {
        let pattern = doc! { "a": 1, "b": -1 };
        assert!(bound_values(&doc! { "a": 1, "b": 2 }, &pattern).is_ok());
        assert!(bound_values(&doc! { "b": 2, "a": 1 }, &pattern).is_err());
        assert!(bound_values(&doc! { "a": 1 }, &pattern).is_err());
        assert_eq!(
            inconsistent().to_reply().get_i32("code").unwrap(),
            51174,
            "mongod's code on the wire"
        );
    }
}
