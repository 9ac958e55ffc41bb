//! Proves catalog changes in the oplog and change streams against a real `cairn --replSet rs0`:
//! drop, rename and dropDatabase events, invalidate (and the stream closing) for collection and
//! database streams, startAfter an invalidate, the oplog's `op: "c"` entries, and what
//! `showExpandedEvents` adds (create, createIndexes, dropIndexes, modify, uuids, paths).

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

async fn initiated() -> Server {
    Server::start_initiated(BIN, &[]).await
}

/// Opens a change stream with raw commands: (cursor id, ns).
async fn open(db: &mongodb::Database, coll: Option<&str>, spec: Document) -> (i64, String) {
    let target = coll.map_or(Bson::Int32(1), |c| Bson::String(c.into()));
    let r = db
        .run_command(
            doc! { "aggregate": target, "pipeline": [{ "$changeStream": spec }], "cursor": {} },
        )
        .await
        .unwrap();
    let c = r.get_document("cursor").unwrap();
    (
        c.get_i64("id").unwrap(),
        c.get_str("ns").unwrap().to_string(),
    )
}

/// getMores until `n` events arrived or the cursor closed: (events, cursor still open).
async fn events(db: &mongodb::Database, id: i64, ns: &str, n: usize) -> (Vec<Document>, bool) {
    let coll = ns.split_once('.').unwrap().1.to_string();
    let mut out = Vec::new();
    for _ in 0..20 {
        let r = db
            .run_command(doc! { "getMore": id, "collection": coll.clone(), "maxTimeMS": 500 })
            .await
            .unwrap();
        let c = r.get_document("cursor").unwrap();
        for e in c.get_array("nextBatch").unwrap() {
            out.push(e.as_document().unwrap().clone());
        }
        if c.get_i64("id").unwrap() == 0 {
            return (out, false);
        }
        if out.len() >= n {
            return (out, true);
        }
    }
    (out, true)
}

fn kinds(events: &[Document]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e.get_str("operationType").unwrap())
        .collect()
}

#[tokio::test]
async fn drop_and_rename_invalidate_a_collection_stream() {
    let server = initiated().await;
    let client = server.client().await;
    let db = client.database("t");
    db.collection::<Document>("c")
        .insert_one(doc! { "_id": 0 })
        .await
        .unwrap();
    db.collection::<Document>("a")
        .insert_one(doc! { "_id": 0 })
        .await
        .unwrap();
    let (cid, cns) = open(&db, Some("c"), doc! {}).await;
    let (aid, ans) = open(&db, Some("a"), doc! {}).await;
    let (did, dns) = open(&db, None, doc! {}).await;

    db.collection::<Document>("c")
        .insert_one(doc! { "_id": 1 })
        .await
        .unwrap();
    db.collection::<Document>("c").drop().await.unwrap();
    let (got, open_after) = events(&db, cid, &cns, 3).await;
    assert_eq!(kinds(&got), ["insert", "drop", "invalidate"]);
    assert!(!open_after, "the stream ends with its invalidate");
    assert_eq!(
        got[1].get_document("ns").unwrap(),
        &doc! { "db": "t", "coll": "c" }
    );
    assert!(got[2].get("clusterTime").is_some());
    assert!(!got[2].contains_key("ns"));

    client
        .database("admin")
        .run_command(doc! { "renameCollection": "t.a", "to": "t.b" })
        .await
        .unwrap();
    let (got, open_after) = events(&db, aid, &ans, 2).await;
    assert_eq!(kinds(&got), ["rename", "invalidate"]);
    assert!(!open_after);
    assert_eq!(
        got[0].get_document("ns").unwrap(),
        &doc! { "db": "t", "coll": "a" }
    );
    assert_eq!(
        got[0].get_document("to").unwrap(),
        &doc! { "db": "t", "coll": "b" }
    );

    // The database stream sees both and goes on.
    let (got, open_after) = events(&db, did, &dns, 3).await;
    assert_eq!(kinds(&got), ["insert", "drop", "rename"]);
    assert!(open_after);

    // startAfter the invalidate: later events of a collection of that name; resumeAfter: 260.
    let (got, _) = {
        db.collection::<Document>("c")
            .insert_one(doc! { "_id": 2 })
            .await
            .unwrap();
        let (cid2, cns2) = open(&db, Some("c"), doc! {}).await;
        db.collection::<Document>("c").drop().await.unwrap();
        events(&db, cid2, &cns2, 2).await
    };
    assert_eq!(kinds(&got), ["drop", "invalidate"]);
    let inv = got[1].get_document("_id").unwrap().clone();
    let e = db
        .run_command(doc! { "aggregate": "c", "pipeline": [{ "$changeStream": { "resumeAfter": inv.clone() } }], "cursor": {} })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 260);
    let (sid, sns) = open(&db, Some("c"), doc! { "startAfter": inv }).await;
    db.collection::<Document>("c")
        .insert_one(doc! { "_id": 9 })
        .await
        .unwrap();
    let (got, _) = events(&db, sid, &sns, 1).await;
    assert_eq!(kinds(&got), ["insert"]);
    assert_eq!(
        got[0].get_document("documentKey").unwrap(),
        &doc! { "_id": 9 }
    );
}

