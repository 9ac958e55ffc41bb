//! Proves replica-set mode with the official Rust driver against a real `cairn --replSet rs0`:
//! the uninitiated answers, replSetInitiate persisted over restarts, `?replicaSet=` discovery
//! (topology ReplicaSetWithPrimary), hello's fields, cluster time, the oplog and change streams.

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code};
use mongodb::event::EventHandler;
use mongodb::event::sdam::SdamEvent;
use mongodb::options::ClientOptions;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

async fn admin(server: &Server) -> mongodb::Database {
    server.client().await.database("admin")
}

async fn initiated(args: &[&str]) -> Server {
    Server::start_initiated(BIN, args).await
}

/// Clean stop (SIGTERM) and start again on the same data directory.
fn restart_clean(server: &mut Server) {
    server.signal("TERM");
    assert!(server.wait_exit(Duration::from_secs(30)).is_some());
    server.restart_after_kill();
}

#[tokio::test]
async fn standalone_stays_standalone() {
    let server = Server::start(BIN, &[]);
    let hello = admin(&server)
        .await
        .run_command(doc! { "hello": 1 })
        .await
        .unwrap();
    assert!(!hello.contains_key("setName"));
    assert!(!hello.contains_key("$clusterTime"));
    assert_eq!(hello.get_bool("isWritablePrimary").ok(), Some(true));
    let e = admin(&server)
        .await
        .run_command(doc! { "replSetGetStatus": 1 })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 76);
}

#[tokio::test]
async fn before_initiate_answers_like_an_uninitiated_member() {
    let server = Server::start(BIN, &["--replSet", "rs0"]);
    let client = server.client().await;
    let hello = client
        .database("admin")
        .run_command(doc! { "hello": 1 })
        .await
        .unwrap();
    assert_eq!(hello.get_bool("isWritablePrimary").ok(), Some(false));
    assert_eq!(hello.get_bool("secondary").ok(), Some(false));
    assert_eq!(hello.get_bool("isreplicaset").ok(), Some(true));
    assert!(hello.get_str("info").is_ok());
    assert!(!hello.contains_key("setName"));
    for cmd in [
        doc! { "replSetGetStatus": 1 },
        doc! { "replSetGetConfig": 1 },
    ] {
        let e = client.database("admin").run_command(cmd).await.unwrap_err();
        assert_eq!(error_code(&e), 94);
    }
    let e = client
        .database("t")
        .run_command(doc! { "insert": "c", "documents": [{ "a": 1 }] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 10107);
    // A wrong set name is refused; the right one initiates; a second initiate is refused.
    let e = client
        .database("admin")
        .run_command(doc! { "replSetInitiate": { "_id": "other", "members": [{ "_id": 0, "host": server.addr() }] } })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 93);
    client
        .database("admin")
        .run_command(doc! { "replSetInitiate": { "_id": "rs0", "members": [{ "_id": 0, "host": server.addr() }] } })
        .await
        .unwrap();
    let e = client
        .database("admin")
        .run_command(doc! { "replSetInitiate": {} })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 23);
}

fn check_primary_hello(hello: &Document, me: &str) {
    assert_eq!(hello.get_str("setName").ok(), Some("rs0"), "{hello}");
    assert_eq!(hello.get_bool("isWritablePrimary").ok(), Some(true));
    assert_eq!(hello.get_bool("secondary").ok(), Some(false));
    assert_eq!(hello.get_str("primary").ok(), Some(me));
    assert_eq!(hello.get_str("me").ok(), Some(me));
    assert_eq!(
        hello.get_array("hosts").unwrap(),
        &vec![Bson::String(me.to_string())]
    );
    assert!(hello.get_i32("setVersion").is_ok());
    assert!(hello.get_object_id("electionId").is_ok());
    let lw = hello.get_document("lastWrite").unwrap();
    assert!(
        lw.get_document("opTime")
            .unwrap()
            .get_timestamp("ts")
            .is_ok()
    );
    assert!(lw.get_datetime("lastWriteDate").is_ok());
    assert!(hello.get_document("topologyVersion").is_ok());
}

