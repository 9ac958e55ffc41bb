//! Proves that reads inside a transaction and snapshot reads served by secondary indexes (issue 17)
//! return exactly what their snapshot plus the transaction's own writes hold, while another client
//! commits writes that move documents into and out of the queried ranges: equality and range,
//! multikey, hashed, `$or` unions, sorted (stays sorted), limited, batched through getMore, count
//! and distinct, and the profiler shows the IXSCAN plan. How: a one-member replica set, the Rust
//! driver's sessions; each indexed answer is compared with the same query hinted `$natural` in the
//! same transaction (or at the same `atClusterTime`), and the fixed cases also with the expected ids.

use bson::{Bson, Document, Timestamp, doc};
use cairn_e2e::Server;
use futures_util::TryStreamExt;
use mongodb::options::Hint;
use mongodb::{ClientSession, Collection, Database};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

/// Documents `{_id: i, a: i, b: [i % 7, i % 5], h: i % 4}` for i in `ids`.
fn docs(ids: std::ops::Range<i32>) -> Vec<Document> {
    ids.map(|i| doc! { "_id": i, "a": i, "b": [i % 7, i % 5], "h": i % 4 })
        .collect()
}

async fn indexed(coll: &Collection<Document>) {
    for keys in [doc! { "a": 1 }, doc! { "b": 1 }, doc! { "h": "hashed" }] {
        coll.create_index(mongodb::IndexModel::builder().keys(keys).build())
            .await
            .expect("createIndex");
    }
}

/// The documents of a find in the session's transaction, drained through getMores of `batch`.
async fn find_in(
    coll: &Collection<Document>,
    s: &mut ClientSession,
    filter: Document,
    sort: Option<Document>,
    limit: Option<i64>,
    natural: bool,
) -> Vec<Document> {
    let mut find = coll.find(filter.clone()).batch_size(3).session(&mut *s);
    if let Some(sort) = sort {
        find = find.sort(sort);
    }
    if let Some(l) = limit {
        find = find.limit(l);
    }
    if natural {
        find = find.hint(Hint::Keys(doc! { "$natural": 1 }));
    }
    let mut cursor = find.await.unwrap_or_else(|e| panic!("find {filter}: {e}"));
    let mut out = Vec::new();
    while let Some(d) = cursor.next(&mut *s).await {
        out.push(d.expect("doc"));
    }
    out
}

fn ids(docs: &[Document]) -> Vec<i32> {
    let mut v: Vec<i32> = docs
        .iter()
        .map(|d| d.get_i32("_id").expect("_id"))
        .collect();
    v.sort_unstable();
    v
}

fn a_of(d: &Document) -> i32 {
    d.get_i32("a").expect("a")
}

/// The indexed answer and the `$natural` one agree (as sets; with a sort, the indexed one is in
/// order; with a sort and a limit, both hold the same sort keys). Returns the indexed ids.
async fn agree(
    coll: &Collection<Document>,
    s: &mut ClientSession,
    filter: Document,
    sort: Option<Document>,
    limit: Option<i64>,
) -> Vec<i32> {
    let got = find_in(coll, s, filter.clone(), sort.clone(), limit, false).await;
    let want = find_in(coll, s, filter.clone(), sort.clone(), limit, true).await;
    if let Some(sort) = &sort {
        let dir = sort.get_i32("a").expect("sorts on a");
        let keys: Vec<i32> = got.iter().map(a_of).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        if dir < 0 {
            sorted.reverse();
        }
        assert_eq!(keys, sorted, "{filter} sorted {sort}: out of order");
        if limit.is_some() {
            let want_keys: Vec<i32> = want.iter().map(a_of).collect();
            assert_eq!(keys, want_keys, "{filter} sorted {sort} limit {limit:?}");
            return ids(&got);
        }
    }
    assert_eq!(ids(&got), ids(&want), "{filter} (indexed vs $natural)");
    ids(&got)
}

