//! Proves hashed and geospatial indexes answer exactly what a collection scan answers, use the
//! index where mongod does, explain themselves in mongod's shapes and refuse bad input with
//! mongod's codes. How: a real `cairn` process through the Rust driver; every indexed query is
//! compared with the same query under `hint: {$natural: 1}`.

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code, explain, winning};
use futures_util::TryStreamExt;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

async fn find_sorted(
    c: &mongodb::Collection<Document>,
    filter: Document,
    natural: bool,
) -> Vec<Document> {
    let mut find = c.find(filter).sort(doc! { "_id": 1 });
    if natural {
        find = find.hint(mongodb::options::Hint::Keys(doc! { "$natural": 1 }));
    }
    find.await.unwrap().try_collect().await.unwrap()
}

/// The innermost stage of a plan tree.
fn leaf(plan: &Document) -> &Document {
    match plan.get_document("inputStage") {
        Ok(inner) => leaf(inner),
        Err(_) => plan,
    }
}

fn hash(v: Bson) -> i64 {
    storage::hashed::hash64_bson(&v)
}

#[tokio::test]
async fn hashed_index_answers_equality() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("hashed");
    let c = db.collection::<Document>("h");
    let values = [
        Bson::Int32(1),
        Bson::Int64(1),
        Bson::Double(1.5),
        Bson::Double(2.0),
        Bson::String("x".into()),
        Bson::Null,
        Bson::Document(doc! { "k": 1 }),
        Bson::Boolean(true),
    ];
    let docs: Vec<Document> = (0..200)
        .map(|i| {
            let mut d = doc! { "_id": i, "b": i % 3 };
            if i % 9 != 0 {
                d.insert("a", values[i as usize % values.len()].clone());
            }
            d
        })
        .collect();
    c.insert_many(docs).await.unwrap();
    db.run_command(doc! { "createIndexes": "h", "indexes": [
        { "key": { "a": "hashed" }, "name": "a_hashed" },
        { "key": { "b": 1, "a": "hashed" }, "name": "b_1_a_hashed" },
    ] })
    .await
    .unwrap();

    for filter in [
        doc! { "a": 1 },
        doc! { "a": 2 },
        doc! { "a": "x" },
        doc! { "a": null },
        doc! { "a": { "k": 1 } },
        doc! { "a": { "$in": [1.5, "x", true] } },
        doc! { "b": 1, "a": "x" },
    ] {
        let indexed = find_sorted(&c, filter.clone(), false).await;
        let scanned = find_sorted(&c, filter.clone(), true).await;
        assert_eq!(indexed, scanned, "{filter}");
        assert!(!indexed.is_empty(), "{filter}");
        let e = explain(&db, doc! { "find": "h", "filter": filter.clone() }).await;
        let scan = leaf(winning(&e));
        assert_eq!(scan.get_str("stage").unwrap(), "IXSCAN", "{filter}");
    }

    let e = explain(
        &db,
        doc! { "find": "h", "filter": { "a": 1 }, "hint": "a_hashed" },
    )
    .await;
    let scan = leaf(winning(&e));
    let h = hash(Bson::Int32(1));
    assert_eq!(
        scan.get_document("indexBounds").unwrap(),
        &doc! { "a": [format!("[{h}, {h}]")] }
    );
    assert_eq!(
        scan.get_document("keyPattern").unwrap(),
        &doc! { "a": "hashed" }
    );

    // Ranges cannot use the hashed order.
    let e = explain(&db, doc! { "find": "h", "filter": { "a": { "$gt": 1 } } }).await;
    assert_eq!(leaf(winning(&e)).get_str("stage").unwrap(), "COLLSCAN");

    // Arrays are refused on insert and when an index is built over them.
    let err = c
        .insert_one(doc! { "_id": 1000, "a": [1, 2] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&err), 16766);
    let other = db.collection::<Document>("arrays");
    other.insert_one(doc! { "a": { "b": [1] } }).await.unwrap();
    let err = db
        .run_command(doc! { "createIndexes": "arrays", "indexes": [
        { "key": { "a.b": "hashed" }, "name": "ab" } ] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&err), 16766);

    let err = db
        .run_command(doc! { "createIndexes": "h", "indexes": [
        { "key": { "c": "hashed" }, "name": "u", "unique": true } ] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&err), 16764);
    let err = db
        .run_command(doc! { "createIndexes": "h", "indexes": [
        { "key": { "c": "hashed", "d": "hashed" }, "name": "two" } ] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&err), 31303);

    // Updates move entries: the old value is no longer found through the index.
    c.update_one(doc! { "_id": 1 }, doc! { "$set": { "a": "moved" } })
        .await
        .unwrap();
    let moved = find_sorted(&c, doc! { "a": "moved" }, false).await;
    assert_eq!(moved.len(), 1);
    let listed: Vec<Document> = c
        .list_indexes()
        .await
        .unwrap()
        .try_collect()
        .await
        .map(|v: Vec<mongodb::IndexModel>| v.into_iter().map(|m| m.keys).collect())
        .unwrap();
    assert!(listed.contains(&doc! { "a": "hashed" }));
}

