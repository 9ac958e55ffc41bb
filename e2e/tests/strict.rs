//! Proves cairn refuses what mongod refuses in a request's shape, and accepts everything up to
//! each limit: repeated fields in a command body, two `_id`s in a document, nesting, command
//! size, statements per write batch, big index keys. How: a real `cairn` process; the driver
//! for ordinary commands, raw BSON (which may repeat keys) and raw OP_MSG frames for the rest.

use bson::{Bson, Document, RawArrayBuf, RawDocumentBuf, cstr, doc, rawdoc};
use cairn_e2e::{RawConn, Server, error_code, error_message};
use wire::{Body, OpMsg};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");
/// mongod's `maxBsonObjectSize` plus the 16 KiB it allows commands on top.
const COMMAND_SIZE_MAX: usize = 16 * 1024 * 1024 + 16 * 1024;
const STORED_DEPTH_MAX: usize = 180;

async fn setup() -> (Server, mongodb::Database) {
    let server = Server::start(BIN, &[]);
    let db = server.client().await.database("strict");
    (server, db)
}

/// `{_id: id, a: {a: ... {a: 1}}}` with `levels` levels counting the top one, built as raw
/// bytes (a `Document` this deep overflows a test thread's stack when dropped or encoded).
fn nested(id: i32, levels: usize, arrays: bool) -> RawDocumentBuf {
    let mut top = rawdoc! { "_id": id };
    if arrays {
        // `a: [[...[1]...]]`: every array is one level.
        let mut a = RawArrayBuf::new();
        a.push(1);
        for _ in 2..levels {
            let mut outer = RawArrayBuf::new();
            outer.push(a);
            a = outer;
        }
        top.append(cstr!("a"), a);
        return top;
    }
    let mut inner = rawdoc! { "a": 1 };
    for _ in 2..levels {
        let mut outer = RawDocumentBuf::new();
        outer.append(cstr!("a"), inner);
        inner = outer;
    }
    top.append(cstr!("a"), inner);
    top
}

async fn insert_raw(db: &mongodb::Database, d: RawDocumentBuf) -> Document {
    let mut docs = RawArrayBuf::new();
    docs.push(d);
    db.run_raw_command(rawdoc! { "insert": "c", "documents": docs })
        .await
        .unwrap()
}

#[tokio::test]
async fn a_repeated_field_in_a_command_body_is_refused() {
    let (_s, db) = setup().await;
    db.collection::<Document>("c")
        .insert_one(doc! { "_id": 1 })
        .await
        .unwrap();
    let mut body = rawdoc! { "find": "c", "filter": { "_id": 1 } };
    body.append(cstr!("filter"), rawdoc! {});
    let e = db.run_raw_command(body).await.unwrap_err();
    assert_eq!(error_code(&e), 40413);
    assert_eq!(
        error_message(&e),
        "BSON field 'find.filter' is a duplicate field"
    );
    let mut body = rawdoc! { "insert": "c", "documents": [{ "_id": 2 }] };
    body.append(cstr!("ordered"), false);
    body.append(cstr!("ordered"), true);
    let e = db.run_raw_command(body).await.unwrap_err();
    assert_eq!(error_code(&e), 40413, "{e}");
    assert_eq!(
        db.collection::<Document>("c")
            .count_documents(doc! {})
            .await
            .unwrap(),
        1,
        "the refused insert wrote nothing"
    );
}

#[tokio::test]
async fn a_document_with_two_ids_is_refused_with_mongods_write_error() {
    let (_s, db) = setup().await;
    let mut twice = rawdoc! { "_id": 1, "x": 1 };
    twice.append(cstr!("_id"), 2);
    let mut later = rawdoc! { "x": 1, "_id": 3 };
    later.append(cstr!("_id"), 4);
    for bad in [twice, later] {
        let mut docs = RawArrayBuf::new();
        docs.push(rawdoc! { "_id": 10 });
        docs.push(bad);
        let r = db
            .run_raw_command(rawdoc! { "insert": "c", "documents": docs, "ordered": false })
            .await
            .unwrap();
        assert_eq!(r.get_i32("n").unwrap(), 1, "{r}");
        let errors = r.get_array("writeErrors").unwrap();
        let e = errors[0].as_document().unwrap();
        assert_eq!(e.get_i32("index").unwrap(), 1);
        assert_eq!(e.get_i32("code").unwrap(), 2);
        assert_eq!(
            e.get_str("errmsg").unwrap(),
            "can't have multiple _id fields in one document"
        );
        db.collection::<Document>("c")
            .delete_many(doc! {})
            .await
            .unwrap();
    }
    // Other repeated names are stored, as mongod 8.0 does (SERVER-6439 is still open).
    let mut dup = rawdoc! { "_id": 5, "a": 1 };
    dup.append(cstr!("a"), 2);
    let mut docs = RawArrayBuf::new();
    docs.push(dup);
    let r = db
        .run_raw_command(rawdoc! { "insert": "c", "documents": docs })
        .await
        .unwrap();
    assert_eq!(r.get_i32("n").unwrap(), 1, "{r}");
}

