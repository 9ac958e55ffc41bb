//! Exact canonical form of every BSON number (int32, int64, double, decimal128) for the key
//! encoding. Each finite non-zero value becomes a sign plus `0.d1d2..dn × 10^exp10` with no
//! leading or trailing zero digit, so two numbers that are equal as real numbers get the same
//! form whatever their BSON type, and magnitudes order by (exp10, digits). Doubles are expanded
//! to their exact decimal value (a small bignum), never rounded; this keeps int64 values beyond
//! 2^53 and decimal128 values exact against doubles.

use bson::Decimal128;

/// A number reduced to its ordering class; `Neg`/`Pos` carry the exact magnitude.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Canonical {
    NaN,
    NegInf,
    Neg(Magnitude),
    Zero,
    Pos(Magnitude),
    PosInf,
}

/// `0.d1d2..dn × 10^exp10`, digits 0..=9, `d1 != 0`, `dn != 0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Magnitude {
    pub exp10: i32,
    pub digits: Vec<u8>,
}

/// Decimal128 exponent bias and the largest canonical coefficient (34 digits).
const DECIMAL_EXPONENT_BIAS: i32 = 6176;
const DECIMAL_EXPONENT_BIASED_MAX: i32 = 12287;
const DECIMAL_COEFFICIENT_MAX: u128 = 10u128.pow(34) - 1;
const DECIMAL_DIGITS_MAX: usize = 34;

impl Magnitude {
    /// `mag × 10^pow10`; `mag` must be non-zero.
    fn from_u128(mag: u128, pow10: i32) -> Magnitude {
        Magnitude::from_decimal_string(&mag.to_string(), pow10)
    }

    /// `text` is the decimal digits of a non-zero integer, value `text × 10^pow10`.
    fn from_decimal_string(text: &str, pow10: i32) -> Magnitude {
        let trimmed = text.trim_start_matches('0');
        let significant = trimmed.trim_end_matches('0');
        let digits: Vec<u8> = significant.bytes().map(|b| b - b'0').collect();
        // Digit counts are bounded by the BSON types (at most ~770 for subnormal doubles).
        let exp10 = trimmed.len() as i32 + pow10;
        Magnitude { exp10, digits }
    }

    /// The integer value when it fits an i128 and is integral.
    pub fn to_integer(&self) -> Option<u128> {
        let len = self.digits.len() as i32;
        if self.exp10 < len || self.exp10 > 38 {
            return None;
        }
        let mut value: u128 = 0;
        for &d in &self.digits {
            value = value.checked_mul(10)?.checked_add(u128::from(d))?;
        }
        for _ in len..self.exp10 {
            value = value.checked_mul(10)?;
        }
        Some(value)
    }

    fn scientific(&self) -> String {
        let digits: String = self.digits.iter().map(|d| char::from(b'0' + d)).collect();
        format!("0.{digits}e{}", self.exp10)
    }
}

/// Integers take `keycode::encode_integer` in production; this is the reference it is tested
/// against.
#[cfg(test)]
pub(crate) fn from_i64(value: i64) -> Canonical {
    match value.signum() {
        0 => Canonical::Zero,
        1 => Canonical::Pos(Magnitude::from_u128(u128::from(value.unsigned_abs()), 0)),
        _ => Canonical::Neg(Magnitude::from_u128(u128::from(value.unsigned_abs()), 0)),
    }
}

pub(crate) fn from_f64(value: f64) -> Canonical {
    if value.is_nan() {
        return Canonical::NaN;
    }
    if value.is_infinite() {
        return if value > 0.0 {
            Canonical::PosInf
        } else {
            Canonical::NegInf
        };
    }
    if value == 0.0 {
        return Canonical::Zero;
    }
    let magnitude = exact_f64_magnitude(value.abs());
    if value > 0.0 {
        Canonical::Pos(magnitude)
    } else {
        Canonical::Neg(magnitude)
    }
}

