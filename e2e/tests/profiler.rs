//! Proves the database profiler behaves as mongod's: `profile` levels, slowms, sampleRate and
//! filter; entries in `system.profile` with mongod's fields, sorted by `ts`, secrets redacted;
//! and a MongoEngine-style `query_counter` (count entries around a block of operations) gives
//! exact counts; `system.profile` is a 1 MB capped collection (or the one the client created);
//! `--profile`, `--slowms` and `--slowOpSampleRate` at start-up. How: the Rust driver against
//! a real cairn process.

use bson::{Bson, Document, doc};
use cairn_e2e::Server;
use futures_util::TryStreamExt;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

/// MongoEngine's `query_counter`: profiling on from a clean `system.profile`; each reading of
/// the count is itself an operation, which later readings subtract.
struct QueryCounter {
    db: mongodb::Database,
    own_queries: u64,
}

impl QueryCounter {
    async fn start(db: &mongodb::Database) -> QueryCounter {
        db.run_command(doc! { "profile": 0 }).await.unwrap();
        db.collection::<Document>("system.profile")
            .drop()
            .await
            .unwrap();
        db.run_command(doc! { "profile": 2 }).await.unwrap();
        QueryCounter {
            db: db.clone(),
            own_queries: 0,
        }
    }

    async fn count(&mut self) -> u64 {
        let n = self
            .db
            .collection::<Document>("system.profile")
            .count_documents(doc! {
                "ns": { "$ne": format!("{}.system.indexes", self.db.name()) },
                "op": { "$ne": "killcursors" },
                "command.killCursors": { "$exists": false },
            })
            .await
            .unwrap();
        let counted = n - self.own_queries;
        self.own_queries += 1;
        counted
    }
}

#[tokio::test]
async fn query_counter_counts_exactly() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("prof");
    let c = db.collection::<Document>("c");
    c.insert_one(doc! { "_id": 0 }).await.unwrap();
    let mut q = QueryCounter::start(&db).await;
    assert_eq!(q.count().await, 0);
    for i in 1..=10 {
        c.insert_one(doc! { "_id": i, "a": i }).await.unwrap();
    }
    assert_eq!(q.count().await, 10);
    for _ in 0..5 {
        c.find_one(doc! { "a": 3 }).await.unwrap();
    }
    assert_eq!(q.count().await, 15);
    c.update_many(doc! {}, doc! { "$inc": { "a": 1 } })
        .await
        .unwrap();
    c.delete_one(doc! { "_id": 1 }).await.unwrap();
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 10);
    assert_eq!(q.count().await, 18);
    // A cursor over several batches: one find and one getMore per further batch.
    let all: Vec<Document> = c
        .find(doc! {})
        .batch_size(4)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(all.len(), 10);
    assert_eq!(q.count().await, 18 + 3);
    db.run_command(doc! { "profile": 0 }).await.unwrap();
    c.find_one(doc! {}).await.unwrap();
    assert_eq!(q.count().await, 21);
}

