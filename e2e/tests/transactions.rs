//! Proves multi-document transactions under `--replSet` with the Rust driver's session API:
//! commit makes every write visible at once, abort leaves nothing, a transaction reads its own
//! writes (index-served queries, count via aggregate and distinct included) and its snapshot,
//! not others' later commits; two transactions writing one document conflict (112 with the
//! TransientTransactionError label); a retried commit gets the same answer; concurrent transfers
//! keep the total balance; a committed transaction is one applyOps oplog entry; after SIGKILL each
//! transaction is all there or absent; a standalone refuses transactions. How: a real server
//! process per test.

use bson::{Document, doc};
use cairn_e2e::{Server, error_code};
use futures_util::{FutureExt, TryStreamExt};
use mongodb::{ClientSession, Collection};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

async fn initiated() -> Server {
    Server::start_initiated(BIN, &[]).await
}

pub(crate) async fn ids(coll: &Collection<Document>) -> Vec<i32> {
    let docs: Vec<Document> = coll
        .find(doc! {})
        .sort(doc! { "_id": 1 })
        .await
        .expect("find")
        .try_collect()
        .await
        .expect("docs");
    docs.iter()
        .map(|d| d.get_i32("_id").expect("_id"))
        .collect()
}

async fn ids_in(coll: &Collection<Document>, s: &mut ClientSession, filter: Document) -> Vec<i32> {
    let mut cursor = coll
        .find(filter)
        .sort(doc! { "_id": 1 })
        .session(&mut *s)
        .await
        .expect("find in transaction");
    let mut out = Vec::new();
    while let Some(d) = cursor.next(&mut *s).await {
        out.push(d.expect("doc").get_i32("_id").expect("_id"));
    }
    out
}

#[tokio::test]
async fn commit_shows_all_writes_at_once_and_abort_none() {
    let server = initiated().await;
    let client = server.client().await;
    let a = client.database("bank").collection::<Document>("a");
    let b = client.database("other").collection::<Document>("b");
    a.insert_one(doc! { "_id": 0 }).await.expect("seed a");
    b.insert_one(doc! { "_id": 0 }).await.expect("seed b");

    let mut s = client.start_session().await.expect("session");
    s.start_transaction().await.expect("start");
    a.insert_one(doc! { "_id": 1 })
        .session(&mut s)
        .await
        .expect("insert a");
    b.insert_one(doc! { "_id": 1 })
        .session(&mut s)
        .await
        .expect("insert b");
    b.delete_one(doc! { "_id": 0 })
        .session(&mut s)
        .await
        .expect("delete b");
    assert_eq!(
        ids(&a).await,
        vec![0],
        "uncommitted writes are not seen outside"
    );
    assert_eq!(ids(&b).await, vec![0]);
    s.commit_transaction().await.expect("commit");
    assert_eq!(ids(&a).await, vec![0, 1]);
    assert_eq!(ids(&b).await, vec![1]);

    s.start_transaction().await.expect("start again");
    a.insert_one(doc! { "_id": 2 })
        .session(&mut s)
        .await
        .expect("insert");
    a.delete_many(doc! {})
        .session(&mut s)
        .await
        .expect("delete all");
    assert!(ids_in(&a, &mut s, doc! {}).await.is_empty());
    s.abort_transaction().await.expect("abort");
    assert_eq!(
        ids(&a).await,
        vec![0, 1],
        "an aborted transaction leaves nothing"
    );

    let status = client
        .database("admin")
        .run_command(doc! { "serverStatus": 1 })
        .await
        .expect("serverStatus");
    let t = status.get_document("transactions").expect("transactions");
    assert_eq!(t.get_i64("totalStarted").ok(), Some(2), "{t}");
    assert_eq!(t.get_i64("totalCommitted").ok(), Some(1), "{t}");
    assert_eq!(t.get_i64("totalAborted").ok(), Some(1), "{t}");
    assert_eq!(t.get_i64("currentOpen").ok(), Some(0), "{t}");
}

