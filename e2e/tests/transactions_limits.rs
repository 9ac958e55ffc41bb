// Proves the limits and lifecycle of multi-document transactions: namespace locks against DDL (LockTimeout 24, DDL waiting, maxTimeMS, killOp), the write-set bound (388), counters (active while a statement runs), currentOp's idle transactions, killSessions and lifetime expiry freeing the locks, and a commit waiting while fsync-locked.
// How: a real `--replSet` server per test; DDL runs on a second connection in a task of its own while a transaction holds its namespace, and currentOp shows when it waits.

use bson::{Document, doc};
use cairn_e2e::{Server, error_code};
use mongodb::{Client, ClientSession, Collection, Database};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");
/// Bound on every wait for something the server does by itself (a DDL proceeding, a reap).
const WAIT_MAX: Duration = Duration::from_secs(20);

async fn initiated(args: &[&str]) -> Server {
    Server::start_initiated(BIN, args).await
}

fn admin(client: &Client) -> Database {
    client.database("admin")
}

async fn status(client: &Client) -> Document {
    admin(client)
        .run_command(doc! { "serverStatus": 1 })
        .await
        .expect("serverStatus")
}

async fn txn_counters(client: &Client) -> Document {
    status(client)
        .await
        .get_document("transactions")
        .expect("transactions")
        .clone()
}

/// The opid of the running command named `name` once currentOp shows it.
async fn wait_for_op(client: &Client, name: &str) -> i64 {
    let start = Instant::now();
    loop {
        let r = admin(client)
            .run_command(doc! { "currentOp": 1 })
            .await
            .expect("currentOp");
        let ops = r.get_array("inprog").expect("inprog");
        let found = ops.iter().filter_map(|o| o.as_document()).find(|o| {
            o.get_document("command")
                .is_ok_and(|c| c.keys().next().map(String::as_str) == Some(name))
        });
        if let Some(op) = found {
            return op.get_i64("opid").expect("opid");
        }
        assert!(
            start.elapsed() < WAIT_MAX,
            "{name} never showed in currentOp"
        );
        tokio::task::yield_now().await;
    }
}

/// Runs `cmd` on `db` in a task of its own (a connection of its own from the pool).
fn spawn_command(
    client: &Client,
    db: &str,
    cmd: Document,
) -> tokio::task::JoinHandle<mongodb::error::Result<Document>> {
    let db = client.database(db);
    tokio::spawn(async move { db.run_command(cmd).await })
}

async fn finished<T>(h: tokio::task::JoinHandle<T>) -> T {
    tokio::time::timeout(WAIT_MAX, h)
        .await
        .expect("the DDL proceeds")
        .expect("task")
}

/// A session with an open transaction that inserted into `coll`.
async fn holding(client: &Client, coll: &Collection<Document>, id: i32) -> ClientSession {
    let mut s = client.start_session().await.expect("session");
    s.start_transaction().await.expect("start");
    coll.insert_one(doc! { "_id": id })
        .session(&mut s)
        .await
        .expect("insert in transaction");
    s
}

