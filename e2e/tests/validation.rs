//! Proves schema validation behaves as mongod's: validators (query operators and $jsonSchema)
//! on create and collMod, strict/moderate/off, error/warn, bypassDocumentValidation, and 121
//! DocumentValidationFailure with errInfo, through insert, update, upsert, findAndModify and
//! bulkWrite. How: raw commands through the Rust driver against a real cairn process.

use bson::{Bson, Document, doc};
use cairn_e2e::Server;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

fn schema() -> Document {
    doc! { "$jsonSchema": {
        "bsonType": "object",
        "required": ["name"],
        "properties": {
            "name": { "bsonType": "string" },
            "age": { "bsonType": "int", "minimum": 0, "description": "an age" },
        },
    } }
}

async fn run(db: &mongodb::Database, cmd: Document) -> Document {
    db.run_command(cmd).await.unwrap()
}

fn write_error(reply: &Document) -> Option<&Document> {
    reply
        .get_array("writeErrors")
        .ok()
        .and_then(|e| e.first())
        .and_then(Bson::as_document)
}

#[tokio::test]
async fn inserts_and_updates_are_validated() {
    let server = Server::start(BIN, &[]);
    let db = server.client().await.database("val");
    run(&db, doc! { "create": "people", "validator": schema() }).await;
    let ok = run(
        &db,
        doc! { "insert": "people", "documents": [ { "_id": 1, "name": "a", "age": 3 } ] },
    )
    .await;
    assert_eq!(ok.get_i32("n").unwrap(), 1);
    let bad = run(
        &db,
        doc! { "insert": "people", "documents": [ { "_id": 2, "age": -1 } ] },
    )
    .await;
    let e = write_error(&bad).unwrap();
    assert_eq!(e.get_i32("code").unwrap(), 121);
    assert_eq!(e.get_str("errmsg").unwrap(), "Document failed validation");
    let info = e.get_document("errInfo").unwrap();
    assert_eq!(info.get_i32("failingDocumentId").unwrap(), 2);
    let details = info.get_document("details").unwrap();
    assert_eq!(details.get_str("operatorName").unwrap(), "$jsonSchema");
    let rules = details.get_array("schemaRulesNotSatisfied").unwrap();
    let names: Vec<&str> = rules
        .iter()
        .filter_map(|r| r.as_document()?.get_str("operatorName").ok())
        .collect();
    assert_eq!(names, vec!["required", "properties"]);
    // Update to an invalid version: refused, document unchanged.
    let r = run(&db, doc! { "update": "people", "updates": [ { "q": { "_id": 1 }, "u": { "$set": { "age": "x" } } } ] }).await;
    assert_eq!(write_error(&r).unwrap().get_i32("code").unwrap(), 121);
    // Upsert of an invalid document.
    let r = run(&db, doc! { "update": "people", "updates": [ { "q": { "_id": 9 }, "u": { "$set": { "age": 1 } }, "upsert": true } ] }).await;
    assert_eq!(write_error(&r).unwrap().get_i32("code").unwrap(), 121);
    // findAndModify answers with a command error carrying errInfo.
    let e = db
        .run_command(doc! { "findAndModify": "people", "query": { "_id": 1 }, "update": { "$unset": { "name": 1 } } })
        .await
        .unwrap_err();
    assert_eq!(cairn_e2e::error_code(&e), 121);
    // bulkWrite.
    let r = server
        .client()
        .await
        .database("admin")
        .run_command(doc! {
            "bulkWrite": 1,
            "ops": [ { "insert": 0, "document": { "_id": 5 } } ],
            "nsInfo": [ { "ns": "val.people" } ],
        })
        .await
        .unwrap();
    assert_eq!(r.get_i32("nErrors").unwrap(), 1);
    // bypassDocumentValidation lets all of them through.
    let r = run(&db, doc! { "insert": "people", "documents": [ { "_id": 3 } ], "bypassDocumentValidation": true }).await;
    assert_eq!(r.get_i32("n").unwrap(), 1);
    let r = run(&db, doc! { "update": "people", "updates": [ { "q": { "_id": 1 }, "u": { "$set": { "age": "x" } } } ], "bypassDocumentValidation": true }).await;
    assert_eq!(r.get_i32("nModified").unwrap(), 1);
    // $jsonSchema works as a query operator too.
    let found = run(
        &db,
        doc! { "find": "people", "filter": { "$nor": [ schema() ] } },
    )
    .await;
    let batch = found
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert_eq!(batch.len(), 2);
    // listCollections shows the options with their defaults.
    let listed = run(
        &db,
        doc! { "listCollections": 1, "filter": { "name": "people" } },
    )
    .await;
    let entry = listed
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    let options = entry.get_document("options").unwrap();
    assert_eq!(options.get_str("validationLevel").unwrap(), "strict");
    assert_eq!(options.get_str("validationAction").unwrap(), "error");
}

