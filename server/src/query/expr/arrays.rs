//! Array operators: `$size`, `$in`, `$arrayElemAt`, `$concatArrays`, `$first`/`$last`,
//! `$isArray`, `$reverseArray`, `$slice`, `$indexOfArray`, `$range`, `$anyElementTrue`/
//! `$allElementsTrue`, `$objectToArray`/`$arrayToObject`, `$sortArray` and `$zip`.

use super::Operator;
use super::args::*;
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::sort::{SortKey, SortSpec};
use crate::query::types;
use bson::{Bson, Document, RawDocumentBuf};
use std::cmp::Ordering;

/// `$size`.
pub(super) fn size(values: &[Value]) -> CommandResult<Value> {
    let first = values.first().cloned().flatten();
    match first {
        Some(Bson::Array(a)) => Ok(Some(Bson::Int32(
            i32::try_from(a.len()).unwrap_or(i32::MAX),
        ))),
        _ => Err(err(
            ErrorCode::Location17124,
            format!(
                "The argument to $size must be an array. Type of the argument was: {}",
                type_name(&values[0])
            ),
        )),
    }
}

/// `$in`.
pub(super) fn in_array(values: &[Value]) -> CommandResult<Value> {
    let first = values.first().cloned().flatten();
    match values.get(1).cloned().flatten() {
        Some(Bson::Array(items)) => {
            let needle = first.unwrap_or(Bson::Undefined);
            Ok(Some(Bson::Boolean(items.iter().any(|i| {
                crate::query::collator::compare_bson(i, &needle) == Ordering::Equal
            }))))
        }
        other => Err(err(
            ErrorCode::Location40081,
            format!(
                "$in requires an array as a second argument, found: {}",
                type_name(&other)
            ),
        )),
    }
}

pub(super) fn arrays(op: Operator, values: Vec<Value>) -> CommandResult<Value> {
    use Operator::*;
    if op == IsArray {
        return Ok(Some(Bson::Boolean(matches!(
            values[0],
            Some(Bson::Array(_))
        ))));
    }
    if op == Range {
        return range(&values);
    }
    if op == ConcatArrays {
        let mut out = Vec::new();
        let mut bytes = 0usize;
        for v in &values {
            if is_nullish(v) {
                return null();
            }
            let items = array(v, "$concatArrays")?;
            let grows: usize = items.iter().map(element_size_bytes).sum();
            bytes += grows;
            check_built("$concatArrays", bytes, grows)?;
            out.extend(items.iter().cloned());
        }
        return Ok(Some(Bson::Array(out)));
    }
    if op == ObjectToArray && !is_nullish(&values[0]) {
        return object_to_array(&values[0]);
    }
    if is_nullish(&values[0]) {
        return if matches!(op, First | Last) && values[0].is_none() {
            Ok(None)
        } else {
            null()
        };
    }
    let name = op_name(op);
    let items = array(&values[0], &name)?;
    let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
    let at = |i: i64| -> Value {
        let i = if i < 0 { len + i } else { i };
        usize::try_from(i).ok().and_then(|i| items.get(i)).cloned()
    };
    Ok(match op {
        ArrayElemAt => {
            if is_nullish(&values[1]) {
                return null();
            }
            at(as_int(&values[1], "$arrayElemAt", "second argument")?)
        }
        First => at(0),
        Last => at(-1),
        ReverseArray => Some(Bson::Array(items.iter().rev().cloned().collect())),
        Slice => {
            let (start, count) = if values.len() == 3 {
                let p = as_int(&values[1], "$slice", "second argument")?;
                let n = as_int(&values[2], "$slice", "third argument")?;
                if n <= 0 {
                    return Err(err(
                        ErrorCode::BadValue,
                        format!("Third argument to $slice must be positive: {n}"),
                    ));
                }
                (if p < 0 { (len + p).max(0) } else { p.min(len) }, n)
            } else {
                let n = as_int(&values[1], "$slice", "second argument")?;
                if n < 0 {
                    ((len + n).max(0), len)
                } else {
                    (0, n)
                }
            };
            let start = usize::try_from(start).unwrap_or(0);
            Some(Bson::Array(
                items
                    .iter()
                    .skip(start)
                    .take(usize::try_from(count).unwrap_or(usize::MAX))
                    .cloned()
                    .collect(),
            ))
        }
        IndexOfArray => {
            let needle = values[1].clone().unwrap_or(Bson::Undefined);
            let start = match values.get(2) {
                Some(v) => as_int(v, "$indexOfArray", "starting index")?,
                None => 0,
            };
            let end = match values.get(3) {
                Some(v) => as_int(v, "$indexOfArray", "ending index")?,
                None => len,
            };
            let found = (start.max(0)..end.min(len)).find(|&i| {
                at(i).is_some_and(|e| {
                    crate::query::collator::compare_bson(&e, &needle) == Ordering::Equal
                })
            });
            Some(Bson::Int32(
                found.and_then(|i| i32::try_from(i).ok()).unwrap_or(-1),
            ))
        }
        ArrayToObject => Some(Bson::Document(array_to_object(items)?)),
        AnyElementTrue => Some(Bson::Boolean(items.iter().any(types::is_truthy))),
        AllElementsTrue => Some(Bson::Boolean(items.iter().all(types::is_truthy))),
        _ => return Err(err(ErrorCode::InternalError, "array operator out of place")),
    })
}