#[tokio::test]
async fn a_statement_behind_a_waiting_ddl_times_out_with_24_and_aborts_its_transaction() {
    let server = initiated(&[
        "--setParameter",
        "maxTransactionLockRequestTimeoutMillis=20",
    ])
    .await;
    let client = server.client().await;
    let p = admin(&client)
        .run_command(doc! { "getParameter": 1, "maxTransactionLockRequestTimeoutMillis": 1 })
        .await
        .expect("getParameter");
    let timeout = p
        .get("maxTransactionLockRequestTimeoutMillis")
        .and_then(|v| match v {
            bson::Bson::Int32(n) => Some(i64::from(*n)),
            bson::Bson::Int64(n) => Some(*n),
            _ => None,
        });
    assert_eq!(timeout, Some(20), "{p}");
    let c = client.database("t").collection::<Document>("c");
    c.insert_one(doc! { "_id": 0 }).await.expect("seed");
    let mut holder = holding(&client, &c, 1).await;
    let ddl = spawn_command(
        &client,
        "t",
        doc! { "createIndexes": "c", "indexes": [ { "key": { "k": 1 }, "name": "k_1" } ] },
    );
    wait_for_op(&client, "createIndexes").await;

    // The DDL queued for the collection: a later transaction cannot get it in time.
    let mut late = client.start_session().await.expect("session");
    late.start_transaction().await.expect("start");
    let e = c
        .find_one(doc! {})
        .session(&mut late)
        .await
        .expect_err("lock timeout");
    assert_eq!(error_code(&e), 24, "{e}");
    assert!(e.contains_label("TransientTransactionError"), "{e}");
    let e = c
        .insert_one(doc! { "_id": 2 })
        .session(&mut late)
        .await
        .expect_err("the transaction was aborted");
    assert_eq!(error_code(&e), 251, "{e}");
    assert!(!ddl.is_finished(), "the DDL still waits for the holder");

    holder.commit_transaction().await.expect("commit");
    finished(ddl).await.expect("createIndexes after the commit");
    assert_eq!(crate::transactions::ids(&c).await, vec![0, 1]);
    let t = txn_counters(&client).await;
    assert_eq!(t.get_i64("totalStarted").ok(), Some(2), "{t}");
    assert_eq!(t.get_i64("totalCommitted").ok(), Some(1), "{t}");
    assert_eq!(t.get_i64("totalAborted").ok(), Some(1), "{t}");
    assert_eq!(t.get_i64("currentOpen").ok(), Some(0), "{t}");
}

#[tokio::test]
async fn ddl_waits_bounded_by_max_time_ms_ended_by_kill_op_and_proceeds_after_abort() {
    let server = initiated(&[]).await;
    let client = server.client().await;
    let c = client.database("t").collection::<Document>("c");
    c.insert_one(doc! { "_id": 0 }).await.expect("seed");
    let mut holder = holding(&client, &c, 1).await;
    let db = client.database("t");

    let started = Instant::now();
    let e = db
        .run_command(doc! { "drop": "c", "maxTimeMS": 50 })
        .await
        .expect_err("maxTimeMS while the transaction holds the collection");
    assert_eq!(error_code(&e), 50, "{e}");
    assert!(started.elapsed() < WAIT_MAX);
    let e = db
        .run_command(doc! { "dropDatabase": 1, "maxTimeMS": 50 })
        .await
        .expect_err("dropDatabase waits for the database too");
    assert_eq!(error_code(&e), 50, "{e}");

    let coll_mod = spawn_command(&client, "t", doc! { "collMod": "c" });
    let opid = wait_for_op(&client, "collMod").await;
    admin(&client)
        .run_command(doc! { "killOp": 1, "op": opid })
        .await
        .expect("killOp");
    let e = finished(coll_mod).await.expect_err("killed while waiting");
    assert_eq!(error_code(&e), 11601, "{e}");

    let rename = spawn_command(
        &client,
        "admin",
        doc! { "renameCollection": "t.c", "to": "t.d" },
    );
    wait_for_op(&client, "renameCollection").await;
    // Another collection of the database is not held.
    db.run_command(doc! { "drop": "other", "maxTimeMS": 5000 })
        .await
        .expect("drop of a collection no transaction holds");
    assert!(!rename.is_finished());
    holder.abort_transaction().await.expect("abort");
    finished(rename).await.expect("rename after the abort");
    let d = db.collection::<Document>("d");
    assert_eq!(
        d.count_documents(doc! {}).await.expect("count"),
        1,
        "the abort left nothing"
    );
}

