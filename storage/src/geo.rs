//! Index keys of `2dsphere` fields: stored locations (GeoJSON geometries or legacy coordinate
//! pairs) checked as mongod checks them and turned into S2 cell ids, stored as int64 keys; and
//! the cell-id intervals a query region must scan. Uses the `s2` crate for cells and coverings.
//!
//! A point is the leaf cell (level 30) holding it. Any other geometry is covered by at most
//! `COVERING_CELLS_MAX` cells of its longitude/latitude bounding box, so its keys are a superset
//! of where it lies. A query region is covered the same way; the entries it must read are the
//! cells inside its covering cells (a range each) and the ancestors of those cells (a point
//! each, for coarse cells of large stored geometries). Bounds are therefore always a superset of
//! the matches, and the fetch re-checks every document exactly.
//!
//! Cell ids are u64; stored as i64 their order is kept within each cube face (faces 4 and 5 are
//! the negative ones), and every cell's range lies within one face, so a range stays a range.

use bson::RawBsonRef;
use s2::cap::Cap;
use s2::cellid::CellID;
use s2::latlng::LatLng;
use s2::point::Point;
use s2::rect::Rect;
use s2::region::RegionCoverer;
use s2::s1::{Angle, Rad};

/// Cells a covering may use (stored geometries and query regions).
pub const COVERING_CELLS_MAX: usize = 8;
/// The finest cell level (leaf cells, about 1 cm across).
const LEVEL_MAX: u8 = 30;

/// A location's longitude and latitude in degrees.
pub type LngLat = (f64, f64);

/// Why a value cannot be indexed as a location (mongod code 16755).
pub type GeoError = String;

/// What a stored value is, for the index: its vertices and whether it is a single point.
#[derive(Debug, Clone, PartialEq)]
pub struct Located {
    pub vertices: Vec<LngLat>,
    pub point: bool,
}

/// The int64 keys of a stored location; `Ok(None)` for a value that holds no location and is
/// skipped (null), an error for one that is malformed.
pub fn keys_of(value: RawBsonRef<'_>) -> Result<Option<Vec<i64>>, GeoError> {
    if matches!(value, RawBsonRef::Null | RawBsonRef::Undefined) {
        return Ok(None);
    }
    let parts = parse_location(value)?;
    let mut keys = Vec::new();
    for part in parts {
        if part.point {
            keys.push(point_cell(part.vertices[0]));
        } else {
            keys.extend(box_cells(bounding_box(&part.vertices)));
        }
    }
    keys.sort_unstable();
    keys.dedup();
    Ok(Some(keys))
}

/// The leaf cell of a point, as an int64 key.
pub fn point_cell((lng, lat): LngLat) -> i64 {
    CellID::from(LatLng::from_degrees(lat, lng)).0 as i64
}

/// `(lng_lo, lat_lo, lng_hi, lat_hi)`: the longitude/latitude box around some vertices.
pub type LngLatBox = (f64, f64, f64, f64);

pub fn bounding_box(vertices: &[LngLat]) -> LngLatBox {
    let mut b = (
        f64::INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NEG_INFINITY,
    );
    for &(lng, lat) in vertices {
        b = (b.0.min(lng), b.1.min(lat), b.2.max(lng), b.3.max(lat));
    }
    b
}

fn coverer() -> RegionCoverer {
    RegionCoverer {
        min_level: 0,
        max_level: LEVEL_MAX,
        level_mod: 1,
        max_cells: COVERING_CELLS_MAX,
    }
}

/// A slightly grown box as an S2 rectangle. A box touching the antimeridian takes every
/// longitude (S2 folds -180 onto 180, which would flip the interval).
fn s2_rect((lng_lo, lat_lo, lng_hi, lat_hi): LngLatBox) -> Rect {
    const PAD_DEG: f64 = 1e-7;
    let lat_lo = (lat_lo - PAD_DEG).max(-90.0);
    let lat_hi = (lat_hi + PAD_DEG).min(90.0);
    let (mut lng_lo, mut lng_hi) = (lng_lo - PAD_DEG, lng_hi + PAD_DEG);
    if lng_lo <= -180.0 || lng_hi >= 180.0 {
        (lng_lo, lng_hi) = (-180.0, 180.0);
    }
    Rect::from_degrees(lat_lo, lng_lo, lat_hi, lng_hi)
}

