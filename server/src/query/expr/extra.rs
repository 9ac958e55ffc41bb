//! Set operators, `$toObjectId`/`$toDate`/`$convert`, `$indexOfCP`, `$rand`, the regex and
//! replace operators, `$sortArray`; date operators are routed to `date_math.rs` and
//! `date_parts.rs`.

use super::ops::{is_nullish, type_name};
use super::{NamedOp, Operator};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::matcher::RegexPred;
use crate::query::sort::{SortKey, SortSpec};
use crate::query::types;
use bson::oid::ObjectId;
use bson::{Bson, DateTime, RawDocumentBuf, doc};
use std::cmp::Ordering;
use storage::order;

type Value = Option<Bson>;

fn mismatch(message: String) -> crate::error::CommandError {
    err(ErrorCode::TypeMismatch, message)
}

fn null() -> CommandResult<Value> {
    Ok(Some(Bson::Null))
}

fn contains(items: &[Bson], v: &Bson) -> bool {
    items
        .iter()
        .any(|x| order::compare_bson(x, v) == Ordering::Equal)
}

fn distinct(items: impl IntoIterator<Item = Bson>) -> Vec<Bson> {
    let mut out: Vec<Bson> = Vec::new();
    for v in items {
        if !contains(&out, &v) {
            out.push(v);
        }
    }
    out
}