fn seed() -> u64 {
    let seed = std::env::var("CAIRN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("CAIRN_SEED={seed}");
    seed
}

/// A random location: anywhere, or crowded near the antimeridian and the poles.
fn random_point(rng: &mut impl rand::Rng) -> (f64, f64) {
    match rng.random_range(0..4) {
        0 => (
            rng.random_range(-180.0..=180.0),
            rng.random_range(-90.0..=90.0),
        ),
        1 => (
            if rng.random_bool(0.5) { 179.0 } else { -179.0 }
                + rng.random_range(-1.0..1.0f64).clamp(-1.0, 1.0) * 0.99,
            rng.random_range(-10.0..10.0),
        ),
        2 => (
            rng.random_range(-180.0..=180.0),
            rng.random_range(85.0..=90.0),
        ),
        _ => (rng.random_range(-20.0..20.0), rng.random_range(-20.0..20.0)),
    }
}

fn random_box_polygon(rng: &mut impl rand::Rng) -> Bson {
    let (x, y) = random_point(rng);
    let (w, h) = (rng.random_range(0.5..30.0), rng.random_range(0.5..20.0));
    let (x0, x1) = ((x - w).max(-180.0), (x + w).min(180.0));
    let (y0, y1) = ((y - h).max(-90.0), (y + h).min(90.0));
    // A quadrilateral with one vertex pulled inward, so it is not a plain box.
    let mx = (x0 + x1) / 2.0;
    Bson::Document(doc! { "type": "Polygon", "coordinates": [[
        [x0, y0], [x1, y0], [x1, y1], [mx, (y0 + y1) / 2.0], [x0, y1], [x0, y0]
    ]] })
}

const EARTH_RADIUS_M: f64 = 6_378_100.0;

fn haversine_rad(a: (f64, f64), b: (f64, f64)) -> f64 {
    let (lat1, lat2) = (a.1.to_radians(), b.1.to_radians());
    let (dlat, dlng) = ((b.1 - a.1).to_radians(), (b.0 - a.0).to_radians());
    let h = (dlat / 2.0).sin().powi(2) + lat1.cos() * lat2.cos() * (dlng / 2.0).sin().powi(2);
    2.0 * h.sqrt().min(1.0).asin()
}

fn ids(docs: &[Document]) -> Vec<i32> {
    docs.iter().map(|d| d.get_i32("_id").unwrap()).collect()
}

#[tokio::test]
async fn sphere_index_answers_like_a_scan() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("sphere");
    let c = db.collection::<Document>("places");
    let mut points = Vec::new();
    let docs: Vec<Document> = (0..1500)
        .map(|i| {
            let p = random_point(&mut rng);
            points.push((i, p));
            let loc = match i % 3 {
                0 => Bson::Array(vec![Bson::Double(p.0), Bson::Double(p.1)]),
                _ => Bson::Document(doc! { "type": "Point", "coordinates": [p.0, p.1] }),
            };
            doc! { "_id": i, "loc": loc, "k": i % 4 }
        })
        .collect();
    c.insert_many(docs).await.unwrap();
    // Some shapes too: polygons and lines.
    let shapes: Vec<Document> = (0..100)
        .map(|i| {
            let shape = if i % 2 == 0 {
                random_box_polygon(&mut rng)
            } else {
                let (a, b) = (random_point(&mut rng), random_point(&mut rng));
                Bson::Document(doc! { "type": "LineString", "coordinates": [[a.0, a.1], [a.0 + (b.0 - a.0) * 0.01, a.1 + (b.1 - a.1) * 0.01]] })
            };
            doc! { "_id": 10_000 + i, "loc": shape, "k": i % 4 }
        })
        .collect();
    c.insert_many(shapes).await.unwrap();
    db.run_command(doc! { "createIndexes": "places", "indexes": [
        { "key": { "loc": "2dsphere" }, "name": "loc_2dsphere" },
        { "key": { "k": 1, "loc": "2dsphere" }, "name": "k_1_loc_2dsphere" },
    ] })
    .await
    .unwrap();

    for round in 0..40 {
        let center = random_point(&mut rng);
        let filter = match round % 4 {
            0 => doc! { "loc": { "$geoWithin": { "$geometry": random_box_polygon(&mut rng) } } },
            1 => {
                doc! { "loc": { "$geoWithin": { "$centerSphere": [[center.0, center.1], rng.random_range(0.001..0.5)] } } }
            }
            2 => {
                doc! { "loc": { "$geoIntersects": { "$geometry": random_box_polygon(&mut rng) } } }
            }
            _ => {
                doc! { "k": 1, "loc": { "$geoWithin": { "$geometry": random_box_polygon(&mut rng) } } }
            }
        };
        let indexed = find_sorted(&c, filter.clone(), false).await;
        let scanned = find_sorted(&c, filter.clone(), true).await;
        assert_eq!(ids(&indexed), ids(&scanned), "{filter}");
        let e = explain(&db, doc! { "find": "places", "filter": filter.clone() }).await;
        assert_eq!(
            leaf(winning(&e)).get_str("stage").unwrap(),
            "IXSCAN",
            "{filter}"
        );
    }

    // $near: nearest first, within the distances, equal to a brute-force ranking of the points.
    for round in 0..20 {
        let center = random_point(&mut rng);
        let max_m = rng.random_range(10_000.0..3_000_000.0);
        let min_m = if round % 2 == 0 { 0.0 } else { max_m / 4.0 };
        let filter = doc! { "loc": { "$near": {
        "$geometry": { "type": "Point", "coordinates": [center.0, center.1] },
        "$maxDistance": max_m, "$minDistance": min_m } }, "_id": { "$lt": 10_000 } };
        let got: Vec<Document> = c
            .find(filter.clone())
            .limit(50)
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let mut expected: Vec<(f64, i32)> = points
            .iter()
            .map(|(i, p)| (haversine_rad(center, *p) * EARTH_RADIUS_M, *i))
            .filter(|(d, _)| *d <= max_m && *d >= min_m)
            .collect();
        expected.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let expected: Vec<i32> = expected.into_iter().take(50).map(|(_, i)| i).collect();
        assert_eq!(ids(&got), expected, "{filter}");
    }
    nearest_few_like_all(&c, &mut rng).await;
}

