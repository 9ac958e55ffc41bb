//! Proves the mongod 8.0 admin surface of issue 14 part 4: `$listLocalSessions` lists the
//! sessions the server has seen, `$listSessions` the records a refresh wrote to
//! `config.system.sessions` (kept over a kill -9, gone after `endSessions` and a refresh), and
//! their spec and placement errors carry mongod's codes. How: a real `cairn` process driven by
//! the Rust driver; sessions are made by the driver itself, refreshes by
//! `refreshLogicalSessionCacheNow` (no sleeps, no timing assertions).

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code};
use futures_util::TryStreamExt;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

async fn agg(
    db: &mongodb::Database,
    pipeline: Vec<Document>,
) -> mongodb::error::Result<Vec<Document>> {
    db.aggregate(pipeline).await?.try_collect().await
}

/// The records `$listSessions` shows for session `id`.
async fn listed(client: &mongodb::Client, id: &bson::Binary) -> Vec<Document> {
    client
        .database("config")
        .collection::<Document>("system.sessions")
        .aggregate(vec![
            doc! { "$listSessions": { "allUsers": true } },
            doc! { "$match": { "_id.id": id.clone() } },
        ])
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
}

async fn refresh(client: &mongodb::Client) {
    client
        .database("admin")
        .run_command(doc! { "refreshLogicalSessionCacheNow": 1 })
        .await
        .unwrap();
}

#[tokio::test]
async fn listed_sessions_survive_a_crash_and_go_after_end_sessions() {
    let mut server = Server::start(BIN, &["--setParameter", "enableTestCommands=1"]);
    let client = server.client().await;
    let mut session = client.start_session().await.unwrap();
    client
        .database("ls")
        .collection::<Document>("c")
        .insert_one(doc! { "_id": 1 })
        .session(&mut session)
        .await
        .unwrap();
    let Bson::Binary(id) = session.id().get("id").unwrap().clone() else {
        panic!("session id is not binary");
    };
    assert!(listed(&client, &id).await.is_empty(), "not refreshed yet");
    refresh(&client).await;
    let rows = listed(&client, &id).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(rows[0].get_datetime("lastUse").is_ok());
    let reply = client
        .database("config")
        .run_command(doc! { "listIndexes": "system.sessions" })
        .await
        .unwrap();
    let indexes = reply
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .unwrap();
    let ttl = indexes
        .iter()
        .filter_map(Bson::as_document)
        .find(|i| i.get_str("name").ok() == Some("lsidTTLIndex"))
        .expect("the TTL index");
    assert_eq!(ttl.get_document("key").unwrap(), &doc! { "lastUse": 1 });
    assert_eq!(
        ttl.get_i32("expireAfterSeconds").ok(),
        Some(1800),
        "{ttl:?}"
    );
    drop(session);
    drop(client);

    server.restart_after_kill();
    let client = server.client().await;
    assert_eq!(listed(&client, &id).await.len(), 1, "kept over the crash");
    let local = agg(
        &client.database("admin"),
        vec![
            doc! { "$listLocalSessions": { "allUsers": true } },
            doc! { "$match": { "_id.id": id.clone() } },
        ],
    )
    .await
    .unwrap();
    assert!(local.is_empty(), "the registry starts empty: {local:?}");

    client
        .database("admin")
        .run_command(doc! { "endSessions": [ { "id": id.clone() } ] })
        .await
        .unwrap();
    assert_eq!(
        listed(&client, &id).await.len(),
        1,
        "until the next refresh"
    );
    refresh(&client).await;
    assert!(listed(&client, &id).await.is_empty());
}

