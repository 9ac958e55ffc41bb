//! Proves retryable writes run at most once under `--replSet`: the same write command sent again
//! with the same `lsid` + `txnNumber` (after a lost reply, on another connection, or by many
//! connections at once) returns the first reply and is not applied again; mongod's errors for an
//! older txnNumber, a txnNumber without a session, on a non-write command, or with multi=true.
//! How: raw OP_MSG commands (the driver would add its own session fields) against a real server,
//! and the Rust driver retrying by itself when the `onPrimaryTransactionalWrite` fail point
//! closes the connection after the write ran; a kill -9 inside the `hangBeforeRecordingRetryReply`
//! window, after which the retry gets 217.

use bson::{Bson, Document, doc};
use cairn_e2e::{RawConn, Server};
use wire::{Body, OpMsg};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

pub(crate) fn command(conn: &mut RawConn, body: &Document) -> Document {
    send(conn, body);
    let reply = wire::decode(&conn.recv().expect("reply")).expect("frame");
    let Body::Msg(r) = reply.body else {
        panic!("OP_MSG expected")
    };
    Document::try_from(r.body.as_ref()).expect("reply body")
}

fn send(conn: &mut RawConn, body: &Document) {
    let m = OpMsg::new(bson::RawDocumentBuf::try_from(body).expect("body"));
    conn.send(&wire::encode_msg(1, 0, &m, None).expect("encode"))
        .expect("send");
}

fn lsid(byte: u8) -> Document {
    doc! { "id": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: vec![byte; 16] } }
}

/// `body` as a retryable write of session `session` with `txn`.
fn retryable(mut body: Document, session: u8, txn: i64) -> Document {
    body.insert("lsid", lsid(session));
    body.insert("txnNumber", txn);
    body.insert("$db", "rw");
    body
}

fn initiated() -> Server {
    initiated_with(&[])
}

fn initiated_with(args: &[&str]) -> Server {
    let mut all = vec!["--replSet", "rs0"];
    all.extend_from_slice(args);
    let server = Server::start(BIN, &all);
    let mut conn = RawConn::connect(&server.addr());
    let r = command(&mut conn, &doc! { "replSetInitiate": {}, "$db": "admin" });
    assert_eq!(r.get_f64("ok").ok(), Some(1.0), "{r}");
    server
}

fn counter(conn: &mut RawConn, id: i32) -> Bson {
    let r = command(
        conn,
        &doc! { "find": "c", "filter": { "_id": id }, "$db": "rw" },
    );
    let batch = r
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .expect("firstBatch");
    match batch.first() {
        Some(Bson::Document(d)) => d.get("n").cloned().unwrap_or(Bson::Null),
        _ => Bson::Null,
    }
}

fn code(r: &Document) -> i32 {
    r.get_i32("code").unwrap_or(0)
}

