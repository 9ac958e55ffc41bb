//! Proves mongod 8.0's write surface: the `bulkWrite` command (mixed namespaces, ordered and
//! unordered, `errorsOnly`, upserts, argument errors) and `update` with `sort`. How: a real `cairn`
//! process driven by the Rust driver, both with raw `runCommand` (exact reply shapes) and with
//! `Client::bulk_write`, which the driver only sends to a server reporting wire version 25.

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code, error_message};
use futures_util::TryStreamExt;
use mongodb::options::{DeleteOneModel, InsertOneModel, UpdateOneModel};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

async fn setup() -> (Server, mongodb::Client) {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let c = client.database("bwa").collection::<Document>("c");
    c.insert_many((1..=3).map(|i| doc! { "_id": i, "v": i }))
        .await
        .unwrap();
    (server, client)
}

fn ns() -> Bson {
    bson::bson!([{ "ns": "bwa.c" }, { "ns": "bwb.d" }])
}

async fn ids(client: &mongodb::Client, db: &str, coll: &str) -> Vec<Bson> {
    let docs: Vec<Document> = client
        .database(db)
        .collection::<Document>(coll)
        .find(doc! {})
        .sort(doc! { "_id": 1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    docs.iter().map(|d| d.get("_id").unwrap().clone()).collect()
}

#[tokio::test]
async fn mixed_namespaces_and_result_shapes() {
    let (_s, client) = setup().await;
    let reply = client
        .database("admin")
        .run_command(doc! {
            "bulkWrite": 1,
            "ops": [
                { "insert": 0, "document": { "_id": 10, "v": 10 } },
                { "update": 0, "filter": { "_id": 1 }, "updateMods": { "$set": { "v": 99 } }, "multi": false },
                { "delete": 0, "filter": { "_id": 2 }, "multi": false },
                { "insert": 1, "document": { "_id": 20 } },
                { "update": 1, "filter": { "_id": 77 }, "updateMods": { "$set": { "w": 7 } }, "upsert": true },
                { "update": 0, "filter": {}, "updateMods": { "$set": { "all": true } }, "multi": true },
                { "delete": 0, "filter": { "v": { "$gt": 1000 } }, "multi": true },
            ],
            "nsInfo": ns(),
        })
        .await
        .unwrap();
    let cursor = reply.get_document("cursor").unwrap();
    assert_eq!(cursor.get_str("ns").unwrap(), "admin.$cmd.bulkWrite");
    assert_eq!(cursor.get_i64("id").unwrap(), 0);
    let batch = cursor.get_array("firstBatch").unwrap();
    let expected = [
        doc! { "ok": 1.0, "idx": 0, "n": 1 },
        doc! { "ok": 1.0, "idx": 1, "n": 1, "nModified": 1 },
        doc! { "ok": 1.0, "idx": 2, "n": 1 },
        doc! { "ok": 1.0, "idx": 3, "n": 1 },
        doc! { "ok": 1.0, "idx": 4, "n": 1, "nModified": 0, "upserted": { "_id": 77 } },
        doc! { "ok": 1.0, "idx": 5, "n": 3, "nModified": 3 },
        doc! { "ok": 1.0, "idx": 6, "n": 0 },
    ];
    let got: Vec<&Document> = batch.iter().map(|b| b.as_document().unwrap()).collect();
    assert_eq!(got, expected.iter().collect::<Vec<_>>());
    let counts: Vec<i32> = [
        "nErrors",
        "nInserted",
        "nMatched",
        "nModified",
        "nUpserted",
        "nDeleted",
    ]
    .iter()
    .map(|k| reply.get_i32(k).unwrap())
    .collect();
    assert_eq!(counts, [0, 2, 4, 4, 1, 1]);
    assert_eq!(
        ids(&client, "bwa", "c").await,
        [Bson::Int32(1), Bson::Int32(3), Bson::Int32(10)]
    );
    assert_eq!(
        ids(&client, "bwb", "d").await,
        [Bson::Int32(20), Bson::Int32(77)]
    );
}

#[tokio::test]
async fn ordered_stops_unordered_continues_errors_only() {
    let (_s, client) = setup().await;
    let admin = client.database("admin");
    for (ordered, inserted, len) in [(true, 0, 1), (false, 2, 3)] {
        let reply = admin
            .run_command(doc! {
                "bulkWrite": 1,
                "ops": [
                    { "insert": 0, "document": { "_id": 1 } },
                    { "insert": 0, "document": { "_id": 100 + i32::from(ordered) } },
                    { "update": 0, "filter": {}, "updateMods": { "$bad": 1 } },
                    { "insert": 1, "document": { "_id": 5 } },
                ],
                "nsInfo": ns(),
                "ordered": ordered,
                "errorsOnly": false,
            })
            .await
            .unwrap();
        let batch = reply
            .get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap();
        let first = batch[0].as_document().unwrap();
        assert_eq!(first.get_f64("ok").unwrap(), 0.0);
        assert_eq!(first.get_i32("code").unwrap(), 11000);
        assert_eq!(first.get_str("codeName").unwrap(), "DuplicateKey");
        assert_eq!(first.get_document("keyValue").unwrap(), &doc! { "_id": 1 });
        assert_eq!(first.get_i32("n").unwrap(), 0);
        assert_eq!(reply.get_i32("nInserted").unwrap(), inserted);
        let errors = if ordered { 1 } else { 2 };
        assert_eq!(reply.get_i32("nErrors").unwrap(), errors);
        // Unordered: the failed update is reported too, and the inserts around it succeed.
        assert_eq!(batch.len(), if ordered { 1 } else { 4 }, "{batch:?}");
        let _ = len;
    }
    let reply = admin
        .run_command(doc! {
            "bulkWrite": 1,
            "ops": [{ "insert": 0, "document": { "_id": 50 } }, { "insert": 0, "document": { "_id": 50 } }],
            "nsInfo": ns(),
            "errorsOnly": true,
        })
        .await
        .unwrap();
    let batch = reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert_eq!(batch.len(), 1, "only the error is listed");
    assert_eq!(batch[0].as_document().unwrap().get_i32("idx").unwrap(), 1);
    assert_eq!(reply.get_i32("nInserted").unwrap(), 1);
}

#[tokio::test]
async fn argument_errors() {
    let (_s, client) = setup().await;
    let admin = client.database("admin");
    let cases = [
        (doc! { "bulkWrite": 1, "ops": [], "nsInfo": ns() }, 16),
        (
            doc! { "bulkWrite": 1, "ops": [{ "insert": 5, "document": {} }], "nsInfo": ns() },
            2,
        ),
        (
            doc! { "bulkWrite": 1, "ops": [{ "insert": 0, "document": {} }], "nsInfo": ns(), "bogus": 1 },
            40415,
        ),
        (
            doc! { "bulkWrite": 1, "ops": [{ "insert": 0 }], "nsInfo": ns() },
            40414,
        ),
        (
            doc! { "bulkWrite": 1, "ops": [{ "insert": 0, "document": {} }] },
            40414,
        ),
        (
            doc! { "bulkWrite": 1, "ops": [{ "insert": 0, "document": {} }], "nsInfo": [{ "ns": "nodot" }] },
            73,
        ),
        (
            doc! { "bulkWrite": 1, "ops": [{ "insert": 0, "document": {} }], "nsInfo": ns(), "ordered": "x" },
            14,
        ),
    ];
    for (cmd, code) in cases {
        let e = admin.run_command(cmd.clone()).await.unwrap_err();
        assert_eq!(error_code(&e), code, "{cmd}: {}", error_message(&e));
    }
    let e = client
        .database("bwa")
        .run_command(
            doc! { "bulkWrite": 1, "ops": [{ "insert": 0, "document": {} }], "nsInfo": ns() },
        )
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 13);
    assert_eq!(
        error_message(&e),
        "bulkWrite may only be run against the admin database."
    );
}

#[tokio::test]
async fn client_bulk_write_through_the_driver() {
    let (_s, client) = setup().await;
    let c = client.database("bwa").collection::<Document>("c");
    let d = client.database("bwb").collection::<Document>("d");
    let models = vec![
        InsertOneModel::builder()
            .namespace(c.namespace())
            .document(doc! { "_id": 5, "v": 5 })
            .build()
            .into(),
        UpdateOneModel::builder()
            .namespace(c.namespace())
            .filter(doc! { "_id": 1 })
            .update(doc! { "$set": { "v": 99 } })
            .build()
            .into(),
        DeleteOneModel::builder()
            .namespace(c.namespace())
            .filter(doc! { "_id": 2 })
            .build()
            .into(),
        InsertOneModel::builder()
            .namespace(d.namespace())
            .document(doc! { "_id": 1 })
            .build()
            .into(),
    ];
    let models: Vec<mongodb::options::WriteModel> = models;
    let r = client.bulk_write(models).verbose_results().await.unwrap();
    assert_eq!(
        (
            r.summary.inserted_count,
            r.summary.matched_count,
            r.summary.modified_count,
            r.summary.deleted_count
        ),
        (2, 1, 1, 1)
    );
    assert_eq!(r.insert_results.len(), 2);
    assert_eq!(r.update_results[&1].modified_count, 1);
    assert_eq!(d.count_documents(doc! {}).await.unwrap(), 1);
    // A duplicate key comes back as the driver's bulk write error, at its index.
    let dup = vec![
        InsertOneModel::builder()
            .namespace(d.namespace())
            .document(doc! { "_id": 1 })
            .build(),
    ];
    let e = client.bulk_write(dup).await.unwrap_err();
    match *e.kind {
        mongodb::error::ErrorKind::BulkWrite(b) => {
            assert_eq!(b.write_errors[&0].code, 11000);
        }
        other => panic!("expected a bulk write error, got {other:?}"),
    }
}

#[tokio::test]
async fn update_with_sort_picks_the_first_in_order() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("srt");
    let c = db.collection::<Document>("c");
    c.insert_many(vec![
        doc! { "_id": 1, "v": 3 },
        doc! { "_id": 2, "v": 1 },
        doc! { "_id": 3, "v": 2 },
    ])
    .await
    .unwrap();
    c.update_one(doc! {}, doc! { "$set": { "hit": 1 } })
        .sort(doc! { "v": 1 })
        .await
        .unwrap();
    let hit = c.find_one(doc! { "hit": 1 }).await.unwrap().unwrap();
    assert_eq!(hit.get_i32("_id").unwrap(), 2);
    c.replace_one(
        doc! { "v": { "$gte": 2 } },
        doc! { "v": 3, "replaced": true },
    )
    .sort(doc! { "v": -1, "_id": -1 })
    .await
    .unwrap();
    let replaced = c
        .find_one(doc! { "replaced": true })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(replaced.get_i32("_id").unwrap(), 1);
    // multi with sort is refused; an upsert still happens when nothing matches.
    let e = db
        .run_command(doc! { "update": "c", "updates": [{ "q": {}, "u": { "$set": { "z": 1 } }, "multi": true, "sort": { "v": 1 } }] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 9);
    assert_eq!(error_message(&e), "Cannot specify sort with multi=true");
    let r = c
        .update_one(doc! { "v": 99 }, doc! { "$set": { "z": 1 } })
        .upsert(true)
        .sort(doc! { "v": 1 })
        .await
        .unwrap();
    assert!(r.upserted_id.is_some());
}

/// `cursor.batchSize` bounds the first batch; the other results come from `getMore` on
/// `admin.$cmd.bulkWrite`. The 8.0 fields `stmtId`/`stmtIds` are taken; the op fields are typed
/// as mongod's IDL types them.
#[tokio::test]
async fn batch_size_leaves_a_cursor_and_fields_are_typed() {
    let (_s, client) = setup().await;
    let admin = client.database("admin");
    let ops: Vec<Document> = (100..105)
        .map(|i| doc! { "insert": 0, "document": { "_id": i } })
        .collect();
    let reply = admin
        .run_command(doc! {
            "bulkWrite": 1, "ops": ops.clone(), "nsInfo": ns(), "cursor": { "batchSize": 2 },
        })
        .await
        .unwrap();
    let cursor = reply.get_document("cursor").unwrap();
    assert_eq!(cursor.get_array("firstBatch").unwrap().len(), 2);
    assert_eq!(cursor.get_str("ns").unwrap(), "admin.$cmd.bulkWrite");
    assert_eq!(reply.get_i32("nInserted").unwrap(), 5);
    let id = cursor.get_i64("id").unwrap();
    assert_ne!(id, 0);
    let more = admin
        .run_command(doc! { "getMore": id, "collection": "$cmd.bulkWrite" })
        .await
        .unwrap();
    let next = more.get_document("cursor").unwrap();
    let idx: Vec<i32> = next
        .get_array("nextBatch")
        .unwrap()
        .iter()
        .map(|d| d.as_document().unwrap().get_i32("idx").unwrap())
        .collect();
    assert_eq!(idx, vec![2, 3, 4]);
    assert_eq!(next.get_i64("id").unwrap(), 0);
    // batchSize 0: every result waits in the cursor.
    let reply = admin
        .run_command(doc! {
            "bulkWrite": 1, "ops": [{ "delete": 0, "filter": { "_id": 100 } }], "nsInfo": ns(),
            "cursor": { "batchSize": 0 }, "stmtId": 0, "stmtIds": [0],
        })
        .await
        .unwrap();
    let cursor = reply.get_document("cursor").unwrap();
    assert!(cursor.get_array("firstBatch").unwrap().is_empty());
    let id = cursor.get_i64("id").unwrap();
    assert_ne!(id, 0);
    // A results cursor is killed like any other.
    let killed = admin
        .run_command(doc! { "killCursors": "$cmd.bulkWrite", "cursors": [id] })
        .await
        .unwrap();
    assert_eq!(
        killed.get_array("cursorsKilled").unwrap(),
        &vec![Bson::Int64(id)]
    );

    let one = |op: Document| doc! { "bulkWrite": 1, "ops": [op], "nsInfo": ns() };
    let cases = [
        (
            doc! { "bulkWrite": 1, "ops": ops.clone(), "nsInfo": ns(), "ordered": 1 },
            14,
        ),
        (
            doc! { "bulkWrite": 1, "ops": ops.clone(), "nsInfo": ns(), "errorsOnly": 1 },
            14,
        ),
        (
            doc! { "bulkWrite": 1, "ops": ops.clone(), "nsInfo": ns(), "cursor": { "batchSize": -1 } },
            51024,
        ),
        (
            doc! { "bulkWrite": 1, "ops": ops.clone(), "nsInfo": ns(), "cursor": { "x": 1 } },
            40415,
        ),
        (
            doc! { "bulkWrite": 1, "ops": ops, "nsInfo": [{ "ns": "bwa.c", "collectionUUID": 1 }] },
            14,
        ),
        (one(doc! { "update": 0, "filter": {}, "updateMods": 5 }), 14),
        (
            one(doc! { "update": 0, "filter": {}, "updateMods": {}, "arrayFilters": [1] }),
            14,
        ),
        (
            one(doc! { "update": 0, "filter": {}, "updateMods": {}, "constants": 1 }),
            14,
        ),
        (one(doc! { "delete": 0, "filter": {}, "hint": 1 }), 9),
        (one(doc! { "delete": 0, "filter": {}, "collation": 1 }), 14),
        (one(doc! { "delete": 0, "filter": 1 }), 14),
    ];
    for (cmd, code) in cases {
        let e = admin.run_command(cmd.clone()).await.unwrap_err();
        assert_eq!(error_code(&e), code, "{cmd}: {}", error_message(&e));
    }
}
