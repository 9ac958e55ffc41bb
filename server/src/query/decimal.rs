//! decimal128 arithmetic through decNumber (the `dec` crate): IEEE 754-2008 decimal128 with 34
//! digits, rounding half to even, gradual underflow to subnormals and overflow to ±Infinity
//! exactly where the standard puts them. mongod computes with Intel's BID library; both follow
//! the standard, so results agree digit for digit.
//!
//! BSON stores decimal128 in the binary-integer (BID) encoding and decNumber in the densely
//! packed (DPD) one: values cross between the two as sign, coefficient and exponent
//! (`storage::order::number` reads and writes BID).
//!
//! Operands of other types take mongod's conversions: integers exactly, a double rounded to 15
//! significant digits (mongod's `Decimal128(double)` default, so `2.5` is `2.50000000000000`).

use bson::{Bson, Decimal128};
use dec::{Context, Decimal128 as Dec, Rounding};
use storage::order::number::{
    Decimal, decimal_infinity, decimal_nan, decode_decimal, encode_decimal,
};

fn context(rounding: Rounding) -> Context<Dec> {
    let mut cx = Context::<Dec>::default();
    cx.set_rounding(rounding);
    cx
}

/// A numeric BSON value as a decNumber; `None` for other types.
fn read(v: &Bson) -> Option<Dec> {
    let mut cx = Context::<Dec>::default();
    Some(match v {
        Bson::Int32(i) => cx.from_i128(i128::from(*i)),
        Bson::Int64(i) => cx.from_i128(i128::from(*i)),
        Bson::Double(d) if d.is_nan() => Dec::NAN,
        Bson::Double(d) if d.is_infinite() => infinity(*d < 0.0),
        Bson::Double(d) => cx.parse(format!("{d:.14e}")).ok()?,
        Bson::Decimal128(d) => match decode_decimal(d.bytes()) {
            Decimal::NaN => Dec::NAN,
            Decimal::Infinity { negative } => infinity(negative),
            Decimal::Finite {
                negative,
                coefficient,
                exponent,
            } => {
                let sign = if negative { "-" } else { "" };
                cx.parse(format!("{sign}{coefficient}E{exponent}")).ok()?
            }
        },
        _ => return None,
    })
}

fn infinity(negative: bool) -> Dec {
    let inf = Context::<Dec>::default()
        .parse("Infinity")
        .unwrap_or(Dec::NAN);
    if negative { -inf } else { inf }
}

fn write(d: Dec) -> Bson {
    let bytes = if d.is_nan() {
        decimal_nan()
    } else if d.is_infinite() {
        decimal_infinity(d.is_signed())
    } else {
        // `is_signed`, not `is_negative`: the sign of a zero is kept (-0 stays -0).
        encode_decimal(d.is_signed(), d.coefficient().unsigned_abs(), d.exponent())
    };
    Bson::Decimal128(Decimal128::from_bytes(bytes))
}

fn binary(a: &Bson, b: &Bson, op: fn(&mut Context<Dec>, Dec, Dec) -> Dec) -> Option<Bson> {
    let (x, y) = (read(a)?, read(b)?);
    Some(write(op(&mut Context::default(), x, y)))
}

/// `a + b` as decimals (`$add`, `$sum`, `$inc`).
pub fn add(a: &Bson, b: &Bson) -> Option<Bson> {
    binary(a, b, Context::<Dec>::add)
}

/// `a - b` as decimals (`$subtract`).
pub fn sub(a: &Bson, b: &Bson) -> Option<Bson> {
    binary(a, b, Context::<Dec>::sub)
}

/// `a * b` as decimals (`$multiply`, `$mul`).
pub fn mul(a: &Bson, b: &Bson) -> Option<Bson> {
    binary(a, b, Context::<Dec>::mul)
}

/// `a / b` as decimals (`$divide`; the caller refuses a zero divisor first, as mongod does).
pub fn div(a: &Bson, b: &Bson) -> Option<Bson> {
    binary(a, b, Context::<Dec>::div)
}

/// The remainder of `a / b` truncated toward zero, sign of `a` (`$mod`).
pub fn rem(a: &Bson, b: &Bson) -> Option<Bson> {
    binary(a, b, Context::<Dec>::rem)
}

/// `-v`: IEEE's copy-negate, the sign bit flipped (so `-0` from `0`).
pub fn negate(v: &Bson) -> Option<Bson> {
    let Bson::Decimal128(x) = write(read(v)?) else {
        return None;
    };
    let mut bytes = x.bytes();
    bytes[15] ^= 0x80;
    Some(Bson::Decimal128(Decimal128::from_bytes(bytes)))
}

/// `|v|` (`$abs`): exact at every magnitude.
pub fn abs(v: &Bson) -> Option<Bson> {
    if read(v)?.is_signed() {
        negate(v)
    } else {
        read(v).map(write)
    }
}