#[test]
fn a_retried_write_returns_the_first_reply_and_applies_once() {
    let server = initiated();
    let mut conn = RawConn::connect(&server.addr());
    let insert = retryable(
        doc! { "insert": "c", "documents": [{ "_id": 1, "n": 0 }, { "_id": 2, "n": 0 }] },
        1,
        1,
    );
    for attempt in 0..2 {
        let r = command(&mut conn, &insert);
        assert_eq!(r.get_i32("n").ok(), Some(2), "{r}");
        assert!(
            !r.contains_key("writeErrors"),
            "a retry is no duplicate: {r}"
        );
        // A retry names the statements that had run (mongod's retriedStmtIds).
        let retried = r.get_array("retriedStmtIds").ok();
        match attempt {
            0 => assert!(retried.is_none(), "{r}"),
            _ => assert_eq!(retried, Some(&vec![Bson::Int32(0), Bson::Int32(1)]), "{r}"),
        }
    }
    let update = retryable(
        doc! { "update": "c", "updates": [{ "q": { "_id": 1 }, "u": { "$inc": { "n": 1 } } }] },
        1,
        2,
    );
    for _ in 0..3 {
        let r = command(&mut conn, &update);
        assert_eq!(r.get_i32("nModified").ok(), Some(1), "{r}");
    }
    assert_eq!(counter(&mut conn, 1), Bson::Int32(1));
    let fam = retryable(
        doc! { "findAndModify": "c", "query": { "_id": 2 }, "update": { "$inc": { "n": 5 } }, "new": true },
        1,
        3,
    );
    let first = command(&mut conn, &fam);
    let again = command(&mut conn, &fam);
    assert_eq!(first.get("value"), again.get("value"));
    assert!(!first.contains_key("retriedStmtId"), "{first}");
    assert_eq!(again.get_i32("retriedStmtId").ok(), Some(0), "{again}");
    assert_eq!(counter(&mut conn, 2), Bson::Int32(5));
    let delete = retryable(
        doc! { "delete": "c", "deletes": [{ "q": { "_id": 2 }, "limit": 1 }] },
        1,
        4,
    );
    for _ in 0..2 {
        assert_eq!(command(&mut conn, &delete).get_i32("n").ok(), Some(1));
    }
    // A second session has its own numbers; the same number there is a new write.
    let other = retryable(
        doc! { "update": "c", "updates": [{ "q": { "_id": 1 }, "u": { "$inc": { "n": 1 } } }] },
        2,
        2,
    );
    assert_eq!(
        command(&mut conn, &other).get_i32("nModified").ok(),
        Some(1)
    );
    assert_eq!(counter(&mut conn, 1), Bson::Int32(2));
    let status = command(&mut conn, &doc! { "serverStatus": 1, "$db": "admin" });
    let retried = status
        .get_document("transactions")
        .and_then(|t| t.get_i64("retriedCommandsCount"))
        .expect("serverStatus.transactions");
    assert_eq!(retried, 5);
    // Their statements: the insert's two documents once, the update twice, the rest once.
    let statements = status
        .get_document("transactions")
        .and_then(|t| t.get_i64("retriedStatementsCount"))
        .expect("retriedStatementsCount");
    assert_eq!(statements, 6);
    // Five writes ran (the retries wrote nothing): each wrote its session's record once.
    let writes = status
        .get_document("transactions")
        .and_then(|t| t.get_i64("transactionsCollectionWriteCount"))
        .expect("serverStatus.transactions");
    assert_eq!(writes, 5);
    // The oplog has the writes, but not the session records (mongod logs none of its own).
    let entries = |ns: &str, conn: &mut RawConn| -> Vec<Document> {
        let r = command(
            conn,
            &doc! { "find": "oplog.rs", "filter": { "ns": ns }, "$db": "local" },
        );
        r.get_document("cursor")
            .and_then(|c| c.get_array("firstBatch"))
            .map(|b| b.iter().filter_map(|e| e.as_document().cloned()).collect())
            .unwrap_or_default()
    };
    assert!(entries("config.transactions", &mut conn).is_empty());
    let written = entries("rw.c", &mut conn);
    assert_eq!(written.len(), 6);
    // Each carries its write's session and number, and its statement's place.
    let numbers: Vec<(i64, i32)> = written
        .iter()
        .map(|e| {
            assert!(
                e.get_document("lsid").is_ok_and(|l| l.contains_key("id")),
                "{e}"
            );
            (
                e.get_i64("txnNumber").unwrap_or(-1),
                e.get_i32("stmtId").unwrap_or(-1),
            )
        })
        .collect();
    assert_eq!(numbers, [(1, 0), (1, 1), (2, 0), (3, 0), (4, 0), (2, 0)]);
}

