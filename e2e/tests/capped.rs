//! Proves capped collections and tailable cursors with the official Rust driver against a real
//! `cairn` process: create's errors, trimming by count and size in insertion order, collStats and
//! listCollections, convertToCapped/cloneCollectionAsCapped, a tailable awaitData cursor woken by
//! a later insert, CappedPositionLost, and the bounds holding across a SIGKILL.

use bson::{Document, doc};
use cairn_e2e::{Server, error_code};
use futures_util::StreamExt;
use mongodb::options::CursorType;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

async fn ids(coll: &mongodb::Collection<Document>) -> Vec<i32> {
    let mut out = Vec::new();
    let mut c = coll.find(doc! {}).await.unwrap();
    while let Some(d) = c.next().await {
        out.push(d.unwrap().get_i32("_id").unwrap());
    }
    out
}

#[tokio::test]
async fn create_errors_options_and_stats() {
    let server = Server::start(BIN, &[]);
    let db = server.client().await.database("t");
    for (cmd, code) in [
        (doc! { "create": "a", "capped": true }, 72),
        (doc! { "create": "a", "capped": true, "max": 5 }, 72),
        (doc! { "create": "a", "size": 4096 }, 72),
        (doc! { "create": "a", "capped": true, "size": 0 }, 51024),
        (doc! { "create": "a", "capped": true, "size": -1 }, 51024),
        (doc! { "create": "a", "capped": true, "size": "big" }, 14),
        (doc! { "create": "a", "capped": "yes", "size": 10 }, 14),
    ] {
        let e = db.run_command(cmd.clone()).await.unwrap_err();
        assert_eq!(error_code(&e), code, "{cmd}");
    }
    db.run_command(doc! { "create": "a", "capped": true, "size": 100_000, "max": 3 })
        .await
        .unwrap();
    let entry = cairn_e2e::collection_entry(&db, "a").await;
    let options = entry.get_document("options").unwrap();
    assert_eq!(options.get_bool("capped").ok(), Some(true));
    assert_eq!(options.get_i64("size").ok(), Some(100_000));
    assert_eq!(options.get_i64("max").ok(), Some(3));

    let coll = db.collection::<Document>("a");
    for i in 0..10 {
        coll.insert_one(doc! { "_id": i }).await.unwrap();
    }
    assert_eq!(ids(&coll).await, vec![7, 8, 9]);
    coll.insert_many((20..25).map(|i| doc! { "_id": i }))
        .await
        .unwrap();
    assert_eq!(ids(&coll).await, vec![22, 23, 24]);

    let stats = db.run_command(doc! { "collStats": "a" }).await.unwrap();
    assert_eq!(stats.get_bool("capped").ok(), Some(true));
    assert_eq!(stats.get_i64("maxSize").ok(), Some(100_000));
    assert_eq!(stats.get_i64("max").ok(), Some(3));
    assert_eq!(
        stats
            .get_i32("count")
            .ok()
            .map(i64::from)
            .or(stats.get_i64("count").ok()),
        Some(3)
    );
    let plain = db.collection::<Document>("plain");
    plain.insert_one(doc! { "x": 1 }).await.unwrap();
    let stats = db.run_command(doc! { "collStats": "plain" }).await.unwrap();
    assert_eq!(stats.get_bool("capped").ok(), Some(false));
    assert!(!stats.contains_key("maxSize"));

    // mongod 7 allows deletes and updates that change a document's size on capped collections.
    coll.delete_one(doc! { "_id": 22 }).await.unwrap();
    coll.update_one(
        doc! { "_id": 23 },
        doc! { "$set": { "grow": "x".repeat(100) } },
    )
    .await
    .unwrap();
    assert_eq!(ids(&coll).await, vec![23, 24]);
}

