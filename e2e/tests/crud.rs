//! Proves the CRUD commands behave as mongod's through a real driver: insert, find (filters,
//! projection, sort, skip, limit, batches and cursors), update operators and upserts, delete,
//! findAndModify, count, distinct, and their error codes. How: a real `cairn` process on an
//! ephemeral port driven by the official Rust driver (raw `runCommand` where reply shapes matter).

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code, error_message};
use futures_util::TryStreamExt;
use mongodb::options::FindOptions;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

async fn setup() -> (Server, mongodb::Database) {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("crud");
    (server, db)
}

#[tokio::test]
async fn insert_and_find_round_trip() {
    let (_s, db) = setup().await;
    let c = db.collection::<Document>("people");
    let r = c
        .insert_one(doc! { "name": "ada", "age": 36 })
        .await
        .unwrap();
    assert!(matches!(r.inserted_id, Bson::ObjectId(_)));
    c.insert_many(vec![
        doc! { "_id": 2, "name": "bob", "age": 25 },
        doc! { "_id": 3, "name": "cy", "age": 41, "tags": ["x", "y"] },
    ])
    .await
    .unwrap();
    let ada = c.find_one(doc! { "name": "ada" }).await.unwrap().unwrap();
    assert_eq!(ada.keys().next().unwrap(), "_id", "_id is stored first");
    assert_eq!(ada.get_i32("age").unwrap(), 36);
    let older: Vec<Document> = c
        .find(doc! { "age": { "$gt": 30 } })
        .sort(doc! { "age": -1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        older
            .iter()
            .map(|d| d.get_i32("age").unwrap())
            .collect::<Vec<_>>(),
        [41, 36]
    );
    let tagged = c.find_one(doc! { "tags": "y" }).await.unwrap().unwrap();
    assert_eq!(tagged.get_i32("_id").unwrap(), 3);
    let projected = c
        .find_one(doc! { "_id": 2 })
        .projection(doc! { "name": 1, "_id": 0 })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(projected, doc! { "name": "bob" });
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 3);
    assert_eq!(
        c.count_documents(doc! { "age": { "$lt": 40 } })
            .await
            .unwrap(),
        2
    );
    assert_eq!(c.estimated_document_count().await.unwrap(), 3);
    let names = c.distinct("name", doc! {}).await.unwrap();
    assert_eq!(names.len(), 3);
}

#[tokio::test]
async fn duplicate_keys_and_write_errors() {
    let (_s, db) = setup().await;
    let c = db.collection::<Document>("dups");
    c.insert_one(doc! { "_id": 1 }).await.unwrap();
    let e = c.insert_one(doc! { "_id": 1 }).await.unwrap_err();
    assert_eq!(error_code(&e), 11000);
    assert_eq!(
        error_message(&e),
        "E11000 duplicate key error collection: crud.dups index: _id_ dup key: { _id: 1 }"
    );

    // Ordered: stops at the first error; unordered: goes on.
    let r = db
        .run_command(doc! { "insert": "dups", "documents": [ { "_id": 2 }, { "_id": 1 }, { "_id": 3 } ], "ordered": true })
        .await
        .unwrap();
    assert_eq!(r.get_i32("n").unwrap(), 1);
    let errs = r.get_array("writeErrors").unwrap();
    assert_eq!(errs.len(), 1);
    let e0 = errs[0].as_document().unwrap();
    assert_eq!(e0.get_i32("index").unwrap(), 1);
    assert_eq!(e0.get_i32("code").unwrap(), 11000);
    assert_eq!(e0.get_document("keyValue").unwrap(), &doc! { "_id": 1 });
    let r = db
        .run_command(doc! { "insert": "dups", "documents": [ { "_id": 1 }, { "_id": 4 }, { "_id": [1] } ], "ordered": false })
        .await
        .unwrap();
    assert_eq!(r.get_i32("n").unwrap(), 1);
    assert_eq!(r.get_array("writeErrors").unwrap().len(), 2);
}