#[tokio::test]
async fn initiate_is_durable_and_hello_reports_the_set() {
    let mut server = initiated(&[]).await;
    let hello = admin(&server)
        .await
        .run_command(doc! { "hello": 1 })
        .await
        .unwrap();
    check_primary_hello(&hello, &server.addr());
    let term0 = hello.get_object_id("electionId").unwrap();
    // kill -9: the configuration was durable when replSetInitiate answered.
    server.restart_after_kill();
    let hello = admin(&server)
        .await
        .run_command(doc! { "hello": 1 })
        .await
        .unwrap();
    check_primary_hello(&hello, &server.addr());
    assert!(hello.get_object_id("electionId").unwrap() > term0);
    let status = admin(&server)
        .await
        .run_command(doc! { "replSetGetStatus": 1 })
        .await
        .unwrap();
    assert_eq!(status.get_str("set").ok(), Some("rs0"));
    assert_eq!(status.get_i32("myState").ok(), Some(1));
    let m = status.get_array("members").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(m.get_str("stateStr").ok(), Some("PRIMARY"));
    assert_eq!(m.get_bool("self").ok(), Some(true));
    // Reconfig with a higher version; a lower one is refused.
    let cfg = admin(&server)
        .await
        .run_command(doc! { "replSetGetConfig": 1 })
        .await
        .unwrap();
    let mut cfg = cfg.get_document("config").unwrap().clone();
    assert_eq!(cfg.get_str("_id").ok(), Some("rs0"));
    let v = cfg.get_i32("version").unwrap();
    cfg.insert("version", v + 1);
    admin(&server)
        .await
        .run_command(doc! { "replSetReconfig": cfg.clone() })
        .await
        .unwrap();
    let e = admin(&server)
        .await
        .run_command(doc! { "replSetReconfig": cfg })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 103);
    restart_clean(&mut server);
    let hello = admin(&server)
        .await
        .run_command(doc! { "hello": 1 })
        .await
        .unwrap();
    assert_eq!(hello.get_i32("setVersion").ok(), Some(v + 1));
}

#[tokio::test]
async fn driver_discovers_the_primary_with_replica_set_option() {
    let server = initiated(&[]).await;
    let uri = format!("mongodb://{}/?replicaSet=rs0", server.addr());
    let mut opts = ClientOptions::parse(&uri).await.unwrap();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = seen.clone();
    opts.sdam_event_handler = Some(EventHandler::callback(move |ev: SdamEvent| {
        if let SdamEvent::TopologyDescriptionChanged(c) = ev {
            sink.lock()
                .unwrap()
                .push(format!("{:?}", c.new_description.topology_type()));
        }
    }));
    let client = mongodb::Client::with_options(opts).unwrap();
    let coll = client.database("t").collection::<Document>("c");
    coll.insert_one(doc! { "_id": 1, "a": 1 }).await.unwrap();
    let got = coll.find_one(doc! { "_id": 1 }).await.unwrap().unwrap();
    assert_eq!(got.get_i32("a").ok(), Some(1));
    let types = seen.lock().unwrap().clone();
    assert!(
        types.iter().any(|t| t == "ReplicaSetWithPrimary"),
        "{types:?}"
    );
}

fn cluster_time_of(reply: &Document) -> bson::Timestamp {
    let ct = reply.get_document("$clusterTime").expect("$clusterTime");
    let sig = ct.get_document("signature").unwrap();
    assert_eq!(sig.get_binary_generic("hash").unwrap().len(), 20);
    assert!(reply.get_timestamp("operationTime").is_ok());
    ct.get_timestamp("clusterTime").unwrap()
}

fn ts_key(t: bson::Timestamp) -> u64 {
    (u64::from(t.time) << 32) | u64::from(t.increment)
}