/// `countDocuments` (aggregate `$count`) and `distinct` in the transaction, indexed vs the full
/// answer of a `$natural` find.
async fn counts_agree(coll: &Collection<Document>, s: &mut ClientSession, filter: Document) {
    let n = coll
        .count_documents(filter.clone())
        .session(&mut *s)
        .await
        .expect("count");
    let all = find_in(coll, s, filter.clone(), None, None, true).await;
    assert_eq!(n, all.len() as u64, "count {filter}");
    let mut got: Vec<i32> = coll
        .distinct("h", filter.clone())
        .session(&mut *s)
        .await
        .expect("distinct")
        .iter()
        .map(|v| v.as_i32().expect("int"))
        .collect();
    got.sort_unstable();
    let mut want: Vec<i32> = all.iter().map(|d| d.get_i32("h").expect("h")).collect();
    want.sort_unstable();
    want.dedup();
    assert_eq!(got, want, "distinct h {filter}");
}

#[tokio::test]
async fn indexed_reads_in_a_transaction_see_its_snapshot_and_its_own_writes() {
    let server = Server::start_initiated(BIN, &[]).await;
    let client = server.client().await;
    let other = server.client().await;
    let coll = client.database("ti").collection::<Document>("c");
    let theirs = other.database("ti").collection::<Document>("c");
    coll.insert_many(docs(0..100)).await.expect("seed");
    indexed(&coll).await;

    let mut s = client.start_session().await.expect("session");
    s.start_transaction().await.expect("start");
    // The first read fixes the snapshot.
    let range = doc! { "a": { "$gte": 10, "$lt": 20 } };
    assert_eq!(
        agree(&coll, &mut s, range.clone(), None, None).await,
        (10..20).collect::<Vec<_>>()
    );
    // Another client moves 12 and 15 out of the range, 50 into it, deletes 11, inserts 200 in it.
    theirs
        .update_many(
            doc! { "_id": { "$in": [12, 15] } },
            doc! { "$set": { "a": 150 } },
        )
        .await
        .expect("move out");
    theirs
        .update_one(doc! { "_id": 50 }, doc! { "$set": { "a": 14 } })
        .await
        .expect("move in");
    theirs.delete_one(doc! { "_id": 11 }).await.expect("delete");
    theirs
        .insert_one(doc! { "_id": 200, "a": 13, "b": [1], "h": 1 })
        .await
        .expect("insert");
    // The transaction still sees its snapshot.
    let snapshot: Vec<i32> = (10..20).collect();
    assert_eq!(
        agree(&coll, &mut s, range.clone(), None, None).await,
        snapshot
    );
    assert_eq!(
        agree(&coll, &mut s, doc! { "a": 12 }, None, None).await,
        vec![12]
    );
    assert!(
        agree(&coll, &mut s, doc! { "a": 150 }, None, None)
            .await
            .is_empty()
    );
    // Its own writes: insert 300 into the range, move 18 out, 60 in, delete 19.
    coll.insert_one(doc! { "_id": 300, "a": 15, "b": [2], "h": 3 })
        .session(&mut s)
        .await
        .expect("own insert");
    coll.update_one(doc! { "_id": 18 }, doc! { "$set": { "a": 160 } })
        .session(&mut s)
        .await
        .expect("own move out");
    coll.update_one(doc! { "_id": 60 }, doc! { "$set": { "a": 10 } })
        .session(&mut s)
        .await
        .expect("own move in");
    coll.delete_one(doc! { "_id": 19 })
        .session(&mut s)
        .await
        .expect("own delete");
    let mine = vec![10, 11, 12, 13, 14, 15, 16, 17, 60, 300];
    assert_eq!(agree(&coll, &mut s, range.clone(), None, None).await, mine);
    // Sorted by the index, limited, through getMores of 3.
    let sorted = agree(&coll, &mut s, range.clone(), Some(doc! { "a": 1 }), None).await;
    assert_eq!(sorted, mine);
    let top = agree(
        &coll,
        &mut s,
        range.clone(),
        Some(doc! { "a": -1 }),
        Some(4),
    )
    .await;
    assert_eq!(top, vec![15, 16, 17, 300]);
    // Updates and deletes by an indexed filter act on the transaction's view.
    let r = coll
        .update_many(
            doc! { "a": { "$gte": 16, "$lt": 18 } },
            doc! { "$set": { "h": 9 } },
        )
        .session(&mut s)
        .await
        .expect("update by range");
    assert_eq!(r.matched_count, 2);
    let r = coll
        .delete_many(doc! { "a": 13 })
        .session(&mut s)
        .await
        .expect("delete by equality");
    assert_eq!(r.deleted_count, 1);
    counts_agree(&coll, &mut s, range.clone()).await;
    counts_agree(&coll, &mut s, doc! { "b": { "$in": [3, 4] } }).await;
    s.commit_transaction().await.expect("commit");
    let after: Vec<Document> = coll
        .find(doc! { "h": 9 })
        .await
        .expect("find")
        .try_collect()
        .await
        .expect("docs");
    assert_eq!(ids(&after), vec![16, 17]);
    let now = find_in_plain(&coll, doc! { "a": { "$gte": 10, "$lt": 20 } }).await;
    assert_eq!(now, vec![10, 14, 16, 17, 50, 60, 200, 300]);
}

