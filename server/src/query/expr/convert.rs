//! Types and conversion: `$type`, `$isNumber`, `$toString`/`$toInt`/`$toLong`/`$toDouble`/
//! `$toDecimal`/`$toBool`, `$toObjectId`, `$toDate` and `$convert` (its binData side is in
//! `bindata.rs`, numbers to and from binData in `bindata_numeric.rs`).

use super::Operator;
use super::args::*;
use super::bindata::{self, Format};
use super::bindata_numeric::{self as numeric, ByteOrder};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::types;
use bson::oid::ObjectId;
use bson::{Bson, DateTime};

/// `$type`.
pub(super) fn type_of(values: &[Value]) -> CommandResult<Value> {
    Ok(Some(Bson::String(type_name(&values[0]).to_string())))
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
            ErrorCode::ConversionFailure,
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
            Bson::Binary(b) => bindata::to_string(b, Format::Auto)?,
            Bson::DateTime(d) => d.try_to_rfc3339_string().map_err(|_| fail())?,
            Bson::Double(d) if d.fract() == 0.0 && d.is_finite() && d.abs() < 1e15 => {
                format!("{d:.0}")
            }
            other if types::is_number(other) => to_text(v)?,
            _ => return Err(fail()),
        }),
        ToInt | ToLong | ToDouble if matches!(x, Bson::Binary(_)) => {
            let Bson::Binary(b) = x else {
                return Err(fail());
            };
            let to = match op {
                ToInt => "int",
                ToLong => "long",
                _ => "double",
            };
            numeric::to_number(b, to, ByteOrder::Little)?
        }
        ToInt | ToLong => {
            let n = match x {
                Bson::Int32(i) => i64::from(*i),
                Bson::Int64(i) => *i,
                Bson::DateTime(d) if op == ToLong => d.timestamp_millis(),
                Bson::String(s) => s.trim().parse::<i64>().map_err(|_| fail())?,
                Bson::DateTime(_) => return Err(fail()),
                d @ Bson::Decimal128(_) => crate::query::decimal::trunc_to_i128(d)
                    .and_then(|n| i64::try_from(n).ok())
                    .ok_or_else(fail)?,
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
            n @ (Bson::Int32(_) | Bson::Int64(_)) => {
                crate::query::decimal::add(n, &Bson::Int32(0)).ok_or_else(fail)?
            }
            _ => crate::query::decimal::from_f64(number().ok_or_else(fail)?),
        },
        _ => return Err(err(ErrorCode::InternalError, "conversion out of place")),
    }))
}

pub(super) fn conversion_error(v: &Value, to: &str) -> crate::error::CommandError {
    err(
        ErrorCode::ConversionFailure,
        format!(
            "Unsupported conversion from {} to {to} in $convert with no onError value",
            type_name(v)
        ),
    )
}

pub(super) fn to_object_id(v: &Value) -> CommandResult<Value> {
    Ok(match v {
        _ if is_nullish(v) => Some(Bson::Null),
        Some(Bson::ObjectId(o)) => Some(Bson::ObjectId(*o)),
        Some(Bson::String(s)) => Some(Bson::ObjectId(ObjectId::parse_str(s).map_err(|_| {
            err(ErrorCode::ConversionFailure, format!("Failed to parse objectId '{s}' in $convert with no onError value: Invalid string length for parsing to OID, expected 24 but found {}", s.len()))
        })?)),
        other => return Err(conversion_error(other, "objectId")),
    })
}

pub(super) fn to_date(v: &Value) -> CommandResult<Value> {
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
                ErrorCode::ConversionFailure,
                format!("Error parsing date string '{s}'"),
            )),
        },
        Some(Bson::ObjectId(o)) => Ok(Some(Bson::DateTime(o.timestamp()))),
        Some(Bson::Timestamp(t)) => date(i64::from(t.time) * 1000),
        other => Err(conversion_error(other, "date")),
    }
}

/// The evaluated `to` of `$convert`: a type (its mongod name) and, for binData, a subtype.
struct Target {
    name: &'static str,
    subtype: Bson,
}