#[tokio::test]
async fn drop_database_events_and_oplog_command_entries() {
    let server = initiated().await;
    let client = server.client().await;
    let db = client.database("d");
    let admin = client.database("admin");
    db.create_collection("x").await.unwrap();
    db.collection::<Document>("y")
        .insert_one(doc! { "_id": 1 })
        .await
        .unwrap();
    let (did, dns) = open(&db, None, doc! {}).await;
    let (xid, xns) = open(&db, Some("x"), doc! {}).await;
    let (kid, kns) = open(&admin, None, doc! { "allChangesForCluster": true }).await;
    admin
        .run_command(doc! { "renameCollection": "d.y", "to": "d.z" })
        .await
        .unwrap();
    db.drop().await.unwrap();

    let (got, open_after) = events(&db, did, &dns, 5).await;
    assert_eq!(
        kinds(&got),
        ["rename", "drop", "drop", "dropDatabase", "invalidate"]
    );
    assert!(!open_after);
    let dropped: Vec<&str> = got[1..3]
        .iter()
        .map(|e| e.get_document("ns").unwrap().get_str("coll").unwrap())
        .collect();
    assert!(
        dropped.contains(&"x") && dropped.contains(&"z"),
        "{dropped:?}"
    );
    assert_eq!(got[3].get_document("ns").unwrap(), &doc! { "db": "d" });

    let (got, open_after) = events(&db, xid, &xns, 2).await;
    assert_eq!(kinds(&got), ["drop", "invalidate"]);
    assert!(!open_after);

    let (got, open_after) = events(&admin, kid, &kns, 4).await;
    assert_eq!(kinds(&got), ["rename", "drop", "drop", "dropDatabase"]);
    assert!(open_after, "a cluster stream is never invalidated");

    let r = client
        .database("local")
        .run_command(doc! { "find": "oplog.rs", "filter": { "op": "c", "ns": "d.$cmd" } })
        .await
        .unwrap();
    let entries: Vec<Document> = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|e| e.as_document().unwrap().clone())
        .collect();
    let first_keys: Vec<String> = entries
        .iter()
        .map(|e| e.get_document("o").unwrap().keys().next().unwrap().clone())
        .collect();
    assert_eq!(
        first_keys,
        [
            "create",
            "create",
            "renameCollection",
            "drop",
            "drop",
            "dropDatabase"
        ],
        "{entries:?}"
    );
    let rename = entries[2].get_document("o").unwrap();
    assert_eq!(rename.get_str("renameCollection").ok(), Some("d.y"));
    assert_eq!(rename.get_str("to").ok(), Some("d.z"));
    assert!(
        entries[3]
            .get_document("o2")
            .unwrap()
            .contains_key("numRecords")
    );
    for e in &entries[..5] {
        assert!(e.get("ui").is_some() && e.get("ts").is_some() && e.get("wall").is_some());
    }
    assert!(entries[5].get("ui").is_none());
}

