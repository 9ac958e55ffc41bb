//! The operators that bind variables: `$let`, `$map`, `$filter` and `$reduce`. Their bodies
//! are evaluated with the bound names pushed on the scope and popped after.

use super::args::*;
use super::{Expr, Scope, Special, truthy};
use crate::error::CommandResult;
use bson::{Bson, RawDocument};

/// `$let`.
pub(super) fn let_vars(
    vars: &[(String, Expr)],
    body: &Expr,
    root: &RawDocument,
    scope: &mut Scope,
) -> CommandResult<Value> {
    let mut values = Vec::with_capacity(vars.len());
    for (name, e) in vars {
        values.push((name.clone(), e.eval(root, scope)?));
    }
    let n = values.len();
    scope.extend(values);
    let r = body.eval(root, scope);
    scope.truncate(scope.len() - n);
    r
}

/// `$map` and `$filter` (`s` says which, and carries `$filter`'s limit).
pub(super) fn map_filter(
    s: &Special,
    input: &Expr,
    name: &str,
    body: &Expr,
    root: &RawDocument,
    scope: &mut Scope,
) -> CommandResult<Value> {
    let v = input.eval(root, scope)?;
    if is_nullish(&v) {
        return null();
    }
    let is_map = matches!(s, Special::Map { .. });
    let op = if is_map { "$map" } else { "$filter" };
    let items = match v {
        Some(Bson::Array(a)) => a,
        other => {
            return Err(mismatch(format!(
                "input to {op} must be an array not {}",
                type_name(&other)
            )));
        }
    };
    let limit = match s {
        Special::Filter { limit: Some(l), .. } => match l.eval(root, scope)? {
            Some(Bson::Null) | None => usize::MAX,
            other => {
                usize::try_from(as_int(&other, "$filter", "limit")?.max(1)).unwrap_or(usize::MAX)
            }
        },
        _ => usize::MAX,
    };
    let mut out = Vec::new();
    for item in items {
        if out.len() >= limit {
            break;
        }
        scope.push((name.to_string(), Some(item.clone())));
        let r = body.eval(root, scope);
        scope.pop();
        let r = r?;
        if is_map {
            out.push(r.unwrap_or(Bson::Null));
        } else if truthy(&r) {
            out.push(item);
        }
    }
    Ok(Some(Bson::Array(out)))
}

/// `$reduce`: `$$value` starts at `initial`, `$$this` is each element.
pub(super) fn reduce(
    input: &Expr,
    initial: &Expr,
    body: &Expr,
    root: &RawDocument,
    scope: &mut Scope,
) -> CommandResult<Value> {
    let v = input.eval(root, scope)?;
    if is_nullish(&v) {
        return null();
    }
    let Some(Bson::Array(items)) = v else {
        return Err(mismatch(format!(
            "$reduce requires that 'input' be an array, found: {}",
            type_name(&v)
        )));
    };
    let mut acc = initial.eval(root, scope)?;
    for item in items {
        scope.push(("value".to_string(), acc.clone()));
        scope.push(("this".to_string(), Some(item)));
        let r = body.eval(root, scope);
        scope.truncate(scope.len() - 2);
        acc = r?;
    }
    Ok(acc)
}
