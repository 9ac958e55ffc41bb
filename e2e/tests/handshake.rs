//! Proves that real clients can connect to a real `cairn` process: the driver handshake, admin
//! commands, compression, malformed frames and many connections. How: starts the binary on an
//! ephemeral port and talks to it with the official Rust driver and with raw wire bytes.

use bson::{Bson, Document, RawDocumentBuf, doc};
use cairn_e2e::{RawConn, Server};
use std::time::Duration;
use wire::{Body, Compressor, OpMsg, OpQuery};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(d).unwrap()
}

fn msg(body: Document) -> OpMsg {
    OpMsg {
        flags: 0,
        body: raw(&body),
        sequences: vec![],
    }
}

fn enc(request_id: i32, response_to: i32, m: &OpMsg, c: Option<Compressor>) -> Vec<u8> {
    wire::encode_msg(request_id, response_to, m, c).unwrap()
}

fn encq(request_id: i32, q: &OpQuery) -> Vec<u8> {
    wire::encode_query(request_id, 0, q, None).unwrap()
}

/// Decode a reply frame into its body document.
fn reply_body(frame: &[u8]) -> (Document, Option<Compressor>) {
    let m = wire::decode(frame).expect("decodable reply");
    match m.body {
        Body::Msg(msg) => (Document::try_from(msg.body.as_ref()).unwrap(), m.compressor),
        Body::Reply(r) => (
            Document::try_from(r.documents[0].as_ref()).unwrap(),
            m.compressor,
        ),
        Body::Query(_) => panic!("server sent OP_QUERY"),
    }
}

#[tokio::test]
async fn driver_connects_pings_and_reads_hello() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let admin = client.database("admin");
    let pong = admin.run_command(doc! { "ping": 1 }).await.unwrap();
    assert_eq!(pong.get_f64("ok").unwrap(), 1.0);

    let hello = admin.run_command(doc! { "hello": 1 }).await.unwrap();
    assert!(hello.get_bool("isWritablePrimary").unwrap());
    assert_eq!(hello.get_i32("maxBsonObjectSize").unwrap(), 16_777_216);
    assert_eq!(hello.get_i32("maxMessageSizeBytes").unwrap(), 48_000_000);
    assert_eq!(hello.get_i32("maxWriteBatchSize").unwrap(), 100_000);
    assert_eq!(hello.get_i32("logicalSessionTimeoutMinutes").unwrap(), 30);
    assert_eq!(hello.get_i32("minWireVersion").unwrap(), 0);
    assert_eq!(hello.get_i32("maxWireVersion").unwrap(), 25);
    assert!(!hello.get_bool("readOnly").unwrap());
    assert!(hello.get_i32("connectionId").unwrap() > 0);
    assert!(hello.get_datetime("localTime").is_ok());
    assert!(
        hello
            .get_document("topologyVersion")
            .unwrap()
            .get_object_id("processId")
            .is_ok()
    );

    let legacy = admin.run_command(doc! { "isMaster": 1 }).await.unwrap();
    assert!(legacy.get_bool("ismaster").unwrap());
    let lower = admin
        .run_command(doc! { "ismaster": 1, "helloOk": true })
        .await
        .unwrap();
    assert!(lower.get_bool("helloOk").unwrap());
    let mechs = admin
        .run_command(doc! { "hello": 1, "saslSupportedMechs": "admin.nobody" })
        .await
        .unwrap();
    // No such user: mongod leaves the field out (drivers then fall back to SCRAM-SHA-1).
    assert!(!mechs.contains_key("saslSupportedMechs"));
}

