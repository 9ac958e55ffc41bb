//! Exact decimal128 addition and multiplication for `$inc`, `$mul`, `$add`, `$subtract`,
//! `$multiply` and `$sum`, so that money-like values (`0.1 + 0.2`) stay exact instead of
//! passing through a double. Results keep at most 34 significant digits, rounded half to even
//! as IEEE 754 decimal arithmetic does; the rare operands whose alignment would not fit in
//! 128 bits fall back to double arithmetic (documented limitation).

use crate::query::types;
use bson::{Bson, Decimal128};
use storage::order::number::{
    Decimal, decimal_infinity, decimal_nan, decode_decimal, encode_decimal,
};

/// Largest coefficient a decimal128 holds: 34 nines.
const COEFFICIENT_MAX: u128 = 9_999_999_999_999_999_999_999_999_999_999_999;
const EXPONENT_MIN: i32 = -6176;
const EXPONENT_MAX: i32 = 6111;

/// A number read as a decimal.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Value {
    NaN,
    Infinity {
        negative: bool,
    },
    Finite {
        negative: bool,
        coefficient: u128,
        exponent: i32,
    },
}

fn read(v: &Bson) -> Option<Value> {
    let finite = |negative, coefficient, exponent| Value::Finite {
        negative,
        coefficient,
        exponent,
    };
    Some(match v {
        Bson::Int32(i) => finite(*i < 0, u128::from(i.unsigned_abs()), 0),
        Bson::Int64(i) => finite(*i < 0, u128::from(i.unsigned_abs()), 0),
        Bson::Decimal128(d) => match decode_decimal(d.bytes()) {
            Decimal::NaN => Value::NaN,
            Decimal::Infinity { negative } => Value::Infinity { negative },
            Decimal::Finite {
                negative,
                coefficient,
                exponent,
            } => finite(negative, coefficient, exponent),
        },
        Bson::Double(d) if d.is_nan() => Value::NaN,
        Bson::Double(d) if d.is_infinite() => Value::Infinity { negative: *d < 0.0 },
        // The shortest text that reads back as the same double ("0.1", not 0.1000000000000000055...).
        Bson::Double(d) => match format!("{d:e}").parse::<Decimal128>() {
            Ok(x) => return read(&Bson::Decimal128(x)),
            Err(_) => return None,
        },
        _ => return None,
    })
}

fn write(v: Value) -> Bson {
    let bytes = match v {
        Value::NaN => decimal_nan(),
        Value::Infinity { negative } => decimal_infinity(negative),
        Value::Finite {
            negative,
            coefficient,
            exponent,
        } => {
            let (coefficient, exponent) = normalize(coefficient, exponent);
            if exponent > EXPONENT_MAX {
                decimal_infinity(negative)
            } else {
                encode_decimal(negative, coefficient, exponent.max(EXPONENT_MIN))
            }
        }
    };
    Bson::Decimal128(Decimal128::from_bytes(bytes))
}

/// Rounds the coefficient to 34 digits (half to even) and brings the exponent into range.
fn normalize(mut c: u128, mut e: i32) -> (u128, i32) {
    let mut dropped_any = false;
    let mut last_dropped = 0u128;
    while c > COEFFICIENT_MAX || e < EXPONENT_MIN {
        dropped_any |= last_dropped != 0;
        last_dropped = c % 10;
        c /= 10;
        e += 1;
        if c == 0 {
            break;
        }
    }
    let round_up = last_dropped > 5 || (last_dropped == 5 && (dropped_any || c % 2 == 1));
    if round_up {
        c += 1;
        if c > COEFFICIENT_MAX {
            c /= 10;
            e += 1;
        }
    }
    (c, e)
}

fn pow10(n: u32) -> Option<u128> {
    10u128.checked_pow(n)
}

fn signed_add(na: bool, ca: u128, nb: bool, cb: u128) -> (bool, u128) {
    if na == nb {
        return (na, ca.saturating_add(cb));
    }
    if ca >= cb {
        (na, ca - cb)
    } else {
        (nb, cb - ca)
    }
}