#[tokio::test]
async fn entries_have_mongods_shape() {
    let server = Server::start(BIN, &[]);
    let client = server.client_with(&["appName=profiled"]).await;
    let db = client.database("prof");
    let c = db.collection::<Document>("c");
    c.insert_many((0..20).map(|i| doc! { "_id": i, "a": i % 4 }))
        .await
        .unwrap();
    db.run_command(
        doc! { "createIndexes": "c", "indexes": [ { "key": { "a": 1 }, "name": "a_1" } ] },
    )
    .await
    .unwrap();
    let was = db.run_command(doc! { "profile": 2 }).await.unwrap();
    assert_eq!(was.get_i32("was").unwrap(), 0);
    let found: Vec<Document> = c
        .find(doc! { "a": 2 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(found.len(), 5);
    c.find_one(doc! { "_id": 3 }).await.unwrap();
    db.run_command(doc! { "createUser": "u", "pwd": "secret", "roles": [] })
        .await
        .unwrap();
    let err = db
        .run_command(doc! { "find": "c", "filter": { "$bad": 1 } })
        .await;
    assert!(err.is_err());
    let entries: Vec<Document> = db
        .collection::<Document>("system.profile")
        .find(doc! {})
        .sort(doc! { "ts": 1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(entries.len(), 4, "{entries:?}");
    let find = &entries[0];
    assert_eq!(find.get_str("op").unwrap(), "query");
    assert_eq!(find.get_str("ns").unwrap(), "prof.c");
    assert_eq!(
        find.get_document("command")
            .unwrap()
            .get_document("filter")
            .unwrap(),
        &doc! { "a": 2 }
    );
    assert_eq!(find.get_i64("keysExamined").unwrap(), 5);
    assert_eq!(find.get_i64("docsExamined").unwrap(), 5);
    assert_eq!(find.get_i64("nreturned").unwrap(), 5);
    assert_eq!(find.get_str("planSummary").unwrap(), "IXSCAN { a: 1 }");
    assert!(find.get_i64("responseLength").unwrap() > 0);
    assert!(find.get_i64("millis").is_ok());
    assert_eq!(
        find.get_i64("workingMillis").ok(),
        find.get_i64("millis").ok(),
        "8.0"
    );
    assert_eq!(
        find.get_str("queryShapeHash").ok().map(str::len),
        Some(64),
        "8.0"
    );
    assert!(find.get_datetime("ts").is_ok());
    assert_eq!(find.get_str("client").unwrap(), "127.0.0.1");
    assert_eq!(find.get_str("appName").unwrap(), "profiled");
    assert_eq!(find.get_str("user").unwrap(), "");
    assert_eq!(find.get_document("locks").unwrap(), &doc! {});
    assert_eq!(entries[1].get_str("planSummary").unwrap(), "IDHACK");
    let create_user = entries[2].get_document("command").unwrap();
    assert_eq!(create_user.get_str("pwd").unwrap(), "xxx");
    assert_eq!(entries[3].get_f64("ok").unwrap(), 0.0);
    assert_eq!(entries[3].get_i32("errCode").unwrap(), 2);
    // Dropping system.profile needs profiling off.
    let e = db
        .collection::<Document>("system.profile")
        .drop()
        .await
        .unwrap_err();
    assert_eq!(cairn_e2e::error_code(&e), 20);
}

#[tokio::test]
async fn level_one_slowms_sample_rate_and_filter() {
    let server = Server::start(BIN, &[]);
    let db = server.client().await.database("prof");
    let c = db.collection::<Document>("c");
    c.insert_one(doc! { "_id": 0 }).await.unwrap();
    let profile = db.collection::<Document>("system.profile");
    // Level 1 with a high slowms: nothing is slow enough.
    let r = db
        .run_command(doc! { "profile": 1, "slowms": 100_000 })
        .await
        .unwrap();
    assert_eq!(r.get_i32("was").unwrap(), 0);
    c.find_one(doc! {}).await.unwrap();
    assert_eq!(profile.count_documents(doc! {}).await.unwrap(), 0);
    // slowms -1 (everything is slow) but sampleRate 0: still nothing.
    db.run_command(doc! { "profile": 1, "slowms": -1, "sampleRate": 0.0 })
        .await
        .unwrap();
    c.find_one(doc! {}).await.unwrap();
    assert_eq!(profile.count_documents(doc! {}).await.unwrap(), 0);
    db.run_command(doc! { "profile": 1, "sampleRate": 1.0 })
        .await
        .unwrap();
    c.find_one(doc! {}).await.unwrap();
    // The find, and the count that read it.
    assert_eq!(profile.count_documents(doc! {}).await.unwrap(), 1);
    assert_eq!(
        profile
            .count_documents(doc! { "op": "query" })
            .await
            .unwrap(),
        1
    );
    // A filter decides instead of slowms.
    db.run_command(doc! { "profile": 1, "slowms": 100_000, "filter": { "op": "insert" } })
        .await
        .unwrap();
    c.insert_one(doc! { "_id": 1 }).await.unwrap();
    c.find_one(doc! {}).await.unwrap();
    assert_eq!(
        profile
            .count_documents(doc! { "op": "insert" })
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        profile
            .count_documents(doc! { "op": "query" })
            .await
            .unwrap(),
        1
    );
    let r = db.run_command(doc! { "profile": -1 }).await.unwrap();
    assert_eq!(r.get_i32("was").unwrap(), 1);
    assert_eq!(r.get_document("filter").unwrap(), &doc! { "op": "insert" });
    for bad in [
        doc! { "profile": 3 },
        doc! { "profile": 1, "sampleRate": 2.0 },
    ] {
        let e = db.run_command(bad).await.unwrap_err();
        assert_eq!(cairn_e2e::error_code(&e), 2);
    }
}

#[tokio::test]
async fn system_profile_stays_bounded() {
    let server = Server::start(BIN, &[]);
    let db = server.client().await.database("prof");
    let c = db.collection::<Document>("c");
    db.run_command(doc! { "profile": 2 }).await.unwrap();
    let pad = "x".repeat(4000);
    for i in 0..400 {
        c.insert_one(doc! { "_id": i, "pad": &pad }).await.unwrap();
    }
    db.run_command(doc! { "profile": 0 }).await.unwrap();
    let stats = db
        .run_command(doc! { "collStats": "system.profile" })
        .await
        .unwrap();
    let size = stats
        .get("size")
        .and_then(Bson::as_i64)
        .or_else(|| stats.get_i32("size").ok().map(i64::from))
        .unwrap();
    assert!(size <= 1024 * 1024, "{size}");
    // The newest entries are the ones kept.
    let last = db
        .collection::<Document>("system.profile")
        .find_one(doc! {})
        .sort(doc! { "$natural": -1 })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        last.get_document("command")
            .unwrap()
            .get_array("documents")
            .unwrap()[0]
            .as_document()
            .unwrap()
            .get_i32("_id")
            .unwrap(),
        399
    );
}

/// How many profiled inserts into `<db>.c` `system.profile` holds.
async fn profiled_inserts(db: &mongodb::Database) -> usize {
    db.collection::<Document>("system.profile")
        .count_documents(doc! { "op": "insert", "ns": format!("{}.c", db.name()) })
        .await
        .unwrap() as usize
}

#[tokio::test]
async fn system_profile_is_capped_and_may_be_created_first() {
    let server = Server::start(BIN, &[]);
    let db = server.client().await.database("prof");
    let c = db.collection::<Document>("c");
    db.run_command(doc! { "profile": 2 }).await.unwrap();
    c.insert_one(doc! { "_id": 1 }).await.unwrap();
    let entry = cairn_e2e::collection_entry(&db, "system.profile").await;
    assert_eq!(
        entry.get_document("options").unwrap(),
        &doc! { "capped": true, "size": 1024 * 1024_i64 }
    );
    let stats = db
        .run_command(doc! { "collStats": "system.profile" })
        .await
        .unwrap();
    assert_eq!(stats.get_bool("capped").ok(), Some(true));
    // It exists now: create answers 48, as for any existing collection.
    let e = db
        .run_command(doc! { "create": "system.profile", "capped": true, "size": 4096 })
        .await
        .unwrap_err();
    assert_eq!(cairn_e2e::error_code(&e), 48);

    // mongod's way to resize it: profiling off, drop, create with the size wanted, on again.
    db.run_command(doc! { "profile": 0 }).await.unwrap();
    db.collection::<Document>("system.profile")
        .drop()
        .await
        .unwrap();
    db.run_command(doc! { "create": "system.profile", "capped": true, "size": 20_000 })
        .await
        .unwrap();
    db.run_command(doc! { "profile": 2 }).await.unwrap();
    for i in 10..210 {
        c.insert_one(doc! { "_id": i }).await.unwrap();
    }
    let entry = cairn_e2e::collection_entry(&db, "system.profile").await;
    assert_eq!(
        entry
            .get_document("options")
            .unwrap()
            .get_i64("size")
            .unwrap(),
        20_000
    );
    let kept = profiled_inserts(&db).await;
    assert!(
        kept > 0 && kept < 200,
        "the small capped collection dropped the oldest: {kept}"
    );
    let stats = db
        .run_command(doc! { "collStats": "system.profile" })
        .await
        .unwrap();
    let size = stats.get("size").and_then(Bson::as_i64).unwrap_or(0);
    assert!(size <= 20_000, "{size}");
}

#[tokio::test]
async fn start_up_flags_set_level_threshold_and_sample_rate() {
    // `--profile 2`: every database is profiled without a `profile` command.
    let server = Server::start(BIN, &["--profile", "2"]);
    let db = server.client().await.database("flags");
    db.collection::<Document>("c")
        .insert_one(doc! { "_id": 1 })
        .await
        .unwrap();
    assert_eq!(profiled_inserts(&db).await, 1);
    let now = db.run_command(doc! { "profile": -1 }).await.unwrap();
    assert_eq!(now.get_i32("was").unwrap(), 2);
    // Setting one database's level leaves the others at the start-up level.
    db.run_command(doc! { "profile": 0 }).await.unwrap();
    let other = server.client().await.database("other");
    other
        .collection::<Document>("c")
        .insert_one(doc! { "_id": 1 })
        .await
        .unwrap();
    assert_eq!(profiled_inserts(&other).await, 1);
    drop(server);

    // Level 1, everything slow, but a sample rate of 0: nothing is profiled until the rate
    // is raised.
    let server = Server::start(
        BIN,
        &["--profile", "1", "--slowms=-1", "--slowOpSampleRate", "0"],
    );
    let db = server.client().await.database("flags");
    let c = db.collection::<Document>("c");
    c.insert_one(doc! { "_id": 1 }).await.unwrap();
    let now = db.run_command(doc! { "profile": -1 }).await.unwrap();
    assert_eq!(now.get_i32("was").unwrap(), 1);
    assert_eq!(now.get_i32("slowms").unwrap(), -1);
    assert_eq!(now.get_f64("sampleRate").unwrap(), 0.0);
    assert_eq!(profiled_inserts(&db).await, 0);
    db.run_command(doc! { "profile": 1, "sampleRate": 1.0 })
        .await
        .unwrap();
    c.insert_one(doc! { "_id": 2 }).await.unwrap();
    assert_eq!(profiled_inserts(&db).await, 1);
}