#[tokio::test]
async fn unknown_command_is_59_and_errors_have_mongods_shape() {
    let server = Server::start(BIN, &[]);
    let mut conn = RawConn::connect(&server.addr());
    conn.send(&enc(
        1,
        0,
        &msg(doc! { "noSuchThing": 1, "$db": "test" }),
        None,
    ))
    .unwrap();
    let (reply, _) = reply_body(&conn.recv().unwrap());
    assert_eq!(
        reply.keys().collect::<Vec<_>>(),
        ["ok", "errmsg", "code", "codeName"]
    );
    assert_eq!(reply.get_f64("ok").unwrap(), 0.0);
    assert_eq!(reply.get_i32("code").unwrap(), 59);
    assert_eq!(reply.get_str("codeName").unwrap(), "CommandNotFound");
    assert_eq!(
        reply.get_str("errmsg").unwrap(),
        "no such command: 'noSuchThing'"
    );

    // `$db` is required on OP_MSG.
    conn.send(&enc(2, 0, &msg(doc! { "ping": 1 }), None))
        .unwrap();
    let (reply, _) = reply_body(&conn.recv().unwrap());
    assert_eq!(reply.get_i32("code").unwrap(), 40571);

    // The connection is still usable after errors.
    conn.send(&enc(3, 0, &msg(doc! { "ping": 1, "$db": "admin" }), None))
        .unwrap();
    let (reply, _) = reply_body(&conn.recv().unwrap());
    assert_eq!(reply.get_f64("ok").unwrap(), 1.0);
}

#[tokio::test]
async fn admin_commands_answer_with_the_fields_tools_read() {
    let server = Server::start(BIN, &["--setParameter", "ttlMonitorSleepSecs=7"]);
    let client = server.client().await;
    let admin = client.database("admin");

    let bi = admin.run_command(doc! { "buildInfo": 1 }).await.unwrap();
    assert!(bi.get_str("version").unwrap().starts_with("8.0."));
    assert_eq!(bi.get_array("versionArray").unwrap().len(), 4);
    assert!(bi.get_str("gitVersion").is_ok());
    assert_eq!(bi.get_i32("bits").unwrap(), 64);
    assert!(bi.get_array("storageEngines").is_ok());
    admin.run_command(doc! { "buildinfo": 1 }).await.unwrap();

    let p = admin
        .run_command(doc! { "getParameter": 1, "ttlMonitorSleepSecs": 1 })
        .await
        .unwrap();
    assert_eq!(p.get("ttlMonitorSleepSecs").and_then(Bson::as_i64), Some(7));
    let all = admin
        .run_command(doc! { "getParameter": "*" })
        .await
        .unwrap();
    assert!(all.contains_key("cursorTimeoutMillis"));
    let fcv = admin
        .run_command(doc! { "getParameter": 1, "featureCompatibilityVersion": 1 })
        .await
        .unwrap();
    assert_eq!(
        fcv.get_document("featureCompatibilityVersion")
            .unwrap()
            .get_str("version")
            .unwrap(),
        "8.0"
    );
    let set = admin
        .run_command(doc! { "setParameter": 1, "ttlMonitorSleepSecs": 3 })
        .await
        .unwrap();
    assert_eq!(set.get("was").and_then(Bson::as_i64), Some(7));
    let bad = admin
        .run_command(doc! { "setParameter": 1, "noSuchParameter": 3 })
        .await
        .unwrap_err();
    assert!(bad.to_string().contains("unrecognized parameter"), "{bad}");

    let opts = admin
        .run_command(doc! { "getCmdLineOpts": 1 })
        .await
        .unwrap();
    assert!(opts.get_array("argv").unwrap().len() > 1);
    assert!(
        opts.get_document("parsed")
            .unwrap()
            .get_document("net")
            .is_ok()
    );

    let host = admin.run_command(doc! { "hostInfo": 1 }).await.unwrap();
    assert!(
        host.get_document("system")
            .unwrap()
            .get_i32("numCores")
            .unwrap()
            >= 1
    );

    let st = admin.run_command(doc! { "serverStatus": 1 }).await.unwrap();
    for key in [
        "host",
        "version",
        "process",
        "pid",
        "uptime",
        "uptimeMillis",
        "localTime",
        "connections",
        "opcounters",
        "mem",
        "network",
    ] {
        assert!(st.contains_key(key), "serverStatus lacks {key}");
    }
    assert!(st.get_document("mem").unwrap().get_i32("resident").unwrap() > 0);
    assert!(
        st.get_document("opcounters")
            .unwrap()
            .get_i64("command")
            .unwrap()
            > 0
    );
    assert!(
        st.get_document("network")
            .unwrap()
            .get_i64("bytesIn")
            .unwrap()
            > 0
    );

    let me = admin.run_command(doc! { "whatsmyuri": 1 }).await.unwrap();
    assert!(me.get_str("you").unwrap().starts_with("127.0.0.1:"));
    let cs = admin
        .run_command(doc! { "connectionStatus": 1 })
        .await
        .unwrap();
    assert!(cs.get_document("authInfo").is_ok());
    let lc = admin.run_command(doc! { "listCommands": 1 }).await.unwrap();
    assert!(lc.get_document("commands").unwrap().contains_key("hello"));
    let ss = admin.run_command(doc! { "startSession": 1 }).await.unwrap();
    assert!(ss.get_document("id").is_ok());
    admin.run_command(doc! { "endSessions": [] }).await.unwrap();
    admin
        .run_command(doc! { "refreshSessions": [] })
        .await
        .unwrap();
    let log = admin
        .run_command(doc! { "getLog": "global" })
        .await
        .unwrap();
    assert!(!log.get_array("log").unwrap().is_empty());
    let warn = admin
        .run_command(doc! { "getLog": "startupWarnings" })
        .await
        .unwrap();
    assert!(warn.get_array("log").is_ok());
    let dbs = admin
        .run_command(doc! { "listDatabases": 1 })
        .await
        .unwrap();
    assert!(dbs.get_array("databases").is_ok());
    // Admin-only commands refuse other databases, like mongod.
    let e = client
        .database("test")
        .run_command(doc! { "getCmdLineOpts": 1 })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("admin database"), "{e}");
}

