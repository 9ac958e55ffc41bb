//! The value-level operators of the expression language (arithmetic, strings, arrays, types),
//! applied to already evaluated arguments. Numeric results follow mongod's promotion: int32
//! widens to int64 on overflow, int64 to double; any double makes a double; any decimal makes a
//! decimal (computed through a double here, so precise decimal arithmetic is not yet exact).

use super::Operator;
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::types;
use bson::{Bson, DateTime, Decimal128};
use std::cmp::Ordering;
use storage::order;

pub(super) fn type_name(v: &Option<Bson>) -> &'static str {
    v.as_ref()
        .map_or("missing", |b| types::type_name(types::type_code(b)))
}

pub(super) fn is_nullish(v: &Option<Bson>) -> bool {
    matches!(v, None | Some(Bson::Null) | Some(Bson::Undefined))
}

/// The widest numeric kind among operands: 0 int32, 1 int64, 2 double, 3 decimal.
pub(super) fn kind(v: &Bson) -> u8 {
    match v {
        Bson::Int32(_) => 0,
        Bson::Int64(_) => 1,
        Bson::Decimal128(_) => 3,
        _ => 2,
    }
}

pub(super) fn decimal(d: f64) -> Bson {
    format!("{d}")
        .parse::<Decimal128>()
        .map_or(Bson::Double(d), Bson::Decimal128)
}

/// Folds integers exactly (widening on overflow) and everything else in doubles.
pub(super) fn fold_numbers(
    values: &[Bson],
    int_op: fn(i64, i64) -> Option<i64>,
    float_op: fn(f64, f64) -> f64,
    start: i64,
) -> Bson {
    let widest = values.iter().map(kind).max().unwrap_or(0);
    if widest <= 1 {
        let mut acc = Some(start);
        for v in values {
            acc = acc.and_then(|a| int_op(a, types::as_i64_exact(v).unwrap_or(0)));
        }
        if let Some(n) = acc {
            return match i32::try_from(n) {
                Ok(small) if widest == 0 => Bson::Int32(small),
                _ => Bson::Int64(n),
            };
        }
    }
    if widest == 3 {
        // Exact decimal arithmetic; `start` tells the fold which operation it is (0: +, 1: *).
        let mut acc = Bson::Int64(start);
        for v in values {
            let next = if start == 0 {
                crate::query::decimal::add(&acc, v)
            } else {
                crate::query::decimal::mul(&acc, v)
            };
            acc = next.unwrap_or(Bson::Double(f64::NAN));
        }
        return acc;
    }
    #[allow(clippy::cast_precision_loss)] // mongod also falls back to double arithmetic here
    let mut acc = start as f64;
    for v in values {
        acc = float_op(acc, types::as_f64(v).unwrap_or(f64::NAN));
    }
    if widest == 3 {
        decimal(acc)
    } else {
        Bson::Double(acc)
    }
}

pub(super) fn numbers_only(
    name: &str,
    values: &[Option<Bson>],
) -> CommandResult<Option<Vec<Bson>>> {
    let mut out = Vec::with_capacity(values.len());
    for v in values {
        match v {
            _ if is_nullish(v) => return Ok(None),
            Some(b) if types::is_number(b) => out.push(b.clone()),
            other => {
                return Err(err(
                    ErrorCode::TypeMismatch,
                    format!(
                        "{name} only supports numeric types, not {}",
                        type_name(other)
                    ),
                ));
            }
        }
    }
    Ok(Some(out))
}

