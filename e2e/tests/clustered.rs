//! Proves clustered collections as mongod 7.0 has them: create's checks and codes, the listCollections and listIndexes shapes, `_id` order, CLUSTERED_IXSCAN plans, TTL by `_id` date, collMod, and all of it across a SIGKILL.
//! How: a real `cairn` process driven by the official Rust driver; TTL passes are awaited through serverStatus (never a fixed sleep).

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code, explain, winning};
use futures_util::TryStreamExt;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

fn clustered(name: Option<&str>) -> Document {
    let mut d = doc! { "key": { "_id": 1 }, "unique": true };
    if let Some(n) = name {
        d.insert("name", n);
    }
    d
}

/// `_id`s of the documents `filter` finds, in the order they come.
async fn ids(c: &mongodb::Collection<Document>, filter: Document) -> Vec<Bson> {
    let docs: Vec<Document> = c.find(filter).await.unwrap().try_collect().await.unwrap();
    docs.iter().map(|d| d.get("_id").unwrap().clone()).collect()
}

async fn first_index(db: &mongodb::Database, coll: &str) -> Document {
    let listed = db.run_command(doc! { "listIndexes": coll }).await.unwrap();
    listed
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()[0]
        .as_document()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn create_checks_and_listings() {
    let server = Server::start(BIN, &[]);
    let db = server.client().await.database("cl");
    let ok = clustered(None);
    for (extra, code) in [
        (doc! { "clusteredIndex": { "key": { "_id": 1 } } }, 40414),
        (
            doc! { "clusteredIndex": { "key": { "_id": 1 }, "unique": false } },
            5979700,
        ),
        (
            doc! { "clusteredIndex": { "key": { "a": 1 }, "unique": true } },
            197,
        ),
        (
            doc! { "clusteredIndex": { "key": { "_id": 1 }, "unique": true, "x": 1 } },
            40415,
        ),
        (
            doc! { "clusteredIndex": { "key": { "_id": 1 }, "unique": true, "v": 9 } },
            5979704,
        ),
        (doc! { "clusteredIndex": true }, 5979703),
        (doc! { "clusteredIndex": 5 }, 5979702),
        (
            doc! { "clusteredIndex": false, "expireAfterSeconds": 5 },
            72,
        ),
        (doc! { "expireAfterSeconds": 5 }, 72),
        (
            doc! { "clusteredIndex": ok.clone(), "expireAfterSeconds": -10 },
            72,
        ),
        (
            doc! { "clusteredIndex": ok.clone(), "viewOn": "src", "pipeline": [] },
            6026500,
        ),
        (
            doc! { "clusteredIndex": ok.clone(), "autoIndexId": false },
            6026501,
        ),
        (doc! { "clusteredIndex": ok.clone(), "size": 10 }, 6049200),
        (doc! { "clusteredIndex": ok.clone(), "max": 10 }, 6049204),
    ] {
        let mut cmd = doc! { "create": "bad" };
        cmd.extend(extra.clone());
        let e = db.run_command(cmd).await.unwrap_err();
        assert_eq!(error_code(&e), code, "{extra}");
    }

    db.run_command(doc! { "create": "plain", "clusteredIndex": ok.clone() })
        .await
        .unwrap();
    let entry = cairn_e2e::collection_entry(&db, "plain").await;
    assert_eq!(
        entry.get_document("options").unwrap(),
        &doc! { "clusteredIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_", "unique": true } }
    );
    assert!(
        !entry.contains_key("idIndex"),
        "no separate _id index: {entry}"
    );
    assert_eq!(
        first_index(&db, "plain").await,
        doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_", "unique": true, "clustered": true }
    );

    let named = doc! { "key": { "_id": 1 }, "unique": true, "name": "by_id", "v": 2 };
    db.run_command(doc! { "create": "named", "clusteredIndex": named, "expireAfterSeconds": 30 })
        .await
        .unwrap();
    let options = cairn_e2e::collection_entry(&db, "named").await;
    let options = options.get_document("options").unwrap();
    assert_eq!(
        options
            .get_document("clusteredIndex")
            .unwrap()
            .get_str("name")
            .unwrap(),
        "by_id"
    );
    assert_eq!(options.get_i64("expireAfterSeconds").unwrap(), 30);
    assert_eq!(
        first_index(&db, "named").await,
        doc! { "v": 2, "key": { "_id": 1 }, "name": "by_id", "unique": true, "expireAfterSeconds": 30_i64, "clustered": true }
    );
    // createIndexes on the cluster key is a no-op, with or without `clustered: true`; the
    // option on another key is 6243700.
    for spec in [
        doc! { "key": { "_id": 1 }, "name": "_id_1" },
        doc! { "key": { "_id": 1 }, "name": "by_id", "unique": true, "clustered": true },
    ] {
        let r = db
            .run_command(doc! { "createIndexes": "named", "indexes": [spec.clone()] })
            .await
            .unwrap();
        assert_eq!(r.get_i32("numIndexesAfter").unwrap(), 1, "{spec}");
    }
    let e = db
        .run_command(doc! { "createIndexes": "named", "indexes": [ { "key": { "b": 1 }, "name": "b_1", "clustered": true, "unique": true } ] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 6243700);
    // The clustered index cannot be dropped by name, by `_id_` or by key.
    for index in [
        Bson::from("by_id"),
        Bson::from("_id_"),
        Bson::from(doc! { "_id": 1 }),
    ] {
        let e = db
            .run_command(doc! { "dropIndexes": "named", "index": index.clone() })
            .await
            .unwrap_err();
        assert_eq!(error_code(&e), 5979800, "{index}");
    }
    // Its name is a hint; the collection takes secondary indexes and duplicate `_id`s fail.
    let c = db.collection::<Document>("named");
    c.insert_many(vec![doc! { "_id": 2, "a": 1 }, doc! { "_id": 1, "a": 2 }])
        .await
        .unwrap();
    let e = c.insert_one(doc! { "_id": 1 }).await.unwrap_err();
    assert_eq!(error_code(&e), 11000);
    let hinted = db
        .run_command(doc! { "find": "named", "filter": {}, "hint": "by_id" })
        .await
        .unwrap();
    assert_eq!(
        hinted
            .get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap()
            .len(),
        2
    );
    db.run_command(
        doc! { "createIndexes": "named", "indexes": [ { "key": { "a": 1 }, "name": "a_1" } ] },
    )
    .await
    .unwrap();
    assert_eq!(ids(&c, doc! { "a": 2 }).await, vec![Bson::Int32(1)]);
}

#[tokio::test]
async fn documents_come_in_id_order_and_id_ranges_scan_it() {
    let server = Server::start(BIN, &[]);
    let db = server.client().await.database("cl");
    db.run_command(doc! { "create": "c", "clusteredIndex": clustered(None) })
        .await
        .unwrap();
    let c = db.collection::<Document>("c");
    // Inserted out of order: 37 is coprime with 100, so this visits every value once.
    let docs: Vec<Document> = (0..100)
        .map(|i| doc! { "_id": (i * 37) % 100, "v": i })
        .collect();
    c.insert_many(docs).await.unwrap();
    c.insert_one(doc! { "_id": "s" }).await.unwrap();
    let all = ids(&c, doc! {}).await;
    let mut want: Vec<Bson> = (0..100).map(Bson::Int32).collect();
    want.push(Bson::from("s"));
    assert_eq!(all, want, "natural order is _id order");

    let range = doc! { "_id": { "$gte": 10, "$lt": 20 } };
    let got = ids(&c, range.clone()).await;
    assert_eq!(got, (10..20).map(Bson::Int32).collect::<Vec<_>>());
    let e = explain(&db, doc! { "find": "c", "filter": range }).await;
    let plan = winning(&e);
    assert_eq!(plan.get_str("stage").unwrap(), "CLUSTERED_IXSCAN", "{plan}");
    assert_eq!(plan.get("minRecord"), Some(&Bson::Int32(10)));
    assert_eq!(plan.get("maxRecord"), Some(&Bson::Int32(20)));
    assert_eq!(plan.get_str("direction").unwrap(), "forward");
    let stats = e.get_document("executionStats").unwrap();
    assert_eq!(stats.get_i64("totalKeysExamined").unwrap(), 0);
    assert_eq!(stats.get_i64("nReturned").unwrap(), 10);
    assert!(stats.get_i64("totalDocsExamined").unwrap() >= 10);

    // Equality on `_id`: min and max are the value (no IDHACK on a clustered collection).
    let e = explain(&db, doc! { "find": "c", "filter": { "_id": 42 } }).await;
    let plan = winning(&e);
    assert_eq!(plan.get_str("stage").unwrap(), "CLUSTERED_IXSCAN", "{plan}");
    assert_eq!(plan.get("minRecord"), Some(&Bson::Int32(42)));
    assert_eq!(plan.get("maxRecord"), Some(&Bson::Int32(42)));
    assert_eq!(ids(&c, doc! { "_id": 42 }).await, vec![Bson::Int32(42)]);

    // The order gives a sort on `_id` both ways: no SORT stage.
    let e = explain(
        &db,
        doc! { "find": "c", "filter": { "_id": { "$lt": 5 } }, "sort": { "_id": -1 } },
    )
    .await;
    let plan = winning(&e);
    assert_eq!(plan.get_str("stage").unwrap(), "CLUSTERED_IXSCAN", "{plan}");
    assert_eq!(plan.get_str("direction").unwrap(), "backward");
    let got = db
        .run_command(doc! { "find": "c", "filter": { "_id": { "$lt": 5 } }, "sort": { "_id": -1 } })
        .await
        .unwrap();
    let got: Vec<i32> = got
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|d| d.as_document().unwrap().get_i32("_id").unwrap())
        .collect();
    assert_eq!(got, vec![4, 3, 2, 1, 0]);

    // No `_id` bound: a collection scan (in `_id` order).
    let e = explain(&db, doc! { "find": "c", "filter": { "v": 3 } }).await;
    assert_eq!(winning(&e).get_str("stage").unwrap(), "COLLSCAN");
    // Updates and deletes find their documents through the same order.
    c.update_many(
        doc! { "_id": { "$gte": 90 } },
        doc! { "$set": { "hi": true } },
    )
    .await
    .unwrap();
    assert_eq!(ids(&c, doc! { "hi": true }).await.len(), 10);
    c.delete_many(doc! { "_id": { "$lt": 50 } }).await.unwrap();
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 51);
    assert_eq!(ids(&c, doc! {}).await.first(), Some(&Bson::Int32(50)));
}

