//! Proves the plan cache never changes a result and answers `$planCacheStats`, `planCacheClear`
//! and explain's `isCached`/`queryHash`/`planCacheKey` as mongod does. How: a real `cairn`
//! process, seeded random queries of a few shapes (run warm from the cache, and as collection
//! scans) between random writes and index changes, results compared as sets.

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code, winning};
use futures_util::TryStreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");
const DOCS: i32 = 1500;
const QUERIES: usize = 300;

fn seed() -> u64 {
    let seed = std::env::var("CAIRN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("CAIRN_SEED={seed}");
    seed
}

fn random_doc(rng: &mut StdRng, id: i32) -> Document {
    let mut d = doc! { "_id": id, "a": rng.random_range(0..20), "b": rng.random_range(0..50) };
    if rng.random_bool(0.2) {
        d.insert("a", Bson::Null);
    }
    if rng.random_bool(0.1) {
        d.insert("b", vec![rng.random_range(0..50), rng.random_range(0..50)]);
    }
    d.insert("s", format!("s{}", rng.random_range(0..5)));
    d
}

fn random_query(rng: &mut StdRng) -> (Document, Option<Document>) {
    let a = rng.random_range(-1..21);
    let b = rng.random_range(-1..51);
    let filter = match rng.random_range(0..6) {
        0 => doc! { "a": a },
        1 => doc! { "a": { "$gte": a }, "b": b },
        2 => doc! { "b": { "$in": [b, b + 1, Bson::Null] } },
        3 => doc! { "a": a, "b": { "$lt": b } },
        4 => doc! { "a": Bson::Null, "s": "s1" },
        _ => doc! { "$or": [ { "a": a }, { "b": b } ] },
    };
    let sort = rng.random_bool(0.3).then(|| doc! { "b": 1 });
    (filter, sort)
}

async fn ids(
    coll: &mongodb::Collection<Document>,
    filter: Document,
    sort: Option<Document>,
    natural: bool,
) -> Vec<Bson> {
    let mut find = coll.find(filter);
    if let Some(s) = sort {
        find = find.sort(s);
    }
    if natural {
        find = find.hint(mongodb::options::Hint::Keys(doc! { "$natural": 1 }));
    }
    let docs: Vec<Document> = find.await.unwrap().try_collect().await.unwrap();
    let mut out: Vec<Bson> = docs
        .iter()
        .map(|d| d.get("_id").cloned().unwrap_or(Bson::Null))
        .collect();
    out.sort_by_key(|b| b.as_i32());
    out
}

async fn cache_entries(db: &mongodb::Database, coll: &str) -> Vec<Document> {
    let cursor = db
        .collection::<Document>(coll)
        .aggregate([doc! { "$planCacheStats": {} }])
        .await
        .unwrap();
    cursor.try_collect().await.unwrap()
}

#[tokio::test]
async fn cached_plans_never_change_results() {
    let mut rng = StdRng::seed_from_u64(seed());
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("pc");
    let coll = db.collection::<Document>("c");
    let docs: Vec<Document> = (0..DOCS).map(|i| random_doc(&mut rng, i)).collect();
    coll.insert_many(docs).await.unwrap();
    for keys in [doc! { "a": 1 }, doc! { "b": 1 }, doc! { "a": 1, "b": 1 }] {
        coll.create_index(mongodb::IndexModel::builder().keys(keys).build())
            .await
            .unwrap();
    }
    let mut next_id = DOCS;
    for q in 0..QUERIES {
        let (filter, sort) = random_query(&mut rng);
        let warm = ids(&coll, filter.clone(), sort.clone(), false).await;
        let again = ids(&coll, filter.clone(), sort.clone(), false).await;
        let scanned = ids(&coll, filter.clone(), sort.clone(), true).await;
        assert_eq!(warm, scanned, "query {q}: {filter} (first run)");
        assert_eq!(again, scanned, "query {q}: {filter} (from the cache)");
        match rng.random_range(0..10) {
            0 => {
                coll.insert_one(random_doc(&mut rng, next_id))
                    .await
                    .unwrap();
                next_id += 1;
            }
            1 => {
                let id = rng.random_range(0..next_id);
                coll.update_one(
                    doc! { "_id": id },
                    doc! { "$set": { "a": rng.random_range(0..20) } },
                )
                .await
                .unwrap();
            }
            2 => {
                coll.delete_one(doc! { "_id": rng.random_range(0..next_id) })
                    .await
                    .unwrap();
            }
            3 if q % 50 == 3 => {
                // An index change: entries made with the old set are not used again.
                let _ = coll.drop_index("a_1_b_1").await;
                coll.create_index(
                    mongodb::IndexModel::builder()
                        .keys(doc! { "a": 1, "b": 1 })
                        .build(),
                )
                .await
                .unwrap();
            }
            _ => {}
        }
    }
    assert!(
        !cache_entries(&db, "c").await.is_empty(),
        "nothing was cached"
    );
}

#[tokio::test]
async fn plan_cache_commands_and_explain() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("pc2");
    let coll = db.collection::<Document>("c");
    let docs: Vec<Document> = (0..200)
        .map(|i| doc! { "_id": i, "a": i % 10, "b": i % 7 })
        .collect();
    coll.insert_many(docs).await.unwrap();
    for keys in [doc! { "a": 1 }, doc! { "b": 1 }] {
        coll.create_index(mongodb::IndexModel::builder().keys(keys).build())
            .await
            .unwrap();
    }
    let explain = async |filter: Document| {
        db.run_command(
            doc! { "explain": { "find": "c", "filter": filter }, "verbosity": "queryPlanner" },
        )
        .await
        .unwrap()
    };
    let e = explain(doc! { "a": 3, "b": 2 }).await;
    assert!(!winning(&e).get_bool("isCached").unwrap());
    let qp = e.get_document("queryPlanner").unwrap();
    let hash = qp.get_str("queryHash").unwrap().to_string();
    let key = qp.get_str("planCacheKey").unwrap().to_string();
    assert_eq!(hash.len(), 8);
    // Explain does not add entries.
    assert!(cache_entries(&db, "c").await.is_empty());

    let _: Vec<Document> = coll
        .find(doc! { "a": 3, "b": 2 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let entries = cache_entries(&db, "c").await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    assert_eq!(entry.get_str("queryHash").unwrap(), hash);
    assert_eq!(entry.get_str("planCacheKey").unwrap(), key);
    assert!(entry.get_bool("isActive").unwrap());
    assert_eq!(
        entry
            .get_document("createdFromQuery")
            .unwrap()
            .get_document("query")
            .unwrap(),
        &doc! { "a": 3, "b": 2 }
    );

    // The same shape with other values comes from the cache and hashes alike.
    let e = explain(doc! { "a": 5, "b": 1 }).await;
    assert!(winning(&e).get_bool("isCached").unwrap());
    assert_eq!(
        e.get_document("queryPlanner")
            .unwrap()
            .get_str("queryHash")
            .unwrap(),
        hash
    );
    // Another shape does not.
    let e = explain(doc! { "a": { "$gt": 5 }, "b": 1 }).await;
    assert!(!winning(&e).get_bool("isCached").unwrap());

    // planCacheClear of another shape keeps the entry; of this shape, or of all, drops it.
    db.run_command(doc! { "planCacheClear": "c", "query": { "b": 1 } })
        .await
        .unwrap();
    assert_eq!(cache_entries(&db, "c").await.len(), 1);
    db.run_command(doc! { "planCacheClear": "c", "query": { "a": 9, "b": 9 } })
        .await
        .unwrap();
    assert!(cache_entries(&db, "c").await.is_empty());
    let _: Vec<Document> = coll
        .find(doc! { "a": 3, "b": 2 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    db.run_command(doc! { "planCacheClear": "c" })
        .await
        .unwrap();
    assert!(cache_entries(&db, "c").await.is_empty());

    // A new index changes the planCacheKey (not the queryHash) and retires the entry.
    let _: Vec<Document> = coll
        .find(doc! { "a": 3, "b": 2 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    coll.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! { "a": 1, "b": 1 })
            .build(),
    )
    .await
    .unwrap();
    let e = explain(doc! { "a": 3, "b": 2 }).await;
    let qp = e.get_document("queryPlanner").unwrap();
    assert_eq!(qp.get_str("queryHash").unwrap(), hash);
    assert_ne!(qp.get_str("planCacheKey").unwrap(), key);
    assert!(!winning(&e).get_bool("isCached").unwrap());
}

/// The index a plan reads (`indexName` of its IXSCAN), or its leaf stage when it reads none.
fn plan_index(plan: &Document) -> String {
    if let Ok(name) = plan.get_str("indexName") {
        return name.to_string();
    }
    match plan.get_document("inputStage") {
        Ok(input) => plan_index(input),
        Err(_) => plan.get_str("stage").unwrap_or("?").to_string(),
    }
}

#[tokio::test]
async fn index_filters_steer_the_planner_and_show_in_explain() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("pc3");
    let coll = db.collection::<Document>("c");
    // `a` is unique, `b` has two values: left alone the planner picks a_1 for {a, b}.
    let docs: Vec<Document> = (0..300)
        .map(|i| doc! { "_id": i, "a": i, "b": i % 2 })
        .collect();
    coll.insert_many(docs).await.unwrap();
    for keys in [doc! { "a": 1 }, doc! { "b": 1 }] {
        coll.create_index(mongodb::IndexModel::builder().keys(keys).build())
            .await
            .unwrap();
    }
    let explain = async |filter: Document, hint: Option<Document>| {
        let mut find = doc! { "find": "c", "filter": filter };
        if let Some(h) = hint {
            find.insert("hint", h);
        }
        let e = db
            .run_command(doc! { "explain": find, "verbosity": "queryPlanner" })
            .await
            .unwrap();
        let filtered = e
            .get_document("queryPlanner")
            .unwrap()
            .get_bool("indexFilterSet")
            .unwrap();
        (plan_index(winning(&e)), filtered)
    };
    let count = async |filter: Document| coll.count_documents(filter).await.unwrap();
    assert_eq!(
        explain(doc! { "a": 7, "b": 1 }, None).await,
        ("a_1".into(), false)
    );

    db.run_command(
        doc! { "planCacheSetFilter": "c", "query": { "a": 1, "b": 1 }, "indexes": ["b_1"] },
    )
    .await
    .unwrap();
    // Any values of the shape plan with b_1 only; a hint is ignored, as mongod does.
    assert_eq!(
        explain(doc! { "a": 7, "b": 1 }, None).await,
        ("b_1".into(), true)
    );
    assert_eq!(
        explain(doc! { "a": 8, "b": 0 }, Some(doc! { "a": 1 })).await,
        ("b_1".into(), true)
    );
    assert_eq!(count(doc! { "a": 7, "b": 1 }).await, 1);
    // Another shape is not filtered.
    assert_eq!(explain(doc! { "a": 7 }, None).await, ("a_1".into(), false));

    // A filter whose indexes cannot serve the shape leaves the collection scan (by key pattern).
    db.run_command(
        doc! { "planCacheSetFilter": "c", "query": { "a": 1 }, "indexes": [{ "b": 1 }] },
    )
    .await
    .unwrap();
    assert_eq!(
        explain(doc! { "a": 7 }, None).await,
        ("COLLSCAN".into(), true)
    );
    assert_eq!(count(doc! { "a": 7 }).await, 1);
    let listed = db
        .run_command(doc! { "planCacheListFilters": "c" })
        .await
        .unwrap();
    assert_eq!(listed.get_array("filters").unwrap().len(), 2);

    // Clearing one shape leaves the other; clearing all restores the planner's own choice.
    db.run_command(doc! { "planCacheClearFilters": "c", "query": { "a": 99 } })
        .await
        .unwrap();
    assert_eq!(explain(doc! { "a": 7 }, None).await, ("a_1".into(), false));
    assert_eq!(
        explain(doc! { "a": 7, "b": 1 }, None).await,
        ("b_1".into(), true)
    );
    db.run_command(doc! { "planCacheClearFilters": "c" })
        .await
        .unwrap();
    assert_eq!(
        explain(doc! { "a": 7, "b": 1 }, None).await,
        ("a_1".into(), false)
    );
}

#[tokio::test]
async fn index_filters_key_on_projection_and_collation_and_go_with_the_collection() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("pc4");
    let coll = db.collection::<Document>("c");
    let setup = async || {
        let docs: Vec<Document> = (0..100).map(|i| doc! { "_id": i, "a": i }).collect();
        coll.insert_many(docs).await.unwrap();
        coll.create_index(mongodb::IndexModel::builder().keys(doc! { "a": 1 }).build())
            .await
            .unwrap();
    };
    setup().await;
    let filtered = async |extra: Document| {
        let mut find = doc! { "find": "c", "filter": { "a": 5 } };
        find.extend(extra);
        let e = db
            .run_command(doc! { "explain": find, "verbosity": "queryPlanner" })
            .await
            .unwrap();
        let planner = e.get_document("queryPlanner").unwrap();
        (
            plan_index(winning(&e)),
            planner.get_bool("indexFilterSet").unwrap(),
        )
    };
    let run = async |cmd: Document| db.run_command(cmd).await.map_err(|e| error_code(&e));
    let fr = doc! { "locale": "fr" };

    // A filter for one projection: that projection (and one needing the same fields) only.
    run(
        doc! { "planCacheSetFilter": "c", "query": { "a": 1 }, "projection": { "a": 1 },
        "indexes": ["_id_"] },
    )
    .await
    .unwrap();
    let proj = |p: Document| doc! { "projection": p };
    assert_eq!(
        filtered(proj(doc! { "a": 1 })).await,
        ("COLLSCAN".into(), true)
    );
    assert_eq!(
        filtered(proj(doc! { "_id": 1, "a": 1 })).await,
        ("COLLSCAN".into(), true)
    );
    assert_eq!(filtered(doc! {}).await, ("a_1".into(), false));
    assert_eq!(
        filtered(proj(doc! { "a": 1, "_id": 0 })).await,
        ("a_1".into(), false)
    );
    assert!(
        !filtered(doc! { "collation": fr.clone(), "projection": { "a": 1 } })
            .await
            .1
    );
    // A real find of that shape runs under the filter too (and still answers right).
    let found: Vec<Document> = coll
        .find(doc! { "a": 5 })
        .projection(doc! { "a": 1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(found, vec![doc! { "_id": 5, "a": 5 }]);

    // A filter for one collation: that collation only.
    run(
        doc! { "planCacheSetFilter": "c", "query": { "a": 1 }, "collation": fr.clone(),
        "indexes": [{ "_id": 1 }] },
    )
    .await
    .unwrap();
    assert_eq!(
        filtered(doc! { "collation": fr.clone() }).await,
        ("COLLSCAN".into(), true)
    );
    assert!(!filtered(doc! { "collation": { "locale": "de" } }).await.1);
    assert!(!filtered(doc! {}).await.1);

    // Listed with their projection and (normalised) collation; a filter without a collation
    // lists none.
    let listed = run(doc! { "planCacheListFilters": "c" }).await.unwrap();
    let filters = listed.get_array("filters").unwrap();
    assert_eq!(filters.len(), 2);
    let by_proj = filters[0].as_document().unwrap();
    assert_eq!(
        by_proj.get_document("projection").unwrap(),
        &doc! { "a": 1 }
    );
    assert!(!by_proj.contains_key("collation"));
    let by_coll = filters[1].as_document().unwrap();
    assert_eq!(by_coll.get_document("projection").unwrap(), &doc! {});
    let listed_collation = by_coll.get_document("collation").unwrap();
    assert_eq!(listed_collation.get_str("locale").unwrap(), "fr");
    assert_eq!(listed_collation.get_i32("strength").unwrap(), 3);

    // Clearing by shape: the collation's filter only, other values of the same shape.
    run(doc! { "planCacheClearFilters": "c", "query": { "a": 42 }, "collation": fr.clone() })
        .await
        .unwrap();
    assert!(!filtered(doc! { "collation": fr.clone() }).await.1);
    assert!(filtered(proj(doc! { "a": 1 })).await.1);
    let left = run(doc! { "planCacheListFilters": "c" }).await.unwrap();
    assert_eq!(left.get_array("filters").unwrap().len(), 1);

    // The arguments mongod refuses (BadValue unless said).
    let bad = [
        doc! { "planCacheSetFilter": "c", "query": { "a": 1 }, "collation": "fr",
        "indexes": ["a_1"] },
        doc! { "planCacheSetFilter": "c", "query": { "a": 1 }, "collation": {},
        "indexes": ["a_1"] },
        doc! { "planCacheSetFilter": "c", "query": { "a": 1 }, "projection": 1,
        "indexes": ["a_1"] },
        doc! { "planCacheClearFilters": "c", "projection": { "a": 1 } },
        doc! { "planCacheClearFilters": "c", "collation": fr.clone() },
        doc! { "planCacheClearFilters": "c", "query": { "a": 1 }, "collation": 5 },
    ];
    for cmd in bad {
        assert_eq!(run(cmd.clone()).await.unwrap_err(), 2, "{cmd}");
    }
    let unknown_field = doc! { "planCacheSetFilter": "c", "query": { "a": 1 },
    "collation": { "locale": "fr", "bogus": 1 }, "indexes": ["a_1"] };
    assert_eq!(run(unknown_field).await.unwrap_err(), 40415);
    let no_locale = doc! { "planCacheSetFilter": "c", "query": { "a": 1 },
    "collation": { "strength": 1 }, "indexes": ["a_1"] };
    assert_eq!(run(no_locale).await.unwrap_err(), 40414);
    assert_eq!(
        left,
        run(doc! { "planCacheListFilters": "c" }).await.unwrap()
    );

    // A dropped collection's filters go with it: the new one of the same name has none.
    coll.drop().await.unwrap();
    setup().await;
    let after = run(doc! { "planCacheListFilters": "c" }).await.unwrap();
    assert!(after.get_array("filters").unwrap().is_empty());
    assert_eq!(filtered(proj(doc! { "a": 1 })).await, ("a_1".into(), false));

    // A collection that does not exist has no filters to set; a rename takes them along.
    let set_a = |coll: &str| {
        doc! { "planCacheSetFilter": coll, "query": { "a": 1 },
        "indexes": ["_id_"] }
    };
    assert_eq!(run(set_a("nope")).await.unwrap_err(), 2);
    run(set_a("c")).await.unwrap();
    client
        .database("admin")
        .run_command(doc! { "renameCollection": "pc4.c", "to": "pc4.moved" })
        .await
        .unwrap();
    let moved = run(doc! { "planCacheListFilters": "moved" }).await.unwrap();
    assert_eq!(moved.get_array("filters").unwrap().len(), 1);
    setup().await;
    let fresh = run(doc! { "planCacheListFilters": "c" }).await.unwrap();
    assert!(fresh.get_array("filters").unwrap().is_empty());

    // And with their database.
    run(doc! { "planCacheSetFilter": "c", "query": { "a": 1 }, "indexes": ["_id_"] })
        .await
        .unwrap();
    db.drop().await.unwrap();
    setup().await;
    let after = run(doc! { "planCacheListFilters": "c" }).await.unwrap();
    assert!(after.get_array("filters").unwrap().is_empty());
}