/// `$near` and `$geoNear` with a small limit and no `$maxDistance` (the widening-cap search of
/// `exec::near`), with and without another predicate and a `$minDistance`, answer the first
/// documents of the same query without a limit (which reads every match; checked above
/// against a brute-force ranking).
async fn nearest_few_like_all(c: &mongodb::Collection<Document>, rng: &mut impl rand::Rng) {
    for round in 0..24 {
        let center = random_point(rng);
        let limit = rng.random_range(1..40usize);
        let min_m = if round % 3 == 0 { 200_000.0 } else { 0.0 };
        let near = doc! { "type": "Point", "coordinates": [center.0, center.1] };
        let mut filter =
            doc! { "loc": { "$near": { "$geometry": near.clone(), "$minDistance": min_m } } };
        let mut query = doc! {};
        if round % 2 == 1 {
            filter.insert("k", 1);
            query.insert("k", 1);
        }
        let all: Vec<Document> = c
            .find(filter.clone())
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let got: Vec<Document> = c
            .find(filter.clone())
            .limit(limit as i64)
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let expected: Vec<i32> = ids(&all).into_iter().take(limit).collect();
        assert_eq!(ids(&got), expected, "{filter} limit {limit}");
        let pipeline = vec![
            doc! { "$geoNear": { "near": near, "distanceField": "d", "minDistance": min_m,
            "key": "loc", "query": query } },
            doc! { "$limit": limit as i64 },
        ];
        let got: Vec<Document> = c
            .aggregate(pipeline.clone())
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(ids(&got), expected, "{pipeline:?}");
    }
}