#[tokio::test]
async fn size_bound_convert_and_clone() {
    let server = Server::start(BIN, &[]);
    let db = server.client().await.database("t");
    let one = doc! { "_id": 0, "pad": "p".repeat(100) }
        .to_vec()
        .unwrap()
        .len() as i64;
    db.run_command(doc! { "create": "s", "capped": true, "size": one * 5 })
        .await
        .unwrap();
    let s = db.collection::<Document>("s");
    s.insert_many((0..20).map(|i| doc! { "_id": i, "pad": "p".repeat(100) }))
        .await
        .unwrap();
    assert_eq!(ids(&s).await, vec![15, 16, 17, 18, 19]);

    let plain = db.collection::<Document>("plain");
    plain
        .insert_many((0..20).map(|i| doc! { "_id": i, "pad": "p".repeat(100) }))
        .await
        .unwrap();
    db.run_command(
        doc! { "cloneCollectionAsCapped": "plain", "toCollection": "copy", "size": one * 2 },
    )
    .await
    .unwrap();
    assert_eq!(ids(&db.collection("copy")).await, vec![18, 19]);
    assert_eq!(plain.count_documents(doc! {}).await.unwrap(), 20);
    let e = db
        .run_command(
            doc! { "cloneCollectionAsCapped": "plain", "toCollection": "copy", "size": 4096 },
        )
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 48);
    let e = db
        .run_command(doc! { "cloneCollectionAsCapped": "nope", "toCollection": "c2", "size": 4096 })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 26);

    db.run_command(doc! { "convertToCapped": "plain", "size": one * 3 })
        .await
        .unwrap();
    assert_eq!(ids(&plain).await, vec![17, 18, 19]);
    let stats = db.run_command(doc! { "collStats": "plain" }).await.unwrap();
    assert_eq!(stats.get_bool("capped").ok(), Some(true));
    let e = db
        .run_command(doc! { "convertToCapped": "plain" })
        .await
        .unwrap_err();
    // mongod reads `size` with safeNumberLong: missing is 0, which is InvalidOptions.
    assert_eq!(error_code(&e), 72);
    let e = db
        .run_command(doc! { "convertToCapped": "nope", "size": 4096 })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 26);
}

#[tokio::test]
async fn tailable_await_cursor_receives_a_later_insert() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("t");
    db.run_command(doc! { "create": "log", "capped": true, "size": 1 << 20 })
        .await
        .unwrap();
    let log = db.collection::<Document>("log");
    log.insert_one(doc! { "_id": 0 }).await.unwrap();
    let mut cursor = log
        .find(doc! {})
        .cursor_type(CursorType::TailableAwait)
        .max_await_time(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(
        cursor.next().await.unwrap().unwrap().get_i32("_id").ok(),
        Some(0)
    );
    let writer = log.clone();
    let inserted = tokio::spawn(async move {
        // Lets the cursor's getMore start waiting; the test holds whatever the order is.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let at = Instant::now();
        writer.insert_one(doc! { "_id": 1 }).await.unwrap();
        at
    });
    let got = cursor.next().await.unwrap().unwrap();
    let arrived = Instant::now();
    assert_eq!(got.get_i32("_id").ok(), Some(1));
    let at = inserted.await.unwrap();
    eprintln!(
        "tailable awaitData delay from insert start to delivery: {:?}",
        arrived.saturating_duration_since(at)
    );
}

#[tokio::test]
async fn tailable_errors_empty_collection_and_lost_position() {
    let server = Server::start(BIN, &[]);
    let db = server.client().await.database("t");
    db.collection::<Document>("plain")
        .insert_one(doc! { "x": 1 })
        .await
        .unwrap();
    let e = db
        .run_command(doc! { "find": "plain", "tailable": true })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 2);
    let e = db
        .run_command(doc! { "find": "plain", "awaitData": true })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 9);
    db.run_command(doc! { "create": "c", "capped": true, "size": 1 << 20, "max": 2 })
        .await
        .unwrap();
    let e = db
        .run_command(doc! { "find": "c", "tailable": true, "sort": { "x": 1 } })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 2);
    // An empty capped collection gives no position: the cursor is closed at once.
    let r = db
        .run_command(doc! { "find": "c", "tailable": true })
        .await
        .unwrap();
    assert_eq!(
        r.get_document("cursor").unwrap().get_i64("id").ok(),
        Some(0)
    );

    let c = db.collection::<Document>("c");
    c.insert_many([doc! { "_id": 1 }, doc! { "_id": 2 }])
        .await
        .unwrap();
    let r = db
        .run_command(doc! { "find": "c", "tailable": true })
        .await
        .unwrap();
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    assert_ne!(id, 0);
    // Nothing new: a tailable (not awaiting) getMore answers at once and stays open.
    let r = db
        .run_command(doc! { "getMore": id, "collection": "c" })
        .await
        .unwrap();
    let cur = r.get_document("cursor").unwrap();
    assert_eq!(cur.get_i64("id").ok(), Some(id));
    assert!(cur.get_array("nextBatch").unwrap().is_empty());
    c.insert_one(doc! { "_id": 3 }).await.unwrap();
    let r = db
        .run_command(doc! { "getMore": id, "collection": "c" })
        .await
        .unwrap();
    let batch = r
        .get_document("cursor")
        .unwrap()
        .get_array("nextBatch")
        .unwrap()
        .clone();
    assert_eq!(batch.len(), 1);
    // Two more inserts push out the document the cursor stands on.
    c.insert_many([doc! { "_id": 4 }, doc! { "_id": 5 }])
        .await
        .unwrap();
    let e = db
        .run_command(doc! { "getMore": id, "collection": "c" })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 136);
    let e = db
        .run_command(doc! { "getMore": id, "collection": "c" })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 43);
}

