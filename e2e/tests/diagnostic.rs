//! Proves the admin and diagnostic commands tools call: `fsync {lock: true}` really holds writes
//! back (reads go on) until `fsyncUnlock`, `compact` reclaims dead log space, `dataSize`, the
//! plan-cache commands, `$planCacheStats`, cluster parameters, `top`, `lockInfo`,
//! `connPoolStats`, `validateDBMetadata`, `serverStatus`'s group-commit and allocator sections,
//! and their argument errors. How: a real `cairn` process
//! driven by the Rust driver with raw `runCommand`; the blocked write is a spawned task whose
//! completion is checked after the unlock, and the `fsyncLockedWrite` fail point says when it
//! reached the locked gate (no sleeps, no timing assertions).

use bson::{Document, doc};
use cairn_e2e::{Server, error_code, error_message};
use futures_util::TryStreamExt;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

#[tokio::test]
async fn fsync_lock_holds_writes_until_unlocked() {
    let server = Server::start(BIN, &["--setParameter", "enableTestCommands=1"]);
    let client = server.client().await;
    let admin = client.database("admin");
    let c = client.database("fl").collection::<Document>("c");
    admin
        .run_command(doc! { "configureFailPoint": "fsyncLockedWrite", "mode": "alwaysOn" })
        .await
        .unwrap();
    c.insert_one(doc! { "_id": 1 }).await.unwrap();
    let e = admin
        .run_command(doc! { "fsyncUnlock": 1 })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 20);
    assert_eq!(error_message(&e), "fsyncUnlock called when not locked");

    let r = admin
        .run_command(doc! { "fsync": 1, "lock": true })
        .await
        .unwrap();
    assert_eq!(r.get_i64("lockCount").unwrap(), 1);
    assert_eq!(
        r.get_str("info").unwrap(),
        "now locked against writes, use db.fsyncUnlock() to unlock"
    );
    let r = admin
        .run_command(doc! { "fsync": 1, "lock": true })
        .await
        .unwrap();
    assert_eq!(r.get_i64("lockCount").unwrap(), 2);
    let op = admin.run_command(doc! { "currentOp": 1 }).await.unwrap();
    assert!(op.get_bool("fsyncLock").unwrap());

    // A write from another connection waits; reads are answered meanwhile.
    let other = server.client().await;
    let writer = tokio::spawn(async move {
        other
            .database("fl")
            .collection::<Document>("c")
            .insert_one(doc! { "_id": 2 })
            .await
    });
    // The fail point counts the write arriving at the locked gate.
    admin
        .run_command(
            doc! { "waitForFailPoint": "fsyncLockedWrite", "timesEntered": 1, "maxTimeMS": 30000 },
        )
        .await
        .unwrap();
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 1);
    let one = c.find_one(doc! { "_id": 1 }).await.unwrap();
    assert!(one.is_some());
    assert!(!writer.is_finished(), "the write must wait for the unlock");

    let r = admin.run_command(doc! { "fsyncUnlock": 1 }).await.unwrap();
    assert_eq!(r.get_i64("lockCount").unwrap(), 1);
    assert_eq!(r.get_str("info").unwrap(), "fsyncUnlock completed");
    // Still locked once: the write is still waiting (its document is not there).
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 1);
    assert!(!writer.is_finished());
    let r = admin.run_command(doc! { "fsyncUnlock": 1 }).await.unwrap();
    assert_eq!(r.get_i64("lockCount").unwrap(), 0);
    writer.await.unwrap().unwrap();
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 2);
    let op = admin.run_command(doc! { "currentOp": 1 }).await.unwrap();
    assert!(!op.contains_key("fsyncLock"));
}