#[tokio::test]
async fn sessions_the_driver_used_are_listed() {
    let server = Server::start(BIN, &["--setParameter", "enableTestCommands=1"]);
    let client = server.client().await;
    let mut session = client.start_session().await.unwrap();
    let c = client.database("ls").collection::<Document>("c");
    c.insert_one(doc! { "_id": 1 })
        .session(&mut session)
        .await
        .unwrap();
    let Bson::Binary(id) = session.id().get("id").unwrap().clone() else {
        panic!("session id is not binary");
    };

    let admin = client.database("admin");
    let local = agg(
        &admin,
        vec![
            doc! { "$listLocalSessions": {} },
            doc! { "$match": { "_id.id": id.clone() } },
        ],
    )
    .await
    .unwrap();
    assert_eq!(local.len(), 1, "{local:?}");
    let key = local[0].get_document("_id").unwrap();
    // Without authentication, uid is the SHA-256 of the empty string.
    assert_eq!(
        key.get_binary_generic("uid").unwrap()[..4],
        [0xe3, 0xb0, 0xc4, 0x42]
    );
    assert!(local[0].get_datetime("lastUse").is_ok());

    refresh(&client).await;
    let config = client.database("config");
    let all = config
        .collection::<Document>("system.sessions")
        .aggregate(vec![doc! { "$listSessions": { "allUsers": true } }])
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    assert!(
        all.iter()
            .any(|d| d.get_document("_id").unwrap().get("id") == Some(&Bson::Binary(id.clone())))
    );

    // endSessions forgets it.
    admin
        .run_command(doc! { "endSessions": [ { "id": id.clone() } ] })
        .await
        .unwrap();
    let after = agg(
        &admin,
        vec![
            doc! { "$listLocalSessions": { "allUsers": true } },
            doc! { "$match": { "_id.id": id } },
        ],
    )
    .await
    .unwrap();
    assert!(after.is_empty(), "{after:?}");
}

#[tokio::test]
async fn list_sessions_errors_are_mongods() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let admin = client.database("admin");
    let sessions = client
        .database("config")
        .collection::<Document>("system.sessions");
    let code =
        |r: mongodb::error::Result<Vec<Document>>| r.map(|_| 0).unwrap_or_else(|e| error_code(&e));

    assert_eq!(
        code(agg(&admin, vec![doc! { "$listLocalSessions": 1 }]).await),
        14
    );
    assert_eq!(
        code(
            agg(
                &admin,
                vec![doc! { "$listLocalSessions": { "allUsers": 1 } }]
            )
            .await
        ),
        14
    );
    assert_eq!(
        code(agg(&admin, vec![doc! { "$listLocalSessions": { "x": 1 } }]).await),
        40415
    );
    assert_eq!(
        code(agg(&admin, vec![doc! { "$listLocalSessions": { "allUsers": true, "users": [{ "user": "a", "db": "b" }] } }]).await),
        12
    );
    assert_eq!(
        code(
            agg(
                &admin,
                vec![doc! { "$match": {} }, doc! { "$listLocalSessions": {} }]
            )
            .await
        ),
        40602
    );
    // $listSessions only on config.system.sessions.
    assert_eq!(
        code(agg(&admin, vec![doc! { "$listSessions": {} }]).await),
        73
    );
    let not_first = sessions
        .aggregate(vec![doc! { "$match": {} }, doc! { "$listSessions": {} }])
        .await
        .map(|_| 0)
        .unwrap_or_else(|e| error_code(&e));
    assert_eq!(not_first, 40602);
    let listed = sessions
        .aggregate(vec![
            doc! { "$listSessions": { "users": [{ "user": "nobody", "db": "x" }] } },
        ])
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    assert!(listed.is_empty());
}

fn plan_text(e: &Document) -> String {
    cairn_e2e::winning(e).to_string()
}