#[tokio::test]
async fn the_write_set_bound_gives_388_and_the_session_starts_again() {
    let server = initiated(&[]).await;
    let client = server.client().await;
    let p = admin(&client)
        .run_command(doc! { "getParameter": 1, "transactionMemoryLimitBytes": 1 })
        .await
        .expect("getParameter");
    assert_eq!(
        p.get_i64("transactionMemoryLimitBytes").ok(),
        Some(256 << 20),
        "{p}"
    );
    admin(&client)
        .run_command(doc! { "setParameter": 1, "transactionMemoryLimitBytes": 10_000 })
        .await
        .expect("setParameter");
    let c = client.database("t").collection::<Document>("c");
    c.insert_one(doc! { "_id": 0 }).await.expect("seed");
    let big = "x".repeat(4000);
    let mut s = client.start_session().await.expect("session");
    s.start_transaction().await.expect("start");
    for i in 1..=2 {
        c.insert_one(doc! { "_id": i, "s": &big })
            .session(&mut s)
            .await
            .expect("under the bound");
    }
    let e = c
        .insert_one(doc! { "_id": 3, "s": &big })
        .session(&mut s)
        .await
        .expect_err("past the bound");
    assert_eq!(error_code(&e), 388, "{e}");
    assert!(!e.contains_label("TransientTransactionError"), "{e}");
    let e = c
        .find_one(doc! {})
        .session(&mut s)
        .await
        .expect_err("aborted");
    assert_eq!(error_code(&e), 251, "{e}");
    let st = status(&client).await;
    let errors = st
        .get_document("metrics")
        .and_then(|m| m.get_document("operation"))
        .and_then(|o| o.get_i64("transactionTooLargeForCacheErrors"));
    assert_eq!(errors.ok(), Some(1), "{st}");
    let t = st.get_document("transactions").expect("transactions");
    assert_eq!(t.get_i64("currentOpen").ok(), Some(0), "{t}");

    // The same session goes on with a new transaction; the first left nothing. (The driver
    // still thinks the first open: its abort meets 251, which drivers ignore.)
    let _ = s.abort_transaction().await;
    s.start_transaction().await.expect("start again");
    c.insert_one(doc! { "_id": 9, "s": "small" })
        .session(&mut s)
        .await
        .expect("a small write");
    s.commit_transaction().await.expect("commit");
    assert_eq!(c.count_documents(doc! {}).await.expect("count"), 2);
    // A DDL finds nothing held by the aborted one.
    client
        .database("t")
        .run_command(doc! { "drop": "c", "maxTimeMS": 5000 })
        .await
        .expect("drop");
}

