//! `$percentile` and `$median`, as expressions and (through `pipeline::accum`) as accumulators.
//! Both read the spec mongod declares in IDL (`input`, `p` for `$percentile`, `method`), with
//! the IDL checker's codes (40415 unknown field, 40414 missing, 14 wrong type) and the
//! operator's own ones for `p`. Only the "approximate" method exists, as in mongod 7.0.
//!
//! Results are computed exactly by rank, the way mongod 7 answers the expression (it uses its
//! discrete algorithm for arrays): the value at rank `ceil(n·p) - 1` of the sorted numbers,
//! `n - 1` for p = 1. Non-numbers are ignored; with no numbers a percentile is null.

use super::Expr;
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::types;
use bson::Bson;

/// A parsed quantile spec: the `input` argument as given, and the percentiles asked for.
pub(crate) struct QuantileSpec<'d> {
    pub input: &'d Bson,
    pub ps: Vec<f64>,
}

/// Which operator a spec belongs to, and whether it is an expression or an accumulator (they
/// differ only in the code for a spec that is not an object).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantileOp {
    Percentile,
    Median,
}

impl QuantileOp {
    pub(crate) fn name(self) -> &'static str {
        match self {
            QuantileOp::Percentile => "$percentile",
            QuantileOp::Median => "$median",
        }
    }
}

/// Reads `{input, p, method}` (`{input, method}` for `$median`).
pub(crate) fn parse_spec(
    op: QuantileOp,
    arg: &Bson,
    accumulator: bool,
) -> CommandResult<QuantileSpec<'_>> {
    let name = op.name();
    let Bson::Document(d) = arg else {
        let code = match (op, accumulator) {
            (QuantileOp::Percentile, false) => ErrorCode::Location7436200,
            (QuantileOp::Median, false) => ErrorCode::Location7436201,
            (QuantileOp::Percentile, true) => ErrorCode::Location7429703,
            (QuantileOp::Median, true) => ErrorCode::Location7436100,
        };
        return Err(err(
            code,
            format!("specification must be an object; found {name}: {arg}"),
        ));
    };
    let wants_p = matches!(op, QuantileOp::Percentile);
    for (key, value) in d {
        match key.as_str() {
            "input" => {}
            "p" if wants_p => {}
            "method" => check_method(name, value)?,
            _ => {
                return Err(err(
                    ErrorCode::Location40415,
                    format!("BSON field '{name}.{key}' is an unknown field."),
                ));
            }
        }
    }
    let required = |key: &str| {
        d.get(key).ok_or_else(|| {
            err(
                ErrorCode::Location40414,
                format!("BSON field '{name}.{key}' is missing but a required field"),
            )
        })
    };
    // The IDL parser reports every missing field before `p`'s value is looked at.
    let input = required("input")?;
    let p = if wants_p { Some(required("p")?) } else { None };
    required("method")?;
    let ps = match p {
        Some(p) => parse_p(p)?,
        None => vec![0.5],
    };
    Ok(QuantileSpec { input, ps })
}

fn check_method(name: &str, value: &Bson) -> CommandResult<()> {
    match value {
        Bson::String(m) if m == "approximate" => Ok(()),
        Bson::String(_) => Err(err(
            ErrorCode::BadValue,
            "Currently only 'approximate' can be used as percentile 'method'.",
        )),
        other => Err(err(
            ErrorCode::TypeMismatch,
            format!(
                "BSON field '{name}.method' is the wrong type '{}', expected type 'string'",
                types::type_name(types::type_code(other))
            ),
        )),
    }
}

/// `p`: a constant expression giving a non-empty array of numbers in [0, 1].
fn parse_p(spec: &Bson) -> CommandResult<Vec<f64>> {
    let expr = Expr::parse(spec)?;
    if !expr.is_constant() {
        return Err(err(
            ErrorCode::Location7750300,
            format!(
                "The $percentile 'p' field must be an array of constant values, but found value: {spec}."
            ),
        ));
    }
    let value = expr.evaluate(&bson::RawDocumentBuf::new())?;
    let msg = "The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: ";
    let items = match &value {
        Bson::Array(items) if !items.is_empty() => items,
        other => {
            return Err(err(ErrorCode::Location7750301, format!("{msg}{other}")));
        }
    };
    let mut ps = Vec::with_capacity(items.len());
    for item in items {
        let Some(p) = types::is_number(item)
            .then(|| types::as_f64(item))
            .flatten()
        else {
            return Err(err(ErrorCode::Location7750302, format!("{msg}{item}")));
        };
        if !(0.0..=1.0).contains(&p) {
            return Err(err(ErrorCode::Location7750303, format!("{msg}{p}")));
        }
        ps.push(p);
    }
    Ok(ps)
}

/// The number a value contributes to a quantile, if it is one.
pub(crate) fn sample(v: &Bson) -> Option<f64> {
    if types::is_number(v) {
        types::as_f64(v).filter(|f| !f.is_nan())
    } else {
        None
    }
}

/// The values at the percentiles `ps` of `samples` (sorted here), or nothing when empty.
pub(crate) fn percentiles(samples: &mut [f64], ps: &[f64]) -> Vec<f64> {
    if samples.is_empty() {
        return Vec::new();
    }
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    ps.iter()
        .map(|&p| {
            let rank = if p >= 1.0 {
                n - 1
            } else {
                #[allow(
                    clippy::cast_precision_loss,
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss
                )]
                let r = ((n as f64) * p).ceil() as usize;
                r.saturating_sub(1).min(n - 1)
            };
            samples[rank]
        })
        .collect()
}