#[tokio::test]
async fn compact_and_data_size() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("cd");
    let c = db.collection::<Document>("c");
    // 17,000 documents of 4 kB fill more than one 64 MiB log segment, so that compaction has a
    // whole segment (not the one being written) to reclaim once they are deleted.
    let pad = "x".repeat(4000);
    c.insert_many((0..17_000).map(|i| doc! { "_id": i, "pad": pad.clone() }))
        .await
        .unwrap();
    let size = client
        .database("admin")
        .run_command(doc! { "dataSize": "cd.c" })
        .await
        .unwrap();
    assert_eq!(size.get_i64("numObjects").unwrap(), 17_000);
    assert!(size.get_i64("size").unwrap() > 17_000 * 4000);
    assert!(!size.get_bool("estimate").unwrap());
    let range = db
        .run_command(doc! { "dataSize": "cd.c", "keyPattern": { "_id": 1 }, "min": { "_id": 10 }, "max": { "_id": 20 } })
        .await
        .unwrap();
    assert_eq!(range.get_i64("numObjects").unwrap(), 10);
    let empty = db
        .run_command(doc! { "dataSize": "cd.none" })
        .await
        .unwrap();
    assert_eq!(empty.get_i32("size").unwrap(), 0);
    let e = db
        .run_command(doc! { "dataSize": "cd.c", "min": { "_id": 1 } })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 2);

    c.delete_many(doc! {}).await.unwrap();
    let dry = db
        .run_command(doc! { "compact": "c", "dryRun": true })
        .await
        .unwrap();
    assert!(dry.get_i64("estimatedBytesFreed").unwrap() > 0);
    let r = db.run_command(doc! { "compact": "c" }).await.unwrap();
    assert!(r.get_i64("bytesFreed").unwrap() > 0, "{r}");
    let e = db
        .run_command(doc! { "compact": "nope" })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 26);
    let e = db
        .run_command(doc! { "compact": "c", "bogus": 1 })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 40415);
    // The data is still readable after compaction.
    c.insert_one(doc! { "_id": "after" }).await.unwrap();
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 1);
}

#[tokio::test]
async fn plan_cache_and_other_diagnostics() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let admin = client.database("admin");
    let db = client.database("pc");
    let c = db.collection::<Document>("c");
    c.insert_one(doc! { "a": 1 }).await.unwrap();
    db.run_command(doc! { "planCacheClear": "c" })
        .await
        .unwrap();
    db.run_command(
        doc! { "planCacheSetFilter": "c", "query": { "a": 1 }, "indexes": [{ "a": 1 }] },
    )
    .await
    .unwrap();
    let list = db
        .run_command(doc! { "planCacheListFilters": "c" })
        .await
        .unwrap();
    assert_eq!(list.get_array("filters").unwrap().len(), 1);
    db.run_command(doc! { "planCacheClearFilters": "c" })
        .await
        .unwrap();
    let e = db
        .run_command(doc! { "planCacheSetFilter": "c", "indexes": [{ "a": 1 }] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 2);
    let stats: Vec<Document> = c
        .aggregate(vec![doc! { "$planCacheStats": {} }])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert!(stats.is_empty());

    let params = admin
        .run_command(doc! { "getClusterParameter": "*" })
        .await
        .unwrap();
    assert!(!params.get_array("clusterParameters").unwrap().is_empty());
    admin
        .run_command(doc! { "setClusterParameter": { "pauseMigrationsDuringMultiUpdates": { "enabled": true } } })
        .await
        .unwrap();
    let e = admin
        .run_command(doc! { "getDefaultRWConcern": 1 })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 51300);

    let top = admin.run_command(doc! { "top": 1 }).await.unwrap();
    assert!(top.get_document("totals").unwrap().contains_key("pc.c"));
    let e = db.run_command(doc! { "top": 1 }).await.unwrap_err();
    assert_eq!(error_code(&e), 13);
    let locks = admin.run_command(doc! { "lockInfo": 1 }).await.unwrap();
    assert!(locks.get_array("lockInfo").unwrap().is_empty());
    let pools = admin
        .run_command(doc! { "connPoolStats": 1 })
        .await
        .unwrap();
    assert_eq!(pools.get_i32("totalInUse").unwrap(), 0);
    let v = db
        .run_command(
            doc! { "validateDBMetadata": 1, "apiParameters": { "version": "1", "strict": true } },
        )
        .await
        .unwrap();
    assert!(v.get_array("apiVersionErrors").unwrap().is_empty());
    let e = admin
        .run_command(doc! { "killSessions": [{ "nope": 1 }] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 40415);
    admin
        .run_command(doc! { "killAllSessionsByPattern": [] })
        .await
        .unwrap();
}