/// `a + b` exactly when both are numbers and one is a decimal; `None` when not applicable.
pub fn add(a: &Bson, b: &Bson) -> Option<Bson> {
    let (x, y) = (read(a)?, read(b)?);
    Some(write(match (x, y) {
        (Value::NaN, _) | (_, Value::NaN) => Value::NaN,
        (Value::Infinity { negative: p }, Value::Infinity { negative: q }) if p != q => Value::NaN,
        (inf @ Value::Infinity { .. }, _) | (_, inf @ Value::Infinity { .. }) => inf,
        (
            Value::Finite {
                negative: na,
                coefficient: ca,
                exponent: ea,
            },
            Value::Finite {
                negative: nb,
                coefficient: cb,
                exponent: eb,
            },
        ) => {
            let e = ea.min(eb);
            let scale = |c: u128, from: i32| {
                pow10((from - e).unsigned_abs()).and_then(|p| c.checked_mul(p))
            };
            match (scale(ca, ea), scale(cb, eb)) {
                (Some(sa), Some(sb)) if sa.checked_add(sb).is_some() => {
                    let (negative, coefficient) = signed_add(na, sa, nb, sb);
                    Value::Finite {
                        negative: negative && coefficient != 0,
                        coefficient,
                        exponent: e,
                    }
                }
                _ => return fallback(a, b, |p, q| p + q),
            }
        }
    }))
}

/// `a * b` exactly when both are numbers and one is a decimal.
pub fn mul(a: &Bson, b: &Bson) -> Option<Bson> {
    let (x, y) = (read(a)?, read(b)?);
    Some(write(match (x, y) {
        (Value::NaN, _) | (_, Value::NaN) => Value::NaN,
        (
            Value::Infinity { negative: p },
            Value::Finite {
                negative: q,
                coefficient: 0,
                ..
            },
        )
        | (
            Value::Finite {
                negative: q,
                coefficient: 0,
                ..
            },
            Value::Infinity { negative: p },
        ) => {
            let _ = (p, q);
            Value::NaN
        }
        (Value::Infinity { negative: p }, other) | (other, Value::Infinity { negative: p }) => {
            let q = match other {
                Value::Infinity { negative } | Value::Finite { negative, .. } => negative,
                Value::NaN => false,
            };
            Value::Infinity { negative: p != q }
        }
        (
            Value::Finite {
                negative: na,
                coefficient: ca,
                exponent: ea,
            },
            Value::Finite {
                negative: nb,
                coefficient: cb,
                exponent: eb,
            },
        ) => match ca.checked_mul(cb) {
            Some(c) => Value::Finite {
                negative: (na != nb) && c != 0,
                coefficient: c,
                exponent: ea + eb,
            },
            None => return fallback(a, b, |p, q| p * q),
        },
    }))
}

/// Double arithmetic, then back to decimal: only for operands too far apart for 128 bits.
fn fallback(a: &Bson, b: &Bson, f: fn(f64, f64) -> f64) -> Option<Bson> {
    let r = f(types::as_f64(a)?, types::as_f64(b)?);
    format!("{r:e}")
        .parse::<Decimal128>()
        .ok()
        .map(Bson::Decimal128)
}

/// Negates a number (for `$subtract`).
pub fn negate(v: &Bson) -> Option<Bson> {
    Some(write(match read(v)? {
        Value::NaN => Value::NaN,
        Value::Infinity { negative } => Value::Infinity {
            negative: !negative,
        },
        Value::Finite {
            negative,
            coefficient,
            exponent,
        } => Value::Finite {
            negative: !negative && coefficient != 0,
            coefficient,
            exponent,
        },
    }))
}

#[cfg(test)]
mod tests {
    // Proves decimal arithmetic is exact where mongod's is (0.1 + 0.2 == 0.3, scale kept) and
    // rounds to 34 digits half to even, by hand-checked cases.
    use super::*;

    fn d(s: &str) -> Bson {
        Bson::Decimal128(s.parse().expect("valid decimal"))
    }

    fn text(v: Option<Bson>) -> String {
        match v {
            Some(Bson::Decimal128(x)) => x.to_string(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn exact_sums_and_products() {
        assert_eq!(text(add(&d("0.1"), &d("0.2"))), "0.3");
        assert_eq!(text(add(&d("1.10"), &Bson::Int32(2))), "3.10");
        assert_eq!(text(add(&d("0.1"), &Bson::Double(0.2))), "0.3");
        assert_eq!(text(add(&d("5"), &negate(&d("7")).expect("number"))), "-2");
        assert_eq!(text(mul(&d("1.5"), &Bson::Int64(3))), "4.5");
        assert_eq!(text(mul(&d("-0.5"), &d("0.5"))), "-0.25");
        assert_eq!(
            text(add(&d("9999999999999999999999999999999999"), &d("1"))),
            "1.000000000000000000000000000000000E+34"
        );
        assert_eq!(text(add(&d("NaN"), &d("1"))), "NaN");
        assert_eq!(text(add(&d("Infinity"), &d("-Infinity"))), "NaN");
        assert_eq!(add(&Bson::String("x".into()), &d("1")), None);
    }
}