#[tokio::test]
async fn counters_and_current_op_show_an_idle_transaction() {
    let server = initiated(&[]).await;
    let client = server.client().await;
    let c = client.database("t").collection::<Document>("c");
    c.insert_one(doc! { "_id": 0 }).await.expect("seed");
    let mut s = holding(&client, &c, 1).await;
    let t = txn_counters(&client).await;
    for (k, v) in [
        ("currentOpen", 1),
        ("currentInactive", 1),
        ("currentActive", 0),
        ("totalStarted", 1),
        ("totalCommitted", 0),
    ] {
        assert_eq!(t.get_i64(k).ok(), Some(v), "{k}: {t}");
    }

    let plain = admin(&client)
        .run_command(doc! { "currentOp": 1 })
        .await
        .expect("currentOp");
    let idle = |r: &Document| {
        r.get_array("inprog")
            .expect("inprog")
            .iter()
            .filter_map(|o| o.as_document())
            .find(|o| o.get_str("type").ok() == Some("idleSession"))
            .cloned()
    };
    assert!(
        idle(&plain).is_none(),
        "only with $all or idleSessions: {plain}"
    );
    let all = admin(&client)
        .run_command(doc! { "currentOp": 1, "$all": true })
        .await
        .expect("currentOp $all");
    let op = idle(&all).expect("the idle transaction");
    assert_eq!(op.get_bool("active").ok(), Some(false), "{op}");
    let lsid = op.get_document("lsid").expect("lsid");
    assert_eq!(lsid.get("id"), s.id().get("id"), "{op}");
    // Without authentication mongod's uid is the SHA-256 of the empty name.
    let empty_sha256 = [
        0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9,
        0x24, 0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52,
        0xb8, 0x55,
    ];
    assert_eq!(
        lsid.get_binary_generic("uid").ok().map(|b| b.as_slice()),
        Some(&empty_sha256[..]),
        "{op}"
    );
    assert!(op.get_str("client").is_ok_and(|c| c.contains(':')), "{op}");
    assert!(op.get_i64("connectionId").is_ok(), "{op}");
    assert!(
        op.get_document("clientMetadata").is_ok(),
        "the driver's handshake metadata: {op}"
    );
    let txn = op.get_document("transaction").expect("transaction");
    let params = txn.get_document("parameters").expect("parameters");
    assert_eq!(params.get_i64("txnNumber").ok(), Some(1), "{op}");
    assert_eq!(params.get_bool("autocommit").ok(), Some(false), "{op}");
    assert!(params.get_document("readConcern").is_ok(), "{op}");
    assert!(txn.get_timestamp("readTimestamp").is_ok(), "{op}");
    assert!(txn.get_str("startWallClockTime").is_ok(), "{op}");
    assert!(txn.get_str("expiryTime").is_ok(), "{op}");
    let open = txn.get_i64("timeOpenMicros").expect("timeOpenMicros");
    let active = txn.get_i64("timeActiveMicros").expect("timeActiveMicros");
    let inactive = txn
        .get_i64("timeInactiveMicros")
        .expect("timeInactiveMicros");
    assert!(active > 0 && inactive > 0, "{op}");
    assert!((open - active - inactive).abs() <= 1, "{op}");
    let with_flag = admin(&client)
        .run_command(doc! { "currentOp": 1, "idleSessions": true })
        .await
        .expect("currentOp idleSessions");
    assert!(idle(&with_flag).is_some(), "{with_flag}");

    s.commit_transaction().await.expect("commit");
    let t = txn_counters(&client).await;
    assert_eq!(t.get_i64("currentOpen").ok(), Some(0), "{t}");
    assert_eq!(t.get_i64("currentInactive").ok(), Some(0), "{t}");
    assert_eq!(t.get_i64("totalCommitted").ok(), Some(1), "{t}");
    let after = admin(&client)
        .run_command(doc! { "currentOp": 1, "$all": true })
        .await
        .expect("currentOp");
    assert!(idle(&after).is_none(), "{after}");
}

#[tokio::test]
async fn kill_sessions_and_lifetime_expiry_free_the_locks() {
    let server = initiated(&[]).await;
    let client = server.client().await;
    let c = client.database("t").collection::<Document>("c");
    c.insert_one(doc! { "_id": 0 }).await.expect("seed");
    let mut s = holding(&client, &c, 1).await;
    let drop_c = spawn_command(&client, "t", doc! { "drop": "c" });
    wait_for_op(&client, "drop").await;
    admin(&client)
        .run_command(doc! { "killSessions": [ s.id().clone() ] })
        .await
        .expect("killSessions");
    finished(drop_c)
        .await
        .expect("drop once the session is killed");
    let e = s.commit_transaction().await.expect_err("killed");
    assert_eq!(error_code(&e), 251, "{e}");

    admin(&client)
        .run_command(doc! { "setParameter": 1, "transactionLifetimeLimitSeconds": 1 })
        .await
        .expect("setParameter");
    let d = client.database("t").collection::<Document>("d");
    let _expiring = holding(&client, &d, 1).await;
    let drop_d = spawn_command(&client, "t", doc! { "drop": "d" });
    finished(drop_d)
        .await
        .expect("drop once the reaper aborts the transaction");
    let t = txn_counters(&client).await;
    assert_eq!(t.get_i64("totalAborted").ok(), Some(2), "{t}");
    assert_eq!(t.get_i64("currentOpen").ok(), Some(0), "{t}");
}