#[tokio::test]
async fn query_settings_reject_and_hint_and_survive_a_restart() {
    let mut server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("qs");
    let c = db.collection::<Document>("c");
    c.insert_many((0..50).map(|i| doc! { "_id": i, "a": i % 5, "b": i % 7 }))
        .await
        .unwrap();
    c.create_index(mongodb::IndexModel::builder().keys(doc! { "a": 1 }).build())
        .await
        .unwrap();
    c.create_index(mongodb::IndexModel::builder().keys(doc! { "b": 1 }).build())
        .await
        .unwrap();
    let admin = client.database("admin");

    // reject: a find of that shape fails with 411 whatever its values; others run.
    let set = admin
        .run_command(doc! {
            "setQuerySettings": { "find": "c", "filter": { "a": 1, "b": 1 }, "$db": "qs" },
            "settings": { "reject": true },
            "writeConcern": { "w": 1, "j": true },
        })
        .await
        .unwrap();
    let hash = set.get_str("queryShapeHash").unwrap().to_string();
    assert_eq!(hash.len(), 64);
    assert_eq!(
        set.get_document("settings").unwrap(),
        &doc! { "reject": true }
    );
    // (find_one sends a limit, which is part of the shape: not rejected.)
    let e = c.find(doc! { "a": 3, "b": 4 }).await.unwrap_err();
    assert_eq!(error_code(&e), 411);
    assert!(c.find_one(doc! { "a": 3, "b": 4 }).await.is_ok());
    assert!(c.find(doc! { "a": 3 }).await.is_ok());

    // Merging: reject false goes, index hints come in (ns from the representative query).
    let set = admin
        .run_command(doc! {
            "setQuerySettings": { "find": "c", "filter": { "a": 9, "b": 9 }, "$db": "qs" },
            "settings": { "reject": false, "indexHints": { "allowedIndexes": ["b_1"] } },
            "writeConcern": { "w": 1, "j": true },
        })
        .await
        .unwrap();
    assert_eq!(set.get_str("queryShapeHash").unwrap(), hash);
    assert!(!set.get_document("settings").unwrap().contains_key("reject"));
    let found: Vec<Document> = c
        .find(doc! { "a": 3, "b": 3 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let ids: Vec<i32> = found.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    assert_eq!(ids, vec![3, 38]);
    let plan = plan_text(
        &cairn_e2e::explain(&db, doc! { "find": "c", "filter": { "a": 1, "b": 2 } }).await,
    );
    assert!(plan.contains("b_1") && !plan.contains("a_1"), "{plan}");

    let listed = agg(
        &admin,
        vec![doc! { "$querySettings": { "showDebugQueryShape": true } }],
    )
    .await
    .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].get_str("queryShapeHash").unwrap(), hash);
    assert!(listed[0].get_document("debugQueryShape").is_ok());
    assert!(listed[0].get_document("representativeQuery").is_ok());

    // Persisted: still there after a kill and restart, and still applied.
    server.restart_after_kill();
    let client = server.client().await;
    let admin = client.database("admin");
    let listed = agg(&admin, vec![doc! { "$querySettings": {} }])
        .await
        .unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(!listed[0].contains_key("debugQueryShape"));
    let db = client.database("qs");
    let plan = plan_text(
        &cairn_e2e::explain(&db, doc! { "find": "c", "filter": { "a": 1, "b": 2 } }).await,
    );
    assert!(plan.contains("b_1") && !plan.contains("a_1"), "{plan}");

    // Removed by hash; removing again is not an error.
    for _ in 0..2 {
        admin
            .run_command(doc! { "removeQuerySettings": hash.clone() })
            .await
            .unwrap();
    }
    assert!(
        agg(&admin, vec![doc! { "$querySettings": {} }])
            .await
            .unwrap()
            .is_empty()
    );

    // Argument errors.
    let code =
        |r: mongodb::error::Result<Document>| r.map(|_| 0).unwrap_or_else(|e| error_code(&e));
    let q = doc! { "find": "c", "filter": { "a": 1 }, "$db": "qs" };
    assert_eq!(
        code(
            admin
                .run_command(doc! { "setQuerySettings": q.clone(), "settings": {} })
                .await
        ),
        8727502
    );
    assert_eq!(
        code(
            admin
                .run_command(doc! { "setQuerySettings": q.clone() })
                .await
        ),
        40414
    );
    assert_eq!(
        code(
            admin
                .run_command(
                    doc! { "setQuerySettings": q.clone(), "settings": { "reject": false } }
                )
                .await
        ),
        7746604
    );
    assert_eq!(
        code(
            admin
                .run_command(doc! { "setQuerySettings": 1, "settings": { "reject": true } })
                .await
        ),
        14
    );
    assert_eq!(
        code(admin.run_command(doc! { "setQuerySettings": { "find": "c", "filter": { "_id": 1 }, "$db": "qs" }, "settings": { "reject": true } }).await),
        7746606
    );
    assert_eq!(
        code(
            db.run_command(doc! { "setQuerySettings": q, "settings": { "reject": true } })
                .await
        ),
        13
    );
    assert_eq!(
        code(
            agg(&db, vec![doc! { "$querySettings": {} }])
                .await
                .map(|_| doc! {})
        ),
        73
    );
}