#[tokio::test]
async fn a_transaction_reads_its_own_writes_and_its_snapshot() {
    let server = initiated().await;
    let client = server.client().await;
    let c = client.database("t").collection::<Document>("c");
    c.create_index(mongodb::IndexModel::builder().keys(doc! { "k": 1 }).build())
        .await
        .expect("index");
    for i in 0..5 {
        c.insert_one(doc! { "_id": i, "k": i % 2 })
            .await
            .expect("seed");
    }
    let mut s = client.start_session().await.expect("session");
    s.start_transaction().await.expect("start");
    assert_eq!(ids_in(&c, &mut s, doc! { "k": 1 }).await, vec![1, 3]);
    // Committed by another client after the snapshot: not seen inside.
    c.insert_one(doc! { "_id": 10, "k": 1 })
        .await
        .expect("outside insert");
    c.update_one(doc! { "_id": 0 }, doc! { "$set": { "k": 1 } })
        .await
        .expect("outside update");
    assert_eq!(ids_in(&c, &mut s, doc! { "k": 1 }).await, vec![1, 3]);
    // Its own writes are seen, through the indexed field too.
    c.insert_one(doc! { "_id": 7, "k": 1 })
        .session(&mut s)
        .await
        .expect("insert");
    c.update_one(doc! { "_id": 3 }, doc! { "$set": { "k": 0 } })
        .session(&mut s)
        .await
        .expect("update");
    c.delete_one(doc! { "_id": 1 })
        .session(&mut s)
        .await
        .expect("delete");
    assert_eq!(ids_in(&c, &mut s, doc! { "k": 1 }).await, vec![7]);
    assert_eq!(ids_in(&c, &mut s, doc! { "_id": 3 }).await, vec![3]);
    // `_id` look-ups go through the index and still see the snapshot plus its own writes.
    assert!(ids_in(&c, &mut s, doc! { "_id": 10 }).await.is_empty());
    assert!(ids_in(&c, &mut s, doc! { "_id": 1 }).await.is_empty());
    assert_eq!(ids_in(&c, &mut s, doc! { "_id": 7 }).await, vec![7]);
    assert_eq!(ids_in(&c, &mut s, doc! { "_id": 0, "k": 0 }).await, vec![0]);
    let counted = c
        .count_documents(doc! { "k": 0 })
        .session(&mut s)
        .await
        .expect("count in transaction");
    assert_eq!(counted, 4, "_id 0 (snapshot), 2, 4 and 3 (own update)");
    let distinct = c
        .distinct("_id", doc! {})
        .session(&mut s)
        .await
        .expect("distinct in transaction");
    assert_eq!(distinct.len(), 5, "{distinct:?}");
    let found = c
        .find_one_and_update(doc! { "_id": 7 }, doc! { "$inc": { "k": 1 } })
        .return_document(mongodb::options::ReturnDocument::After)
        .session(&mut s)
        .await
        .expect("findAndModify")
        .expect("its own insert");
    assert_eq!(found.get_i32("k").ok(), Some(2));
    s.commit_transaction().await.expect("commit");
    assert_eq!(ids(&c).await, vec![0, 2, 3, 4, 7, 10]);
}

#[tokio::test]
async fn a_second_writer_of_one_document_conflicts_with_the_label() {
    let server = initiated().await;
    let client = server.client().await;
    let c = client.database("t").collection::<Document>("c");
    c.insert_one(doc! { "_id": 1, "n": 0 }).await.expect("seed");
    let mut s1 = client.start_session().await.expect("s1");
    let mut s2 = client.start_session().await.expect("s2");
    s1.start_transaction().await.expect("start 1");
    s2.start_transaction().await.expect("start 2");
    c.update_one(doc! { "_id": 1 }, doc! { "$inc": { "n": 1 } })
        .session(&mut s1)
        .await
        .expect("first writer");
    let e = c
        .update_one(doc! { "_id": 1 }, doc! { "$inc": { "n": 10 } })
        .session(&mut s2)
        .await
        .expect_err("second writer conflicts");
    assert_eq!(error_code(&e), 112, "{e}");
    assert!(e.contains_label("TransientTransactionError"), "{e}");
    // The conflict aborted the second transaction.
    let e = s2.commit_transaction().await.expect_err("aborted");
    assert_eq!(error_code(&e), 251, "{e}");
    s1.commit_transaction().await.expect("commit 1");
    // A retried commit (same txnNumber) gets the same answer.
    s1.commit_transaction().await.expect("commit retried");
    let d = c
        .find_one(doc! { "_id": 1 })
        .await
        .expect("find")
        .expect("doc");
    assert_eq!(d.get_i32("n").ok(), Some(1));

    // A commit after the snapshot by a plain write makes the transaction's write conflict.
    s2.start_transaction().await.expect("start 3");
    c.find_one(doc! { "_id": 1 })
        .session(&mut s2)
        .await
        .expect("read");
    c.update_one(doc! { "_id": 1 }, doc! { "$set": { "n": 5 } })
        .await
        .expect("plain write");
    let e = c
        .update_one(doc! { "_id": 1 }, doc! { "$inc": { "n": 1 } })
        .session(&mut s2)
        .await
        .expect_err("stale write conflicts");
    assert_eq!(error_code(&e), 112, "{e}");
}

