//! Arithmetic and math: `$add`, `$subtract`, `$multiply`, `$divide`, `$mod`, `$abs`, the
//! rounding, power and logarithm operators, `$sum`/`$avg`/`$min`/`$max` as expressions, and
//! `$rand`. Numeric results follow mongod's promotion: int32 widens to int64 on overflow, int64
//! to double; any double makes a double; any decimal makes a decimal, computed exactly by
//! `crate::query::decimal` where it can be.

use super::Operator;
use super::args::*;
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::types;
use bson::{Bson, DateTime, Decimal128};
use std::cmp::Ordering;
use storage::order;

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

/// `$multiply`.
pub(super) fn multiply(values: &[Value]) -> CommandResult<Value> {
    Ok(numbers_only("$multiply", values)?
        .map(|n| fold_numbers(&n, i64::checked_mul, |a, b| a * b, 1)))
}

pub(super) fn add(values: &[Option<Bson>]) -> CommandResult<Option<Bson>> {
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

pub(super) fn subtract(values: &[Option<Bson>]) -> CommandResult<Option<Bson>> {
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

pub(super) fn divide(values: &[Option<Bson>]) -> CommandResult<Option<Bson>> {
    let Some(n) = numbers_only("$divide", values)? else {
        return Ok(Some(Bson::Null));
    };
    if kind(&n[0]).max(kind(&n[1])) == 3 {
        if crate::query::decimal::is_zero(&n[1]) {
            return Err(err(ErrorCode::Location16608, "can't $divide by zero"));
        }
        return Ok(crate::query::decimal::div(&n[0], &n[1]));
    }
    let (a, b) = (
        types::as_f64(&n[0]).unwrap_or(f64::NAN),
        types::as_f64(&n[1]).unwrap_or(f64::NAN),
    );
    if b == 0.0 {
        return Err(err(ErrorCode::Location16608, "can't $divide by zero"));
    }
    Ok(Some(Bson::Double(a / b)))
}

pub(super) fn modulo(values: &[Option<Bson>]) -> CommandResult<Option<Bson>> {
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
    if widest == 3 {
        if crate::query::decimal::is_zero(&n[1]) {
            return Err(err(ErrorCode::Location16610, "can't $mod by zero"));
        }
        return Ok(crate::query::decimal::rem(&n[0], &n[1]));
    }
    let (a, b) = (
        types::as_f64(&n[0]).unwrap_or(f64::NAN),
        types::as_f64(&n[1]).unwrap_or(f64::NAN),
    );
    if b == 0.0 {
        return Err(err(ErrorCode::Location16610, "can't $mod by zero"));
    }
    Ok(Some(Bson::Double(a % b)))
}

pub(super) fn abs(values: &[Option<Bson>]) -> CommandResult<Option<Bson>> {
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
        d @ Bson::Decimal128(_) => crate::query::decimal::abs(d).unwrap_or(Bson::Null),
        other => Bson::Double(types::as_f64(other).unwrap_or(f64::NAN).abs()),
    }))
}

/// The operand checks of the math operators: `$pow` and `$log` name their two arguments with
/// their own codes, the single-argument ones share 28765.
fn math_operand(op: Operator, values: &[Value], i: usize) -> CommandResult<f64> {
    let v = &values[i];
    if let Some(f) = v
        .as_ref()
        .filter(|b| types::is_number(b))
        .and_then(types::as_f64)
    {
        return Ok(f);
    }
    let found = type_name(v);
    Err(match (op, i) {
        (Operator::Pow, 0) => err(
            ErrorCode::Location28762,
            format!("$pow's base must be numeric, not {found}"),
        ),
        (Operator::Pow, _) => err(
            ErrorCode::Location28763,
            format!("$pow's exponent must be numeric, not {found}"),
        ),
        (Operator::Log, 0) => err(
            ErrorCode::Location28756,
            format!("$log's argument must be numeric, not {found}"),
        ),
        (Operator::Log, _) => err(
            ErrorCode::Location28757,
            format!("$log's base must be numeric, not {found}"),
        ),
        (Operator::Round | Operator::Trunc, _) => err(
            ErrorCode::Location51081,
            format!("{} only supports numeric types, not {found}", op_name(op)),
        ),
        _ => err(
            ErrorCode::Location28765,
            format!("{} only supports numeric types, not {found}", op_name(op)),
        ),
    })
}