/// A longitude/latitude rectangle whose cell intersection test is the bounding-box test: a
/// cell may meet the rectangle when the cell's (padded) longitude/latitude bound meets it.
/// The `s2` crate's exact `Rect::intersects_cell` answers "no" for some cells the rectangle
/// does cross (a box reaching from face 2 down into face 1 lost face 1's part), and a covering
/// built on it misses stored points. The bounding test only ever says "yes" too often, which
/// keeps a covering a superset; the fetch re-checks every document.
struct LooseRect(Rect);

impl s2::region::Region for LooseRect {
    fn cap_bound(&self) -> Cap {
        self.0.cap_bound()
    }

    fn rect_bound(&self) -> Rect {
        self.0.clone()
    }

    fn contains_cell(&self, cell: &s2::cell::Cell) -> bool {
        self.0.contains_cell(cell)
    }

    fn intersects_cell(&self, cell: &s2::cell::Cell) -> bool {
        self.0.intersects(&cell.rect_bound())
    }
}

fn rect_covering(b: LngLatBox) -> Vec<CellID> {
    coverer().covering(&LooseRect(s2_rect(b))).0
}

fn box_cells(b: LngLatBox) -> Vec<i64> {
    rect_covering(b).iter().map(|c| c.0 as i64).collect()
}

/// Inclusive int64 intervals of cell ids a query over a box must scan.
pub fn box_intervals(b: LngLatBox) -> Vec<(i64, i64)> {
    intervals(rect_covering(b))
}

/// Inclusive int64 intervals of cell ids a query within `radius_rad` of `center` must scan.
pub fn cap_intervals(center: LngLat, radius_rad: f64) -> Vec<(i64, i64)> {
    if radius_rad >= std::f64::consts::PI {
        return vec![(i64::MIN, i64::MAX)];
    }
    let point = Point::from(LatLng::from_degrees(center.1, center.0));
    // Grown a little so rounding in the distance never loses a point on the rim.
    let angle = Angle::from(Rad(radius_rad * (1.0 + 1e-9) + 1e-12));
    let cap = Cap::from_center_angle(&point, &angle);
    intervals(coverer().covering(&cap).0)
}

fn intervals(cells: Vec<CellID>) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for cell in &cells {
        out.push((cell.range_min().0 as i64, cell.range_max().0 as i64));
        for level in 0..cell.level() {
            let a = cell.parent(level).0 as i64;
            out.push((a, a));
        }
    }
    out.sort_unstable();
    let mut merged: Vec<(i64, i64)> = Vec::with_capacity(out.len());
    for (lo, hi) in out {
        match merged.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    merged
}

/// A `2d` coordinate pair mapped onto the longitude/latitude box: `[min, max)` on each axis
/// becomes `[-180, 180)` and `[-90, 90)`. The map keeps each axis' order, so a box of pairs is
/// a box of locations and the same coverings serve both kinds of index.
pub fn flat_to_lnglat((x, y): LngLat, (min, max): (f64, f64)) -> LngLat {
    let scale = |v: f64| ((v - min) / (max - min)).clamp(0.0, 1.0);
    (-180.0 + 360.0 * scale(x), -90.0 + 180.0 * scale(y))
}

/// A box of `2d` coordinates as a box of locations.
pub fn flat_box((x0, y0, x1, y1): LngLatBox, range: (f64, f64)) -> LngLatBox {
    let (a, b) = (
        flat_to_lnglat((x0, y0), range),
        flat_to_lnglat((x1, y1), range),
    );
    (a.0, a.1, b.0, b.1)
}