#[tokio::test]
async fn with_transaction_retries_and_transfers_keep_the_total() {
    const ACCOUNTS: i32 = 5;
    const CLIENTS: usize = 4;
    const TRANSFERS: usize = 15;
    let server = initiated().await;
    let client = server.client().await;
    let c = client.database("bank").collection::<Document>("accounts");
    for i in 0..ACCOUNTS {
        c.insert_one(doc! { "_id": i, "b": 100 })
            .await
            .expect("seed");
    }
    let mut tasks = Vec::new();
    for t in 0..CLIENTS {
        let c = c.clone();
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut s = client.start_session().await.expect("session");
            for i in 0..TRANSFERS {
                let from = ((t + i) % ACCOUNTS as usize) as i32;
                let to = ((t + 2 * i + 1) % ACCOUNTS as usize) as i32;
                if from == to {
                    continue;
                }
                s.start_transaction()
                    .and_run(c.clone(), move |s, c| {
                        let c = c.clone();
                        async move {
                            c.update_one(doc! { "_id": from }, doc! { "$inc": { "b": -1 } })
                                .session(&mut *s)
                                .await?;
                            c.update_one(doc! { "_id": to }, doc! { "$inc": { "b": 1 } })
                                .session(&mut *s)
                                .await?;
                            Ok(())
                        }
                        .boxed()
                    })
                    .await
                    .expect("transfer commits, retrying on conflicts");
            }
        }));
    }
    let reader = {
        let (c, client) = (c.clone(), client.clone());
        tokio::spawn(async move {
            let mut s = client.start_session().await.expect("session");
            for _ in 0..10 {
                s.start_transaction().await.expect("start");
                let mut cursor = c.find(doc! {}).session(&mut s).await.expect("find");
                let mut total = 0;
                while let Some(d) = cursor.next(&mut s).await {
                    total += d.expect("doc").get_i32("b").expect("b");
                }
                assert_eq!(total, ACCOUNTS * 100, "a snapshot saw half a transfer");
                s.commit_transaction().await.expect("read-only commit");
            }
        })
    };
    for t in tasks {
        t.await.expect("client");
    }
    reader.await.expect("reader");
    let docs: Vec<Document> = c
        .find(doc! {})
        .await
        .expect("find")
        .try_collect()
        .await
        .expect("docs");
    let total: i32 = docs.iter().map(|d| d.get_i32("b").expect("b")).sum();
    assert_eq!(total, ACCOUNTS * 100, "no transfer lost or doubled");
}

#[tokio::test]
async fn a_standalone_refuses_transactions() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let c = client.database("t").collection::<Document>("c");
    let mut s = client.start_session().await.expect("session");
    s.start_transaction()
        .await
        .expect("the driver starts it locally");
    let e = c
        .insert_one(doc! { "_id": 1 })
        .session(&mut s)
        .await
        .expect_err("refused");
    assert_eq!(error_code(&e), 20, "{e}");
}

#[tokio::test]
async fn a_commit_is_one_apply_ops_entry_and_its_events_carry_the_session() {
    use futures_util::StreamExt;
    let server = initiated().await;
    let client = server.client().await;
    let a = client.database("t").collection::<Document>("a");
    let b = client.database("t").collection::<Document>("b");
    a.insert_one(doc! { "_id": 1, "n": 0 }).await.expect("seed");
    let mut events = client.database("t").watch().await.expect("watch");
    let mut s = client.start_session().await.expect("session");
    s.start_transaction().await.expect("start");
    a.update_one(doc! { "_id": 1 }, doc! { "$inc": { "n": 1 } })
        .session(&mut s)
        .await
        .expect("update");
    b.insert_one(doc! { "_id": 2 })
        .session(&mut s)
        .await
        .expect("insert");
    s.commit_transaction().await.expect("commit");

    let r = client
        .database("local")
        .run_command(doc! { "find": "oplog.rs", "filter": { "op": "c", "ns": "admin.$cmd" } })
        .await
        .expect("oplog");
    let entries = r
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .expect("firstBatch");
    assert_eq!(entries.len(), 1, "{entries:?}");
    let e = entries[0].as_document().expect("entry");
    let ops = e
        .get_document("o")
        .and_then(|o| o.get_array("applyOps"))
        .expect("applyOps");
    let kinds: Vec<&str> = ops
        .iter()
        .map(|o| {
            o.as_document()
                .and_then(|o| o.get_str("op").ok())
                .unwrap_or("")
        })
        .collect();
    assert_eq!(kinds, vec!["u", "i"], "{e}");
    assert_eq!(e.get_i64("txnNumber").ok(), Some(1), "{e}");
    assert!(
        e.get_document("lsid").is_ok_and(|l| l.contains_key("id")),
        "{e}"
    );

    for _ in 0..2 {
        let ev = events.next().await.expect("event").expect("event ok");
        assert_eq!(ev.txn_number, Some(1), "{ev:?}");
        assert!(ev.lsid.is_some(), "{ev:?}");
    }
}

