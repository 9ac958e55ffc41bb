//! Proves the planner uses indexes where mongod would, explains itself in mongod's shapes, and
//! that indexed answers equal collection-scan answers (unique, sparse, partial, multikey, random
//! filters); and that the TTL monitor expires documents through its index. How: a real `cairn`
//! process, the Rust driver, `explain`, and `hint: {$natural: 1}` as the scan reference.

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, explain, winning};
use futures_util::TryStreamExt;
use rand::{Rng, SeedableRng};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

/// The access stage under FETCH/SORT/LIMIT wrappers.
fn leaf(mut d: &Document) -> &Document {
    while let Ok(inner) = d.get_document("inputStage") {
        d = inner;
    }
    d
}

#[tokio::test]
async fn explain_shapes_and_index_choice() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("plan");
    let c = db.collection::<Document>("c");
    c.insert_many((0..2000).map(|i| doc! { "_id": i, "a": i % 100, "b": i, "tags": [i % 3, 10 + i % 5], "s": format!("k{i:05}") }))
        .await
        .unwrap();
    db.run_command(doc! { "createIndexes": "c", "indexes": [
        { "key": { "a": 1 }, "name": "a_1" },
        { "key": { "b": -1 }, "name": "b_-1" },
        { "key": { "tags": 1 }, "name": "tags_1" },
        { "key": { "a": 1, "b": 1 }, "name": "a_1_b_1" },
    ] })
    .await
    .unwrap();

    // Collection scan when nothing applies.
    let e = explain(&db, doc! { "find": "c", "filter": { "s": "k00010" } }).await;
    assert_eq!(winning(&e).get_str("stage").unwrap(), "COLLSCAN");
    let stats = e.get_document("executionStats").unwrap();
    assert_eq!(stats.get_i64("nReturned").unwrap(), 1);
    assert_eq!(stats.get_i64("totalDocsExamined").unwrap(), 2000);

    // Equality on an indexed field: FETCH over IXSCAN, few documents examined.
    let e = explain(&db, doc! { "find": "c", "filter": { "a": 7 } }).await;
    let w = winning(&e);
    assert_eq!(w.get_str("stage").unwrap(), "FETCH");
    let ix = leaf(w);
    assert_eq!(ix.get_str("stage").unwrap(), "IXSCAN");
    assert!(["a_1", "a_1_b_1"].contains(&ix.get_str("indexName").unwrap()));
    assert_eq!(
        ix.get_document("indexBounds")
            .unwrap()
            .get_array("a")
            .unwrap()[0]
            .as_str()
            .unwrap(),
        "[7, 7]"
    );
    let stats = e.get_document("executionStats").unwrap();
    assert_eq!(stats.get_i64("nReturned").unwrap(), 20);
    assert_eq!(stats.get_i64("totalDocsExamined").unwrap(), 20);
    assert!(
        !e.get_document("queryPlanner")
            .unwrap()
            .get_array("rejectedPlans")
            .unwrap()
            .is_empty()
    );

    // Compound equality + range picks the compound index.
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "a": 7, "b": { "$gte": 1000 } } },
    )
    .await;
    assert_eq!(leaf(winning(&e)).get_str("indexName").unwrap(), "a_1_b_1");
    assert_eq!(
        e.get_document("executionStats")
            .unwrap()
            .get_i64("totalKeysExamined")
            .unwrap(),
        10
    );

    // $in is several intervals; multikey index flagged.
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "tags": { "$in": [12, 14] } } },
    )
    .await;
    let ix = leaf(winning(&e));
    assert_eq!(ix.get_str("indexName").unwrap(), "tags_1");
    assert!(ix.get_bool("isMultiKey").unwrap());
    assert_eq!(
        e.get_document("executionStats")
            .unwrap()
            .get_i64("nReturned")
            .unwrap(),
        800
    );

    // Sort satisfied by a descending index read backward: no SORT stage.
    let e = explain(
        &db,
        doc! { "find": "c", "filter": {}, "sort": { "b": 1 }, "limit": 5 },
    )
    .await;
    let w = winning(&e);
    assert_eq!(w.get_str("stage").unwrap(), "LIMIT");
    let ix = leaf(w);
    assert_eq!(ix.get_str("indexName").unwrap(), "b_-1");
    assert_eq!(ix.get_str("direction").unwrap(), "backward");

    // hint by name and by key pattern; $natural forces a scan.
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "a": 7 }, "hint": "a_1_b_1" },
    )
    .await;
    assert_eq!(leaf(winning(&e)).get_str("indexName").unwrap(), "a_1_b_1");
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "a": 7 }, "hint": { "a": 1 } },
    )
    .await;
    assert_eq!(leaf(winning(&e)).get_str("indexName").unwrap(), "a_1");
    let e = db
        .run_command(doc! { "explain": { "find": "c", "hint": "nope" } })
        .await
        .unwrap_err();
    assert!(
        format!("{e:?}").contains("hint provided does not correspond to an existing index"),
        "{e}"
    );

    // _id equality.
    let e = explain(&db, doc! { "find": "c", "filter": { "_id": 5 } }).await;
    assert_eq!(winning(&e).get_str("stage").unwrap(), "IDHACK");
    // Explain of count, distinct, delete, update, findAndModify.
    for inner in [
        doc! { "count": "c", "query": { "a": 3 } },
        doc! { "distinct": "c", "key": "b", "query": { "a": 3 } },
        doc! { "delete": "c", "deletes": [ { "q": { "a": 3 }, "limit": 0 } ] },
        doc! { "update": "c", "updates": [ { "q": { "a": 3 }, "u": { "$set": { "x": 1 } } } ] },
        doc! { "findAndModify": "c", "query": { "a": 3 }, "remove": true },
    ] {
        let e = db
            .run_command(doc! { "explain": inner.clone(), "verbosity": "queryPlanner" })
            .await
            .unwrap();
        // A count on one indexed field reads keys only (COUNT_SCAN, see e2e_planner2).
        let stage = leaf(winning(&e)).get_str("stage").unwrap();
        assert!(
            ["IXSCAN", "COUNT_SCAN"].contains(&stage),
            "{inner}: {stage}"
        );
    }
    // Explain did not write.
    let n = db
        .run_command(doc! { "count": "c", "query": { "a": 3 } })
        .await
        .unwrap();
    assert_eq!(n.get_i32("n").unwrap(), 20);
}