#[tokio::test]
async fn sphere_errors_and_no_index() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("sphere_errors");
    let c = db.collection::<Document>("p");
    c.insert_many(vec![
        doc! { "_id": 1, "loc": [1.0, 1.0] },
        doc! { "_id": 2, "loc": [5.0, 5.0] },
    ])
    .await
    .unwrap();
    // $geoWithin and $geoIntersects need no index; $near does.
    let within = find_sorted(
        &c,
        doc! { "loc": { "$geoWithin": { "$centerSphere": [[1.0, 1.0], 0.01] } } },
        false,
    )
    .await;
    assert_eq!(ids(&within), vec![1]);
    let hit = find_sorted(
        &c,
        doc! { "loc": { "$geoIntersects": { "$geometry": { "type": "Polygon",
        "coordinates": [[[4, 4], [6, 4], [6, 6], [4, 6], [4, 4]]] } } } },
        false,
    )
    .await;
    assert_eq!(ids(&hit), vec![2]);
    let err = c
        .find(doc! { "loc": { "$near": [1.0, 1.0] } })
        .await
        .unwrap_err();
    assert_eq!(error_code(&err), 291);

    db.run_command(doc! { "createIndexes": "p", "indexes": [
    { "key": { "loc": "2dsphere" }, "name": "loc_2dsphere" } ] })
        .await
        .unwrap();
    let near: Vec<Document> = c
        .find(doc! { "loc": { "$nearSphere": [5.0, 5.0] } })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(ids(&near), vec![2, 1]);
    for bad in [
        doc! { "_id": 3, "loc": [200.0, 0.0] },
        doc! { "_id": 4, "loc": "here" },
        doc! { "_id": 5, "loc": { "type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1]]] } },
    ] {
        let err = c.insert_one(bad.clone()).await.unwrap_err();
        assert_eq!(error_code(&err), 16755, "{bad}");
    }
    // Documents without a location are not indexed and are still stored.
    c.insert_one(doc! { "_id": 6 }).await.unwrap();
    let listed = db.run_command(doc! { "listIndexes": "p" }).await.unwrap();
    let batch = listed
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    let sphere = batch
        .iter()
        .filter_map(Bson::as_document)
        .find(|d| d.get_str("name").ok() == Some("loc_2dsphere"))
        .unwrap();
    assert_eq!(sphere.get_i32("2dsphereIndexVersion").unwrap(), 3);
}

#[tokio::test]
async fn geo_near_stage() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("geonear");
    let c = db.collection::<Document>("p");
    c.insert_many(vec![
        doc! { "_id": 1, "loc": { "type": "Point", "coordinates": [0.0, 0.0] }, "t": "a" },
        doc! { "_id": 2, "loc": { "type": "Point", "coordinates": [0.0, 1.0] }, "t": "b" },
        doc! { "_id": 3, "loc": { "type": "Point", "coordinates": [0.0, 2.0] }, "t": "a" },
        doc! { "_id": 4, "loc": { "type": "Point", "coordinates": [0.0, 3.0] }, "t": "a" },
    ])
    .await
    .unwrap();
    let pipeline = vec![doc! { "$geoNear": {
        "near": { "type": "Point", "coordinates": [0.0, 0.1] },
        "distanceField": "dist.calculated", "spherical": true,
    } }];
    let err = c.aggregate(pipeline.clone()).await.unwrap_err();
    assert_eq!(error_code(&err), 27, "no geo index");
    db.run_command(doc! { "createIndexes": "p", "indexes": [
    { "key": { "loc": "2dsphere" }, "name": "loc_2dsphere" } ] })
        .await
        .unwrap();
    let got: Vec<Document> = c
        .aggregate(pipeline)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(ids(&got), vec![1, 2, 3, 4]);
    let d1 = got[0]
        .get_document("dist")
        .unwrap()
        .get_f64("calculated")
        .unwrap();
    let expected = haversine_rad((0.0, 0.1), (0.0, 0.0)) * EARTH_RADIUS_M;
    assert!(
        (d1 - expected).abs() < 1e-6 * expected,
        "{d1} vs {expected}"
    );

    let got: Vec<Document> = c
        .aggregate(vec![
            doc! { "$geoNear": {
                "near": [0.0, 2.9], "distanceField": "d", "spherical": true,
                "query": { "t": "a" }, "key": "loc", "includeLocs": "where",
                "distanceMultiplier": 6_378_100.0, "maxDistance": 0.04,
            } },
            doc! { "$project": { "d": 1, "where": 1 } },
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(ids(&got), vec![4, 3]);
    assert_eq!(
        got[0].get_document("where").unwrap(),
        &doc! { "type": "Point", "coordinates": [0.0, 3.0] }
    );
    let err = c
        .aggregate(vec![
            doc! { "$match": {} },
            doc! { "$geoNear": { "near": [0, 0], "distanceField": "d" } },
        ])
        .await
        .unwrap_err();
    assert_eq!(error_code(&err), 40602);
}

#[tokio::test]
async fn flat_index_answers_like_a_scan() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("flat");
    let c = db.collection::<Document>("p");
    let points: Vec<(i32, (f64, f64))> = (0..1000)
        .map(|i| {
            (
                i,
                (
                    rng.random_range(-100.0..100.0),
                    rng.random_range(-100.0..100.0),
                ),
            )
        })
        .collect();
    let docs: Vec<Document> = points
        .iter()
        .map(|(i, p)| match i % 2 {
            0 => doc! { "_id": i, "loc": [p.0, p.1] },
            _ => doc! { "_id": i, "loc": { "x": p.0, "y": p.1 } },
        })
        .collect();
    c.insert_many(docs).await.unwrap();
    db.run_command(doc! { "createIndexes": "p", "indexes": [
    { "key": { "loc": "2d" }, "name": "loc_2d", "min": -100, "max": 100, "bits": 20 } ] })
        .await
        .unwrap();
    for round in 0..30 {
        let (x, y) = (
            rng.random_range(-100.0..100.0),
            rng.random_range(-100.0..100.0),
        );
        let r = rng.random_range(1.0..40.0);
        let filter = match round % 4 {
            0 => {
                doc! { "loc": { "$geoWithin": { "$box": [[x - r, y - r / 2.0], [x + r, y + r]] } } }
            }
            1 => doc! { "loc": { "$geoWithin": { "$center": [[x, y], r] } } },
            2 => doc! { "loc": { "$geoWithin": { "$polygon": [[x, y], [x + r, y], [x, y + r]] } } },
            _ => {
                doc! { "loc": { "$geoWithin": { "$centerSphere": [[x / 2.0, y / 2.0], r / 100.0] } } }
            }
        };
        let indexed = find_sorted(&c, filter.clone(), false).await;
        let scanned = find_sorted(&c, filter.clone(), true).await;
        assert_eq!(ids(&indexed), ids(&scanned), "{filter}");
        let e = explain(&db, doc! { "find": "p", "filter": filter.clone() }).await;
        assert_eq!(
            leaf(winning(&e)).get_str("stage").unwrap(),
            "IXSCAN",
            "{filter}"
        );

        let filter = doc! { "loc": { "$near": [x, y], "$maxDistance": r } };
        let got: Vec<Document> = c
            .find(filter.clone())
            .limit(20)
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let mut expected: Vec<(f64, i32)> = points
            .iter()
            .map(|(i, p)| ((p.0 - x).hypot(p.1 - y), *i))
            .filter(|(d, _)| *d <= r)
            .collect();
        expected.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let expected: Vec<i32> = expected.into_iter().take(20).map(|(_, i)| i).collect();
        assert_eq!(ids(&got), expected, "{filter}");
    }
    let err = c
        .insert_one(doc! { "loc": [150.0, 0.0] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&err), 13027);
    let err = c
        .insert_one(doc! { "loc": { "type": "Point", "coordinates": [1.0, 1.0] } })
        .await
        .unwrap_err();
    assert_eq!(error_code(&err), 16804);
    let err = db
        .run_command(doc! { "createIndexes": "q", "indexes": [
        { "key": { "loc": "2d" }, "name": "b", "bits": 40 } ] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&err), 13028);
    let err = db
        .run_command(doc! { "createIndexes": "q", "indexes": [
        { "key": { "loc": "2d" }, "name": "m", "min": 5, "max": 5 } ] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&err), 13067);
}
