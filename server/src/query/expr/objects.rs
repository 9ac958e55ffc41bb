//! Object operators: `$mergeObjects`, `$getField`, `$setField`/`$unsetField`.

use super::args::*;
use super::{Expr, NamedOp, Scope};
use crate::error::{CommandResult, ErrorCode, err};
use bson::{Bson, Document, RawDocument};

pub(super) fn merge_objects(values: Vec<Value>) -> CommandResult<Value> {
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
                return Err(err(
                    ErrorCode::Location40400,
                    format!(
                        "$mergeObjects requires object inputs, but input {i} is of type {}",
                        type_name(other)
                    ),
                ));
            }
        }
    }
    Ok(Some(Bson::Document(out)))
}

/// `$setField` and `$unsetField`: arguments `field, input, value`.
pub(super) fn set_field(op: NamedOp, values: &[Option<Value>]) -> CommandResult<Value> {
    let arg = |i: usize| values.get(i).cloned().flatten().flatten();
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
                ErrorCode::Location4161105,
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

/// `$getField`.
pub(super) fn get_field(
    field: &Expr,
    input: &Expr,
    root: &RawDocument,
    scope: &mut Scope,
) -> CommandResult<Value> {
    let name = match field.eval(root, scope)? {
        Some(Bson::String(s)) => s,
        other => {
            return Err(err(
                ErrorCode::Location3041704,
                format!(
                    "$getField requires 'field' to evaluate to type String, but got {}",
                    type_name(&other)
                ),
            ));
        }
    };
    Ok(match input.eval(root, scope)? {
        Some(Bson::Document(d)) => d.get(&name).cloned(),
        Some(Bson::Null) => Some(Bson::Null),
        _ => None,
    })
}