#[tokio::test]
async fn a_commit_waits_while_the_server_is_fsync_locked() {
    let server = initiated(&["--setParameter", "enableTestCommands=1"]).await;
    let client = server.client().await;
    let c = client.database("t").collection::<Document>("c");
    c.insert_one(doc! { "_id": 0 }).await.expect("seed");
    let mut s = holding(&client, &c, 1).await;
    let a = admin(&client);
    a.run_command(doc! { "configureFailPoint": "fsyncLockedWrite", "mode": "alwaysOn" })
        .await
        .expect("fail point");
    a.run_command(doc! { "fsync": 1, "lock": true })
        .await
        .expect("fsync lock");
    // A commit with maxTimeMS ends at it (50, labelled UnknownTransactionCommitResult, as
    // mongod's); the transaction stays open and its commit can be retried.
    let timed = client
        .database("admin")
        .run_command(doc! { "commitTransaction": 1, "maxTimeMS": 100 })
        .session(&mut s)
        .await
        .expect_err("maxTimeMS at the locked gate");
    assert_eq!(error_code(&timed), 50, "{timed}");
    assert!(
        timed.contains_label("UnknownTransactionCommitResult"),
        "{timed}"
    );
    let plain = client
        .database("t")
        .run_command(doc! { "insert": "c", "documents": [{ "_id": 99 }], "maxTimeMS": 100 })
        .await
        .expect_err("a plain write blocked by fsyncLock ends at its maxTimeMS");
    assert_eq!(error_code(&plain), 50, "{plain}");
    let commit = tokio::spawn(async move { s.commit_transaction().await });
    // The fail point counts the commit arriving at the locked gate.
    a.run_command(
        doc! { "waitForFailPoint": "fsyncLockedWrite", "timesEntered": 3, "maxTimeMS": 30000 },
    )
    .await
    .expect("the commit waits at the gate");
    assert_eq!(
        c.count_documents(doc! {}).await.expect("count"),
        1,
        "nothing written yet"
    );
    a.run_command(doc! { "fsyncUnlock": 1 })
        .await
        .expect("unlock");
    finished(commit).await.expect("commit after the unlock");
    assert_eq!(c.count_documents(doc! {}).await.expect("count"), 2);
}

#[tokio::test]
async fn a_statement_running_in_a_transaction_counts_it_active() {
    let server = initiated(&["--setParameter", "enableTestCommands=1"]).await;
    let client = server.client().await;
    let c = client.database("t").collection::<Document>("c");
    c.insert_one(doc! { "_id": 0 }).await.expect("seed");
    let mut s = holding(&client, &c, 1).await;
    let a = admin(&client);
    a.run_command(doc! {
        "configureFailPoint": "blockStorageCall", "mode": "alwaysOn",
        "data": { "commands": ["find"] },
    })
    .await
    .expect("fail point");
    let c2 = c.clone();
    let find = tokio::spawn(async move {
        let r = c2.find_one(doc! { "_id": 1 }).session(&mut s).await;
        (r, s)
    });
    a.run_command(
        doc! { "waitForFailPoint": "blockStorageCall", "timesEntered": 1, "maxTimeMS": 30000 },
    )
    .await
    .expect("the find is in its storage job");
    let t = txn_counters(&client).await;
    assert_eq!(t.get_i64("currentActive").ok(), Some(1), "{t}");
    assert_eq!(t.get_i64("currentInactive").ok(), Some(0), "{t}");
    let all = a
        .run_command(doc! { "currentOp": 1, "$all": true })
        .await
        .expect("currentOp");
    let idle = all
        .get_array("inprog")
        .expect("inprog")
        .iter()
        .filter_map(|o| o.as_document())
        .any(|o| o.get_str("type").ok() == Some("idleSession"));
    assert!(
        !idle,
        "a transaction with a running statement is not idle: {all}"
    );
    a.run_command(doc! { "configureFailPoint": "blockStorageCall", "mode": "off" })
        .await
        .expect("off");
    let (found, mut s) = finished(find).await;
    assert!(found.expect("find").is_some(), "its own insert");
    let t = txn_counters(&client).await;
    assert_eq!(t.get_i64("currentActive").ok(), Some(0), "{t}");
    assert_eq!(t.get_i64("currentInactive").ok(), Some(1), "{t}");
    s.commit_transaction().await.expect("commit");
}