#[tokio::test]
async fn query_stats_count_finds_and_aggregates_per_shape() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("st");
    let c = db.collection::<Document>("c");
    c.insert_many((0..10).map(|i| doc! { "_id": i, "a": i % 2 }))
        .await
        .unwrap();
    for a in [0, 1, 0] {
        let got: Vec<Document> = c
            .find(doc! { "a": a })
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(got.len(), 5);
    }
    let _: Vec<Document> = c
        .aggregate(vec![doc! { "$match": { "a": 1 } }, doc! { "$count": "n" }])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let admin = client.database("admin");
    let stats = agg(&admin, vec![doc! { "$queryStats": {} }]).await.unwrap();
    let of = |command: &str| {
        stats
            .iter()
            .find(|d| {
                let shape = d
                    .get_document("key")
                    .unwrap()
                    .get_document("queryShape")
                    .unwrap();
                shape.get_str("command").ok() == Some(command)
                    && shape.get_document("cmdNs").unwrap().get_str("coll").ok() == Some("c")
            })
            .unwrap_or_else(|| panic!("no {command} entry in {stats:?}"))
            .clone()
    };
    let find = of("find");
    let m = find.get_document("metrics").unwrap();
    assert_eq!(m.get_i64("execCount").unwrap(), 3);
    let docs = m.get_document("docsReturned").unwrap();
    assert_eq!(
        (docs.get_i64("sum").unwrap(), docs.get_i64("max").unwrap()),
        (15, 5)
    );
    let micros = m.get_document("totalExecMicros").unwrap();
    assert!(micros.get_i64("sum").unwrap() >= micros.get_i64("max").unwrap());
    assert!(
        m.get_datetime("latestSeenTimestamp").unwrap()
            >= m.get_datetime("firstSeenTimestamp").unwrap()
    );
    assert_eq!(find.get_str("queryShapeHash").unwrap().len(), 64);
    assert!(find.get_timestamp("asOf").is_ok());
    assert_eq!(
        of("aggregate")
            .get_document("metrics")
            .unwrap()
            .get_i64("execCount")
            .unwrap(),
        1
    );

    // transformIdentifiers hides names; bad specs get mongod's codes.
    let key = bson::Binary {
        subtype: bson::spec::BinarySubtype::Sensitive,
        bytes: vec![3; 32],
    };
    let hidden = agg(
        &admin,
        vec![doc! { "$queryStats": { "transformIdentifiers": { "algorithm": "hmac-sha-256", "hmacKey": key } } }],
    )
    .await
    .unwrap();
    assert!(!hidden.is_empty());
    assert!(!format!("{hidden:?}").contains("\"st\""));
    let code =
        |r: mongodb::error::Result<Vec<Document>>| r.map(|_| 0).unwrap_or_else(|e| error_code(&e));
    assert_eq!(
        code(agg(&admin, vec![doc! { "$queryStats": { "x": 1 } }]).await),
        40415
    );
    assert_eq!(
        code(
            agg(
                &admin,
                vec![doc! { "$queryStats": { "transformIdentifiers": { "algorithm": "sha" } } }]
            )
            .await
        ),
        2
    );
    assert_eq!(code(agg(&db, vec![doc! { "$queryStats": {} }]).await), 73);
    assert_eq!(
        code(
            agg(
                &admin,
                vec![doc! { "$match": {} }, doc! { "$queryStats": {} }]
            )
            .await
        ),
        40602
    );

    // Off with internalQueryStatsRateLimit 0.
    admin
        .run_command(doc! { "setParameter": 1, "internalQueryStatsRateLimit": 0 })
        .await
        .unwrap();
    let _: Vec<Document> = c
        .find(doc! { "a": 0 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let again = agg(&admin, vec![doc! { "$queryStats": {} }]).await.unwrap();
    let count = again
        .iter()
        .find(|d| d.get_str("queryShapeHash").ok() == find.get_str("queryShapeHash").ok())
        .unwrap()
        .get_document("metrics")
        .unwrap()
        .get_i64("execCount")
        .unwrap();
    assert_eq!(count, 3);
}

/// `$queryStats` 8.0 metrics: keys and documents examined, the in-memory sort, the spill and the
/// multi-planner are counted per entry; entries are keyed by the handshake's `client` too, so
/// two applications running one shape get two entries.
#[tokio::test]
async fn query_stats_count_examined_work_per_shape_and_client() {
    let server = Server::start(
        BIN,
        &[
            "--setParameter",
            "internalQueryMaxBlockingSortMemoryUsageBytes=2000",
        ],
    );
    let alpha = server.client_with(&["appName=alpha"]).await;
    let beta = server.client_with(&["appName=beta"]).await;
    let c = alpha.database("qx").collection::<Document>("c");
    c.insert_many((0..40).map(|i| doc! { "_id": i, "a": i, "b": i % 2, "z": 40 - i }))
        .await
        .unwrap();
    c.create_index(mongodb::IndexModel::builder().keys(doc! { "a": 1 }).build())
        .await
        .unwrap();
    c.create_index(mongodb::IndexModel::builder().keys(doc! { "b": 1 }).build())
        .await
        .unwrap();
    let run = |client: &mongodb::Client, filter: Document, sort: Option<Document>| {
        let c = client.database("qx").collection::<Document>("c");
        async move {
            let mut find = c.find(filter);
            if let Some(s) = sort {
                find = find.sort(s);
            }
            find.await
                .unwrap()
                .try_collect::<Vec<_>>()
                .await
                .unwrap()
                .len()
        }
    };
    // An index range (5 keys, 5 documents) sorted in memory, from two applications.
    assert_eq!(
        run(&alpha, doc! { "a": { "$gte": 35 } }, Some(doc! { "z": 1 })).await,
        5
    );
    assert_eq!(
        run(&beta, doc! { "a": { "$gte": 35 } }, Some(doc! { "z": 1 })).await,
        5
    );
    // Two usable indexes: the first run is planned by a trial.
    assert_eq!(
        run(&alpha, doc! { "a": { "$lt": 4 }, "b": 1 }, None).await,
        2
    );
    // A spilled sort (allowDiskUse) in an aggregate.
    let sorted: Vec<Document> = c
        .aggregate(vec![doc! { "$sort": { "z": 1 } }])
        .allow_disk_use(true)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(sorted.len(), 40);

    let stats = agg(&alpha.database("admin"), vec![doc! { "$queryStats": {} }])
        .await
        .unwrap();
    let entries = |filter_has: &str| -> Vec<Document> {
        stats
            .iter()
            .filter(|d| {
                let shape = d
                    .get_document("key")
                    .unwrap()
                    .get_document("queryShape")
                    .unwrap();
                shape.get_document("cmdNs").unwrap().get_str("coll").ok() == Some("c")
                    && format!("{shape}").contains(filter_has)
            })
            .cloned()
            .collect()
    };
    let metric = |e: &Document, name: &str, field: &str| {
        e.get_document("metrics")
            .unwrap()
            .get_document(name)
            .unwrap_or_else(|_| panic!("no {name} in {e}"))
            .get_i64(field)
            .unwrap()
    };
    let app = |e: &Document| {
        e.get_document("key")
            .unwrap()
            .get_document("client")
            .unwrap()
            .get_document("application")
            .unwrap()
            .get_str("name")
            .unwrap()
            .to_string()
    };
    let sorted_finds = entries("$gte");
    let mut apps: Vec<String> = sorted_finds.iter().map(app).collect();
    apps.sort();
    assert_eq!(apps, ["alpha", "beta"], "one entry per application");
    for e in &sorted_finds {
        let driver = e
            .get_document("key")
            .unwrap()
            .get_document("client")
            .unwrap();
        assert!(driver.get_document("driver").is_ok(), "{driver}");
        assert!(metric(e, "keysExamined", "sum") >= 5, "{e}");
        assert_eq!(metric(e, "docsExamined", "sum"), 5, "{e}");
        assert_eq!(metric(e, "hasSortStage", "true"), 1, "{e}");
        assert_eq!(metric(e, "usedDisk", "true"), 0, "{e}");
    }
    let trial = &entries("$lt")[0];
    assert_eq!(metric(trial, "fromMultiPlanner", "true"), 1, "{trial}");
    assert_eq!(metric(trial, "fromPlanCache", "false"), 1, "{trial}");
    assert_eq!(metric(trial, "hasSortStage", "false"), 1, "{trial}");
    let spilled = stats
        .iter()
        .find(|d| {
            let shape = d
                .get_document("key")
                .unwrap()
                .get_document("queryShape")
                .unwrap();
            shape.get_str("command").ok() == Some("aggregate")
                && shape.get_document("cmdNs").unwrap().get_str("coll").ok() == Some("c")
        })
        .unwrap_or_else(|| panic!("no aggregate entry in {stats:?}"));
    assert_eq!(metric(spilled, "usedDisk", "true"), 1, "{spilled}");
    assert_eq!(metric(spilled, "hasSortStage", "true"), 1, "{spilled}");
    assert_eq!(metric(spilled, "docsExamined", "sum"), 40, "{spilled}");
    assert_eq!(metric(spilled, "keysExamined", "sum"), 0, "{spilled}");
}

#[tokio::test]
async fn compact_shapes_and_auto_compact_switch() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("cp");
    let c = db.collection::<Document>("c");
    c.insert_many((0..100).map(|i| doc! { "_id": i, "pad": "x".repeat(200) }))
        .await
        .unwrap();
    c.delete_many(doc! {}).await.unwrap();
    let dry = db
        .run_command(doc! { "compact": "c", "dryRun": true })
        .await
        .unwrap();
    assert_eq!(
        dry.keys().collect::<Vec<_>>(),
        ["estimatedBytesFreed", "ok"]
    );
    let r = db
        .run_command(doc! { "compact": "c", "force": true, "freeSpaceTargetMB": 1 })
        .await
        .unwrap();
    assert_eq!(r.keys().collect::<Vec<_>>(), ["bytesFreed", "ok"]);
    assert!(r.get_i64("bytesFreed").unwrap() >= 0);
    db.run_command(doc! { "create": "v", "viewOn": "c", "pipeline": [] })
        .await
        .unwrap();
    let e = db.run_command(doc! { "compact": "v" }).await.unwrap_err();
    assert_eq!(error_code(&e), 166);
    // An IDL validator (`gte: 1`): 51024.
    let e = db
        .run_command(doc! { "compact": "c", "freeSpaceTargetMB": 0 })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 51024);
    // autoCompact off and on again (its effect on the background pass: storage's compaction
    // test `background_compaction_obeys_auto_compact`).
    let admin = client.database("admin");
    let off = admin
        .run_command(doc! { "autoCompact": false })
        .await
        .unwrap();
    assert_eq!(off, doc! { "ok": 1.0 });
    admin
        .run_command(doc! { "autoCompact": true, "runOnce": true })
        .await
        .unwrap();
}