/// How a numeric value compares with zero, exactly (a decimal too small for a double is still
/// above zero); `None` for NaN or a non-number.
pub fn cmp_zero(v: &Bson) -> Option<std::cmp::Ordering> {
    let x = read(v)?;
    if x.is_nan() {
        None
    } else if x.is_zero() {
        Some(std::cmp::Ordering::Equal)
    } else if x.is_negative() {
        Some(std::cmp::Ordering::Less)
    } else {
        Some(std::cmp::Ordering::Greater)
    }
}

/// Whether `v` is a numeric zero of any sign (a divisor check).
pub fn is_zero(v: &Bson) -> bool {
    read(v).is_some_and(|x| x.is_zero())
}

/// `$round` (half to even) or `$trunc` (toward zero) to `places` decimal places (negative:
/// tens, hundreds, ...). A value with no digit past the place is returned as it is.
pub fn round(v: &Bson, places: i64, truncate: bool) -> Option<Bson> {
    let x = read(v)?;
    let target = i32::try_from(-places).ok()?;
    if !x.is_finite() || x.exponent() >= target {
        return Some(write(x));
    }
    let mut cx = context(if truncate {
        Rounding::Down
    } else {
        Rounding::HalfEven
    });
    let quantum = cx.parse(format!("1E{target}")).ok()?;
    Some(write(cx.quantize(x, quantum)))
}

/// The transcendental functions run in decNumber's arbitrary-precision type at decimal128's
/// 34 digits, then round once into decimal128 (which brings overflow to ±Infinity and
/// subnormals where IEEE puts them).
type Wide = dec::Decimal<12>;

fn wide_context() -> Context<Wide> {
    let mut cx = Context::<Wide>::default();
    // 34 digits always fit the 36 of `Decimal<12>`; decNumber's exp, ln, log10 and power
    // want exponent limits within ±999999 (far beyond decimal128's, so nothing rounds twice).
    let _ = cx.set_precision(34);
    let _ = cx.set_max_exponent(999_999);
    let _ = cx.set_min_exponent(-999_999);
    cx
}

fn narrow(w: &Wide) -> Bson {
    write(Context::<Dec>::default().from_decimal(w))
}

fn unary_wide(v: &Bson, f: fn(&mut Context<Wide>, &mut Wide)) -> Option<Bson> {
    let mut x = Wide::from(read(v)?);
    f(&mut wide_context(), &mut x);
    Some(narrow(&x))
}

/// `sqrt(v)` (`$sqrt`; the caller refuses a negative argument first).
pub fn sqrt(v: &Bson) -> Option<Bson> {
    unary_wide(v, |cx, x| cx.sqrt(x))
}

/// `e^v` (`$exp`).
pub fn exp(v: &Bson) -> Option<Bson> {
    unary_wide(v, |cx, x| cx.exp(x))
}

/// The natural logarithm (`$ln`; the caller refuses a non-positive argument first).
pub fn ln(v: &Bson) -> Option<Bson> {
    unary_wide(v, |cx, x| cx.ln(x))
}

/// The base-10 logarithm (`$log10`).
pub fn log10(v: &Bson) -> Option<Bson> {
    unary_wide(v, |cx, x| cx.log10(x))
}

/// `log_base(v)` as mongod computes it: `ln(v) / ln(base)`, each a decimal128.
pub fn log(v: &Bson, base: &Bson) -> Option<Bson> {
    div(&ln(v)?, &ln(base)?)
}

/// `base^exponent` (`$pow`; a negative base with a fractional exponent is NaN, as IEEE says).
pub fn pow(base: &Bson, exponent: &Bson) -> Option<Bson> {
    let mut x = Wide::from(read(base)?);
    let y = Wide::from(read(exponent)?);
    wide_context().pow(&mut x, &y);
    Some(narrow(&x))
}

/// `$floor` / `$ceil`: the integral value below / above, at exponent 0 (IEEE's quantize: a
/// value too large to write with exponent 0 in 34 digits becomes NaN, as mongod's BID does).
pub fn floor_ceil(v: &Bson, ceil: bool) -> Option<Bson> {
    let x = read(v)?;
    let mut cx = context(if ceil {
        Rounding::Ceiling
    } else {
        Rounding::Floor
    });
    let one = cx.from_i128(1);
    Some(write(cx.quantize(x, one)))
}

/// The integer part of a decimal (truncated toward zero), `None` for NaN, ±Infinity or a
/// value beyond 128 bits (`$toInt`/`$toLong` then fail as mongod does).
pub fn trunc_to_i128(v: &Bson) -> Option<i128> {
    let x = read(v)?;
    if !x.is_finite() {
        return None;
    }
    let whole = context(Rounding::Down).round(x);
    let exponent = u32::try_from(whole.exponent()).unwrap_or(0);
    10i128
        .checked_pow(exponent)
        .and_then(|scale| whole.coefficient().checked_mul(scale))
}

