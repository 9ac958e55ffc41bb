//! Proves collection and index creation inside transactions as mongod 7.0 allows it: an insert
//! or upsert into a missing collection, `create` and `createIndexes` (on a collection the
//! transaction made and has not written into) work in a transaction and stay after commit;
//! after an abort (explicit, by a failed statement, or by killSessions) what the transaction
//! created is gone again, unless another client wrote into it meanwhile; mongod's refusals
//! (263 for indexes on existing or non-empty collections, views and capped collections; 72 for
//! explicit creation under readConcern snapshot; 48 for an existing name) abort the
//! transaction. How: a real one-member replica set per test, the Rust driver's sessions.

use bson::{Document, doc};
use cairn_e2e::{Server, error_code};
use mongodb::options::{ReadConcern, TransactionOptions};
use mongodb::{ClientSession, Database};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

async fn names(db: &Database) -> Vec<String> {
    let mut n = db.list_collection_names().await.expect("list");
    n.sort();
    n
}

async fn index_names(db: &Database, coll: &str) -> Vec<String> {
    let mut n = db
        .collection::<Document>(coll)
        .list_index_names()
        .await
        .expect("indexes");
    n.sort();
    n
}

async fn run_in(db: &Database, s: &mut ClientSession, cmd: Document) -> Result<Document, i32> {
    db.run_command(cmd)
        .session(&mut *s)
        .await
        .map_err(|e| error_code(&e))
}

/// The failed statement aborted the transaction: the next one gets NoSuchTransaction (the
/// driver itself ignores errors of abortTransaction, which then ends its state).
async fn assert_aborted(db: &Database, s: &mut ClientSession) {
    let next = db
        .collection::<Document>("old")
        .find_one(doc! {})
        .session(&mut *s)
        .await
        .expect_err("the transaction is gone");
    assert_eq!(error_code(&next), 251);
    let _ = s.abort_transaction().await;
}

/// The undo of an abort that did not come from `abortTransaction` itself runs at the latest on
/// the reaper's next pass (every second): waits a bounded time for `want`.
async fn names_become(db: &Database, want: &[&str]) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = names(db).await;
        if got == want || Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn implicit_creation_stays_after_commit_and_goes_after_abort() {
    let server = Server::start_initiated(BIN, &[]).await;
    let client = server.client().await;
    let db = client.database("ddl");
    let mut s = client.start_session().await.expect("session");

    s.start_transaction().await.expect("start");
    db.collection::<Document>("ins")
        .insert_one(doc! { "_id": 1 })
        .session(&mut s)
        .await
        .expect("insert creates");
    db.collection::<Document>("ups")
        .update_one(doc! { "_id": 1 }, doc! { "$set": { "x": 1 } })
        .upsert(true)
        .session(&mut s)
        .await
        .expect("upsert creates");
    s.abort_transaction().await.expect("abort");
    assert_eq!(
        names(&db).await,
        Vec::<String>::new(),
        "abortTransaction answers after the collections it made are gone"
    );

    s.start_transaction().await.expect("start again");
    db.collection::<Document>("ins")
        .insert_one(doc! { "_id": 2 })
        .session(&mut s)
        .await
        .expect("insert creates");
    s.commit_transaction().await.expect("commit");
    assert_eq!(names(&db).await, vec!["ins"]);
    let n = db
        .collection::<Document>("ins")
        .count_documents(doc! {})
        .await
        .expect("count");
    assert_eq!(n, 1);
}

#[tokio::test]
async fn explicit_create_and_create_indexes_commit_or_vanish() {
    let server = Server::start_initiated(BIN, &[]).await;
    let client = server.client().await;
    let db = client.database("ddl");
    let mut s = client.start_session().await.expect("session");

    for commit in [false, true] {
        s.start_transaction().await.expect("start");
        run_in(&db, &mut s, doc! { "create": "c" })
            .await
            .expect("create in a transaction");
        let r = run_in(
            &db,
            &mut s,
            doc! { "createIndexes": "c", "indexes": [{ "key": { "k": 1 }, "name": "k_1", "unique": true }] },
        )
        .await
        .expect("index on the new collection");
        assert_eq!(r.get_i32("numIndexesAfter").ok(), Some(2), "{r}");
        let r = run_in(
            &db,
            &mut s,
            doc! { "createIndexes": "made", "indexes": [{ "key": { "j": 1 }, "name": "j_1" }] },
        )
        .await
        .expect("createIndexes creates its collection");
        assert_eq!(
            r.get_bool("createdCollectionAutomatically").ok(),
            Some(true),
            "{r}"
        );
        db.collection::<Document>("c")
            .insert_many([doc! { "_id": 1, "k": 1 }, doc! { "_id": 2, "k": 2 }])
            .session(&mut s)
            .await
            .expect("insert after the index");
        if commit {
            s.commit_transaction().await.expect("commit");
            assert_eq!(names(&db).await, vec!["c", "made"]);
            assert_eq!(index_names(&db, "c").await, vec!["_id_", "k_1"]);
            assert_eq!(index_names(&db, "made").await, vec!["_id_", "j_1"]);
            let dup = db
                .collection::<Document>("c")
                .insert_one(doc! { "_id": 3, "k": 1 })
                .await
                .expect_err("the committed unique index holds");
            assert_eq!(error_code(&dup), 11000);
        } else {
            s.abort_transaction().await.expect("abort");
            assert_eq!(
                names(&db).await,
                Vec::<String>::new(),
                "nothing left after abort"
            );
        }
    }
}

