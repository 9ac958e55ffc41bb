//! Exact comparison of BSON numbers across int32, int64, double and decimal128.
//!
//! mongod orders all four numeric types in one bracket by mathematical value. Doubles and
//! 64-bit integers do not fit in each other (2^53 + 1 has no double; 0.5 has no integer), and
//! decimal128 holds 34 decimal digits with exponents far outside a double's range, so nothing
//! here converts one type to another lossily: every finite value is written as
//! `coefficient * 2^pow2 * 5^pow5` and two such values are compared with a small big-integer
//! when their magnitudes are too close to decide by estimate. NaN (of either float type) sorts
//! below every other number and equals every other NaN; -0 equals 0.

use std::cmp::Ordering;

/// A BSON number, as stored.
#[derive(Debug, Clone, Copy)]
pub enum Number {
    Int(i64),
    Double(f64),
    /// The 16 bytes of a decimal128 in BSON (little-endian) order.
    Decimal([u8; 16]),
}

/// A decimal128 decoded from its bits (IEEE 754-2008 BID encoding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decimal {
    NaN,
    Infinity {
        negative: bool,
    },
    /// `(-1)^negative * coefficient * 10^exponent`.
    Finite {
        negative: bool,
        coefficient: u128,
        exponent: i32,
    },
}

/// The largest coefficient a canonical decimal128 may hold (34 nines); larger ones read as 0.
const DECIMAL_COEFFICIENT_MAX: u128 = 9_999_999_999_999_999_999_999_999_999_999_999;
const DECIMAL_EXPONENT_BIAS: i32 = 6176;
const DECIMAL_EXPONENT_MASK: u128 = 0x3fff;

/// Decodes a decimal128 from its BSON bytes.
pub fn decode_decimal(bytes: [u8; 16]) -> Decimal {
    let bits = u128::from_le_bytes(bytes);
    let negative = bits >> 127 == 1;
    let combination = (bits >> 122) & 0x1f;
    if combination == 0x1f {
        return Decimal::NaN;
    }
    if combination == 0x1e {
        return Decimal::Infinity { negative };
    }
    let (biased, coefficient) = if (bits >> 125) & 0b11 == 0b11 {
        // The "large coefficient" form: its implied coefficient always exceeds 10^34 - 1, so
        // the value is non-canonical and reads as zero; only the exponent survives.
        ((bits >> 111) & DECIMAL_EXPONENT_MASK, 0)
    } else {
        let c = bits & ((1u128 << 113) - 1);
        (
            (bits >> 113) & DECIMAL_EXPONENT_MASK,
            if c > DECIMAL_COEFFICIENT_MAX { 0 } else { c },
        )
    };
    // `biased` has 14 bits, so the cast is exact.
    let exponent = biased as i32 - DECIMAL_EXPONENT_BIAS;
    Decimal::Finite {
        negative,
        coefficient,
        exponent,
    }
}

/// A number reduced to one of three shapes for comparison.
#[derive(Debug, Clone, Copy)]
enum Value {
    NaN,
    Infinite {
        negative: bool,
    },
    /// `(-1)^negative * coefficient * 2^pow2 * 5^pow5`; a zero coefficient is zero whatever
    /// its sign.
    Finite {
        negative: bool,
        coefficient: u128,
        pow2: i32,
        pow5: i32,
    },
}

fn value_of(n: Number) -> Value {
    match n {
        Number::Int(i) => Value::Finite {
            negative: i < 0,
            coefficient: u128::from(i.unsigned_abs()),
            pow2: 0,
            pow5: 0,
        },
        Number::Double(d) => double_value(d),
        Number::Decimal(bytes) => match decode_decimal(bytes) {
            Decimal::NaN => Value::NaN,
            Decimal::Infinity { negative } => Value::Infinite { negative },
            Decimal::Finite {
                negative,
                coefficient,
                exponent,
            } => Value::Finite {
                negative,
                coefficient,
                pow2: exponent,
                pow5: exponent,
            },
        },
    }
}

fn double_value(d: f64) -> Value {
    if d.is_nan() {
        return Value::NaN;
    }
    if d.is_infinite() {
        return Value::Infinite { negative: d < 0.0 };
    }
    let bits = d.to_bits();
    let negative = bits >> 63 == 1;
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1u64 << 52) - 1);
    let (mantissa, pow2) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1u64 << 52), biased - 1075)
    };
    Value::Finite {
        negative,
        coefficient: u128::from(mantissa),
        pow2,
        pow5: 0,
    }
}

/// Compares two numbers by value, NaN lowest.
pub fn compare_numbers(a: Number, b: Number) -> Ordering {
    // Fast paths for the common same-kind cases.
    match (a, b) {
        (Number::Int(x), Number::Int(y)) => return x.cmp(&y),
        (Number::Double(x), Number::Double(y)) if !x.is_nan() && !y.is_nan() => {
            return x.partial_cmp(&y).unwrap_or(Ordering::Equal);
        }
        _ => {}
    }
    compare_values(value_of(a), value_of(b))
}