#[tokio::test]
async fn cluster_time_grows_over_restarts() {
    let mut server = initiated(&[]).await;
    let mut last = 0u64;
    for round in 0..3 {
        let db = server.client().await.database("t");
        for i in 0..5 {
            let r = db
                .run_command(doc! { "insert": "c", "documents": [{ "round": round, "i": i }] })
                .await
                .unwrap();
            let t = ts_key(cluster_time_of(&r));
            assert!(t > last, "round {round}: {t} after {last}");
            assert_eq!(ts_key(r.get_timestamp("operationTime").unwrap()), t);
            last = t;
        }
        // Reads carry it too, and accept the cluster time back (causal consistency).
        let r = db
            .run_command(doc! {
                "find": "c",
                "readConcern": { "level": "majority", "afterClusterTime": bson::Timestamp { time: (last >> 32) as u32, increment: last as u32 } },
            })
            .await
            .unwrap();
        assert_eq!(ts_key(cluster_time_of(&r)), last);
        let r = db
            .run_command(doc! { "find": "c", "readConcern": { "level": "linearizable" } })
            .await
            .unwrap();
        assert_eq!(ts_key(cluster_time_of(&r)), last);
        // A session's causally consistent read after its write.
        let client = server.client().await;
        let mut session = client.start_session().await.unwrap();
        let coll = client.database("t").collection::<Document>("c");
        coll.insert_one(doc! { "s": round })
            .session(&mut session)
            .await
            .unwrap();
        let n = coll
            .count_documents(doc! { "s": round })
            .session(&mut session)
            .await
            .unwrap();
        assert_eq!(n, 1);
        last = ts_key(session.operation_time().unwrap());
        if round == 0 {
            server.restart_after_kill();
        } else {
            restart_clean(&mut server);
        }
    }
}

async fn oplog_of(client: &mongodb::Client, ns: &str) -> Vec<Document> {
    let r = client
        .database("local")
        .run_command(doc! { "find": "oplog.rs", "filter": { "ns": ns }, "batchSize": 1000 })
        .await
        .unwrap();
    let c = r.get_document("cursor").unwrap();
    c.get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|d| d.as_document().unwrap().clone())
        .collect()
}

#[tokio::test]
async fn oplog_has_mongods_entries_for_insert_update_replace_delete() {
    let mut server = initiated(&[]).await;
    let client = server.client().await;
    let coll = client.database("t").collection::<Document>("c");
    coll.insert_one(doc! { "_id": 1, "a": 1, "b": { "c": 1 } })
        .await
        .unwrap();
    coll.update_one(
        doc! { "_id": 1 },
        doc! { "$set": { "a": 2, "b.c": 5 }, "$unset": { "x": 1 } },
    )
    .await
    .unwrap();
    coll.replace_one(doc! { "_id": 1 }, doc! { "z": 1 })
        .await
        .unwrap();
    coll.delete_one(doc! { "_id": 1 }).await.unwrap();
    let uuid_check =
        |e: &Document| assert!(e.get_binary_generic("ui").is_err() && e.get("ui").is_some());
    let entries = oplog_of(&client, "t.c").await;
    let ops: Vec<&str> = entries.iter().map(|e| e.get_str("op").unwrap()).collect();
    assert_eq!(ops, ["i", "u", "u", "d"], "{entries:?}");
    for e in &entries {
        uuid_check(e);
        assert_eq!(e.get_i64("v").ok(), Some(2));
        assert!(e.get_i64("t").is_ok());
        assert!(e.get_datetime("wall").is_ok());
    }
    assert_eq!(
        entries[0].get_document("o").unwrap(),
        &doc! { "_id": 1, "a": 1, "b": { "c": 1 } }
    );
    assert_eq!(
        entries[1].get_document("o").unwrap(),
        &doc! { "$v": 2, "diff": { "u": { "a": 2 }, "sb": { "u": { "c": 5 } } } }
    );
    assert_eq!(entries[1].get_document("o2").unwrap(), &doc! { "_id": 1 });
    assert_eq!(
        entries[2].get_document("o").unwrap(),
        &doc! { "_id": 1, "z": 1 }
    );
    assert_eq!(entries[3].get_document("o").unwrap(), &doc! { "_id": 1 });
    let ts: Vec<u64> = entries
        .iter()
        .map(|e| ts_key(e.get_timestamp("ts").unwrap()))
        .collect();
    assert!(ts.windows(2).all(|w| w[0] < w[1]), "{ts:?}");
    // Newest first, and a ts filter.
    let r = client
        .database("local")
        .run_command(doc! { "find": "oplog.rs", "filter": { "ns": "t.c" }, "sort": { "$natural": -1 }, "limit": 1 })
        .await
        .unwrap();
    let first = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(
        first[0].as_document().unwrap().get_str("op").ok(),
        Some("d")
    );
    let last_ts = entries[3].get_timestamp("ts").unwrap();
    // An insertMany: one entry per document, each with its own ts.
    coll.insert_many((10..13).map(|i| doc! { "_id": i }))
        .await
        .unwrap();
    restart_clean(&mut server);
    let client = server.client().await;
    let r = client
        .database("local")
        .run_command(
            doc! { "find": "oplog.rs", "filter": { "ns": "t.c", "ts": { "$gt": last_ts } } },
        )
        .await
        .unwrap();
    let later = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert_eq!(later.len(), 3);
    let ts: Vec<u64> = later
        .iter()
        .map(|e| ts_key(e.as_document().unwrap().get_timestamp("ts").unwrap()))
        .collect();
    assert!(ts.windows(2).all(|w| w[0] < w[1]), "{ts:?}");
}