/// The names of a raw document's fields, in order.
fn field_names(d: &bson::RawDocument) -> Vec<String> {
    d.iter()
        .map(|e| e.unwrap().0.as_str().to_string())
        .collect()
}

#[tokio::test]
async fn repeated_names_are_stored_wherever_the_id_is() {
    let (s, db) = setup().await;
    // In the body's array: `_id` after the repeat, and no `_id` at all (generated).
    let mut moved = rawdoc! { "a": 1, "_id": 1 };
    moved.append(cstr!("a"), 2);
    let mut generated = rawdoc! { "a": 1, "tag": "generated" };
    generated.append(cstr!("a"), 2);
    for d in [moved, generated] {
        let r = insert_raw(&db, d).await;
        assert_eq!(r.get_i32("n").unwrap(), 1, "{r}");
    }
    // In a document sequence (the driver's insert), `_id` last.
    let mut late = rawdoc! { "b": 1 };
    late.append(cstr!("b"), 2);
    late.append(cstr!("_id"), 2);
    db.collection::<RawDocumentBuf>("c")
        .insert_one(late)
        .await
        .unwrap();
    // Read back as bytes: a decoded document would keep one of each name.
    let find = OpMsg::new(rawdoc! { "find": "c", "sort": { "_id": 1 }, "$db": "strict" });
    let mut conn = RawConn::connect(&s.addr());
    conn.send(&wire::encode_msg(9, 0, &find, None).unwrap())
        .unwrap();
    let reply = match wire::decode(&conn.recv().unwrap()).unwrap().body {
        Body::Msg(m) => m.body,
        _ => panic!("not OP_MSG"),
    };
    let cursor = reply.get_document("cursor").unwrap();
    let names: Vec<Vec<String>> = cursor
        .get_array("firstBatch")
        .unwrap()
        .into_iter()
        .map(|d| field_names(d.unwrap().as_document().unwrap()))
        .collect();
    assert_eq!(
        names,
        [
            vec!["_id", "a", "a"],
            vec!["_id", "b", "b"],
            vec!["_id", "a", "tag", "a"],
        ]
    );
}

#[tokio::test]
async fn stored_documents_nest_up_to_180_levels() {
    let (_s, db) = setup().await;
    for arrays in [false, true] {
        let r = insert_raw(&db, nested(1, STORED_DEPTH_MAX, arrays)).await;
        assert_eq!(r.get_i32("n").unwrap(), 1, "{r}");
        let r = insert_raw(&db, nested(2, STORED_DEPTH_MAX + 1, arrays)).await;
        assert_eq!(r.get_i32("n").unwrap(), 0, "{r}");
        let e = r.get_array("writeErrors").unwrap()[0]
            .as_document()
            .unwrap();
        assert_eq!(e.get_i32("code").unwrap(), 15, "{e}");
        assert_eq!(
            e.get_str("errmsg").unwrap(),
            "cannot insert document because it exceeds 180 levels of nesting"
        );
        let c = db.collection::<Document>("c");
        let stored = c
            .find_one(doc! { "_id": 1 })
            .projection(doc! { "_id": 1 })
            .await
            .unwrap();
        assert_eq!(stored, Some(doc! { "_id": 1 }));
        c.delete_many(doc! {}).await.unwrap();
    }
}

/// One OP_MSG whose body is `{ping: 1, $db: "admin", pad: "xx.."}` of exactly `size` bytes.
fn ping_of_size(size: usize) -> Vec<u8> {
    let base = rawdoc! { "ping": 1, "$db": "admin" }.as_bytes().len();
    // type byte + "pad\0" + string length + the string's zero.
    let pad = size - base - 1 - 4 - 4 - 1;
    let body = rawdoc! { "ping": 1, "$db": "admin", "pad": "x".repeat(pad) };
    assert_eq!(body.as_bytes().len(), size);
    let m = OpMsg {
        flags: 0,
        body,
        sequences: vec![],
    };
    wire::encode_msg(7, 0, &m, None).unwrap()
}

fn reply_of(frame: &[u8]) -> Document {
    match wire::decode(frame).expect("a reply").body {
        Body::Msg(m) => Document::try_from(m.body.as_ref()).unwrap(),
        _ => panic!("not OP_MSG"),
    }
}

#[tokio::test]
async fn a_command_may_be_16_mib_plus_16_kib() {
    let s = Server::start(BIN, &[]);
    let mut conn = RawConn::connect(&s.addr());
    conn.send(&ping_of_size(COMMAND_SIZE_MAX)).unwrap();
    let r = reply_of(&conn.recv().unwrap());
    assert_eq!(r.get_f64("ok").unwrap(), 1.0, "{r}");
    conn.send(&ping_of_size(COMMAND_SIZE_MAX + 1)).unwrap();
    let r = reply_of(&conn.recv().unwrap());
    assert_eq!(r.get_i32("code").unwrap(), 10334, "{r}");
    // The connection still answers.
    conn.send(&ping_of_size(64)).unwrap();
    assert_eq!(reply_of(&conn.recv().unwrap()).get_f64("ok").unwrap(), 1.0);
}