fn compare_values(a: Value, b: Value) -> Ordering {
    use Value::*;
    match (a, b) {
        (NaN, NaN) => Ordering::Equal,
        (NaN, _) => Ordering::Less,
        (_, NaN) => Ordering::Greater,
        (Infinite { negative: x }, Infinite { negative: y }) => y.cmp(&x),
        (Infinite { negative }, Finite { .. }) => {
            if negative {
                Ordering::Less
            } else {
                Ordering::Greater
            }
        }
        (Finite { .. }, Infinite { negative }) => {
            if negative {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
        (
            Finite {
                negative: na,
                coefficient: ca,
                pow2: a2,
                pow5: a5,
            },
            Finite {
                negative: nb,
                coefficient: cb,
                pow2: b2,
                pow5: b5,
            },
        ) => {
            let sign_a = sign(na, ca);
            let sign_b = sign(nb, cb);
            if sign_a != sign_b || sign_a == 0 {
                return sign_a.cmp(&sign_b);
            }
            let magnitude = compare_magnitudes((ca, a2, a5), (cb, b2, b5));
            if sign_a < 0 {
                magnitude.reverse()
            } else {
                magnitude
            }
        }
    }
}

fn sign(negative: bool, coefficient: u128) -> i8 {
    match (coefficient, negative) {
        (0, _) => 0,
        (_, true) => -1,
        (_, false) => 1,
    }
}

/// log2(5), slightly rounded; the estimate only needs to be good to well under one unit.
const LOG2_5: f64 = 2.321_928_094_887_362;
/// How far apart two log2 estimates must be before the estimate alone decides.
const ESTIMATE_MARGIN: f64 = 4.0;

/// Compares `ca * 2^a2 * 5^a5` with `cb * 2^b2 * 5^b5`, both coefficients non-zero.
fn compare_magnitudes(a: (u128, i32, i32), b: (u128, i32, i32)) -> Ordering {
    let estimate = |(c, p2, p5): (u128, i32, i32)| {
        f64::from(128 - c.leading_zeros()) + f64::from(p2) + f64::from(p5) * LOG2_5
    };
    let (ea, eb) = (estimate(a), estimate(b));
    if ea > eb + ESTIMATE_MARGIN {
        return Ordering::Greater;
    }
    if eb > ea + ESTIMATE_MARGIN {
        return Ordering::Less;
    }
    // Scale both sides by the same power of 2 and of 5 so that all exponents are >= 0, then
    // compare exact integers. Close magnitudes keep the exponent differences small.
    let base2 = a.1.min(b.1);
    let base5 = a.2.min(b.2);
    let big_a = BigUint::build(a.0, a.1 - base2, a.2 - base5);
    let big_b = BigUint::build(b.0, b.1 - base2, b.2 - base5);
    big_a.cmp(&big_b)
}

/// Just enough of an unsigned big integer for the comparison above: little-endian u32 limbs.
#[derive(Debug, PartialEq, Eq)]
struct BigUint {
    limbs: Vec<u32>,
}

/// 5^13, the largest power of five below 2^32.
const FIVE_POW_13: u32 = 1_220_703_125;

impl BigUint {
    fn build(coefficient: u128, pow2: i32, pow5: i32) -> BigUint {
        let mut n = BigUint { limbs: Vec::new() };
        let mut c = coefficient;
        while c > 0 {
            n.limbs.push(c as u32); // truncation intended: the low limb
            c >>= 32;
        }
        let mut remaining = pow5.max(0);
        while remaining >= 13 {
            n.mul_small(FIVE_POW_13);
            remaining -= 13;
        }
        n.mul_small(5u32.pow(remaining.unsigned_abs()));
        n.shl(pow2.max(0).unsigned_abs());
        n.trim();
        n
    }

    fn mul_small(&mut self, factor: u32) {
        let mut carry = 0u64;
        for limb in &mut self.limbs {
            let product = u64::from(*limb) * u64::from(factor) + carry;
            *limb = product as u32; // low half
            carry = product >> 32;
        }
        if carry > 0 {
            self.limbs.push(carry as u32);
        }
    }

    fn shl(&mut self, bits: u32) {
        let whole = (bits / 32) as usize;
        let part = bits % 32;
        if part > 0 {
            let mut carry = 0u32;
            for limb in &mut self.limbs {
                let next = *limb >> (32 - part);
                *limb = (*limb << part) | carry;
                carry = next;
            }
            if carry > 0 {
                self.limbs.push(carry);
            }
        }
        if whole > 0 {
            self.limbs.splice(0..0, std::iter::repeat_n(0, whole));
        }
    }

    fn trim(&mut self) {
        while self.limbs.last() == Some(&0) {
            self.limbs.pop();
        }
    }
}

impl PartialOrd for BigUint {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for BigUint {
    fn cmp(&self, other: &Self) -> Ordering {
        self.limbs
            .len()
            .cmp(&other.limbs.len())
            .then_with(|| self.limbs.iter().rev().cmp(other.limbs.iter().rev()))
    }
}

/// Encodes a finite decimal128 (for tests and corpora): `coefficient * 10^exponent`.
pub fn encode_decimal(negative: bool, coefficient: u128, exponent: i32) -> [u8; 16] {
    let biased = u128::from(
        (exponent + DECIMAL_EXPONENT_BIAS)
            .clamp(0, 12287)
            .unsigned_abs(),
    );
    let bits = (u128::from(negative) << 127) | (biased << 113) | (coefficient & ((1 << 113) - 1));
    bits.to_le_bytes()
}

/// The decimal128 NaN and infinities, as BSON bytes.
pub fn decimal_nan() -> [u8; 16] {
    (0x1fu128 << 122).to_le_bytes()
}

pub fn decimal_infinity(negative: bool) -> [u8; 16] {
    ((u128::from(negative) << 127) | (0x1eu128 << 122)).to_le_bytes()
}

#[cfg(test)]
mod tests {
    // Proves numbers compare exactly by value across the four numeric types at the edges
    // (2^53, i64 bounds, NaN, infinities, decimal exponents), by hand-checked pairs.
    use super::*;
    use Number::*;

    fn dec(negative: bool, c: u128, e: i32) -> Number {
        Decimal(encode_decimal(negative, c, e))
    }

    #[test]
    fn decimal_round_trip() {
        let b = encode_decimal(true, 12345, -2);
        assert_eq!(
            decode_decimal(b),
            super::Decimal::Finite {
                negative: true,
                coefficient: 12345,
                exponent: -2
            }
        );
        assert_eq!(decode_decimal(decimal_nan()), super::Decimal::NaN);
        assert_eq!(
            decode_decimal(decimal_infinity(true)),
            super::Decimal::Infinity { negative: true }
        );
        // The bson crate's own parse of "1.5" must decode to 15e-1.
        let parsed: bson::Decimal128 = "1.5".parse().expect("valid decimal");
        assert_eq!(
            decode_decimal(parsed.bytes()),
            super::Decimal::Finite {
                negative: false,
                coefficient: 15,
                exponent: -1
            }
        );
    }

    #[test]
    fn int_double_boundaries() {
        let two53 = 1i64 << 53;
        assert_eq!(
            compare_numbers(Int(two53 + 1), Double(two53 as f64)),
            Ordering::Greater
        );
        assert_eq!(
            compare_numbers(Int(two53), Double(two53 as f64)),
            Ordering::Equal
        );
        assert_eq!(
            compare_numbers(Int(i64::MAX), Double(9_223_372_036_854_775_807.0)),
            Ordering::Less
        );
        assert_eq!(
            compare_numbers(Int(i64::MIN), Double(-9_223_372_036_854_775_808.0)),
            Ordering::Equal
        );
        assert_eq!(compare_numbers(Int(0), Double(-0.0)), Ordering::Equal);
        assert_eq!(compare_numbers(Int(1), Double(0.5)), Ordering::Greater);
        assert_eq!(compare_numbers(Int(-1), Double(-0.5)), Ordering::Less);
        assert_eq!(
            compare_numbers(Int(i64::MIN), Double(f64::NAN)),
            Ordering::Greater
        );
        assert_eq!(
            compare_numbers(Int(i64::MAX), Double(f64::INFINITY)),
            Ordering::Less
        );
        assert_eq!(
            compare_numbers(Double(f64::NAN), Double(f64::NAN)),
            Ordering::Equal
        );
        assert_eq!(
            compare_numbers(Double(f64::NAN), Double(f64::NEG_INFINITY)),
            Ordering::Less
        );
        assert_eq!(compare_numbers(Double(5e-324), Int(0)), Ordering::Greater);
    }

    #[test]
    fn decimals_by_value() {
        assert_eq!(
            compare_numbers(dec(false, 15, -1), Double(1.5)),
            Ordering::Equal
        );
        assert_eq!(
            compare_numbers(dec(false, 1, -1), Double(0.1)),
            Ordering::Less
        ); // 0.1 as a double is slightly more
        assert_eq!(
            compare_numbers(dec(false, 100, -2), Int(1)),
            Ordering::Equal
        );
        assert_eq!(compare_numbers(dec(true, 0, 5), Int(0)), Ordering::Equal);
        assert_eq!(
            compare_numbers(dec(false, 1, 6111), Double(f64::MAX)),
            Ordering::Greater
        );
        assert_eq!(
            compare_numbers(dec(false, 1, -6176), Double(5e-324)),
            Ordering::Less
        );
        assert_eq!(
            compare_numbers(dec(false, 1, -6176), Int(0)),
            Ordering::Greater
        );
        assert_eq!(
            compare_numbers(Decimal(decimal_nan()), Double(f64::NAN)),
            Ordering::Equal
        );
        assert_eq!(
            compare_numbers(Decimal(decimal_infinity(false)), Double(f64::INFINITY)),
            Ordering::Equal
        );
        assert_eq!(
            compare_numbers(Decimal(decimal_infinity(true)), Double(f64::MIN)),
            Ordering::Less
        );
        let big = dec(false, 9_223_372_036_854_775_808, 0);
        assert_eq!(compare_numbers(big, Int(i64::MAX)), Ordering::Greater);
        assert_eq!(
            compare_numbers(big, Double(9_223_372_036_854_775_808.0)),
            Ordering::Equal
        );
    }
}
