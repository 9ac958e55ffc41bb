//! Index bounds: from the predicates of a filter on the fields of a key pattern to byte
//! intervals over encoded index keys. Bounds are always a superset of the matching keys (every
//! fetched document is checked against the whole filter again), so exclusive limits may be
//! widened to inclusive ones and type brackets rounded outward.

use crate::query::matcher::{Filter, Op};
use bson::{Bson, Document};
use std::cmp::Ordering;
use storage::order::compare_bson;

/// Most intervals a compound prefix may multiply into; the planner stops adding fields to the
/// bounds before passing it (dropping intervals would lose results).
pub const INTERVALS_MAX: usize = 200;

/// An interval of values of one field, inclusive at both ends.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueInterval {
    pub lo: Bson,
    pub hi: Bson,
}

impl ValueInterval {
    pub fn point(v: Bson) -> Self {
        ValueInterval {
            lo: v.clone(),
            hi: v,
        }
    }

    pub fn is_point(&self) -> bool {
        compare_bson(&self.lo, &self.hi) == Ordering::Equal
    }

    /// mongod's explain notation: `[5, 5]`, `[-inf, 3]`.
    pub fn describe(&self) -> String {
        let show = |v: &Bson| match v {
            Bson::Double(f) if f.is_infinite() => {
                if *f > 0.0 {
                    "inf".to_string()
                } else {
                    "-inf".to_string()
                }
            }
            Bson::String(s) => format!("\"{s}\""),
            other => other.to_string(),
        };
        format!("[{}, {}]", show(&self.lo), show(&self.hi))
    }
}

/// The smallest and largest value of a value's type bracket (None: not indexable by range).
fn bracket(v: &Bson) -> Option<(Bson, Bson)> {
    Some(match v {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            (Bson::Double(f64::NAN), Bson::Double(f64::INFINITY))
        }
        // Strings end below the smallest object; the fetch re-checks, so `{}` as the inclusive
        // upper end is a safe superset.
        Bson::String(_) | Bson::Symbol(_) => {
            (Bson::String(String::new()), Bson::Document(Document::new()))
        }
        Bson::DateTime(_) => (
            Bson::DateTime(bson::DateTime::MIN),
            Bson::DateTime(bson::DateTime::MAX),
        ),
        Bson::ObjectId(_) => (
            Bson::ObjectId(bson::oid::ObjectId::from_bytes([0; 12])),
            Bson::ObjectId(bson::oid::ObjectId::from_bytes([0xFF; 12])),
        ),
        Bson::Boolean(_) => (Bson::Boolean(false), Bson::Boolean(true)),
        Bson::Timestamp(_) => (
            Bson::Timestamp(bson::Timestamp {
                time: 0,
                increment: 0,
            }),
            Bson::Timestamp(bson::Timestamp {
                time: u32::MAX,
                increment: u32::MAX,
            }),
        ),
        _ => return None,
    })
}

/// A value that an equality can look up by point (arrays and regexes match differently).
fn point_value(v: &Bson, sparse: bool) -> Option<Vec<ValueInterval>> {
    match v {
        Bson::Array(_) | Bson::RegularExpression(_) => None,
        // `null` also matches missing fields, which a sparse index does not hold.
        Bson::Null if sparse => None,
        // Missing fields are indexed as null; undefined no longer matches (8.0).
        Bson::Null => Some(vec![ValueInterval::point(Bson::Null)]),
        v => Some(vec![ValueInterval::point(v.clone())]),
    }
}

/// Intervals one operator allows on a field, if it can use an index.
pub(crate) fn op_intervals(op: &Op, sparse: bool) -> Option<Vec<ValueInterval>> {
    match op {
        Op::Eq(v) => point_value(v, sparse),
        Op::In { values, regexes } if regexes.is_empty() => {
            let mut out = Vec::new();
            for v in values {
                out.extend(point_value(v, sparse)?);
            }
            out.sort_by(|a, b| compare_bson(&a.lo, &b.lo));
            out.dedup_by(|a, b| compare_bson(&a.lo, &b.lo).is_eq());
            Some(out)
        }
        Op::Gt(v) | Op::Gte(v) => {
            let (_, hi) = bracket(v)?;
            Some(vec![ValueInterval { lo: v.clone(), hi }])
        }
        Op::Lt(v) | Op::Lte(v) => {
            let (lo, _) = bracket(v)?;
            Some(vec![ValueInterval { lo, hi: v.clone() }])
        }
        _ => None,
    }
}

/// A hashed field answers equality only: each point becomes the point of its hash (mongod's
/// 64-bit value as an int64). Any range: no bounds.
pub fn hashed_points(ivs: Vec<ValueInterval>) -> Option<Vec<ValueInterval>> {
    if !ivs.iter().all(ValueInterval::is_point) {
        return None;
    }
    let mut out: Vec<ValueInterval> = ivs
        .iter()
        .map(|iv| ValueInterval::point(Bson::Int64(storage::hashed::hash64_bson(&iv.lo))))
        .collect();
    out.sort_by(|a, b| compare_bson(&a.lo, &b.lo));
    out.dedup_by(|a, b| compare_bson(&a.lo, &b.lo).is_eq());
    Some(out)
}

