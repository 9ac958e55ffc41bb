//! Proves wildcard indexes (`$**`, `a.$**`, `wildcardProjection`) answer exactly what a
//! collection scan answers, are used where mongod uses them (and not where it does not), explain
//! themselves with `$_path` bounds, refuse bad specs with mongod's codes and survive a restart;
//! compound wildcard indexes (`{t: 1, "a.$**": 1}`) too.
//! How: a real `cairn` process through the Rust driver; seeded random documents with nested
//! objects and arrays, a family of random single-path predicates, each run with the planner's
//! choice and with `hint: {$natural: 1}`.

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code, explain, winning};
use futures_util::TryStreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");
const NAMES: [&str; 3] = ["a", "b", "c"];
const PATHS: [&str; 8] = ["a", "b", "c", "a.b", "a.c", "b.a", "a.b.c", "c.a"];

fn random_scalar(rng: &mut StdRng) -> Bson {
    match rng.random_range(0..8) {
        0 => Bson::Int32(rng.random_range(0..6)),
        1 => Bson::Double(f64::from(rng.random_range(0..12)) / 2.0),
        2 => Bson::String(["x", "xy", "xz", "y", ""][rng.random_range(0..5)].into()),
        3 => Bson::Null,
        4 => Bson::Boolean(rng.random_bool(0.5)),
        5 => Bson::Int64(rng.random_range(0..6)),
        6 => Bson::Document(Document::new()),
        _ => Bson::Array(vec![]),
    }
}

fn random_value(rng: &mut StdRng, depth: u32) -> Bson {
    match rng.random_range(0..10) {
        0..=4 => random_scalar(rng),
        5 | 6 if depth < 3 => Bson::Document(random_object(rng, depth + 1)),
        7 | 8 if depth < 3 => {
            let n = rng.random_range(0..4);
            Bson::Array((0..n).map(|_| random_value(rng, depth + 1)).collect())
        }
        _ => random_scalar(rng),
    }
}

fn random_object(rng: &mut StdRng, depth: u32) -> Document {
    let mut d = Document::new();
    for name in NAMES {
        if rng.random_bool(0.6) {
            d.insert(name, random_value(rng, depth));
        }
    }
    d
}

/// A random single-path predicate and whether a wildcard index covering the path may answer it.
fn random_predicate(rng: &mut StdRng) -> (String, Document, bool) {
    let path = PATHS[rng.random_range(0..PATHS.len())].to_string();
    let scalar = loop {
        let v = random_scalar(rng);
        if !matches!(v, Bson::Null | Bson::Array(_) | Bson::Document(_)) {
            break v;
        }
    };
    let (cond, usable) = match rng.random_range(0..11) {
        0 => (scalar, true),
        1 => (Bson::Document(doc! { "$gt": scalar }), true),
        2 => (Bson::Document(doc! { "$gte": scalar }), true),
        3 => (Bson::Document(doc! { "$lt": scalar }), true),
        4 => (Bson::Document(doc! { "$lte": scalar }), true),
        5 => {
            let other = Bson::Int32(rng.random_range(0..6));
            (Bson::Document(doc! { "$in": [scalar, other] }), true)
        }
        6 => (Bson::Document(doc! { "$exists": true }), true),
        7 => (
            Bson::Document(doc! { "$regex": "^x", "$options": "" }),
            true,
        ),
        8 => (Bson::Document(Document::new()), true),
        9 => (
            Bson::Document(doc! { "$gt": 1, "$lt": Bson::Double(4.5) }),
            true,
        ),
        // What a wildcard index never answers.
        _ => match rng.random_range(0..4) {
            0 => (Bson::Null, false),
            1 => (Bson::Document(doc! { "$exists": false }), false),
            2 => (Bson::Document(doc! { "$ne": null }), false),
            _ => (Bson::Document(doc! { "b": 1 }), false),
        },
    };
    let mut filter = Document::new();
    filter.insert(path.clone(), cond);
    (path, filter, usable)
}

async fn find_ids(c: &mongodb::Collection<Document>, filter: Document, natural: bool) -> Vec<Bson> {
    let mut find = c.find(filter).sort(doc! { "_id": 1 });
    if natural {
        find = find.hint(mongodb::options::Hint::Keys(doc! { "$natural": 1 }));
    }
    let docs: Vec<Document> = find.await.unwrap().try_collect().await.unwrap();
    docs.into_iter()
        .map(|d| d.get("_id").cloned().unwrap())
        .collect()
}