/// The final value: an array (with a null per percentile when there were no numbers) for
/// `$percentile`, one double or null for `$median`.
pub(crate) fn format(op: QuantileOp, n_ps: usize, values: Vec<f64>) -> Bson {
    match op {
        QuantileOp::Percentile if values.is_empty() => Bson::Array(vec![Bson::Null; n_ps]),
        QuantileOp::Percentile => Bson::Array(values.into_iter().map(Bson::Double).collect()),
        QuantileOp::Median => values.first().map_or(Bson::Null, |v| Bson::Double(*v)),
    }
}

/// The expression: a number gives itself at every percentile, an array its numbers'
/// percentiles, anything else no numbers.
pub(super) fn evaluate(op: QuantileOp, ps: &[f64], input: Option<Bson>) -> Bson {
    let mut samples: Vec<f64> = match &input {
        Some(Bson::Array(items)) => items.iter().filter_map(sample).collect(),
        Some(v) => match sample(v) {
            Some(x) => {
                return format(op, ps.len(), vec![x; ps.len()]);
            }
            None => Vec::new(),
        },
        None => Vec::new(),
    };
    format(op, ps.len(), percentiles(&mut samples, ps))
}

#[cfg(test)]
mod tests {
    use super::super::Expr;
    use bson::{Bson, Document, doc};

    fn spec_doc(input: &str, p: &[f64]) -> Document {
        doc! { "input": input, "p": p.to_vec(), "method": "approximate" }
    }

    fn eval(
        spec: bson::Document,
        root: bson::Document,
    ) -> Result<Bson, crate::error::CommandError> {
        let raw = bson::RawDocumentBuf::try_from(&root).unwrap();
        Expr::parse(&Bson::Document(spec))?.evaluate(&raw)
    }

    #[test]
    fn values_by_rank_ignoring_non_numbers() {
        let root = doc! { "x": [0, "non-numeric", 1, 2], "y": [10, 5, 27], "s": 7 };
        let p = |input: &str, ps: &[f64]| {
            eval(doc! { "$percentile": spec_doc(input, ps) }, root.clone())
        };
        assert_eq!(
            p("$x", &[0.5]).unwrap(),
            Bson::Array(vec![Bson::Double(1.0)])
        );
        assert_eq!(
            p("$y", &[0.0, 0.5, 0.9, 1.0]).unwrap(),
            Bson::Array([5.0, 10.0, 27.0, 27.0].map(Bson::Double).to_vec())
        );
        // A scalar number is every percentile of itself.
        assert_eq!(
            p("$s", &[0.1, 0.9]).unwrap(),
            Bson::Array(vec![Bson::Double(7.0), Bson::Double(7.0)])
        );
        let median = eval(
            doc! { "$median": { "input": "$y", "method": "approximate" } },
            root.clone(),
        );
        assert_eq!(median.unwrap(), Bson::Double(10.0));
    }

    #[test]
    fn no_numbers_give_nulls() {
        let root = doc! { "x": ["a", null], "e": [] };
        let r = eval(
            doc! { "$percentile": spec_doc("$x", &[0.5, 0.7]) },
            root.clone(),
        );
        assert_eq!(r.unwrap(), Bson::Array(vec![Bson::Null, Bson::Null]));
        let r = eval(
            doc! { "$percentile": spec_doc("$missing", &[0.5]) },
            root.clone(),
        );
        assert_eq!(r.unwrap(), Bson::Array(vec![Bson::Null]));
        let r = eval(
            doc! { "$median": { "input": "$e", "method": "approximate" } },
            root,
        );
        assert_eq!(r.unwrap(), Bson::Null);
    }

    #[test]
    fn spec_errors_have_mongods_codes() {
        let code = |spec: bson::Document| eval(spec, doc! {}).unwrap_err().code.code();
        assert_eq!(code(doc! { "$percentile": 0.5 }), 7436200);
        assert_eq!(code(doc! { "$median": "$x" }), 7436201);
        assert_eq!(
            code(
                doc! { "$percentile": { "input": "$x", "p": [0.5], "method": "approximate", "z": 1 } }
            ),
            40415
        );
        assert_eq!(
            code(doc! { "$percentile": { "input": "$x", "method": "approximate" } }),
            40414
        );
        assert_eq!(code(doc! { "$median": { "input": "$x" } }), 40414);
        assert_eq!(code(doc! { "$median": { "input": "$x", "method": 1 } }), 14);
        assert_eq!(
            code(doc! { "$median": { "input": "$x", "method": "discrete" } }),
            2
        );
        assert_eq!(
            code(doc! { "$percentile": { "input": "$x", "p": "$ps", "method": "approximate" } }),
            7750300
        );
        assert_eq!(
            code(doc! { "$percentile": { "input": "$x", "p": [], "method": "approximate" } }),
            7750301
        );
        assert_eq!(
            code(doc! { "$percentile": { "input": "$x", "p": [] } }),
            40414
        );
        assert_eq!(
            code(doc! { "$percentile": { "input": "$x", "p": ["a"], "method": "approximate" } }),
            7750302
        );
        assert_eq!(
            code(doc! { "$percentile": { "input": "$x", "p": [1.5], "method": "approximate" } }),
            7750303
        );
    }
}
