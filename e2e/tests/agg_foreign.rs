//! Proves aggregates that read other collections wait in their cursor too: a `$lookup` (hash
//! table, foreign index, `let` + pipeline) and a `$unionWith` over thousands of documents read in
//! small batches give the whole result, the lookup's table is charged while the cursor is open
//! and given back by killCursors, dropping or renaming the foreign collection between getMores
//! kills the cursor (43, as dropping its own collection does), a getMore inside a slow
//! `$lookup` stops at maxTimeMS, `$out`/`$merge` of a large result write it in chunks without
//! holding it (the server's peak RSS grows by less than half the result's size), a failing
//! `$out` leaves no temporary collection and the target untouched, inside a transaction a
//! getMore's foreign reads see the transaction's snapshot, and a `$geoNear` cursor's matches
//! are charged while it is open. How: a real `cairn` process, raw aggregate/getMore/killCursors commands,
//! `serverStatus`'s `metrics.queryMemory.usedBytes`, and VmHWM in /proc/<pid>/status.

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

/// Local documents; each `k` names one of `FOREIGN` foreign documents.
const LOCAL: i64 = 20_000;
const FOREIGN: i64 = 1_000;
/// Local documents the `let` + pipeline form joins.
const LET_LOCAL: i64 = 2_000;

async fn fill(db: &mongodb::Database) {
    let local: Vec<Document> = (0..LOCAL)
        .map(|i| doc! { "_id": i, "k": i % FOREIGN, "pad": "p".repeat(40) })
        .collect();
    for chunk in local.chunks(10_000) {
        db.collection("c")
            .insert_many(chunk.to_vec())
            .await
            .unwrap();
    }
    let foreign: Vec<Document> = (0..FOREIGN)
        .map(|j| doc! { "_id": j, "k": j, "name": format!("n{j}") })
        .collect();
    db.collection::<Document>("f")
        .insert_many(foreign)
        .await
        .unwrap();
}

async fn used_bytes(db: &mongodb::Database) -> i64 {
    let status = db.run_command(doc! { "serverStatus": 1 }).await.unwrap();
    status
        .get_document("metrics")
        .and_then(|m| m.get_document("queryMemory"))
        .and_then(|m| m.get_i64("usedBytes"))
        .unwrap()
}

fn docs_of(cursor: &Document, field: &str) -> Vec<Document> {
    cursor
        .get_array(field)
        .unwrap()
        .iter()
        .filter_map(|b| b.as_document().cloned())
        .collect()
}

/// Opens an aggregate on `c` with a first batch of `batch`: (id, first batch).
async fn open(db: &mongodb::Database, pipeline: Vec<Document>, batch: i32) -> (i64, Vec<Document>) {
    let reply = db
        .run_command(
            doc! { "aggregate": "c", "pipeline": pipeline, "cursor": { "batchSize": batch } },
        )
        .await
        .unwrap();
    let cursor = reply.get_document("cursor").unwrap();
    (cursor.get_i64("id").unwrap(), docs_of(cursor, "firstBatch"))
}

async fn read_rest(db: &mongodb::Database, mut id: i64, batch: i32) -> Vec<Document> {
    let mut out = Vec::new();
    while id != 0 {
        let reply = db
            .run_command(doc! { "getMore": id, "collection": "c", "batchSize": batch })
            .await
            .unwrap();
        let cursor = reply.get_document("cursor").unwrap();
        out.extend(docs_of(cursor, "nextBatch"));
        id = cursor.get_i64("id").unwrap();
    }
    out
}