#[tokio::test]
async fn update_operators_upsert_and_counts() {
    let (_s, db) = setup().await;
    let c = db.collection::<Document>("u");
    c.insert_many(vec![
        doc! { "_id": 1, "n": 1, "a": [1, 2, 3] },
        doc! { "_id": 2, "n": 5 },
    ])
    .await
    .unwrap();
    let r = c
        .update_one(
            doc! { "_id": 1 },
            doc! { "$inc": { "n": 2 }, "$push": { "a": 4 } },
        )
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (1, 1));
    let one = c.find_one(doc! { "_id": 1 }).await.unwrap().unwrap();
    assert_eq!(one, doc! { "_id": 1, "n": 3, "a": [1, 2, 3, 4] });
    // A no-op update matches but does not modify.
    let r = c
        .update_one(doc! { "_id": 1 }, doc! { "$set": { "n": 3 } })
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (1, 0));
    let r = c
        .update_many(doc! {}, doc! { "$set": { "flag": true } })
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (2, 2));
    // Upsert takes _id from the query's equality.
    let r = c
        .update_one(doc! { "_id": 9, "k": "v" }, doc! { "$set": { "x": 1 } })
        .upsert(true)
        .await
        .unwrap();
    assert_eq!(r.upserted_id, Some(Bson::Int32(9)));
    assert_eq!(
        c.find_one(doc! { "_id": 9 }).await.unwrap().unwrap(),
        doc! { "_id": 9, "k": "v", "x": 1 }
    );
    // Replacement keeps _id; changing _id is refused (66).
    c.replace_one(doc! { "_id": 2 }, doc! { "m": 1 })
        .await
        .unwrap();
    assert_eq!(
        c.find_one(doc! { "_id": 2 }).await.unwrap().unwrap(),
        doc! { "_id": 2, "m": 1 }
    );
    let e = c
        .update_one(doc! { "_id": 2 }, doc! { "$set": { "_id": 5 } })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 66);
    // Conflicting paths (40).
    let e = c
        .update_one(
            doc! { "_id": 2 },
            doc! { "$set": { "a": 1 }, "$inc": { "a": 1 } },
        )
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 40);
    // Raw reply shape: n, nModified, upserted.
    let r = db
        .run_command(doc! { "update": "u", "updates": [ { "q": { "_id": 100 }, "u": { "$set": { "y": 1 } }, "upsert": true } ] })
        .await
        .unwrap();
    assert_eq!(r.get_i32("n").unwrap(), 1);
    assert_eq!(r.get_i32("nModified").unwrap(), 0);
    assert_eq!(
        r.get_array("upserted").unwrap()[0].as_document().unwrap(),
        &doc! { "index": 0, "_id": 100 }
    );
}

#[tokio::test]
async fn delete_and_find_and_modify() {
    let (_s, db) = setup().await;
    let c = db.collection::<Document>("d");
    c.insert_many((0..10).map(|i| doc! { "_id": i, "even": i % 2 == 0 }))
        .await
        .unwrap();
    assert_eq!(
        c.delete_one(doc! { "even": true })
            .await
            .unwrap()
            .deleted_count,
        1
    );
    assert_eq!(
        c.delete_many(doc! { "even": true })
            .await
            .unwrap()
            .deleted_count,
        4
    );
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 5);

    let before = c
        .find_one_and_update(doc! { "_id": 1 }, doc! { "$set": { "x": 1 } })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(before, doc! { "_id": 1, "even": false });
    let after = c
        .find_one_and_update(doc! { "_id": 3 }, doc! { "$set": { "x": 3 } })
        .return_document(mongodb::options::ReturnDocument::After)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.get_i32("x").unwrap(), 3);
    let removed = c
        .find_one_and_delete(doc! { "_id": 5 })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(removed.get_i32("_id").unwrap(), 5);
    let top = c
        .find_one_and_delete(doc! {})
        .sort(doc! { "_id": -1 })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(top.get_i32("_id").unwrap(), 9);
    let r = db
        .run_command(doc! { "findAndModify": "d", "query": { "_id": 50 }, "update": { "$set": { "z": 1 } }, "upsert": true, "new": true })
        .await
        .unwrap();
    let leo = r.get_document("lastErrorObject").unwrap();
    assert_eq!(leo.get_i32("n").unwrap(), 1);
    assert!(!leo.get_bool("updatedExisting").unwrap());
    assert_eq!(leo.get("upserted"), Some(&Bson::Int32(50)));
    let e = db.run_command(doc! { "findAndModify": "d", "query": {}, "remove": true, "update": { "$set": { "a": 1 } } }).await.unwrap_err();
    assert_eq!(error_code(&e), 9);
}