#[tokio::test]
async fn a_transaction_reading_through_a_view_holds_the_views_sources() {
    let server = initiated(&[]).await;
    let client = server.client().await;
    let db = client.database("t");
    db.collection::<Document>("src")
        .insert_one(doc! { "_id": 1, "k": 1 })
        .await
        .expect("seed");
    db.collection::<Document>("other")
        .insert_one(doc! { "_id": 1, "k": 1 })
        .await
        .expect("seed other");
    db.run_command(doc! { "create": "v", "viewOn": "src", "pipeline": [
        { "$lookup": { "from": "other", "localField": "k", "foreignField": "k", "as": "o" } },
    ] })
    .await
    .expect("view");
    db.run_command(doc! { "create": "vv", "viewOn": "v", "pipeline": [] })
        .await
        .expect("view of the view");
    let mut s = client.start_session().await.expect("session");
    s.start_transaction().await.expect("start");
    let n = db
        .collection::<Document>("vv")
        .count_documents(doc! {})
        .session(&mut s)
        .await
        .expect("read through the views");
    assert_eq!(n, 1);
    for source in ["src", "other"] {
        let e = db
            .run_command(doc! { "drop": source, "maxTimeMS": 50 })
            .await
            .expect_err("the transaction holds what the views read");
        assert_eq!(error_code(&e), 50, "{source}: {e}");
    }
    s.commit_transaction().await.expect("commit");
    db.run_command(doc! { "drop": "src" })
        .await
        .expect("the drop goes once the transaction ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_retried_after_kill_9_answers_committed() {
    let mut server = initiated(&[]).await;
    // The seed goes through a client of its own: a retryable insert on this client could leave
    // its server session (txnNumber 1 used) in the pool for `holding`'s session to pick up, and
    // the transaction would then be number 2, not the 1 retried below.
    let seeder = server.client().await;
    seeder
        .database("t")
        .collection::<Document>("c")
        .insert_one(doc! { "_id": 0 })
        .await
        .expect("seed");
    drop(seeder);
    let client = server.client().await;
    let c = client.database("t").collection::<Document>("c");
    let mut s = holding(&client, &c, 1).await;
    let lsid = s.id().clone();
    s.commit_transaction().await.expect("commit");
    drop(s);
    drop(client);
    server.restart_after_kill();
    let mut raw = cairn_e2e::RawConn::connect(&server.addr());
    // The commit's reply was lost (as if the connection broke): the client retries it, raw
    // (the driver would put its own session on the command).
    let retried = crate::retryable::command(
        &mut raw,
        &doc! {
            "commitTransaction": 1,
            "lsid": lsid.clone(),
            "txnNumber": 1i64,
            "autocommit": false,
            "$db": "admin",
        },
    );
    assert_eq!(
        retried.get_f64("ok").ok(),
        Some(1.0),
        "a commit retried after the restart answers ok, not NoSuchTransaction: {retried}"
    );
    let client = server.client().await;
    let c = client.database("t").collection::<Document>("c");
    assert_eq!(
        c.count_documents(doc! {}).await.expect("count"),
        2,
        "committed once"
    );
    // A statement of that transaction after the restart: mongod's TransactionCommitted.
    let again = crate::retryable::command(
        &mut raw,
        &doc! {
            "insert": "c",
            "documents": [{ "_id": 2 }],
            "lsid": lsid,
            "txnNumber": 1i64,
            "autocommit": false,
            "$db": "t",
        },
    );
    assert_eq!(again.get_i32("code").ok(), Some(256), "{again}");
}
