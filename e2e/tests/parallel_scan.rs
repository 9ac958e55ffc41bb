//! Proves parallel collection scans through the driver: `$group`, `$count`, top-k `$sort` +
//! `$limit`, `countDocuments` and the `count` command give the same replies with parallel scans
//! on and off (`parallelScanThreads` 1), explain shows the `PARALLEL` stage only when on, and
//! maxTimeMS and killOp stop a parallel `$group` with mongod's codes (50, 11601), and a
//! transaction's `$group` and count see exactly its snapshot and its own writes.
//! How: a real server process started with `parallelScanMinDocuments` low, 20,000 documents.

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code};
use futures_util::TryStreamExt;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");
/// A stopped operation must be gone within this (only a query that ignores its signal fails).
const STOP_BOUND: Duration = Duration::from_secs(20);
const DOCS: i32 = 20_000;

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

async fn start() -> (Server, mongodb::Client, mongodb::Collection<Document>) {
    let server = Server::start(BIN, &["--setParameter", "parallelScanMinDocuments=1000"]);
    let client = server.client().await;
    let coll = client.database("t").collection::<Document>("c");
    let docs: Vec<Document> = (0..DOCS)
        .map(|i| {
            let v = match i % 5 {
                0 => Bson::Int64(i64::from(i) * 1_000_003),
                1 => Bson::Decimal128(format!("{}.{:02}", i % 977, i % 100).parse().unwrap()),
                2 => Bson::Null,
                _ => Bson::Int32(i % 1000 - 500),
            };
            doc! { "_id": i, "k": i % 37, "t": i % 4, "v": v, "s": format!("s{}", i % 11) }
        })
        .collect();
    coll.insert_many(docs).await.unwrap();
    (server, client, coll)
}

async fn set_threads(client: &mongodb::Client, n: i32) {
    client
        .database("admin")
        .run_command(doc! { "setParameter": 1, "parallelScanThreads": n })
        .await
        .unwrap();
}

