//! Set operators: `$setUnion`, `$setIntersection`, `$setDifference`, `$setEquals`,
//! `$setIsSubset` (arrays as sets under `storage::order`'s equality).

use super::Operator;
use super::args::*;
use crate::error::CommandResult;
use bson::Bson;
use std::cmp::Ordering;

pub(super) fn contains(items: &[Bson], v: &Bson) -> bool {
    items
        .iter()
        .any(|x| crate::query::collator::compare_bson(x, v) == Ordering::Equal)
}

pub(super) fn distinct(items: impl IntoIterator<Item = Bson>) -> Vec<Bson> {
    let mut out: Vec<Bson> = Vec::new();
    for v in items {
        if !contains(&out, &v) {
            out.push(v);
        }
    }
    out
}

pub(super) fn set_args(op: &str, values: &[Value]) -> CommandResult<Option<Vec<Vec<Bson>>>> {
    let mut out = Vec::with_capacity(values.len());
    for v in values {
        match v {
            _ if is_nullish(v) => return Ok(None),
            Some(Bson::Array(a)) => out.push(a.clone()),
            other => {
                return Err(mismatch(format!(
                    "All operands of {op} must be arrays. One argument is of type: {}",
                    type_name(other)
                )));
            }
        }
    }
    Ok(Some(out))
}

pub(super) fn sets(op: Operator, values: &[Value]) -> CommandResult<Value> {
    let name = match op {
        Operator::SetUnion => "$setUnion",
        Operator::SetIntersection => "$setIntersection",
        Operator::SetDifference => "$setDifference",
        Operator::SetEquals => "$setEquals",
        _ => "$setIsSubset",
    };
    let Some(sets) = set_args(name, values)? else {
        if matches!(op, Operator::SetEquals | Operator::SetIsSubset) {
            return Err(mismatch(format!("All operands of {name} must be arrays.")));
        }
        return null();
    };
    let sorted = |v: Vec<Bson>| {
        let mut v = distinct(v);
        v.sort_by(crate::query::collator::compare_bson);
        Some(Bson::Array(v))
    };
    Ok(match op {
        Operator::SetUnion => sorted(sets.into_iter().flatten().collect()),
        Operator::SetIntersection => {
            let mut iter = sets.into_iter();
            let first = iter.next().unwrap_or_default();
            let rest: Vec<Vec<Bson>> = iter.collect();
            sorted(
                first
                    .into_iter()
                    .filter(|v| rest.iter().all(|s| contains(s, v)))
                    .collect(),
            )
        }
        Operator::SetDifference => sorted(
            sets[0]
                .iter()
                .filter(|v| !contains(&sets[1], v))
                .cloned()
                .collect(),
        ),
        Operator::SetEquals => {
            let first = distinct(sets[0].clone());
            Some(Bson::Boolean(sets[1..].iter().all(|s| {
                let d = distinct(s.clone());
                d.len() == first.len() && d.iter().all(|v| contains(&first, v))
            })))
        }
        _ => Some(Bson::Boolean(sets[0].iter().all(|v| contains(&sets[1], v)))),
    })
}
