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
