//! `$geoWithin` without an index: legacy shapes (`$box`, `$center`, `$centerSphere`,
//! `$polygon`) and GeoJSON `Polygon`/`MultiPolygon` via `$geometry`. Stored locations may be
//! legacy pairs (`[x, y]`, `{lng: x, lat: y}`) or GeoJSON (`Point`, `MultiPoint`, `LineString`,
//! `Polygon`: every vertex must lie within). Points on a boundary are within. Polygons are
//! tested on the plane of their coordinates; mongod uses spherical edges for GeoJSON, so
//! results can differ for points very close to long edges (documented limitation).

use crate::error::{CommandResult, ErrorCode, err};
use crate::query::types;
use bson::{Bson, RawBsonRef};

/// Earth's radius in radians is 1 by definition; `$centerSphere` radii are angles.
#[derive(Debug, Clone, PartialEq)]
pub enum GeoShape {
    Box {
        min: (f64, f64),
        max: (f64, f64),
    },
    Center {
        center: (f64, f64),
        radius: f64,
    },
    /// Center `(lng, lat)` in degrees, radius in radians.
    CenterSphere {
        center: (f64, f64),
        radius_rad: f64,
    },
    /// One or more polygons, each a list of rings (the first is the shell, the rest holes).
    Polygons(Vec<Vec<Vec<(f64, f64)>>>),
}

fn bad(message: impl Into<String>) -> crate::error::CommandError {
    err(ErrorCode::BadValue, message)
}

fn point(v: &Bson) -> Option<(f64, f64)> {
    match v {
        Bson::Array(a) if a.len() >= 2 => Some((types::as_f64(&a[0])?, types::as_f64(&a[1])?)),
        Bson::Document(d) => {
            let mut values = d.values();
            Some((
                types::as_f64(values.next()?)?,
                types::as_f64(values.next()?)?,
            ))
        }
        _ => None,
    }
}

fn points(v: &Bson) -> Option<Vec<(f64, f64)>> {
    match v {
        Bson::Array(items) => items.iter().map(point).collect(),
        _ => None,
    }
}

pub fn parse_geo_within(v: &Bson) -> CommandResult<GeoShape> {
    let Bson::Document(d) = v else {
        return Err(bad("$geoWithin not given an object"));
    };
    let Some((name, arg)) = d.iter().next() else {
        return Err(bad("$geoWithin requires a shape"));
    };
    let malformed = || bad(format!("malformed {name}: {arg}"));
    match name.as_str() {
        "$box" => {
            let p = points(arg).filter(|p| p.len() == 2).ok_or_else(malformed)?;
            let min = (p[0].0.min(p[1].0), p[0].1.min(p[1].1));
            let max = (p[0].0.max(p[1].0), p[0].1.max(p[1].1));
            Ok(GeoShape::Box { min, max })
        }
        "$center" | "$centerSphere" => {
            let Bson::Array(a) = arg else {
                return Err(malformed());
            };
            let (Some(center), Some(radius)) =
                (a.first().and_then(point), a.get(1).and_then(types::as_f64))
            else {
                return Err(malformed());
            };
            if a.len() != 2 || radius < 0.0 || !radius.is_finite() {
                return Err(malformed());
            }
            Ok(if name == "$center" {
                GeoShape::Center { center, radius }
            } else {
                GeoShape::CenterSphere {
                    center,
                    radius_rad: radius,
                }
            })
        }
        "$polygon" => {
            let ring = points(arg).filter(|p| p.len() >= 3).ok_or_else(malformed)?;
            Ok(GeoShape::Polygons(vec![vec![ring]]))
        }
        "$geometry" => parse_geometry(arg),
        other => Err(bad(format!("unknown geo specifier: {other}: {arg}"))),
    }
}