fn set_args(op: &str, values: &[Value]) -> CommandResult<Option<Vec<Vec<Bson>>>> {
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

pub(super) fn apply(op: Operator, values: Vec<Value>) -> CommandResult<Value> {
    use Operator::*;
    match op {
        SetUnion | SetIntersection | SetDifference | SetEquals | SetIsSubset => sets(op, &values),
        ToObjectId => to_object_id(&values[0]),
        ToDate => to_date(&values[0]),
        IndexOfCp => index_of_cp(&values),
        Rand => Ok(Some(Bson::Double(rand::random::<f64>()))),
        other => Err(err(
            ErrorCode::InternalError,
            format!("operator {other:?} has no implementation"),
        )),
    }
}

fn sets(op: Operator, values: &[Value]) -> CommandResult<Value> {
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
        v.sort_by(order::compare_bson);
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

fn conversion_error(v: &Value, to: &str) -> crate::error::CommandError {
    err(
        ErrorCode::BadValue,
        format!(
            "Unsupported conversion from {} to {to} in $convert with no onError value",
            type_name(v)
        ),
    )
}

fn to_object_id(v: &Value) -> CommandResult<Value> {
    Ok(match v {
        _ if is_nullish(v) => Some(Bson::Null),
        Some(Bson::ObjectId(o)) => Some(Bson::ObjectId(*o)),
        Some(Bson::String(s)) => Some(Bson::ObjectId(ObjectId::parse_str(s).map_err(|_| {
            err(ErrorCode::BadValue, format!("Failed to parse objectId '{s}' in $convert with no onError value: Invalid string length for parsing to OID, expected 24 but found {}", s.len()))
        })?)),
        other => return Err(conversion_error(other, "objectId")),
    })
}

fn to_date(v: &Value) -> CommandResult<Value> {
    let date = |ms: i64| Ok(Some(Bson::DateTime(DateTime::from_millis(ms))));
    match v {
        _ if is_nullish(v) => null(),
        Some(Bson::DateTime(d)) => Ok(Some(Bson::DateTime(*d))),
        Some(Bson::Int64(ms)) => date(*ms),
        Some(Bson::Double(_) | Bson::Decimal128(_)) => {
            let f = v.as_ref().and_then(types::as_f64).unwrap_or(f64::NAN);
            match types::f64_to_i64_exact(f.trunc()) {
                Some(ms) => date(ms),
                None => Err(conversion_error(v, "date")),
            }
        }
        Some(Bson::String(s)) => match DateTime::parse_rfc3339_str(s) {
            Ok(d) => Ok(Some(Bson::DateTime(d))),
            Err(_) => Err(err(
                ErrorCode::BadValue,
                format!("Error parsing date string '{s}'"),
            )),
        },
        Some(Bson::ObjectId(o)) => Ok(Some(Bson::DateTime(o.timestamp()))),
        Some(Bson::Timestamp(t)) => date(i64::from(t.time) * 1000),
        other => Err(conversion_error(other, "date")),
    }
}

fn index_of_cp(values: &[Value]) -> CommandResult<Value> {
    if is_nullish(&values[0]) {
        return null();
    }
    let (Some(Bson::String(s)), Some(Bson::String(sub))) = (&values[0], &values[1]) else {
        return Err(mismatch("$indexOfCP requires string arguments".to_string()));
    };
    let index = |i: usize| {
        values
            .get(i)
            .and_then(|v| v.as_ref())
            .and_then(types::as_i64_exact)
    };
    let chars: Vec<char> = s.chars().collect();
    let needle: Vec<char> = sub.chars().collect();
    let start = usize::try_from(index(2).unwrap_or(0).max(0)).unwrap_or(0);
    let end = index(3)
        .map_or(chars.len(), |e| usize::try_from(e.max(0)).unwrap_or(0))
        .min(chars.len());
    let found = (start..=end.saturating_sub(needle.len()))
        .take_while(|i| i + needle.len() <= end)
        .find(|&i| chars[i..i + needle.len()] == needle[..]);
    Ok(Some(Bson::Int32(
        found.and_then(|i| i32::try_from(i).ok()).unwrap_or(-1),
    )))
}

/// Named-argument operators; `values[i]` is `None` when the argument was not given.
pub(super) fn apply_named(op: NamedOp, values: Vec<Option<Value>>) -> CommandResult<Value> {
    let arg = |i: usize| values.get(i).cloned().flatten().flatten();
    match op {
        NamedOp::RegexMatch | NamedOp::RegexFind | NamedOp::RegexFindAll => {
            regex_op(op, arg(0), arg(1), arg(2))
        }
        NamedOp::ReplaceOne | NamedOp::ReplaceAll => {
            let (input, find, replacement) = (arg(0), arg(1), arg(2));
            if [&input, &find, &replacement].iter().any(|v| is_nullish(v)) {
                return null();
            }
            let (Some(Bson::String(i)), Some(Bson::String(f)), Some(Bson::String(r))) =
                (input, find, replacement)
            else {
                return Err(mismatch(
                    "$replaceOne/$replaceAll require string 'input', 'find' and 'replacement'"
                        .to_string(),
                ));
            };
            Ok(Some(Bson::String(if op == NamedOp::ReplaceOne {
                i.replacen(&f, &r, 1)
            } else {
                i.replace(&f, &r)
            })))
        }
        NamedOp::SortArray => sort_array(arg(0), arg(1)),
        NamedOp::Convert => {
            let input = arg(0);
            let on_null = values.get(3).cloned().flatten();
            if is_nullish(&input) {
                return Ok(on_null.unwrap_or(Some(Bson::Null)));
            }
            match convert_to(&input, arg(1)) {
                Ok(v) => Ok(v),
                Err(e) => match values.get(2).cloned().flatten() {
                    Some(on_error) => Ok(on_error),
                    None => Err(e),
                },
            }
        }
        NamedOp::DateAdd | NamedOp::DateSubtract | NamedOp::DateDiff | NamedOp::DateTrunc => {
            super::date_math::apply_named(op, values)
        }
        NamedOp::DateToParts | NamedOp::DateFromParts | NamedOp::DateFromString => {
            super::date_parts::apply_named(op, values)
        }
        NamedOp::SetField | NamedOp::UnsetField | NamedOp::Zip => {
            super::calendar::apply_named(op, values)
        }
    }
}

fn convert_to(input: &Value, to: Value) -> CommandResult<Value> {
    let target = match &to {
        Some(Bson::String(s)) => s.clone(),
        Some(n) if types::is_number(n) => {
            types::type_name(i32::try_from(types::as_i64_exact(n).unwrap_or(0)).unwrap_or(0))
                .to_string()
        }
        other => {
            return Err(err(
                ErrorCode::BadValue,
                format!(
                    "$convert's 'to' argument must be a string or number, but is {}",
                    type_name(other)
                ),
            ));
        }
    };
    let op = match target.as_str() {
        "int" => Operator::ToInt,
        "long" => Operator::ToLong,
        "double" => Operator::ToDouble,
        "decimal" => Operator::ToDecimal,
        "bool" => Operator::ToBool,
        "string" => Operator::ToString,
        "objectId" => return to_object_id(input),
        "date" => return to_date(input),
        other => {
            return Err(err(
                ErrorCode::BadValue,
                format!("Unknown type name: {other}"),
            ));
        }
    };
    super::more::convert(op, input)
}

fn regex_op(op: NamedOp, input: Value, regex: Value, options: Value) -> CommandResult<Value> {
    let (pattern, mut flags) = match &regex {
        Some(Bson::String(p)) => (p.clone(), String::new()),
        Some(Bson::RegularExpression(r)) => (
            r.pattern.as_str().to_string(),
            r.options.as_str().to_string(),
        ),
        _ if is_nullish(&regex) => (String::new(), String::new()),
        other => {
            return Err(mismatch(format!(
                "$regexMatch needs 'regex' to be of type string or regex, found {}",
                type_name(other)
            )));
        }
    };
    match &options {
        Some(Bson::String(o)) if !flags.is_empty() && !o.is_empty() => {
            return Err(err(
                ErrorCode::BadValue,
                "$regexMatch: regex option(s) specified in both 'regex' and 'option' fields",
            ));
        }
        Some(Bson::String(o)) => flags.push_str(o),
        _ => {}
    }
    let text = match &input {
        Some(Bson::String(s)) => s.clone(),
        _ if is_nullish(&input) || is_nullish(&regex) => {
            return Ok(Some(match op {
                NamedOp::RegexMatch => Bson::Boolean(false),
                NamedOp::RegexFindAll => Bson::Array(Vec::new()),
                _ => Bson::Null,
            }));
        }
        other => {
            return Err(mismatch(format!(
                "$regexMatch needs 'input' to be of type string, found {}",
                type_name(other)
            )));
        }
    };
    let re = RegexPred::new(&pattern, &flags)?;
    let compiled = re.compiled();
    let found = |c: regex::Captures<'_>| {
        let m = c.get(0).map_or((0, ""), |m| (m.start(), m.as_str()));
        let idx = i32::try_from(text[..m.0].chars().count()).unwrap_or(i32::MAX);
        let captures: Vec<Bson> = c
            .iter()
            .skip(1)
            .map(|g| g.map_or(Bson::Null, |g| Bson::String(g.as_str().to_string())))
            .collect();
        Bson::Document(doc! {"match": m.1, "idx": idx, "captures": captures})
    };
    Ok(Some(match op {
        NamedOp::RegexMatch => Bson::Boolean(compiled.is_match(&text)),
        NamedOp::RegexFind => compiled.captures(&text).map_or(Bson::Null, found),
        _ => Bson::Array(compiled.captures_iter(&text).map(found).collect()),
    }))
}

fn sort_array(input: Value, by: Value) -> CommandResult<Value> {
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
                let o = order::compare_bson(a, b);
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