/// The keys of a value in a `2d` field: one cell per pair (an array of pairs gives several);
/// null gives none.
pub fn flat_keys_of(
    value: RawBsonRef<'_>,
    range: (f64, f64),
) -> Result<Vec<i64>, crate::keys::KeyError> {
    use crate::keys::KeyError;
    let pairs: Vec<LngLat> = match value {
        RawBsonRef::Null | RawBsonRef::Undefined => return Ok(Vec::new()),
        RawBsonRef::Document(d) if d.get("type").ok().flatten().is_some() => {
            return Err(KeyError::FlatNotPair);
        }
        v => match legacy_pair(v) {
            Some(p) if !matches!(v, RawBsonRef::Array(a) if !all_numbers(a)) => vec![p],
            _ => match v {
                RawBsonRef::Array(items) => items
                    .into_iter()
                    .map_while(Result::ok)
                    .map(|i| legacy_pair(i).ok_or(KeyError::FlatNotPair))
                    .collect::<Result<_, _>>()?,
                _ => return Err(KeyError::FlatNotPair),
            },
        },
    };
    let (min, max) = range;
    pairs
        .into_iter()
        .map(|(x, y)| {
            if !(min..max).contains(&x) || !(min..max).contains(&y) {
                return Err(KeyError::FlatOutOfRange(min.to_string(), max.to_string()));
            }
            Ok(point_cell(flat_to_lnglat((x, y), range)))
        })
        .collect()
}

fn number(v: RawBsonRef<'_>) -> Option<f64> {
    match v {
        RawBsonRef::Double(f) => Some(f),
        RawBsonRef::Int32(i) => Some(f64::from(i)),
        RawBsonRef::Int64(i) => Some(i as f64),
        RawBsonRef::Decimal128(d) => d.to_string().parse().ok(),
        _ => None,
    }
}

/// A legacy pair: an array or object whose first two values are numbers.
fn legacy_pair(v: RawBsonRef<'_>) -> Option<LngLat> {
    let mut values: Vec<RawBsonRef<'_>> = match v {
        RawBsonRef::Array(a) => a.into_iter().take(2).map_while(Result::ok).collect(),
        RawBsonRef::Document(d) => d
            .into_iter()
            .take(2)
            .map_while(Result::ok)
            .map(|(_, v)| v)
            .collect(),
        _ => return None,
    };
    if values.len() != 2 {
        return None;
    }
    let lat = number(values.pop()?)?;
    let lng = number(values.pop()?)?;
    Some((lng, lat))
}

fn check_bounds((lng, lat): LngLat) -> Result<LngLat, GeoError> {
    if !(-180.0..=180.0).contains(&lng) || !(-90.0..=90.0).contains(&lat) {
        return Err(format!(
            "longitude/latitude is out of bounds, lng: {lng} lat: {lat}"
        ));
    }
    Ok((lng, lat))
}

/// The geometries one stored value holds (an array of locations holds several).
pub fn parse_location(value: RawBsonRef<'_>) -> Result<Vec<Located>, GeoError> {
    if let RawBsonRef::Document(d) = value
        && d.get("type").ok().flatten().is_some()
    {
        return parse_geojson(d).map(|g| vec![g]);
    }
    if let Some(p) = legacy_pair(value)
        && !matches!(value, RawBsonRef::Array(a) if a.into_iter().count() > 2 && !all_numbers(a))
    {
        return Ok(vec![Located {
            vertices: vec![check_bounds(p)?],
            point: true,
        }]);
    }
    match value {
        RawBsonRef::Array(items) => {
            let mut out = Vec::new();
            for item in items.into_iter().map_while(Result::ok) {
                out.extend(parse_location(item)?);
            }
            Ok(out)
        }
        _ => Err("geo element must be an array or object".into()),
    }
}

fn all_numbers(a: &bson::RawArray) -> bool {
    a.into_iter()
        .map_while(Result::ok)
        .all(|v| number(v).is_some())
}

fn position(v: RawBsonRef<'_>) -> Result<LngLat, GeoError> {
    let RawBsonRef::Array(a) = v else {
        return Err("GeoJSON coordinates must be an array".into());
    };
    let values: Vec<f64> = a
        .into_iter()
        .map_while(Result::ok)
        .map(number)
        .collect::<Option<_>>()
        .ok_or_else(|| "Point must only contain numeric elements".to_string())?;
    if values.len() < 2 {
        return Err("Point must only contain numeric elements".into());
    }
    check_bounds((values[0], values[1]))
}