/// Ping with a large, compressible comment through each compressor; the server must have read
/// far fewer bytes than the payload, which proves compression was negotiated and used.
#[tokio::test]
async fn compressors_negotiated_and_used() {
    let server = Server::start(BIN, &[]);
    let payload = "cairn ".repeat(200_000);
    for name in ["zlib", "snappy", "zstd"] {
        let client = server.client_with(&[&format!("compressors={name}")]).await;
        let admin = client.database("admin");
        let before = admin.run_command(doc! { "serverStatus": 1 }).await.unwrap();
        let bytes_in = |d: &Document| {
            d.get_document("network")
                .unwrap()
                .get_i64("bytesIn")
                .unwrap()
        };
        admin
            .run_command(doc! { "ping": 1, "comment": &payload })
            .await
            .unwrap();
        let after = admin.run_command(doc! { "serverStatus": 1 }).await.unwrap();
        let read = bytes_in(&after) - bytes_in(&before);
        assert!(
            read < payload.len() as i64 / 4,
            "{name}: server read {read} bytes for a {} byte payload",
            payload.len()
        );
    }
    // Raw: a compressed request gets a reply compressed the same way; hello lists the intersection.
    for c in [
        Compressor::Noop,
        Compressor::Snappy,
        Compressor::Zlib,
        Compressor::Zstd,
    ] {
        let mut conn = RawConn::connect(&server.addr());
        let hello = msg(
            doc! { "hello": 1, "compression": ["zstd", "lz4", "snappy", "zlib"], "$db": "admin" },
        );
        conn.send(&enc(1, 0, &hello, None)).unwrap();
        let (reply, _) = reply_body(&conn.recv().unwrap());
        let agreed: Vec<&str> = reply
            .get_array("compression")
            .unwrap()
            .iter()
            .filter_map(Bson::as_str)
            .collect();
        assert_eq!(agreed, ["zstd", "snappy", "zlib"]);
        conn.send(&enc(
            2,
            0,
            &msg(doc! { "listCommands": 1, "$db": "admin" }),
            Some(c),
        ))
        .unwrap();
        let (reply, used) = reply_body(&conn.recv().unwrap());
        assert_eq!(reply.get_f64("ok").unwrap(), 1.0);
        assert_eq!(used, Some(c));
    }
}