#[tokio::test]
async fn under_auth_a_user_lists_its_own_sessions_by_default() {
    let server = Server::start(BIN, &["--auth"]);
    let open = server.client().await;
    open.database("admin")
        .run_command(doc! { "createUser": "root", "pwd": "pw-root-1", "roles": ["root"] })
        .await
        .unwrap();
    let connect = |user: &str, pwd: &str| {
        format!(
            "mongodb://{user}:{pwd}@127.0.0.1:{}/?directConnection=true&authSource=admin",
            server.port
        )
    };
    let root = mongodb::Client::with_uri_str(connect("root", "pw-root-1"))
        .await
        .unwrap();
    root.database("admin")
        .run_command(doc! { "createUser": "ann", "pwd": "pw-ann-1", "roles": [{ "role": "readWrite", "db": "t" }] })
        .await
        .unwrap();
    let ann = mongodb::Client::with_uri_str(connect("ann", "pw-ann-1"))
        .await
        .unwrap();
    let mut s = ann.start_session().await.unwrap();
    ann.database("t")
        .collection::<Document>("c")
        .insert_one(doc! { "x": 1 })
        .session(&mut s)
        .await
        .unwrap();
    let Bson::Binary(ann_id) = s.id().get("id").unwrap().clone() else {
        panic!("session id is not binary");
    };
    // ann's own listing shows her session with her name; root's own listing does not.
    let mine = agg(
        &ann.database("admin"),
        vec![doc! { "$listLocalSessions": {} }],
    )
    .await
    .unwrap();
    let found = mine
        .iter()
        .find(|d| d.get_document("_id").unwrap().get("id") == Some(&Bson::Binary(ann_id.clone())))
        .expect("ann's session listed for ann");
    assert_eq!(
        found.get_document("user").unwrap().get_str("name").unwrap(),
        "ann@admin"
    );
    assert!(
        mine.iter()
            .all(|d| d.get_document("user").unwrap().get_str("name").ok() == Some("ann@admin"))
    );
    let roots = agg(
        &root.database("admin"),
        vec![doc! { "$listLocalSessions": {} }],
    )
    .await
    .unwrap();
    assert!(
        roots.iter().all(
            |d| d.get_document("_id").unwrap().get("id") != Some(&Bson::Binary(ann_id.clone()))
        )
    );
    let named = agg(
        &root.database("admin"),
        vec![doc! { "$listLocalSessions": { "users": [{ "user": "ann", "db": "admin" }] } }],
    )
    .await
    .unwrap();
    assert!(
        named.iter().any(
            |d| d.get_document("_id").unwrap().get("id") == Some(&Bson::Binary(ann_id.clone()))
        )
    );
    // allUsers needs the listSessions privilege, which ann lacks.
    let e = agg(
        &ann.database("admin"),
        vec![doc! { "$listLocalSessions": { "allUsers": true } }],
    )
    .await
    .unwrap_err();
    assert_eq!(error_code(&e), 13);
}

