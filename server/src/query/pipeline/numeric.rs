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
/// (The sum keeps doubles apart, see `NumSum::add`; the tests sum this way as the reference.)
#[cfg(test)]
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
    /// The exact decimal sum of every double and decimal added; None once an addend could not
    /// be read. Integers are kept apart, in `ints`, and joined only when the decimal sum is
    /// read (the decimal adder is the costly part of a sum, and most sums see no decimal).
    dec: Option<Bson>,
    /// The exact sum of the integer addends.
    ints: i128,
    /// The exact sum of the doubles' decimal values (15 digits each) while it fits in i128; a
    /// double that does not fit goes into `dec`.
    doubles: (i128, i32),
    pub count: i64,
    /// For [`NumSum::merge`]: the sum of the addends' magnitudes (as doubles, an estimate
    /// within rounding), the least decimal exponent among them (0 for integers), and whether
    /// every addend was a finite number that fits those bounds.
    abs_f64: f64,
    exponent_min: i32,
    mergeable: bool,
}

/// Slack on [`NumSum`]'s magnitude estimate (a double sum of many magnitudes is off by at
/// most `count * 2^-53` relatively; this covers 10^12 addends).
const ABS_SLACK: f64 = 1.0001;

impl Default for NumSum {
    fn default() -> Self {
        NumSum {
            width: Width::Int,
            long: 0,
            long_overflow: false,
            double: 0.0,
            compensation: 0.0,
            dec: Some(Bson::Int32(0)),
            ints: 0,
            doubles: (0, 0),
            count: 0,
            abs_f64: 0.0,
            exponent_min: 0,
            mergeable: true,
        }
    }
}

impl NumSum {
    /// Adds a value; returns false (and changes nothing) when it is not a number.
    pub fn add(&mut self, v: &Bson) -> bool {
        let (width, as_long, as_f64, as_dec) = match v {
            // Converted only when it does not join the exact double sum (see below).
            Bson::Double(d) => (Width::Double, None, *d, None),
            Bson::Int32(i) => (
                Width::Int,
                Some(i64::from(*i)),
                f64::from(*i),
                Some(v.clone()),
            ),
            Bson::Int64(i) => (Width::Long, Some(*i), *i as f64, Some(v.clone())),
            Bson::Decimal128(d) => (
                Width::Decimal,
                None,
                types::decimal_to_f64(*d),
                Some(v.clone()),
            ),
            _ => return false,
        };
        self.count += 1;
        self.abs_f64 += as_f64.abs();
        self.width = self.width.max(width);
        match as_long {
            Some(l) if !self.long_overflow => match self.long.checked_add(l) {
                Some(s) => self.long = s,
                None => self.long_overflow = true,
            },
            _ => {}
        }
        self.add_f64(as_f64);
        if let (Some(l), Width::Int | Width::Long) = (as_long, width) {
            self.ints += i128::from(l);
            return true;
        }
        let as_dec = match v {
            Bson::Double(d) => match dec_from_f64(*d) {
                Dec::Finite(c, e) => {
                    self.exponent_min = self.exponent_min.min(e);
                    match dec_add(self.doubles, (c, e)) {
                        Some(sum) => {
                            self.doubles = sum;
                            return true;
                        }
                        None => {
                            self.mergeable = false;
                            Some(Bson::Decimal128(decimal_from_parts(c, e)))
                        }
                    }
                }
                Dec::Special => {
                    self.mergeable = false;
                    Some(Bson::Double(*d))
                }
                Dec::Inexact => None,
            },
            Bson::Decimal128(d) => {
                match dec_from_decimal(*d) {
                    Dec::Finite(_, e) => self.exponent_min = self.exponent_min.min(e),
                    _ => self.mergeable = false,
                }
                as_dec
            }
            _ => as_dec,
        };
        self.dec = match (&self.dec, as_dec) {
            (Some(sum), Some(x)) => crate::query::decimal::add(sum, &x),
            _ => None,
        };
        true
    }

    /// False once this sum can no longer merge with another non-empty one (see
    /// [`NumSum::merge`]): a double was added, int64 overflowed, or an addend was special.
    pub fn merges(&self) -> bool {
        self.mergeable && !self.long_overflow && self.width != Width::Double
    }