/// `$round`/`$trunc`'s precision: integral (51082) and in [-20, 100] (51083).
fn round_places(p: &Value, name: &str) -> CommandResult<i64> {
    let n = p
        .as_ref()
        .filter(|b| types::is_number(b))
        .and_then(types::as_i64_exact)
        .ok_or_else(|| {
            err(
                ErrorCode::Location51082,
                format!("precision argument to  {name} must be a integral value"),
            )
        })?;
    if !(-20..=100).contains(&n) {
        return Err(err(
            ErrorCode::Location51083,
            format!("cannot apply {name} with precision value {n} value must be in [-20, 100]"),
        ));
    }
    Ok(n)
}

/// `$floor`, `$ceil`, `$trunc`, `$round`, `$sqrt`, `$pow`, `$exp`, `$ln`, `$log10`, `$log`,
/// as mongod: null or missing gives null; a decimal operand computes in decimal128 and gives a
/// decimal; otherwise doubles (integers stay integers where mongod keeps them).
pub(super) fn math(op: Operator, values: &[Value]) -> CommandResult<Value> {
    if values.iter().any(is_nullish) {
        return null();
    }
    let x = values[0].clone().unwrap_or(Bson::Null);
    let name = op_name(op);
    let f = math_operand(op, values, 0)?;
    let is_decimal = kind(&x) == 3;
    let integral = matches!(x, Bson::Int32(_) | Bson::Int64(_));
    let decimal_or = |d: Option<Bson>, r: f64| d.unwrap_or(Bson::Double(r));
    use crate::query::decimal as dec;
    Ok(Some(match op {
        Operator::Floor | Operator::Ceil if integral => x,
        Operator::Floor | Operator::Ceil if is_decimal => {
            decimal_or(dec::floor_ceil(&x, op == Operator::Ceil), f64::NAN)
        }
        Operator::Floor => Bson::Double(f.floor()),
        Operator::Ceil => Bson::Double(f.ceil()),
        Operator::Trunc | Operator::Round => {
            let places = match values.get(1) {
                Some(p) => round_places(p, &name)?,
                None => 0,
            };
            if integral && places >= 0 {
                return Ok(Some(x));
            }
            if is_decimal {
                let truncate = op == Operator::Trunc;
                return Ok(dec::round(&x, places, truncate));
            }
            let scale = 10f64.powi(i32::try_from(places.clamp(-20, 100)).unwrap_or(0));
            let scaled = f * scale;
            let r = if op == Operator::Trunc {
                scaled.trunc()
            } else {
                scaled.round_ties_even()
            } / scale;
            match x {
                Bson::Int32(_) => Bson::Int32(r as i32),
                Bson::Int64(_) => Bson::Int64(r as i64),
                _ => Bson::Double(r),
            }
        }
        // NaN passes through every domain check, as in mongod; a decimal is checked exactly.
        Operator::Sqrt if is_decimal && dec::cmp_zero(&x) == Some(Ordering::Less) => {
            return Err(err(
                ErrorCode::Location28714,
                "$sqrt's argument must be greater than or equal to 0",
            ));
        }
        Operator::Sqrt if !is_decimal && f < 0.0 => {
            return Err(err(
                ErrorCode::Location28714,
                "$sqrt's argument must be greater than or equal to 0",
            ));
        }
        Operator::Sqrt if is_decimal => decimal_or(dec::sqrt(&x), f.sqrt()),
        Operator::Sqrt => Bson::Double(f.sqrt()),
        Operator::Exp if is_decimal => decimal_or(dec::exp(&x), f.exp()),
        Operator::Exp => Bson::Double(f.exp()),
        // A positive decimal computes in decimal; anything else takes the double path, whose
        // check fails on a non-positive value (a decimal NaN gives a double NaN, as mongod).
        Operator::Ln if positive_decimal(&x) => decimal_or(dec::ln(&x), f.ln()),
        Operator::Log10 if positive_decimal(&x) => decimal_or(dec::log10(&x), f.log10()),
        Operator::Ln | Operator::Log10 if f <= 0.0 => {
            let code = if op == Operator::Ln {
                ErrorCode::Location28766
            } else {
                ErrorCode::Location28761
            };
            return Err(err(
                code,
                format!("{name}'s argument must be a positive number, but is {f}"),
            ));
        }
        Operator::Ln => Bson::Double(f.ln()),
        Operator::Log10 => Bson::Double(f.log10()),
        Operator::Log | Operator::Pow => {
            let y = values[1].clone().unwrap_or(Bson::Null);
            let g = math_operand(op, values, 1)?;
            if op == Operator::Pow {
                power(&x, &y, f, g)?
            } else {
                log(&x, &y, f, g)?
            }
        }
        _ => return Err(err(ErrorCode::InternalError, "math operator out of place")),
    }))
}