fn positions(v: RawBsonRef<'_>, what: &str) -> Result<Vec<LngLat>, GeoError> {
    let RawBsonRef::Array(a) = v else {
        return Err(format!("{what} must be an array"));
    };
    a.into_iter().map_while(Result::ok).map(position).collect()
}

fn list<'a>(v: RawBsonRef<'a>, what: &str) -> Result<Vec<RawBsonRef<'a>>, GeoError> {
    match v {
        RawBsonRef::Array(a) => Ok(a.into_iter().map_while(Result::ok).collect()),
        _ => Err(format!("{what} must be an array")),
    }
}

fn line(v: RawBsonRef<'_>) -> Result<Vec<LngLat>, GeoError> {
    let points = positions(v, "LineString coordinates")?;
    if points.len() < 2 {
        return Err("GeoJSON LineString must have at least 2 vertices".into());
    }
    Ok(points)
}

fn polygon(v: RawBsonRef<'_>) -> Result<Vec<LngLat>, GeoError> {
    let rings = list(v, "Polygon coordinates")?;
    if rings.is_empty() {
        return Err("Polygon has no loops.".into());
    }
    let mut all = Vec::new();
    for ring in rings {
        let ring = positions(ring, "Polygon ring")?;
        if ring.len() < 4 {
            return Err("Loop must have at least 3 different vertices".into());
        }
        if ring.first() != ring.last() {
            return Err("Loop is not closed, first vertex does not equal last vertex".into());
        }
        all.extend(ring);
    }
    Ok(all)
}

