//! Numeric summation with mongod's result types: int32 while the sum fits, then int64, then
//! double once int64 overflows or a double is added, and decimal128 as soon as any decimal is
//! added. Non-numeric values are ignored by the callers. Doubles are summed with Kahan
//! compensation; the decimal sum goes through `crate::query::decimal::add`, the exact adder
//! `$add`, `$inc` and the `$sum` expression use too (a double joins it as mongod converts a
//! double to decimal, with 15 significant digits).

use crate::query::types;
use bson::{Bson, Decimal128};
use storage::order::number::{Decimal, decode_decimal};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Width {
    Int,
    Long,
    Double,
    Decimal,
}

/// An exact decimal `coefficient * 10^exponent`, or a special value.
#[derive(Debug, Clone, Copy)]
enum Dec {
    Finite(i128, i32),
    /// NaN or an infinity: the double sum carries it.
    Special,
    /// Too wide for i128: the double sum is used instead.
    Inexact,
}

/// A double as a decimal with mongod's 15 significant digits (trailing zeros dropped); a NaN
/// or an infinity stays a double, which the decimal adder reads as the same special value.
fn double_as_decimal(d: f64) -> Option<Bson> {
    match dec_from_f64(d) {
        Dec::Finite(c, e) => Some(Bson::Decimal128(decimal_from_parts(c, e))),
        Dec::Special => Some(Bson::Double(d)),
        Dec::Inexact => None,
    }
}

#[derive(Debug, Clone)]
pub struct NumSum {
    width: Width,
    long: i64,
    long_overflow: bool,
    double: f64,
    compensation: f64,
    /// The exact decimal sum of every number added; None once an addend could not be read.
    dec: Option<Bson>,
    pub count: i64,
}

impl Default for NumSum {
    fn default() -> Self {
        NumSum {
            width: Width::Int,
            long: 0,
            long_overflow: false,
            double: 0.0,
            compensation: 0.0,
            dec: Some(Bson::Int32(0)),
            count: 0,
        }
    }
}

impl NumSum {
    /// Adds a value; returns false (and changes nothing) when it is not a number.
    pub fn add(&mut self, v: &Bson) -> bool {
        let (width, as_long, as_f64, as_dec) = match v {
            Bson::Int32(i) => (
                Width::Int,
                Some(i64::from(*i)),
                f64::from(*i),
                Some(v.clone()),
            ),
            Bson::Int64(i) => (Width::Long, Some(*i), *i as f64, Some(v.clone())),
            Bson::Double(d) => (Width::Double, None, *d, double_as_decimal(*d)),
            Bson::Decimal128(d) => (
                Width::Decimal,
                None,
                types::decimal_to_f64(*d),
                Some(v.clone()),
            ),
            _ => return false,
        };
        self.count += 1;
        self.width = self.width.max(width);
        match as_long {
            Some(l) if !self.long_overflow => match self.long.checked_add(l) {
                Some(s) => self.long = s,
                None => self.long_overflow = true,
            },
            _ => {}
        }
        self.add_f64(as_f64);
        self.dec = match (&self.dec, as_dec) {
            (Some(sum), Some(x)) => crate::query::decimal::add(sum, &x),
            _ => None,
        };
        true
    }

    fn add_f64(&mut self, x: f64) {
        if !x.is_finite() || !self.double.is_finite() {
            self.double += x;
            return;
        }
        let y = x - self.compensation;
        let t = self.double + y;
        self.compensation = (t - self.double) - y;
        self.double = t;
    }

    /// True when only integers were added and their sum fits exactly.
    fn exact_long(&self) -> Option<i64> {
        (self.width <= Width::Long && !self.long_overflow).then_some(self.long)
    }

    /// The sum with mongod's result type (int32 0 for no numbers).
    pub fn sum(&self) -> Bson {
        match self.width {
            Width::Int | Width::Long => match self.exact_long() {
                Some(l) if self.width == Width::Int => {
                    i32::try_from(l).map_or(Bson::Int64(l), Bson::Int32)
                }
                Some(l) => Bson::Int64(l),
                None => Bson::Double(self.double),
            },
            Width::Double => Bson::Double(self.double),
            Width::Decimal => Bson::Decimal128(self.decimal_sum()),
        }
    }

