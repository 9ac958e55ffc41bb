//! The larger half of the value operators: math, array, string, conversion and object
//! operators. Null or missing inputs give null, as in mongod; wrong types give mongod's
//! message with the closest generic code.

use super::Operator;
use super::ops::{decimal, fold_numbers, is_nullish, kind, type_name};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::types;
use bson::{Bson, Document};
use std::cmp::Ordering;
use storage::order;

type Value = Option<Bson>;

/// `$arrayElemAt` from `Operator::ArrayElemAt`, for messages.
pub(super) fn op_name(op: Operator) -> String {
    let debug = format!("{op:?}");
    let mut chars = debug.chars();
    match chars.next() {
        Some(first) => format!("${}{}", first.to_ascii_lowercase(), chars.as_str()),
        None => String::new(),
    }
}

fn mismatch(message: String) -> crate::error::CommandError {
    err(ErrorCode::TypeMismatch, message)
}

fn null() -> CommandResult<Value> {
    Ok(Some(Bson::Null))
}

fn int_result(n: i64, narrow: bool) -> Bson {
    match i32::try_from(n) {
        Ok(small) if narrow => Bson::Int32(small),
        _ => Bson::Int64(n),
    }
}

pub(super) fn as_int(v: &Value, op: &str, what: &str) -> CommandResult<i64> {
    v.as_ref().and_then(types::as_i64_exact).ok_or_else(|| {
        mismatch(format!(
            "{op}'s {what} must be an integral value, but is of type {}",
            type_name(v)
        ))
    })
}

fn array<'a>(v: &'a Value, op: &str) -> CommandResult<&'a Vec<Bson>> {
    match v {
        Some(Bson::Array(a)) => Ok(a),
        other => Err(mismatch(format!(
            "{op}'s argument must be an array, but is {}",
            type_name(other)
        ))),
    }
}

pub(super) fn string<'a>(v: &'a Value, op: &str) -> CommandResult<&'a str> {
    match v {
        Some(Bson::String(s)) => Ok(s),
        other => Err(mismatch(format!(
            "{op} requires a string argument, found: {}",
            type_name(other)
        ))),
    }
}

pub(super) fn apply(op: Operator, values: Vec<Value>) -> CommandResult<Value> {
    use Operator::*;
    match op {
        Floor | Ceil | Sqrt | Exp | Ln | Log10 | Trunc | Round | Pow | Log => math(op, &values),
        Sum | Avg | Min | Max => accumulate(op, values),
        ArrayElemAt | ConcatArrays | First | Last | IsArray | ReverseArray | Slice
        | IndexOfArray | Range | ArrayToObject | ObjectToArray | AnyElementTrue
        | AllElementsTrue => arrays(op, values),
        StrLenBytes | StrLenCp | Substr | SubstrCp | Split | StrCaseCmp | IndexOfBytes => {
            strings(op, &values)
        }
        ToString | ToInt | ToLong | ToDouble | ToDecimal | ToBool | IsNumber => {
            convert(op, &values[0])
        }
        MergeObjects => merge_objects(values),
        Year | Month | DayOfMonth | Hour | Minute | Second | Millisecond | DayOfWeek
        | DayOfYear | Week | IsoWeek | IsoWeekYear | IsoDayOfWeek => {
            super::dates::date_part(op, &values)
        }
        SetUnion | SetIntersection | SetDifference | SetEquals | SetIsSubset | ToObjectId
        | ToDate | IndexOfCp | Rand => super::extra::apply(op, values),
        other => Err(err(
            ErrorCode::InternalError,
            format!("operator {other:?} has no implementation"),
        )),
    }
}