#[test]
fn a_retry_after_a_lost_reply_and_concurrent_retries_apply_once() {
    let server = initiated();
    let mut conn = RawConn::connect(&server.addr());
    let seed = retryable(
        doc! { "insert": "c", "documents": [{ "_id": 7, "n": 0 }] },
        3,
        1,
    );
    assert_eq!(command(&mut conn, &seed).get_i32("n").ok(), Some(1));
    let inc = retryable(
        doc! { "update": "c", "updates": [{ "q": { "_id": 7 }, "u": { "$inc": { "n": 1 } } }] },
        3,
        2,
    );
    // The first attempt's connection goes away before its reply is read.
    let mut lost = RawConn::connect(&server.addr());
    send(&mut lost, &inc);
    drop(lost);
    // Eight retries at once on eight connections.
    let addr = server.addr();
    let retries: Vec<_> = (0..8)
        .map(|_| {
            let (addr, inc) = (addr.clone(), inc.clone());
            std::thread::spawn(move || command(&mut RawConn::connect(&addr), &inc))
        })
        .collect();
    for t in retries {
        let r = t.join().expect("retry thread");
        assert_eq!(r.get_f64("ok").ok(), Some(1.0), "{r}");
        assert_eq!(r.get_i32("n").ok(), Some(1), "{r}");
    }
    assert_eq!(counter(&mut conn, 7), Bson::Int32(1));
    // An unordered bulkWrite whose second op failed: a retry names the other two.
    let mut bulk = retryable(
        doc! { "bulkWrite": 1, "ops": [
            { "insert": 0, "document": { "_id": 8 } },
            { "insert": 0, "document": { "_id": 7 } },
            { "insert": 0, "document": { "_id": 9 } },
        ], "nsInfo": [{ "ns": "rw.c" }], "ordered": false, "stmtId": 10 },
        3,
        3,
    );
    bulk.insert("$db", "admin");
    let first = command(&mut conn, &bulk);
    assert_eq!(first.get_i32("nInserted").ok(), Some(2), "{first}");
    assert!(!first.contains_key("retriedStmtIds"), "{first}");
    let again = command(&mut conn, &bulk);
    assert_eq!(again.get_i32("nInserted").ok(), Some(2), "{again}");
    let ids = again
        .get_array("retriedStmtIds")
        .cloned()
        .unwrap_or_default();
    assert_eq!(ids, vec![Bson::Int32(10), Bson::Int32(12)], "{again}");
}

#[test]
fn session_fields_get_mongods_errors() {
    let server = initiated();
    let mut conn = RawConn::connect(&server.addr());
    let insert = |txn: i64| retryable(doc! { "insert": "c", "documents": [{ "x": txn }] }, 4, txn);
    assert_eq!(command(&mut conn, &insert(5)).get_i32("n").ok(), Some(1));
    let r = command(&mut conn, &insert(4));
    assert_eq!(
        (code(&r), r.get_str("codeName").ok()),
        (225, Some("TransactionTooOld")),
        "{r}"
    );
    let find = retryable(doc! { "find": "c" }, 4, 6);
    assert_eq!(code(&command(&mut conn, &find)), 50768);
    let r = command(
        &mut conn,
        &doc! { "insert": "c", "documents": [{}], "txnNumber": 1_i64, "$db": "rw" },
    );
    assert_eq!(code(&r), 72, "{r}");
    let r = command(
        &mut conn,
        &doc! { "insert": "c", "documents": [{}], "txnNumber": 1, "lsid": lsid(4), "$db": "rw" },
    );
    assert_eq!(code(&r), 14, "txnNumber must be a long: {r}");
    // multi: true fails that statement alone.
    let multi = retryable(
        doc! { "update": "c", "updates": [
            { "q": { "x": 5 }, "u": { "$set": { "y": 1 } } },
            { "q": {}, "u": { "$set": { "z": 1 } }, "multi": true },
        ], "ordered": false },
        4,
        7,
    );
    let r = command(&mut conn, &multi);
    assert_eq!(r.get_i32("n").ok(), Some(1), "{r}");
    let errors = r.get_array("writeErrors").expect("writeErrors");
    let e = errors[0].as_document().expect("error");
    assert_eq!(
        (e.get_i32("index").ok(), e.get_i32("code").ok()),
        (Some(1), Some(72))
    );
    let multi_delete = retryable(
        doc! { "delete": "c", "deletes": [{ "q": {}, "limit": 0 }] },
        4,
        8,
    );
    let r = command(&mut conn, &multi_delete);
    assert_eq!(r.get_i32("n").ok(), Some(0), "{r}");
    assert!(r.contains_key("writeErrors"), "{r}");
}

