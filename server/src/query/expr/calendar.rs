//! The object and array helpers `$setField`, `$unsetField` and `$zip` (the date operators
//! that once lived here are in `date_math.rs`, `date_parts.rs` and `date_string.rs`).

use super::NamedOp;
use super::ops::{is_nullish, type_name};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::types;
use bson::Bson;

type Value = Option<Bson>;

fn null() -> CommandResult<Value> {
    Ok(Some(Bson::Null))
}

pub(super) fn apply_named(op: NamedOp, values: Vec<Option<Value>>) -> CommandResult<Value> {
    let arg = |i: usize| values.get(i).cloned().flatten().flatten();
    match op {
        NamedOp::SetField | NamedOp::UnsetField => {
            let Some(Bson::String(field)) = arg(0) else {
                return Err(err(
                    ErrorCode::BadValue,
                    "$setField requires 'field' to evaluate to a constant string",
                ));
            };
            let mut d = match arg(1) {
                Some(Bson::Document(d)) => d,
                v if is_nullish(&v) => return null(),
                other => {
                    return Err(err(
                        ErrorCode::BadValue,
                        format!(
                            "$setField requires 'input' to evaluate to type Object, found {}",
                            type_name(&other)
                        ),
                    ));
                }
            };
            // `value: "$$REMOVE"` (missing) removes the field, as `$unsetField` does.
            match (op, arg(2)) {
                (NamedOp::SetField, Some(v)) => {
                    d.insert(field, v);
                }
                _ => {
                    d.remove(&field);
                }
            }
            Ok(Some(Bson::Document(d)))
        }
        _ => zip(arg(0), arg(1), arg(2)),
    }
}

fn zip(inputs: Value, longest: Value, defaults: Value) -> CommandResult<Value> {
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