fn parse_geometry(v: &Bson) -> CommandResult<GeoShape> {
    let Bson::Document(g) = v else {
        return Err(bad("$geometry must be a GeoJSON object"));
    };
    let rings = |c: &Bson| -> Option<Vec<Vec<(f64, f64)>>> {
        match c {
            Bson::Array(rs) => rs
                .iter()
                .map(points)
                .collect::<Option<Vec<_>>>()
                .filter(|r| r.iter().all(|ring| ring.len() >= 4)),
            _ => None,
        }
    };
    let coords = g.get("coordinates").unwrap_or(&Bson::Null);
    let shape = match g.get_str("type") {
        Ok("Polygon") => rings(coords).map(|r| vec![r]),
        Ok("MultiPolygon") => match coords {
            Bson::Array(ps) => ps.iter().map(rings).collect(),
            _ => None,
        },
        Ok(other) => {
            return Err(bad(format!(
                "$geoWithin with a GeoJSON {other} is not supported; use Polygon or MultiPolygon"
            )));
        }
        Err(_) => None,
    };
    shape.map(GeoShape::Polygons).ok_or_else(|| {
        bad(format!(
            "Can't extract geo keys: malformed GeoJSON {}",
            Bson::Document(g.clone())
        ))
    })
}

/// The vertices of a stored location, if it is one.
fn locations(v: RawBsonRef<'_>) -> Option<Vec<(f64, f64)>> {
    let owned = types::to_owned(v);
    if let Bson::Document(d) = &owned
        && let (Ok(kind), Some(coords)) = (d.get_str("type"), d.get("coordinates"))
    {
        return geojson_vertices(kind, coords);
    }
    point(&owned).map(|p| vec![p])
}

fn geojson_vertices(kind: &str, coords: &Bson) -> Option<Vec<(f64, f64)>> {
    match kind {
        "Point" => point(coords).map(|p| vec![p]),
        "MultiPoint" | "LineString" => points(coords),
        "Polygon" | "MultiLineString" => match coords {
            Bson::Array(rings) => Some(
                rings
                    .iter()
                    .map(points)
                    .collect::<Option<Vec<_>>>()?
                    .concat(),
            ),
            _ => None,
        },
        _ => None,
    }
}

impl GeoShape {
    /// True when the stored location lies within the shape.
    pub fn contains(&self, v: RawBsonRef<'_>) -> bool {
        locations(v).is_some_and(|ps| !ps.is_empty() && ps.iter().all(|p| self.contains_point(*p)))
    }

    fn contains_point(&self, (x, y): (f64, f64)) -> bool {
        match self {
            GeoShape::Box { min, max } => x >= min.0 && x <= max.0 && y >= min.1 && y <= max.1,
            GeoShape::Center { center, radius } => (x - center.0).hypot(y - center.1) <= *radius,
            GeoShape::CenterSphere { center, radius_rad } => {
                haversine_rad(*center, (x, y)) <= *radius_rad
            }
            GeoShape::Polygons(polys) => polys.iter().any(|rings| {
                rings.first().is_some_and(|shell| in_ring(shell, (x, y)))
                    && rings[1..]
                        .iter()
                        .all(|hole| !in_ring(hole, (x, y)) || on_boundary(hole, (x, y)))
            }),
        }
    }
}

/// Great-circle angle between two `(lng, lat)` points in degrees, in radians.
fn haversine_rad(a: (f64, f64), b: (f64, f64)) -> f64 {
    let (lat1, lat2) = (a.1.to_radians(), b.1.to_radians());
    let (dlat, dlng) = ((b.1 - a.1).to_radians(), (b.0 - a.0).to_radians());
    let h = (dlat / 2.0).sin().powi(2) + lat1.cos() * lat2.cos() * (dlng / 2.0).sin().powi(2);
    2.0 * h.sqrt().min(1.0).asin()
}

fn on_segment(p: (f64, f64), a: (f64, f64), b: (f64, f64)) -> bool {
    let cross = (b.0 - a.0) * (p.1 - a.1) - (b.1 - a.1) * (p.0 - a.0);
    cross.abs() <= 1e-12 * (1.0 + a.0.abs() + a.1.abs() + b.0.abs() + b.1.abs())
        && p.0 >= a.0.min(b.0)
        && p.0 <= a.0.max(b.0)
        && p.1 >= a.1.min(b.1)
        && p.1 <= a.1.max(b.1)
}