/// The innermost stage of a plan tree.
fn leaf(plan: &Document) -> &Document {
    match plan.get_document("inputStage") {
        Ok(inner) => leaf(inner),
        Err(_) => plan,
    }
}

async fn winning_leaf(db: &mongodb::Database, coll: &str, filter: &Document) -> Document {
    let e = explain(db, doc! { "find": coll, "filter": filter.clone() }).await;
    leaf(winning(&e)).clone()
}

async fn seeded(db: &mongodb::Database, name: &str, seed: u64, n: i32) {
    let mut rng = StdRng::seed_from_u64(seed);
    let docs: Vec<Document> = (0..n)
        .map(|i| {
            let mut d = doc! { "_id": i };
            d.extend(random_object(&mut rng, 0));
            d
        })
        .collect();
    db.collection::<Document>(name)
        .insert_many(docs)
        .await
        .unwrap();
}

/// An index spec under test: collection name, spec, whether it covers a path.
type Case = (&'static str, Document, fn(&str) -> bool);

/// Index specs under test.
fn specs() -> Vec<Case> {
    vec![
        ("all", doc! { "key": { "$**": 1 }, "name": "w" }, |_| true),
        ("sub", doc! { "key": { "a.$**": 1 }, "name": "w" }, |p| {
            p == "a" || p.starts_with("a.")
        }),
        (
            "incl",
            doc! { "key": { "$**": 1 }, "name": "w", "wildcardProjection": { "a.b": 1, "c": 1 } },
            |p| p == "c" || p.starts_with("c.") || p == "a.b" || p.starts_with("a.b."),
        ),
        (
            "excl",
            doc! { "key": { "$**": 1 }, "name": "w", "wildcardProjection": { "b": 0, "a.c": 0 } },
            |p| !(p == "b" || p.starts_with("b.") || p == "a.c" || p.starts_with("a.c.")),
        ),
    ]
}

#[tokio::test]
async fn wildcard_index_matches_collection_scan() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("wild");
    for (i, (name, spec, covers)) in specs().into_iter().enumerate() {
        seeded(&db, name, 18 + i as u64, 400).await;
        db.run_command(doc! { "createIndexes": name, "indexes": [spec.clone()] })
            .await
            .unwrap();
        let c = db.collection::<Document>(name);
        let mut rng = StdRng::seed_from_u64(1800 + i as u64);
        let mut used = 0;
        for _ in 0..120 {
            let (path, filter, usable) = random_predicate(&mut rng);
            let indexed = find_ids(&c, filter.clone(), false).await;
            let scanned = find_ids(&c, filter.clone(), true).await;
            assert_eq!(indexed, scanned, "{name}: {filter}");
            let stage = winning_leaf(&db, name, &filter).await;
            // `$exists` under an exclusion cut below the path cannot use the index.
            let cut = name == "excl"
                && path == "a"
                && filter
                    .get_document(&path)
                    .is_ok_and(|d| d.contains_key("$exists"));
            if usable && covers(&path) && !cut {
                assert_eq!(
                    stage.get_str("stage").unwrap(),
                    "IXSCAN",
                    "{name}: {filter}"
                );
                assert_eq!(
                    stage.get_document("keyPattern").unwrap(),
                    &doc! { "$_path": 1, path.clone(): 1 }
                );
                let bounds = stage.get_document("indexBounds").unwrap();
                let shown = bounds.get_array("$_path").unwrap();
                assert_eq!(shown[0], Bson::String(format!("[\"{path}\", \"{path}\"]")));
                used += 1;
            } else {
                assert_eq!(
                    stage.get_str("stage").unwrap(),
                    "COLLSCAN",
                    "{name}: {filter}"
                );
            }
        }
        assert!(
            used > 10,
            "{name}: the index answered only {used} predicates"
        );
    }
}