#[tokio::test]
async fn change_stream_events_have_mongods_shapes() {
    use futures_util::StreamExt;
    let server = initiated(&[]).await;
    let client = server.client().await;
    let coll = client.database("t").collection::<Document>("c");
    let mut stream = coll.watch().await.unwrap();
    let mut lookup = coll
        .watch()
        .full_document(mongodb::options::FullDocumentType::UpdateLookup)
        .await
        .unwrap();
    let other = client.database("t").collection::<Document>("other");
    other.insert_one(doc! { "_id": "elsewhere" }).await.unwrap();
    coll.insert_one(doc! { "_id": 1, "a": 1 }).await.unwrap();
    coll.update_one(doc! { "_id": 1 }, doc! { "$set": { "a": 2, "n.x": 1 } })
        .await
        .unwrap();
    coll.replace_one(doc! { "_id": 1 }, doc! { "b": 1 })
        .await
        .unwrap();
    coll.delete_one(doc! { "_id": 1 }).await.unwrap();
    let mut events = Vec::new();
    for _ in 0..4 {
        events.push(stream.next().await.unwrap().unwrap());
    }
    use mongodb::change_stream::event::OperationType as Op;
    let kinds: Vec<Op> = events.iter().map(|e| e.operation_type.clone()).collect();
    assert_eq!(kinds, [Op::Insert, Op::Update, Op::Replace, Op::Delete]);
    for e in &events {
        assert_eq!(e.document_key.as_ref().unwrap(), &doc! { "_id": 1 });
        let ns = e.ns.as_ref().unwrap();
        assert_eq!((ns.db.as_str(), ns.coll.as_deref()), ("t", Some("c")));
        assert!(e.cluster_time.is_some() && e.wall_time.is_some());
    }
    assert_eq!(
        events[0].full_document.as_ref().unwrap(),
        &doc! { "_id": 1, "a": 1 }
    );
    assert!(events[1].full_document.is_none());
    let ud = events[1].update_description.as_ref().unwrap();
    assert_eq!(ud.updated_fields, doc! { "a": 2, "n": { "x": 1 } });
    assert!(ud.removed_fields.is_empty());
    assert_eq!(
        events[2].full_document.as_ref().unwrap(),
        &doc! { "_id": 1, "b": 1 }
    );
    // updateLookup: the document as it is now (replaced, then deleted: null).
    let mut lk = Vec::new();
    for _ in 0..4 {
        lk.push(lookup.next().await.unwrap().unwrap());
    }
    assert_eq!(lk[1].operation_type, Op::Update);
    assert!(lk[1].full_document.is_none());
    // Tokens grow; a resume from the second event gives the last two.
    let t1 = events[1].id.clone();
    let mut resumed = coll.watch().resume_after(t1).await.unwrap();
    let a = resumed.next().await.unwrap().unwrap();
    let b = resumed.next().await.unwrap().unwrap();
    assert_eq!(
        (a.operation_type, b.operation_type),
        (Op::Replace, Op::Delete)
    );
    // startAtOperationTime from the insert's time gives all four.
    let mut from_time = coll
        .watch()
        .start_at_operation_time(events[0].cluster_time.unwrap())
        .await
        .unwrap();
    let e = from_time.next().await.unwrap().unwrap();
    assert_eq!(e.operation_type, Op::Insert);
    // A database-wide stream sees both collections; $match filters.
    let mut dbw = client
        .database("t")
        .watch()
        .pipeline([doc! { "$match": { "operationType": "insert" } }])
        .start_at_operation_time(events[0].cluster_time.unwrap())
        .await
        .unwrap();
    let e = dbw.next().await.unwrap().unwrap();
    assert_eq!(e.operation_type, Op::Insert);
    assert_eq!(e.document_key.unwrap(), doc! { "_id": 1 });
}