#[tokio::test]
async fn shaping_stages_after_change_stream() {
    let server = initiated().await;
    let client = server.client().await;
    let db = client.database("t");
    let c = db.collection::<Document>("s");
    c.insert_one(doc! { "_id": 0 }).await.unwrap();
    let open_with = |stages: Vec<Document>| {
        let db = db.clone();
        async move {
            let mut pipeline = vec![doc! { "$changeStream": {} }];
            pipeline.extend(stages);
            db.run_command(doc! { "aggregate": "s", "pipeline": pipeline, "cursor": {} })
                .await
        }
    };
    let r = open_with(vec![
        doc! { "$match": { "operationType": "insert" } },
        doc! { "$project": { "operationType": 1, "fullDocument.a": 1 } },
        doc! { "$addFields": { "seen": true } },
    ])
    .await
    .unwrap();
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    let bad = open_with(vec![doc! { "$project": { "_id": 0 } }])
        .await
        .unwrap();
    let bad_id = bad.get_document("cursor").unwrap().get_i64("id").unwrap();
    let e = open_with(vec![doc! { "$group": { "_id": null } }])
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 20);
    c.insert_one(doc! { "_id": 1, "a": 5, "b": 6 })
        .await
        .unwrap();
    c.delete_one(doc! { "_id": 1 }).await.unwrap();
    let (got, _) = events(&db, id, "t.s", 1).await;
    assert_eq!(got.len(), 1);
    let e = &got[0];
    assert_eq!(
        e.keys().collect::<Vec<_>>(),
        ["_id", "operationType", "fullDocument", "seen"]
    );
    assert_eq!(e.get_document("fullDocument").unwrap(), &doc! { "a": 5 });
    let e = db
        .run_command(doc! { "getMore": bad_id, "collection": "s", "maxTimeMS": 500 })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 280);
}

/// Runs `cmd` on `db`, panicking with the command on failure.
async fn run(db: &mongodb::Database, cmd: Document) -> Document {
    let shown = cmd.to_string();
    db.run_command(cmd)
        .await
        .unwrap_or_else(|e| panic!("{shown}: {e}"))
}