/// 8.0 release-notes items done in cairn: the `defaultMaxTimeMS` cluster parameter bounds a
/// read that gives no `maxTimeMS` (a blocked storage call makes the find slow), and a find on a
/// view with `singleBatch` leaves no cursor open (7.3).
#[tokio::test]
async fn default_max_time_ms_and_single_batch_finds_on_views() {
    let server = Server::start(BIN, &["--setParameter", "enableTestCommands=1"]);
    let client = server.client().await;
    let db = client.database("r80");
    let c = db.collection::<Document>("c");
    c.insert_many((0..5).map(|i| doc! { "_id": i }))
        .await
        .unwrap();
    let admin = client.database("admin");
    let set_default = |ms: i64| {
        let admin = admin.clone();
        async move {
            admin
                .run_command(doc! { "setClusterParameter": { "defaultMaxTimeMS": { "readOperations": ms } } })
                .await
                .unwrap();
        }
    };
    let block_one_find = || {
        let admin = admin.clone();
        async move {
            admin
                .run_command(doc! {
                    "configureFailPoint": "blockStorageCall", "mode": { "times": 1 },
                    "data": { "commands": ["find"], "blockTimeMS": 1000 },
                })
                .await
                .unwrap();
        }
    };
    set_default(50).await;
    block_one_find().await;
    let slow = c
        .find(doc! {})
        .await
        .map(|_| 0)
        .unwrap_or_else(|e| error_code(&e));
    assert_eq!(slow, 50, "MaxTimeMSExpired from the default");
    block_one_find().await;
    let own = c
        .find(doc! {})
        .max_time(std::time::Duration::from_secs(60))
        .await;
    assert!(own.is_ok(), "a maxTimeMS of its own wins: {own:?}");
    set_default(0).await;
    admin
        .run_command(doc! { "configureFailPoint": "blockStorageCall", "mode": "off" })
        .await
        .unwrap();

    db.create_collection("v")
        .view_on("c".to_string())
        .pipeline(vec![])
        .await
        .unwrap();
    let reply = db
        .run_command(doc! { "find": "v", "singleBatch": true, "batchSize": 1 })
        .await
        .unwrap();
    let cursor = reply.get_document("cursor").unwrap();
    assert_eq!(cursor.get_i64("id").unwrap(), 0, "{reply:?}");
    assert_eq!(cursor.get_array("firstBatch").unwrap().len(), 1);
}