#[tokio::test]
async fn change_stream_without_replset_is_refused() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let e = client
        .database("t")
        .collection::<Document>("c")
        .watch()
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 40573);
}

/// Writes acknowledged, `kill -9`, restart: a stream resumed from a token taken before the kill
/// sees every acknowledged write after it exactly once, in order; also after a clean restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_stream_resumes_after_sigkill_exactly_once() {
    use futures_util::StreamExt;
    let mut server = initiated(&[]).await;
    let client = server.client().await;
    let coll = client.database("t").collection::<Document>("c");
    let mut stream = coll.watch().await.unwrap();
    coll.insert_one(doc! { "_id": 0 }).await.unwrap();
    let first = stream.next().await.unwrap().unwrap();
    let token = first.id.clone();
    // A concurrent writer: every acknowledged _id is recorded, then the server dies mid-write.
    let acked: Arc<Mutex<Vec<i64>>> = Arc::default();
    let writer = {
        let acked = acked.clone();
        let coll = coll.clone();
        tokio::spawn(async move {
            for i in 1..100_000i64 {
                match coll.insert_one(doc! { "_id": i }).await {
                    Ok(_) => acked.lock().unwrap().push(i),
                    Err(_) => return,
                }
            }
        })
    };
    while acked.lock().unwrap().len() < 200 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.kill();
    let _ = writer.await;
    let acked = acked.lock().unwrap().clone();
    server.restart_after_kill();
    let client = server.client().await;
    let coll = client.database("t").collection::<Document>("c");
    coll.insert_one(doc! { "_id": -1i64, "after": true })
        .await
        .unwrap();
    let mut resumed = coll.watch().resume_after(token).await.unwrap();
    let mut seen = Vec::new();
    loop {
        let e = resumed.next().await.unwrap().unwrap();
        let id = e.document_key.unwrap().get_i64("_id").unwrap();
        if id == -1 {
            break;
        }
        seen.push(id);
    }
    // Every acknowledged write, once, in order (an unacknowledged last one may also be there).
    assert!(
        seen.len() >= acked.len(),
        "{} seen, {} acked",
        seen.len(),
        acked.len()
    );
    assert_eq!(&seen[..acked.len()], &acked[..]);
    assert!(seen.len() <= acked.len() + 1);
    let expected: Vec<i64> = (1..=seen.len() as i64).collect();
    assert_eq!(seen, expected);
}