    /// Adds the addends of `later` (the sum over a later part of the same input) when the result
    /// is certain to equal adding them one by one after this sum's own; false otherwise, and
    /// `self` is then unusable (the caller folds the whole input in one pass instead).
    ///
    /// Certain means no step of either order rounds: integer sums whose magnitudes together
    /// stay below 2^63 (no prefix overflows to a double), and decimal sums whose magnitudes
    /// stay below 10^33 units of their least exponent (every partial sum is exact in 34
    /// digits, and an exact decimal sum is the same value with the same exponent in any
    /// order). A sum that reads its double total (a double added, or int64 overflow) depends
    /// on the order of its compensated additions and never merges.
    pub fn merge(&mut self, later: &NumSum) -> bool {
        if later.count == 0 {
            return true;
        }
        if self.count == 0 {
            *self = later.clone();
            return true;
        }
        let width = self.width.max(later.width);
        let abs = (self.abs_f64 + later.abs_f64) * ABS_SLACK;
        let exponent_min = self.exponent_min.min(later.exponent_min);
        let exact = self.mergeable
            && later.mergeable
            && match width {
                Width::Int | Width::Long => {
                    !self.long_overflow && !later.long_overflow && abs < 9.2e18
                }
                Width::Double => false,
                Width::Decimal => abs < 10f64.powi(exponent_min.saturating_add(33)),
            };
        let dec = match (&self.dec, &later.dec) {
            (Some(a), Some(b)) if exact => crate::query::decimal::add(a, b),
            _ => None,
        };
        let (Some(dec), Some(doubles), Some(long), Some(ints)) = (
            dec,
            dec_add(self.doubles, later.doubles),
            self.long.checked_add(later.long),
            self.ints.checked_add(later.ints),
        ) else {
            return false;
        };
        self.width = width;
        self.long = long;
        self.ints = ints;
        self.doubles = doubles;
        self.dec = Some(dec);
        // Not read for an exact width; kept a plain sum for completeness.
        self.double += later.double;
        self.count += later.count;
        self.abs_f64 += later.abs_f64;
        self.exponent_min = exponent_min;
        true
    }

    /// The exact decimal sum of everything added (`None`: an addend could not be read).
    fn exact_dec(&self) -> Option<Bson> {
        let ints = i64::try_from(self.ints)
            .map(Bson::Int64)
            .unwrap_or_else(|_| Bson::Decimal128(decimal_from_parts(self.ints, 0)));
        let with_ints = crate::query::decimal::add(self.dec.as_ref()?, &ints)?;
        let (c, e) = self.doubles;
        crate::query::decimal::add(&with_ints, &Bson::Decimal128(decimal_from_parts(c, e)))
    }