/// The exact decimal expansion of a finite positive double.
fn exact_f64_magnitude(value: f64) -> Magnitude {
    let bits = value.to_bits();
    let exponent_field = ((bits >> 52) & 0x7FF) as i32;
    let fraction = bits & ((1u64 << 52) - 1);
    let (mut mantissa, mut exp2) = if exponent_field == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1u64 << 52), exponent_field - 1075)
    };
    while mantissa & 1 == 0 && exp2 < 0 {
        mantissa >>= 1;
        exp2 += 1;
    }
    if exp2 >= 0 {
        if exp2 <= 70 {
            return Magnitude::from_u128(u128::from(mantissa) << exp2, 0);
        }
        let mut big = BigUint::from_u64(mantissa);
        big.mul_pow(2, exp2 as u32);
        return Magnitude::from_decimal_string(&big.into_decimal(), 0);
    }
    // mantissa × 2^-k == mantissa × 5^k × 10^-k.
    let k = -exp2;
    let mut big = BigUint::from_u64(mantissa);
    big.mul_pow(5, k as u32);
    Magnitude::from_decimal_string(&big.into_decimal(), -k)
}

pub(crate) fn from_decimal128(value: Decimal128) -> Canonical {
    let bits = u128::from_le_bytes(value.bytes());
    let negative = bits >> 127 == 1;
    let combination = (bits >> 122) & 0x1F;
    if combination == 0x1F {
        return Canonical::NaN;
    }
    if combination == 0x1E {
        return if negative {
            Canonical::NegInf
        } else {
            Canonical::PosInf
        };
    }
    let (biased, coefficient) = if (bits >> 125) & 0b11 == 0b11 {
        // The "11" form implies a coefficient >= 2^113 > the canonical maximum: zero.
        (((bits >> 111) & 0x3FFF) as i32, 0)
    } else {
        (((bits >> 113) & 0x3FFF) as i32, bits & ((1u128 << 113) - 1))
    };
    if coefficient == 0 || coefficient > DECIMAL_COEFFICIENT_MAX {
        return Canonical::Zero;
    }
    let magnitude = Magnitude::from_u128(coefficient, biased - DECIMAL_EXPONENT_BIAS);
    if negative {
        Canonical::Neg(magnitude)
    } else {
        Canonical::Pos(magnitude)
    }
}

/// The BSON value a decoded number becomes: the narrowest of int32, int64, double, decimal128
/// that holds it exactly (the original type is not recorded in the key).
pub(crate) fn to_bson(number: &Canonical) -> Option<bson::Bson> {
    let (negative, magnitude) = match number {
        Canonical::NaN => return Some(bson::Bson::Double(f64::NAN)),
        Canonical::NegInf => return Some(bson::Bson::Double(f64::NEG_INFINITY)),
        Canonical::PosInf => return Some(bson::Bson::Double(f64::INFINITY)),
        Canonical::Zero => return Some(bson::Bson::Int32(0)),
        Canonical::Neg(m) => (true, m),
        Canonical::Pos(m) => (false, m),
    };
    if let Some(integer) = magnitude.to_integer() {
        let signed = i128::try_from(integer).ok()?;
        let signed = if negative { -signed } else { signed };
        if let Ok(small) = i32::try_from(signed) {
            return Some(bson::Bson::Int32(small));
        }
        if let Ok(wide) = i64::try_from(signed) {
            return Some(bson::Bson::Int64(wide));
        }
    }
    if let Ok(double) = magnitude.scientific().parse::<f64>()
        && double.is_finite()
        && double != 0.0
        && exact_f64_magnitude(double) == *magnitude
    {
        return Some(bson::Bson::Double(if negative { -double } else { double }));
    }
    to_decimal128(negative, magnitude).map(bson::Bson::Decimal128)
}

fn to_decimal128(negative: bool, magnitude: &Magnitude) -> Option<Decimal128> {
    if magnitude.digits.len() > DECIMAL_DIGITS_MAX {
        return None;
    }
    let mut coefficient: u128 = 0;
    for &d in &magnitude.digits {
        coefficient = coefficient * 10 + u128::from(d);
    }
    let pow10 = magnitude.exp10 - magnitude.digits.len() as i32;
    let biased = pow10 + DECIMAL_EXPONENT_BIAS;
    if !(0..=DECIMAL_EXPONENT_BIASED_MAX).contains(&biased) {
        return None;
    }
    let sign = if negative { 1u128 << 127 } else { 0 };
    let bits = sign | ((biased as u128) << 113) | coefficient;
    Some(Decimal128::from_bytes(bits.to_le_bytes()))
}

/// Just enough unsigned bignum to expand a double exactly: little-endian base-2^32 limbs.
struct BigUint {
    limbs: Vec<u32>,
}