fn edges(ring: &[(f64, f64)]) -> impl Iterator<Item = ((f64, f64), (f64, f64))> + '_ {
    ring.iter()
        .enumerate()
        .map(move |(i, a)| (*a, ring[(i + 1) % ring.len()]))
}

fn on_boundary(ring: &[(f64, f64)], p: (f64, f64)) -> bool {
    edges(ring).any(|(a, b)| on_segment(p, a, b))
}

/// Even-odd ray casting; boundary points count as inside.
fn in_ring(ring: &[(f64, f64)], p: (f64, f64)) -> bool {
    if on_boundary(ring, p) {
        return true;
    }
    let mut inside = false;
    for (a, b) in edges(ring) {
        if (a.1 > p.1) != (b.1 > p.1) {
            let x = a.0 + (p.1 - a.1) / (b.1 - a.1) * (b.0 - a.0);
            if p.0 < x {
                inside = !inside;
            }
        }
    }
    inside
}

/// mongod's Earth radius for distances in meters (`$near` with GeoJSON, `$geoNear`).
pub const EARTH_RADIUS_M: f64 = 6_378_100.0;

/// How `$near`/`$nearSphere`/`$geoNear` measure distance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NearMetric {
    /// Around a GeoJSON point: meters along the sphere.
    Meters,
    /// `$nearSphere` around a legacy pair: radians along the sphere.
    Radians,
    /// `$near` around a legacy pair: the plane of the coordinates.
    Flat,
}

/// A nearness predicate: a location within `[min, max]` of `center`; results are ordered by
/// that distance by the executor.
#[derive(Debug, Clone, PartialEq)]
pub struct NearSpec {
    pub center: (f64, f64),
    pub metric: NearMetric,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl NearSpec {
    /// Distance from the center to the nearest vertex of a stored location.
    pub fn distance(&self, v: RawBsonRef<'_>) -> Option<f64> {
        locations(v)?
            .into_iter()
            .map(|p| self.distance_to(p))
            .min_by(f64::total_cmp)
    }

    pub fn distance_to(&self, p: (f64, f64)) -> f64 {
        match self.metric {
            NearMetric::Meters => haversine_rad(self.center, p) * EARTH_RADIUS_M,
            NearMetric::Radians => haversine_rad(self.center, p),
            NearMetric::Flat => (p.0 - self.center.0).hypot(p.1 - self.center.1),
        }
    }

    pub fn matches(&self, v: RawBsonRef<'_>) -> bool {
        self.distance(v)
            .is_some_and(|d| self.min.is_none_or(|m| d >= m) && self.max.is_none_or(|m| d <= m))
    }

    /// The largest angle (radians) or flat distance the predicate reaches, if bounded.
    pub fn reach(&self) -> Option<f64> {
        self.max.map(|m| match self.metric {
            NearMetric::Meters => m / EARTH_RADIUS_M,
            _ => m,
        })
    }

    /// The same predicate bounded at `reach` (radians, or flat units): [`Self::reach`]'s inverse.
    pub fn within(&self, reach: f64) -> NearSpec {
        let max = match self.metric {
            NearMetric::Meters => reach * EARTH_RADIUS_M,
            _ => reach,
        };
        NearSpec {
            max: Some(max),
            ..self.clone()
        }
    }
}

fn distance_arg(name: &str, v: &Bson) -> CommandResult<f64> {
    let d = types::as_f64(v).ok_or_else(|| bad(format!("{name} must be a number")))?;
    if d < 0.0 || d.is_nan() {
        return Err(bad(format!("{name} must be non-negative")));
    }
    Ok(d)
}

/// `{$near | $nearSphere: <point>, $maxDistance, $minDistance}` (the distances may also sit
/// inside a `$near` document next to `$geometry`).
pub fn parse_near(ops: &bson::Document) -> CommandResult<NearSpec> {
    let (name, arg) = ops
        .iter()
        .find(|(k, _)| *k == "$near" || *k == "$nearSphere")
        .ok_or_else(|| bad("$near requires a point"))?;
    let sphere = name == "$nearSphere";
    let mut min = None;
    let mut max = None;
    let mut read_distances = |d: &bson::Document| -> CommandResult<()> {
        for (k, v) in d {
            match k.as_str() {
                "$maxDistance" => max = Some(distance_arg(k, v)?),
                "$minDistance" => min = Some(distance_arg(k, v)?),
                "$near" | "$nearSphere" | "$geometry" => {}
                other => return Err(bad(format!("unknown argument to {name}: {other}"))),
            }
        }
        Ok(())
    };
    read_distances(ops)?;
    let (center, metric) = match arg {
        Bson::Document(d) if d.contains_key("$geometry") => {
            read_distances(d)?;
            let g = d
                .get_document("$geometry")
                .map_err(|_| bad("$geometry must be an object"))?;
            if g.get_str("type").ok() != Some("Point") {
                return Err(bad(format!("$near requires a point, given {g}")));
            }
            let p = g.get("coordinates").and_then(point).ok_or_else(|| {
                bad(format!(
                    "invalid point in geo near query $geometry argument: {g}"
                ))
            })?;
            if !(-180.0..=180.0).contains(&p.0) || !(-90.0..=90.0).contains(&p.1) {
                return Err(bad(format!(
                    "invalid point in geo near query $geometry argument: {g}"
                )));
            }
            (p, NearMetric::Meters)
        }
        other => {
            let p = point(other)
                .ok_or_else(|| bad(format!("{name} requires a point, given {other}")))?;
            (
                p,
                if sphere {
                    NearMetric::Radians
                } else {
                    NearMetric::Flat
                },
            )
        }
    };
    Ok(NearSpec {
        center,
        metric,
        min,
        max,
    })
}

/// One piece of a geometry for `$geoIntersects`, in the plane of its coordinates.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Point((f64, f64)),
    Line(Vec<(f64, f64)>),
    /// Shell then holes.
    Polygon(Vec<Vec<(f64, f64)>>),
}