/// `serverStatus.wiredTiger.log` counts group commit's syncs and whom they covered, and
/// `serverStatus: 1, jemalloc: 2` carries the allocator's own report (`formattedString`).
#[tokio::test]
async fn server_status_reports_group_commit_and_the_allocator() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let admin = client.database("admin");
    let c = client.database("gc").collection::<Document>("c");
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let c = c.clone();
            tokio::spawn(async move {
                for i in 0..10 {
                    c.insert_one(doc! { "_id": w * 100 + i }).await.unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let status = admin.run_command(doc! { "serverStatus": 1 }).await.unwrap();
    let log = status
        .get_document("wiredTiger")
        .and_then(|w| w.get_document("log"))
        .unwrap();
    let n = |k: &str| {
        log.get_i64(k)
            .unwrap_or_else(|e| panic!("{k}: {e} in {log}"))
    };
    assert!(n("log sync operations") >= 1, "{log}");
    // A writer already covered by a sync that began before it asked is not counted (see
    // `storage::commit::stats`), so only "some" is certain here.
    assert!(n("group commit writers made durable") >= 1, "{log}");
    let by_who = n("group commit syncs led by a writer")
        + n("group commit syncs by the commit thread for waiters")
        + n("group commit syncs by the commit thread's timer");
    assert_eq!(by_who, n("log sync operations"), "{log}");
    assert_eq!(n("group commit syncs failed"), 0);
    let histogram: i64 = log
        .get_document("group commit writers per sync")
        .unwrap()
        .values()
        .map(|v| v.as_i64().unwrap())
        .sum();
    assert!(
        histogram >= 1 && histogram <= n("log sync operations"),
        "{log}"
    );
    assert!(
        status
            .get_document("jemalloc")
            .unwrap()
            .get("formattedString")
            .is_none()
    );

    let verbose = admin
        .run_command(doc! { "serverStatus": 1, "jemalloc": 2 })
        .await
        .unwrap();
    let report = verbose
        .get_document("jemalloc")
        .and_then(|j| j.get_str("formattedString"))
        .unwrap();
    assert!(report.contains("jemalloc statistics"), "{report}");
    assert!(report.contains("bins:"), "{report}");
}

/// After work, the async workers hand their allocator caches back when they go idle
/// (`alloc_trim`, issue 12): `serverStatus.jemalloc.threadCacheFlushes` counts it. The trimmer
/// looks every 5 s, so this polls (bounded) rather than asserting when.
#[tokio::test]
async fn idle_workers_hand_their_allocator_caches_back() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let admin = client.database("admin");
    let c = client.database("trim").collection::<Document>("c");
    let docs: Vec<Document> = (0..2_000i32)
        .map(|i| doc! { "_id": i, "s": "x".repeat(i as usize % 300) })
        .collect();
    c.insert_many(docs).await.unwrap();
    assert_eq!(
        c.find(doc! {})
            .await
            .unwrap()
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
            .len(),
        2_000
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let status = admin.run_command(doc! { "serverStatus": 1 }).await.unwrap();
        let j = status.get_document("jemalloc").unwrap().clone();
        assert!(j.get_i64("tcacheBytes").unwrap() >= 0, "{j}");
        if j.get_i64("threadCacheFlushes").unwrap() >= 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no worker flushed its cache: {j}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