#[tokio::test]
async fn cursors_batches_and_get_more() {
    let (_s, db) = setup().await;
    let c = db.collection::<Document>("big");
    c.insert_many((0..1000).map(|i| doc! { "_id": i, "v": i % 7 }))
        .await
        .unwrap();
    let r = db.run_command(doc! { "find": "big" }).await.unwrap();
    let cursor = r.get_document("cursor").unwrap();
    assert_eq!(
        cursor.get_array("firstBatch").unwrap().len(),
        101,
        "default first batch"
    );
    let id = cursor.get_i64("id").unwrap();
    assert_ne!(id, 0);
    assert_eq!(cursor.get_str("ns").unwrap(), "crud.big");
    let more = db
        .run_command(doc! { "getMore": id, "collection": "big", "batchSize": 50 })
        .await
        .unwrap();
    assert_eq!(
        more.get_document("cursor")
            .unwrap()
            .get_array("nextBatch")
            .unwrap()
            .len(),
        50
    );
    let k = db
        .run_command(doc! { "killCursors": "big", "cursors": [id, 12345_i64] })
        .await
        .unwrap();
    assert_eq!(
        k.get_array("cursorsKilled").unwrap(),
        &vec![Bson::Int64(id)]
    );
    assert_eq!(
        k.get_array("cursorsNotFound").unwrap(),
        &vec![Bson::Int64(12345)]
    );
    let e = db
        .run_command(doc! { "getMore": id, "collection": "big" })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 43);

    // The driver iterates all batches.
    let all: Vec<Document> = c
        .find(doc! { "v": 3 })
        .batch_size(10)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(all.len(), (0..1000).filter(|i| i % 7 == 3).count());
    let page: Vec<Document> = c
        .find(doc! {})
        .with_options(
            FindOptions::builder()
                .sort(doc! { "_id": -1 })
                .skip(5)
                .limit(3)
                .build(),
        )
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        page.iter()
            .map(|d| d.get_i32("_id").unwrap())
            .collect::<Vec<_>>(),
        [994, 993, 992]
    );
    // `let` variables bind inside $expr (find, and the statements of update and delete).
    let r = db
        .run_command(doc! { "find": "big", "filter": { "$expr": { "$eq": ["$_id", "$$target"] } }, "let": { "target": 7 } })
        .await
        .unwrap();
    assert_eq!(
        r.get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap()
            .len(),
        1
    );
    let r = db
        .run_command(doc! { "delete": "big", "deletes": [ { "q": { "$expr": { "$lt": ["$_id", "$$n"] } }, "limit": 0 } ], "let": { "n": 3 } })
        .await
        .unwrap();
    assert_eq!(r.get_i32("n").unwrap(), 3);
    // A negative limit is one batch.
    let r = db
        .run_command(doc! { "find": "big", "limit": -5 })
        .await
        .unwrap();
    let cur = r.get_document("cursor").unwrap();
    assert_eq!(cur.get_i64("id").unwrap(), 0);
    assert_eq!(cur.get_array("firstBatch").unwrap().len(), 5);
    // Dropping the collection kills its cursors.
    let r = db
        .run_command(doc! { "find": "big", "batchSize": 2 })
        .await
        .unwrap();
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    c.drop().await.unwrap();
    assert!(
        db.run_command(doc! { "getMore": id, "collection": "big" })
            .await
            .is_err()
    );
}