/// An awaiting getMore is woken by the commit: with `maxAwaitTimeMS` at 60 s the event still
/// arrives (the 30 s bound only keeps a broken build from hanging; nothing is timed).
#[tokio::test]
async fn awaiting_get_more_is_woken_by_the_commit() {
    use futures_util::StreamExt;
    let server = initiated(&[]).await;
    let client = server.client().await;
    let coll = client.database("t").collection::<Document>("c");
    let mut stream = coll
        .watch()
        .max_await_time(Duration::from_secs(60))
        .await
        .unwrap();
    // Tailable awaitData on the oplog too.
    let db = client.database("local");
    let r = db
        .run_command(doc! { "find": "oplog.rs", "filter": { "ns": "t.c" }, "tailable": true, "awaitData": true })
        .await
        .unwrap();
    let cursor_id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    assert_ne!(cursor_id, 0);
    for i in 0..5 {
        let writer = coll.clone();
        let w = tokio::spawn(async move {
            tokio::task::yield_now().await;
            writer.insert_one(doc! { "_id": i }).await.unwrap();
        });
        let e = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("woken by the commit")
            .unwrap()
            .unwrap();
        assert_eq!(e.document_key.unwrap(), doc! { "_id": i });
        w.await.unwrap();
        let more = tokio::time::timeout(
            Duration::from_secs(30),
            db.run_command(
                doc! { "getMore": cursor_id, "collection": "oplog.rs", "maxAwaitTimeMS": 60000 },
            ),
        )
        .await
        .expect("woken by the commit")
        .unwrap();
        let batch = more
            .get_document("cursor")
            .unwrap()
            .get_array("nextBatch")
            .unwrap();
        assert_eq!(batch.len(), 1, "{more}");
    }
}