#[tokio::test]
async fn mongods_refusals_abort_the_transaction() {
    let server = Server::start_initiated(BIN, &[]).await;
    let client = server.client().await;
    let db = client.database("ddl");
    db.collection::<Document>("old")
        .insert_one(doc! { "_id": 1 })
        .await
        .expect("seed");
    db.run_command(doc! { "create": "empty" })
        .await
        .expect("an empty collection made outside");
    let mut s = client.start_session().await.expect("session");

    let cases: Vec<(Document, i32)> = vec![
        (
            doc! { "createIndexes": "old", "indexes": [{ "key": { "a": 1 }, "name": "a_1" }] },
            263,
        ),
        (
            doc! { "createIndexes": "empty", "indexes": [{ "key": { "a": 1 }, "name": "a_1" }] },
            263,
        ),
        (doc! { "create": "old" }, 48),
        (doc! { "create": "v", "viewOn": "old", "pipeline": [] }, 263),
        (doc! { "create": "cap", "capped": true, "size": 4096 }, 263),
    ];
    for (cmd, code) in cases {
        s.start_transaction().await.expect("start");
        assert_eq!(
            run_in(&db, &mut s, cmd.clone()).await.err(),
            Some(code),
            "{cmd}"
        );
        assert_aborted(&db, &mut s).await;
    }
    // An index on a collection the transaction created, after it wrote into it.
    s.start_transaction().await.expect("start");
    db.collection::<Document>("fresh")
        .insert_one(doc! { "_id": 1 })
        .session(&mut s)
        .await
        .expect("insert creates");
    let e = run_in(
        &db,
        &mut s,
        doc! { "createIndexes": "fresh", "indexes": [{ "key": { "a": 1 }, "name": "a_1" }] },
    )
    .await
    .err();
    assert_eq!(
        e,
        Some(263),
        "no index on a non-empty collection in a transaction"
    );
    assert_aborted(&db, &mut s).await;
    assert_eq!(
        names_become(&db, &["empty", "old"]).await,
        vec!["empty", "old"]
    );
    // Indexes that already exist are no DDL at all: allowed on any collection.
    s.start_transaction().await.expect("start");
    let r = run_in(
        &db,
        &mut s,
        doc! { "createIndexes": "old", "indexes": [{ "key": { "_id": 1 }, "name": "_id_" }] },
    )
    .await
    .expect("an existing index");
    assert_eq!(
        r.get_str("note").ok(),
        Some("all indexes already exist"),
        "{r}"
    );
    s.abort_transaction().await.expect("abort");

    // Explicit creation needs readConcern local.
    let snapshot = TransactionOptions::builder()
        .read_concern(ReadConcern::snapshot())
        .build();
    for cmd in [
        doc! { "create": "snap" },
        doc! { "createIndexes": "snap", "indexes": [{ "key": { "a": 1 }, "name": "a_1" }] },
    ] {
        s.start_transaction()
            .with_options(snapshot.clone())
            .await
            .expect("start");
        assert_eq!(
            run_in(&db, &mut s, cmd.clone()).await.err(),
            Some(72),
            "{cmd}"
        );
        assert_aborted(&db, &mut s).await;
    }
    // Implicit creation works under any read concern.
    s.start_transaction()
        .with_options(snapshot)
        .await
        .expect("start");
    db.collection::<Document>("snap")
        .insert_one(doc! { "_id": 1 })
        .session(&mut s)
        .await
        .expect("implicit creation under snapshot");
    s.commit_transaction().await.expect("commit");
    assert_eq!(names(&db).await, vec!["empty", "old", "snap"]);
}