#[tokio::test]
async fn wildcard_explain_multikey_and_sort() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("wild");
    let c = db.collection::<Document>("m");
    c.insert_many(vec![
        doc! { "_id": 1, "a": [1, 5], "s": 3, "o": { "p": 2 } },
        doc! { "_id": 2, "a": 3, "s": 1, "o": { "p": [4] } },
        doc! { "_id": 3, "s": 2 },
    ])
    .await
    .unwrap();
    c.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! { "$**": 1 })
            .build(),
    )
    .await
    .unwrap();

    // `a` is multikey: the two ranges are not intersected, the answer stays right.
    let filter = doc! { "a": { "$gt": 2, "$lt": 4 } };
    assert_eq!(
        find_ids(&c, filter.clone(), false).await,
        vec![Bson::Int32(1), Bson::Int32(2)]
    );
    let stage = winning_leaf(&db, "m", &filter).await;
    assert!(stage.get_bool("isMultiKey").unwrap());
    assert_eq!(
        stage.get_document("multiKeyPaths").unwrap(),
        &doc! { "$_path": [], "a": ["a"] }
    );
    assert_eq!(
        stage
            .get_document("indexBounds")
            .unwrap()
            .get_array("a")
            .unwrap()
            .len(),
        1
    );

    // `s` is not multikey: its ranges intersect and the scan gives the sort.
    let e = explain(
        &db,
        doc! { "find": "m", "filter": { "s": { "$gte": 1, "$lte": 2 } }, "sort": { "s": -1 } },
    )
    .await;
    let plan = winning(&e);
    assert_ne!(plan.get_str("stage").unwrap(), "SORT", "{plan}");
    let stage = leaf(plan);
    assert!(!stage.get_bool("isMultiKey").unwrap());
    assert_eq!(stage.get_str("direction").unwrap(), "backward");
    assert_eq!(
        stage.get_document("indexBounds").unwrap(),
        &doc! { "$_path": ["[\"s\", \"s\"]"], "s": ["[1, 2]"] }
    );
    let sorted: Vec<Document> = c
        .find(doc! { "s": { "$gte": 1, "$lte": 2 } })
        .sort(doc! { "s": -1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        sorted
            .iter()
            .map(|d| d.get_i32("_id").unwrap())
            .collect::<Vec<_>>(),
        vec![3, 2]
    );

    // A sort over a path under an array (`o.p` in document 2) needs a SORT stage.
    let e = explain(
        &db,
        doc! { "find": "m", "filter": { "o.p": { "$gte": 0 } }, "sort": { "o.p": 1 } },
    )
    .await;
    assert_eq!(winning(&e).get_str("stage").unwrap(), "SORT");

    // No covered plan: the projection's field comes from the document, not the key.
    let e = explain(
        &db,
        doc! { "find": "m", "filter": { "s": 1 }, "projection": { "s": 1, "_id": 0 } },
    )
    .await;
    assert!(e.to_string().contains("FETCH"), "{e}");
}

#[tokio::test]
async fn wildcard_specs_list_and_errors() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("wild");
    db.create_collection("s").await.unwrap();
    for (bad, code) in [
        (
            doc! { "key": { "$**": 1 }, "name": "u", "unique": true },
            67,
        ),
        (
            doc! { "key": { "$**": 1 }, "name": "sp", "sparse": true },
            67,
        ),
        (
            doc! { "key": { "$**": 1 }, "name": "t", "expireAfterSeconds": 10 },
            67,
        ),
        (
            doc! { "key": { "a": 1 }, "name": "p", "wildcardProjection": { "a": 1 } },
            2,
        ),
        (
            doc! { "key": { "a.$**": 1 }, "name": "q", "wildcardProjection": { "a": 1 } },
            9,
        ),
        (
            doc! { "key": { "$**": 1 }, "name": "e", "wildcardProjection": {} },
            9,
        ),
        (
            doc! { "key": { "$**": 1 }, "name": "n", "wildcardProjection": 1 },
            14,
        ),
        (
            doc! { "key": { "$**": 1 }, "name": "m", "wildcardProjection": { "a": 1, "b": 0 } },
            31254,
        ),
        (
            doc! { "key": { "$**": 1 }, "wildcardProjection": { "a": 1 } },
            9,
        ),
    ] {
        let e = db
            .run_command(doc! { "createIndexes": "s", "indexes": [bad.clone()] })
            .await
            .unwrap_err();
        assert_eq!(error_code(&e), code, "{bad}");
    }
    db.run_command(doc! { "createIndexes": "s", "indexes": [
        { "key": { "$**": 1 }, "name": "w1", "wildcardProjection": { "a": 1 } },
        { "key": { "$**": 1 }, "name": "w2", "wildcardProjection": { "b": 1 } },
        { "key": { "x.$**": 1 }, "name": "x.$**_1" },
    ] })
    .await
    .unwrap();
    let list = db.run_command(doc! { "listIndexes": "s" }).await.unwrap();
    let batch = list
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    let by_name = |n: &str| {
        batch
            .iter()
            .filter_map(Bson::as_document)
            .find(|d| d.get_str("name").ok() == Some(n))
            .cloned()
            .unwrap()
    };
    assert_eq!(
        by_name("w1"),
        doc! { "v": 2, "key": { "$**": 1 }, "name": "w1", "wildcardProjection": { "a": 1 } }
    );
    assert_eq!(
        by_name("x.$**_1").get_document("key").unwrap(),
        &doc! { "x.$**": 1 }
    );
    // The same projection under another name conflicts (85).
    let e = db
        .run_command(doc! { "createIndexes": "s", "indexes": [
            { "key": { "$**": 1 }, "name": "w3", "wildcardProjection": { "a": 1 } },
        ] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 85);
}