/// A decimal above zero (the operand mongod takes down the decimal path of `$ln`, `$log`...).
fn positive_decimal(v: &Bson) -> bool {
    kind(v) == 3 && crate::query::decimal::cmp_zero(v) == Some(Ordering::Greater)
}

fn log(x: &Bson, base: &Bson, f: f64, g: f64) -> CommandResult<Bson> {
    let any_decimal = kind(x).max(kind(base)) == 3;
    let positive = |v: &Bson| crate::query::decimal::cmp_zero(v) == Some(Ordering::Greater);
    if any_decimal
        && positive(x)
        && positive(base)
        && order::compare_bson(base, &Bson::Int32(1)) != Ordering::Equal
        && let Some(r) = crate::query::decimal::log(x, base)
    {
        return Ok(r);
    }
    if f <= 0.0 {
        return Err(err(
            ErrorCode::Location28758,
            format!("$log's argument must be a positive number, but is {f}"),
        ));
    }
    if g <= 0.0 || g == 1.0 {
        return Err(err(
            ErrorCode::Location28759,
            format!("$log's base must be a positive number not equal to 1, but is {g}"),
        ));
    }
    Ok(Bson::Double(f.ln() / g.ln()))
}

pub(super) fn power(x: &Bson, y: &Bson, f: f64, g: f64) -> CommandResult<Bson> {
    let widest = kind(x).max(kind(y));
    // For decimals the check is exact (a tiny decimal base is not zero).
    let zero_base_negative_exponent = if widest == 3 {
        crate::query::decimal::cmp_zero(x) == Some(Ordering::Equal)
            && crate::query::decimal::cmp_zero(y) == Some(Ordering::Less)
    } else {
        f == 0.0 && g < 0.0
    };
    if zero_base_negative_exponent {
        return Err(err(
            ErrorCode::Location28764,
            "$pow cannot take a base of 0 and a negative exponent",
        ));
    }
    if widest <= 1
        && let (Some(b), Some(e)) = (types::as_i64_exact(x), types::as_i64_exact(y))
        && e >= 0
        && let Some(r) = u32::try_from(e).ok().and_then(|e| b.checked_pow(e))
    {
        return Ok(int_result(r, widest == 0));
    }
    Ok(if widest == 3 {
        crate::query::decimal::pow(x, y).unwrap_or(Bson::Double(f.powf(g)))
    } else {
        Bson::Double(f.powf(g))
    })
}

/// `$sum/$avg/$min/$max` as expressions: one array argument means its elements.
pub(super) fn accumulate(op: Operator, values: Vec<Value>) -> CommandResult<Value> {
    let items: Vec<Bson> = match values.as_slice() {
        [Some(Bson::Array(a))] => a.clone(),
        _ => values.into_iter().flatten().collect(),
    };
    match op {
        Operator::Sum | Operator::Avg => {
            let numbers: Vec<Bson> = items.into_iter().filter(types::is_number).collect();
            if op == Operator::Avg {
                if numbers.is_empty() {
                    return null();
                }
                let total: f64 = numbers.iter().filter_map(types::as_f64).sum();
                #[allow(clippy::cast_precision_loss)]
                let avg = total / numbers.len() as f64;
                let any_decimal = numbers.iter().any(|n| kind(n) == 3);
                return Ok(Some(if any_decimal {
                    decimal(avg)
                } else {
                    Bson::Double(avg)
                }));
            }
            Ok(Some(fold_numbers(
                &numbers,
                i64::checked_add,
                |a, b| a + b,
                0,
            )))
        }
        Operator::StdDevPop | Operator::StdDevSamp => {
            let mut dev = crate::query::pipeline::numeric::StdDev::default();
            for v in items.iter().filter(|v| types::is_number(v)) {
                dev.add(v);
            }
            Ok(Some(dev.result(op == Operator::StdDevSamp)))
        }
        _ => {
            let want = if op == Operator::Min {
                Ordering::Less
            } else {
                Ordering::Greater
            };
            let best = items
                .into_iter()
                .filter(|v| !matches!(v, Bson::Null | Bson::Undefined))
                .reduce(|best, v| {
                    if order::compare_bson(&v, &best) == want {
                        v
                    } else {
                        best
                    }
                });
            Ok(Some(best.unwrap_or(Bson::Null)))
        }
    }
}

/// `$rand`: a double in [0, 1).
pub(super) fn rand() -> CommandResult<Value> {
    Ok(Some(Bson::Double(rand::random::<f64>())))
}