fn math(op: Operator, values: &[Value]) -> CommandResult<Value> {
    if values.iter().any(is_nullish) {
        return null();
    }
    let x = values[0].clone().unwrap_or(Bson::Null);
    let name = op_name(op);
    let Some(f) = types::as_f64(&x) else {
        return Err(mismatch(format!(
            "{name} only supports numeric types, not {}",
            type_name(&values[0])
        )));
    };
    let wrap = |r: f64| {
        if kind(&x) == 3 {
            decimal(r)
        } else {
            Bson::Double(r)
        }
    };
    let integral = matches!(x, Bson::Int32(_) | Bson::Int64(_));
    Ok(Some(match op {
        Operator::Floor | Operator::Ceil if integral => x,
        Operator::Floor => wrap(f.floor()),
        Operator::Ceil => wrap(f.ceil()),
        Operator::Trunc | Operator::Round => {
            let places = match values.get(1) {
                Some(p) => as_int(p, &name, "place")?,
                None => 0,
            };
            if integral && places >= 0 {
                return Ok(Some(x));
            }
            let scale = 10f64.powi(i32::try_from(places.clamp(-20, 100)).unwrap_or(0));
            let scaled = f * scale;
            let r = if op == Operator::Trunc {
                scaled.trunc()
            } else {
                scaled.round_ties_even()
            } / scale;
            match x {
                Bson::Int32(_) => Bson::Int32(r as i32),
                Bson::Int64(_) => Bson::Int64(r as i64),
                _ => wrap(r),
            }
        }
        Operator::Sqrt if f < 0.0 => {
            return Err(err(
                ErrorCode::BadValue,
                "$sqrt's argument must be greater than or equal to 0",
            ));
        }
        Operator::Sqrt => wrap(f.sqrt()),
        Operator::Exp => wrap(f.exp()),
        Operator::Ln | Operator::Log10 | Operator::Log if f <= 0.0 => {
            return Err(err(
                ErrorCode::BadValue,
                format!("{name}'s argument must be a positive number, but is {f}"),
            ));
        }
        Operator::Ln => wrap(f.ln()),
        Operator::Log10 => wrap(f.log10()),
        Operator::Log | Operator::Pow => {
            let y = values[1].clone().unwrap_or(Bson::Null);
            let Some(g) = types::as_f64(&y) else {
                return Err(mismatch(format!(
                    "{name} only supports numeric types, not {}",
                    type_name(&values[1])
                )));
            };
            if op == Operator::Log {
                if g <= 0.0 || g == 1.0 {
                    return Err(err(
                        ErrorCode::BadValue,
                        format!("$log's base must be a positive number not equal to 1, but is {g}"),
                    ));
                }
                wrap(f.ln() / g.ln())
            } else {
                power(&x, &y, f, g)?
            }
        }
        _ => return Err(err(ErrorCode::InternalError, "math operator out of place")),
    }))
}

fn power(x: &Bson, y: &Bson, f: f64, g: f64) -> CommandResult<Bson> {
    if f == 0.0 && g < 0.0 {
        return Err(err(
            ErrorCode::BadValue,
            "$pow cannot take a base of 0 and a negative exponent",
        ));
    }
    let widest = kind(x).max(kind(y));
    if widest <= 1
        && let (Some(b), Some(e)) = (types::as_i64_exact(x), types::as_i64_exact(y))
        && e >= 0
        && let Some(r) = u32::try_from(e).ok().and_then(|e| b.checked_pow(e))
    {
        return Ok(int_result(r, widest == 0));
    }
    Ok(if widest == 3 {
        decimal(f.powf(g))
    } else {
        Bson::Double(f.powf(g))
    })
}

/// `$sum/$avg/$min/$max` as expressions: one array argument means its elements.
fn accumulate(op: Operator, values: Vec<Value>) -> CommandResult<Value> {
    let items: Vec<Bson> = match values.as_slice() {
        [Some(Bson::Array(a))] => a.clone(),
        _ => values.into_iter().flatten().collect(),
    };
    match op {
        Operator::Sum | Operator::Avg => {
            let numbers: Vec<Bson> = items.into_iter().filter(types::is_number).collect();
            if op == Operator::Avg {
                if numbers.is_empty() {
                    return null();
                }
                let total: f64 = numbers.iter().filter_map(types::as_f64).sum();
                #[allow(clippy::cast_precision_loss)]
                let avg = total / numbers.len() as f64;
                let any_decimal = numbers.iter().any(|n| kind(n) == 3);
                return Ok(Some(if any_decimal {
                    decimal(avg)
                } else {
                    Bson::Double(avg)
                }));
            }
            Ok(Some(fold_numbers(
                &numbers,
                i64::checked_add,
                |a, b| a + b,
                0,
            )))
        }
        _ => {
            let want = if op == Operator::Min {
                Ordering::Less
            } else {
                Ordering::Greater
            };
            let best = items
                .into_iter()
                .filter(|v| !matches!(v, Bson::Null | Bson::Undefined))
                .reduce(|best, v| {
                    if order::compare_bson(&v, &best) == want {
                        v
                    } else {
                        best
                    }
                });
            Ok(Some(best.unwrap_or(Bson::Null)))
        }
    }
}