fn rings_of(c: &Bson) -> Option<Vec<Vec<(f64, f64)>>> {
    match c {
        Bson::Array(rs) => rs.iter().map(points).collect(),
        _ => None,
    }
}

/// The parts of a GeoJSON object (or a legacy pair, a point).
pub fn geometry_parts(v: &Bson) -> Option<Vec<Part>> {
    let Bson::Document(g) = v else {
        return point(v).map(|p| vec![Part::Point(p)]);
    };
    let Ok(kind) = g.get_str("type") else {
        return point(v).map(|p| vec![Part::Point(p)]);
    };
    let c = g.get("coordinates").unwrap_or(&Bson::Null);
    let list = |c: &Bson| match c {
        Bson::Array(a) => Some(a.clone()),
        _ => None,
    };
    Some(match kind {
        "Point" => vec![Part::Point(point(c)?)],
        "MultiPoint" => points(c)?.into_iter().map(Part::Point).collect(),
        "LineString" => vec![Part::Line(points(c)?)],
        "MultiLineString" => list(c)?
            .iter()
            .map(|l| points(l).map(Part::Line))
            .collect::<Option<_>>()?,
        "Polygon" => vec![Part::Polygon(rings_of(c)?)],
        "MultiPolygon" => list(c)?
            .iter()
            .map(|p| rings_of(p).map(Part::Polygon))
            .collect::<Option<_>>()?,
        "GeometryCollection" => {
            let gs = g.get_array("geometries").ok()?;
            let mut out = Vec::new();
            for g in gs {
                out.extend(geometry_parts(g)?);
            }
            out
        }
        _ => return None,
    })
}