/// Cell-id intervals (S2 cells as int64 keys, `storage::geo`) a `2dsphere` field must scan for a
/// geo predicate; `None` for any other operator.
pub fn geo_intervals(op: &Op) -> Option<Vec<ValueInterval>> {
    use crate::query::matcher::{GeoShape, NearMetric};
    use storage::geo;
    let cells = match op {
        Op::GeoWithin(shape) => match shape.as_ref() {
            GeoShape::Box { min, max } => geo::box_intervals((min.0, min.1, max.0, max.1)),
            GeoShape::Center { center, radius } => geo::box_intervals((
                center.0 - radius,
                center.1 - radius,
                center.0 + radius,
                center.1 + radius,
            )),
            GeoShape::CenterSphere { center, radius_rad } => {
                geo::cap_intervals(*center, *radius_rad)
            }
            GeoShape::Polygons(polys) => {
                let vertices: Vec<(f64, f64)> = polys.iter().flatten().flatten().copied().collect();
                geo::box_intervals(geo::bounding_box(&vertices))
            }
        },
        Op::GeoIntersects(parts) => {
            let vertices = crate::query::matcher::geo_part_vertices(parts);
            geo::box_intervals(geo::bounding_box(&vertices))
        }
        Op::Near(near) => match (near.reach(), near.metric) {
            (None, _) => vec![(i64::MIN, i64::MAX)],
            (Some(r), NearMetric::Flat) => {
                let c = near.center;
                geo::box_intervals((c.0 - r, c.1 - r, c.0 + r, c.1 + r))
            }
            (Some(r), _) => geo::cap_intervals(near.center, r),
        },
        _ => return None,
    };
    Some(
        cells
            .into_iter()
            .map(|(lo, hi)| ValueInterval {
                lo: Bson::Int64(lo),
                hi: Bson::Int64(hi),
            })
            .collect(),
    )
}

/// Cell-id intervals a `2d` field (coordinates in `range` on both axes, mapped onto the sphere's
/// longitude/latitude box, `storage::geo::flat_to_lnglat`) must scan for a geo predicate.
/// Spherical shapes (`$centerSphere`, `$nearSphere`) take the whole index: a superset.
pub fn flat_geo_intervals(op: &Op, range: (f64, f64)) -> Option<Vec<ValueInterval>> {
    use crate::query::matcher::{GeoShape, NearMetric};
    use storage::geo;
    let square = |c: (f64, f64), r: f64| (c.0 - r, c.1 - r, c.0 + r, c.1 + r);
    let flat_box = match op {
        Op::GeoWithin(shape) => match shape.as_ref() {
            GeoShape::Box { min, max } => Some((min.0, min.1, max.0, max.1)),
            GeoShape::Center { center, radius } => Some(square(*center, *radius)),
            GeoShape::CenterSphere { .. } => None,
            GeoShape::Polygons(polys) => {
                let vertices: Vec<(f64, f64)> = polys.iter().flatten().flatten().copied().collect();
                Some(geo::bounding_box(&vertices))
            }
        },
        Op::Near(near) => match (near.reach(), near.metric) {
            (Some(r), NearMetric::Flat) => Some(square(near.center, r)),
            _ => None,
        },
        Op::GeoIntersects(_) => return None,
        _ => return None,
    };
    let cells = match flat_box {
        Some(b) => geo::box_intervals(geo::flat_box(b, range)),
        None => vec![(i64::MIN, i64::MAX)],
    };
    Some(
        cells
            .into_iter()
            .map(|(lo, hi)| ValueInterval {
                lo: Bson::Int64(lo),
                hi: Bson::Int64(hi),
            })
            .collect(),
    )
}

/// Intersect two single-interval ranges (non-multikey fields only).
fn intersect(a: &ValueInterval, b: &ValueInterval) -> Option<ValueInterval> {
    let lo = if compare_bson(&a.lo, &b.lo) == Ordering::Less {
        b.lo.clone()
    } else {
        a.lo.clone()
    };
    let hi = if compare_bson(&a.hi, &b.hi) == Ordering::Greater {
        b.hi.clone()
    } else {
        a.hi.clone()
    };
    (compare_bson(&lo, &hi) != Ordering::Greater).then_some(ValueInterval { lo, hi })
}

/// The top-level conjunction of a filter: (path, operator) leaves that must all hold.
pub fn conjunction(filter: &Filter) -> Vec<(&str, &Op)> {
    match filter {
        Filter::Path { path, op, .. } => vec![(path.as_str(), op)],
        Filter::And(children) => children.iter().flat_map(conjunction).collect(),
        _ => vec![],
    }
}