/// `serverStatus.metrics.ttl.passes`.
async fn ttl_passes(admin: &mongodb::Database) -> i64 {
    let st = admin.run_command(doc! { "serverStatus": 1 }).await.unwrap();
    st.get_document("metrics")
        .unwrap()
        .get_document("ttl")
        .unwrap()
        .get_i64("passes")
        .unwrap()
}

/// Wait (bounded, polling) until the TTL monitor has made two more passes.
async fn wait_for_two_passes(admin: &mongodb::Database) {
    let start = ttl_passes(admin).await;
    for _ in 0..100 {
        if ttl_passes(admin).await >= start + 2 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn ttl_expires_by_id_date_and_coll_mod_changes_it() {
    let server = Server::start(BIN, &["--setParameter", "ttlMonitorSleepSecs=1"]);
    let client = server.client().await;
    let db = client.database("cl");
    let admin = client.database("admin");
    db.run_command(
        doc! { "create": "events", "clusteredIndex": clustered(None), "expireAfterSeconds": 3600 },
    )
    .await
    .unwrap();
    let c = db.collection::<Document>("events");
    let now = bson::DateTime::now().timestamp_millis();
    let at = |ms: i64| Bson::DateTime(bson::DateTime::from_millis(now + ms));
    c.insert_many(vec![
        doc! { "_id": at(-7_200_000), "n": 1 },
        doc! { "_id": at(-60_000), "n": 2 },
        doc! { "_id": at(3_600_000), "n": 3 },
        doc! { "_id": "not a date", "n": 4 },
        doc! { "_id": 5, "n": 5 },
    ])
    .await
    .unwrap();
    wait_for_two_passes(&admin).await;
    let left: Vec<i32> = c
        .find(doc! {})
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .iter()
        .map(|d| d.get_i32("n").unwrap())
        .collect();
    // `_id` order: numbers, strings, then dates.
    assert_eq!(left, vec![5, 4, 2, 3], "only the two-hour-old date expired");

    // collMod shortens the TTL; the minute-old document goes next.
    db.run_command(doc! { "collMod": "events", "expireAfterSeconds": 10 })
        .await
        .unwrap();
    let entry = cairn_e2e::collection_entry(&db, "events").await;
    assert_eq!(
        entry
            .get_document("options")
            .unwrap()
            .get_i64("expireAfterSeconds")
            .unwrap(),
        10
    );
    wait_for_two_passes(&admin).await;
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 3);
    let e = db
        .run_command(doc! { "collMod": "events", "expireAfterSeconds": "soon" })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 72);
    db.run_command(doc! { "collMod": "events", "expireAfterSeconds": "off" })
        .await
        .unwrap();
    let entry = cairn_e2e::collection_entry(&db, "events").await;
    assert!(
        !entry
            .get_document("options")
            .unwrap()
            .contains_key("expireAfterSeconds")
    );
    // A collection that is not clustered has no collection-level TTL.
    db.run_command(doc! { "create": "plain" }).await.unwrap();
    let e = db
        .run_command(doc! { "collMod": "plain", "expireAfterSeconds": 10 })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 72);
}

