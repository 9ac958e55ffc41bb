//! The argument documents of `$let`, `$map`, `$filter`, `$reduce` and `$switch`, checked as
//! mongod's parsers check them, each with the operator's own codes: the argument is a document,
//! no field is unknown, the required ones are there. Parsing the expressions inside is the
//! parser's; this only looks at the shape.

use crate::error::{CommandResult, ErrorCode, err};
use bson::{Bson, Document};

fn type_of(v: &Bson) -> &'static str {
    crate::query::types::type_name(crate::query::types::type_code(v))
}

/// The document an operator takes; a value of another type has the operator's own code.
pub(super) fn spec_arg<'d>(op: &str, arg: &'d Bson) -> CommandResult<&'d Document> {
    if let Bson::Document(d) = arg {
        return Ok(d);
    }
    let code = match op {
        "$let" => ErrorCode::Location16874,
        "$map" => ErrorCode::Location16878,
        "$filter" => ErrorCode::Location28646,
        "$reduce" => ErrorCode::Location40075,
        "$switch" => {
            return Err(err(
                ErrorCode::Location40060,
                format!(
                    "$switch requires an object as an argument, found: {}",
                    type_of(arg)
                ),
            ));
        }
        _ => ErrorCode::FailedToParse,
    };
    Err(err(
        code,
        format!("{op} only supports an object as its argument"),
    ))
}

fn unknown(code: ErrorCode, op: &str, field: &str) -> crate::error::CommandError {
    err(code, format!("Unrecognized parameter to {op}: {field}"))
}

fn missing(code: ErrorCode, op: &str, field: &str) -> crate::error::CommandError {
    err(code, format!("Missing '{field}' parameter to {op}"))
}

/// `$let`: `vars` (a document) and `in`; 16875 for another field, 16876/16877 for a missing one.
pub(super) fn let_parts(d: &Document) -> CommandResult<(&Document, &Bson)> {
    if let Some(k) = d.keys().find(|k| !matches!(k.as_str(), "vars" | "in")) {
        return Err(unknown(ErrorCode::Location16875, "$let", k));
    }
    let vars = d
        .get("vars")
        .ok_or_else(|| missing(ErrorCode::Location16876, "$let", "vars"))?;
    let body = d
        .get("in")
        .ok_or_else(|| missing(ErrorCode::Location16877, "$let", "in"))?;
    let Bson::Document(vars) = vars else {
        return Err(err(
            ErrorCode::Location10065,
            format!(
                "invalid parameter: expected an object (vars), found {}",
                type_of(vars)
            ),
        ));
    };
    Ok((vars, body))
}

/// `$map` (`input`, `as`, `in`: 16879 unknown, 16880 and 16882 missing) and `$filter`
/// (`input`, `as`, `cond`, `limit`: 28647 unknown, 28648 and 28650 missing).
pub(super) fn map_filter_parts<'d>(
    op: &str,
    d: &'d Document,
) -> CommandResult<(&'d Bson, &'d Bson)> {
    let map = op == "$map";
    let (body_key, unknown_code, input_code, body_code) = if map {
        (
            "in",
            ErrorCode::Location16879,
            ErrorCode::Location16880,
            ErrorCode::Location16882,
        )
    } else {
        (
            "cond",
            ErrorCode::Location28647,
            ErrorCode::Location28648,
            ErrorCode::Location28650,
        )
    };
    if let Some(k) = d.keys().find(|k| {
        let k = k.as_str();
        !(k == "input" || k == "as" || k == body_key || (!map && k == "limit"))
    }) {
        return Err(unknown(unknown_code, op, k));
    }
    let input = d
        .get("input")
        .ok_or_else(|| missing(input_code, op, "input"))?;
    let body = d
        .get(body_key)
        .ok_or_else(|| missing(body_code, op, body_key))?;
    Ok((input, body))
}

/// `$reduce`: `input`, `initialValue`, `in` (40076 unknown; 40077, 40078, 40079 missing).
pub(super) fn reduce_parts(d: &Document) -> CommandResult<(&Bson, &Bson, &Bson)> {
    if let Some(k) = d
        .keys()
        .find(|k| !matches!(k.as_str(), "input" | "initialValue" | "in"))
    {
        return Err(unknown(ErrorCode::Location40076, "$reduce", k));
    }
    let get = |k: &str, code| d.get(k).ok_or_else(|| missing(code, "$reduce", k));
    Ok((
        get("input", ErrorCode::Location40077)?,
        get("initialValue", ErrorCode::Location40078)?,
        get("in", ErrorCode::Location40079)?,
    ))
}

/// `$switch`: `branches` (an array, 40061, of documents, 40062, each of `case` and `then` only:
/// 40063 another field, 40064/40065 a missing one) and `default`; another field is 40067, no
/// branch at all 40068.
pub(super) fn switch_branches(d: &Document) -> CommandResult<Vec<&Document>> {
    let mut out = Vec::new();
    for (k, v) in d {
        match k.as_str() {
            "branches" => {
                let Bson::Array(branches) = v else {
                    return Err(err(
                        ErrorCode::Location40061,
                        format!(
                            "$switch expected an array for 'branches', found: {}",
                            type_of(v)
                        ),
                    ));
                };
                for b in branches {
                    out.push(switch_branch(b)?);
                }
            }
            "default" => {}
            other => {
                return Err(err(
                    ErrorCode::Location40067,
                    format!("$switch found an unknown argument: {other}"),
                ));
            }
        }
    }
    if out.is_empty() {
        return Err(err(
            ErrorCode::Location40068,
            "$switch requires at least one branch.",
        ));
    }
    Ok(out)
}

fn switch_branch(b: &Bson) -> CommandResult<&Document> {
    let Bson::Document(b) = b else {
        return Err(err(
            ErrorCode::Location40062,
            format!(
                "$switch expected each branch to be an object, found: {}",
                type_of(b)
            ),
        ));
    };
    if let Some(k) = b.keys().find(|k| !matches!(k.as_str(), "case" | "then")) {
        return Err(err(
            ErrorCode::Location40063,
            format!("$switch found an unknown argument to a branch: {k}"),
        ));
    }
    if !b.contains_key("case") {
        return Err(err(
            ErrorCode::Location40064,
            "$switch requires each branch have a 'case' expression",
        ));
    }
    if !b.contains_key("then") {
        return Err(err(
            ErrorCode::Location40065,
            "$switch requires each branch have a 'then' expression.",
        ));
    }
    Ok(b)
}