/// 8.0: `{a: null}` matches null and missing fields but no longer undefined, through a
/// collection scan and through an index alike; `$ne: null` then matches undefined.
#[tokio::test]
async fn null_equality_no_longer_matches_undefined() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let c = client.database("r80").collection::<Document>("nulls");
    c.insert_many(vec![
        doc! { "_id": 1, "a": Bson::Null },
        doc! { "_id": 2, "a": Bson::Undefined },
        doc! { "_id": 3 },
        doc! { "_id": 4, "a": [1, Bson::Undefined] },
    ])
    .await
    .unwrap();
    let ids = |filter: Document| {
        let c = c.clone();
        async move {
            let docs: Vec<Document> = c
                .find(filter)
                .sort(doc! { "_id": 1 })
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            docs.iter()
                .map(|d| d.get_i32("_id").unwrap())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(ids(doc! { "a": Bson::Null }).await, [1, 3]);
    assert_eq!(ids(doc! { "a": { "$in": [Bson::Null, 7] } }).await, [1, 3]);
    assert_eq!(ids(doc! { "a": { "$ne": Bson::Null } }).await, [2, 4]);
    c.create_index(mongodb::IndexModel::builder().keys(doc! { "a": 1 }).build())
        .await
        .unwrap();
    assert_eq!(
        ids(doc! { "a": Bson::Null }).await,
        [1, 3],
        "through the index"
    );
}

/// 8.0: explain of a find shows `queryShapeHash`, the hash query settings key that shape by.
#[tokio::test]
async fn explain_shows_the_query_shape_hash() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("qsh");
    db.collection::<Document>("c")
        .insert_one(doc! { "a": 1 })
        .await
        .unwrap();
    let set = client
        .database("admin")
        .run_command(doc! {
            "setQuerySettings": { "find": "c", "filter": { "a": 1 }, "$db": "qsh" },
            "settings": { "indexHints": { "allowedIndexes": ["_id_"] } },
        })
        .await
        .unwrap();
    let explained = db
        .run_command(doc! { "explain": { "find": "c", "filter": { "a": 2 } } })
        .await
        .unwrap();
    assert_eq!(
        explained.get_str("queryShapeHash").ok(),
        set.get_str("queryShapeHash").ok(),
        "{explained:?}"
    );
}