#[test]
fn a_standalone_refuses_transaction_numbers() {
    let server = Server::start(BIN, &[]);
    let mut conn = RawConn::connect(&server.addr());
    let r = command(
        &mut conn,
        &retryable(doc! { "insert": "c", "documents": [{}] }, 5, 1),
    );
    assert_eq!(code(&r), 20, "{r}");
    let r = command(
        &mut conn,
        &doc! { "insert": "c", "documents": [{}], "txnNumber": 1_i64, "$db": "rw" },
    );
    assert_eq!(code(&r), 72, "{r}");
}

#[tokio::test]
async fn the_driver_retries_a_write_whose_reply_was_lost_and_it_applies_once() {
    let server = initiated_with(&["--setParameter", "enableTestCommands=1"]);
    let uri = format!("mongodb://{}/?replicaSet=rs0", server.addr());
    let client = mongodb::Client::with_uri_str(uri).await.expect("client");
    let admin = client.database("admin");
    let lose_next_reply = doc! {
        "configureFailPoint": "onPrimaryTransactionalWrite",
        "mode": { "times": 1 },
    };
    let c = client.database("rw").collection::<Document>("d");
    admin
        .run_command(lose_next_reply.clone())
        .await
        .expect("fail point");
    c.insert_one(doc! { "_id": 1, "n": 0 })
        .await
        .expect("retried insert");
    admin
        .run_command(lose_next_reply.clone())
        .await
        .expect("fail point");
    let r = c
        .update_one(doc! { "_id": 1 }, doc! { "$inc": { "n": 1 } })
        .await
        .expect("retried update");
    assert_eq!((r.matched_count, r.modified_count), (1, 1));
    admin
        .run_command(lose_next_reply)
        .await
        .expect("fail point");
    let before = c
        .find_one_and_update(doc! { "_id": 1 }, doc! { "$inc": { "n": 10 } })
        .await
        .expect("retried findAndModify")
        .expect("a document");
    assert_eq!(
        before.get_i32("n").ok(),
        Some(1),
        "the first reply's pre-image"
    );
    assert_eq!(c.count_documents(doc! {}).await.expect("count"), 1);
    let doc = c
        .find_one(doc! { "_id": 1 })
        .await
        .expect("find")
        .expect("doc");
    assert_eq!(
        doc.get_i32("n").ok(),
        Some(11),
        "each write applied once: {doc}"
    );
    let status = admin
        .run_command(doc! { "serverStatus": 1 })
        .await
        .expect("status");
    let retried = status
        .get_document("transactions")
        .and_then(|t| t.get_i64("retriedCommandsCount"))
        .expect("serverStatus.transactions");
    assert_eq!(retried, 3);
}