#[tokio::test]
async fn expanded_events_show_creates_index_changes_and_modifications() {
    let server = initiated().await;
    let client = server.client().await;
    let db = client.database("x");
    let (plain, plain_ns) = open(&db, None, doc! {}).await;
    let (id, ns) = open(&db, None, doc! { "showExpandedEvents": true }).await;
    run(
        &db,
        doc! { "create": "c", "capped": true, "size": 1_i64 << 20 },
    )
    .await;
    run(
        &db,
        doc! { "createIndexes": "c", "indexes": [{ "key": { "a": 1 }, "name": "a_1" }] },
    )
    .await;
    run(
        &db,
        doc! { "collMod": "c", "index": { "name": "a_1", "hidden": true } },
    )
    .await;
    run(
        &db,
        doc! { "collMod": "c", "validator": { "a": { "$exists": true } } },
    )
    .await;
    run(&db, doc! { "dropIndexes": "c", "index": "a_1" }).await;
    let c = db.collection::<Document>("c");
    c.insert_one(doc! { "_id": 1, "a": 1, "m": {} })
        .await
        .unwrap();
    c.update_one(doc! { "_id": 1 }, doc! { "$set": { "m.0": 5, "a": 2 } })
        .await
        .unwrap();
    run(
        &client.database("admin"),
        doc! { "renameCollection": "x.c", "to": "x.d" },
    )
    .await;
    run(&db, doc! { "drop": "d" }).await;

    let (all, open_still) = events(&db, id, &ns, 9).await;
    assert!(open_still, "a database stream is not invalidated by a drop");
    assert_eq!(
        kinds(&all),
        [
            "create",
            "createIndexes",
            "modify",
            "modify",
            "dropIndexes",
            "insert",
            "update",
            "rename",
            "drop"
        ]
    );
    // Every event names the collection by its uuid, the same one throughout.
    let uuids: Vec<&Bson> = all
        .iter()
        .map(|e| e.get("collectionUUID").unwrap())
        .collect();
    assert!(uuids.windows(2).all(|w| w[0] == w[1]), "{uuids:?}");
    let desc = |i: usize| all[i].get_document("operationDescription").unwrap();
    assert_eq!(desc(0).get_bool("capped").ok(), Some(true));
    assert_eq!(
        desc(0)
            .get_document("idIndex")
            .unwrap()
            .get_str("name")
            .ok(),
        Some("_id_")
    );
    let built = desc(1).get_array("indexes").unwrap()[0]
        .as_document()
        .unwrap();
    assert_eq!(built.get_str("name").ok(), Some("a_1"));
    assert_eq!(built.get_document("key").unwrap(), &doc! { "a": 1 });
    assert_eq!(
        desc(2),
        &doc! { "index": { "name": "a_1", "hidden": true } }
    );
    let before = all[2].get_document("stateBeforeChange").unwrap();
    assert_eq!(
        before.get_document("indexOptions").unwrap(),
        &doc! { "hidden": false }
    );
    assert!(desc(3).contains_key("validator"), "{:?}", desc(3));
    let before = all[3].get_document("stateBeforeChange").unwrap();
    let old = before.get_document("collectionOptions").unwrap();
    assert_eq!(old.get_bool("capped").ok(), Some(true));
    assert_eq!(old.get("uuid"), Some(uuids[0]));
    let dropped = desc(4).get_array("indexes").unwrap()[0]
        .as_document()
        .unwrap();
    assert_eq!(dropped.get_str("name").ok(), Some("a_1"));
    let update = all[6].get_document("updateDescription").unwrap();
    assert_eq!(
        update.get_document("disambiguatedPaths").unwrap(),
        &doc! { "m.0": ["m", "0"] }
    );
    assert_eq!(desc(7), &doc! { "to": { "db": "x", "coll": "d" } });

    // A stream without the option sees the data events and the rename and drop, as before.
    let (seen, _) = events(&db, plain, &plain_ns, 4).await;
    assert_eq!(kinds(&seen), ["insert", "update", "rename", "drop"]);
    assert!(seen.iter().all(|e| !e.contains_key("collectionUUID")));
    let update = seen[1].get_document("updateDescription").unwrap();
    assert!(!update.contains_key("disambiguatedPaths"));
    assert!(!seen[2].contains_key("operationDescription"));

    // The oplog has the index and collMod entries as mongod writes them.
    let r = run(
        &client.database("local"),
        doc! { "find": "oplog.rs", "filter": { "op": "c", "ns": "x.$cmd" } },
    )
    .await;
    let entries = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    let commands: Vec<String> = entries
        .iter()
        .map(|e| {
            let o = e.as_document().unwrap().get_document("o").unwrap();
            o.keys().next().unwrap().to_string()
        })
        .collect();
    assert_eq!(
        commands,
        [
            "create",
            "createIndexes",
            "collMod",
            "collMod",
            "dropIndexes",
            "renameCollection",
            "drop"
        ]
    );
    let drop_ix = entries[4].as_document().unwrap();
    assert_eq!(
        drop_ix.get_document("o").unwrap(),
        &doc! { "dropIndexes": "c", "index": "a_1" }
    );
    assert_eq!(
        drop_ix.get_document("o2").unwrap().get_str("name").ok(),
        Some("a_1")
    );
}

#[tokio::test]
async fn change_stream_spec_fields_are_checked() {
    let server = initiated().await;
    let db = server.client().await.database("x");
    for (spec, code) in [
        (doc! { "showExpandedEvents": 1 }, 14),
        (doc! { "fullDocument": 1 }, 14),
        (doc! { "bogus": true }, 40415),
    ] {
        let e = db
            .run_command(doc! { "aggregate": 1, "pipeline": [{ "$changeStream": spec.clone() }], "cursor": {} })
            .await
            .expect_err("refused");
        assert_eq!(error_code(&e), code, "{spec}");
    }
}