#[test]
fn malformed_frames_close_only_their_connection() {
    let server = Server::start(BIN, &[]);
    let ping = enc(1, 0, &msg(doc! { "ping": 1, "$db": "admin" }), None);

    // 100 MB declared length: closed before anything is allocated.
    let mut c = RawConn::connect(&server.addr());
    let mut huge = ping.clone();
    huge[..4].copy_from_slice(&100_000_000i32.to_le_bytes());
    c.send(&huge).unwrap();
    assert!(c.closed_by_server());

    // Unknown opcode.
    let mut c = RawConn::connect(&server.addr());
    let mut bad = ping.clone();
    bad[12..16].copy_from_slice(&9999i32.to_le_bytes());
    c.send(&bad).unwrap();
    assert!(c.closed_by_server());

    // Bad checksum.
    let mut c = RawConn::connect(&server.addr());
    let mut m = msg(doc! { "ping": 1, "$db": "admin" });
    m.flags |= wire::FLAG_CHECKSUM_PRESENT;
    let mut framed = enc(1, 0, &m, None);
    let last = framed.len() - 1;
    framed[last] ^= 0xff;
    c.send(&framed).unwrap();
    assert!(c.closed_by_server());

    // A good checksum is accepted.
    let mut c = RawConn::connect(&server.addr());
    c.send(&enc(1, 0, &m, None)).unwrap();
    assert_eq!(reply_body(&c.recv().unwrap()).0.get_f64("ok").unwrap(), 1.0);

    // Truncated frame, then the client goes away: the server just drops the connection.
    let mut c = RawConn::connect(&server.addr());
    c.send(&ping[..ping.len() / 2]).unwrap();
    drop(c);

    // The server is still there for everyone else.
    let mut c = RawConn::connect(&server.addr());
    c.send(&ping).unwrap();
    assert_eq!(reply_body(&c.recv().unwrap()).0.get_f64("ok").unwrap(), 1.0);
}

#[test]
fn op_query_handshake_and_legacy_rejection() {
    let server = Server::start(BIN, &[]);
    let mut c = RawConn::connect(&server.addr());
    let q = OpQuery {
        flags: 0,
        full_collection_name: "admin.$cmd".into(),
        number_to_skip: 0,
        number_to_return: -1,
        query: raw(
            &doc! { "isMaster": 1, "client": { "driver": { "name": "raw-test", "version": "1" } } },
        ),
        return_fields: None,
    };
    c.send(&encq(7, &q)).unwrap();
    let frame = c.recv().unwrap();
    let m = wire::decode(&frame).unwrap();
    assert_eq!(m.header.response_to, 7);
    let Body::Reply(r) = m.body else {
        panic!("expected OP_REPLY")
    };
    let hello = Document::try_from(r.documents[0].as_ref()).unwrap();
    assert!(hello.get_bool("ismaster").unwrap());
    assert_eq!(hello.get_i32("maxWireVersion").unwrap(), 25);

    let find = OpQuery {
        full_collection_name: "test.coll".into(),
        query: raw(&doc! {}),
        ..q
    };
    c.send(&encq(8, &find)).unwrap();
    let m = wire::decode(&c.recv().unwrap()).unwrap();
    let Body::Reply(r) = m.body else {
        panic!("expected OP_REPLY")
    };
    assert_ne!(r.response_flags & 2, 0, "QueryFailure flag");
    let e = Document::try_from(r.documents[0].as_ref()).unwrap();
    assert!(e.get_str("$err").is_ok());
    assert_eq!(e.get_i32("code").unwrap(), 352);
}