#[tokio::test]
async fn ddl_commands() {
    let (s, db) = setup().await;
    db.create_collection("made").await.unwrap();
    let e = db.create_collection("made").await.unwrap_err();
    assert_eq!(error_code(&e), 48);
    // An option cairn does not have is refused, not ignored (time-series: e2e_timeseries).
    let e = db
        .run_command(doc! { "create": "enc", "encryptedFields": { "fields": [] } })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 115);
    let names = db.list_collection_names().await.unwrap();
    assert_eq!(names, ["made"]);
    let client = s.client().await;
    let dbs = client.list_database_names().await.unwrap();
    assert!(dbs.contains(&"crud".to_string()));
    client
        .database("admin")
        .run_command(doc! { "renameCollection": "crud.made", "to": "crud.renamed" })
        .await
        .unwrap();
    assert_eq!(db.list_collection_names().await.unwrap(), ["renamed"]);
    let stats = db.run_command(doc! { "dbStats": 1 }).await.unwrap();
    assert_eq!(stats.get_i64("collections").unwrap(), 1);
    let cs = db
        .run_command(doc! { "collStats": "renamed" })
        .await
        .unwrap();
    assert_eq!(cs.get_i64("count").unwrap(), 0);
    let v = db
        .run_command(doc! { "validate": "renamed" })
        .await
        .unwrap();
    assert!(v.get_bool("valid").unwrap());
    db.collection::<Document>("renamed").drop().await.unwrap();
    db.drop().await.unwrap();
    assert!(
        !client
            .list_database_names()
            .await
            .unwrap()
            .contains(&"crud".to_string())
    );
}

