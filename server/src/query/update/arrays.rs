//! The array operators: `$push` (with `$each`, `$position`, `$sort`, `$slice`), `$addToSet`,
//! `$pop`, `$pull` and `$pullAll`. Element equality is the one BSON order's equality (so `1`
//! and `1.0` are the same element), as in mongod.

use super::apply::{Slot, identical};
use super::ops::{PullCondition, PushSort, PushSpec};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::sort::SortKey;
use crate::query::types;
use bson::{Bson, RawDocumentBuf, doc};
use std::cmp::Ordering;

fn type_of(v: &Bson) -> &'static str {
    types::type_name(types::type_code(v))
}

pub(super) fn push(
    slot: &mut Slot<'_>,
    spec: &PushSpec,
    field: &str,
    id_text: &str,
) -> CommandResult<bool> {
    let mut items = match slot.get() {
        None => Vec::new(),
        Some(Bson::Array(a)) => a.clone(),
        Some(other) => {
            return Err(err(
                ErrorCode::BadValue,
                format!(
                    "The field '{field}' must be an array but is of type {} in document {id_text}",
                    type_of(other)
                ),
            ));
        }
    };
    let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
    let at = match spec.position {
        None => len,
        Some(p) if p >= 0 => p.min(len),
        Some(p) => (len + p).max(0),
    };
    let at = usize::try_from(at).unwrap_or(items.len());
    items.splice(at..at, spec.each.iter().cloned());
    match &spec.sort {
        Some(PushSort::Whole(asc)) => {
            items.sort_by(|a, b| directed(crate::query::collator::compare_bson(a, b), *asc))
        }
        Some(PushSort::Fields(sort)) => {
            let mut keyed: Vec<(SortKey, Bson)> = items
                .into_iter()
                .map(|e| (element_key(sort, &e), e))
                .collect();
            keyed.sort_by(|a, b| sort.compare_keys(&a.0, &b.0));
            items = keyed.into_iter().map(|(_, e)| e).collect();
        }
        None => {}
    }
    if let Some(n) = spec.slice {
        let keep = usize::try_from(n.unsigned_abs()).unwrap_or(usize::MAX);
        if n >= 0 {
            items.truncate(keep);
        } else if items.len() > keep {
            items.drain(..items.len() - keep);
        }
    }
    let next = Bson::Array(items);
    if slot.get().is_some_and(|old| identical(old, &next)) {
        return Ok(false);
    }
    slot.set(next);
    Ok(true)
}

fn directed(o: Ordering, ascending: bool) -> Ordering {
    if ascending { o } else { o.reverse() }
}

/// Sort key of one pushed element; non-documents sort as if every field were missing.
fn element_key(sort: &crate::query::sort::SortSpec, e: &Bson) -> SortKey {
    match e {
        Bson::Document(d) => match RawDocumentBuf::try_from(d) {
            Ok(raw) => sort.sort_key(&raw),
            Err(_) => SortKey(vec![Bson::Null; sort.fields.len()]),
        },
        _ => SortKey(vec![Bson::Null; sort.fields.len()]),
    }
}

pub(super) fn add_to_set(slot: &mut Slot<'_>, values: &[Bson], field: &str) -> CommandResult<bool> {
    let mut items = match slot.get() {
        None => Vec::new(),
        Some(Bson::Array(a)) => a.clone(),
        Some(other) => {
            return Err(err(
                ErrorCode::BadValue,
                format!(
                    "Cannot apply $addToSet to non-array field. Field named '{field}' has non-array type {}",
                    type_of(other)
                ),
            ));
        }
    };
    let created = slot.get().is_none();
    let mut added = false;
    for v in values {
        if !items
            .iter()
            .any(|e| crate::query::collator::compare_bson(e, v) == Ordering::Equal)
        {
            items.push(v.clone());
            added = true;
        }
    }
    if added || created {
        slot.set(Bson::Array(items));
    }
    Ok(added || created)
}

pub(super) fn pop(slot: &mut Slot<'_>, first: bool, path: &str) -> CommandResult<bool> {
    match slot.get_mut() {
        None => Ok(false),
        Some(Bson::Array(a)) if a.is_empty() => Ok(false),
        Some(Bson::Array(a)) => {
            if first {
                a.remove(0);
            } else {
                a.pop();
            }
            Ok(true)
        }
        Some(other) => Err(err(
            ErrorCode::TypeMismatch,
            format!(
                "Path '{path}' contains an element of non-array type '{}'",
                type_of(other)
            ),
        )),
    }
}

pub(super) fn pull(slot: &mut Slot<'_>, matches: impl Fn(&Bson) -> bool) -> CommandResult<bool> {
    match slot.get_mut() {
        None => Ok(false),
        Some(Bson::Array(a)) => {
            let before = a.len();
            a.retain(|e| !matches(e));
            Ok(a.len() != before)
        }
        Some(_) => Err(err(
            ErrorCode::BadValue,
            "Cannot apply $pull to a non-array value",
        )),
    }
}

pub(super) fn pull_matches(cond: &PullCondition, e: &Bson) -> bool {
    match cond {
        PullCondition::Equal(v) => crate::query::collator::compare_bson(v, e) == Ordering::Equal,
        PullCondition::Regex(r) => match e {
            Bson::String(s) | Bson::Symbol(s) => r.is_match(s),
            Bson::RegularExpression(x) => {
                x.pattern.as_str() == r.pattern && x.options.as_str() == r.options
            }
            _ => false,
        },
        PullCondition::Filter(f) => match RawDocumentBuf::try_from(&doc! {"v": e.clone()}) {
            Ok(wrapper) => match wrapper.get("v") {
                Ok(Some(raw)) => f.matches_value(raw),
                _ => false,
            },
            Err(_) => false,
        },
    }
}