/// A find over more of the oplog than one history read returns still gets every entry, over
/// getMores, and its cursor closes at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oplog_find_reads_past_one_history_read() {
    let server = initiated(&[]).await;
    let client = server.client().await;
    let coll = client.database("t").collection::<Document>("many");
    let mut tasks = Vec::new();
    for w in 0..4i64 {
        let coll = coll.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..300i64 {
                coll.insert_one(doc! { "w": w, "i": i }).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let local = client.database("local");
    let r = local
        .run_command(doc! { "find": "oplog.rs", "filter": { "ns": "t.many" }, "batchSize": 500 })
        .await
        .unwrap();
    let c = r.get_document("cursor").unwrap();
    let mut n = c.get_array("firstBatch").unwrap().len();
    let mut id = c.get_i64("id").unwrap();
    while id != 0 {
        let r = local
            .run_command(doc! { "getMore": id, "collection": "oplog.rs", "batchSize": 500 })
            .await
            .unwrap();
        let c = r.get_document("cursor").unwrap();
        n += c.get_array("nextBatch").unwrap().len();
        id = c.get_i64("id").unwrap();
    }
    assert_eq!(n, 1200);
}

#[tokio::test]
async fn pre_and_post_images_follow_the_collection_option_and_survive_sigkill() {
    use futures_util::StreamExt;
    use mongodb::change_stream::event::OperationType as Op;
    use mongodb::options::{FullDocumentBeforeChangeType as Before, FullDocumentType as Full};
    let mut server = initiated(&[]).await;
    let client = server.client().await;
    let db = client.database("t");
    // mongod's IDL checks on the option.
    for (bad, code) in [
        (Bson::Int32(1), 14),
        (Bson::Document(doc! {}), 40414),
        (Bson::Document(doc! { "enabled": 1 }), 14),
        (Bson::Document(doc! { "enabled": true, "x": 1 }), 40415),
    ] {
        let e = db
            .run_command(doc! { "create": "bad", "changeStreamPreAndPostImages": bad })
            .await
            .unwrap_err();
        assert_eq!(error_code(&e), code);
    }
    db.run_command(doc! { "create": "kept", "changeStreamPreAndPostImages": { "enabled": true } })
        .await
        .unwrap();
    let first = cairn_e2e::collection_entry(&db, "kept").await;
    assert_eq!(
        first.get_document("options").unwrap(),
        &doc! { "changeStreamPreAndPostImages": { "enabled": true } }
    );
    let kept = db.collection::<Document>("kept");
    let mut stream = kept
        .watch()
        .full_document(Full::Required)
        .full_document_before_change(Before::Required)
        .await
        .unwrap();
    kept.insert_one(doc! { "_id": 1, "a": 1 }).await.unwrap();
    kept.update_one(doc! { "_id": 1 }, doc! { "$inc": { "a": 1 } })
        .await
        .unwrap();
    kept.replace_one(doc! { "_id": 1 }, doc! { "b": 1 })
        .await
        .unwrap();
    kept.delete_one(doc! { "_id": 1 }).await.unwrap();
    let mut events = Vec::new();
    for _ in 0..4 {
        events.push(stream.next().await.unwrap().unwrap());
    }
    let kinds: Vec<Op> = events.iter().map(|e| e.operation_type.clone()).collect();
    assert_eq!(kinds, [Op::Insert, Op::Update, Op::Replace, Op::Delete]);
    let before: Vec<Option<Document>> = events
        .iter()
        .map(|e| e.full_document_before_change.clone())
        .collect();
    assert_eq!(
        before,
        [
            None,
            Some(doc! { "_id": 1, "a": 1 }),
            Some(doc! { "_id": 1, "a": 2 }),
            Some(doc! { "_id": 1, "b": 1 }),
        ]
    );
    assert_eq!(events[1].full_document, Some(doc! { "_id": 1, "a": 2 }));
    let token = events[0].id.clone();

    // A collection without the option: whenAvailable gives null, required fails with 47.
    let plain = db.collection::<Document>("plain");
    plain.insert_one(doc! { "_id": 1, "a": 1 }).await.unwrap();
    let mut soft = plain
        .watch()
        .full_document(Full::WhenAvailable)
        .full_document_before_change(Before::WhenAvailable)
        .await
        .unwrap();
    let mut strict = plain
        .watch()
        .full_document_before_change(Before::Required)
        .await
        .unwrap();
    plain
        .update_one(doc! { "_id": 1 }, doc! { "$set": { "a": 5 } })
        .await
        .unwrap();
    let e = soft.next().await.unwrap().unwrap();
    assert_eq!(e.operation_type, Op::Update);
    assert!(e.full_document.is_none() && e.full_document_before_change.is_none());
    let failed = strict.next().await.unwrap().unwrap_err();
    assert_eq!(error_code(&failed), 47);

    // collMod turns it on for later writes, and off again.
    db.run_command(
        doc! { "collMod": "plain", "changeStreamPreAndPostImages": { "enabled": true } },
    )
    .await
    .unwrap();
    plain.delete_one(doc! { "_id": 1 }).await.unwrap();
    let e = soft.next().await.unwrap().unwrap();
    assert_eq!(
        e.full_document_before_change,
        Some(doc! { "_id": 1, "a": 5 })
    );
    db.run_command(
        doc! { "collMod": "plain", "changeStreamPreAndPostImages": { "enabled": false } },
    )
    .await
    .unwrap();
    let first = cairn_e2e::collection_entry(&db, "plain").await;
    assert!(
        !first
            .get_document("options")
            .unwrap()
            .contains_key("changeStreamPreAndPostImages")
    );

    // The images are in the log: after kill -9, a resumed stream still has them.
    server.kill();
    server.restart_after_kill();
    let client = server.client().await;
    let kept = client.database("t").collection::<Document>("kept");
    let mut resumed = kept
        .watch()
        .full_document_before_change(Before::Required)
        .resume_after(token)
        .await
        .unwrap();
    let e = resumed.next().await.unwrap().unwrap();
    assert_eq!(e.operation_type, Op::Update);
    assert_eq!(
        e.full_document_before_change,
        Some(doc! { "_id": 1, "a": 1 })
    );
}
