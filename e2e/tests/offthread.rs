//! Proves that slow storage never stalls the server: storage calls run on a bounded pool, so
//! `ping`/`hello` are answered while storage calls block; a queued call of a client that hung up
//! never starts; an index build does not hold its collection's namespace lock and shows its
//! progress; `fsync`, the cache/checkpoint options and `serverStatus.wiredTiger` answer as
//! mongod's do. How: a real server with test commands; fail points make storage calls block, and
//! the tests assert the order of events (never elapsed time).

use bson::{Bson, Document, doc};
use cairn_e2e::{RawConn, Server, error_code};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");
const TEST_COMMANDS: &[&str] = &["--setParameter", "enableTestCommands=1"];
/// How long a `waitForFailPoint` or a polled condition may take before the test fails.
const WAIT_MS: i64 = 60_000;

async fn admin_command(client: &mongodb::Client, cmd: Document) -> Document {
    client
        .database("admin")
        .run_command(cmd.clone())
        .await
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

async fn fail_point(client: &mongodb::Client, name: &str, mode: Bson, data: Document) -> i64 {
    let r = admin_command(
        client,
        doc! { "configureFailPoint": name, "mode": mode, "data": data },
    )
    .await;
    r.get_i64("count").unwrap()
}

async fn wait_for_fail_point(client: &mongodb::Client, name: &str, times: i64) {
    admin_command(
        client,
        doc! { "waitForFailPoint": name, "timesEntered": times, "maxTimeMS": WAIT_MS },
    )
    .await;
}

/// `serverStatus` at a dotted path, as an integer.
async fn status_number(client: &mongodb::Client, path: &str) -> i64 {
    let mut d = admin_command(client, doc! { "serverStatus": 1 }).await;
    let mut parts = path.split('.').peekable();
    while let Some(p) = parts.next() {
        if parts.peek().is_none() {
            return match d.get(p) {
                Some(Bson::Int32(i)) => i64::from(*i),
                Some(Bson::Int64(i)) => *i,
                other => panic!("serverStatus.{path} is {other:?}"),
            };
        }
        d = d.get_document(p).unwrap().clone();
    }
    unreachable!()
}

/// Polls `serverStatus` until `path` equals `want` (the server's state changes asynchronously).
async fn until_status(client: &mongodb::Client, path: &str, want: i64) {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS as u64);
    loop {
        let got = status_number(client, path).await;
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "serverStatus.{path} stayed {got}, want {want}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ping_and_hello_answer_while_storage_calls_block() {
    let server = Server::start(BIN, TEST_COMMANDS);
    let client = server.client().await;
    let coll = client.database("t").collection::<Document>("c");
    coll.insert_one(doc! { "_id": 1 }).await.unwrap();
    // More slow calls than the server has async workers (one per core by default).
    let slow = std::thread::available_parallelism().map_or(2, |n| n.get()) + 2;
    assert!(slow as i64 <= status_number(&client, "metrics.storageJobs.threadsMax").await);
    // One client each (every find on its own connection), connected before the finds start so
    // that they enter the fail point together.
    let mut clients = Vec::new();
    for _ in 0..slow {
        let c = server.client().await;
        admin_command(&c, doc! { "ping": 1 }).await;
        clients.push(c);
    }
    let before = fail_point(
        &client,
        "blockStorageCall",
        Bson::String("alwaysOn".into()),
        doc! { "commands": ["find"], "blockTimeMS": 3000 },
    )
    .await;
    let order = Arc::new(AtomicUsize::new(0));
    let mut finds = Vec::new();
    for c in clients {
        let order = order.clone();
        finds.push(tokio::spawn(async move {
            let coll = c.database("t").collection::<Document>("c");
            let mut cursor = coll.find(doc! {}).await.unwrap();
            assert!(cursor.advance().await.unwrap());
            order.fetch_add(1, Ordering::SeqCst)
        }));
    }
    wait_for_fail_point(&client, "blockStorageCall", before + slow as i64).await;
    // A fresh connection: the driver's handshake is a hello; then ping and hello.
    let fresh = server.client().await;
    let pong = admin_command(&fresh, doc! { "ping": 1 }).await;
    assert_eq!(pong.get_f64("ok").unwrap(), 1.0);
    let hello = admin_command(&fresh, doc! { "hello": 1 }).await;
    assert!(hello.get_bool("isWritablePrimary").unwrap());
    let answered_at = order.fetch_add(1, Ordering::SeqCst);
    let mut finished = Vec::new();
    for f in finds {
        finished.push(f.await.unwrap());
    }
    assert_eq!(
        answered_at, 0,
        "ping/hello came after {answered_at} of the slow finds (finished at {finished:?})"
    );
    fail_point(&client, "blockStorageCall", "off".into(), doc! {}).await;
}

/// Sends `find` over a raw connection without reading the reply.
fn send_find(conn: &mut RawConn, id: i32) {
    let body = bson::RawDocumentBuf::try_from(&doc! { "find": "c", "$db": "t" }).unwrap();
    let msg = wire::OpMsg {
        flags: 0,
        body,
        sequences: vec![],
    };
    conn.send(&wire::encode_msg(id, 0, &msg, None).unwrap())
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queued_call_of_a_client_that_hung_up_never_starts() {
    let server = Server::start(BIN, TEST_COMMANDS);
    let client = server.client().await;
    client
        .database("t")
        .collection::<Document>("c")
        .insert_one(doc! { "_id": 1 })
        .await
        .unwrap();
    let threads = status_number(&client, "metrics.storageJobs.threadsMax").await;
    let before = fail_point(
        &client,
        "blockStorageCall",
        "alwaysOn".into(),
        doc! { "commands": ["find"] },
    )
    .await;
    // Fill every pool thread with a find that blocks until the fail point is off.
    let mut busy: Vec<RawConn> = (0..threads)
        .map(|_| RawConn::connect(&server.addr()))
        .collect();
    for (i, conn) in busy.iter_mut().enumerate() {
        send_find(conn, i as i32 + 1);
    }
    wait_for_fail_point(&client, "blockStorageCall", before + threads).await;
    let mut late = RawConn::connect(&server.addr());
    send_find(&mut late, 1);
    until_status(&client, "metrics.storageJobs.queued", 1).await;
    // The client hangs up while its find waits for a thread; the server notices and lets go.
    let open = status_number(&client, "connections.current").await;
    drop(late);
    until_status(&client, "connections.current", open - 1).await;
    let entered = fail_point(&client, "blockStorageCall", "off".into(), doc! {}).await;
    assert_eq!(entered, before + threads);
    for conn in &mut busy {
        let frame = conn.recv().unwrap();
        let reply = match wire::decode(&frame).unwrap().body {
            wire::Body::Msg(m) => Document::try_from(m.body.as_ref()).unwrap(),
            _ => panic!("not OP_MSG"),
        };
        assert_eq!(reply.get_f64("ok").unwrap(), 1.0, "{reply}");
    }
    until_status(&client, "metrics.storageJobs.skippedClientDisconnected", 1).await;
    until_status(&client, "metrics.storageJobs.queued", 0).await;
    // The skipped find never reached its storage call.
    let entered = fail_point(&client, "blockStorageCall", "off".into(), doc! {}).await;
    assert_eq!(entered, before + threads);
}

async fn index_builds(client: &mongodb::Client) -> Vec<Document> {
    let r = admin_command(client, doc! { "currentOp": 1 }).await;
    r.get_array("inprog")
        .unwrap()
        .iter()
        .filter_map(|o| o.as_document().cloned())
        .filter(|o| o.get_str("msg").is_ok_and(|m| m.starts_with("Index Build")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_index_build_leaves_the_collection_usable_and_shows_progress() {
    let server = Server::start(BIN, TEST_COMMANDS);
    let client = server.client().await;
    let db = client.database("t");
    let coll = db.collection::<Document>("c");
    let docs: Vec<Document> = (0..5000)
        .map(|i| doc! { "_id": i, "a": i, "b": i % 7 })
        .collect();
    coll.insert_many(docs).await.unwrap();

    let before = fail_point(
        &client,
        "hangAfterStartingIndexBuild",
        "alwaysOn".into(),
        doc! {},
    )
    .await;
    let build = tokio::spawn({
        let db = db.clone();
        async move {
            db.run_command(
                doc! { "createIndexes": "c", "indexes": [{ "key": { "a": 1 }, "name": "a_1" }] },
            )
            .await
        }
    });
    wait_for_fail_point(&client, "hangAfterStartingIndexBuild", before + 1).await;
    let ops = index_builds(&client).await;
    assert_eq!(ops.len(), 1, "{ops:?}");
    assert_eq!(ops[0].get_str("ns").unwrap(), "t.c");
    // The build has passed its checks: updates (which take the namespace lock), reads and other
    // DDL on the collection go on.
    let r = coll
        .update_one(doc! { "_id": 1 }, doc! { "$set": { "x": 1 } })
        .await
        .unwrap();
    assert_eq!(r.modified_count, 1);
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 5000);
    assert!(!build.is_finished());
    fail_point(
        &client,
        "hangAfterStartingIndexBuild",
        "off".into(),
        doc! {},
    )
    .await;
    let reply = build.await.unwrap().unwrap();
    assert_eq!(reply.get_i32("numIndexesAfter").unwrap(), 2, "{reply}");
    assert!(index_builds(&client).await.is_empty());

    let before = fail_point(
        &client,
        "hangIndexBuildDuringScan",
        "alwaysOn".into(),
        doc! {},
    )
    .await;
    let build = tokio::spawn({
        let db = db.clone();
        async move {
            db.run_command(
                doc! { "createIndexes": "c", "indexes": [{ "key": { "b": 1 }, "name": "b_1" }] },
            )
            .await
        }
    });
    wait_for_fail_point(&client, "hangIndexBuildDuringScan", before + 1).await;
    let ops = index_builds(&client).await;
    assert_eq!(ops.len(), 1, "{ops:?}");
    let progress = ops[0].get_document("progress").unwrap();
    let done = progress.get_i64("done").unwrap();
    assert!(done > 0 && done < 5000, "{progress}");
    assert_eq!(progress.get_i64("total").unwrap(), 5000);
    assert!(
        ops[0]
            .get_str("msg")
            .unwrap()
            .contains(&format!("{done}/5000"))
    );
    fail_point(&client, "hangIndexBuildDuringScan", "off".into(), doc! {}).await;
    let reply = build.await.unwrap().unwrap();
    assert_eq!(reply.get_i32("numIndexesAfter").unwrap(), 3, "{reply}");
}

#[tokio::test]
async fn fsync_cache_and_checkpoint_settings() {
    let server = Server::start(
        BIN,
        &["--wiredTigerCacheSizeGB", "0.0625", "--syncdelay", "30"],
    );
    let client = server.client().await;
    client
        .database("t")
        .collection::<Document>("c")
        .insert_one(doc! { "_id": 1 })
        .await
        .unwrap();
    let r = admin_command(&client, doc! { "fsync": 1 }).await;
    assert_eq!(r.get_i32("numFiles").unwrap(), 1);
    assert_eq!(r.get_f64("ok").unwrap(), 1.0);
    // fsyncLock is supported (e2e/tests/diagnostic.rs proves writes wait); undo it at once.
    let locked = admin_command(&client, doc! { "fsync": 1, "lock": true }).await;
    assert_eq!(locked.get_i64("lockCount").unwrap(), 1);
    let unlocked = admin_command(&client, doc! { "fsyncUnlock": 1 }).await;
    assert_eq!(unlocked.get_i64("lockCount").unwrap(), 0);
    let elsewhere = client
        .database("t")
        .run_command(doc! { "fsync": 1 })
        .await
        .unwrap_err();
    assert_eq!(error_code(&elsewhere), 13);

    let status = admin_command(&client, doc! { "serverStatus": 1 }).await;
    let wt = status.get_document("wiredTiger").unwrap();
    let cache = wt.get_document("cache").unwrap();
    assert_eq!(cache.get_i64("maximum bytes configured").unwrap(), 64 << 20);
    for name in [
        "bytes currently in the cache",
        "tracked dirty bytes in the cache",
        "pages read into cache",
        "pages written from cache",
        "unmodified pages evicted",
    ] {
        assert!(cache.get_i64(name).is_ok(), "cache.{name}");
    }
    let txn = wt.get_document("transaction").unwrap();
    for name in [
        "transaction checkpoints",
        "transaction checkpoint most recent time (msecs)",
        "transaction checkpoint currently running",
    ] {
        assert!(txn.get_i64(name).is_ok(), "transaction.{name}");
    }
    assert_eq!(
        status
            .get_document("storageEngine")
            .unwrap()
            .get_str("name")
            .unwrap(),
        "cairn"
    );

    let opts = admin_command(&client, doc! { "getCmdLineOpts": 1 }).await;
    let storage = opts
        .get_document("parsed")
        .and_then(|p| p.get_document("storage"))
        .unwrap();
    let gb = storage
        .get_document("wiredTiger")
        .and_then(|w| w.get_document("engineConfig"))
        .and_then(|e| e.get_f64("cacheSizeGB"))
        .unwrap();
    assert_eq!(gb, 0.0625);
    assert_eq!(storage.get_f64("syncPeriodSecs").unwrap(), 30.0);

    // Without enableTestCommands the fail point commands do not exist.
    let hidden = client
        .database("admin")
        .run_command(doc! { "configureFailPoint": "blockStorageCall", "mode": "off" })
        .await
        .unwrap_err();
    assert_eq!(error_code(&hidden), 59);
}

/// Evicts every file of the data directory from the kernel's page cache (the files are synced:
/// every write the tests made was acknowledged durable, and the page file is written and synced
/// at checkpoints).
fn drop_from_page_cache(dbpath: &std::path::Path) {
    for entry in std::fs::read_dir(dbpath).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file()
            && let Ok(f) = std::fs::File::open(&path)
        {
            f.sync_all().unwrap();
            rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        }
    }
}

/// `serverStatus.metrics.storageJobs.{servedFromCache, movedToPool}`.
async fn tried_on_worker(client: &mongodb::Client) -> (i64, i64) {
    (
        status_number(client, "metrics.storageJobs.servedFromCache").await,
        status_number(client, "metrics.storageJobs.movedToPool").await,
    )
}

#[tokio::test]
async fn cached_reads_are_answered_on_the_worker_and_the_rest_on_the_pool() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let c = client.database("t").collection::<Document>("c");
    let docs: Vec<Document> = (0..20_000)
        .map(|i| doc! { "_id": i, "x": i, "pad": "p".repeat(50) })
        .collect();
    c.insert_many(docs).await.unwrap();

    // Point reads of documents just written: their pages are cached.
    let before = tried_on_worker(&client).await;
    for i in 0..50 {
        let d = c.find_one(doc! { "_id": i * 7 }).await.unwrap().unwrap();
        assert_eq!(d.get_i32("x").unwrap(), i * 7);
    }
    // Each read is tried once; one that meets a lock a background pass holds (a checkpoint)
    // moves to the pool, so only most, not all, are answered on the worker.
    let after = tried_on_worker(&client).await;
    assert_eq!((after.0 - before.0) + (after.1 - before.1), 50);
    assert!(after.0 - before.0 >= 25, "{before:?} -> {after:?}");

    // A document whose bytes left the page cache is read on the pool, then it is cached again.
    // Eviction is advice the kernel may not take at once for every page: try a few documents.
    let mut moved = None;
    for id in (12_000..12_020).step_by(2) {
        drop_from_page_cache(&server.dbpath);
        let before = tried_on_worker(&client).await;
        let d = c.find_one(doc! { "_id": id }).await.unwrap().unwrap();
        assert_eq!(d.get_i32("x").unwrap(), id);
        let after = tried_on_worker(&client).await;
        assert_eq!(
            (after.0 - before.0) + (after.1 - before.1),
            1,
            "one read, tried once"
        );
        if after.1 - before.1 == 1 {
            moved = Some((id, after));
            break;
        }
    }
    let (id, mut seen) = moved.expect("no read of an evicted document moved to the pool");
    let mut cached_again = false;
    for _ in 0..10 {
        c.find_one(doc! { "_id": id }).await.unwrap().unwrap();
        let now = tried_on_worker(&client).await;
        if now.0 == seen.0 + 1 {
            cached_again = true;
            break;
        }
        seen = now;
    }
    assert!(
        cached_again,
        "the document read on the pool is served on the worker again"
    );

    // A find that scans 19,000 documents before its first batch is full runs past the worker's
    // time (500 µs) and moves to the pool; its cursor is registered once, by the run that
    // answers, and returns every document once.
    let before = tried_on_worker(&client).await;
    let mut cursor = c
        .find(doc! { "x": { "$gte": 19_000 }, "pad": { "$ne": "" } })
        .batch_size(10)
        .await
        .unwrap();
    let mut seen = std::collections::BTreeSet::new();
    while cursor.advance().await.unwrap() {
        let d = cursor.deserialize_current().unwrap();
        assert!(
            seen.insert(d.get_i32("_id").unwrap()),
            "a document came twice"
        );
    }
    assert_eq!(seen.len(), 1_000);
    let after = tried_on_worker(&client).await;
    assert!(
        after.1 - before.1 >= 1,
        "the scan moved to the pool: {before:?} -> {after:?}"
    );
    let open = status_number(&client, "metrics.cursor.open.total").await;
    assert_eq!(open, 0, "no cursor left behind by a dropped attempt");

    // Turned off, nothing is tried on the worker.
    admin_command(
        &client,
        doc! { "setParameter": 1, "cairnReadsOnWorker": false },
    )
    .await;
    let before = tried_on_worker(&client).await;
    for i in 0..10 {
        c.find_one(doc! { "_id": i }).await.unwrap().unwrap();
    }
    assert_eq!(tried_on_worker(&client).await, before);
}

/// `serverStatus.metrics.storageJobs.{writesOnWorker, writesMovedToPool}`.
async fn writes_tried(client: &mongodb::Client) -> (i64, i64) {
    (
        status_number(client, "metrics.storageJobs.writesOnWorker").await,
        status_number(client, "metrics.storageJobs.writesMovedToPool").await,
    )
}

#[tokio::test]
async fn single_document_writes_are_done_on_the_worker_and_the_rest_on_the_pool() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("t");
    db.create_collection("w").await.unwrap();
    let c = db.collection::<Document>("w");
    c.create_index(mongodb::IndexModel::builder().keys(doc! { "k": 1 }).build())
        .await
        .unwrap();

    // Durable single inserts into an existing collection: each tried once on the worker;
    // one that meets a lock a background pass holds moves to the pool. Counted once each.
    let (ops_before, tried_before) = (
        status_number(&client, "opcounters.insert").await,
        writes_tried(&client).await,
    );
    for i in 0..200 {
        c.insert_one(doc! { "_id": i, "k": i % 17, "n": 0, "pad": "p".repeat(100) })
            .await
            .unwrap();
    }
    let tried = writes_tried(&client).await;
    let (on_worker, moved) = (tried.0 - tried_before.0, tried.1 - tried_before.1);
    assert_eq!(on_worker + moved, 200, "{tried_before:?} -> {tried:?}");
    assert!(on_worker >= 100, "{tried_before:?} -> {tried:?}");
    assert_eq!(
        status_number(&client, "opcounters.insert").await - ops_before,
        200
    );
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 200);

    // An update whose document's bytes left the page cache moves to the pool, and is applied
    // once: $inc makes a second application visible. Eviction is advice the kernel may not take
    // at once: try a few documents.
    let mut moved_one = false;
    for id in (50..70).step_by(2) {
        drop_from_page_cache(&server.dbpath);
        let (ops, before) = (
            status_number(&client, "opcounters.update").await,
            writes_tried(&client).await,
        );
        let r = c
            .update_one(
                doc! { "_id": id },
                doc! { "$inc": { "n": 1 }, "$set": { "k": 99 } },
            )
            .await
            .unwrap();
        assert_eq!((r.matched_count, r.modified_count), (1, 1));
        let after = writes_tried(&client).await;
        assert_eq!((after.0 - before.0) + (after.1 - before.1), 1, "tried once");
        assert_eq!(status_number(&client, "opcounters.update").await - ops, 1);
        let d = c.find_one(doc! { "_id": id }).await.unwrap().unwrap();
        assert_eq!(d.get_i32("n").unwrap(), 1, "the update applied once");
        if after.1 - before.1 == 1 {
            moved_one = true;
            break;
        }
    }
    assert!(
        moved_one,
        "no update of an evicted document moved to the pool"
    );
    // The index follows every update, on the worker or not.
    let moved_keys = c.count_documents(doc! { "k": 99 }).await.unwrap();
    assert!(moved_keys >= 1);
    assert_eq!(
        c.count_documents(doc! { "k": { "$lt": 99 } })
            .await
            .unwrap()
            + moved_keys,
        200
    );

    // deleteOne is tried; updateMany and deleteMany (several documents) are not.
    let before = writes_tried(&client).await;
    assert_eq!(
        c.delete_one(doc! { "_id": 0 }).await.unwrap().deleted_count,
        1
    );
    let after = writes_tried(&client).await;
    assert_eq!((after.0 - before.0) + (after.1 - before.1), 1);
    let r = c
        .update_many(doc! { "k": 3 }, doc! { "$inc": { "n": 10 } })
        .await
        .unwrap();
    assert!(r.modified_count > 1);
    c.delete_many(doc! { "k": 4 }).await.unwrap();
    assert_eq!(writes_tried(&client).await, after);

    // Turned off, nothing is tried on the worker.
    admin_command(
        &client,
        doc! { "setParameter": 1, "cairnWritesOnWorker": false },
    )
    .await;
    c.insert_one(doc! { "_id": 1_000 }).await.unwrap();
    c.update_one(doc! { "_id": 1_000 }, doc! { "$set": { "a": 1 } })
        .await
        .unwrap();
    assert_eq!(writes_tried(&client).await, after);
}
