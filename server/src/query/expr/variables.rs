//! The operators that bind variables: `$let`, `$map`, `$filter` and `$reduce`. Their bodies
//! are evaluated with the bound names pushed on the scope and popped after.

use super::args::*;
use super::{Expr, Scope, Special, truthy};
use crate::error::{CommandResult, ErrorCode, err};
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
            let code = if is_map {
                ErrorCode::Location16883
            } else {
                ErrorCode::Location28651
            };
            return Err(err(
                code,
                format!("input to {op} must be an array not {}", type_name(&other)),
            ));
        }
    };
    // An empty input is the answer before `limit` is looked at, as in mongod.
    if items.is_empty() {
        return Ok(Some(Bson::Array(items)));
    }
    let limit = match s {
        Special::Filter { limit: Some(l), .. } => filter_limit(l.eval(root, scope)?)?,
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

/// `$filter`'s `limit`: null means none; otherwise a 32-bit integer (327391) above 0 (327392).
fn filter_limit(v: Value) -> CommandResult<usize> {
    if is_nullish(&v) {
        return Ok(usize::MAX);
    }
    let n = v
        .as_ref()
        .filter(|b| crate::query::types::is_number(b))
        .and_then(crate::query::types::as_i64_exact)
        .filter(|n| i32::try_from(*n).is_ok())
        .ok_or_else(|| {
            err(
                ErrorCode::Location327391,
                "$filter: limit must be represented as a 32-bit integral value",
            )
        })?;
    if n <= 0 {
        return Err(err(
            ErrorCode::Location327392,
            format!("$filter: limit must be greater than 0: {n}"),
        ));
    }
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
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
        return Err(err(
            ErrorCode::Location40080,
            format!(
                "$reduce requires that 'input' be an array, found: {}",
                type_name(&v)
            ),
        ));
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