/// A double as mongod turns it into a decimal: rounded to 15 significant digits.
pub fn from_f64(d: f64) -> Bson {
    read(&Bson::Double(d)).map_or(Bson::Double(d), write)
}

#[cfg(test)]
mod tests {
    // Proves the decimal operations give IEEE 754-2008 decimal128 results (mongod's) at the
    // edges: the largest and smallest finite values, the smallest subnormal, NaN, ±0,
    // overflow to Infinity, rounding half to even to 34 digits, and the BID round trip.
    use super::*;

    const MAX: &str = "9.999999999999999999999999999999999E+6144";
    const MIN_SUBNORMAL: &str = "1E-6176";

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
        assert_eq!(text(sub(&d("5"), &d("7"))), "-2");
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

    #[test]
    fn doubles_enter_with_15_digits() {
        assert_eq!(text(Some(from_f64(2.5))), "2.50000000000000");
        assert_eq!(
            text(add(&d("0.1"), &Bson::Double(0.2))),
            "0.300000000000000"
        );
        assert_eq!(text(Some(from_f64(f64::INFINITY))), "Infinity");
        assert_eq!(text(Some(from_f64(f64::NAN))), "NaN");
    }

    #[test]
    fn edges_of_the_range() {
        // Every edge value survives the BID -> decNumber -> BID trip unchanged (x * 1 keeps
        // coefficient and exponent).
        let negative_max = format!("-{MAX}");
        for s in [
            MAX,
            &negative_max,
            MIN_SUBNORMAL,
            "0E-6176",
            "1E+6111",
            "-1E-6143",
            "123.4500",
            "NaN",
            "Infinity",
            "-Infinity",
        ] {
            assert_eq!(text(mul(&d(s), &Bson::Int32(1))), text(Some(d(s))), "{s}");
        }
        assert_eq!(text(abs(&d(&format!("-{MAX}")))), MAX);
        assert_eq!(text(abs(&d(MIN_SUBNORMAL))), MIN_SUBNORMAL);
        assert_eq!(text(abs(&d("-0"))), "0");
        assert_eq!(text(negate(&d("0"))), "-0");
        // Overflow goes to Infinity, underflow to a subnormal, then to zero.
        assert_eq!(text(mul(&d(MAX), &d("10"))), "Infinity");
        assert_eq!(text(mul(&d(MAX), &d("-10"))), "-Infinity");
        assert_eq!(text(add(&d(MAX), &d(MAX))), "Infinity");
        assert_eq!(text(div(&d("1E-6175"), &d("10"))), MIN_SUBNORMAL);
        assert_eq!(text(div(&d(MIN_SUBNORMAL), &d("10"))), "0E-6176");
        // 34 digits, half to even.
        assert_eq!(
            text(div(&d("2"), &d("3"))),
            "0.6666666666666666666666666666666667"
        );
        assert_eq!(
            text(add(&d("1E+34"), &d("5"))),
            "1.000000000000000000000000000000000E+34"
        );
        assert_eq!(
            text(add(&d("1E+34"), &d("15"))),
            "1.000000000000000000000000000000002E+34"
        );
        assert_eq!(text(div(&d("1"), &d("0"))), "Infinity");
        assert_eq!(text(div(&d("0"), &d("0"))), "NaN");
    }

    #[test]
    fn remainders_rounding_and_integers() {
        assert_eq!(text(rem(&d("7.5"), &d("2"))), "1.5");
        assert_eq!(text(rem(&d("-7.5"), &d("2"))), "-1.5");
        assert_eq!(text(round(&d("2.5"), 0, false)), "2");
        assert_eq!(text(round(&d("3.5"), 0, false)), "4");
        assert_eq!(text(round(&d("-2.567"), 2, false)), "-2.57");
        assert_eq!(text(round(&d("-2.567"), 2, true)), "-2.56");
        assert_eq!(text(round(&d("1234.5"), -2, false)), "1.2E+3");
        assert_eq!(text(round(&d("1.5"), 3, false)), "1.5");
        assert_eq!(text(round(&d(MAX), 0, false)), MAX);
        assert_eq!(text(round(&d(MIN_SUBNORMAL), 0, true)), "0");
        assert_eq!(trunc_to_i128(&d("-9.99")), Some(-9));
        assert_eq!(trunc_to_i128(&d("1E+3")), Some(1000));
        assert_eq!(
            trunc_to_i128(&d("9223372036854775807.9")),
            Some(i128::from(i64::MAX))
        );
        assert_eq!(trunc_to_i128(&d(MAX)), None);
        assert_eq!(trunc_to_i128(&d("NaN")), None);
        assert!(is_zero(&d("-0E+5")) && !is_zero(&d(MIN_SUBNORMAL)));
    }
}