    /// The mean, or null when no numbers were added.
    pub fn avg(&self) -> Bson {
        if self.count == 0 {
            return Bson::Null;
        }
        let n = self.count as f64;
        match self.width {
            Width::Decimal => {
                let mean = match self.dec {
                    Some(Bson::Decimal128(d)) => match dec_from_decimal(d) {
                        Dec::Finite(c, e) => decimal_div(c, e, self.count),
                        _ => None,
                    },
                    _ => None,
                };
                Bson::Decimal128(mean.unwrap_or_else(|| decimal_from_f64(self.double / n)))
            }
            _ => match self.exact_long() {
                Some(l) => Bson::Double(l as f64 / n),
                None => Bson::Double(self.double / n),
            },
        }
    }

    fn decimal_sum(&self) -> Decimal128 {
        match self.dec {
            Some(Bson::Decimal128(d)) => d,
            _ => decimal_from_f64(self.double),
        }
    }
}

fn dec_from_decimal(d: Decimal128) -> Dec {
    match decode_decimal(d.bytes()) {
        Decimal::Finite {
            negative,
            coefficient,
            exponent,
        } => match i128::try_from(coefficient) {
            Ok(c) => Dec::Finite(if negative { -c } else { c }, exponent),
            Err(_) => Dec::Inexact,
        },
        _ => Dec::Special,
    }
}

/// A double as mongod converts it to decimal: 15 significant digits.
fn dec_from_f64(d: f64) -> Dec {
    if !d.is_finite() {
        return Dec::Special;
    }
    let text = format!("{d:.14e}");
    let Some((mantissa, exp)) = text.split_once('e') else {
        return Dec::Inexact;
    };
    let digits: String = mantissa
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    match (digits.parse::<i128>(), exp.parse::<i32>()) {
        (Ok(mut c), Ok(e)) => {
            let mut e = e - 14;
            while c != 0 && c % 10 == 0 {
                c /= 10;
                e += 1;
            }
            Dec::Finite(c, e)
        }
        _ => Dec::Inexact,
    }
}

fn decimal_from_parts(c: i128, e: i32) -> Decimal128 {
    format!("{c}e{e}")
        .parse()
        .unwrap_or_else(|_| decimal_from_f64(f64::NAN))
}

/// `c * 10^e / n` to 34 significant digits, by long division on the scaled coefficient.
fn decimal_div(c: i128, e: i32, n: i64) -> Option<Decimal128> {
    let n = i128::from(n);
    let mut coefficient = c;
    let mut exponent = e;
    // Scale up while it fits so that the quotient keeps as many digits as possible.
    while coefficient.unsigned_abs() < 10u128.pow(36) && exponent > -6000 {
        coefficient = coefficient.checked_mul(10)?;
        exponent -= 1;
    }
    let mut quotient = coefficient / n;
    // An exact quotient takes the ideal exponent (that of the dividend), as IEEE 754 does.
    if coefficient % n == 0 {
        while quotient % 10 == 0 && exponent < e {
            quotient /= 10;
            exponent += 1;
        }
    }
    Some(decimal_from_parts(quotient, exponent))
}

pub fn decimal_from_f64(d: f64) -> Decimal128 {
    let text = if d.is_nan() {
        "NaN".to_string()
    } else if d.is_infinite() {
        if d > 0.0 {
            "Infinity".to_string()
        } else {
            "-Infinity".to_string()
        }
    } else {
        format!("{d:.14e}")
    };
    text.parse().unwrap_or(Decimal128::from_bytes([0; 16]))
}

/// Population or sample standard deviation by Welford's method over doubles.
#[derive(Debug, Clone, Default)]
pub struct StdDev {
    n: u64,
    mean: f64,
    m2: f64,
}

impl StdDev {
    pub fn add(&mut self, v: &Bson) {
        let Some(x) = types::as_f64(v) else {
            return;
        };
        self.n += 1;
        let delta = x - self.mean;
        self.mean += delta / self.n as f64;
        self.m2 += delta * (x - self.mean);
    }

    pub fn result(&self, sample: bool) -> Bson {
        let denominator = if sample {
            self.n.saturating_sub(1)
        } else {
            self.n
        };
        if denominator == 0 {
            return Bson::Null;
        }
        Bson::Double((self.m2 / denominator as f64).max(0.0).sqrt())
    }
}