pub(super) fn apply(op: Operator, values: Vec<Option<Bson>>) -> CommandResult<Option<Bson>> {
    let first = values.first().cloned().flatten();
    match op {
        Operator::Add => add(&values),
        Operator::Multiply => Ok(numbers_only("$multiply", &values)?
            .map(|n| fold_numbers(&n, i64::checked_mul, |a, b| a * b, 1))),
        Operator::Subtract => subtract(&values),
        Operator::Divide => divide(&values),
        Operator::Mod => modulo(&values),
        Operator::Abs => abs(&values),
        Operator::Size => match first {
            Some(Bson::Array(a)) => Ok(Some(Bson::Int32(
                i32::try_from(a.len()).unwrap_or(i32::MAX),
            ))),
            _ => Err(err(
                ErrorCode::Location17124,
                format!(
                    "The argument to $size must be an array. Type of the argument was: {}",
                    type_name(&values[0])
                ),
            )),
        },
        Operator::In => match values.get(1).cloned().flatten() {
            Some(Bson::Array(items)) => {
                let needle = first.unwrap_or(Bson::Undefined);
                Ok(Some(Bson::Boolean(items.iter().any(|i| {
                    order::compare_bson(i, &needle) == Ordering::Equal
                }))))
            }
            other => Err(err(
                ErrorCode::Location40081,
                format!(
                    "$in requires an array as a second argument, found: {}",
                    type_name(&other)
                ),
            )),
        },
        Operator::Concat => {
            let mut out = String::new();
            for v in &values {
                match v {
                    _ if is_nullish(v) => return Ok(Some(Bson::Null)),
                    Some(Bson::String(s)) => out.push_str(s),
                    other => {
                        return Err(err(
                            ErrorCode::Location16702,
                            format!("$concat only supports strings, not {}", type_name(other)),
                        ));
                    }
                }
            }
            Ok(Some(Bson::String(out)))
        }
        Operator::ToLower | Operator::ToUpper => {
            let text = to_text(&values[0])?;
            Ok(Some(Bson::String(if op == Operator::ToLower {
                text.to_lowercase()
            } else {
                text.to_uppercase()
            })))
        }
        Operator::Type => Ok(Some(Bson::String(type_name(&values[0]).to_string()))),
        _ => super::more::apply(op, values),
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
                ErrorCode::TypeMismatch,
                format!(
                    "can't convert from BSON type {} to String",
                    type_name(other)
                ),
            ));
        }
    })
}

fn add(values: &[Option<Bson>]) -> CommandResult<Option<Bson>> {
    let mut date: Option<i64> = None;
    let mut numbers = Vec::with_capacity(values.len());
    for v in values {
        match v {
            _ if is_nullish(v) => return Ok(Some(Bson::Null)),
            Some(Bson::DateTime(d)) => {
                if date.is_some() {
                    return Err(err(
                        ErrorCode::Location16554,
                        "only one date allowed in an $add expression",
                    ));
                }
                date = Some(d.timestamp_millis());
            }
            Some(b) if types::is_number(b) => numbers.push(b.clone()),
            other => {
                return Err(err(
                    ErrorCode::Location16554,
                    format!(
                        "$add only supports numeric or date types, not {}",
                        type_name(other)
                    ),
                ));
            }
        }
    }
    let sum = fold_numbers(&numbers, i64::checked_add, |a, b| a + b, 0);
    Ok(Some(match date {
        Some(ms) => {
            let delta = types::as_f64(&sum).unwrap_or(0.0).round();
            #[allow(clippy::cast_possible_truncation)] // saturating: out-of-range dates clamp
            Bson::DateTime(DateTime::from_millis(ms.saturating_add(delta as i64)))
        }
        None => sum,
    }))
}