#[tokio::test]
async fn indexes_unique_and_listing() {
    let (_s, db) = setup().await;
    let c = db.collection::<Document>("ix");
    c.insert_many(vec![
        doc! { "_id": 1, "email": "a@x" },
        doc! { "_id": 2, "email": "b@x" },
    ])
    .await
    .unwrap();
    let r = db
        .run_command(doc! { "createIndexes": "ix", "indexes": [ { "key": { "email": 1 }, "name": "email_1", "unique": true } ] })
        .await
        .unwrap();
    assert_eq!(r.get_i32("numIndexesBefore").unwrap(), 1);
    assert_eq!(r.get_i32("numIndexesAfter").unwrap(), 2);
    let again = db
        .run_command(doc! { "createIndexes": "ix", "indexes": [ { "key": { "email": 1 }, "name": "email_1", "unique": true } ] })
        .await
        .unwrap();
    assert_eq!(again.get_str("note").unwrap(), "all indexes already exist");
    // listIndexes keeps `background` as the index was created with it; `_id_` has no `unique`.
    db.run_command(doc! { "createIndexes": "ix", "indexes": [ { "key": { "n": 1 }, "name": "n_1", "background": true } ] })
        .await
        .unwrap();
    let listed = db.run_command(doc! { "listIndexes": "ix" }).await.unwrap();
    let batch = listed
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    let specs: Vec<&Document> = batch.iter().filter_map(|b| b.as_document()).collect();
    assert_eq!(
        specs[0],
        &doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" }
    );
    assert_eq!(
        specs[2],
        &doc! { "v": 2, "key": { "n": 1 }, "name": "n_1", "background": true }
    );
    db.run_command(doc! { "dropIndexes": "ix", "index": "n_1" })
        .await
        .unwrap();
    let e = c.insert_one(doc! { "email": "a@x" }).await.unwrap_err();
    assert_eq!(error_code(&e), 11000);
    assert_eq!(
        error_message(&e),
        "E11000 duplicate key error collection: crud.ix index: email_1 dup key: { email: \"a@x\" }"
    );
    // returnKey: the index key of each result (an empty document for a collection scan), in
    // every batch.
    let r = db
        .run_command(doc! { "find": "ix", "filter": { "email": { "$gte": "" } }, "returnKey": true, "batchSize": 1 })
        .await
        .unwrap();
    let cur = r.get_document("cursor").unwrap();
    assert_eq!(
        cur.get_array("firstBatch").unwrap()[0]
            .as_document()
            .unwrap(),
        &doc! { "email": "a@x" }
    );
    let more = db
        .run_command(doc! { "getMore": cur.get_i64("id").unwrap(), "collection": "ix" })
        .await
        .unwrap();
    assert_eq!(
        more.get_document("cursor")
            .unwrap()
            .get_array("nextBatch")
            .unwrap()[0]
            .as_document()
            .unwrap(),
        &doc! { "email": "b@x" }
    );
    let r = db.run_command(doc! { "find": "ix", "filter": { "_id": { "$gt": 0 } }, "returnKey": true, "hint": { "$natural": 1 } }).await.unwrap();
    assert_eq!(
        r.get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap()[0]
            .as_document()
            .unwrap(),
        &doc! {}
    );
    let names: Vec<String> = c.list_index_names().await.unwrap();
    assert_eq!(names, ["_id_", "email_1"]);
    let e = db
        .run_command(doc! { "createIndexes": "ix", "indexes": [ { "key": { "other": 1 }, "name": "email_1" } ] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 86);
    // A unique build over duplicates fails with 11000 naming the key.
    c.insert_many(vec![
        doc! { "k": 1, "email": "k1" },
        doc! { "k": 1, "email": "k2" },
    ])
    .await
    .unwrap();
    let e = db
        .run_command(
            doc! { "createIndexes": "ix", "indexes": [ { "key": { "k": 1 }, "name": "k_1", "unique": true } ] },
        )
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 11000);
    db.run_command(doc! { "dropIndexes": "ix", "index": "email_1" })
        .await
        .unwrap();
    assert_eq!(c.list_index_names().await.unwrap(), ["_id_"]);
    let e = db
        .run_command(doc! { "dropIndexes": "ix", "index": "_id_" })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 72);
}

#[tokio::test]
async fn bad_input_gets_errors_not_crashes() {
    let (s, db) = setup().await;
    db.collection::<Document>("x")
        .insert_one(doc! { "_id": 0 })
        .await
        .unwrap();
    for (cmd, code) in [
        (doc! { "find": "x", "filter": { "a": { "$foo": 1 } } }, 2),
        (doc! { "find": "x", "bogusField": 1 }, 40415),
        (doc! { "find": "x", "skip": -1 }, 51024),
        (doc! { "insert": "x", "documents": [] }, 16),
        (
            doc! { "update": "x", "updates": [ { "q": {}, "u": { "$bogus": { "a": 1 } } } ] },
            9,
        ),
        (doc! { "getMore": 1_i64, "collection": "x" }, 43),
        (doc! { "find": "x", "collation": { "locale": "xx" } }, 2),
        (doc! { "find": "x", "collation": {} }, 40414),
        (
            doc! { "aggregate": "x", "pipeline": [], "cursor": {}, "collation": { "locale": "en", "strength": 6 } },
            2,
        ),
        (
            doc! { "count": "x", "collation": { "locale": "en", "tint": 1 } },
            40415,
        ),
        (
            doc! { "createIndexes": "x", "indexes": [ { "key": { "a": 1 }, "name": "a_1", "collation": { "locale": "simple", "strength": 1 } } ] },
            2,
        ),
        (
            doc! { "update": "x", "updates": [ { "q": {}, "u": { "$set": { "a": 1 } }, "hint": "nope_1" } ] },
            2,
        ),
        (
            doc! { "insert": "x", "documents": [ {} ], "txnNumber": 1_i64, "autocommit": false, "startTransaction": true },
            20,
        ),
    ] {
        let name = cmd.keys().next().unwrap().clone();
        match db.run_command(cmd).await {
            Err(e) => assert_eq!(error_code(&e), code, "{name}: {e}"),
            Ok(r) => {
                let we = r.get_array("writeErrors").expect("an error");
                assert_eq!(
                    we[0].as_document().unwrap().get_i32("code").unwrap(),
                    code,
                    "{name}"
                );
            }
        }
    }
    // The server is still there.
    s.client()
        .await
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .await
        .unwrap();
}