#[test]
fn a_retry_after_kill_9_gets_the_first_reply_and_applies_once() {
    let mut server = initiated();
    let mut conn = RawConn::connect(&server.addr());
    let insert = retryable(
        doc! { "insert": "c", "documents": [{ "_id": 1, "n": 0 }, { "_id": 2, "n": 0 }] },
        7,
        1,
    );
    assert_eq!(command(&mut conn, &insert).get_i32("n").ok(), Some(2));
    let update = retryable(
        doc! { "update": "c", "updates": [
            { "q": { "_id": 1 }, "u": { "$inc": { "n": 1 } } },
            { "q": { "_id": 3 }, "u": { "$set": { "n": 10 } }, "upsert": true },
        ] },
        7,
        2,
    );
    let first = command(&mut conn, &update);
    assert_eq!(first.get_i32("n").ok(), Some(2), "{first}");
    let fam = retryable(
        doc! { "findAndModify": "c", "query": { "_id": 2 }, "update": { "$inc": { "n": 5 } }, "new": true },
        8,
        1,
    );
    let fam_first = command(&mut conn, &fam);
    // mongod's record of the session, readable as config.transactions.
    let r = command(
        &mut conn,
        &doc! { "find": "transactions", "filter": { "_id.id": lsid(7).get("id").unwrap().clone() }, "$db": "config" },
    );
    let rec = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(rec.get_i64("txnNum").ok(), Some(2), "{rec}");
    assert!(rec.get_datetime("lastWriteDate").is_ok(), "{rec}");

    server.kill();
    server.restart_after_kill();
    let mut conn = RawConn::connect(&server.addr());
    let again = command(&mut conn, &update);
    assert_eq!(again.get("n"), first.get("n"));
    assert_eq!(again.get("nModified"), first.get("nModified"));
    assert_eq!(again.get("upserted"), first.get("upserted"));
    assert_eq!(
        command(&mut conn, &fam).get("value"),
        fam_first.get("value")
    );
    assert_eq!(counter(&mut conn, 1), Bson::Int32(1), "the $inc ran once");
    assert_eq!(
        counter(&mut conn, 2),
        Bson::Int32(5),
        "the findAndModify ran once"
    );
    // The session's first number is now too old: a restart keeps the session's latest.
    assert_eq!(code(&command(&mut conn, &insert)), 225, "TransactionTooOld");
    let status = command(&mut conn, &doc! { "serverStatus": 1, "$db": "admin" });
    let retried = status
        .get_document("transactions")
        .and_then(|t| t.get_i64("retriedCommandsCount"))
        .expect("serverStatus.transactions");
    assert_eq!(retried, 2);
}

/// The one window where a retry cannot get the first reply: the data batch (and with it the
/// record that the write ran) is durable, the reply is not yet recorded, and the server dies.
/// The retry after the restart must get IncompleteTransactionHistory, never a second run.
#[test]
fn a_retry_of_a_write_killed_before_its_reply_was_recorded_gets_217_and_applies_once() {
    let mut server = initiated_with(&["--setParameter", "enableTestCommands=1"]);
    let mut conn = RawConn::connect(&server.addr());
    let on = doc! {
        "configureFailPoint": "hangBeforeRecordingRetryReply", "mode": "alwaysOn", "$db": "admin",
    };
    assert_eq!(command(&mut conn, &on).get_f64("ok").ok(), Some(1.0));
    let insert = retryable(
        doc! { "insert": "c", "documents": [{ "_id": 1, "n": 0 }] },
        9,
        1,
    );
    let mut hung = RawConn::connect(&server.addr());
    send(&mut hung, &insert);
    let wait = doc! {
        "waitForFailPoint": "hangBeforeRecordingRetryReply", "timesEntered": 1_i64,
        "maxTimeMS": 30_000, "$db": "admin",
    };
    let r = command(&mut conn, &wait);
    assert_eq!(r.get_f64("ok").ok(), Some(1.0), "{r}");
    // A journaled write elsewhere syncs the log, and with it the hung insert's data batch.
    let other = doc! {
        "insert": "other", "documents": [{}], "writeConcern": { "w": 1, "j": true }, "$db": "rw2",
    };
    assert_eq!(command(&mut conn, &other).get_i32("n").ok(), Some(1));

    server.kill();
    server.restart_after_kill();
    let mut conn = RawConn::connect(&server.addr());
    assert_eq!(
        counter(&mut conn, 1),
        Bson::Int32(0),
        "the insert is durable"
    );
    let r = command(&mut conn, &insert);
    assert_eq!(
        (code(&r), r.get_str("codeName").ok()),
        (217, Some("IncompleteTransactionHistory")),
        "{r}"
    );
    let count = command(&mut conn, &doc! { "count": "c", "$db": "rw" });
    assert_eq!(count.get_i32("n").ok(), Some(1), "applied once: {count}");
    // A new txnNumber on the same session runs normally.
    let next = retryable(
        doc! { "insert": "c", "documents": [{ "_id": 2, "n": 0 }] },
        9,
        2,
    );
    assert_eq!(command(&mut conn, &next).get_i32("n").ok(), Some(1));
}
