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
            let items = array_arg(v, ErrorCode::Location28664, "$concatArrays' argument")?;
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
    // `$anyElementTrue` and `$allElementsTrue` take no null: it is not an array.
    if is_nullish(&values[0]) && !matches!(op, AnyElementTrue | AllElementsTrue) {
        return if matches!(op, First | Last) && values[0].is_none() {
            Ok(None)
        } else {
            null()
        };
    }
    let name = op_name(op);
    let items = array_arg(&values[0], input_code(op), &input_name(op, &name))?;
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
            at(int32_arg(
                &values[1],
                (ErrorCode::Location28690, ErrorCode::Location28691),
                "$arrayElemAt's second argument",
            )?)
        }
        First => at(0),
        Last => at(-1),
        ReverseArray => Some(Bson::Array(items.iter().rev().cloned().collect())),
        Slice => {
            if is_nullish(&values[1]) {
                return null();
            }
            let second = (ErrorCode::Location28725, ErrorCode::Location28726);
            let (start, count) = if values.len() == 3 {
                let p = int32_arg(&values[1], second, "Second argument to $slice")?;
                if is_nullish(&values[2]) {
                    return null();
                }
                let n = int32_arg(
                    &values[2],
                    (ErrorCode::Location28727, ErrorCode::Location28728),
                    "Third argument to $slice",
                )?;
                if n <= 0 {
                    return Err(err(
                        ErrorCode::Location28729,
                        format!("Third argument to $slice must be positive: {n}"),
                    ));
                }
                (if p < 0 { (len + p).max(0) } else { p.min(len) }, n)
            } else {
                let n = int32_arg(&values[1], second, "Second argument to $slice")?;
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
                Some(v) => index_arg(v, "$indexOfArray", "starting index")?,
                None => 0,
            };
            let end = match values.get(3) {
                Some(v) => index_arg(v, "$indexOfArray", "ending index")?,
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

/// The code and subject of an array operator's input that is not an array.
fn input_code(op: Operator) -> ErrorCode {
    use Operator::*;
    match op {
        ArrayElemAt | First | Last => ErrorCode::Location28689,
        Slice => ErrorCode::Location28724,
        IndexOfArray => ErrorCode::Location40090,
        ReverseArray => ErrorCode::Location34435,
        ArrayToObject => ErrorCode::Location40386,
        AnyElementTrue => ErrorCode::Location17041,
        AllElementsTrue => ErrorCode::Location17040,
        _ => ErrorCode::TypeMismatch,
    }
}

fn input_name(op: Operator, name: &str) -> String {
    match op {
        Operator::ArrayElemAt => format!("{name}'s first argument"),
        Operator::Slice => "First argument to $slice".to_string(),
        Operator::ReverseArray => "The argument to $reverseArray".to_string(),
        _ => format!("{name}'s argument"),
    }
}

pub(super) fn range(values: &[Value]) -> CommandResult<Value> {
    let start = int32_arg(
        &values[0],
        (ErrorCode::Location34443, ErrorCode::Location34444),
        "$range's starting value",
    )?;
    let end = int32_arg(
        &values[1],
        (ErrorCode::Location34445, ErrorCode::Location34446),
        "$range's ending value",
    )?;
    let step = match values.get(2) {
        Some(v) => int32_arg(
            v,
            (ErrorCode::Location34447, ErrorCode::Location34448),
            "$range's step value",
        )?,
        None => 1,
    };
    if step == 0 {
        return Err(err(
            ErrorCode::Location34449,
            "$range requires a non-zero step value",
        ));
    }
    let mut out = Vec::new();
    let mut i = start;
    while (step > 0 && i < end) || (step < 0 && i > end) {
        if out.len() >= crate::query::limits::ARRAY_INDEX_CREATE_MAX {
            return Err(err(
                ErrorCode::ExceededMemoryLimit,
                "$range would use too much memory and cannot spill to disk",
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
            ErrorCode::Location2942504,
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

/// `$zip`'s spec as mongod's parser checks it, before its arguments are parsed: an object
/// (34460) of `inputs` (an array literal, 34461; not empty, 34465), `defaults` (an array
/// literal, 34462; only with `useLongestLength`, 34466; one per input, 34467) and
/// `useLongestLength` (a bool literal, 34463); nothing else (34464).
pub(super) fn check_zip_spec(arg: &Bson) -> CommandResult<()> {
    let Bson::Document(d) = arg else {
        return Err(err(
            ErrorCode::Location34460,
            format!(
                "$zip only supports an object as an argument, found {}",
                type_name(&Some(arg.clone()))
            ),
        ));
    };
    let (mut inputs, mut defaults, mut longest) = (0, 0, false);
    for (k, v) in d {
        let found = || type_name(&Some(v.clone()));
        match (k.as_str(), v) {
            ("inputs", Bson::Array(a)) => inputs = a.len(),
            ("inputs", _) => {
                return Err(err(
                    ErrorCode::Location34461,
                    format!("inputs must be an array of expressions, found {}", found()),
                ));
            }
            ("defaults", Bson::Array(a)) => defaults = a.len(),
            ("defaults", _) => {
                return Err(err(
                    ErrorCode::Location34462,
                    format!(
                        "defaults must be an array of expressions, found {}",
                        found()
                    ),
                ));
            }
            ("useLongestLength", Bson::Boolean(b)) => longest = *b,
            ("useLongestLength", _) => {
                return Err(err(
                    ErrorCode::Location34463,
                    format!("useLongestLength must be a bool, found {}", found()),
                ));
            }
            (other, _) => {
                return Err(err(
                    ErrorCode::Location34464,
                    format!("$zip found an unknown argument: {other}"),
                ));
            }
        }
    }
    if inputs == 0 {
        return Err(err(
            ErrorCode::Location34465,
            "$zip requires at least one input array",
        ));
    }
    if defaults > 0 && !longest {
        return Err(err(
            ErrorCode::Location34466,
            "cannot specify defaults unless useLongestLength is true",
        ));
    }
    if defaults > 0 && defaults != inputs {
        return Err(err(
            ErrorCode::Location34467,
            "defaults and inputs must have the same length",
        ));
    }
    Ok(())
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
                    ErrorCode::Location34468,
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
        other => Err(err(
            ErrorCode::Location40390,
            format!(
                "$objectToArray requires a document input, found: {}",
                type_name(other)
            ),
        )),
    }
}

/// `$arrayToObject`: the first element decides the form (`[k, v]` pairs or `{k, v}`
/// documents), and every element must take it; each check has mongod's own code.
pub(super) fn array_to_object(items: &[Bson]) -> CommandResult<Document> {
    let mut out = Document::new();
    let pairs = match items.first() {
        None => return Ok(out),
        Some(Bson::Array(_)) => true,
        Some(Bson::Document(_)) => false,
        Some(other) => {
            return Err(err(
                ErrorCode::Location40398,
                format!(
                    "Unrecognised input type format for $arrayToObject: {}",
                    type_name(&Some(other.clone()))
                ),
            ));
        }
    };
    for item in items {
        let (k, v) = if pairs {
            pair_entry(item)?
        } else {
            kv_entry(item)?
        };
        if k.contains('\0') {
            return Err(err(
                ErrorCode::Location4940400,
                "Key field cannot contain an embedded null byte",
            ));
        }
        out.insert(k, v);
    }
    Ok(out)
}

fn pair_entry(item: &Bson) -> CommandResult<(String, Bson)> {
    let Bson::Array(pair) = item else {
        return Err(err(
            ErrorCode::Location40396,
            format!(
                "$arrayToObject requires a consistent input format. Elements must all be arrays or all be objects. Array was detected, now found: {}",
                type_name(&Some(item.clone()))
            ),
        ));
    };
    if pair.len() != 2 {
        return Err(err(
            ErrorCode::Location40397,
            format!(
                "$arrayToObject requires an array of size 2 arrays,found array of size: {}",
                pair.len()
            ),
        ));
    }
    match &pair[0] {
        Bson::String(k) => Ok((k.clone(), pair[1].clone())),
        other => Err(err(
            ErrorCode::Location40395,
            format!(
                "$arrayToObject requires an array of key-value pairs, where the key must be of type string. Found key type: {}",
                type_name(&Some(other.clone()))
            ),
        )),
    }
}

fn kv_entry(item: &Bson) -> CommandResult<(String, Bson)> {
    let Bson::Document(d) = item else {
        return Err(err(
            ErrorCode::Location40391,
            format!(
                "$arrayToObject requires a consistent input format. Elements must all be arrays or all be objects. Object was detected, now found: {}",
                type_name(&Some(item.clone()))
            ),
        ));
    };
    if d.len() != 2 {
        return Err(err(
            ErrorCode::Location40392,
            format!(
                "$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect number of keys:{}",
                d.len()
            ),
        ));
    }
    let (Some(k), Some(v)) = (d.get("k"), d.get("v")) else {
        return Err(err(
            ErrorCode::Location40393,
            format!(
                "$arrayToObject requires an object with keys 'k' and 'v'. Missing either or both keys from: {d}"
            ),
        ));
    };
    match k {
        Bson::String(k) => Ok((k.clone(), v.clone())),
        other => Err(err(
            ErrorCode::Location40394,
            format!(
                "$arrayToObject requires an object with keys 'k' and 'v', where the value of 'k' must be of type string. Found type: {}",
                type_name(&Some(other.clone()))
            ),
        )),
    }
}