fn arrays(op: Operator, values: Vec<Value>) -> CommandResult<Value> {
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
        for v in &values {
            if is_nullish(v) {
                return null();
            }
            out.extend(array(v, "$concatArrays")?.iter().cloned());
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
                at(i).is_some_and(|e| order::compare_bson(&e, &needle) == Ordering::Equal)
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

/// `$objectToArray` takes a document, not an array; it shares the null handling above.
fn object_to_array(v: &Value) -> CommandResult<Value> {
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

fn array_to_object(items: &[Bson]) -> CommandResult<Document> {
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

fn range(values: &[Value]) -> CommandResult<Value> {
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

fn strings(op: Operator, values: &[Value]) -> CommandResult<Value> {
    use Operator::*;
    if matches!(op, Split | IndexOfBytes) && is_nullish(&values[0]) {
        return null();
    }
    Ok(Some(match op {
        StrLenBytes => Bson::Int32(
            i32::try_from(string(&values[0], "$strLenBytes")?.len()).unwrap_or(i32::MAX),
        ),
        StrLenCp => Bson::Int32(
            i32::try_from(string(&values[0], "$strLenCP")?.chars().count()).unwrap_or(i32::MAX),
        ),
        Substr | SubstrCp => {
            let text = if is_nullish(&values[0]) {
                String::new()
            } else {
                super::ops::to_text(&values[0])?
            };
            let start = usize::try_from(as_int(&values[1], "$substr", "starting index")?.max(0))
                .unwrap_or(0);
            let count = as_int(&values[2], "$substr", "length")?;
            let count = if count < 0 {
                usize::MAX
            } else {
                usize::try_from(count).unwrap_or(usize::MAX)
            };
            if op == SubstrCp {
                Bson::String(text.chars().skip(start).take(count).collect())
            } else {
                let end = start.saturating_add(count).min(text.len());
                let start = start.min(text.len());
                match text.get(start..end) {
                    Some(s) => Bson::String(s.to_string()),
                    None => {
                        return Err(err(
                            ErrorCode::BadValue,
                            "$substrBytes: Invalid range, starting or ending index is a UTF-8 continuation byte.",
                        ));
                    }
                }
            }
        }
        Split => {
            let (s, d) = (string(&values[0], "$split")?, string(&values[1], "$split")?);
            if d.is_empty() {
                return Err(err(
                    ErrorCode::BadValue,
                    "$split requires a non-empty separator",
                ));
            }
            Bson::Array(s.split(d).map(|p| Bson::String(p.to_string())).collect())
        }
        StrCaseCmp => {
            let a = super::ops::to_text(&values[0])?.to_ascii_lowercase();
            let b = super::ops::to_text(&values[1])?.to_ascii_lowercase();
            Bson::Int32(match a.cmp(&b) {
                Ordering::Less => -1,
                Ordering::Equal => 0,
                Ordering::Greater => 1,
            })
        }
        IndexOfBytes => {
            let (s, sub) = (
                string(&values[0], "$indexOfBytes")?,
                string(&values[1], "$indexOfBytes")?,
            );
            let start = match values.get(2) {
                Some(v) => usize::try_from(as_int(v, "$indexOfBytes", "starting index")?.max(0))
                    .unwrap_or(0),
                None => 0,
            };
            let end = match values.get(3) {
                Some(v) => {
                    usize::try_from(as_int(v, "$indexOfBytes", "ending index")?.max(0)).unwrap_or(0)
                }
                None => s.len(),
            };
            let hay = s.as_bytes().get(start..end.min(s.len())).unwrap_or(&[]);
            let found = hay
                .windows(sub.len().max(1))
                .position(|w| w == sub.as_bytes())
                .map(|i| i + start);
            let found = if sub.is_empty() && start <= s.len() {
                Some(start)
            } else {
                found
            };
            Bson::Int32(found.and_then(|i| i32::try_from(i).ok()).unwrap_or(-1))
        }
        _ => {
            return Err(err(
                ErrorCode::InternalError,
                "string operator out of place",
            ));
        }
    }))
}

pub(super) fn convert(op: Operator, v: &Value) -> CommandResult<Value> {
    use Operator::*;
    if op == IsNumber {
        return Ok(Some(Bson::Boolean(
            v.as_ref().is_some_and(types::is_number),
        )));
    }
    let Some(x) = v
        .as_ref()
        .filter(|x| !matches!(x, Bson::Null | Bson::Undefined))
    else {
        return null();
    };
    let fail = || {
        err(
            ErrorCode::BadValue,
            format!(
                "Unsupported conversion from {} to {} in $convert with no onError value",
                type_name(v),
                format!("{op:?}").trim_start_matches("To").to_lowercase()
            ),
        )
    };
    let number = || -> Option<f64> {
        match x {
            Bson::Boolean(b) => Some(if *b { 1.0 } else { 0.0 }),
            #[allow(clippy::cast_precision_loss)]
            Bson::DateTime(d) => Some(d.timestamp_millis() as f64),
            Bson::String(s) => s.trim().parse::<f64>().ok(),
            other => types::as_f64(other),
        }
    };
    Ok(Some(match op {
        ToBool => Bson::Boolean(match x {
            Bson::String(_) => true,
            other => types::is_truthy(other),
        }),
        ToString => Bson::String(match x {
            Bson::String(s) => s.clone(),
            Bson::Boolean(b) => b.to_string(),
            Bson::ObjectId(o) => o.to_hex(),
            Bson::DateTime(d) => d.try_to_rfc3339_string().map_err(|_| fail())?,
            Bson::Double(d) if d.fract() == 0.0 && d.is_finite() && d.abs() < 1e15 => {
                format!("{d:.0}")
            }
            other if types::is_number(other) => super::ops::to_text(v)?,
            _ => return Err(fail()),
        }),
        ToInt | ToLong => {
            let n = match x {
                Bson::Int32(i) => i64::from(*i),
                Bson::Int64(i) => *i,
                Bson::DateTime(d) if op == ToLong => d.timestamp_millis(),
                Bson::String(s) => s.trim().parse::<i64>().map_err(|_| fail())?,
                Bson::DateTime(_) => return Err(fail()),
                _ => {
                    let f = number().ok_or_else(fail)?;
                    types::f64_to_i64_exact(f.trunc()).ok_or_else(fail)?
                }
            };
            if op == ToInt {
                Bson::Int32(i32::try_from(n).map_err(|_| fail())?)
            } else {
                Bson::Int64(n)
            }
        }
        ToDouble => Bson::Double(number().ok_or_else(fail)?),
        ToDecimal => match x {
            Bson::Decimal128(d) => Bson::Decimal128(*d),
            Bson::String(s) => {
                Bson::Decimal128(s.trim().parse::<bson::Decimal128>().map_err(|_| fail())?)
            }
            Bson::Int32(i) => decimal(f64::from(*i)),
            Bson::Int64(i) => format!("{i}")
                .parse::<bson::Decimal128>()
                .map_or_else(|_| decimal(*i as f64), Bson::Decimal128),
            _ => decimal(number().ok_or_else(fail)?),
        },
        _ => return Err(err(ErrorCode::InternalError, "conversion out of place")),
    }))
}

fn merge_objects(values: Vec<Value>) -> CommandResult<Value> {
    let inputs: Vec<Value> = match values.as_slice() {
        [Some(Bson::Array(a))] => a.iter().cloned().map(Some).collect(),
        _ => values,
    };
    let mut out = Document::new();
    for (i, v) in inputs.iter().enumerate() {
        match v {
            _ if is_nullish(v) => {}
            Some(Bson::Document(d)) => {
                for (k, x) in d {
                    out.insert(k.clone(), x.clone());
                }
            }
            other => {
                return Err(mismatch(format!(
                    "$mergeObjects requires object inputs, but input {i} is of type {}",
                    type_name(other)
                )));
            }
        }
    }
    Ok(Some(Bson::Document(out)))
}