/// A GeoJSON object: `{type, coordinates}` (or `geometries` for a collection).
pub fn parse_geojson(d: &bson::RawDocument) -> Result<Located, GeoError> {
    let kind = match d.get("type").ok().flatten() {
        Some(RawBsonRef::String(s)) => s,
        _ => return Err("unknown GeoJSON type".into()),
    };
    let field = |name: &str| d.get(name).ok().flatten();
    let coords = || field("coordinates").ok_or_else(|| "coordinates missing".to_string());
    let shape = |vertices: Vec<LngLat>| Located {
        vertices,
        point: false,
    };
    Ok(match kind {
        "Point" => Located {
            vertices: vec![position(coords()?)?],
            point: true,
        },
        "LineString" => shape(line(coords()?)?),
        "Polygon" => shape(polygon(coords()?)?),
        "MultiPoint" => {
            let points = positions(coords()?, "MultiPoint coordinates")?;
            if points.is_empty() {
                return Err("MultiPoint coordinates must have at least 1 element".into());
            }
            shape(points)
        }
        "MultiLineString" => {
            let mut all = Vec::new();
            for l in list(coords()?, "MultiLineString coordinates")? {
                all.extend(line(l)?);
            }
            shape(all)
        }
        "MultiPolygon" => {
            let mut all = Vec::new();
            for p in list(coords()?, "MultiPolygon coordinates")? {
                all.extend(polygon(p)?);
            }
            shape(all)
        }
        "GeometryCollection" => {
            let geometries = field("geometries").ok_or("GeometryCollection has no geometries")?;
            let mut all = Vec::new();
            for g in list(geometries, "GeometryCollection geometries")? {
                let RawBsonRef::Document(g) = g else {
                    return Err("Element of GeometryCollection is not an object".into());
                };
                all.extend(parse_geojson(g)?.vertices);
            }
            if all.is_empty() {
                return Err("GeometryCollection has no geometries".into());
            }
            shape(all)
        }
        other => return Err(format!("unknown GeoJSON type: {other}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    fn keys(d: &bson::RawDocument) -> Result<Option<Vec<i64>>, GeoError> {
        keys_of(d.get("v").unwrap().unwrap())
    }

    #[test]
    fn points_and_shapes() {
        let a = keys(&rawdoc! { "v": [10.0, 20.0] }).unwrap().unwrap();
        let b = keys(&rawdoc! { "v": { "type": "Point", "coordinates": [10.0, 20.0] } })
            .unwrap()
            .unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 1);
        let poly = rawdoc! { "v": { "type": "Polygon",
        "coordinates": [[[0, 0], [5, 0], [5, 5], [0, 0]]] } };
        let cells = keys(&poly).unwrap().unwrap();
        assert!(!cells.is_empty() && cells.len() <= COVERING_CELLS_MAX);
        // The point's cell is inside the box's query intervals.
        let p = point_cell((10.0, 20.0));
        let ivs = box_intervals((9.0, 19.0, 11.0, 21.0));
        assert!(ivs.iter().any(|(lo, hi)| *lo <= p && p <= *hi));
        let ivs = cap_intervals((10.0, 20.0), 0.01);
        assert!(ivs.iter().any(|(lo, hi)| *lo <= p && p <= *hi));
        assert_eq!(keys_of(RawBsonRef::Null).unwrap(), None);
    }

    #[test]
    fn malformed_locations() {
        for bad in [
            rawdoc! { "v": "x" },
            rawdoc! { "v": [200, 0] },
            rawdoc! { "v": { "type": "Point", "coordinates": [0, 91] } },
            rawdoc! { "v": { "type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1]]] } },
            rawdoc! { "v": { "type": "LineString", "coordinates": [[0, 0]] } },
            rawdoc! { "v": { "type": "Nope", "coordinates": [0, 0] } },
        ] {
            assert!(keys(&bad).is_err(), "{bad:?}");
        }
    }

    fn covered(ivs: &[(i64, i64)], k: i64) -> bool {
        ivs.iter().any(|(lo, hi)| *lo <= k && k <= *hi)
    }

    /// The box a CI run lost two points in: it reaches from cube face 2 down into face 1, and
    /// the exact rectangle/cell test of the `s2` crate dropped face 1's part.
    #[test]
    fn a_box_across_cube_faces_covers_its_points() {
        let range = (-100.0, 100.0);
        let b = flat_box(
            (
                31.985202286211422,
                47.469884392040676,
                72.63413298369322,
                77.95658241515203,
            ),
            range,
        );
        let ivs = box_intervals(b);
        for p in [
            (43.297988871925185, 47.892369467774955),
            (54.06874430736886, 48.56215835667953),
            (50.0, 60.0),
        ] {
            assert!(covered(&ivs, point_cell(flat_to_lnglat(p, range))), "{p:?}");
        }
    }

    /// Random boxes and caps over the whole sphere: every point inside a box, or within a
    /// cap's radius, is in the query intervals; and a stored box's keys meet the query of a
    /// point inside it.
    #[test]
    fn coverings_hold_every_point_inside() {
        use rand::{Rng, SeedableRng};
        let seed = std::env::var("CAIRN_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(rand::random::<u64>);
        eprintln!("CAIRN_SEED={seed}");
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for _ in 0..1000 {
            let (lng, lat): (f64, f64) = (
                rng.random_range(-180.0..179.9),
                rng.random_range(-90.0..90.0),
            );
            let (w, h): (f64, f64) = (rng.random_range(0.01..60.0), rng.random_range(0.01..40.0));
            let b = (lng, lat, (lng + w).min(179.9), (lat + h).min(90.0));
            let ivs = box_intervals(b);
            for _ in 0..40 {
                let p = (rng.random_range(b.0..=b.2), rng.random_range(b.1..=b.3));
                assert!(covered(&ivs, point_cell(p)), "box {b:?} point {p:?}");
            }
            let r = rng.random_range(0.0001..1.0);
            let ivs = cap_intervals((lng, lat), r);
            let center = LatLng::from_degrees(lat, lng);
            for _ in 0..40 {
                let p = (
                    rng.random_range(-180.0..180.0),
                    rng.random_range(-90.0..90.0),
                );
                let d = center.distance(&LatLng::from_degrees(p.1, p.0)).rad();
                if d <= r {
                    assert!(
                        covered(&ivs, point_cell(p)),
                        "cap {lng},{lat} r {r} point {p:?}"
                    );
                }
            }
            let stored = box_cells(b);
            let inner = (rng.random_range(b.0..=b.2), rng.random_range(b.1..=b.3));
            let probe = box_intervals((inner.0, inner.1, inner.0, inner.1));
            assert!(
                stored.iter().any(|k| covered(&probe, *k)),
                "stored box {b:?} probe {inner:?}"
            );
        }
    }
}