/// 7.2: `serverStatus.metrics.query.planCache` counts the plan cache's entries and their bytes.
#[tokio::test]
async fn server_status_counts_plan_cache_entries() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("pcs");
    let c = db.collection::<Document>("c");
    c.insert_many((0..200).map(|i| doc! { "_id": i, "a": i % 10, "b": i % 7 }))
        .await
        .unwrap();
    for keys in [doc! { "a": 1 }, doc! { "b": 1 }] {
        c.create_index(mongodb::IndexModel::builder().keys(keys).build())
            .await
            .unwrap();
    }
    let _: Vec<Document> = c
        .find(doc! { "a": 3, "b": 4 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let entries: Vec<Document> = c
        .aggregate([doc! { "$planCacheStats": {} }])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert!(!entries.is_empty(), "the find was cached");
    let status = client
        .database("admin")
        .run_command(doc! { "serverStatus": 1 })
        .await
        .unwrap();
    let pc = status
        .get_document("metrics")
        .and_then(|m| m.get_document("query"))
        .and_then(|q| q.get_document("planCache"))
        .unwrap();
    assert_eq!(
        pc.get_i64("totalQueryShapes").unwrap(),
        entries.len() as i64
    );
    assert!(pc.get_i64("totalSizeEstimateBytes").unwrap() > 0, "{pc:?}");
}