    /// [`NumSum::add`] of a raw value: numbers are read in place, anything else is ignored
    /// without being decoded.
    pub fn add_raw(&mut self, v: bson::RawBsonRef<'_>) -> bool {
        let n = match v {
            bson::RawBsonRef::Int32(i) => Bson::Int32(i),
            bson::RawBsonRef::Int64(i) => Bson::Int64(i),
            bson::RawBsonRef::Double(d) => Bson::Double(d),
            bson::RawBsonRef::Decimal128(d) => Bson::Decimal128(d),
            _ => return false,
        };
        self.add(&n)
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
                let mean = match self.exact_dec() {
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
        match self.exact_dec() {
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
    if let Some(fast) = dec_from_f64_exact(d) {
        return fast;
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

/// [`dec_from_f64`] by integer arithmetic on the double's exact value `m * 2^e2`, for the
/// doubles where that fits in u128 (most of them): the 15-digit coefficient is
/// `round(m * 2^e2 * 10^s)` with `s = 14 - floor(log10 |d|)`. `None` (the text conversion
/// decides) when it does not fit, on an exact tie, and when the digit count comes out wrong.
fn dec_from_f64_exact(d: f64) -> Option<Dec> {
    if d == 0.0 {
        // As the text conversion reads "0.00000000000000e0".
        return Some(Dec::Finite(0, -14));
    }
    let bits = d.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = u128::from(bits & ((1u64 << 52) - 1));
    let (m, e2) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1u128 << 52), biased - 1075)
    };
    let k = d.abs().log10().floor() as i32;
    let s = 14 - k;
    let pow10 = |n: i32| 10u128.checked_pow(u32::try_from(n).ok()?);
    let shift = |x: u128, n: i32| x.checked_mul(1u128.checked_shl(u32::try_from(n).ok()?)?);
    // |d| * 10^s = num / den.
    let (num, den) = match (e2 >= 0, s >= 0) {
        (true, true) => (shift(m, e2)?.checked_mul(pow10(s)?)?, 1),
        (true, false) => (shift(m, e2)?, pow10(-s)?),
        (false, true) => (m.checked_mul(pow10(s)?)?, shift(1, -e2)?),
        (false, false) => (m, shift(pow10(-s)?, -e2)?),
    };
    let (q, r) = (num / den, num % den);
    let twice = r.checked_mul(2)?;
    if twice == den {
        return None;
    }
    let mut c = q + u128::from(twice > den);
    if !(10u128.pow(14)..10u128.pow(15)).contains(&c) {
        return None;
    }
    let mut e = -s;
    while c % 10 == 0 {
        c /= 10;
        e += 1;
    }
    let c = i128::try_from(c).ok()?;
    Some(Dec::Finite(if d < 0.0 { -c } else { c }, e))
}

/// `a + b` exactly, when the aligned coefficients fit in i128.
fn dec_add(a: (i128, i32), b: (i128, i32)) -> Option<(i128, i32)> {
    let e = a.1.min(b.1);
    let scale = |(c, x): (i128, i32)| {
        10i128
            .checked_pow(u32::try_from(x - e).ok()?)
            .and_then(|p| c.checked_mul(p))
    };
    Some((scale(a)?.checked_add(scale(b)?)?, e))
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

#[cfg(test)]
mod tests {
    //! Proves the integer arithmetic conversion of a double to 15 decimal digits gives what the
    //! text conversion gives, and that a sum keeping integers and doubles apart gives the same
    //! sum and mean as adding every number to one decimal sum in turn (the reference).
    //! How: seeded random doubles of every magnitude (random bits, cents, integers, halves)
    //! and random mixes of int32, int64, double and decimal addends.
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn text_dec(d: f64) -> Option<(i128, i32)> {
        let text = format!("{d:.14e}");
        let (mantissa, exp) = text.split_once('e')?;
        let digits: String = mantissa
            .chars()
            .filter(|c| c.is_ascii_digit() || *c == '-')
            .collect();
        let (mut c, mut e) = (digits.parse::<i128>().ok()?, exp.parse::<i32>().ok()? - 14);
        while c != 0 && c % 10 == 0 {
            c /= 10;
            e += 1;
        }
        Some((c, e))
    }

    fn random_double(rng: &mut StdRng) -> f64 {
        match rng.random_range(0..6) {
            0 => f64::from_bits(rng.random()),
            1 => (rng.random::<f64>() * 1_000_000.0).round() / 100.0,
            2 => rng.random_range(-(1i64 << 53)..(1i64 << 53)) as f64,
            3 => f64::from(rng.random_range(-1000..1000)) / 2.0,
            4 => rng.random::<f64>() * 10f64.powi(rng.random_range(-30..30)),
            _ => -rng.random::<f64>() * 100.0,
        }
    }

    #[test]
    fn exact_conversion_matches_the_text_conversion() {
        let mut rng = StdRng::seed_from_u64(15);
        let mut fast = 0;
        for _ in 0..200_000 {
            let d = random_double(&mut rng);
            if !d.is_finite() {
                continue;
            }
            if let Some(Dec::Finite(c, e)) = dec_from_f64_exact(d) {
                fast += 1;
                assert_eq!(Some((c, e)), text_dec(d), "{d:e}");
            }
        }
        assert!(
            fast > 100_000,
            "most doubles take the integer path ({fast})"
        );
    }

    fn reference(values: &[Bson]) -> (Bson, Bson) {
        // One decimal sum, every addend added in turn (the sum before integers and doubles
        // were kept apart).
        let mut dec = Some(Bson::Int32(0));
        for v in values {
            let x = match v {
                Bson::Double(d) => double_as_decimal(*d),
                other => Some(other.clone()),
            };
            dec = match (&dec, x) {
                (Some(s), Some(x)) => crate::query::decimal::add(s, &x),
                _ => None,
            };
        }
        let mut sum = NumSum::default();
        for v in values {
            sum.add(v);
        }
        let Some(Bson::Decimal128(d)) = dec else {
            return (sum.sum(), sum.avg());
        };
        let mean = match dec_from_decimal(d) {
            Dec::Finite(c, e) => decimal_div(c, e, sum.count).map(Bson::Decimal128),
            _ => None,
        };
        (Bson::Decimal128(d), mean.unwrap_or_else(|| sum.avg()))
    }

    #[test]
    fn sums_kept_apart_match_one_decimal_sum() {
        let mut rng = StdRng::seed_from_u64(16);
        for round in 0..2_000 {
            let values: Vec<Bson> = (0..rng.random_range(1..30))
                .map(|_| match rng.random_range(0..4) {
                    0 => Bson::Int32(rng.random_range(-1000..1000)),
                    1 => Bson::Int64(rng.random_range(-1_000_000_000_000..1_000_000_000_000)),
                    2 => Bson::Double((rng.random::<f64>() * 1e6).round() / 100.0),
                    _ => Bson::Decimal128(
                        format!(
                            "{}.{:02}",
                            rng.random_range(-999..999),
                            rng.random_range(0..100)
                        )
                        .parse()
                        .expect("decimal"),
                    ),
                })
                .collect();
            let mut sum = NumSum::default();
            for v in &values {
                sum.add(v);
            }
            if sum.width != Width::Decimal {
                continue;
            }
            assert_eq!(
                (sum.sum(), sum.avg()),
                reference(&values),
                "round {round}: {values:?}"
            );
        }
    }

    /// Merges the sums of `values` split at every point; where the merge says exact, sum and
    /// mean must be the one-pass ones (values and types).
    fn check_merges(values: &[Bson]) -> usize {
        let mut whole = NumSum::default();
        for v in values {
            whole.add(v);
        }
        let mut exact = 0;
        for cut in 0..=values.len() {
            let (mut a, mut b) = (NumSum::default(), NumSum::default());
            values[..cut].iter().for_each(|v| {
                a.add(v);
            });
            values[cut..].iter().for_each(|v| {
                b.add(v);
            });
            if a.merge(&b) {
                exact += 1;
                assert_eq!(
                    (a.sum(), a.avg()),
                    (whole.sum(), whole.avg()),
                    "cut {cut}: {values:?}"
                );
            }
        }
        exact
    }

    #[test]
    fn merged_sums_equal_one_pass_sums_where_exact() {
        let mut rng = StdRng::seed_from_u64(17);
        let (mut exact, mut tried) = (0, 0);
        for _ in 0..500 {
            let values: Vec<Bson> = (0..rng.random_range(0..12))
                .map(|_| match rng.random_range(0..5) {
                    0 => Bson::Int32(rng.random_range(-1000..1000)),
                    1 => Bson::Int64(rng.random_range(-(1i64 << 62)..(1i64 << 62))),
                    2 => Bson::Double(random_double(&mut rng)),
                    3 => Bson::String("x".into()),
                    _ => Bson::Decimal128(
                        format!(
                            "{}.{:02}",
                            rng.random_range(-999..999),
                            rng.random_range(0..100)
                        )
                        .parse()
                        .expect("decimal"),
                    ),
                })
                .collect();
            tried += values.len() + 1;
            exact += check_merges(&values);
        }
        assert!(
            exact * 4 > tried,
            "a fair share merges ({exact} of {tried})"
        );
        // Integers and cents always merge; a long overflow or a double never does.
        let ints: Vec<Bson> = (0..50).map(|i| Bson::Int32(i * 7 - 100)).collect();
        assert_eq!(check_merges(&ints), 51);
        let big = [Bson::Int64(i64::MAX), Bson::Int64(1), Bson::Int64(-1)];
        assert_eq!(check_merges(&big), 2, "only the cuts with an empty side");
        let mixed = [Bson::Double(0.1), Bson::Int32(1), Bson::Double(0.2)];
        assert_eq!(check_merges(&mixed), 2);
    }
}