#[tokio::test]
async fn wildcard_index_survives_restart() {
    let mut server = Server::start(BIN, &[]);
    let filter = doc! { "a.b": { "$gte": 2 } };
    let before = {
        let client = server.client().await;
        let db = client.database("wild");
        seeded(&db, "r", 7, 300).await;
        db.run_command(
            doc! { "createIndexes": "r", "indexes": [{ "key": { "$**": 1 }, "name": "w" }] },
        )
        .await
        .unwrap();
        // Writes after the build go through the live index.
        let c = db.collection::<Document>("r");
        c.insert_one(doc! { "_id": 1000, "a": { "b": [9, { "c": 1 }] } })
            .await
            .unwrap();
        c.delete_one(doc! { "_id": 3 }).await.unwrap();
        find_ids(&c, filter.clone(), false).await
    };
    server.restart_after_kill();
    let client = server.client().await;
    let db = client.database("wild");
    let c = db.collection::<Document>("r");
    assert_eq!(find_ids(&c, filter.clone(), false).await, before);
    assert_eq!(find_ids(&c, filter.clone(), true).await, before);
    assert!(before.contains(&Bson::Int32(1000)));
    assert_eq!(
        winning_leaf(&db, "r", &filter)
            .await
            .get_str("stage")
            .unwrap(),
        "IXSCAN"
    );
    let v = db.run_command(doc! { "validate": "r" }).await.unwrap();
    assert!(v.get_bool("valid").unwrap(), "{v}");
}