#[tokio::test]
async fn sparse_and_partial_rules() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("plan");
    let c = db.collection::<Document>("sp");
    c.insert_many((0..300).map(|i| {
        if i % 3 == 0 {
            doc! { "_id": i }
        } else {
            doc! { "_id": i, "x": i % 10, "st": if i % 2 == 0 { "A" } else { "B" } }
        }
    }))
    .await
    .unwrap();
    db.run_command(doc! { "createIndexes": "sp", "indexes": [
        { "key": { "x": 1 }, "name": "x_sparse", "sparse": true },
        { "key": { "st": 1 }, "name": "st_partial", "partialFilterExpression": { "x": { "$gt": 5 } } },
    ] })
    .await
    .unwrap();
    // null matches missing fields: a sparse index cannot answer it.
    let e = explain(&db, doc! { "find": "sp", "filter": { "x": null } }).await;
    assert_eq!(winning(&e).get_str("stage").unwrap(), "COLLSCAN");
    assert_eq!(
        e.get_document("executionStats")
            .unwrap()
            .get_i64("nReturned")
            .unwrap(),
        100
    );
    let e = explain(&db, doc! { "find": "sp", "filter": { "x": 4 } }).await;
    assert_eq!(leaf(winning(&e)).get_str("indexName").unwrap(), "x_sparse");
    // The partial index only when the query implies its filter.
    let e = explain(&db, doc! { "find": "sp", "filter": { "st": "A" } }).await;
    assert_ne!(leaf(winning(&e)).get_str("stage").unwrap(), "IXSCAN");
    let e = explain(
        &db,
        doc! { "find": "sp", "filter": { "st": "A", "x": { "$gt": 5 } } },
    )
    .await;
    let ix = leaf(winning(&e));
    assert!(["st_partial", "x_sparse"].contains(&ix.get_str("indexName").unwrap()));
}

