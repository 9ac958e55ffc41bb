//! Matching raw documents against a [`Filter`]. Values are read in place through
//! `path::walk`; nothing is decoded except what `$expr` computes with.
//!
//! Comparisons are type-bracketed as in mongod: `$gt: 5` only looks at numbers, `$gt: "a"`
//! only at strings, except that MinKey and MaxKey operands compare across all types. NaN equals
//! NaN and is neither greater nor less than anything.

use super::{BitTest, Filter, MatchDetails, Op};
use crate::error::CommandResult;
use crate::query::path::{self, Candidate};
use crate::query::types;
use bson::{Bson, RawBsonRef, RawDocument};
use std::cmp::Ordering;
use std::ops::ControlFlow;
use storage::order::{self, View};

pub(super) fn eval(
    f: &Filter,
    doc: &RawDocument,
    details: &mut MatchDetails,
) -> CommandResult<bool> {
    // A yield point per clause (a check every `TICKS_PER_CHECK`): a filter may have 100,000s.
    crate::interrupt::tick()?;
    Ok(match f {
        Filter::And(children) => {
            for c in children {
                if !eval(c, doc, details)? {
                    return Ok(false);
                }
            }
            true
        }
        Filter::Or(children) => {
            for c in children {
                if eval(c, doc, details)? {
                    return Ok(true);
                }
            }
            false
        }
        Filter::Nor(children) => {
            let mut scratch = *details;
            for c in children {
                if eval(c, doc, &mut scratch)? {
                    return Ok(false);
                }
            }
            true
        }
        Filter::Not(inner) => {
            let mut scratch = *details;
            !eval(inner, doc, &mut scratch)?
        }
        Filter::Path { components, op, .. } => match_path(doc, components, op, details),
        Filter::Expr(e) => types::is_truthy(&e.evaluate(doc)?),
        Filter::Schema(s) => s.matches(doc),
        Filter::Const(b) => *b,
        Filter::Text(q) => q.matches(doc)?,
    })
}

fn match_path(
    doc: &RawDocument,
    components: &[String],
    op: &Op,
    details: &mut MatchDetails,
) -> bool {
    let array_only = matches!(
        op,
        Op::Size(_) | Op::ElemMatchObject(_) | Op::ElemMatchValue(_)
    );
    let found = path::walk(doc, components, &mut |c: Candidate<'_>| {
        if c.expanded && array_only {
            return ControlFlow::Continue(());
        }
        match op_matches(op, c.value) {
            Some(own_pos) => ControlFlow::Break(c.array_pos.or(own_pos)),
            None => ControlFlow::Continue(()),
        }
    });
    match found {
        ControlFlow::Break(pos) => {
            if pos.is_some() {
                details.array_pos = pos;
            }
            true
        }
        ControlFlow::Continue(()) => false,
    }
}

/// A single value (not a document's field) against a filter: `$elemMatch` elements, `$pull`.
pub(super) fn matches_value(f: &Filter, v: RawBsonRef<'_>) -> bool {
    match f {
        Filter::And(children) => children.iter().all(|c| matches_value(c, v)),
        Filter::Or(children) => children.iter().any(|c| matches_value(c, v)),
        Filter::Nor(children) => !children.iter().any(|c| matches_value(c, v)),
        Filter::Not(inner) => !matches_value(inner, v),
        Filter::Path { components, op, .. } if components.is_empty() => {
            op_matches(op, Some(v)).is_some()
        }
        Filter::Const(b) => *b,
        other => match as_document(v) {
            Some(d) => eval(other, d, &mut MatchDetails { array_pos: None }).unwrap_or(false),
            None => false,
        },
    }
}

/// Documents, and arrays read as documents keyed "0", "1", ... (as `$elemMatch` does).
fn as_document(v: RawBsonRef<'_>) -> Option<&RawDocument> {
    match v {
        RawBsonRef::Document(d) => Some(d),
        RawBsonRef::Array(a) => RawDocument::from_bytes(a.as_bytes()).ok(),
        _ => None,
    }
}

/// `Some(position)` when the operator accepts the value (`None` = missing field); the position
/// is the matching element's index for `$elemMatch`.
fn op_matches(op: &Op, v: Option<RawBsonRef<'_>>) -> Option<Option<usize>> {
    let yes = |b: bool| if b { Some(None) } else { None };
    let Some(v) = v else {
        return yes(missing_matches(op));
    };
    match op {
        Op::Eq(x) => yes(compare_matches(v, x, |o| o == Ordering::Equal, true)),
        Op::Gt(x) => yes(compare_matches(v, x, |o| o == Ordering::Greater, false)),
        Op::Gte(x) => yes(compare_matches(v, x, |o| o != Ordering::Less, true)),
        Op::Lt(x) => yes(compare_matches(v, x, |o| o == Ordering::Less, false)),
        Op::Lte(x) => yes(compare_matches(v, x, |o| o != Ordering::Greater, true)),
        Op::In { values, regexes } => {
            yes(in_matches(v, values) || regexes.iter().any(|r| r.matches_value(v)))
        }
        Op::Exists => Some(None),
        Op::Type(codes) => yes(codes.contains(&types::type_code_raw(v))),
        Op::Regex(r) => yes(r.matches_value(v)),
        Op::Mod { divisor, remainder } => yes(mod_matches(v, *divisor, *remainder)),
        Op::Size(n) => match v {
            RawBsonRef::Array(a) => yes(i64::try_from(a.into_iter().count()).ok() == Some(*n)),
            _ => None,
        },
        Op::ElemMatchObject(f) => elem_match(v, |e| {
            as_document(e)
                .is_some_and(|d| eval(f, d, &mut MatchDetails { array_pos: None }).unwrap_or(false))
        }),
        Op::ElemMatchValue(f) => elem_match(v, |e| matches_value(f, e)),
        Op::Bits { test, positions } => yes(bits_match(v, *test, positions)),
        Op::GeoWithin(shape) => yes(shape.contains(v)),
        Op::GeoIntersects(parts) => yes(super::geo::intersects(parts, v)),
        Op::Near(near) => yes(near.matches(v)),
    }
}