/// Intervals for one field from every conjunct on it. `None`: no usable predicate.
pub fn field_intervals(
    preds: &[(&str, &Op)],
    field: &str,
    multikey: bool,
    sparse: bool,
) -> Option<Vec<ValueInterval>> {
    field_intervals_by(preds, field, multikey, |op| op_intervals(op, sparse))
}

/// [`field_intervals`] with the intervals of one operator given by `of`.
pub fn field_intervals_by(
    preds: &[(&str, &Op)],
    field: &str,
    multikey: bool,
    of: impl Fn(&Op) -> Option<Vec<ValueInterval>>,
) -> Option<Vec<ValueInterval>> {
    let mut result: Option<Vec<ValueInterval>> = None;
    for (_, op) in preds.iter().filter(|(p, _)| *p == field) {
        let Some(ivs) = of(op) else {
            continue;
        };
        result = match result {
            None => Some(ivs),
            // On a multikey field two predicates may be met by different elements: keep one.
            Some(prev) if multikey => Some(prev),
            Some(prev) if prev.len() == 1 && ivs.len() == 1 => {
                Some(intersect(&prev[0], &ivs[0]).into_iter().collect())
            }
            Some(prev) => Some(if ivs.len() < prev.len() { ivs } else { prev }),
        };
    }
    result
}

/// Byte intervals `[lo, hi)` over encoded keys for per-field value intervals of an index prefix.
/// Fields after the prefix are unconstrained.
pub fn byte_intervals(
    pattern: &Document,
    fields: &[Vec<ValueInterval>],
) -> Vec<(Vec<u8>, Vec<u8>)> {
    // Cartesian product of the prefix's intervals, bounded.
    let mut combos: Vec<Vec<&ValueInterval>> = vec![vec![]];
    for ivs in fields {
        let mut next = Vec::new();
        for c in &combos {
            for iv in ivs {
                let mut c = c.clone();
                c.push(iv);
                next.push(c);
            }
        }
        combos = next;
    }
    let mut out = Vec::new();
    for combo in combos {
        let los: Vec<Bson> = combo.iter().map(|iv| iv.lo.clone()).collect();
        let his: Vec<Bson> = combo.iter().map(|iv| iv.hi.clone()).collect();
        let a = storage::encode_index_key(pattern, &los);
        let b = storage::encode_index_key(pattern, &his);
        // Descending fields invert bytes, so the ends may come out swapped.
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        out.push((lo, storage::keys::prefix_end(&hi)));
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn ranges_intersect_on_plain_fields() {
        let f = Filter::parse(&doc! { "a": { "$gt": 1, "$lte": 5 } }).unwrap();
        let preds = conjunction(&f);
        let ivs = field_intervals(&preds, "a", false, false).unwrap();
        assert_eq!(
            ivs,
            vec![ValueInterval {
                lo: Bson::Int32(1),
                hi: Bson::Int32(5)
            }]
        );
        let ivs = field_intervals(&preds, "a", true, false).unwrap();
        assert_eq!(ivs.len(), 1, "multikey keeps one predicate");
    }

    #[test]
    fn in_and_null() {
        let f = Filter::parse(&doc! { "a": { "$in": [3, 1, 3] }, "b": null }).unwrap();
        let preds = conjunction(&f);
        assert_eq!(field_intervals(&preds, "a", false, false).unwrap().len(), 2);
        // Null only: undefined no longer matches null (8.0).
        assert_eq!(field_intervals(&preds, "b", false, false).unwrap().len(), 1);
        assert!(
            field_intervals(&preds, "b", false, true).is_none(),
            "sparse cannot answer null"
        );
        assert!(field_intervals(&preds, "c", false, false).is_none());
    }

    #[test]
    fn a_long_in_list_keeps_every_value() {
        let values: Vec<Bson> = (0..1000).map(Bson::Int32).collect();
        let f = Filter::parse(&doc! { "a": { "$in": values } }).unwrap();
        let ivs = field_intervals(&conjunction(&f), "a", false, false).unwrap();
        assert_eq!(byte_intervals(&doc! { "a": 1 }, &[ivs]).len(), 1000);
    }

    #[test]
    fn byte_intervals_cover_their_keys() {
        let pattern = doc! { "a": 1, "b": -1 };
        let ivs = byte_intervals(&pattern, &[vec![ValueInterval::point(Bson::Int32(5))]]);
        let key = storage::encode_index_key(&pattern, &[Bson::Int32(5), Bson::String("x".into())]);
        let (lo, hi) = &ivs[0];
        assert!(lo.as_slice() <= key.as_slice() && key.as_slice() < hi.as_slice());
        let other =
            storage::encode_index_key(&pattern, &[Bson::Int32(6), Bson::String("x".into())]);
        assert!(!(lo.as_slice() <= other.as_slice() && other.as_slice() < hi.as_slice()));
    }
}