#[tokio::test]
async fn a_collection_another_client_wrote_into_survives_the_abort() {
    let server = Server::start_initiated(BIN, &[]).await;
    let client = server.client().await;
    let db = client.database("ddl");
    let mut s = client.start_session().await.expect("session");
    s.start_transaction().await.expect("start");
    db.collection::<Document>("shared")
        .insert_one(doc! { "_id": "txn" })
        .session(&mut s)
        .await
        .expect("insert creates");
    db.collection::<Document>("shared")
        .insert_one(doc! { "_id": "plain" })
        .await
        .expect("a plain insert into the new collection");
    s.abort_transaction().await.expect("abort");
    let docs: Vec<Document> = {
        use futures_util::TryStreamExt;
        db.collection::<Document>("shared")
            .find(doc! {})
            .await
            .expect("find")
            .try_collect()
            .await
            .expect("docs")
    };
    assert_eq!(
        docs,
        vec![doc! { "_id": "plain" }],
        "the acknowledged plain write stays"
    );
}

#[tokio::test]
async fn kill_sessions_and_failed_statements_undo_creation_too() {
    let server = Server::start_initiated(BIN, &[]).await;
    let client = server.client().await;
    let db = client.database("ddl");
    db.collection::<Document>("seed")
        .insert_one(doc! { "_id": 1 })
        .await
        .expect("seed");

    // A statement that fails aborts the transaction, and what it had created goes.
    let mut s = client.start_session().await.expect("session");
    s.start_transaction().await.expect("start");
    db.collection::<Document>("made")
        .insert_one(doc! { "_id": 1 })
        .session(&mut s)
        .await
        .expect("insert creates");
    let dup = db
        .collection::<Document>("seed")
        .insert_one(doc! { "_id": 1 })
        .session(&mut s)
        .await
        .expect_err("duplicate key");
    assert_eq!(error_code(&dup), 11000);
    assert_eq!(names_become(&db, &["seed"]).await, vec!["seed"]);

    // killSessions of an idle session with an open transaction.
    let mut k = client.start_session().await.expect("session");
    k.start_transaction().await.expect("start");
    db.collection::<Document>("killed")
        .insert_one(doc! { "_id": 1 })
        .session(&mut k)
        .await
        .expect("insert creates");
    assert_eq!(
        names(&db).await,
        vec!["killed", "seed"],
        "visible (empty) at once"
    );
    let id = k.id().clone();
    client
        .database("admin")
        .run_command(doc! { "killSessions": [id] })
        .await
        .expect("killSessions");
    assert_eq!(names_become(&db, &["seed"]).await, vec!["seed"]);
}

#[tokio::test]
async fn unique_indexes_are_checked_at_the_statement() {
    let server = Server::start_initiated(BIN, &[]).await;
    let client = server.client().await;
    let db = client.database("u");
    let coll = db.collection::<Document>("c");
    coll.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! { "k": 1 })
            .options(
                mongodb::options::IndexOptions::builder()
                    .unique(true)
                    .build(),
            )
            .build(),
    )
    .await
    .expect("unique index");
    coll.insert_one(doc! { "_id": 1, "k": 1 })
        .await
        .expect("seed");

    // A key a committed document holds: 11000 at the insert, and the transaction is over.
    let mut s = client.start_session().await.expect("session");
    s.start_transaction().await.expect("start");
    let dup = coll
        .insert_one(doc! { "_id": 2, "k": 1 })
        .session(&mut s)
        .await
        .expect_err("duplicate key at the statement");
    assert_eq!(error_code(&dup), 11000, "{dup}");
    assert_aborted(&db, &mut s).await;

    // The transaction frees the key itself first: allowed.
    s.start_transaction().await.expect("start");
    coll.delete_one(doc! { "_id": 1 })
        .session(&mut s)
        .await
        .expect("delete the holder");
    coll.insert_one(doc! { "_id": 3, "k": 1 })
        .session(&mut s)
        .await
        .expect("the key is free in the transaction");
    s.commit_transaction().await.expect("commit");

    // A key committed by someone else after the transaction began: a write conflict.
    s.start_transaction().await.expect("start");
    coll.find_one(doc! { "_id": 3 })
        .session(&mut s)
        .await
        .expect("the snapshot is taken");
    coll.insert_one(doc! { "_id": 4, "k": 2 })
        .await
        .expect("a plain insert commits k: 2");
    let late = coll
        .insert_one(doc! { "_id": 5, "k": 2 })
        .session(&mut s)
        .await
        .expect_err("conflict");
    assert_eq!(error_code(&late), 112, "{late}");
    assert!(late.contains_label("TransientTransactionError"), "{late}");
    let _ = s.abort_transaction().await;
}