fn int(v: Option<&Bson>) -> i64 {
    match v {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// The first `n` local documents joined with their one foreign match each, in `_id` order.
fn check_joined(got: &[Document], n: i64) {
    assert_eq!(got.len() as i64, n);
    for (i, d) in (0i64..).zip(got) {
        assert_eq!(int(d.get("_id")), i);
        let j = d.get_array("j").unwrap();
        assert_eq!(j.len(), 1, "{d}");
        let name = j[0].as_document().unwrap().get_str("name").unwrap();
        assert_eq!(name, format!("n{}", i % FOREIGN));
    }
}

#[tokio::test]
async fn a_lookup_streams_by_every_route_and_kill_cursors_frees_its_table() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("foreign");
    fill(&db).await;
    let equality = vec![
        doc! { "$lookup": { "from": "f", "localField": "k", "foreignField": "k", "as": "j" } },
        doc! { "$project": { "pad": 0 } },
    ];
    // Run per local document, so over fewer of them (a debug build evaluates 1,000 `$expr`s
    // for each).
    let with_let = vec![
        doc! { "$match": { "_id": { "$lt": LET_LOCAL } } },
        doc! { "$lookup": { "from": "f", "let": { "v": "$k" }, "pipeline": [
            { "$match": { "$expr": { "$eq": ["$k", "$$v"] } } }, { "$project": { "name": 1 } }
        ], "as": "j" } },
        doc! { "$project": { "pad": 0 } },
    ];
    // The hash table: charged to the budget while the cursor is open.
    let (id, mut got) = open(&db, equality.clone(), 5).await;
    assert_eq!(got.len(), 5);
    assert_ne!(id, 0, "the rest waits in the cursor");
    assert!(used_bytes(&db).await > 0, "the hash table is charged");
    got.extend(read_rest(&db, id, 700).await);
    check_joined(&got, LOCAL);
    assert_eq!(used_bytes(&db).await, 0, "a used-up cursor holds nothing");

    let (id, _) = open(&db, equality.clone(), 2).await;
    assert!(used_bytes(&db).await > 0);
    let reply = db
        .run_command(doc! { "killCursors": "c", "cursors": [id] })
        .await
        .unwrap();
    assert_eq!(reply.get_array("cursorsKilled").unwrap().len(), 1);
    assert_eq!(used_bytes(&db).await, 0, "killCursors gives the table back");

    // `let` + pipeline over a foreign collection small enough to be kept.
    let (id, mut got) = open(&db, with_let, 3).await;
    got.extend(read_rest(&db, id, 900).await);
    check_joined(&got, LET_LOCAL);

    // The foreign index: probes as results are pulled, nothing held.
    db.run_command(
        doc! { "createIndexes": "f", "indexes": [{ "key": { "k": 1 }, "name": "k_1" }] },
    )
    .await
    .unwrap();
    let (id, mut got) = open(&db, equality, 4).await;
    assert_eq!(used_bytes(&db).await, 0, "an index probe holds no table");
    got.extend(read_rest(&db, id, 1000).await);
    check_joined(&got, LOCAL);
}

/// Foreign reads happen as results are pulled: a document inserted into `f` between two
/// getMores is seen by the later ones (no snapshot outside a transaction, as in mongod).
#[tokio::test]
async fn a_union_with_reads_the_other_side_as_it_is_pulled() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("union");
    fill(&db).await;
    let pipeline = vec![
        doc! { "$match": { "_id": { "$lt": 3 } } },
        doc! { "$unionWith": { "coll": "f", "pipeline": [{ "$project": { "name": 1 } }] } },
    ];
    let (id, mut got) = open(&db, pipeline, 2).await;
    assert_eq!(got.len(), 2);
    db.collection::<Document>("f")
        .insert_one(doc! { "_id": FOREIGN, "k": FOREIGN, "name": "late" })
        .await
        .unwrap();
    got.extend(read_rest(&db, id, 100).await);
    assert_eq!(
        got.len() as i64,
        3 + FOREIGN + 1,
        "the late document is read too"
    );
    let names: Vec<&str> = got.iter().filter_map(|d| d.get_str("name").ok()).collect();
    assert_eq!(names.first(), Some(&"n0"));
    assert_eq!(names.last(), Some(&"late"));
}

#[tokio::test]
async fn dropping_or_renaming_the_foreign_collection_kills_the_cursor() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("dropped");
    fill(&db).await;
    let lookup = vec![
        doc! { "$lookup": { "from": "f", "localField": "k", "foreignField": "k", "as": "j" } },
    ];
    let union = vec![doc! { "$unionWith": "f" }];
    for (pipeline, ddl) in [
        (lookup.clone(), doc! { "drop": "f" }),
        (
            union,
            doc! { "renameCollection": "dropped.f", "to": "dropped.g" },
        ),
    ] {
        let (id, first) = open(&db, pipeline.clone(), 2).await;
        assert_eq!(first.len(), 2);
        let admin = client.database("admin");
        let target = if ddl.contains_key("drop") {
            &db
        } else {
            &admin
        };
        target.run_command(ddl.clone()).await.unwrap();
        let e = db
            .run_command(doc! { "getMore": id, "collection": "c", "batchSize": 10 })
            .await
            .unwrap_err();
        assert_eq!(error_code(&e), 43, "{ddl}: {e}");
        assert_eq!(
            used_bytes(&db).await,
            0,
            "{ddl}: the killed cursor's table is given back"
        );
        // Put `f` back for the next case.
        if ddl.contains_key("renameCollection") {
            admin
                .run_command(doc! { "renameCollection": "dropped.g", "to": "dropped.f" })
                .await
                .unwrap();
        } else {
            let foreign: Vec<Document> = (0..FOREIGN)
                .map(|j| doc! { "_id": j, "k": j, "name": format!("n{j}") })
                .collect();
            db.collection::<Document>("f")
                .insert_many(foreign)
                .await
                .unwrap();
        }
    }
}

