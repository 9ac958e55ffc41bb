//! `$firstN`, `$lastN`, `$maxN` and `$minN` as expressions over an array (`{n, input}`), the
//! way mongod runs its accumulator of the same name over the array's elements: `$firstN` and
//! `$lastN` keep nulls, `$maxN`/`$minN` skip null and missing and give the n largest (largest
//! first) or smallest (smallest first). `n` is evaluated per document and must be a positive
//! integral number ([`validate_n`], shared with the accumulators); `input` must be an array.

use super::args::Value;
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::types;
use bson::{Bson, Document};
use storage::order;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrayNOp {
    FirstN,
    LastN,
    MaxN,
    MinN,
}

impl ArrayNOp {
    pub(crate) fn from_name(name: &str) -> Option<ArrayNOp> {
        Some(match name {
            "$firstN" => ArrayNOp::FirstN,
            "$lastN" => ArrayNOp::LastN,
            "$maxN" => ArrayNOp::MaxN,
            "$minN" => ArrayNOp::MinN,
            _ => return None,
        })
    }
}

/// The `n` and `input` arguments of `{op: {n, input}}`, with mongod's parse codes.
pub(crate) fn parse_args(op: ArrayNOp, arg: &Bson) -> CommandResult<(&Bson, &Bson)> {
    let Bson::Document(d) = arg else {
        let code = match op {
            ArrayNOp::FirstN | ArrayNOp::LastN => ErrorCode::Location5787801,
            ArrayNOp::MaxN | ArrayNOp::MinN => ErrorCode::Location5787900,
        };
        return Err(err(
            code,
            format!("specification must be an object; found {arg}"),
        ));
    };
    named_n_input(d)
}

fn named_n_input(d: &Document) -> CommandResult<(&Bson, &Bson)> {
    if let Some(extra) = d.keys().find(|k| !matches!(k.as_str(), "n" | "input")) {
        return Err(err(
            ErrorCode::Location5787901,
            format!("Unknown argument for 'n' operator: {extra}"),
        ));
    }
    let n = d
        .get("n")
        .ok_or_else(|| err(ErrorCode::Location5787906, "Missing value for 'n'"))?;
    let input = d
        .get("input")
        .ok_or_else(|| err(ErrorCode::Location5787907, "Missing value for 'input'"))?;
    Ok((n, input))
}

/// mongod's check of an evaluated `n`: a number (5787902), integral (5787903), above 0
/// (5787908).
pub(crate) fn validate_n(n: &Bson) -> CommandResult<i64> {
    let not_integral = |code| {
        err(
            code,
            format!("Value for 'n' must be of integral type, but found {n}"),
        )
    };
    if !types::is_number(n) {
        return Err(not_integral(ErrorCode::Location5787902));
    }
    let f = types::as_f64(n).unwrap_or(f64::NAN);
    if f.fract() != 0.0 || !f.is_finite() {
        return Err(not_integral(ErrorCode::Location5787903));
    }
    #[allow(clippy::cast_possible_truncation)]
    let whole = types::as_i64_exact(n).unwrap_or(f as i64);
    if whole <= 0 {
        return Err(err(
            ErrorCode::Location5787908,
            format!("'n' must be greater than 0, found {whole}"),
        ));
    }
    Ok(whole)
}

pub(super) fn evaluate(op: ArrayNOp, n: Value, input: Value) -> CommandResult<Value> {
    let n = validate_n(n.as_ref().unwrap_or(&Bson::Null))?;
    let Some(Bson::Array(items)) = input else {
        return Err(err(ErrorCode::Location5788200, "Input must be an array"));
    };
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    let out: Vec<Bson> = match op {
        ArrayNOp::FirstN => items.into_iter().take(n).collect(),
        ArrayNOp::LastN => {
            let skip = items.len().saturating_sub(n);
            items.into_iter().skip(skip).collect()
        }
        ArrayNOp::MaxN | ArrayNOp::MinN => {
            let mut kept: Vec<Bson> = items
                .into_iter()
                .filter(|v| !matches!(v, Bson::Null | Bson::Undefined))
                .collect();
            kept.sort_by(|a, b| {
                let o = order::compare_bson(a, b);
                if op == ArrayNOp::MaxN { o.reverse() } else { o }
            });
            kept.truncate(n);
            kept
        }
    };
    Ok(Some(Bson::Array(out)))
}

#[cfg(test)]
mod tests {
    use super::super::Expr;
    use bson::{Bson, bson, doc};

    fn eval(spec: bson::Document) -> Result<Bson, crate::error::CommandError> {
        let root = doc! { "a": [3, null, 1, "x", 2], "n": 2 };
        let raw = bson::RawDocumentBuf::try_from(&root).unwrap();
        Expr::parse(&Bson::Document(spec))?.evaluate(&raw)
    }

    #[test]
    fn values_and_nulls() {
        let r = |op: &str, n: Bson| eval(doc! { op: { "n": n, "input": "$a" } }).unwrap();
        assert_eq!(r("$firstN", bson!(2)), bson!([3, null]));
        assert_eq!(r("$lastN", bson!("$n")), bson!(["x", 2]));
        assert_eq!(r("$firstN", bson!(10)), bson!([3, null, 1, "x", 2]));
        // Strings sort above numbers; nulls are skipped by $maxN/$minN.
        assert_eq!(r("$maxN", bson!(2)), bson!(["x", 3]));
        assert_eq!(r("$minN", bson!(3.0)), bson!([1, 2, 3]));
        assert_eq!(r("$minN", bson!(9_i64)), bson!([1, 2, 3, "x"]));
    }

    #[test]
    fn argument_errors_as_mongod() {
        let code = |spec| eval(spec).unwrap_err().code.code();
        assert_eq!(code(doc! { "$firstN": [1] }), 5787801);
        assert_eq!(code(doc! { "$maxN": 1 }), 5787900);
        assert_eq!(
            code(doc! { "$lastN": { "n": 1, "input": [], "x": 1 } }),
            5787901
        );
        assert_eq!(code(doc! { "$minN": { "input": [] } }), 5787906);
        assert_eq!(code(doc! { "$minN": { "n": 1 } }), 5787907);
        assert_eq!(code(doc! { "$firstN": { "n": "2", "input": [] } }), 5787902);
        assert_eq!(
            code(doc! { "$firstN": { "n": null, "input": [] } }),
            5787902
        );
        assert_eq!(code(doc! { "$firstN": { "n": 1.5, "input": [] } }), 5787903);
        assert_eq!(code(doc! { "$lastN": { "n": 0, "input": [] } }), 5787908);
        assert_eq!(code(doc! { "$maxN": { "n": 1, "input": 5 } }), 5788200);
        assert_eq!(
            code(doc! { "$maxN": { "n": 1, "input": "$missing" } }),
            5788200
        );
        assert_eq!(code(doc! { "$maxN": { "n": 1, "input": null } }), 5788200);
    }
}