/// `t` -> how many documents of `coll` carry it.
async fn per_txn(coll: &Collection<Document>) -> std::collections::BTreeMap<i64, i32> {
    let groups: Vec<Document> = coll
        .aggregate(vec![doc! { "$group": { "_id": "$t", "n": { "$sum": 1 } } }])
        .await
        .expect("aggregate")
        .try_collect()
        .await
        .expect("groups");
    groups
        .iter()
        .map(|g| (g.get_i64("_id").expect("t"), g.get_i32("n").expect("n")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sigkill_each_transaction_is_all_there_or_absent() {
    const ROUNDS: i64 = 3;
    const WRITERS: i64 = 3;
    let seed: u64 = std::env::var("CAIRN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("CAIRN_SEED={seed}");
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed);
    let mut server = initiated().await;
    let acked: std::sync::Arc<std::sync::Mutex<Vec<i64>>> = Default::default();
    for round in 0..ROUNDS {
        // The restarted server listens elsewhere: the writers give up on the old one quickly.
        let client = server
            .client_with(&["serverSelectionTimeoutMS=1000", "connectTimeoutMS=1000"])
            .await;
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let (client, acked) = (client.clone(), acked.clone());
            let base = (round * WRITERS + w) * 1_000_000;
            tasks.push(tokio::spawn(async move {
                let a = client.database("t").collection::<Document>("a");
                let b = client.database("u").collection::<Document>("b");
                let Ok(mut s) = client.start_session().await else {
                    return;
                };
                for t in base..base + 100_000 {
                    let a_docs: Vec<Document> =
                        (0..3).map(|k| doc! { "_id": t * 10 + k, "t": t }).collect();
                    let b_docs: Vec<Document> =
                        (0..2).map(|k| doc! { "_id": t * 10 + k, "t": t }).collect();
                    let ran = async {
                        s.start_transaction().await?;
                        a.insert_many(a_docs).session(&mut s).await?;
                        b.insert_many(b_docs).session(&mut s).await?;
                        s.commit_transaction().await
                    };
                    match ran.await {
                        Ok(()) => acked.lock().expect("acked").push(t),
                        Err(_) => return,
                    }
                }
            }));
        }
        let before = acked.lock().expect("acked").len();
        for _ in 0..600 {
            if acked.lock().expect("acked").len() >= before + 20 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let wait_ms = rand::Rng::random_range(&mut rng, 0..200);
        tokio::time::sleep(std::time::Duration::from_millis(wait_ms)).await;
        server.restart_after_kill();
        for t in tasks {
            let _ = t.await;
        }
        let client = server.client().await;
        let in_a = per_txn(&client.database("t").collection("a")).await;
        let in_b = per_txn(&client.database("u").collection("b")).await;
        assert!(
            in_a.values().all(|n| *n == 3),
            "round {round} (seed {seed}): a partial transaction in a"
        );
        assert!(
            in_b.values().all(|n| *n == 2),
            "round {round} (seed {seed}): a partial transaction in b"
        );
        assert!(
            in_a.keys().eq(in_b.keys()),
            "round {round} (seed {seed}): a transaction is in one collection only"
        );
        let acked = acked.lock().expect("acked").clone();
        assert!(
            !acked.is_empty(),
            "round {round}: nothing committed before the kill"
        );
        let lost: Vec<_> = acked.iter().filter(|t| !in_a.contains_key(t)).collect();
        assert!(
            lost.is_empty(),
            "round {round} (seed {seed}): committed transactions lost: {lost:?}"
        );
        println!(
            "round {round}: {} committed transactions all there, none partial",
            acked.len()
        );
    }
}