/// The server's peak resident memory in bytes (VmHWM), after resetting it to the current RSS.
fn peak_rss_bytes(server: &Server, reset: bool) -> u64 {
    let pid = server.pid();
    if reset {
        // "5" resets the peak to the current RSS (Linux 4.0+).
        let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[tokio::test]
async fn out_and_merge_of_a_large_result_write_it_in_chunks() {
    const DOCS: i64 = 30_000;
    const PAD: usize = 2_000;
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("bigout");
    let c = db.collection::<Document>("c");
    for start in (0..DOCS).step_by(2_000) {
        let docs: Vec<Document> = (start..start + 2_000)
            .map(|i| doc! { "_id": i, "v": i, "pad": "x".repeat(PAD) })
            .collect();
        c.insert_many(docs).await.unwrap();
    }
    let result_bytes = DOCS as u64 * PAD as u64;
    for (name, last) in [
        ("out", doc! { "$out": "o" }),
        ("merge", doc! { "$merge": { "into": "m" } }),
    ] {
        let before = peak_rss_bytes(&server, true);
        let reply = db
            .run_command(doc! {
                "aggregate": "c", "cursor": {},
                "pipeline": [{ "$addFields": { "w": { "$add": ["$v", 1] } } }, last],
            })
            .await
            .unwrap();
        let cursor = reply.get_document("cursor").unwrap();
        assert_eq!(cursor.get_i64("id").unwrap(), 0);
        let grown = peak_rss_bytes(&server, false).saturating_sub(before);
        println!("${name} of {result_bytes} bytes: peak RSS grew by {grown} bytes");
        assert!(
            grown < result_bytes / 2,
            "${name}: peak RSS grew by {grown} bytes for a {result_bytes}-byte result"
        );
        let target = if name == "out" { "o" } else { "m" };
        let n = db
            .collection::<Document>(target)
            .count_documents(doc! { "w": { "$gt": 0 } })
            .await
            .unwrap();
        assert_eq!(n as i64, DOCS, "${name} wrote every document");
    }
    assert_eq!(used_bytes(&db).await, 0);
}

/// A `$out` whose pipeline fails after some chunks were written leaves the target as it was
/// and no temporary collection behind.
#[tokio::test]
async fn a_failing_out_drops_its_temporary_collection() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("failout");
    let c = db.collection::<Document>("c");
    let docs: Vec<Document> = (0..5_000_i64)
        .map(|i| doc! { "_id": i, "v": 4_999 - i })
        .collect();
    c.insert_many(docs).await.unwrap();
    db.collection::<Document>("o")
        .insert_one(doc! { "_id": "kept" })
        .await
        .unwrap();
    // The last document divides by zero, after several chunks went to the temporary collection.
    let e = db
        .run_command(doc! {
            "aggregate": "c", "cursor": {},
            "pipeline": [{ "$addFields": { "q": { "$divide": [1, "$v"] } } }, { "$out": "o" }],
        })
        .await
        .unwrap_err();
    assert_ne!(error_code(&e), 0, "{e}");
    let names = db.list_collection_names().await.unwrap();
    assert!(
        names.iter().all(|n| !n.starts_with("tmp.agg_out")),
        "{names:?}"
    );
    let kept: Vec<Document> = {
        use futures_util::TryStreamExt;
        db.collection::<Document>("o")
            .find(doc! {})
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap()
    };
    assert_eq!(kept, vec![doc! { "_id": "kept" }]);
}

/// The getMore of a suspended `$lookup` whose sub-pipeline is slow per foreign document stops
/// at what is left of the command's maxTimeMS (50), and the cursor is gone with its state.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_get_more_inside_a_lookup_stops_at_max_time_ms() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("slowlookup");
    fill(&db).await;
    let reply = db
        .run_command(doc! {
            "aggregate": "c", "cursor": { "batchSize": 1 }, "maxTimeMS": 3_000_i64,
            "pipeline": [
                { "$match": { "_id": { "$lt": 50 } } },
                { "$lookup": { "from": "f", "let": { "v": "$k" }, "pipeline": [
                    { "$match": { "$expr": { "$eq": ["$k", "$$v"] } } },
                    { "$addFields": { "x": { "$size": { "$range": [0, 500_000] } } } },
                ], "as": "j" } },
            ],
        })
        .await
        .unwrap();
    let id = reply.get_document("cursor").unwrap().get_i64("id").unwrap();
    assert_ne!(id, 0);
    let e = db
        .run_command(doc! { "getMore": id, "collection": "c", "batchSize": 1_000 })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 50, "{e}");
    assert_eq!(
        used_bytes(&db).await,
        0,
        "the failed cursor gave its state back"
    );
    let e = db
        .run_command(doc! { "getMore": id, "collection": "c" })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 43, "{e}");
}