pub(super) fn range(values: &[Value]) -> CommandResult<Value> {
    let start = as_int(&values[0], "$range", "starting value")?;
    let end = as_int(&values[1], "$range", "ending value")?;
    let step = match values.get(2) {
        Some(v) => as_int(v, "$range", "step value")?,
        None => 1,
    };
    if step == 0 {
        return Err(err(
            ErrorCode::BadValue,
            "$range requires a non-zero step value",
        ));
    }
    let mut out = Vec::new();
    let mut i = start;
    while (step > 0 && i < end) || (step < 0 && i > end) {
        if out.len() >= crate::query::limits::ARRAY_INDEX_CREATE_MAX {
            return Err(err(
                ErrorCode::BadValue,
                "$range would produce too many elements",
            ));
        }
        out.push(int_result(i, true));
        i = match i.checked_add(step) {
            Some(n) => n,
            None => break,
        };
    }
    Ok(Some(Bson::Array(out)))
}

pub(super) fn sort_array(input: Value, by: Value) -> CommandResult<Value> {
    if is_nullish(&input) {
        return null();
    }
    let Some(Bson::Array(mut items)) = input else {
        return Err(err(
            ErrorCode::BadValue,
            format!(
                "The input argument to $sortArray must be an array, but was of type: {}",
                type_name(&input)
            ),
        ));
    };
    match by {
        Some(Bson::Document(spec)) => {
            let spec = SortSpec::parse(&spec)?;
            let key = |e: &Bson| match e {
                Bson::Document(d) => RawDocumentBuf::try_from(d)
                    .map_or(SortKey(vec![Bson::Null; spec.fields.len()]), |r| {
                        spec.sort_key(&r)
                    }),
                _ => SortKey(vec![Bson::Null; spec.fields.len()]),
            };
            let mut keyed: Vec<(SortKey, Bson)> = items.into_iter().map(|e| (key(&e), e)).collect();
            keyed.sort_by(|a, b| spec.compare_keys(&a.0, &b.0));
            items = keyed.into_iter().map(|(_, e)| e).collect();
        }
        Some(n) if matches!(types::as_f64(&n), Some(1.0) | Some(-1.0)) => {
            let ascending = types::as_f64(&n) == Some(1.0);
            items.sort_by(|a, b| {
                let o = crate::query::collator::compare_bson(a, b);
                if ascending { o } else { o.reverse() }
            });
        }
        _ => {
            return Err(err(
                ErrorCode::BadValue,
                "$sortArray requires sortBy to be 1, -1 or a sort specification",
            ));
        }
    }
    Ok(Some(Bson::Array(items)))
}

pub(super) fn zip(inputs: Value, longest: Value, defaults: Value) -> CommandResult<Value> {
    let arrays = match inputs {
        Some(Bson::Array(items)) => items,
        other => {
            return Err(err(
                ErrorCode::BadValue,
                format!(
                    "inputs must be an array of expressions, found {}",
                    type_name(&other)
                ),
            ));
        }
    };
    let mut columns = Vec::with_capacity(arrays.len());
    for a in arrays {
        match a {
            Bson::Array(items) => columns.push(items),
            Bson::Null | Bson::Undefined => return null(),
            other => {
                return Err(err(
                    ErrorCode::BadValue,
                    format!("$zip found a non-array expression in input: {other}"),
                ));
            }
        }
    }
    let longest = longest.as_ref().is_some_and(types::is_truthy);
    let defaults = match defaults {
        Some(Bson::Array(d)) if d.len() == columns.len() && longest => d,
        None => vec![Bson::Null; columns.len()],
        Some(_) if !longest => {
            return Err(err(
                ErrorCode::BadValue,
                "cannot specify defaults unless useLongestLength is true",
            ));
        }
        Some(_) => {
            return Err(err(
                ErrorCode::BadValue,
                "defaults and inputs must have the same length",
            ));
        }
    };
    let rows = if longest {
        columns.iter().map(Vec::len).max().unwrap_or(0)
    } else {
        columns.iter().map(Vec::len).min().unwrap_or(0)
    };
    let out = (0..rows)
        .map(|r| {
            Bson::Array(
                columns
                    .iter()
                    .zip(&defaults)
                    .map(|(c, d)| c.get(r).cloned().unwrap_or_else(|| d.clone()))
                    .collect(),
            )
        })
        .collect();
    Ok(Some(Bson::Array(out)))
}

/// `$objectToArray` takes a document, not an array; it shares the null handling above.
pub(super) fn object_to_array(v: &Value) -> CommandResult<Value> {
    match v {
        Some(Bson::Document(d)) => Ok(Some(Bson::Array(
            d.iter()
                .map(|(k, v)| Bson::Document(bson::doc! {"k": k.clone(), "v": v.clone()}))
                .collect(),
        ))),
        other => Err(mismatch(format!(
            "$objectToArray requires a document input, found: {}",
            type_name(other)
        ))),
    }
}

pub(super) fn array_to_object(items: &[Bson]) -> CommandResult<Document> {
    let mut out = Document::new();
    for item in items {
        let (k, v) = match item {
            Bson::Array(pair) if pair.len() == 2 => (pair[0].clone(), pair[1].clone()),
            Bson::Document(d) if d.len() == 2 && d.contains_key("k") && d.contains_key("v") => (
                d.get("k").cloned().unwrap_or(Bson::Null),
                d.get("v").cloned().unwrap_or(Bson::Null),
            ),
            _ => {
                return Err(err(
                    ErrorCode::BadValue,
                    "$arrayToObject requires an array of key-value pairs",
                ));
            }
        };
        let Bson::String(k) = k else {
            return Err(mismatch(format!(
                "$arrayToObject requires keys of type string, found: {}",
                type_name(&Some(k))
            )));
        };
        out.insert(k, v);
    }
    Ok(out)
}