#[tokio::test]
async fn wildcard_index_serves_other_commands() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("wild");
    seeded(&db, "o", 5, 300).await;
    db.run_command(
        doc! { "createIndexes": "o", "indexes": [{ "key": { "$**": 1 }, "name": "w" }] },
    )
    .await
    .unwrap();
    let c = db.collection::<Document>("o");
    let filter = doc! { "a.b": { "$gte": 2 } };
    let expected = find_ids(&c, filter.clone(), true).await;
    assert!(!expected.is_empty());

    // Hinted by key pattern, through count, distinct and an aggregate's leading $match.
    let hinted: Vec<Document> = c
        .find(filter.clone())
        .hint(mongodb::options::Hint::Keys(doc! { "$**": 1 }))
        .sort(doc! { "_id": 1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(hinted.len(), expected.len());
    assert_eq!(
        c.count_documents(filter.clone()).await.unwrap(),
        expected.len() as u64
    );
    let mut ids = c.distinct("_id", filter.clone()).await.unwrap();
    ids.sort_by_key(|v| v.as_i32());
    assert_eq!(ids, expected);
    let agg: Vec<Document> = c
        .aggregate(vec![
            doc! { "$match": filter.clone() },
            doc! { "$sort": { "_id": 1 } },
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(agg.len(), expected.len());

    // `$or` of two wildcard paths: an index union.
    let or = doc! { "$or": [{ "a": 1 }, { "c.a": "x" }] };
    assert_eq!(
        find_ids(&c, or.clone(), false).await,
        find_ids(&c, or.clone(), true).await
    );
    let e = explain(&db, doc! { "find": "o", "filter": or }).await;
    assert!(e.to_string().contains("\"OR\""), "{e}");

    // A multi-update moving keys forward inside the scanned range changes each document once.
    let s = db.collection::<Document>("s");
    s.insert_many((0..50).map(|i| doc! { "_id": i, "n": { "v": i } }))
        .await
        .unwrap();
    db.run_command(
        doc! { "createIndexes": "s", "indexes": [{ "key": { "n.$**": 1 }, "name": "w" }] },
    )
    .await
    .unwrap();
    let r = s
        .update_many(
            doc! { "n.v": { "$gte": 0 } },
            doc! { "$inc": { "n.v": 10 } },
        )
        .await
        .unwrap();
    assert_eq!(r.modified_count, 50);
    let moved = find_ids(&s, doc! { "n.v": { "$gte": 10, "$lt": 60 } }, false).await;
    assert_eq!(moved.len(), 50);
    let gone = s.delete_many(doc! { "n.v": { "$lt": 35 } }).await.unwrap();
    assert_eq!(gone.deleted_count, 25);
    assert_eq!(
        find_ids(&s, doc! { "n.v": { "$exists": true } }, false)
            .await
            .len(),
        25
    );
}

/// Compound wildcard specs under test: collection name, spec, whether the wildcard term covers
/// a path.
fn compound_specs() -> Vec<Case> {
    vec![
        (
            "c_lead",
            doc! { "key": { "t": 1, "a.$**": 1 }, "name": "cw" },
            |p| p == "a" || p.starts_with("a."),
        ),
        (
            "c_trail",
            doc! { "key": { "$**": 1, "t": 1 }, "name": "cw", "wildcardProjection": { "t": 0, "n": 0 } },
            |p| p != "t" && p != "n",
        ),
        (
            "c_three",
            doc! { "key": { "t": 1, "$**": 1, "n": -1 }, "name": "cw", "wildcardProjection": { "a": 1, "c": 1 } },
            |p| p == "a" || p.starts_with("a.") || p == "c" || p.starts_with("c."),
        ),
    ]
}

/// A random predicate on the regular fields `t` and `n` (possibly none) added to `filter`.
fn with_regular_predicate(rng: &mut StdRng, mut filter: Document) -> Document {
    match rng.random_range(0..6) {
        0 => filter.insert("t", rng.random_range(0..4)),
        1 => filter.insert("t", doc! { "$in": [1, 3] }),
        2 => filter.insert("t", doc! { "$gte": 2 }),
        3 => filter.insert("t", Bson::Null),
        4 => filter.insert("n", doc! { "$lt": 5 }),
        _ => None,
    };
    filter
}

/// Seeded documents with the regular fields `t` (0..4, sometimes missing) and `n`.
async fn seeded_with_regular(db: &mongodb::Database, name: &str, seed: u64, n: i32) {
    let mut rng = StdRng::seed_from_u64(seed);
    let docs: Vec<Document> = (0..n)
        .map(|i| {
            let mut d = doc! { "_id": i };
            if rng.random_bool(0.9) {
                d.insert("t", rng.random_range(0..4));
            }
            d.insert("n", rng.random_range(0..10));
            // Some documents have nothing under the wildcard term.
            if rng.random_bool(0.85) {
                d.extend(random_object(&mut rng, 0));
            }
            d
        })
        .collect();
    db.collection::<Document>(name)
        .insert_many(docs)
        .await
        .unwrap();
}

#[tokio::test]
async fn compound_wildcard_index_matches_collection_scan() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("cwild");
    for (i, (name, spec, covers)) in compound_specs().into_iter().enumerate() {
        seeded_with_regular(&db, name, 180 + i as u64, 400).await;
        db.run_command(doc! { "createIndexes": name, "indexes": [spec.clone()] })
            .await
            .unwrap();
        let c = db.collection::<Document>(name);
        let mut rng = StdRng::seed_from_u64(18_000 + i as u64);
        let mut used = 0;
        for _ in 0..150 {
            let (path, filter, _) = random_predicate(&mut rng);
            let filter = with_regular_predicate(&mut rng, filter);
            let indexed = find_ids(&c, filter.clone(), false).await;
            let scanned = find_ids(&c, filter.clone(), true).await;
            assert_eq!(indexed, scanned, "{name}: {filter}");
            let stage = winning_leaf(&db, name, &filter).await;
            if stage.get_str("stage").unwrap() == "IXSCAN" {
                let key = stage.get_document("keyPattern").unwrap();
                assert!(key.contains_key("$_path"), "{name}: {filter}: {key}");
                assert!(covers(&path) || key.contains_key("t"), "{name}: {filter}");
                used += 1;
            }
        }
        assert!(
            used > 20,
            "{name}: the index answered only {used} predicates"
        );
    }
}

#[tokio::test]
async fn compound_wildcard_explain_and_errors() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("cwild");
    let c = db.collection::<Document>("e");
    c.insert_many(vec![
        doc! { "_id": 1, "t": 1, "attrs": { "color": "red", "size": [1, 2] } },
        doc! { "_id": 2, "t": 1, "attrs": { "color": "blue" } },
        doc! { "_id": 3, "t": 2, "attrs": { "color": "red" } },
        doc! { "_id": 4, "t": 1 },
    ])
    .await
    .unwrap();
    db.run_command(doc! { "createIndexes": "e", "indexes": [
        { "key": { "t": 1, "attrs.$**": 1 }, "name": "t_attrs" },
    ] })
    .await
    .unwrap();
    let filter = doc! { "t": 1, "attrs.color": "red" };
    assert_eq!(
        find_ids(&c, filter.clone(), false).await,
        vec![Bson::Int32(1)]
    );
    let stage = winning_leaf(&db, "e", &filter).await;
    assert_eq!(
        stage.get_document("keyPattern").unwrap(),
        &doc! { "t": 1, "$_path": 1, "attrs.color": 1 }
    );
    assert_eq!(
        stage.get_document("indexBounds").unwrap(),
        &doc! { "t": ["[1, 1]"], "$_path": ["[\"attrs.color\", \"attrs.color\"]"], "attrs.color": ["[\"red\", \"red\"]"] }
    );
    // The regular field alone uses the index too, every path of the tenant's keys; document 4
    // (nothing under `attrs`) is in the index.
    let filter = doc! { "t": 1 };
    assert_eq!(
        find_ids(&c, filter.clone(), false).await,
        vec![Bson::Int32(1), Bson::Int32(2), Bson::Int32(4)]
    );
    let stage = winning_leaf(&db, "e", &filter).await;
    assert_eq!(stage.get_str("stage").unwrap(), "IXSCAN");
    assert!(stage.get_bool("isMultiKey").unwrap());
    // A multikey path under the wildcard term.
    let filter = doc! { "t": 1, "attrs.size": { "$gt": 1, "$lt": 2 } };
    assert_eq!(
        find_ids(&c, filter.clone(), false).await,
        vec![Bson::Int32(1)]
    );
    let stage = winning_leaf(&db, "e", &filter).await;
    assert_eq!(
        stage.get_document("multiKeyPaths").unwrap(),
        &doc! { "t": [], "$_path": [], "attrs.size": ["attrs.size"] }
    );
    // An array in the regular field is refused.
    let e = c
        .insert_one(doc! { "_id": 5, "t": [1, 2], "attrs": { "color": "red" } })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 67);

    for bad in [
        doc! { "key": { "t": 1, "$**": 1 }, "name": "b1" },
        doc! { "key": { "t": 1, "$**": 1 }, "name": "b2", "wildcardProjection": { "t": 1 } },
        doc! { "key": { "attrs": 1, "attrs.$**": 1 }, "name": "b3" },
        doc! { "key": { "a.$**": 1, "b.$**": 1 }, "name": "b4" },
        doc! { "key": { "t": "hashed", "a.$**": 1 }, "name": "b5" },
        doc! { "key": { "t": 1, "a.$**": 1 }, "name": "b6", "unique": true },
    ] {
        let e = db
            .run_command(doc! { "createIndexes": "e", "indexes": [bad.clone()] })
            .await
            .unwrap_err();
        assert_eq!(error_code(&e), 67, "{bad}");
    }
    // A projection needs the `$**` term itself (FailedToParse, as mongod).
    let bad =
        doc! { "key": { "t": 1, "a.$**": 1 }, "name": "b7", "wildcardProjection": { "a": 1 } };
    let e = db
        .run_command(doc! { "createIndexes": "e", "indexes": [bad] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 9);
}