#[tokio::test]
async fn unacknowledged_writes_and_max_time_ms() {
    use wire::{Body, OpMsg};
    let (s, db) = setup().await;
    // w:0 with moreToCome: no reply, but the write happens.
    let mut conn = cairn_e2e::RawConn::connect(&s.addr());
    let body = doc! { "insert": "w0", "documents": [ { "_id": 1 } ], "writeConcern": { "w": 0 }, "$db": "crud" };
    let mut m = OpMsg::new(bson::RawDocumentBuf::try_from(&body).unwrap());
    m.flags |= wire::FLAG_MORE_TO_COME;
    conn.send(&wire::encode_msg(1, 0, &m, None).unwrap())
        .unwrap();
    let ping =
        OpMsg::new(bson::RawDocumentBuf::try_from(&doc! { "count": "w0", "$db": "crud" }).unwrap());
    conn.send(&wire::encode_msg(2, 0, &ping, None).unwrap())
        .unwrap();
    let reply = wire::decode(&conn.recv().unwrap()).unwrap();
    assert_eq!(reply.header.response_to, 2);
    let Body::Msg(r) = reply.body else {
        panic!("OP_MSG expected")
    };
    assert_eq!(
        Document::try_from(r.body.as_ref())
            .unwrap()
            .get_i32("n")
            .unwrap(),
        1
    );

    // j:true and w:"majority" are accepted on a standalone; an unknown tag is a writeConcernError.
    let r = db.run_command(doc! { "insert": "w0", "documents": [ { "_id": 2 } ], "writeConcern": { "w": "majority", "j": true } }).await.unwrap();
    assert_eq!(r.get_i32("n").unwrap(), 1);
    let r = db
        .run_command(
            doc! { "insert": "w0", "documents": [ { "_id": 3 } ], "writeConcern": { "w": "dc2" } },
        )
        .await
        .unwrap();
    assert_eq!(
        r.get_document("writeConcernError")
            .unwrap()
            .get_i32("code")
            .unwrap(),
        79
    );

    // maxTimeMS is enforced on a long scan.
    let c = db.collection::<Document>("slow");
    for chunk in 0..10 {
        c.insert_many((0..5000).map(|i| doc! { "i": chunk * 5000 + i, "pad": "p".repeat(100) }))
            .await
            .unwrap();
    }
    let e = db
        .run_command(doc! { "find": "slow", "filter": { "nope": 1 }, "maxTimeMS": 1 })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 50);
}

/// Multi-document updates and deletes larger than one storage batch go through in chunks.
#[tokio::test]
async fn multi_writes_span_storage_batches() {
    let (_s, db) = setup().await;
    let c = db.collection::<Document>("many");
    c.insert_many((0..25_000).map(|i| doc! { "_id": i, "n": 0 }))
        .await
        .unwrap();
    let r = c
        .update_many(doc! {}, doc! { "$inc": { "n": 1 } })
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (25_000, 25_000));
    assert_eq!(c.count_documents(doc! { "n": 1 }).await.unwrap(), 25_000);
    assert_eq!(
        c.delete_many(doc! { "_id": { "$gte": 5_000 } })
            .await
            .unwrap()
            .deleted_count,
        20_000
    );
    assert_eq!(c.estimated_document_count().await.unwrap(), 5_000);
}