/// Every vertex of a list of parts.
pub fn part_vertices(parts: &[Part]) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for p in parts {
        match p {
            Part::Point(q) => out.push(*q),
            Part::Line(l) => out.extend(l),
            Part::Polygon(rings) => rings.iter().for_each(|r| out.extend(r)),
        }
    }
    out
}

fn in_polygon(rings: &[Vec<(f64, f64)>], p: (f64, f64)) -> bool {
    rings.first().is_some_and(|shell| in_ring(shell, p))
        && rings[1..]
            .iter()
            .all(|hole| !in_ring(hole, p) || on_boundary(hole, p))
}

fn orient(a: (f64, f64), b: (f64, f64), c: (f64, f64)) -> f64 {
    (b.0 - a.0) * (c.1 - a.1) - (b.1 - a.1) * (c.0 - a.0)
}

fn segments_cross(a: (f64, f64), b: (f64, f64), c: (f64, f64), d: (f64, f64)) -> bool {
    let (d1, d2) = (orient(c, d, a), orient(c, d, b));
    let (d3, d4) = (orient(a, b, c), orient(a, b, d));
    if ((d1 > 0.0 && d2 < 0.0) || (d1 < 0.0 && d2 > 0.0))
        && ((d3 > 0.0 && d4 < 0.0) || (d3 < 0.0 && d4 > 0.0))
    {
        return true;
    }
    on_segment(a, c, d) || on_segment(b, c, d) || on_segment(c, a, b) || on_segment(d, a, b)
}

fn part_segments(p: &Part) -> Vec<((f64, f64), (f64, f64))> {
    match p {
        Part::Point(_) => vec![],
        Part::Line(l) => l.windows(2).map(|w| (w[0], w[1])).collect(),
        Part::Polygon(rings) => rings
            .iter()
            .flat_map(|r| edges(r).collect::<Vec<_>>())
            .collect(),
    }
}

fn part_contains_point(part: &Part, p: (f64, f64)) -> bool {
    match part {
        Part::Point(q) => *q == p,
        Part::Line(l) => l.windows(2).any(|w| on_segment(p, w[0], w[1])) || l.first() == Some(&p),
        Part::Polygon(rings) => in_polygon(rings, p),
    }
}

fn parts_intersect(a: &Part, b: &Part) -> bool {
    let any_vertex_in = |x: &Part, y: &Part| {
        part_vertices(std::slice::from_ref(x))
            .into_iter()
            .any(|v| part_contains_point(y, v))
    };
    if any_vertex_in(a, b) || any_vertex_in(b, a) {
        return true;
    }
    let sb = part_segments(b);
    part_segments(a)
        .iter()
        .any(|(p, q)| sb.iter().any(|(r, s)| segments_cross(*p, *q, *r, *s)))
}

/// `$geoIntersects` of a stored value with the query geometry.
pub fn intersects(query: &[Part], v: RawBsonRef<'_>) -> bool {
    let owned = types::to_owned(v);
    let stored = match &owned {
        // An array of legacy pairs or geometries: any of them.
        Bson::Array(items)
            if point(&owned).is_none()
                || items
                    .iter()
                    .any(|i| matches!(i, Bson::Array(_) | Bson::Document(_))) =>
        {
            items.iter().filter_map(geometry_parts).flatten().collect()
        }
        other => match geometry_parts(other) {
            Some(p) => p,
            None => return false,
        },
    };
    stored
        .iter()
        .any(|s| query.iter().any(|q| parts_intersect(s, q)))
}

/// `{$geometry: <GeoJSON>}` for `$geoIntersects`.
pub fn parse_geo_intersects(v: &Bson) -> CommandResult<Vec<Part>> {
    let g = match v {
        Bson::Document(d) => d.get("$geometry"),
        _ => None,
    }
    .ok_or_else(|| {
        bad(format!(
            "$geoIntersects requires a $geometry argument, given {v}"
        ))
    })?;
    geometry_parts(g).filter(|p| !p.is_empty()).ok_or_else(|| {
        bad(format!(
            "Can't parse $geoIntersects $geometry argument: {g}"
        ))
    })
}
