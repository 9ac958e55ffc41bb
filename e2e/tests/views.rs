//! Proves views behave as mongod's: reads resolved through the view's pipeline (and views of
//! views), writes refused with 166, listing, collMod, drop, definition checks, SIGKILL durability
//! and explain, and a view's own default collation. How: the Rust driver against a real cairn process, results compared with the
//! same query computed by hand over the source collection.

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code};
use futures_util::TryStreamExt;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

async fn setup(server: &Server) -> mongodb::Database {
    let client = server.client().await;
    let db = client.database("v");
    let docs: Vec<Document> = (0..10)
        .map(|i| doc! { "_id": i, "a": i % 3, "tags": ["x", format!("t{}", i % 2)], "secret": "s" })
        .collect();
    db.collection::<Document>("src")
        .insert_many(docs)
        .await
        .unwrap();
    db.run_command(doc! {
        "create": "small",
        "viewOn": "src",
        "pipeline": [ { "$match": { "_id": { "$lt": 6 } } }, { "$project": { "secret": 0 } } ],
    })
    .await
    .unwrap();
    // A view of a view.
    db.run_command(doc! {
        "create": "smaller",
        "viewOn": "small",
        "pipeline": [ { "$match": { "a": { "$ne": 2 } } } ],
    })
    .await
    .unwrap();
    db
}

fn ids(docs: &[Document]) -> Vec<i32> {
    docs.iter().map(|d| d.get_i32("_id").unwrap()).collect()
}

#[tokio::test]
async fn reads_go_through_the_view_pipeline() {
    let server = Server::start(BIN, &[]);
    let db = setup(&server).await;
    let small = db.collection::<Document>("small");
    let all: Vec<Document> = small
        .find(doc! {})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(ids(&all), vec![0, 1, 2, 3, 4, 5]);
    assert!(all.iter().all(|d| !d.contains_key("secret")));
    // find's filter, sort, skip, limit, projection come after the view's stages.
    let some: Vec<Document> = small
        .find(doc! { "a": { "$lt": 2 } })
        .sort(doc! { "_id": -1 })
        .skip(1)
        .limit(2)
        .projection(doc! { "a": 1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        some,
        vec![doc! { "_id": 3, "a": 0 }, doc! { "_id": 1, "a": 1 }]
    );
    let smaller = db.collection::<Document>("smaller");
    let got: Vec<Document> = smaller
        .find(doc! {})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(ids(&got), vec![0, 1, 3, 4]);
    // count, countDocuments (aggregate), estimatedDocumentCount (count), distinct.
    let n = db
        .run_command(doc! { "count": "smaller", "query": { "a": 1 } })
        .await
        .unwrap();
    assert_eq!(n.get_i32("n").unwrap(), 2);
    assert_eq!(smaller.count_documents(doc! {}).await.unwrap(), 4);
    assert_eq!(smaller.estimated_document_count().await.unwrap(), 4);
    let values = small.distinct("tags", doc! { "a": 0 }).await.unwrap();
    assert_eq!(
        values,
        vec![Bson::from("t0"), Bson::from("t1"), Bson::from("x")]
    );
    // aggregate on a view of a view.
    let grouped: Vec<Document> = smaller
        .aggregate(vec![
            doc! { "$group": { "_id": "$a", "n": { "$sum": 1 } } },
            doc! { "$sort": { "_id": 1 } },
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        grouped,
        vec![doc! { "_id": 0, "n": 2 }, doc! { "_id": 1, "n": 2 }]
    );
}

#[tokio::test]
async fn get_more_on_a_view_cursor() {
    let server = Server::start(BIN, &[]);
    let db = setup(&server).await;
    let first = db
        .run_command(doc! { "find": "small", "batchSize": 2 })
        .await
        .unwrap();
    let cursor = first.get_document("cursor").unwrap();
    assert_eq!(cursor.get_str("ns").unwrap(), "v.small");
    let id = cursor.get_i64("id").unwrap();
    assert_ne!(id, 0);
    let more = db
        .run_command(doc! { "getMore": id, "collection": "small", "batchSize": 3 })
        .await
        .unwrap();
    let batch = more
        .get_document("cursor")
        .unwrap()
        .get_array("nextBatch")
        .unwrap();
    assert_eq!(batch.len(), 3);
    // The driver's own iteration over small batches.
    let got: Vec<Document> = db
        .collection::<Document>("smaller")
        .find(doc! {})
        .batch_size(1)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(ids(&got), vec![0, 1, 3, 4]);
}

#[tokio::test]
async fn writes_to_a_view_are_refused() {
    let server = Server::start(BIN, &[]);
    let db = setup(&server).await;
    let small = db.collection::<Document>("small");
    let e = small.insert_one(doc! { "_id": 100 }).await.unwrap_err();
    assert_eq!(error_code(&e), 166);
    let e = small
        .update_one(doc! {}, doc! { "$set": { "a": 1 } })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 166);
    let e = small.delete_many(doc! {}).await.unwrap_err();
    assert_eq!(error_code(&e), 166);
    let e = small.find_one_and_delete(doc! {}).await.unwrap_err();
    assert_eq!(error_code(&e), 166);
    let e = db
        .run_command(
            doc! { "createIndexes": "small", "indexes": [ { "key": { "a": 1 }, "name": "a_1" } ] },
        )
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 166);
    let e = server
        .client()
        .await
        .database("admin")
        .run_command(doc! { "renameCollection": "v.small", "to": "v.other" })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 166);
    // A collection cannot take a view's name, nor a view a collection's.
    let e = db
        .run_command(doc! { "create": "small" })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 48);
    let e = db
        .run_command(doc! { "create": "src", "viewOn": "small", "pipeline": [] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 48);
    // Nothing reached the source.
    assert_eq!(
        db.collection::<Document>("src")
            .count_documents(doc! {})
            .await
            .unwrap(),
        10
    );
}

