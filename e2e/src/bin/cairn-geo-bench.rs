//! `cairn-geo-bench`: geo queries through a `2dsphere` index against brute force, side by side.
//! Starts a `cairn` (or uses the one `--uri` names), loads `--points` seeded random GeoJSON
//! points over a 10 x 10 degree region, builds `{loc: "2dsphere"}`, then times in alternation,
//! per run: `$near` with limit 10 against an aggregate that computes every point's haversine
//! distance with expressions and keeps the top 10 (`$sort` + `$limit`, a collection scan: there
//! is no scan form of `$near`); `$geoWithin` a polygon over ~1% of the points and a
//! `$centerSphere` over ~1%, each planned and with `hint: {$natural: 1}`; and the `$geoNear`
//! stage + `$limit: 10` against the same brute force. Every indexed answer is checked against
//! its brute-force one (same ids; for the nearest ten, the same ids in distance order, ties
//! aside). Medians of `--runs` runs. See docs/BENCHMARKS.md.

use anyhow::{Result, bail, ensure};
use bson::{Bson, Document, doc};
use cairn_e2e::compare::stats::median;
use clap::Parser;
use futures_util::TryStreamExt;
use mongodb::options::Hint;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Instant;

#[derive(Parser)]
#[command(name = "cairn-geo-bench", about = "2dsphere index vs brute force")]
struct Cli {
    /// A running server's URI; without it a `cairn` is started on a fresh data directory.
    #[arg(long)]
    uri: Option<String>,
    /// The `cairn` binary to start (default: the one beside this executable).
    #[arg(long)]
    cairn: Option<String>,
    #[arg(long, default_value_t = 100_000)]
    points: usize,
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

/// The region the points fill: longitudes and latitudes, degrees.
const LNG: (f64, f64) = (0.0, 10.0);
const LAT: (f64, f64) = (40.0, 50.0);
/// The `$near` / `$geoNear` center.
const CENTER: (f64, f64) = (5.3, 44.7);
/// Must match the server's sphere (mongod's 6378.1 km).
const EARTH_RADIUS_M: f64 = 6_378_100.0;

/// One side of a comparison: a find or an aggregate, planned or forced to the collection scan.
enum Query {
    Find {
        filter: Document,
        limit: Option<i64>,
    },
    Aggregate(Vec<Document>),
}

/// How two answers must agree.
#[derive(Clone, Copy)]
enum Check {
    /// The same set of ids.
    SameSet,
    /// The same ids in distance order, ties aside.
    Nearest,
}

/// The ids the query returns, in order, and its milliseconds.
async fn timed(
    c: &mongodb::Collection<Document>,
    q: &Query,
    natural: bool,
) -> Result<(Vec<i64>, f64)> {
    let t0 = Instant::now();
    let docs: Vec<Document> = match q {
        Query::Find { filter, limit } => {
            let mut f = c.find(filter.clone()).projection(doc! { "_id": 1 });
            if let Some(l) = limit {
                f = f.limit(*l);
            }
            if natural {
                f = f.hint(Hint::Keys(doc! { "$natural": 1 }));
            }
            f.await?.try_collect().await?
        }
        Query::Aggregate(p) => {
            let mut a = c.aggregate(p.clone());
            if natural {
                a = a.hint(Hint::Keys(doc! { "$natural": 1 }));
            }
            a.await?.try_collect().await?
        }
    };
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let ids = docs
        .iter()
        .map(|d| d.get_i64("_id"))
        .collect::<Result<_, _>>()?;
    Ok((ids, ms))
}

/// The server's distance (haversine, meters), for the tie check.
fn haversine_m(a: (f64, f64), b: (f64, f64)) -> f64 {
    let (lat1, lat2) = (a.1.to_radians(), b.1.to_radians());
    let (dlat, dlng) = ((b.1 - a.1).to_radians(), (b.0 - a.0).to_radians());
    let h = (dlat / 2.0).sin().powi(2) + lat1.cos() * lat2.cos() * (dlng / 2.0).sin().powi(2);
    2.0 * h.sqrt().min(1.0).asin() * EARTH_RADIUS_M
}

/// The brute-force nearest ten: every point's haversine distance from `CENTER` computed by the
/// expression language, then a top-10 sort (ties by `_id`, which is insertion order).
fn brute_nearest() -> Vec<Document> {
    let coord = |i: i32| doc! { "$arrayElemAt": ["$loc.coordinates", i] };
    let half_delta = |i: i32, c: f64| {
        doc! { "$sin": { "$divide": [{ "$degreesToRadians": { "$subtract": [coord(i), c] } }, 2.0] } }
    };
    let h = doc! { "$add": [
        { "$pow": [half_delta(1, CENTER.1), 2] },
        { "$multiply": [
            CENTER.1.to_radians().cos(),
            { "$cos": { "$degreesToRadians": coord(1) } },
            { "$pow": [half_delta(0, CENTER.0), 2] },
        ] },
    ] };
    let d = doc! { "$multiply": [2.0 * EARTH_RADIUS_M, { "$asin": { "$sqrt": { "$min": [h, 1.0] } } }] };
    vec![
        doc! { "$project": { "d": d } },
        doc! { "$sort": { "d": 1, "_id": 1 } },
        doc! { "$limit": 10 },
        doc! { "$project": { "_id": 1 } },
    ]
}

fn point(p: (f64, f64)) -> Document {
    doc! { "type": "Point", "coordinates": [p.0, p.1] }
}

/// The comparisons: label, indexed side, brute-force side (run with `$natural`), check.
fn cases() -> Vec<(&'static str, Query, Query, Check)> {
    let near = doc! { "loc": { "$near": { "$geometry": point(CENTER) } } };
    let square = [
        (4.0, 44.0),
        (5.0, 44.0),
        (5.0, 45.0),
        (4.0, 45.0),
        (4.0, 44.0),
    ];
    let ring: Vec<Bson> = square
        .iter()
        .map(|&(x, y)| Bson::from(vec![x, y]))
        .collect();
    let polygon = doc! { "loc": { "$geoWithin": { "$geometry": { "type": "Polygon", "coordinates": [ring] } } } };
    // A cap of 0.474 degrees of arc: ~0.71 square degrees, ~1% of the region's ~70.7.
    let sphere = doc! { "loc": { "$geoWithin": { "$centerSphere": [[2.5, 47.5], 0.474_f64.to_radians()] } } };
    let geo_near = vec![
        doc! { "$geoNear": { "near": point(CENTER), "distanceField": "d", "key": "loc" } },
        doc! { "$limit": 10 },
        doc! { "$project": { "_id": 1 } },
    ];
    let find = |filter: &Document, limit| Query::Find {
        filter: filter.clone(),
        limit,
    };
    vec![
        (
            "$near limit 10",
            find(&near, Some(10)),
            Query::Aggregate(brute_nearest()),
            Check::Nearest,
        ),
        (
            "$geoWithin polygon ~1%",
            find(&polygon, None),
            find(&polygon, None),
            Check::SameSet,
        ),
        (
            "$geoWithin $centerSphere ~1%",
            find(&sphere, None),
            find(&sphere, None),
            Check::SameSet,
        ),
        (
            "$geoNear + $limit 10",
            Query::Aggregate(geo_near),
            Query::Aggregate(brute_nearest()),
            Check::Nearest,
        ),
    ]
}

/// Whether the two answers agree; nearest lists may swap points at (nearly) equal distances.
fn agree(a: &[i64], b: &[i64], check: Check, coords: &[(f64, f64)]) -> Result<()> {
    ensure!(a.len() == b.len(), "{} ids against {}", a.len(), b.len());
    match check {
        Check::SameSet => {
            let (mut a, mut b) = (a.to_vec(), b.to_vec());
            a.sort_unstable();
            b.sort_unstable();
            ensure!(a == b, "different ids");
        }
        Check::Nearest => {
            let dist = |id: i64| coords.get(id as usize).map(|&p| haversine_m(CENTER, p));
            for (x, y) in a.iter().zip(b) {
                let (Some(dx), Some(dy)) = (dist(*x), dist(*y)) else {
                    bail!("unknown id {x} or {y}");
                };
                ensure!(
                    x == y || (dx - dy).abs() < 1e-6,
                    "id {x} at {dx} m against {y} at {dy} m"
                );
            }
        }
    }
    Ok(())
}

async fn load(db: &mongodb::Database, points: usize) -> Result<Vec<(f64, f64)>> {
    let c = db.collection::<Document>("points");
    let mut rng = StdRng::seed_from_u64(18);
    let (mut coords, mut batch) = (Vec::with_capacity(points), Vec::with_capacity(1000));
    let t0 = Instant::now();
    for i in 0..points {
        let p = (
            rng.random_range(LNG.0..LNG.1),
            rng.random_range(LAT.0..LAT.1),
        );
        coords.push(p);
        batch.push(doc! { "_id": i as i64, "loc": point(p) });
        if batch.len() == 1000 {
            c.insert_many(std::mem::take(&mut batch)).await?;
        }
    }
    if !batch.is_empty() {
        c.insert_many(batch).await?;
    }
    let loaded = t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    db.run_command(doc! { "createIndexes": "points", "indexes": [{ "key": { "loc": "2dsphere" }, "name": "loc_2dsphere" }] })
        .await?;
    let built = t0.elapsed().as_secs_f64();
    println!(
        "{points} points loaded in {loaded:.1} s; 2dsphere index built in {built:.1} s ({:.0} docs/s)",
        points as f64 / built
    );
    Ok(coords)
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let (_server, uri) = match &cli.uri {
        Some(u) => (None, u.clone()),
        None => {
            let bin = match &cli.cairn {
                Some(b) => b.clone(),
                None => std::env::current_exe()?
                    .with_file_name("cairn")
                    .display()
                    .to_string(),
            };
            let s = cairn_e2e::Server::start(&bin, &[]);
            let uri = s.uri();
            (Some(s), uri)
        }
    };
    let client = mongodb::Client::with_uri_str(&uri).await?;
    let db = client.database("geobench");
    db.drop().await?;
    let coords = load(&db, cli.points).await?;
    let c = db.collection::<Document>("points");
    for (label, indexed, brute, check) in cases() {
        let (mut index_ms, mut brute_ms, mut hits) = (Vec::new(), Vec::new(), 0);
        for _ in 0..cli.runs {
            let (a, t) = timed(&c, &indexed, false).await?;
            index_ms.push(t);
            let (b, t) = timed(&c, &brute, true).await?;
            brute_ms.push(t);
            if let Err(e) = agree(&a, &b, check, &coords) {
                bail!("{label}: the index and brute force disagree: {e}");
            }
            hits = a.len();
        }
        let (i, b) = (
            median(&index_ms).unwrap_or(f64::NAN),
            median(&brute_ms).unwrap_or(f64::NAN),
        );
        println!(
            "{label}: {hits} hits; index median {i:.2} ms; brute force median {b:.2} ms; brute/index = {:.1}",
            b / i
        );
    }
    Ok(())
}