#[tokio::test]
async fn a_write_batch_holds_at_most_100000_statements() {
    let (_s, db) = setup().await;
    let docs: Vec<Bson> = (0..100_001)
        .map(|i| Bson::Document(doc! { "_id": i }))
        .collect();
    let e = db
        .run_command(doc! { "insert": "c", "documents": docs.clone() })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 16, "{e}");
    assert_eq!(
        error_message(&e),
        "Write batch sizes must be between 1 and 100000. Got 100001 operations."
    );
    let r = db
        .run_command(doc! { "insert": "c", "documents": &docs[..100_000] })
        .await
        .unwrap();
    assert_eq!(r.get_i32("n").unwrap(), 100_000);
}

#[tokio::test]
async fn index_keys_have_no_size_limit_below_the_document_limit() {
    let (_s, db) = setup().await;
    let c = db.collection::<Document>("c");
    c.create_index(mongodb::IndexModel::builder().keys(doc! { "k": 1 }).build())
        .await
        .unwrap();
    let big = "k".repeat(16 * 1024 * 1024 - 64);
    c.insert_one(doc! { "_id": 1, "k": &big }).await.unwrap();
    let got = c
        .find_one(doc! { "k": &big })
        .hint(mongodb::options::Hint::Keys(doc! { "k": 1 }))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.get_i32("_id").unwrap(), 1);
}

/// The declarative checker's codes reach the driver as mongod's: a wrong type, an unknown field,
/// a missing required field, a value below its bound, a hint that is neither name nor pattern.
#[tokio::test]
async fn command_arguments_fail_with_mongods_codes() {
    let (_s, db) = setup().await;
    let cases = [
        (doc! { "find": "c", "limit": "x" }, 14),
        (doc! { "find": "c", "sort": 1 }, 14),
        (doc! { "find": "c", "nosuch": 1 }, 40415),
        (doc! { "find": "c", "skip": -1 }, 51024),
        (doc! { "count": "c", "hint": 1 }, 9),
        (doc! { "distinct": "c" }, 40414),
        (doc! { "killCursors": "c" }, 40414),
        (doc! { "listIndexes": "c", "cursor": 1 }, 14),
        (doc! { "insert": "c", "documents": [{}], "ordered": 1 }, 14),
        (doc! { "insert": "c", "documents": [{}, 2] }, 14),
        (
            doc! { "update": "c", "updates": [{ "q": {}, "u": {}, "x": 1 }] },
            40415,
        ),
        (
            doc! { "update": "c", "updates": [{ "q": {}, "u": {}, "upsert": 1 }] },
            14,
        ),
        (doc! { "update": "c", "updates": [{ "u": {} }] }, 40414),
        (doc! { "delete": "c", "deletes": [{ "q": {} }] }, 40414),
        (
            doc! { "delete": "c", "deletes": [{ "q": {}, "limit": 1, "hint": 1 }] },
            9,
        ),
        (doc! { "findAndModify": "c", "remove": true, "sort": 1 }, 14),
        (doc! { "aggregate": "c", "cursor": {} }, 40414),
        (doc! { "aggregate": "c", "pipeline": [], "explain": 1 }, 14),
        (doc! { "createIndexes": "c", "indexes": [1] }, 14),
        (
            doc! { "createIndexes": "c", "indexes": [{ "key": { "_id": 1 }, "name": "i", "unique": true }] },
            197,
        ),
        (doc! { "create": "c", "validationLevel": 1 }, 14),
        (doc! { "dropDatabase": 1, "x": 1 }, 40415),
        (doc! { "collMod": "c", "dryRun": 1 }, 14),
        (doc! { "dropIndexes": "c" }, 40414),
        (doc! { "explain": { "find": "c" }, "verbosity": 1 }, 14),
    ];
    for (body, code) in cases {
        let e = db.run_command(body.clone()).await.unwrap_err();
        assert_eq!(error_code(&e), code, "{body}");
    }
    let admin = db.client().database("admin");
    for (body, code) in [
        (doc! { "listDatabases": 1, "nameOnly": "x" }, 14),
        (doc! { "renameCollection": "strict.c" }, 40414),
        (
            doc! { "renameCollection": "strict.c", "to": "strict.d", "dropTarget": 1 },
            14,
        ),
    ] {
        let e = admin.run_command(body.clone()).await.unwrap_err();
        assert_eq!(error_code(&e), code, "{body}");
    }
    db.run_command(doc! { "find": "c", "filter": null, "limit": 1.0 })
        .await
        .unwrap();
}
