//! Trigonometry (`$sin` ... `$atanh`, `$atan2`) and angle conversion (`$degreesToRadians`,
//! `$radiansToDegrees`). Computed in doubles; a decimal argument gives a decimal result, as
//! mongod's does. null or missing gives null; an argument outside the function's domain fails
//! with mongod's 50989, a non-number with 28765.

use super::Operator;
use super::args::*;
use super::arithmetic::decimal;
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::types;
use bson::Bson;

/// The closed range an argument must lie in, as mongod's message writes it.
fn domain(op: Operator) -> Option<(f64, f64, &'static str)> {
    use Operator::*;
    match op {
        Sin | Cos | Tan => Some((f64::MIN, f64::MAX, "(-inf,inf)")),
        Asin | Acos | Atanh => Some((-1.0, 1.0, "[-1,1]")),
        Acosh => Some((1.0, f64::INFINITY, "[1,inf]")),
        _ => None,
    }
}

pub(super) fn trig(op: Operator, values: &[Value]) -> CommandResult<Value> {
    if values.iter().any(is_nullish) {
        return null();
    }
    let name = op_name(op);
    let mut args = [0.0f64; 2];
    let mut any_decimal = false;
    for (slot, v) in args.iter_mut().zip(values) {
        let b = v.as_ref().unwrap_or(&Bson::Null);
        let Some(f) = types::as_f64(b) else {
            return Err(err(
                ErrorCode::Location28765,
                format!("{name} only supports numeric types, not {}", type_name(v)),
            ));
        };
        any_decimal |= matches!(b, Bson::Decimal128(_));
        *slot = f;
    }
    let [x, y] = args;
    if let Some((lo, hi, shown)) = domain(op)
        && !x.is_nan()
        && !(lo..=hi).contains(&x)
    {
        return Err(err(
            ErrorCode::Location50989,
            format!("cannot apply {name} to {x}, value must be in {shown}"),
        ));
    }
    use Operator::*;
    let r = match op {
        Sin => x.sin(),
        Cos => x.cos(),
        Tan => x.tan(),
        Asin => x.asin(),
        Acos => x.acos(),
        Atan => x.atan(),
        Atan2 => x.atan2(y),
        Sinh => x.sinh(),
        Cosh => x.cosh(),
        Tanh => x.tanh(),
        Asinh => x.asinh(),
        Acosh => x.acosh(),
        Atanh => x.atanh(),
        DegreesToRadians => x.to_radians(),
        RadiansToDegrees => x.to_degrees(),
        _ => unreachable!("trig called for {op:?}"),
    };
    Ok(Some(if any_decimal {
        decimal(r)
    } else {
        Bson::Double(r)
    }))
}

#[cfg(test)]
mod tests {
    use super::super::Expr;
    use bson::{Bson, doc};

    fn eval(spec: bson::Document) -> Result<Bson, crate::error::CommandError> {
        let raw = bson::RawDocumentBuf::new();
        Expr::parse(&Bson::Document(spec))?
            .evaluate_value(&raw)
            .map(|v| v.unwrap_or(Bson::Null))
    }

    fn close(v: Bson, want: f64) {
        let Bson::Double(f) = v else {
            panic!("{v:?} is not a double")
        };
        assert!((f - want).abs() < 1e-12, "{f} vs {want}");
    }

    #[test]
    fn values_nulls_and_decimals() {
        close(eval(doc! { "$sin": 0 }).unwrap(), 0.0);
        close(eval(doc! { "$cos": 0.0 }).unwrap(), 1.0);
        close(
            eval(doc! { "$atan2": [1, 1] }).unwrap(),
            std::f64::consts::FRAC_PI_4,
        );
        close(
            eval(doc! { "$degreesToRadians": 180 }).unwrap(),
            std::f64::consts::PI,
        );
        close(
            eval(doc! { "$radiansToDegrees": std::f64::consts::PI }).unwrap(),
            180.0,
        );
        close(eval(doc! { "$acosh": 1 }).unwrap(), 0.0);
        assert_eq!(eval(doc! { "$tan": null }).unwrap(), Bson::Null);
        assert_eq!(
            eval(doc! { "$atan2": [1, "$missing"] }).unwrap(),
            Bson::Null
        );
        let d = "0".parse::<bson::Decimal128>().unwrap();
        assert!(matches!(
            eval(doc! { "$sinh": d }).unwrap(),
            Bson::Decimal128(_)
        ));
    }

    #[test]
    fn domains_and_types_fail_as_mongod() {
        let code = |spec| eval(spec).unwrap_err().code.code();
        assert_eq!(code(doc! { "$asin": 2 }), 50989);
        assert_eq!(code(doc! { "$acos": -1.5 }), 50989);
        assert_eq!(code(doc! { "$acosh": 0.5 }), 50989);
        assert_eq!(code(doc! { "$sin": f64::INFINITY }), 50989);
        assert_eq!(code(doc! { "$cos": "x" }), 28765);
        assert!(matches!(eval(doc! { "$asin": f64::NAN }).unwrap(), Bson::Double(f) if f.is_nan()));
    }
}