/// Reads `to` (a type name or code, or `{type, subtype}`); nullish is `None`. Errors here are
/// not conversion failures: `onError` does not catch them, as in mongod.
///
/// mongod 8.0 reads only `type` and `subtype` of a `{type, subtype}` document (other fields are
/// ignored); a missing `subtype` is 0, a null one stays null (and fails a binData conversion with
/// 4341108); a missing or null `type` is not "no target" but a wrong `to` (FailedToParse).
fn parse_target(to: &Value) -> CommandResult<Option<Target>> {
    if is_nullish(to) {
        return Ok(None);
    }
    let (ty, subtype) = match to {
        Some(Bson::Document(d)) => (d.get("type").cloned(), d.get("subtype").cloned()),
        other => (other.clone(), None),
    };
    let subtype = subtype.unwrap_or(Bson::Int32(0));
    let code = match &ty {
        Some(Bson::String(s)) => types::code_for_alias(s)
            .ok_or_else(|| err(ErrorCode::BadValue, format!("Unknown type name: {s}")))?,
        Some(n) if types::is_number(n) => {
            let code = types::as_i64_exact(n).ok_or_else(|| {
                err(
                    ErrorCode::FailedToParse,
                    "In $convert, numeric 'to' argument is not an integer",
                )
            })?;
            i32::try_from(code)
                .ok()
                .filter(|c| types::is_valid_code(*c))
                .ok_or_else(|| {
                    err(
                        ErrorCode::FailedToParse,
                        format!(
                            "In $convert, numeric value for 'to' does not correspond to a BSON type: {code}"
                        ),
                    )
                })?
        }
        other => {
            return Err(err(
                ErrorCode::FailedToParse,
                format!(
                    "$convert's 'to' argument must be a string or number, but is {}",
                    type_name(other)
                ),
            ));
        }
    };
    Ok(Some(Target {
        name: types::type_name(code),
        subtype,
    }))
}

/// Converts a present, non-null `input` to `target`.
fn convert_to(
    input: &Value,
    target: &Target,
    format: Option<Format>,
    order: ByteOrder,
) -> CommandResult<Value> {
    let op = match (target.name, input) {
        ("binData", Some(n @ (Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_)))) => {
            let subtype = bindata::subtype(&target.subtype)?;
            return Ok(numeric::from_number(n, subtype, order));
        }
        (to @ ("int" | "long" | "double"), Some(Bson::Binary(b))) => {
            return numeric::to_number(b, to, order).map(Some);
        }
        ("binData", Some(Bson::String(s))) => {
            let format = bindata::require_format(format, "string", "binData")?;
            let subtype = bindata::subtype(&target.subtype)?;
            return bindata::from_string(s, format, subtype).map(Some);
        }
        ("binData", Some(Bson::Binary(b))) => {
            return bindata::to_bindata(b, bindata::subtype(&target.subtype)?).map(Some);
        }
        ("string", Some(Bson::Binary(b))) => {
            let format = bindata::require_format(format, "binData", "string")?;
            return Ok(Some(Bson::String(bindata::to_string(b, format)?)));
        }
        ("int", _) => Operator::ToInt,
        ("long", _) => Operator::ToLong,
        ("double", _) => Operator::ToDouble,
        ("decimal", _) => Operator::ToDecimal,
        ("bool", _) => Operator::ToBool,
        ("string", _) => Operator::ToString,
        ("objectId", _) => return to_object_id(input),
        ("date", _) => return to_date(input),
        (other, _) => return Err(conversion_error(input, other)),
    };
    convert(op, input)
}

/// `$convert`: arguments `input, to, onError, onNull, format, byteOrder`. `to` is read first (its errors
/// stand even for a null input); a nullish input gives `onNull`, a nullish `to` null; only a
/// conversion failure gives `onError`.
pub(super) fn convert_named(values: &[Option<Value>]) -> CommandResult<Value> {
    let arg = |i: usize| values.get(i).cloned().flatten().flatten();
    let target = parse_target(&arg(1))?;
    let input = arg(0);
    if is_nullish(&input) {
        return Ok(values.get(3).cloned().flatten().unwrap_or(Some(Bson::Null)));
    }
    let Some(target) = target else {
        return null();
    };
    let format = bindata::parse_format(&arg(4))?;
    let order = numeric::parse_byte_order(&arg(5))?;
    match convert_to(&input, &target, format, order) {
        Err(e) if e.code == ErrorCode::ConversionFailure => {
            match values.get(2).cloned().flatten() {
                Some(on_error) => Ok(on_error),
                None => Err(e),
            }
        }
        other => other,
    }
}