#[tokio::test]
async fn levels_actions_and_coll_mod() {
    let mut server = Server::start(BIN, &[]);
    let db = server.client().await.database("val");
    run(
        &db,
        doc! { "insert": "c", "documents": [ { "_id": 1, "a": 1 }, { "_id": 2, "a": 100 } ] },
    )
    .await;
    // collMod adds a validator; existing documents are not re-checked.
    run(
        &db,
        doc! { "collMod": "c", "validator": { "a": { "$lt": 10 } } },
    )
    .await;
    let r = run(
        &db,
        doc! { "insert": "c", "documents": [ { "_id": 3, "a": 50 } ] },
    )
    .await;
    let e = write_error(&r).unwrap();
    assert_eq!(
        e.get_document("errInfo")
            .unwrap()
            .get_document("details")
            .unwrap(),
        &doc! { "operatorName": "$lt", "specifiedAs": { "a": { "$lt": 10 } }, "reason": "comparison failed", "consideredValue": 50 }
    );
    // strict: an update of the already-invalid document is checked.
    let upd =
        doc! { "update": "c", "updates": [ { "q": { "_id": 2 }, "u": { "$set": { "b": 1 } } } ] };
    assert!(write_error(&run(&db, upd.clone()).await).is_some());
    // moderate: it is not (it failed before), but a valid one must stay valid.
    run(&db, doc! { "collMod": "c", "validationLevel": "moderate" }).await;
    assert!(write_error(&run(&db, upd.clone()).await).is_none());
    let r = run(
        &db,
        doc! { "update": "c", "updates": [ { "q": { "_id": 1 }, "u": { "$set": { "a": 20 } } } ] },
    )
    .await;
    assert!(write_error(&r).is_some());
    // warn: written, and logged.
    run(&db, doc! { "collMod": "c", "validationAction": "warn" }).await;
    let r = run(
        &db,
        doc! { "insert": "c", "documents": [ { "_id": 4, "a": 99 } ] },
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 1);
    assert!(server.log_shows("Document would fail validation", Duration::from_secs(10)));
    // off, then durable across SIGKILL.
    run(
        &db,
        doc! { "collMod": "c", "validationLevel": "off", "validationAction": "error" },
    )
    .await;
    let r = run(
        &db,
        doc! { "insert": "c", "documents": [ { "_id": 5, "a": 99 } ] },
    )
    .await;
    assert_eq!(r.get_i32("n").unwrap(), 1);
    run(&db, doc! { "collMod": "c", "validationLevel": "strict" }).await;
    server.restart_after_kill();
    let db = server.client().await.database("val");
    let r = run(
        &db,
        doc! { "insert": "c", "documents": [ { "_id": 6, "a": 99 } ] },
    )
    .await;
    assert_eq!(write_error(&r).unwrap().get_i32("code").unwrap(), 121);
    // Bad options are refused with mongod's codes.
    for (cmd, code) in [
        (doc! { "create": "d", "validator": 1 }, 14),
        (
            doc! { "create": "d", "validator": { "$jsonSchema": { "nope": 1 } } },
            9,
        ),
        (
            doc! { "create": "d", "validator": { "a": 1 }, "validationLevel": "loose" },
            2,
        ),
        (
            doc! { "create": "d", "validator": { "a": 1 }, "validationAction": "shout" },
            2,
        ),
        (doc! { "create": "d", "validator": { "$where": "true" } }, 2),
        (doc! { "collMod": "c", "validator": { "$nope": 1 } }, 2),
    ] {
        let e = db.run_command(cmd.clone()).await.unwrap_err();
        assert_eq!(cairn_e2e::error_code(&e), code, "{cmd}");
    }
}