impl BigUint {
    fn from_u64(value: u64) -> BigUint {
        BigUint {
            limbs: vec![value as u32, (value >> 32) as u32],
        }
    }

    fn mul_small(&mut self, factor: u32) {
        let mut carry: u64 = 0;
        for limb in &mut self.limbs {
            let product = u64::from(*limb) * u64::from(factor) + carry;
            *limb = product as u32;
            carry = product >> 32;
        }
        if carry != 0 {
            self.limbs.push(carry as u32);
        }
    }

    /// Multiplies by `base^exponent` in chunks that fit a u32 factor.
    fn mul_pow(&mut self, base: u32, mut exponent: u32) {
        let (chunk, chunk_exponent) = match base {
            2 => (1u32 << 31, 31),
            _ => (5u32.pow(13), 13),
        };
        while exponent >= chunk_exponent {
            self.mul_small(chunk);
            exponent -= chunk_exponent;
        }
        self.mul_small(base.pow(exponent));
    }

    /// Divides in place by `divisor`, returning the remainder.
    fn div_small(&mut self, divisor: u32) -> u32 {
        let mut remainder: u64 = 0;
        for limb in self.limbs.iter_mut().rev() {
            let current = (remainder << 32) | u64::from(*limb);
            *limb = (current / u64::from(divisor)) as u32;
            remainder = current % u64::from(divisor);
        }
        while self.limbs.last() == Some(&0) {
            self.limbs.pop();
        }
        remainder as u32
    }

    fn into_decimal(mut self) -> String {
        const CHUNK: u32 = 1_000_000_000;
        let mut chunks = Vec::new();
        while !self.limbs.is_empty() {
            chunks.push(self.div_small(CHUNK));
        }
        let mut text = String::new();
        for (i, chunk) in chunks.iter().rev().enumerate() {
            if i == 0 {
                text.push_str(&chunk.to_string());
            } else {
                text.push_str(&format!("{chunk:09}"));
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digits(m: &Canonical) -> (i32, String) {
        match m {
            Canonical::Pos(m) | Canonical::Neg(m) => (
                m.exp10,
                m.digits.iter().map(|d| char::from(b'0' + d)).collect(),
            ),
            _ => (0, String::new()),
        }
    }

    #[test]
    fn doubles_expand_exactly() {
        assert_eq!(digits(&from_f64(1.5)), (1, "15".into()));
        assert_eq!(
            digits(&from_f64(0.1)).1,
            "1000000000000000055511151231257827021181583404541015625"
        );
        assert_eq!(from_f64(9007199254740992.0), from_i64(9007199254740992));
        assert_eq!(from_f64(1e300), {
            let text = format!("{:.0}", 1e300f64);
            Canonical::Pos(Magnitude::from_decimal_string(&text, 0))
        });
        let tiny = f64::from_bits(1);
        assert_eq!(digits(&from_f64(tiny)).0, -323);
    }

    #[test]
    fn integer_fast_path_matches_the_general_path() {
        let samples = [
            1i64,
            7,
            10,
            100,
            120,
            1203,
            99_000,
            -5,
            -1000,
            i64::MAX,
            i64::MIN + 1,
            i64::MIN,
        ];
        for v in samples {
            let mut fast = Vec::new();
            super::super::encode_value(&mut fast, bson::RawBsonRef::Int64(v));
            let mut general = Vec::new();
            super::super::encode_number(&mut general, &from_i64(v));
            assert_eq!(fast, general, "{v}");
        }
    }

    #[test]
    fn decimals_round_trip() {
        for text in [
            "1",
            "-1.5",
            "1E+6111",
            "9999999999999999999999999999999999E-6176",
            "0.1",
        ] {
            let d: Decimal128 = text.parse().expect("valid decimal");
            let canonical = from_decimal128(d);
            let back = to_bson(&canonical).expect("representable");
            let again = match back {
                bson::Bson::Decimal128(x) => from_decimal128(x),
                bson::Bson::Double(x) => from_f64(x),
                bson::Bson::Int32(x) => from_i64(i64::from(x)),
                bson::Bson::Int64(x) => from_i64(x),
                other => panic!("unexpected {other:?}"),
            };
            assert_eq!(canonical, again, "{text}");
        }
    }
}
