//! Boolean logic and control flow: `$and`, `$or`, `$not`, `$cond`, `$ifNull` and `$switch`.
//! All but `$not` evaluate their own arguments, lazily: `$and`/`$or` stop at the first
//! deciding value, `$cond` and `$switch` evaluate only the branch taken.

use super::args::Value;
use super::{Expr, Operator, Scope, truthy};
use crate::error::{CommandResult, ErrorCode, err};
use bson::{Bson, RawDocument};

fn boolean(b: bool) -> CommandResult<Value> {
    Ok(Some(Bson::Boolean(b)))
}

/// `$and` and `$or`.
pub(super) fn and_or(
    op: Operator,
    args: &[Expr],
    root: &RawDocument,
    scope: &mut Scope,
) -> CommandResult<Value> {
    let want = op == Operator::Or;
    for e in args {
        if truthy(&e.eval(root, scope)?) == want {
            return boolean(want);
        }
    }
    boolean(!want)
}

/// `$not`.
pub(super) fn not(values: &[Value]) -> CommandResult<Value> {
    boolean(!truthy(&values[0]))
}

/// `$cond`.
pub(super) fn cond(args: &[Expr], root: &RawDocument, scope: &mut Scope) -> CommandResult<Value> {
    let branch = if truthy(&args[0].eval(root, scope)?) {
        &args[1]
    } else {
        &args[2]
    };
    branch.eval(root, scope)
}

/// `$ifNull`: the first argument but the last that is neither null nor missing, else the last.
pub(super) fn if_null(
    args: &[Expr],
    root: &RawDocument,
    scope: &mut Scope,
) -> CommandResult<Value> {
    for e in &args[..args.len().saturating_sub(1)] {
        if let Some(v) = e.eval(root, scope)?
            && !matches!(v, Bson::Null | Bson::Undefined)
        {
            return Ok(Some(v));
        }
    }
    match args.last() {
        Some(e) => e.eval(root, scope),
        None => Ok(None),
    }
}

/// `$switch`: the first branch whose case is true, else the default.
pub(super) fn switch(
    branches: &[(Expr, Expr)],
    default: Option<&Expr>,
    root: &RawDocument,
    scope: &mut Scope,
) -> CommandResult<Value> {
    for (case, then) in branches {
        if truthy(&case.eval(root, scope)?) {
            return then.eval(root, scope);
        }
    }
    match default {
        Some(d) => d.eval(root, scope),
        None => Err(err(
            ErrorCode::BadValue,
            "$switch could not find a matching branch for an input, and no default was specified.",
        )),
    }
}