#[test]
fn more_to_come_gets_no_reply() {
    let server = Server::start(BIN, &[]);
    let mut c = RawConn::connect(&server.addr());
    let mut fire = msg(doc! { "ping": 1, "$db": "admin" });
    fire.flags |= wire::FLAG_MORE_TO_COME;
    c.send(&enc(1, 0, &fire, None)).unwrap();
    c.send(&enc(2, 0, &msg(doc! { "ping": 1, "$db": "admin" }), None))
        .unwrap();
    let m = wire::decode(&c.recv().unwrap()).unwrap();
    assert_eq!(
        m.header.response_to, 2,
        "the first reply answers the second request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_connections() {
    const N: usize = 1000;
    let server = Server::start(BIN, &[]);
    let addr = server.addr();
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(N + 1));
    let mut tasks = Vec::new();
    for i in 0..N {
        let addr = addr.clone();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
            let ping = enc(
                i as i32 + 1,
                0,
                &msg(doc! { "ping": 1, "$db": "admin" }),
                None,
            );
            s.write_all(&ping).await.unwrap();
            let mut len = [0u8; 4];
            s.read_exact(&mut len).await.unwrap();
            let mut rest = vec![0u8; i32::from_le_bytes(len) as usize - 4];
            s.read_exact(&mut rest).await.unwrap();
            barrier.wait().await; // hold the connection open until counted
            barrier.wait().await;
        }));
    }
    barrier.wait().await;
    let client = server.client().await;
    let st = client
        .database("admin")
        .run_command(doc! { "serverStatus": 1 })
        .await
        .unwrap();
    let conns = st.get_document("connections").unwrap();
    assert!(conns.get_i32("current").unwrap() as usize > N, "{conns}");
    assert!(conns.get_i64("totalCreated").unwrap() as usize > N);
    assert!(conns.get_i32("available").unwrap() > 0);
    barrier.wait().await;
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test]
async fn shutdown_command_and_sigterm_exit_cleanly() {
    let mut server = Server::start(BIN, &[]);
    let client = server.client().await;
    // The server closes the connection instead of replying, so the driver reports an error.
    let _ = client
        .database("admin")
        .run_command(doc! { "shutdown": 1 })
        .await;
    let status = server.wait_exit(Duration::from_secs(30)).expect("exited");
    assert!(status.success(), "{status:?}");
    assert!(server.log_text().contains("cairn stopped cleanly"));

    let mut server = Server::start(BIN, &[]);
    server.signal("TERM");
    let status = server.wait_exit(Duration::from_secs(30)).expect("exited");
    assert!(status.success(), "{status:?}");
}

/// Streaming monitoring, as the Node driver and mongosh use it: an awaitable `hello` with
/// `exhaustAllowed` is answered with `moreToCome` and then more replies arrive unasked.
#[test]
fn streaming_hello_with_exhaust() {
    let server = Server::start(BIN, &[]);
    let mut c = RawConn::connect(&server.addr());
    c.send(&enc(1, 0, &msg(doc! { "hello": 1, "$db": "admin" }), None))
        .unwrap();
    let (first, _) = reply_body(&c.recv().unwrap());
    let tv = first.get_document("topologyVersion").unwrap().clone();
    let mut m =
        msg(doc! { "hello": 1, "topologyVersion": tv, "maxAwaitTimeMS": 100_i64, "$db": "admin" });
    m.flags |= wire::FLAG_EXHAUST_ALLOWED;
    c.send(&enc(2, 0, &m, None)).unwrap();
    let mut last_id = 2;
    for _ in 0..3 {
        let frame = c.recv().unwrap();
        let reply = wire::decode(&frame).unwrap();
        assert_eq!(reply.header.response_to, last_id);
        let Body::Msg(body) = reply.body else {
            panic!("OP_MSG expected")
        };
        assert!(body.more_to_come(), "streamed replies carry moreToCome");
        last_id = reply.header.request_id;
    }
}