/// Random documents and random filters: every indexed answer equals the collection-scan answer.
#[tokio::test]
async fn indexed_answers_equal_scan_answers() {
    let seed: u64 = std::env::var("CAIRN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("CAIRN_SEED={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("plan");
    let c = db.collection::<Document>("rand");
    // `b` never holds an array: a compound index may hold at most one array field per document.
    let value = |rng: &mut rand::rngs::StdRng, arrays: bool| -> Bson {
        match rng.random_range(0..9) {
            5 if !arrays => Bson::Int32(7),
            0 => Bson::Null,
            1 => Bson::Int32(rng.random_range(-5..5)),
            2 => Bson::Int64(rng.random_range(-5..5)),
            3 => Bson::Double(rng.random_range(-5..5) as f64 + 0.5),
            4 => Bson::String(["a", "b", "c", ""][rng.random_range(0..4)].into()),
            5 => Bson::Array(
                (0..rng.random_range(0..3))
                    .map(|_| Bson::Int32(rng.random_range(-3..3)))
                    .collect(),
            ),
            6 => Bson::Boolean(rng.random()),
            7 => Bson::Document(doc! { "k": rng.random_range(0..3) }),
            _ => Bson::DateTime(bson::DateTime::from_millis(rng.random_range(-5..5) * 1000)),
        }
    };
    let docs: Vec<Document> = (0..400)
        .map(|i| {
            let mut d = doc! { "_id": i };
            if rng.random_bool(0.8) {
                d.insert("a", value(&mut rng, true));
            }
            if rng.random_bool(0.8) {
                d.insert("b", value(&mut rng, false));
            }
            d
        })
        .collect();
    c.insert_many(docs).await.unwrap();
    db.run_command(doc! { "createIndexes": "rand", "indexes": [
        { "key": { "a": 1 }, "name": "a_1" },
        { "key": { "b": -1 }, "name": "b_sparse", "sparse": true },
        { "key": { "a": 1, "b": 1 }, "name": "a_b" },
    ] })
    .await
    .unwrap();
    for round in 0..150 {
        let field = if rng.random_bool(0.5) { "a" } else { "b" };
        let op = ["$eq", "$gt", "$gte", "$lt", "$lte", "$in"][rng.random_range(0..6)];
        let v = if op == "$in" {
            Bson::Array(vec![value(&mut rng, true), value(&mut rng, true)])
        } else {
            value(&mut rng, true)
        };
        let mut filter = doc! { field: { op: v } };
        if rng.random_bool(0.3) {
            filter.insert(if field == "a" { "b" } else { "a" }, value(&mut rng, false));
        }
        let scan: Vec<Document> = c
            .find(filter.clone())
            .hint(mongodb::options::Hint::Keys(doc! { "$natural": 1 }))
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let mut indexed: Vec<Document> = c
            .find(filter.clone())
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let key = |d: &Document| d.get("_id").and_then(Bson::as_i32).unwrap_or(-1);
        indexed.sort_by_key(key);
        let mut scan_sorted = scan.clone();
        scan_sorted.sort_by_key(key);
        assert_eq!(
            indexed, scan_sorted,
            "round {round} seed {seed} filter {filter}"
        );
    }
}

/// The `_id`s left in a collection, in natural order.
async fn ids(c: &mongodb::Collection<Document>) -> Vec<i32> {
    let docs: Vec<Document> = c.find(doc! {}).await.unwrap().try_collect().await.unwrap();
    docs.iter().map(|d| d.get_i32("_id").unwrap()).collect()
}

/// `serverStatus.metrics.ttl`.
async fn ttl_stats(admin: &mongodb::Database) -> Document {
    let st = admin.run_command(doc! { "serverStatus": 1 }).await.unwrap();
    st.get_document("metrics")
        .unwrap()
        .get_document("ttl")
        .unwrap()
        .clone()
}

/// Wait (bounded, polling) until the TTL monitor has made two more passes.
async fn wait_for_two_passes(admin: &mongodb::Database) {
    let start = ttl_stats(admin).await.get_i64("passes").unwrap();
    for _ in 0..100 {
        if ttl_stats(admin).await.get_i64("passes").unwrap() >= start + 2 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn ttl_monitor_expires_through_the_index() {
    let server = Server::start(BIN, &["--setParameter", "ttlMonitorSleepSecs=1"]);
    let client = server.client().await;
    let db = client.database("ttl");
    let c = db.collection::<Document>("sessions");
    let now = bson::DateTime::now().timestamp_millis();
    c.insert_many(vec![
        doc! { "_id": 1, "at": bson::DateTime::from_millis(now - 3_600_000) },
        doc! { "_id": 2, "at": bson::DateTime::from_millis(now + 3_600_000) },
        doc! { "_id": 3, "at": "not a date" },
        doc! { "_id": 4, "at": [bson::DateTime::from_millis(now + 3_600_000), bson::DateTime::from_millis(now - 3_600_000)] },
        doc! { "_id": 5 },
    ])
    .await
    .unwrap();
    db.run_command(doc! { "createIndexes": "sessions", "indexes": [ { "key": { "at": 1 }, "name": "at_1", "expireAfterSeconds": 60 } ] })
        .await
        .unwrap();
    let admin = client.database("admin");
    // Wait (bounded) for two passes after the index exists.
    wait_for_two_passes(&admin).await;
    let left: Vec<i32> = ids(&c).await;
    assert_eq!(
        left,
        [2, 3, 5],
        "expired: the old date and the array whose earliest date is old"
    );
    assert_eq!(
        ttl_stats(&admin).await.get_i64("deletedDocuments").unwrap(),
        2
    );

    // collMod shortens expireAfterSeconds; the next passes expire the rest of the dates.
    let r = db
        .run_command(
            doc! { "collMod": "sessions", "index": { "name": "at_1", "expireAfterSeconds": 0 } },
        )
        .await
        .unwrap();
    assert_eq!(r.get_i64("expireAfterSeconds_old").unwrap(), 60);
    c.insert_one(doc! { "_id": 6, "at": bson::DateTime::from_millis(now - 1000) })
        .await
        .unwrap();
    wait_for_two_passes(&admin).await;
    let left: Vec<i32> = ids(&c).await;
    assert_eq!(left, [2, 3, 5]);
    let listed = db
        .run_command(doc! { "listIndexes": "sessions" })
        .await
        .unwrap();
    let specs = listed
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert_eq!(
        specs[1]
            .as_document()
            .unwrap()
            .get_i32("expireAfterSeconds")
            .unwrap(),
        0
    );
    // A hidden index is not used by the planner; unhiding brings it back.
    db.run_command(doc! { "collMod": "sessions", "index": { "name": "at_1", "hidden": true } })
        .await
        .unwrap();
    let e = db.run_command(doc! { "explain": { "find": "sessions", "filter": { "at": bson::DateTime::from_millis(now) } } }).await.unwrap();
    assert_eq!(winning(&e).get_str("stage").unwrap(), "COLLSCAN");
    let e = db
        .run_command(doc! { "collMod": "sessions", "index": { "name": "nope", "hidden": true } })
        .await
        .unwrap_err();
    assert!(format!("{e:?}").contains("IndexNotFound"), "{e:?}");
}
