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
    let mut all = vec!["--replSet", "rs0"];
    all.extend_from_slice(args);
    let server = Server::start(BIN, &all);
    let r = admin(&server)
        .await
        .run_command(doc! { "replSetInitiate": {} })
        .await
        .expect("replSetInitiate");
    assert_eq!(r.get_f64("ok").ok(), Some(1.0));
    server
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
