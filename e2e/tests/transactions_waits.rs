//! Proves that a plain update, delete or findAndModify meeting a document an open transaction has written waits
//! for that transaction, as mongod's does, instead of writing under it: it completes once the
//! transaction commits (on top of the committed version, the transaction not conflicting) or
//! aborts; maxTimeMS ends the wait with 50 as a write error while earlier statements stand;
//! many waiting writers never hold up the commit. How: a real one-member replica set, the Rust
//! driver, plain writes spawned on other tasks while the transaction is open.

use bson::{Document, doc};
use cairn_e2e::{Server, error_code};
use mongodb::{ClientSession, Collection};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

async fn value(coll: &Collection<Document>, id: i32) -> Option<i32> {
    coll.find_one(doc! { "_id": id })
        .await
        .expect("find")
        .map(|d| d.get_i32("a").expect("a"))
}

/// A spawned task is still running after `ms`: it is waiting, not done.
async fn still_waiting<T>(task: &tokio::task::JoinHandle<T>, ms: u64) -> bool {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    !task.is_finished()
}

/// A one-member set with documents 1 and 2 (`a: 0`) and an open transaction that has set
/// document 1's `a` to `a`: the document a plain write then meets.
async fn holding_one(a: i32) -> (Server, mongodb::Client, Collection<Document>, ClientSession) {
    let server = Server::start_initiated(BIN, &[]).await;
    let client = server.client().await;
    let coll = client.database("w").collection::<Document>("c");
    coll.insert_many([doc! { "_id": 1, "a": 0 }, doc! { "_id": 2, "a": 0 }])
        .await
        .expect("seed");
    let mut s = client.start_session().await.expect("session");
    s.start_transaction().await.expect("start");
    coll.update_one(doc! { "_id": 1 }, doc! { "$set": { "a": a } })
        .session(&mut s)
        .await
        .expect("transaction's update");
    (server, client, coll, s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_update_waits_for_the_commit_and_applies_on_top() {
    let (_server, client, coll, mut s) = holding_one(10).await;

    // Two statements: the first touches a free document, the second the held one.
    let db = client.database("w");
    let plain = tokio::spawn(async move {
        db.run_command(doc! { "update": "c", "updates": [
            { "q": { "_id": 2 }, "u": { "$inc": { "a": 1 } } },
            { "q": { "_id": 1 }, "u": { "$inc": { "a": 1 } } },
        ] })
        .await
    });
    assert!(
        still_waiting(&plain, 300).await,
        "the plain update waits for the transaction"
    );
    assert_eq!(
        value(&coll, 2).await,
        Some(1),
        "its first statement already ran"
    );
    assert_eq!(
        value(&coll, 1).await,
        Some(0),
        "the held document is untouched"
    );
    s.commit_transaction()
        .await
        .expect("the transaction commits: the plain write did not go under it");
    let reply = plain.await.expect("join").expect("plain update");
    assert_eq!(reply.get_i32("n").ok(), Some(2), "{reply}");
    assert_eq!(
        value(&coll, 1).await,
        Some(11),
        "applied on top of the committed 10"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_delete_waits_for_the_abort_and_max_time_ends_a_wait() {
    let (_server, client, coll, mut s) = holding_one(5).await;

    // maxTimeMS ends the wait and fails the command (50, as mongod fails a batch on an
    // interruption); the statement before it stands.
    let e = client
        .database("w")
        .run_command(
            doc! { "delete": "c", "ordered": true, "maxTimeMS": 200, "deletes": [
                { "q": { "_id": 2 }, "limit": 1 },
                { "q": { "_id": 1 }, "limit": 1 },
            ] },
        )
        .await
        .expect_err("maxTimeMS passes while it waits");
    assert_eq!(error_code(&e), 50);
    assert_eq!(value(&coll, 2).await, None, "the first statement deleted");

    let coll2 = coll.clone();
    let plain = tokio::spawn(async move { coll2.delete_one(doc! { "_id": 1 }).await });
    assert!(still_waiting(&plain, 300).await, "the plain delete waits");
    s.abort_transaction().await.expect("abort");
    let r = plain.await.expect("join").expect("plain delete");
    assert_eq!(r.deleted_count, 1);
    assert_eq!(value(&coll, 1).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_and_modify_waits_and_sees_the_committed_version() {
    let (_server, _client, coll, mut s) = holding_one(7).await;
    let c = coll.clone();
    let plain = tokio::spawn(async move {
        c.find_one_and_update(doc! { "_id": 1 }, doc! { "$inc": { "a": 1 } })
            .await
    });
    assert!(still_waiting(&plain, 300).await, "findAndModify waits");
    s.commit_transaction().await.expect("commit");
    let before = plain
        .await
        .expect("join")
        .expect("findAndModify")
        .expect("a document");
    assert_eq!(
        before.get_i32("a").ok(),
        Some(7),
        "it returns the committed version"
    );
    assert_eq!(value(&coll, 1).await, Some(8));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_waiting_writers_never_hold_up_the_commit() {
    let server = Server::start_initiated(BIN, &[]).await;
    let client = server.client().await;
    let coll = client.database("w").collection::<Document>("c");
    coll.insert_one(doc! { "_id": 1, "a": 0 })
        .await
        .expect("seed");
    for round in 0..5 {
        let mut s = client.start_session().await.expect("session");
        s.start_transaction().await.expect("start");
        coll.update_one(doc! { "_id": 1 }, doc! { "$inc": { "a": 100 } })
            .session(&mut s)
            .await
            .expect("transaction's update");
        let writers: Vec<_> = (0..8)
            .map(|_| {
                let c = coll.clone();
                tokio::spawn(async move {
                    c.update_one(doc! { "_id": 1 }, doc! { "$inc": { "a": 1 } })
                        .await
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        tokio::time::timeout(Duration::from_secs(20), s.commit_transaction())
            .await
            .unwrap_or_else(|_| panic!("round {round}: the commit hung behind waiting writers"))
            .expect("commit");
        for w in writers {
            let r = w.await.expect("join").expect("plain update");
            assert_eq!(r.modified_count, 1);
        }
        assert_eq!(
            value(&coll, 1).await,
            Some((round + 1) * 108),
            "round {round}: nothing lost, nothing applied twice"
        );
    }
}

/// `{f0: {$exists: false}, ...}` with many clauses: every document costs all of them, so a scan
/// of a few thousand documents runs for seconds.
fn slow_filter() -> Document {
    (0..20_000)
        .map(|i| {
            (
                format!("f{i}"),
                bson::Bson::Document(doc! { "$exists": false }),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_sessions_stops_a_running_statement_and_aborts_its_transaction() {
    let server = Server::start_initiated(BIN, &[]).await;
    let client = server.client().await;
    let coll = client.database("w").collection::<Document>("c");
    let docs: Vec<Document> = (0..3000).map(|i| doc! { "_id": i }).collect();
    coll.insert_many(docs).await.expect("seed");

    let mut s = client.start_session().await.expect("session");
    let lsid = s.id().clone();
    s.start_transaction().await.expect("start");
    coll.insert_one(doc! { "_id": "mine" })
        .session(&mut s)
        .await
        .expect("a write in the transaction");
    let c = coll.clone();
    let running = tokio::spawn(async move {
        let r = c.count_documents(slow_filter()).session(&mut s).await;
        (r, s)
    });
    // Wait until the statement shows in currentOp, then kill its session.
    let admin = client.database("admin");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let cur = admin
            .run_command(doc! { "currentOp": 1 })
            .await
            .expect("currentOp");
        let counting = cur.get_array("inprog").expect("inprog").iter().any(|op| {
            op.as_document().is_some_and(|d| {
                d.get_str("ns").ok() == Some("w.c") && d.get_bool("active").ok() != Some(false)
            })
        });
        if counting {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the statement never showed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    admin
        .run_command(doc! { "killSessions": [lsid] })
        .await
        .expect("killSessions");
    let (r, mut s) = tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("the statement stops")
        .expect("join");
    let e = r.expect_err("the statement was killed");
    assert_eq!(error_code(&e), 11601, "{e}");
    let next = coll
        .find_one(doc! {})
        .session(&mut s)
        .await
        .expect_err("the transaction is gone");
    assert_eq!(error_code(&next), 251);
    let _ = s.abort_transaction().await;
    assert_eq!(
        coll.count_documents(doc! { "_id": "mine" })
            .await
            .expect("count"),
        0,
        "its write never committed"
    );
}