#[tokio::test]
async fn definitions_are_checked_when_stored() {
    let server = Server::start(BIN, &[]);
    let db = setup(&server).await;
    let cases = [
        (
            doc! { "create": "bad", "viewOn": "src", "pipeline": [ { "$nope": {} } ] },
            40324,
        ),
        (
            doc! { "create": "bad", "viewOn": "src", "pipeline": [ { "$out": "x" } ] },
            167,
        ),
        (doc! { "create": "bad", "viewOn": "", "pipeline": [] }, 2),
        (doc! { "create": "bad", "viewOn": 1, "pipeline": [] }, 14),
        // mongod's create: InvalidOptions, not BadValue.
        (doc! { "create": "bad", "pipeline": [] }, 72),
        (
            doc! { "create": "bad", "viewOn": "src", "pipeline": {} },
            14,
        ),
        (
            doc! { "create": "bad", "viewOn": "src", "capped": true },
            72,
        ),
    ];
    for (cmd, code) in cases {
        let e = db.run_command(cmd.clone()).await.unwrap_err();
        assert_eq!(error_code(&e), code, "{cmd}");
    }
    // A cycle through collMod: small -> smaller -> small.
    let e = db
        .run_command(doc! { "collMod": "small", "viewOn": "smaller", "pipeline": [] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 5);
    let e = db
        .run_command(doc! { "collMod": "small", "pipeline": [] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 72);
    // collMod's view options on a collection, a collection's options on a view: 72 both ways.
    for cmd in [
        doc! { "collMod": "src", "viewOn": "small", "pipeline": [] },
        doc! { "collMod": "src", "pipeline": [] },
        doc! { "collMod": "small", "validator": { "a": 1 } },
        doc! { "collMod": "small", "index": { "name": "a_1", "hidden": true } },
        doc! { "collMod": "small", "viewOn": "src", "pipeline": [], "validationLevel": "off" },
    ] {
        let e = db.run_command(cmd.clone()).await.unwrap_err();
        assert_eq!(error_code(&e), 72, "{cmd}");
    }
    // Wrong types on collMod's view options are the table's 14.
    let e = db
        .run_command(doc! { "collMod": "small", "viewOn": 1, "pipeline": [] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 14);
    let e = db
        .run_command(doc! { "collMod": "small", "viewOn": "src", "pipeline": [1] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 14);
    // The same definition again is no error; a different one is 48.
    let again =
        doc! { "create": "again", "viewOn": "src", "pipeline": [ { "$match": { "a": 1 } } ] };
    db.run_command(again.clone()).await.unwrap();
    db.run_command(again).await.unwrap();
    let e = db
        .run_command(doc! { "create": "again", "viewOn": "src", "pipeline": [] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 48);
    let names = db.list_collection_names().await.unwrap();
    assert!(!names.contains(&"bad".to_string()));
}

#[tokio::test]
async fn list_collmod_and_drop() {
    let server = Server::start(BIN, &[]);
    let db = setup(&server).await;
    let listed = db
        .run_command(doc! { "listCollections": 1, "filter": { "type": "view" } })
        .await
        .unwrap();
    let batch = listed
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    let small = batch
        .iter()
        .filter_map(Bson::as_document)
        .find(|d| d.get_str("name").ok() == Some("small"))
        .unwrap();
    assert_eq!(small.get_str("type").unwrap(), "view");
    let options = small.get_document("options").unwrap();
    assert_eq!(options.get_str("viewOn").unwrap(), "src");
    assert_eq!(options.get_array("pipeline").unwrap().len(), 2);
    assert!(
        small
            .get_document("info")
            .unwrap()
            .get_bool("readOnly")
            .unwrap()
    );
    // mongod keeps the definitions in system.views, readable like a collection.
    let defs: Vec<Document> = db
        .collection::<Document>("system.views")
        .find(doc! {})
        .sort(doc! { "_id": 1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(defs.len(), 2);
    assert_eq!(defs[0].get_str("_id").unwrap(), "v.small");
    assert_eq!(defs[0].get_str("viewOn").unwrap(), "src");
    // collMod replaces the pipeline.
    db.run_command(
        doc! { "collMod": "small", "viewOn": "src", "pipeline": [ { "$match": { "a": 2 } } ] },
    )
    .await
    .unwrap();
    let got: Vec<Document> = db
        .collection::<Document>("small")
        .find(doc! {})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(ids(&got), vec![2, 5, 8]);
    // Dropping a view leaves its source (and the view built on it now reads nothing).
    db.collection::<Document>("small").drop().await.unwrap();
    let names = db.list_collection_names().await.unwrap();
    assert!(names.contains(&"src".to_string()));
    assert!(!names.contains(&"small".to_string()));
    assert_eq!(
        db.collection::<Document>("src")
            .count_documents(doc! {})
            .await
            .unwrap(),
        10
    );
}

#[tokio::test]
async fn views_survive_sigkill_and_explain() {
    let mut server = Server::start(BIN, &[]);
    setup(&server).await;
    server.restart_after_kill();
    let db = server.client().await.database("v");
    let got: Vec<Document> = db
        .collection::<Document>("smaller")
        .find(doc! {})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(ids(&got), vec![0, 1, 3, 4]);
    let e = cairn_e2e::explain(&db, doc! { "find": "small", "filter": { "a": 1 } }).await;
    let stages = e.get_array("stages").unwrap();
    let cursor = stages[0]
        .as_document()
        .unwrap()
        .get_document("$cursor")
        .unwrap();
    let planner = cursor.get_document("queryPlanner").unwrap();
    // The view's leading $match is the scan's filter; the find's filter is a later stage.
    let parsed = planner.get_document("parsedQuery").unwrap();
    assert_eq!(parsed, &doc! { "_id": { "$lt": 6 } });
    assert_eq!(planner.get_str("namespace").unwrap(), "v.small");
}

#[tokio::test]
async fn a_view_reads_with_its_own_default_collation() {
    let server = Server::start(BIN, &[]);
    let db = server.client().await.database("vc");
    let src = db.collection::<Document>("src");
    src.insert_many(vec![
        doc! { "_id": 1, "f": "case" },
        doc! { "_id": 2, "f": "Case" },
        doc! { "_id": 3, "f": "CASE" },
    ])
    .await
    .unwrap();
    let ci = doc! { "locale": "en", "strength": 1 };
    db.run_command(doc! { "create": "ci", "viewOn": "src", "collation": ci.clone() })
        .await
        .unwrap();
    db.run_command(doc! { "create": "plain", "viewOn": "src" })
        .await
        .unwrap();
    let run = |cmd: Document| {
        let db = db.clone();
        async move { db.run_command(cmd).await }
    };
    let found = |r: &Document| {
        r.get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap()
            .len()
    };
    // The view's collation applies when the read names none: three matches, one on the source.
    let r = run(doc! { "find": "ci", "filter": { "f": "case" } })
        .await
        .unwrap();
    assert_eq!(found(&r), 3);
    let r = run(doc! { "find": "src", "filter": { "f": "case" } })
        .await
        .unwrap();
    assert_eq!(found(&r), 1);
    let r = run(doc! { "count": "ci", "query": { "f": "case" } })
        .await
        .unwrap();
    assert_eq!(r.get_i32("n").ok(), Some(3));
    let r = run(doc! { "distinct": "ci", "key": "f" }).await.unwrap();
    assert_eq!(r.get_array("values").unwrap().len(), 1);
    let r =
        run(doc! { "aggregate": "ci", "pipeline": [{ "$match": { "f": "case" } }], "cursor": {} })
            .await
            .unwrap();
    assert_eq!(found(&r), 3);
    // The same collation asked for again is fine; another one, or simple, is 167.
    let r = run(doc! { "find": "ci", "filter": { "f": "case" }, "collation": ci.clone() })
        .await
        .unwrap();
    assert_eq!(found(&r), 3);
    for (view, collation) in [
        ("ci", doc! { "locale": "simple" }),
        ("ci", doc! { "locale": "fr" }),
        ("plain", doc! { "locale": "en" }),
    ] {
        for cmd in [
            doc! { "find": view, "collation": collation.clone() },
            doc! { "count": view, "collation": collation.clone() },
            doc! { "distinct": view, "key": "f", "collation": collation.clone() },
            doc! { "aggregate": view, "pipeline": [], "cursor": {}, "collation": collation.clone() },
        ] {
            let e = run(cmd.clone())
                .await
                .expect_err("a view's collation is not overridden");
            assert_eq!(error_code(&e), 167, "{cmd}");
        }
    }
    let r = run(doc! { "find": "plain", "collation": { "locale": "simple" } })
        .await
        .unwrap();
    assert_eq!(found(&r), 3);
    // listCollections shows the normalised collation on the view that has one only.
    let r = run(doc! { "listCollections": 1, "filter": { "type": "view" } })
        .await
        .unwrap();
    for v in r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
    {
        let v = v.as_document().unwrap();
        let options = v.get_document("options").unwrap();
        match v.get_str("name").unwrap() {
            "ci" => {
                let c = options.get_document("collation").unwrap();
                assert_eq!(c.get_str("locale").ok(), Some("en"));
                assert_eq!(c.get_i32("strength").ok(), Some(1));
            }
            _ => assert!(!options.contains_key("collation"), "{v}"),
        }
    }
    // A view on a view must compare the same way; collMod keeps the view's collation.
    let e = run(doc! { "create": "mixed", "viewOn": "ci" })
        .await
        .expect_err("mixed");
    assert_eq!(error_code(&e), 167);
    run(doc! { "create": "same", "viewOn": "ci", "collation": ci.clone() })
        .await
        .unwrap();
    run(doc! { "collMod": "ci", "viewOn": "src", "pipeline": [] })
        .await
        .unwrap();
    let r = run(doc! { "find": "same", "filter": { "f": "CASE" } })
        .await
        .unwrap();
    assert_eq!(found(&r), 3);
}