/// Inside a transaction a later getMore's foreign reads see the transaction's snapshot: a
/// document another client commits into the foreign collection between two batches, before
/// the `$unionWith` opens its side, is not read (outside a transaction it is: see
/// `a_union_with_reads_the_other_side_as_it_is_pulled`).
#[tokio::test]
async fn a_union_in_a_transaction_reads_its_snapshot_across_get_mores() {
    let server = Server::start_initiated(BIN, &[]).await;
    let client = server.client().await;
    let db = client.database("txnunion");
    let c = db.collection::<Document>("c");
    let f = db.collection::<Document>("f");
    c.insert_many((0..5).map(|i| doc! { "_id": i }).collect::<Vec<_>>())
        .await
        .unwrap();
    f.insert_many((100..110).map(|i| doc! { "_id": i }).collect::<Vec<_>>())
        .await
        .unwrap();
    let mut s = client.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    let mut cursor = c
        .aggregate(vec![doc! { "$unionWith": "f" }])
        .batch_size(2)
        .session(&mut s)
        .await
        .unwrap();
    let mut got = Vec::new();
    if let Some(d) = cursor.next(&mut s).await {
        got.push(d.unwrap());
    }
    f.insert_one(doc! { "_id": 999 }).await.unwrap();
    while let Some(d) = cursor.next(&mut s).await {
        got.push(d.unwrap());
    }
    s.commit_transaction().await.unwrap();
    assert_eq!(got.len(), 15, "{got:?}");
    assert!(
        !got.iter().any(|d| d.get_i32("_id").ok() == Some(999)),
        "{got:?}"
    );
}

/// A leading `$geoNear`'s matches (found nearest first at the first batch) wait in the cursor
/// charged to the query budget, and killCursors gives the charge back.
#[tokio::test]
async fn a_geo_near_cursor_keeps_its_matches_charged() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("near");
    let points: Vec<Document> = (0..2_000_i32)
        .map(|i| {
            let (x, y) = (f64::from(i % 50) / 10.0, f64::from(i / 50) / 10.0);
            doc! { "_id": i, "loc": { "type": "Point", "coordinates": [x, y] } }
        })
        .collect();
    db.collection::<Document>("c")
        .insert_many(points)
        .await
        .unwrap();
    db.run_command(
        doc! { "createIndexes": "c", "indexes": [{ "key": { "loc": "2dsphere" }, "name": "loc" }] },
    )
    .await
    .unwrap();
    let near = vec![doc! { "$geoNear": {
        "near": { "type": "Point", "coordinates": [0.0, 0.0] }, "distanceField": "d",
    } }];
    let (id, first) = open(&db, near, 2).await;
    assert_eq!(first.len(), 2);
    assert_eq!(int(first[0].get("_id")), 0, "nearest first");
    assert!(used_bytes(&db).await > 0, "the matches are charged");
    db.run_command(doc! { "killCursors": "c", "cursors": [id] })
        .await
        .unwrap();
    assert_eq!(
        used_bytes(&db).await,
        0,
        "killCursors gives the charge back"
    );
}