async fn find_in_plain(coll: &Collection<Document>, filter: Document) -> Vec<i32> {
    let found: Vec<Document> = coll
        .find(filter)
        .await
        .expect("find")
        .try_collect()
        .await
        .expect("docs");
    ids(&found)
}

/// A transaction's (or a snapshot read's) plan, read back from the profiler.
async fn profiled_plans(db: &Database) -> Vec<String> {
    let entries: Vec<Document> = db
        .collection::<Document>("system.profile")
        .find(doc! { "op": "query", "ns": "ti.c" })
        .await
        .expect("profile")
        .try_collect()
        .await
        .expect("entries");
    entries
        .iter()
        .filter_map(|e| e.get_str("planSummary").ok().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn the_profiler_shows_ixscan_inside_transactions_and_snapshot_reads() {
    let server = Server::start_initiated(BIN, &[]).await;
    let client = server.client().await;
    let db = client.database("ti");
    let coll = db.collection::<Document>("c");
    coll.insert_many(docs(0..50)).await.expect("seed");
    indexed(&coll).await;
    db.run_command(doc! { "profile": 2 })
        .await
        .expect("profile");
    let mut s = client.start_session().await.expect("session");
    s.start_transaction().await.expect("start");
    find_in(&coll, &mut s, doc! { "a": 7 }, None, None, false).await;
    // mongod refuses explain in a transaction (InvalidOptions for aggregate's); cairn answers
    // aggregate's, and it shows the plan the transaction runs: IXSCAN, the sort not provided.
    let explained = db
        .run_command(doc! {
            "aggregate": "c", "explain": true,
            "pipeline": [{ "$match": { "a": { "$lt": 5 } } }, { "$sort": { "a": 1 } }],
        })
        .session(&mut s)
        .await
        .expect("aggregate explain in the transaction");
    let text = explained.to_string();
    assert!(
        text.contains("IXSCAN") && !text.contains("COLLSCAN"),
        "{text}"
    );
    assert!(
        text.contains("$sort"),
        "the index order is not trusted: {text}"
    );
    s.commit_transaction().await.expect("commit");
    db.run_command(doc! {
        "find": "c", "filter": { "a": { "$gt": 40 } }, "readConcern": { "level": "snapshot" },
    })
    .await
    .expect("snapshot find");
    db.run_command(doc! { "profile": 0 })
        .await
        .expect("profile off");
    let plans = profiled_plans(&db).await;
    assert_eq!(
        plans,
        vec!["IXSCAN { a: 1 }", "IXSCAN { a: 1 }"],
        "{plans:?}"
    );
}

/// A raw snapshot find at `at` (all batches), its documents.
async fn snapshot_find(
    db: &Database,
    filter: Document,
    at: Timestamp,
    natural: bool,
) -> Vec<Document> {
    let mut cmd = doc! {
        "find": "c", "filter": filter, "batchSize": 4,
        "readConcern": { "level": "snapshot", "atClusterTime": at },
    };
    if natural {
        cmd.insert("hint", doc! { "$natural": 1 });
    }
    let mut r = db.run_command(cmd).await.expect("snapshot find");
    let mut out = Vec::new();
    loop {
        let c = r.get_document("cursor").expect("cursor");
        let batch = c
            .get_array("firstBatch")
            .or_else(|_| c.get_array("nextBatch"))
            .expect("batch");
        out.extend(batch.iter().filter_map(Bson::as_document).cloned());
        let id = c.get_i64("id").expect("id");
        if id == 0 {
            return out;
        }
        r = db
            .run_command(doc! { "getMore": id, "collection": "c", "batchSize": 4 })
            .await
            .expect("getMore");
    }
}

#[tokio::test]
async fn snapshot_reads_by_index_see_the_cluster_time_they_ask_for() {
    let server = Server::start_initiated(BIN, &[]).await;
    let client = server.client().await;
    let db = client.database("ti");
    let coll = db.collection::<Document>("c");
    coll.insert_many(docs(0..60)).await.expect("seed");
    indexed(&coll).await;
    let at = db
        .run_command(doc! { "ping": 1 })
        .await
        .expect("ping")
        .get_timestamp("operationTime")
        .expect("operationTime");
    coll.update_many(doc! { "a": { "$lt": 10 } }, doc! { "$inc": { "a": 30 } })
        .await
        .expect("move");
    coll.delete_many(doc! { "a": { "$gte": 50 } })
        .await
        .expect("delete");
    coll.insert_one(doc! { "_id": 100, "a": 5, "b": [5], "h": 0 })
        .await
        .expect("insert");
    for filter in [
        doc! { "a": { "$lt": 10 } },
        doc! { "a": { "$gte": 30, "$lt": 40 } },
        doc! { "a": { "$gte": 50 } },
        doc! { "b": 3 },
        doc! { "h": 2 },
        doc! { "$or": [{ "a": 5 }, { "b": 6 }] },
    ] {
        let got = snapshot_find(&db, filter.clone(), at, false).await;
        let want = snapshot_find(&db, filter.clone(), at, true).await;
        assert_eq!(ids(&got), ids(&want), "{filter}");
    }
    assert_eq!(
        ids(&snapshot_find(&db, doc! { "a": { "$lt": 10 } }, at, false).await),
        (0..10).collect::<Vec<_>>()
    );
    let r = db
        .run_command(doc! {
            "distinct": "c", "key": "h", "query": { "a": { "$gte": 55 } },
            "readConcern": { "level": "snapshot", "atClusterTime": at },
        })
        .await
        .expect("distinct");
    let mut hs: Vec<i32> = r
        .get_array("values")
        .expect("values")
        .iter()
        .map(|v| v.as_i32().expect("int"))
        .collect();
    hs.sort_unstable();
    assert_eq!(hs, vec![0, 1, 2, 3]);
}

/// One random document: `a` in 0..40, `b` an array of up to 3 values in 0..10 (multikey), `h`.
fn random_doc(rng: &mut StdRng, id: i32) -> Document {
    let b: Vec<i32> = (0..rng.random_range(0..4))
        .map(|_| rng.random_range(0..10))
        .collect();
    doc! { "_id": id, "a": rng.random_range(0..40), "b": b, "h": rng.random_range(0..5) }
}

/// A random write: an insert at `next_id`, an update of `a` (or `b`) or a delete of an id in
/// `targets`.
async fn random_write(
    coll: &Collection<Document>,
    s: Option<&mut ClientSession>,
    rng: &mut StdRng,
    targets: std::ops::Range<i32>,
    next_id: &mut i32,
) {
    let target = doc! { "_id": rng.random_range(targets) };
    let choice = rng.random_range(0..4);
    let outcome = match (choice, s) {
        (0, s) => {
            *next_id += 1;
            let d = random_doc(rng, *next_id);
            match s {
                Some(s) => coll.insert_one(d).session(s).await.map(|_| ()),
                None => coll.insert_one(d).await.map(|_| ()),
            }
        }
        (1 | 2, s) => {
            let set = if choice == 1 {
                doc! { "$set": { "a": rng.random_range(0..40) } }
            } else {
                doc! { "$set": { "b": [rng.random_range(0..10)] } }
            };
            match s {
                Some(s) => coll.update_one(target, set).session(s).await.map(|_| ()),
                None => coll.update_one(target, set).await.map(|_| ()),
            }
        }
        (_, Some(s)) => coll.delete_one(target).session(s).await.map(|_| ()),
        (_, None) => coll.delete_one(target).await.map(|_| ()),
    };
    outcome.expect("random write");
}

#[tokio::test]
async fn random_writes_never_make_indexed_transaction_reads_differ_from_natural_ones() {
    let seed: u64 = std::env::var("CAIRN_TXN_INDEX_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("seed {seed} (CAIRN_TXN_INDEX_SEED)");
    let mut rng = StdRng::seed_from_u64(seed);
    let server = Server::start_initiated(BIN, &[]).await;
    let client = server.client().await;
    let other = server.client().await;
    let coll = client.database("ti").collection::<Document>("c");
    let theirs = other.database("ti").collection::<Document>("c");
    // The other client writes ids below 200 and inserts from 1000, the transactions write ids
    // 200..400 and insert their own: a transaction never writes a document changed after its
    // snapshot (that would be a WriteConflict, not what this test is about).
    let mut next_id = 1000;
    let seed_docs: Vec<Document> = (0..400).map(|i| random_doc(&mut rng, i)).collect();
    coll.insert_many(seed_docs).await.expect("seed");
    indexed(&coll).await;
    for round in 0..6 {
        let mut s = client.start_session().await.expect("session");
        s.start_transaction().await.expect("start");
        agree(&coll, &mut s, doc! { "a": 0 }, None, None).await;
        for _ in 0..40 {
            random_write(&theirs, None, &mut rng, 0..200, &mut next_id).await;
        }
        // The transaction's own writes go to ids the other client no longer touches.
        let mut own_next = 10_000 * (round + 1);
        for _ in 0..10 {
            random_write(&coll, Some(&mut s), &mut rng, 200..400, &mut own_next).await;
        }
        for _ in 0..8 {
            let lo = rng.random_range(0..40);
            let hi = lo + rng.random_range(1..15);
            let a = rng.random_range(0..40);
            let b = rng.random_range(0..10);
            let filters = [
                doc! { "a": a },
                doc! { "a": { "$gte": lo, "$lt": hi } },
                doc! { "b": b },
                doc! { "b": { "$in": [b, (b + 3) % 10] } },
                doc! { "h": rng.random_range(0..5) },
                doc! { "$or": [{ "a": a }, { "b": b }] },
            ];
            for f in filters {
                agree(&coll, &mut s, f, None, None).await;
            }
            let range = doc! { "a": { "$gte": lo, "$lt": hi } };
            agree(&coll, &mut s, range.clone(), Some(doc! { "a": 1 }), None).await;
            agree(
                &coll,
                &mut s,
                range.clone(),
                Some(doc! { "a": -1 }),
                Some(5),
            )
            .await;
            counts_agree(&coll, &mut s, range).await;
        }
        s.abort_transaction().await.expect("abort");
    }
}