async fn agg(coll: &mongodb::Collection<Document>, pipeline: &[Document]) -> Vec<Document> {
    coll.aggregate(pipeline.to_vec())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

/// The winning plan of an aggregate's `$cursor` stage.
async fn cursor_plan(db: &mongodb::Database, pipeline: &[Document]) -> Document {
    let e = db
        .run_command(doc! { "aggregate": "c", "pipeline": pipeline.to_vec(), "explain": true })
        .await
        .unwrap();
    let stages = e.get_array("stages").unwrap();
    let cursor = stages[0]
        .as_document()
        .unwrap()
        .get_document("$cursor")
        .unwrap();
    cursor
        .get_document("queryPlanner")
        .unwrap()
        .get_document("winningPlan")
        .unwrap()
        .clone()
}

fn pipelines() -> Vec<Vec<Document>> {
    vec![
        vec![
            doc! { "$group": { "_id": "$k", "n": { "$sum": 1 }, "s": { "$sum": "$v" },
            "a": { "$avg": "$v" }, "lo": { "$min": "$s" }, "hi": { "$max": "$v" },
            "f": { "$first": "$_id" }, "l": { "$last": "$_id" } } },
        ],
        vec![
            doc! { "$match": { "t": { "$ne": 2 } } },
            doc! { "$group": { "_id": null, "n": { "$sum": 1 } } },
        ],
        vec![
            doc! { "$match": { "k": { "$gt": 3 } } },
            doc! { "$count": "n" },
        ],
        vec![doc! { "$sort": { "k": -1, "t": 1 } }, doc! { "$limit": 10 }],
        vec![
            doc! { "$group": { "_id": "$t", "c": { "$count": {} } } },
            doc! { "$sort": { "_id": 1 } },
        ],
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_and_serial_replies_are_equal() {
    let (_server, client, coll) = start().await;
    let db = client.database("t");
    let parallel = cores() > 1;
    for p in pipelines() {
        let plan = cursor_plan(&db, &p).await;
        assert_eq!(
            plan.get_str("stage").unwrap() == "PARALLEL",
            parallel,
            "{plan}"
        );
        if parallel {
            assert_eq!(
                plan.get_i32("parts").unwrap() as usize,
                cores().min(8),
                "{plan}"
            );
        }
        let on = agg(&coll, &p).await;
        set_threads(&client, 1).await;
        let plan_off = cursor_plan(&db, &p).await;
        assert_ne!(plan_off.get_str("stage").unwrap(), "PARALLEL", "{plan_off}");
        let off = agg(&coll, &p).await;
        set_threads(&client, 0).await;
        assert_eq!(on, off, "{p:?}");
        assert!(!on.is_empty(), "{p:?}");
    }
    let q = doc! { "v": { "$type": "number" }, "t": { "$lt": 3 } };
    let on_docs = coll.count_documents(q.clone()).await.unwrap();
    let on_count = db
        .run_command(doc! { "count": "c", "query": q.clone() })
        .await
        .unwrap();
    let e = db
        .run_command(doc! { "explain": { "count": "c", "query": q.clone() } })
        .await
        .unwrap();
    let count_input = cairn_e2e::winning(&e).get_document("inputStage").unwrap();
    assert_eq!(
        count_input.get_str("stage").unwrap() == "PARALLEL",
        parallel,
        "{e}"
    );
    set_threads(&client, 1).await;
    let off_docs = coll.count_documents(q.clone()).await.unwrap();
    let off_count = db
        .run_command(doc! { "count": "c", "query": q })
        .await
        .unwrap();
    assert_eq!(on_docs, off_docs);
    assert_eq!(on_count, off_count);
    assert!(on_docs > 0);
}

/// A `$group` whose key costs thousands of expression steps per document: minutes of work.
fn heavy_group() -> Vec<Document> {
    vec![doc! { "$group": {
        "_id": { "$reduce": { "input": { "$range": [0, { "$add": [5000, "$k"] }] },
            "initialValue": 0, "in": { "$add": ["$$value", "$$this"] } } },
        "n": { "$sum": 1 },
    } }]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn max_time_ms_and_kill_op_stop_a_parallel_group() {
    let (_server, client, coll) = start().await;
    let db = client.database("t");
    let plan = cursor_plan(&db, &heavy_group()).await;
    assert_eq!(
        plan.get_str("stage").unwrap() == "PARALLEL",
        cores() > 1,
        "{plan}"
    );
    let started = Instant::now();
    let r = coll
        .aggregate(heavy_group())
        .max_time(Duration::from_millis(300))
        .await;
    let e = match r {
        Ok(cursor) => cursor.try_collect::<Vec<_>>().await.unwrap_err(),
        Err(e) => e,
    };
    assert_eq!(error_code(&e), 50, "{e}");
    let took = started.elapsed();
    println!("parallel $group, maxTimeMS 300: code 50 after {took:?}");
    assert!(took < STOP_BOUND, "took {took:?}");

    let admin = client.database("admin");
    let query = tokio::spawn({
        let coll = coll.clone();
        async move {
            match coll.aggregate(heavy_group()).await {
                Ok(cursor) => cursor.try_collect::<Vec<_>>().await.map(|_| ()),
                Err(e) => Err(e),
            }
        }
    });
    let opid = loop {
        let r = admin.run_command(doc! { "currentOp": 1 }).await.unwrap();
        let op = r
            .get_array("inprog")
            .unwrap()
            .iter()
            .filter_map(|o| o.as_document())
            .find(|o| o.get_str("ns").is_ok_and(|ns| ns == "t.c"))
            .and_then(|o| o.get("opid").cloned());
        if let Some(op) = op {
            break op;
        }
        assert!(started.elapsed() < STOP_BOUND * 2, "never in currentOp");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let killed = Instant::now();
    admin
        .run_command(doc! { "killOp": 1, "op": opid })
        .await
        .unwrap();
    let e = query.await.unwrap().unwrap_err();
    assert_eq!(error_code(&e), 11601, "{e}");
    println!(
        "parallel $group, killOp: code 11601 after {:?}",
        killed.elapsed()
    );
    assert!(killed.elapsed() < STOP_BOUND);
    // Every helper thread came back: the next heavy-free group still runs (and in parallel).
    let n = agg(&coll, &[doc! { "$count": "n" }]).await;
    assert_eq!(n, vec![doc! { "n": DOCS }]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_transaction_groups_and_counts_what_it_sees() {
    let server =
        Server::start_initiated(BIN, &["--setParameter", "parallelScanMinDocuments=1000"]).await;
    let client = server.client().await;
    let coll = client.database("t").collection::<Document>("c");
    let docs: Vec<Document> = (0..5000).map(|i| doc! { "_id": i, "k": i % 3 }).collect();
    coll.insert_many(docs).await.unwrap();
    let group = vec![
        doc! { "$group": { "_id": "$k", "n": { "$sum": 1 } } },
        doc! { "$sort": { "_id": 1 } },
    ];
    let mut s = client.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    coll.insert_one(doc! { "_id": -1, "k": 0 })
        .session(&mut s)
        .await
        .unwrap();
    coll.delete_one(doc! { "_id": 1 })
        .session(&mut s)
        .await
        .unwrap();
    // Outside the transaction, a write it cannot see.
    coll.insert_one(doc! { "_id": 10_000, "k": 2 })
        .await
        .unwrap();
    let mut cursor = coll.aggregate(group.clone()).session(&mut s).await.unwrap();
    let mut inside = Vec::new();
    while let Some(d) = cursor.next(&mut s).await {
        inside.push(d.unwrap());
    }
    let expect = vec![
        doc! { "_id": 0, "n": 1668 },
        doc! { "_id": 1, "n": 1666 },
        doc! { "_id": 2, "n": 1666 },
    ];
    assert_eq!(inside, expect);
    let n = coll
        .count_documents(doc! { "k": { "$gte": 0 } })
        .session(&mut s)
        .await
        .unwrap();
    assert_eq!(n, 5000);
    s.commit_transaction().await.unwrap();
    assert_eq!(
        coll.count_documents(doc! { "k": { "$gte": 0 } })
            .await
            .unwrap(),
        5001
    );
}