#[tokio::test]
async fn bounds_hold_across_sigkill() {
    let mut server = Server::start(BIN, &[]);
    {
        let db = server.client().await.database("t");
        db.run_command(doc! { "create": "k", "capped": true, "size": 1 << 20, "max": 5 })
            .await
            .unwrap();
        let k = db.collection::<Document>("k");
        for i in 0..40 {
            k.insert_one(doc! { "_id": i }).await.unwrap();
        }
    }
    server.restart_after_kill();
    let db = server.client().await.database("t");
    let k = db.collection::<Document>("k");
    assert_eq!(ids(&k).await, vec![35, 36, 37, 38, 39]);
    k.insert_one(doc! { "_id": 40 }).await.unwrap();
    assert_eq!(ids(&k).await, vec![36, 37, 38, 39, 40]);
    let stats = db.run_command(doc! { "collStats": "k" }).await.unwrap();
    assert_eq!(stats.get_i64("max").ok(), Some(5));
}

#[tokio::test]
async fn coll_mod_changes_the_bounds_and_the_next_insert_trims() {
    let mut server = Server::start(BIN, &[]);
    let db = server.client().await.database("t");
    db.run_command(doc! { "create": "plain" }).await.unwrap();
    let e = db
        .run_command(doc! { "collMod": "plain", "cappedSize": 4096 })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 72, "not capped");
    db.run_command(doc! { "create": "c", "capped": true, "size": 100_000, "max": 10 })
        .await
        .unwrap();
    for (cmd, code) in [
        (doc! { "collMod": "c", "cappedSize": 0 }, 72),
        (doc! { "collMod": "c", "cappedSize": "big" }, 14),
        (doc! { "collMod": "c", "cappedMax": "many" }, 14),
    ] {
        let e = db.run_command(cmd.clone()).await.unwrap_err();
        assert_eq!(error_code(&e), code, "{cmd}");
    }
    let coll = db.collection::<Document>("c");
    for i in 0..10 {
        coll.insert_one(doc! { "_id": i }).await.unwrap();
    }
    db.run_command(doc! { "collMod": "c", "cappedMax": 4 })
        .await
        .unwrap();
    // The bound holds from the next insert on, which trims the oldest.
    assert_eq!(ids(&coll).await.len(), 10);
    coll.insert_one(doc! { "_id": 10 }).await.unwrap();
    assert_eq!(ids(&coll).await, vec![7, 8, 9, 10]);
    let stats = db.run_command(doc! { "collStats": "c" }).await.unwrap();
    assert_eq!(stats.get_i64("max").ok(), Some(4), "{stats}");
    // No count bound, then a size bound of 100 bytes (the six documents are about 120).
    db.run_command(doc! { "collMod": "c", "cappedMax": 0, "cappedSize": 100 })
        .await
        .unwrap();
    coll.insert_one(doc! { "_id": 11, "pad": "x".repeat(40) })
        .await
        .unwrap();
    let left = ids(&coll).await;
    assert!(left.len() < 5 && left.last() == Some(&11), "{left:?}");
    // The new bounds are durable.
    server.kill();
    server.restart_after_kill();
    let db = server.client().await.database("t");
    let stats = db.run_command(doc! { "collStats": "c" }).await.unwrap();
    assert_eq!(stats.get_i64("maxSize").ok(), Some(100), "{stats}");
    assert_eq!(stats.get_i64("max").ok(), Some(i64::MAX), "{stats}");
}
