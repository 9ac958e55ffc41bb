//! Proves readConcern "snapshot" outside transactions (find, aggregate, distinct, their getMores,
//! the driver's snapshot sessions) reads exactly the documents as of `atClusterTime`, not later
//! versions, and mongod's errors (SnapshotTooOld past minSnapshotHistoryWindowInSeconds, a time
//! in the future, a standalone, unsupported commands). How: a real `--replSet` server per test,
//! raw commands through the Rust driver's run_command, and its `snapshot(true)` session API.

use bson::{Bson, Document, Timestamp, doc};
use cairn_e2e::{RawConn, Server, error_code};
use futures_util::TryStreamExt;
use mongodb::Database;
use mongodb::options::SessionOptions;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

async fn initiated_with(args: &[&str]) -> Server {
    let mut all = vec!["--replSet", "rs0"];
    all.extend_from_slice(args);
    let server = Server::start(BIN, &all);
    let r = server
        .client()
        .await
        .database("admin")
        .run_command(doc! { "replSetInitiate": {} })
        .await
        .expect("replSetInitiate");
    assert_eq!(r.get_f64("ok").ok(), Some(1.0));
    server
}

async fn run(db: &Database, cmd: Document) -> Document {
    db.run_command(cmd.clone())
        .await
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

async fn code_of(db: &Database, cmd: Document) -> i32 {
    match db.run_command(cmd.clone()).await {
        Ok(r) => panic!("{cmd} should fail, got {r}"),
        Err(e) => error_code(&e),
    }
}

/// A write through a raw command, and the cluster time it committed at.
async fn write_at(db: &Database, cmd: Document) -> Timestamp {
    let r = run(db, cmd).await;
    r.get_timestamp("operationTime").expect("operationTime")
}

fn snapshot_at(t: Timestamp) -> Document {
    doc! { "level": "snapshot", "atClusterTime": t }
}

/// (docs of the first batch, cursor id, cursor.atClusterTime).
fn cursor_of(r: &Document, batch: &str) -> (Vec<Document>, i64, Option<Timestamp>) {
    let c = r.get_document("cursor").expect("cursor");
    let docs = c
        .get_array(batch)
        .expect("batch")
        .iter()
        .filter_map(|d| d.as_document().cloned())
        .collect();
    (
        docs,
        c.get_i64("id").expect("id"),
        c.get_timestamp("atClusterTime").ok(),
    )
}

fn pairs(docs: &[Document]) -> Vec<(i32, i32)> {
    docs.iter()
        .map(|d| (d.get_i32("_id").expect("_id"), d.get_i32("v").expect("v")))
        .collect()
}

#[tokio::test]
async fn reads_at_an_old_cluster_time_see_the_old_versions() {
    let server = initiated_with(&[]).await;
    let db = server.client().await.database("snap");
    let docs: Vec<Document> = (0..5).map(|i| doc! { "_id": i, "v": 0 }).collect();
    let t1 = write_at(&db, doc! { "insert": "c", "documents": docs }).await;
    run(
        &db,
        doc! { "createIndexes": "c", "indexes": [{ "key": { "v": 1 }, "name": "v_1" }] },
    )
    .await;
    let upd = doc! { "update": "c", "updates": [{ "q": {}, "u": { "$set": { "v": 1 } }, "multi": true }] };
    let t2 = write_at(&db, upd).await;
    let del = doc! { "delete": "c", "deletes": [{ "q": { "_id": 0 }, "limit": 1 }] };
    write_at(&db, del).await;
    write_at(
        &db,
        doc! { "insert": "c", "documents": [{ "_id": 9, "v": 2 }] },
    )
    .await;

    let old = run(
        &db,
        doc! { "find": "c", "sort": { "_id": 1 }, "readConcern": snapshot_at(t1) },
    )
    .await;
    let (batch, id, at) = cursor_of(&old, "firstBatch");
    assert_eq!(pairs(&batch), (0..5).map(|i| (i, 0)).collect::<Vec<_>>());
    assert_eq!((id, at), (0, Some(t1)));
    // An index-served filter sees the old keys too (v was 0 then, 1 now).
    let by_index = doc! { "find": "c", "filter": { "v": 0 }, "readConcern": snapshot_at(t1) };
    let (batch, _, _) = cursor_of(&run(&db, by_index).await, "firstBatch");
    assert_eq!(batch.len(), 5);
    let mid = run(
        &db,
        doc! { "find": "c", "sort": { "_id": 1 }, "readConcern": snapshot_at(t2) },
    )
    .await;
    assert_eq!(
        pairs(&cursor_of(&mid, "firstBatch").0),
        (0..5).map(|i| (i, 1)).collect::<Vec<_>>()
    );

    let agg = doc! {
        "aggregate": "c",
        "pipeline": [{ "$group": { "_id": "$v", "n": { "$sum": 1 } } }],
        "cursor": {},
        "readConcern": snapshot_at(t1),
    };
    let (groups, _, at) = cursor_of(&run(&db, agg).await, "firstBatch");
    assert_eq!(groups, vec![doc! { "_id": 0, "n": 5 }]);
    assert_eq!(at, Some(t1));
    let distinct = doc! { "distinct": "c", "key": "v", "readConcern": snapshot_at(t1) };
    let r = run(&db, distinct).await;
    assert_eq!(
        r.get_array("values").expect("values"),
        &vec![Bson::Int32(0)]
    );
    assert_eq!(r.get_timestamp("atClusterTime").ok(), Some(t1));

    // Without atClusterTime: the newest committed data, and the time it was read at.
    let now = run(
        &db,
        doc! { "find": "c", "sort": { "_id": 1 }, "readConcern": { "level": "snapshot" } },
    )
    .await;
    let (batch, _, at) = cursor_of(&now, "firstBatch");
    assert_eq!(pairs(&batch), vec![(1, 1), (2, 1), (3, 1), (4, 1), (9, 2)]);
    let last = now.get_timestamp("operationTime").expect("operationTime");
    assert!(at.is_some_and(|a| a >= t2 && a <= last), "{now}");
    // A plain read carries no atClusterTime.
    let plain = run(&db, doc! { "find": "c" }).await;
    assert_eq!(cursor_of(&plain, "firstBatch").2, None);
}

#[tokio::test]
async fn get_more_goes_on_reading_the_same_snapshot_while_writes_happen() {
    let server = initiated_with(&[]).await;
    let db = server.client().await.database("snap");
    let docs: Vec<Document> = (0..50).map(|i| doc! { "_id": i, "v": 0 }).collect();
    write_at(&db, doc! { "insert": "c", "documents": docs }).await;
    let snap = doc! { "level": "snapshot" };
    let find =
        doc! { "find": "c", "sort": { "_id": 1 }, "batchSize": 5, "readConcern": snap.clone() };
    let agg = doc! {
        "aggregate": "c", "pipeline": [{ "$match": {} }], "cursor": { "batchSize": 5 },
        "readConcern": snap,
    };
    for (round, cmd) in [find, agg].into_iter().enumerate() {
        let (mut seen, mut id, at) = cursor_of(&run(&db, cmd).await, "firstBatch");
        assert!(at.is_some());
        let mut writes = 0;
        while id != 0 {
            // Every step changes what a plain read would see: updates, deletes and inserts.
            let i = writes % 50;
            let upd = doc! { "update": "c", "updates": [{ "q": { "_id": i }, "u": { "$inc": { "v": 1 } } }] };
            write_at(&db, upd).await;
            let del = doc! { "delete": "c", "deletes": [{ "q": { "_id": 49 - i }, "limit": 1 }] };
            write_at(&db, del).await;
            let ins = doc! { "insert": "c", "documents": [{ "_id": 1000 * (round as i32 + 1) + i, "v": 7 }] };
            write_at(&db, ins).await;
            writes += 1;
            let more = run(
                &db,
                doc! { "getMore": id, "collection": "c", "batchSize": 5 },
            )
            .await;
            let (batch, next, more_at) = cursor_of(&more, "nextBatch");
            assert_eq!(
                more_at, at,
                "every getMore reports the cursor's atClusterTime"
            );
            seen.extend(batch);
            id = next;
        }
        let mut got = pairs(&seen);
        got.sort_unstable();
        let want: Vec<(i32, i32)> = (0..50).map(|i| (i, 0)).collect();
        assert_eq!(got, want, "cursor {round} saw only its snapshot");
        // Reset for the next round.
        run(
            &db,
            doc! { "delete": "c", "deletes": [{ "q": {}, "limit": 0 }] },
        )
        .await;
        let docs: Vec<Document> = (0..50).map(|i| doc! { "_id": i, "v": 0 }).collect();
        write_at(&db, doc! { "insert": "c", "documents": docs }).await;
    }
}

#[tokio::test]
async fn a_driver_snapshot_session_reads_one_point_in_time() {
    let server = initiated_with(&[]).await;
    let client = server.client().await;
    let coll = client.database("snap").collection::<Document>("c");
    coll.insert_many((0..3).map(|i| doc! { "_id": i, "v": 0 }))
        .await
        .expect("seed");
    let opts = SessionOptions::builder().snapshot(true).build();
    let mut s = client
        .start_session()
        .with_options(opts)
        .await
        .expect("session");
    let first: Vec<Document> = coll
        .find(doc! {})
        .session(&mut s)
        .await
        .expect("find")
        .stream(&mut s)
        .try_collect()
        .await
        .expect("docs");
    assert_eq!(first.len(), 3);
    let at = s
        .snapshot_time()
        .expect("the driver took atClusterTime from the reply");
    coll.update_many(doc! {}, doc! { "$set": { "v": 1 } })
        .await
        .expect("update");
    coll.insert_one(doc! { "_id": 3, "v": 1 })
        .await
        .expect("insert");
    let again: Vec<Document> = coll
        .find(doc! {})
        .sort(doc! { "_id": 1 })
        .session(&mut s)
        .await
        .expect("find again")
        .stream(&mut s)
        .try_collect()
        .await
        .expect("docs");
    assert_eq!(pairs(&again), vec![(0, 0), (1, 0), (2, 0)]);
    let values = coll
        .distinct("v", doc! {})
        .session(&mut s)
        .await
        .expect("distinct");
    assert_eq!(values, vec![Bson::Int32(0)]);
    assert_eq!(s.snapshot_time(), Some(at));
    // Outside the session the new versions show.
    assert_eq!(
        coll.count_documents(doc! { "v": 1 }).await.expect("count"),
        4
    );
}

#[tokio::test]
async fn history_older_than_the_window_is_snapshot_too_old() {
    let server = initiated_with(&["--setParameter", "minSnapshotHistoryWindowInSeconds=1"]).await;
    let client = server.client().await;
    let admin = client.database("admin");
    let db = client.database("snap");
    let p = run(
        &admin,
        doc! { "getParameter": 1, "minSnapshotHistoryWindowInSeconds": 1 },
    )
    .await;
    assert_eq!(
        p.get_i64("minSnapshotHistoryWindowInSeconds").ok().or(p
            .get_i32("minSnapshotHistoryWindowInSeconds")
            .ok()
            .map(i64::from)),
        Some(1),
        "{p}"
    );
    let t1 = write_at(
        &db,
        doc! { "insert": "c", "documents": [{ "_id": 1, "v": 0 }] },
    )
    .await;
    let set = |v: i32| doc! { "update": "c", "updates": [{ "q": { "_id": 1 }, "u": { "$set": { "v": v } } }] };
    write_at(&db, set(1)).await;
    let read = doc! { "find": "c", "readConcern": snapshot_at(t1) };
    // Inside the window the old version is there.
    assert_eq!(
        pairs(&cursor_of(&run(&db, read.clone()).await, "firstBatch").0),
        vec![(1, 0)]
    );
    // Once the time is older than the window the read is refused (the engine prunes too).
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    write_at(&db, set(2)).await;
    assert_eq!(code_of(&db, read).await, 239);

    // Window 0 (set at run time): a write nobody's snapshot needs keeps no history at all.
    run(
        &admin,
        doc! { "setParameter": 1, "minSnapshotHistoryWindowInSeconds": 0 },
    )
    .await;
    let t3 = write_at(&db, set(3)).await;
    write_at(&db, set(4)).await;
    assert_eq!(
        code_of(&db, doc! { "find": "c", "readConcern": snapshot_at(t3) }).await,
        239
    );
    // Back to the default: the history is kept again from here on.
    run(
        &admin,
        doc! { "setParameter": 1, "minSnapshotHistoryWindowInSeconds": 300 },
    )
    .await;
    let t5 = write_at(&db, set(5)).await;
    write_at(&db, set(6)).await;
    let r = run(&db, doc! { "find": "c", "readConcern": snapshot_at(t5) }).await;
    assert_eq!(pairs(&cursor_of(&r, "firstBatch").0), vec![(1, 5)]);
}

#[tokio::test]
async fn errors_are_mongods() {
    let server = initiated_with(&[]).await;
    let db = server.client().await.database("snap");
    let t = write_at(&db, doc! { "insert": "c", "documents": [{ "_id": 1 }] }).await;
    let snap = doc! { "level": "snapshot" };
    for cmd in [
        doc! { "count": "c", "readConcern": snap.clone() },
        doc! { "insert": "c", "documents": [{}], "readConcern": snap.clone() },
        doc! { "findAndModify": "c", "query": {}, "update": { "$set": { "a": 1 } }, "readConcern": snap.clone() },
        doc! { "listCollections": 1, "readConcern": snap.clone() },
        doc! { "listIndexes": "c", "readConcern": snap.clone() },
        doc! { "find": "c", "readConcern": { "level": "majority", "atClusterTime": t } },
        doc! { "find": "c", "readConcern": { "level": "snapshot", "atClusterTime": t, "afterClusterTime": t } },
        doc! { "aggregate": "c", "pipeline": [{ "$out": "o" }], "cursor": {}, "readConcern": snap.clone() },
    ] {
        assert_eq!(code_of(&db, cmd.clone()).await, 72, "{cmd}");
    }
    let future = Timestamp {
        time: t.time + 3600,
        increment: 0,
    };
    assert_eq!(
        code_of(
            &db,
            doc! { "find": "c", "readConcern": snapshot_at(future) }
        )
        .await,
        72
    );
    let old = Timestamp {
        time: 1,
        increment: 0,
    };
    assert_eq!(
        code_of(&db, doc! { "find": "c", "readConcern": snapshot_at(old) }).await,
        239
    );
    run(
        &db,
        doc! { "create": "capped", "capped": true, "size": 4096 },
    )
    .await;
    assert_eq!(
        code_of(&db, doc! { "find": "capped", "readConcern": snap.clone() }).await,
        246
    );

    let standalone = Server::start(BIN, &[]);
    let sdb = standalone.client().await.database("snap");
    run(&sdb, doc! { "insert": "c", "documents": [{ "_id": 1 }] }).await;
    assert_eq!(
        code_of(&sdb, doc! { "find": "c", "readConcern": snap.clone() }).await,
        123
    );
    assert_eq!(
        code_of(&sdb, doc! { "count": "c", "readConcern": snap }).await,
        72
    );
}

/// One raw OP_MSG round trip (the driver would add its own session fields).
fn raw(conn: &mut RawConn, body: &Document) -> Document {
    let m = wire::OpMsg::new(bson::RawDocumentBuf::try_from(body).expect("body"));
    conn.send(&wire::encode_msg(1, 0, &m, None).expect("encode"))
        .expect("send");
    let reply = wire::decode(&conn.recv().expect("reply")).expect("frame");
    let wire::Body::Msg(r) = reply.body else {
        panic!("OP_MSG expected")
    };
    Document::try_from(r.body.as_ref()).expect("reply body")
}

#[tokio::test]
async fn a_transaction_may_start_at_a_cluster_time_and_later_statements_name_no_read_concern() {
    let server = initiated_with(&[]).await;
    let db = server.client().await.database("snap");
    let t1 = write_at(
        &db,
        doc! { "insert": "c", "documents": [{ "_id": 1, "v": 0 }] },
    )
    .await;
    let upd = doc! { "update": "c", "updates": [{ "q": {}, "u": { "$set": { "v": 1 } } }] };
    write_at(&db, upd).await;
    let mut conn = RawConn::connect(&server.addr());
    let lsid = doc! { "id": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: vec![7; 16] } };
    let stmt = |mut body: Document, start: bool| {
        body.insert("lsid", lsid.clone());
        body.insert("txnNumber", 1_i64);
        body.insert("autocommit", false);
        if start {
            body.insert("startTransaction", true);
        }
        body.insert("$db", "snap");
        body
    };
    let r = raw(
        &mut conn,
        &stmt(doc! { "find": "c", "readConcern": snapshot_at(t1) }, true),
    );
    assert_eq!(pairs(&cursor_of(&r, "firstBatch").0), vec![(1, 0)], "{r}");
    assert_eq!(
        cursor_of(&r, "firstBatch").2,
        None,
        "no atClusterTime inside a transaction"
    );
    let r = raw(
        &mut conn,
        &stmt(
            doc! { "find": "c", "readConcern": { "level": "snapshot" } },
            false,
        ),
    );
    assert_eq!(r.get_i32("code").ok(), Some(72), "{r}");
}
