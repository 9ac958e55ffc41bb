//! What every operator file shares: the missing-or-null test, type names and argument checks
//! with mongod's messages, and operator names for messages. Values are `Option<Bson>`, `None`
//! being "missing".

use super::Operator;
use crate::error::{CommandError, CommandResult, ErrorCode, err};
use crate::query::types;
use bson::Bson;

pub(super) type Value = Option<Bson>;

pub(super) fn type_name(v: &Option<Bson>) -> &'static str {
    v.as_ref()
        .map_or("missing", |b| types::type_name(types::type_code(b)))
}

pub(super) fn is_nullish(v: &Option<Bson>) -> bool {
    matches!(v, None | Some(Bson::Null) | Some(Bson::Undefined))
}

/// `$arrayElemAt` from `Operator::ArrayElemAt`, for messages.
pub(super) fn op_name(op: Operator) -> String {
    let debug = format!("{op:?}");
    let mut chars = debug.chars();
    match chars.next() {
        Some(first) => format!("${}{}", first.to_ascii_lowercase(), chars.as_str()),
        None => String::new(),
    }
}

pub(super) fn mismatch(message: String) -> CommandError {
    err(ErrorCode::TypeMismatch, message)
}

pub(super) fn null() -> CommandResult<Value> {
    Ok(Some(Bson::Null))
}

pub(super) fn int_result(n: i64, narrow: bool) -> Bson {
    match i32::try_from(n) {
        Ok(small) if narrow => Bson::Int32(small),
        _ => Bson::Int64(n),
    }
}

/// A number argument mongod's evaluator reads as a 32-bit integer, with the operator's own
/// codes: `codes.0` for a value that is not a number, `codes.1` for one that is not integral
/// or does not fit 32 bits. `what` names the argument as the message's subject.
pub(super) fn int32_arg(
    v: &Value,
    codes: (ErrorCode, ErrorCode),
    what: &str,
) -> CommandResult<i64> {
    let Some(b) = v.as_ref().filter(|b| types::is_number(b)) else {
        return Err(err(
            codes.0,
            format!(
                "{what} must be a numeric value, but is of type: {}",
                type_name(v)
            ),
        ));
    };
    types::as_i64_exact(b)
        .filter(|n| i32::try_from(*n).is_ok())
        .ok_or_else(|| {
            err(
                codes.1,
                format!("{what} must be representable as a 32-bit integer: {b}"),
            )
        })
}

/// A starting or ending index of `$indexOfArray`, `$indexOfBytes` and `$indexOfCP`: 40096 when
/// it is not an integral number that fits 32 bits, 40097 when it is negative.
pub(super) fn index_arg(v: &Value, op: &str, what: &str) -> CommandResult<i64> {
    let n = v
        .as_ref()
        .filter(|b| types::is_number(b))
        .and_then(types::as_i64_exact)
        .filter(|n| i32::try_from(*n).is_ok())
        .ok_or_else(|| {
            err(
                ErrorCode::Location40096,
                format!(
                    "{op} requires an integral {what}, found a value of type: {}",
                    type_name(v)
                ),
            )
        })?;
    if n < 0 {
        return Err(err(
            ErrorCode::Location40097,
            format!("{op} requires a nonnegative {what}, found: {n}"),
        ));
    }
    Ok(n)
}

/// An array argument with the operator's own code for anything else; `what` names it.
pub(super) fn array_arg<'a>(
    v: &'a Value,
    code: ErrorCode,
    what: &str,
) -> CommandResult<&'a Vec<Bson>> {
    match v {
        Some(Bson::Array(a)) => Ok(a),
        other => Err(err(
            code,
            format!("{what} must be an array, but is {}", type_name(other)),
        )),
    }
}

pub(super) fn to_text(v: &Option<Bson>) -> CommandResult<String> {
    Ok(match v {
        _ if is_nullish(v) => String::new(),
        Some(Bson::String(s)) | Some(Bson::Symbol(s)) => s.clone(),
        Some(Bson::Int32(i)) => i.to_string(),
        Some(Bson::Int64(i)) => i.to_string(),
        Some(Bson::Double(d)) => d.to_string(),
        Some(Bson::Decimal128(d)) => d.to_string(),
        other => {
            return Err(err(
                ErrorCode::Location16007,
                format!(
                    "can't convert from BSON type {} to String",
                    type_name(other)
                ),
            ));
        }
    })
}

/// The BSON size of a value as an element of an array or document (type byte, a short key and
/// the value's bytes), to bound what builders make.
pub(super) fn element_size_bytes(v: &Bson) -> usize {
    const ELEMENT_OVERHEAD_BYTES: usize = 8;
    ELEMENT_OVERHEAD_BYTES
        + match v {
            Bson::String(s) => s.len() + 5,
            Bson::Array(items) => items.iter().map(element_size_bytes).sum::<usize>() + 5,
            Bson::Document(d) => {
                d.iter()
                    .map(|(k, v)| k.len() + element_size_bytes(v))
                    .sum::<usize>()
                    + 5
            }
            Bson::Binary(b) => b.bytes.len() + 5,
            _ => 8,
        }
}

/// Fails with BSONObjectTooLarge once a value `op` builds passes the BSON document limit, and
/// yields to interrupts in proportion to the bytes built.
pub(super) fn check_built(op: &str, bytes: usize, step_bytes: usize) -> CommandResult<()> {
    crate::interrupt::tick_n(step_bytes / 256 + 1)?;
    let max = crate::query::limits::BUILT_VALUE_BYTES_MAX;
    if bytes > max {
        return Err(crate::error::err(
            crate::error::ErrorCode::BSONObjectTooLarge,
            format!("{op}: the result would exceed the BSON size limit of {max} bytes"),
        ));
    }
    Ok(())
}