fn elem_match(
    v: RawBsonRef<'_>,
    mut pred: impl FnMut(RawBsonRef<'_>) -> bool,
) -> Option<Option<usize>> {
    let RawBsonRef::Array(a) = v else { return None };
    a.into_iter()
        .map_while(Result::ok)
        .position(&mut pred)
        .map(Some)
}

/// Lists up to this long are scanned; longer ones are binary-searched.
const IN_SCAN_MAX: usize = 8;

/// `$in` equality against a list sorted in the one BSON order. Equality in that order implies
/// the same type bracket, so a binary search finds exactly what a scan would. Under a collation
/// the list is not in the collated order, so it is scanned.
fn in_matches(v: RawBsonRef<'_>, values: &[Bson]) -> bool {
    if values.len() <= IN_SCAN_MAX || crate::query::collator::current().is_some() {
        return values
            .iter()
            .any(|x| compare_matches(v, x, |o| o == Ordering::Equal, true));
    }
    values
        .binary_search_by(|x| order::compare_raw_bson(v, x).reverse())
        .is_ok()
}

/// A missing field behaves as null for equality-like operators.
fn missing_matches(op: &Op) -> bool {
    match op {
        Op::Eq(x) | Op::Gte(x) | Op::Lte(x) => matches!(x, Bson::Null) || is_extreme_key_match(op),
        Op::Gt(Bson::MinKey) | Op::Lt(Bson::MaxKey) => true,
        Op::In { values, .. } => values.iter().any(|x| matches!(x, Bson::Null)),
        _ => false,
    }
}

fn is_extreme_key_match(op: &Op) -> bool {
    matches!(op, Op::Gte(Bson::MinKey) | Op::Lte(Bson::MaxKey))
}

fn is_nan_raw(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Double(d) => d.is_nan(),
        RawBsonRef::Decimal128(d) => types::decimal_to_f64(d).is_nan(),
        _ => false,
    }
}

fn is_nan(v: &Bson) -> bool {
    match v {
        Bson::Double(d) => d.is_nan(),
        Bson::Decimal128(d) => types::decimal_to_f64(*d).is_nan(),
        _ => false,
    }
}

/// The type-bracketed comparison behind `$eq/$gt/$gte/$lt/$lte/$in`. `inclusive` says whether
/// equality satisfies the operator (for the NaN rule).
fn compare_matches(
    v: RawBsonRef<'_>,
    x: &Bson,
    accept: impl Fn(Ordering) -> bool,
    inclusive: bool,
) -> bool {
    let (vv, xv) = (View::from_raw(v), View::from_bson(x));
    let (vr, xr) = (vv.rank(), xv.rank());
    if vr != xr {
        return match x {
            // MinKey/MaxKey operands compare across every type.
            Bson::MinKey | Bson::MaxKey => accept(vr.cmp(&xr)),
            // Since 8.0, {a: null} no longer matches undefined: no other bracket is equal.
            _ => false,
        };
    }
    if is_nan_raw(v) || is_nan(x) {
        return inclusive && is_nan_raw(v) && is_nan(x);
    }
    accept(crate::query::collator::compare_views(vv, xv))
}

fn mod_matches(v: RawBsonRef<'_>, divisor: i64, remainder: i64) -> bool {
    let n = match v {
        RawBsonRef::Int32(i) => i64::from(i),
        RawBsonRef::Int64(i) => i,
        other => match types::raw_as_f64(other) {
            Some(d) if d.is_finite() => d.trunc() as i64,
            _ => return false,
        },
    };
    n.wrapping_rem(divisor) == remainder
}

fn bits_match(v: RawBsonRef<'_>, test: BitTest, positions: &[u32]) -> bool {
    let bit: Box<dyn Fn(u32) -> bool + '_> = match v {
        RawBsonRef::Binary(b) => Box::new(move |p: u32| {
            let byte = usize::try_from(p / 8)
                .ok()
                .and_then(|i| b.bytes.get(i))
                .copied()
                .unwrap_or(0);
            byte & (1 << (p % 8)) != 0
        }),
        other => {
            let n = match other {
                RawBsonRef::Int32(i) => i64::from(i),
                RawBsonRef::Int64(i) => i,
                _ => match types::raw_as_f64(other).and_then(types::f64_to_i64_exact) {
                    Some(n) => n,
                    None => return false,
                },
            };
            // Beyond bit 63 a two's-complement number repeats its sign bit.
            Box::new(move |p: u32| if p >= 64 { n < 0 } else { (n >> p) & 1 == 1 })
        }
    };
    match test {
        BitTest::AllSet => positions.iter().all(|&p| bit(p)),
        BitTest::AllClear => positions.iter().all(|&p| !bit(p)),
        BitTest::AnySet => positions.iter().any(|&p| bit(p)),
        BitTest::AnyClear => positions.iter().any(|&p| !bit(p)),
    }
}