#[tokio::test]
async fn clustered_options_and_order_survive_a_kill() {
    let mut server = Server::start(BIN, &[]);
    {
        let db = server.client().await.database("cl");
        db.run_command(doc! { "create": "k", "clusteredIndex": clustered(Some("k_id")), "expireAfterSeconds": 100 })
            .await
            .unwrap();
        db.run_command(doc! { "collMod": "k", "expireAfterSeconds": 200 })
            .await
            .unwrap();
        let c = db.collection::<Document>("k");
        for i in [5, 3, 9, 1, 7] {
            c.insert_one(doc! { "_id": i }).await.unwrap();
        }
    }
    server.restart_after_kill();
    let db = server.client().await.database("cl");
    let entry = cairn_e2e::collection_entry(&db, "k").await;
    let options = entry.get_document("options").unwrap();
    assert_eq!(
        options.get_document("clusteredIndex").unwrap(),
        &doc! { "v": 2, "key": { "_id": 1 }, "name": "k_id", "unique": true }
    );
    assert_eq!(options.get_i64("expireAfterSeconds").unwrap(), 200);
    assert_eq!(first_index(&db, "k").await.get_str("name").unwrap(), "k_id");
    let c = db.collection::<Document>("k");
    assert_eq!(
        ids(&c, doc! {}).await,
        [1, 3, 5, 7, 9].map(Bson::Int32).to_vec()
    );
    let e = explain(&db, doc! { "find": "k", "filter": { "_id": { "$gt": 3 } } }).await;
    assert_eq!(winning(&e).get_str("stage").unwrap(), "CLUSTERED_IXSCAN");
}