fn subtract(values: &[Option<Bson>]) -> CommandResult<Option<Bson>> {
    if values.iter().any(is_nullish) {
        return Ok(Some(Bson::Null));
    }
    let (a, b) = (
        values[0].clone().unwrap_or(Bson::Null),
        values[1].clone().unwrap_or(Bson::Null),
    );
    Ok(Some(match (&a, &b) {
        (Bson::DateTime(x), Bson::DateTime(y)) => {
            Bson::Int64(x.timestamp_millis().saturating_sub(y.timestamp_millis()))
        }
        (Bson::DateTime(x), n) if types::is_number(n) => {
            #[allow(clippy::cast_possible_truncation)]
            let delta = types::as_f64(n).unwrap_or(0.0).round() as i64;
            Bson::DateTime(DateTime::from_millis(
                x.timestamp_millis().saturating_sub(delta),
            ))
        }
        (x, y) if types::is_number(x) && types::is_number(y) => {
            let negated = match y {
                Bson::Int32(i) => Bson::Int64(-i64::from(*i)),
                Bson::Int64(i) => i
                    .checked_neg()
                    .map_or(Bson::Double(-(*i as f64)), Bson::Int64),
                Bson::Decimal128(_) => {
                    crate::query::decimal::negate(y).unwrap_or(Bson::Double(f64::NAN))
                }
                other => Bson::Double(-types::as_f64(other).unwrap_or(f64::NAN)),
            };
            let widest = kind(x).max(kind(y));
            let r = fold_numbers(&[x.clone(), negated], i64::checked_add, |p, q| p + q, 0);
            match (widest, &r) {
                (0, Bson::Int64(n)) => i32::try_from(*n).map_or(r.clone(), Bson::Int32),
                _ => r,
            }
        }
        _ => {
            return Err(err(
                ErrorCode::Location16556,
                format!(
                    "cant $subtract a {} from a {}",
                    type_name(&values[1]),
                    type_name(&values[0])
                ),
            ));
        }
    }))
}

fn divide(values: &[Option<Bson>]) -> CommandResult<Option<Bson>> {
    let Some(n) = numbers_only("$divide", values)? else {
        return Ok(Some(Bson::Null));
    };
    let (a, b) = (
        types::as_f64(&n[0]).unwrap_or(f64::NAN),
        types::as_f64(&n[1]).unwrap_or(f64::NAN),
    );
    if b == 0.0 {
        return Err(err(ErrorCode::Location16608, "can't $divide by zero"));
    }
    let widest = kind(&n[0]).max(kind(&n[1]));
    Ok(Some(if widest == 3 {
        decimal(a / b)
    } else {
        Bson::Double(a / b)
    }))
}

fn modulo(values: &[Option<Bson>]) -> CommandResult<Option<Bson>> {
    let Some(n) = numbers_only("$mod", values)? else {
        return Ok(Some(Bson::Null));
    };
    let widest = kind(&n[0]).max(kind(&n[1]));
    if widest <= 1 {
        let (a, b) = (
            types::as_i64_exact(&n[0]).unwrap_or(0),
            types::as_i64_exact(&n[1]).unwrap_or(0),
        );
        if b == 0 {
            return Err(err(ErrorCode::Location16610, "can't $mod by zero"));
        }
        let r = a.wrapping_rem(b);
        return Ok(Some(if widest == 0 {
            Bson::Int32(i32::try_from(r).unwrap_or(0))
        } else {
            Bson::Int64(r)
        }));
    }
    let (a, b) = (
        types::as_f64(&n[0]).unwrap_or(f64::NAN),
        types::as_f64(&n[1]).unwrap_or(f64::NAN),
    );
    if b == 0.0 {
        return Err(err(ErrorCode::Location16610, "can't $mod by zero"));
    }
    Ok(Some(if widest == 3 {
        decimal(a % b)
    } else {
        Bson::Double(a % b)
    }))
}

fn abs(values: &[Option<Bson>]) -> CommandResult<Option<Bson>> {
    let Some(n) = numbers_only("$abs", values)? else {
        return Ok(Some(Bson::Null));
    };
    Ok(Some(match &n[0] {
        Bson::Int32(i) => i
            .checked_abs()
            .map_or(Bson::Int64(i64::from(*i).abs()), Bson::Int32),
        Bson::Int64(i) => match i.checked_abs() {
            Some(a) => Bson::Int64(a),
            None => return Err(err(ErrorCode::Overflow, "can't take $abs of long long min")),
        },
        Bson::Decimal128(_) => decimal(types::as_f64(&n[0]).unwrap_or(f64::NAN).abs()),
        other => Bson::Double(types::as_f64(other).unwrap_or(f64::NAN).abs()),
    }))
}
