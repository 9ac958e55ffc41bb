//! Proves aggregation works end to end through a real driver: pipelines over stored collections
//! (with a leading `$match` served by an index), cursors over large results, `$lookup` across
//! collections, `$out`/`$merge` writing through storage, pipeline-style updates, and mongod's
//! error codes for bad stages. How: a real `cairn` process and the official Rust driver.

use bson::{Document, doc};
use cairn_e2e::{Server, error_code};
use futures_util::TryStreamExt;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

#[tokio::test]
async fn pipelines_lookup_out_merge_and_updates() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("agg");
    let orders = db.collection::<Document>("orders");
    orders
        .insert_many((0..300).map(|i| doc! { "_id": i, "cust": i % 3, "amount": i, "tags": ["a", if i % 2 == 0 { "even" } else { "odd" }] }))
        .await
        .unwrap();
    db.collection::<Document>("customers")
        .insert_many(vec![
            doc! { "_id": 0, "name": "zero" },
            doc! { "_id": 1, "name": "one" },
            doc! { "_id": 2, "name": "two" },
        ])
        .await
        .unwrap();
    assert_eq!(
        orders.count_documents(doc! { "cust": 1 }).await.unwrap(),
        100
    );

    let totals: Vec<Document> = orders
        .aggregate(vec![
            doc! { "$match": { "amount": { "$gte": 150 } } },
            doc! { "$group": { "_id": "$cust", "total": { "$sum": "$amount" }, "n": { "$sum": 1 } } },
            doc! { "$sort": { "_id": 1 } },
            doc! { "$lookup": { "from": "customers", "localField": "_id", "foreignField": "_id", "as": "who" } },
            doc! { "$project": { "total": 1, "n": 1, "name": { "$arrayElemAt": ["$who.name", 0] } } },
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(totals.len(), 3);
    assert_eq!(totals[0].get_str("name").unwrap(), "zero");
    let expect0: i32 = (150..300).filter(|i| i % 3 == 0).sum();
    assert_eq!(totals[0].get_i32("total").unwrap(), expect0);

    // Results larger than one batch come back through getMore.
    let unwound: Vec<Document> = orders
        .aggregate(vec![doc! { "$unwind": "$tags" }])
        .batch_size(50)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(unwound.len(), 600);

    // $out replaces its target; $merge upserts into it.
    orders
        .aggregate(vec![
            doc! { "$match": { "cust": 2 } },
            doc! { "$out": "cust2" },
        ])
        .await
        .unwrap();
    assert_eq!(
        db.collection::<Document>("cust2")
            .count_documents(doc! {})
            .await
            .unwrap(),
        100
    );
    orders
        .aggregate(vec![
            doc! { "$group": { "_id": "$cust", "n": { "$sum": 1 } } },
            doc! { "$merge": { "into": "summary", "whenMatched": "replace", "whenNotMatched": "insert" } },
        ])
        .await
        .unwrap();
    let summary: Vec<Document> = db
        .collection::<Document>("summary")
        .find(doc! {})
        .sort(doc! { "_id": 1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        summary,
        vec![
            doc! { "_id": 0, "n": 100 },
            doc! { "_id": 1, "n": 100 },
            doc! { "_id": 2, "n": 100 }
        ]
    );

    // Pipeline-style update.
    let r = orders
        .update_many(
            doc! { "cust": 0 },
            vec![
                doc! { "$set": { "double": { "$multiply": ["$amount", 2] } } },
                doc! { "$unset": "tags" },
            ],
        )
        .await
        .unwrap();
    assert_eq!(r.modified_count, 100);
    let one = orders.find_one(doc! { "_id": 3 }).await.unwrap().unwrap();
    assert_eq!(one, doc! { "_id": 3, "cust": 0, "amount": 3, "double": 6 });

    // Errors keep mongod's codes.
    let e = orders
        .aggregate(vec![doc! { "$bogus": {} }])
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 40324);
    let e = db
        .run_command(doc! { "aggregate": "orders", "pipeline": [] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 9, "cursor option required");
    let e = orders
        .update_one(doc! { "_id": 1 }, vec![doc! { "$match": {} }])
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 72);

    // Stages that read server state.
    let stats: Vec<Document> = orders
        .aggregate(vec![
            doc! { "$collStats": { "storageStats": {}, "count": {} } },
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    // mongod puts the number at the top level, beside `storageStats.count`.
    assert_eq!(stats[0].get_i64("count").unwrap(), 300);
    let ix: Vec<Document> = orders
        .aggregate(vec![
            doc! { "$indexStats": {} },
            doc! { "$project": { "name": 1 } },
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(ix.len(), 1);

    // A leading $match uses an index; explain shows it.
    db.run_command(doc! { "createIndexes": "orders", "indexes": [ { "key": { "amount": 1 }, "name": "amount_1" } ] }).await.unwrap();
    let e = db
        .run_command(doc! { "aggregate": "orders", "pipeline": [ { "$match": { "amount": 5 } } ], "explain": true })
        .await
        .unwrap();
    let stages = e.get_array("stages").unwrap();
    // A $match behind a stage that does not touch its fields reaches the planner too.
    let e2 = db
        .run_command(doc! { "aggregate": "orders", "pipeline": [ { "$addFields": { "x": 1 } }, { "$match": { "amount": 5 } } ], "explain": true })
        .await
        .unwrap();
    let plan2 = e2.get_array("stages").unwrap()[0]
        .as_document()
        .unwrap()
        .get_document("$cursor")
        .unwrap()
        .get_document("queryPlanner")
        .unwrap()
        .get_document("winningPlan")
        .unwrap();
    assert_eq!(
        plan2
            .get_document("inputStage")
            .unwrap()
            .get_str("indexName")
            .unwrap(),
        "amount_1"
    );
    let got: Vec<Document> = orders
        .aggregate(vec![
            doc! { "$addFields": { "x": 1 } },
            doc! { "$match": { "amount": 5 } },
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].get_i32("x").unwrap(), 1);
    let via_command = db
        .run_command(doc! { "explain": { "aggregate": "orders", "pipeline": [ { "$match": { "amount": 5 } } ], "cursor": {} } })
        .await
        .unwrap();
    assert_eq!(via_command.get_array("stages").unwrap().len(), stages.len());
    let cursor = stages[0]
        .as_document()
        .unwrap()
        .get_document("$cursor")
        .unwrap();
    let plan = cursor
        .get_document("queryPlanner")
        .unwrap()
        .get_document("winningPlan")
        .unwrap();
    assert_eq!(
        plan.get_document("inputStage")
            .unwrap()
            .get_str("indexName")
            .unwrap(),
        "amount_1"
    );
}

/// Blocking stages over their memory bound fail with 292 unless `allowDiskUse`, then spill.
#[tokio::test]
async fn sort_and_group_spill_with_allow_disk_use() {
    let server = Server::start(
        BIN,
        &[
            "--setParameter",
            "internalQueryMaxBlockingSortMemoryUsageBytes=20000",
        ],
    );
    let client = server.client().await;
    let db = client.database("spill");
    let c = db.collection::<Document>("c");
    c.insert_many(
        (0..3000).map(|i| doc! { "_id": i, "k": (i * 7919) % 1000, "pad": "p".repeat(50) }),
    )
    .await
    .unwrap();
    let pipeline = vec![
        doc! { "$sort": { "k": 1, "_id": 1 } },
        doc! { "$project": { "k": 1 } },
    ];
    let e = c.aggregate(pipeline.clone()).await.unwrap_err();
    assert_eq!(error_code(&e), 292);
    let sorted: Vec<Document> = c
        .aggregate(pipeline)
        .allow_disk_use(true)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(sorted.len(), 3000);
    assert!(
        sorted
            .windows(2)
            .all(|w| w[0].get_i32("k").unwrap() <= w[1].get_i32("k").unwrap())
    );
    let groups: Vec<Document> = c
        .aggregate(vec![doc! { "$group": { "_id": "$k", "n": { "$sum": 1 } } }])
        .allow_disk_use(true)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(groups.len(), 1000);
    assert!(groups.iter().all(|g| g.get_i32("n").unwrap() == 3));
}

/// The server's budget for all running queries together (`queryMemoryBudgetBytes`) bounds each
/// blocking stage below its own per-stage bound: past it a stage fails with 146 unless
/// `allowDiskUse`, then spills and answers in full; every charge is given back afterwards.
#[tokio::test]
async fn the_query_memory_budget_bounds_blocking_stages() {
    let budget: i64 = 1 << 20;
    let server = Server::start(
        BIN,
        &[
            "--setParameter",
            &format!("queryMemoryBudgetBytes={budget}"),
        ],
    );
    let client = server.client().await;
    let db = client.database("budget");
    let c = db.collection::<Document>("c");
    let n = 12_000;
    c.insert_many((0..n).map(|i| doc! { "_id": i, "k": (i * 7919) % n, "pad": "p".repeat(100) }))
        .await
        .unwrap();
    let sort = vec![
        doc! { "$sort": { "k": 1 } },
        doc! { "$project": { "k": 1 } },
    ];
    let group = vec![doc! { "$group": { "_id": "$k", "n": { "$sum": 1 } } }];
    for pipeline in [&sort, &group] {
        let e = c.aggregate(pipeline.clone()).await.unwrap_err();
        assert_eq!(error_code(&e), 146, "{e}");
        assert!(e.to_string().contains("queryMemoryBudgetBytes"), "{e}");
        let out: Vec<Document> = c
            .aggregate(pipeline.clone())
            .allow_disk_use(true)
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(
            out.len(),
            n as usize,
            "{pipeline:?} spills and answers in full"
        );
    }
    let e = c.find(doc! {}).sort(doc! { "k": 1 }).await.unwrap_err();
    assert_eq!(
        error_code(&e),
        146,
        "a find's in-memory sort is charged too: {e}"
    );
    let status = db.run_command(doc! { "serverStatus": 1 }).await.unwrap();
    let memory = status
        .get_document("metrics")
        .and_then(|m| m.get_document("queryMemory"))
        .unwrap();
    assert_eq!(
        memory.get_i64("usedBytes").unwrap(),
        0,
        "every charge given back"
    );
    assert_eq!(memory.get_i64("budgetBytes").unwrap(), budget);
    client
        .database("admin")
        .run_command(doc! { "setParameter": 1, "queryMemoryBudgetBytes": 1_i64 << 30 })
        .await
        .unwrap();
    let sorted: Vec<Document> = c
        .aggregate(sort)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(sorted.len(), n as usize);
    assert!(
        sorted
            .windows(2)
            .all(|w| w[0].get_i32("k").unwrap() < w[1].get_i32("k").unwrap())
    );
    // A count no index answers streams the matches instead of holding them.
    let counted = c
        .count_documents(doc! { "pad": { "$exists": true } })
        .await
        .unwrap();
    assert_eq!(counted, n as u64);
}

/// The scan performs a leading `$match` (once, with the pipeline's `let` variables) and a
/// leading `$sort` its index gives; results equal those of the same pipeline that cannot use an
/// index, and explain lists only the stages still run after `$cursor`.
#[tokio::test]
async fn leading_match_and_index_sort_run_in_the_scan() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("aggscan");
    let c = db.collection::<Document>("c");
    c.insert_many((0..500).map(|i| doc! { "_id": i, "k": (i * 7) % 100, "g": i % 5 }))
        .await
        .unwrap();
    let pipeline = |field: &str| {
        vec![
            doc! { "$match": { "$expr": { "$lt": [format!("${field}"), "$$cut"] } } },
            doc! { "$sort": { field: 1, "_id": 1 } },
            doc! { "$project": { "k": 1, "g": 1 } },
        ]
    };
    let run = |stages: Vec<Document>| {
        let db = db.clone();
        async move {
            let cmd = doc! {
                "aggregate": "c", "pipeline": stages, "cursor": { "batchSize": 1000 },
                "let": { "cut": 40 },
            };
            let reply = db.run_command(cmd).await.unwrap();
            reply
                .get_document("cursor")
                .unwrap()
                .get_array("firstBatch")
                .unwrap()
                .clone()
        }
    };
    let before = run(pipeline("k")).await;
    assert_eq!(before.len(), 200);
    db.run_command(doc! { "createIndexes": "c", "indexes": [ { "key": { "k": 1, "_id": 1 }, "name": "k_id" } ] })
        .await
        .unwrap();
    let indexed = run(pipeline("k")).await;
    assert_eq!(
        indexed, before,
        "an index-ordered scan returns the sorted results"
    );
    let e = db
        .run_command(doc! { "aggregate": "c", "pipeline": [ { "$sort": { "k": 1, "_id": 1 } }, { "$limit": 3 } ], "explain": true })
        .await
        .unwrap();
    let stages = e.get_array("stages").unwrap();
    let names: Vec<&str> = stages
        .iter()
        .filter_map(|s| s.as_document().and_then(|d| d.keys().next()))
        .map(String::as_str)
        .collect();
    assert_eq!(names, ["$cursor", "$limit"], "the index gives the sort");
    let plan = stages[0]
        .as_document()
        .unwrap()
        .get_document("$cursor")
        .unwrap()
        .get_document("queryPlanner")
        .unwrap()
        .get_document("winningPlan")
        .unwrap();
    assert_eq!(plan.get_str("stage").unwrap(), "FETCH");
    assert_eq!(
        plan.get_document("inputStage")
            .unwrap()
            .get_str("indexName")
            .unwrap(),
        "k_id"
    );
    let unindexed = db
        .run_command(doc! { "aggregate": "c", "pipeline": [ { "$match": { "g": 1 } }, { "$sort": { "g": 1 } } ], "explain": true })
        .await
        .unwrap();
    let names: Vec<String> = unindexed
        .get_array("stages")
        .unwrap()
        .iter()
        .filter_map(|s| s.as_document().and_then(|d| d.keys().next().cloned()))
        .collect();
    assert_eq!(
        names,
        ["$cursor", "$sort"],
        "$match is the scan's filter; $sort still runs"
    );
    let top: Vec<Document> = c
        .aggregate(vec![
            doc! { "$sort": { "k": 1, "_id": 1 } },
            doc! { "$limit": 3 },
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let ids: Vec<i32> = top.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    assert_eq!(ids, [0, 100, 200]);
}

/// Streamed (suspended between batches, resumed by getMore) and fully materialised results of
/// the same pipeline agree, for seeded random chains of streaming stages read with batch
/// sizes 1 to 7 over 1,500 documents. The materialised run appends a `$lookup` (a stage that
/// does not stream) from an empty collection and unsets its field, so the server runs it to
/// the end before the first batch. Also: a streamed aggregate over a large collection answers
/// its first batch, and a `$limit` ends the cursor.
#[tokio::test]
async fn streamed_aggregates_match_materialised_ones() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("stream");
    let c = db.collection::<Document>("c");
    c.insert_many((0..1500).map(|i: i32| {
        let tags: Vec<i32> = (0..(i % 4)).map(|j| j * (i % 7)).collect();
        doc! { "_id": i, "a": (i * 37) % 11 - 5, "tags": tags, "s": { "x": i % 3, "y": "t" } }
    }))
    .await
    .unwrap();
    let mut seed: u64 = std::env::var("CAIRN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(11);
    println!("stream seed: {seed} (set CAIRN_SEED to replay)");
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    for round in 0..25 {
        let mut pipeline = Vec::new();
        for _ in 0..1 + next(4) {
            pipeline.push(match next(9) {
                0 => doc! { "$match": { "a": { "$gt": next(8) as i32 - 4 } } },
                1 => doc! { "$project": { "a": 1, "s.x": 1, "tags": 1 } },
                2 => doc! { "$addFields": { "b": { "$add": ["$a", 1] } } },
                3 => doc! { "$unset": "s" },
                4 => doc! { "$unwind": { "path": "$tags", "includeArrayIndex": "i" } },
                5 => doc! { "$limit": 1 + next(900) as i64 },
                6 => doc! { "$skip": next(300) as i64 },
                7 => doc! { "$set": { "s.z": "$a" } },
                _ => doc! { "$match": { "s.x": { "$ne": next(3) as i32 } } },
            });
        }
        let batch = 1 + next(7) as u32;
        let streamed: Vec<Document> = c
            .aggregate(pipeline.clone())
            .batch_size(batch)
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let mut materialised = pipeline.clone();
        materialised.push(doc! { "$lookup": { "from": "none", "pipeline": [], "as": "zz" } });
        materialised.push(doc! { "$unset": "zz" });
        let whole: Vec<Document> = c
            .aggregate(materialised)
            .batch_size(batch)
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(streamed, whole, "round {round} batch {batch}: {pipeline:?}");
    }
    // A first batch of 101 documents out of 1,500, then the rest through getMore.
    let reply = db
        .run_command(
            doc! { "aggregate": "c", "pipeline": [ { "$project": { "a": 1 } } ], "cursor": {} },
        )
        .await
        .unwrap();
    let cursor = reply.get_document("cursor").unwrap();
    assert_eq!(cursor.get_array("firstBatch").unwrap().len(), 101);
    assert_ne!(
        cursor.get_i64("id").unwrap(),
        0,
        "the pipeline waits in the cursor"
    );
    let limited = db
        .run_command(doc! { "aggregate": "c", "pipeline": [ { "$limit": 5 } ], "cursor": {} })
        .await
        .unwrap();
    let cursor = limited.get_document("cursor").unwrap();
    assert_eq!(cursor.get_array("firstBatch").unwrap().len(), 5);
    assert_eq!(
        cursor.get_i64("id").unwrap(),
        0,
        "a used-up $limit ends the cursor"
    );
}

/// mongod 8.1's `$convert` between numbers and binData, over stored values: a big-endian
/// round trip, a binData of the wrong length (241, or `onError`), a bad `byteOrder` (9130002).
#[tokio::test]
async fn convert_numbers_to_and_from_bindata() {
    let server = Server::start(BIN, &[]);
    let c = server
        .client()
        .await
        .database("cvt")
        .collection::<Document>("c");
    let bin = |bytes: Vec<u8>| bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes,
    };
    c.insert_many(vec![
        doc! { "_id": 1, "n": -375, "b": bin(vec![0, 0, 0, 42]) },
        doc! { "_id": 2, "n": 200_i64, "b": bin(vec![1, 2, 3, 4, 5]) },
    ])
    .await
    .unwrap();
    let project = doc! { "$project": {
        "bytes": { "$convert": { "input": "$n", "to": "binData", "byteOrder": "big" } },
        "back": { "$convert": {
            "input": { "$convert": { "input": "$n", "to": "binData", "byteOrder": "big" } },
            "to": "long", "byteOrder": "big",
        } },
        "int": { "$convert": { "input": "$b", "to": "int", "byteOrder": "big", "onError": "bad length" } },
    } };
    let out: Vec<Document> = c
        .aggregate(vec![project, doc! { "$sort": { "_id": 1 } }])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        out[0].get_binary_generic("bytes").unwrap(),
        &vec![0xff, 0xff, 0xfe, 0x89]
    );
    assert_eq!(out[0].get_i64("back").unwrap(), -375);
    assert_eq!(out[0].get_i32("int").unwrap(), 42);
    assert_eq!(
        out[1].get_binary_generic("bytes").unwrap(),
        &vec![0, 0, 0, 0, 0, 0, 0, 200]
    );
    assert_eq!(out[1].get_i64("back").unwrap(), 200);
    assert_eq!(out[1].get_str("int").unwrap(), "bad length");
    for (spec, code) in [
        (doc! { "input": "$b", "to": "int" }, 241),
        (
            doc! { "input": "$n", "to": "binData", "byteOrder": "middle" },
            9130002,
        ),
        (
            doc! { "input": "$n", "to": "binData", "byteOrder": 1 },
            9130001,
        ),
    ] {
        let e = c
            .aggregate(vec![
                doc! { "$match": { "_id": 2 } },
                doc! { "$project": { "x": { "$convert": spec.clone() } } },
            ])
            .await
            .unwrap_err();
        assert_eq!(error_code(&e), code, "{spec}");
    }
}

/// Expression argument errors reach the driver with mongod 8.0's codes: a `$to*` shorthand with
/// two arguments (50723), `$sortArray` with a `sortBy` that is not a pattern or 1/-1 (2942505,
/// 2942507), `$convert` with a `to` document without `type` (9); `onError` does not catch it.
#[tokio::test]
async fn expression_argument_codes_reach_the_driver() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let c = client.database("exprcodes").collection::<Document>("c");
    c.insert_one(doc! { "_id": 1, "xs": [3, 1, 2], "s": "7" })
        .await
        .unwrap();
    let code_of = |expr: Document| {
        let c = c.clone();
        async move {
            match c.aggregate(vec![doc! { "$project": { "v": expr } }]).await {
                Ok(cursor) => match cursor.try_collect::<Vec<_>>().await {
                    Ok(_) => 0,
                    Err(e) => error_code(&e),
                },
                Err(e) => error_code(&e),
            }
        }
    };
    assert_eq!(code_of(doc! { "$toInt": ["$s", 1] }).await, 50723);
    assert_eq!(code_of(doc! { "$toUUID": [] }).await, 50723);
    assert_eq!(
        code_of(doc! { "$sortArray": { "input": "$xs", "sortBy": "a" } }).await,
        2942507
    );
    assert_eq!(
        code_of(doc! { "$sortArray": { "input": "$xs", "sortBy": { "a": 0 } } }).await,
        2942505
    );
    assert_eq!(
        code_of(doc! { "$convert": { "input": "$s", "to": { "subtype": 0 }, "onError": 0 } }).await,
        9
    );
    // The working forms answer.
    let got: Vec<Document> = c
        .aggregate(vec![doc! { "$project": {
            "n": { "$toInt": ["$s"] },
            "sorted": { "$sortArray": { "input": "$xs", "sortBy": -1 } },
            "t": { "$convert": { "input": "$s", "to": { "type": "long", "note": 1 } } },
        } }])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        got,
        vec![doc! { "_id": 1, "n": 7, "sorted": [3, 2, 1], "t": 7_i64 }]
    );
}
