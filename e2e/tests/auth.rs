//! Proves authentication and authorization against a real `cairn --auth` process: the localhost
//! exception, SCRAM-SHA-256 (speculative, as drivers do by default) and SCRAM-SHA-1 logins,
//! mongod's error codes and messages (18, 13), built-in and user-defined roles, privileges that
//! follow grants and drops on live connections, users and roles surviving a restart and SIGKILL,
//! passwords kept out of the log, slow-query lines and currentOp, and the limits on
//! unauthenticated connections. How: the official Rust driver, plus a raw SCRAM client
//! (`cairn_e2e::auth`) where the exact server reply matters.

use bson::{Bson, Document, doc};
use cairn_e2e::auth::{Login, Mech, command, login, reply_code};
use cairn_e2e::{RawConn, Server, error_code, error_message};
use futures_util::TryStreamExt;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");
const ROOT_PW: &str = "root-pw-Xy7";

fn uri(s: &Server, user: &str, pwd: &str, extra: &str) -> String {
    format!(
        "mongodb://{user}:{pwd}@127.0.0.1:{}/?directConnection=true&authSource=admin&serverSelectionTimeoutMS=5000{extra}",
        s.port
    )
}

async fn client(s: &Server, user: &str, pwd: &str, extra: &str) -> mongodb::Client {
    mongodb::Client::with_uri_str(uri(s, user, pwd, extra))
        .await
        .expect("client")
}

/// A server under `--auth` with a root user made through the localhost exception.
async fn auth_server(extra: &[&str]) -> (Server, mongodb::Client) {
    let mut args = vec!["--auth"];
    args.extend_from_slice(extra);
    let s = Server::start(BIN, &args);
    let open = s.client().await;
    open.database("admin")
        .run_command(doc! { "createUser": "root", "pwd": ROOT_PW, "roles": ["root"] })
        .await
        .expect("first user through the localhost exception");
    let root = client(&s, "root", ROOT_PW, "").await;
    (s, root)
}

async fn create_user(root: &mongodb::Client, db: &str, user: &str, roles: Bson) {
    root.database(db)
        .run_command(doc! { "createUser": user, "pwd": format!("{user}-pw"), "roles": roles })
        .await
        .unwrap_or_else(|e| panic!("createUser {user}: {e}"));
}

async fn as_user(s: &Server, db: &str, user: &str) -> mongodb::Client {
    mongodb::Client::with_uri_str(format!(
        "mongodb://{user}:{user}-pw@127.0.0.1:{}/?directConnection=true&authSource={db}&serverSelectionTimeoutMS=5000",
        s.port
    ))
    .await
    .expect("client")
}

async fn find_err(c: &mongodb::Client, db: &str, coll: &str) -> Option<(i32, String)> {
    match c
        .database(db)
        .collection::<Document>(coll)
        .find_one(doc! {})
        .await
    {
        Ok(_) => None,
        Err(e) => Some((error_code(&e), error_message(&e))),
    }
}

async fn insert_err(c: &mongodb::Client, db: &str, coll: &str) -> Option<(i32, String)> {
    match c
        .database(db)
        .collection::<Document>(coll)
        .insert_one(doc! { "x": 1 })
        .await
    {
        Ok(_) => None,
        Err(e) => Some((error_code(&e), error_message(&e))),
    }
}

#[tokio::test]
async fn localhost_exception_then_scram_logins() {
    let (s, root) = auth_server(&[]).await;
    let open = s.client().await;
    let admin = open.database("admin");
    assert_eq!(
        admin
            .run_command(doc! { "ping": 1 })
            .await
            .unwrap()
            .get_f64("ok")
            .unwrap(),
        1.0
    );
    // The exception closed with the first user.
    let e = admin
        .run_command(doc! { "createUser": "second", "pwd": "x", "roles": [] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 13);
    assert_eq!(
        error_message(&e),
        "command createUser requires authentication"
    );
    let (code, msg) = find_err(&open, "app", "c").await.unwrap();
    assert_eq!(
        (code, msg.as_str()),
        (13, "command find requires authentication")
    );

    // SCRAM-SHA-256 by default, negotiated through saslSupportedMechs and done speculatively.
    let c = root.database("app").collection::<Document>("c");
    c.insert_one(doc! { "_id": 1 }).await.unwrap();
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 1);
    assert!(
        s.log_shows(r#""speculative":true"#, std::time::Duration::from_secs(10)),
        "no speculative login in the log"
    );
    for mech in ["SCRAM-SHA-1", "SCRAM-SHA-256"] {
        let c = client(&s, "root", ROOT_PW, &format!("&authMechanism={mech}")).await;
        c.database("admin")
            .run_command(doc! { "ping": 1 })
            .await
            .unwrap();
        let n = c
            .database("app")
            .collection::<Document>("c")
            .count_documents(doc! {})
            .await;
        assert_eq!(n.unwrap(), 1, "{mech}");
    }
    let hello = admin
        .run_command(doc! { "hello": 1, "saslSupportedMechs": "admin.root" })
        .await
        .unwrap();
    let mechs: Vec<&str> = hello
        .get_array("saslSupportedMechs")
        .unwrap()
        .iter()
        .filter_map(Bson::as_str)
        .collect();
    assert_eq!(mechs, ["SCRAM-SHA-1", "SCRAM-SHA-256"]);
    let hello = admin
        .run_command(doc! { "hello": 1, "saslSupportedMechs": "admin.nobody" })
        .await
        .unwrap();
    assert!(!hello.contains_key("saslSupportedMechs"));

    // A wrong password fails the driver's login.
    let bad = client(&s, "root", "wrong", "").await;
    let e = bad
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("Authentication failed"), "{e}");

    // Raw: the exact reply, after the constant delay, for a wrong proof and for a missing user.
    for (user, wrong_proof, speculative, mech) in [
        ("root", true, false, Mech::Sha256),
        ("root", true, true, Mech::Sha1),
        ("nobody", false, false, Mech::Sha256),
    ] {
        let mut raw = RawConn::connect(&s.addr());
        let started = Instant::now();
        let l = Login {
            user,
            password: ROOT_PW,
            db: "admin",
            mech,
            speculative,
            wrong_proof,
            salted: None,
        };
        let reply = login(&mut raw.stream, &l).unwrap().unwrap_err();
        assert!(
            started.elapsed() >= Duration::from_millis(100),
            "no delay: {:?}",
            started.elapsed()
        );
        assert_eq!(reply_code(&reply), 18, "{reply}");
        assert_eq!(reply.get_str("codeName").unwrap(), "AuthenticationFailed");
        assert_eq!(reply.get_str("errmsg").unwrap(), "Authentication failed.");
    }
    let mut raw = RawConn::connect(&s.addr());
    for mech in [Mech::Sha1, Mech::Sha256] {
        let l = Login {
            user: "root",
            password: ROOT_PW,
            db: "admin",
            mech,
            speculative: false,
            wrong_proof: false,
            salted: None,
        };
        login(&mut raw.stream, &l).unwrap().expect("raw login");
    }
    let status = command(
        &mut raw.stream,
        &doc! { "connectionStatus": 1, "$db": "admin" },
    )
    .unwrap();
    let info = status.get_document("authInfo").unwrap();
    assert_eq!(
        info.get_array("authenticatedUsers").unwrap(),
        &vec![Bson::Document(doc! { "user": "root", "db": "admin" })]
    );
    assert!(
        info.get_array("authenticatedUserRoles")
            .unwrap()
            .contains(&Bson::Document(doc! { "role": "root", "db": "admin" }))
    );
    let r = command(&mut raw.stream, &doc! { "saslContinue": 1, "conversationId": 1, "payload": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![] }, "$db": "admin" }).unwrap();
    assert_eq!(reply_code(&r), 17, "{r}");

    // The stored user has mongod's shape: salted, iterated keys and never the password.
    let stored = root
        .database("admin")
        .collection::<Document>("system.users")
        .find_one(doc! { "_id": "admin.root" })
        .await
        .unwrap()
        .expect("admin.root");
    let keys: Vec<&str> = stored.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["_id", "userId", "user", "db", "credentials", "roles"]
    );
    assert!(
        matches!(stored.get("userId"), Some(Bson::Binary(b)) if b.subtype == bson::spec::BinarySubtype::Uuid)
    );
    let creds = stored.get_document("credentials").unwrap();
    let sha256 = creds.get_document("SCRAM-SHA-256").unwrap();
    assert_eq!(sha256.get_i32("iterationCount").unwrap(), 15000);
    assert_eq!(sha256.get_str("salt").unwrap().len(), 40);
    let sha1 = creds.get_document("SCRAM-SHA-1").unwrap();
    assert_eq!(sha1.get_i32("iterationCount").unwrap(), 10000);
    assert_eq!(sha1.get_str("salt").unwrap().len(), 24);
    assert_eq!(
        stored.get_array("roles").unwrap(),
        &vec![Bson::Document(doc! { "role": "root", "db": "admin" })]
    );
    let text = format!("{stored}");
    assert!(!text.contains(ROOT_PW));
    assert!(
        !s.log_text().contains(ROOT_PW),
        "the password reached the log"
    );
}

#[tokio::test]
async fn roles_decide_what_users_may_do() {
    let (s, root) = auth_server(&[]).await;
    root.database("a")
        .collection::<Document>("c")
        .insert_one(doc! { "_id": 1 })
        .await
        .unwrap();
    root.database("b")
        .collection::<Document>("c")
        .insert_one(doc! { "_id": 1 })
        .await
        .unwrap();
    create_user(&root, "a", "reader", bson::bson!(["read"])).await;
    create_user(&root, "a", "writer", bson::bson!(["readWrite"])).await;
    create_user(&root, "a", "useradmin", bson::bson!(["userAdmin"])).await;
    root.database("a")
        .run_command(doc! {
            "createRole": "findC",
            "privileges": [{ "resource": { "db": "a", "collection": "c" }, "actions": ["find"] }],
            "roles": [],
        })
        .await
        .unwrap();
    create_user(&root, "a", "custom", bson::bson!(["findC"])).await;

    let reader = as_user(&s, "a", "reader").await;
    assert!(find_err(&reader, "a", "c").await.is_none());
    let (code, msg) = insert_err(&reader, "a", "c").await.unwrap();
    assert_eq!(code, 13);
    assert!(
        msg.starts_with("not authorized on a to execute command { insert: \"c\""),
        "{msg}"
    );

    let writer = as_user(&s, "a", "writer").await;
    assert!(insert_err(&writer, "a", "c").await.is_none());
    assert_eq!(find_err(&writer, "b", "c").await.unwrap().0, 13);
    let names = writer.list_database_names().await.unwrap();
    assert_eq!(names, ["a"], "a readWrite user lists only its database");

    let useradmin = as_user(&s, "a", "useradmin").await;
    useradmin
        .database("a")
        .run_command(doc! { "createUser": "made", "pwd": "made-pw", "roles": ["read"] })
        .await
        .expect("userAdmin creates users");
    assert_eq!(find_err(&useradmin, "a", "c").await.unwrap().0, 13);
    let made = as_user(&s, "a", "made").await;
    assert!(find_err(&made, "a", "c").await.is_none());

    let custom = as_user(&s, "a", "custom").await;
    assert!(find_err(&custom, "a", "c").await.is_none());
    assert_eq!(find_err(&custom, "a", "d").await.unwrap().0, 13);
    assert_eq!(insert_err(&custom, "a", "c").await.unwrap().0, 13);

    // A grant reaches connections that are already logged in.
    root.database("a")
        .run_command(doc! { "grantRolesToUser": "reader", "roles": ["readWrite"] })
        .await
        .unwrap();
    assert!(insert_err(&reader, "a", "c").await.is_none());
    root.database("a")
        .run_command(doc! { "grantPrivilegesToRole": "findC", "privileges": [{ "resource": { "db": "a", "collection": "d" }, "actions": ["find"] }] })
        .await
        .unwrap();
    assert!(find_err(&custom, "a", "d").await.is_none());
    // So does a drop.
    root.database("a")
        .run_command(doc! { "dropUser": "writer" })
        .await
        .unwrap();
    let (code, _) = find_err(&writer, "a", "c").await.unwrap();
    assert_eq!(code, 13);

    // usersInfo and rolesInfo in mongod's shapes; a user may always read about themselves.
    let info = root
        .database("a")
        .run_command(doc! { "usersInfo": "reader", "showPrivileges": true })
        .await
        .unwrap();
    let u = info.get_array("users").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(u.get_str("_id").unwrap(), "a.reader");
    assert_eq!(u.get_array("mechanisms").unwrap().len(), 2);
    assert!(!u.contains_key("credentials"));
    assert!(u.get_array("inheritedPrivileges").is_ok());
    let own = custom
        .database("a")
        .run_command(doc! { "usersInfo": "custom" })
        .await
        .unwrap();
    assert_eq!(own.get_array("users").unwrap().len(), 1);
    let roles = root
        .database("a")
        .run_command(doc! { "rolesInfo": "findC", "showPrivileges": true })
        .await
        .unwrap();
    let r = roles.get_array("roles").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert!(!r.get_bool("isBuiltin").unwrap());
    assert_eq!(r.get_array("privileges").unwrap().len(), 2);
    let e = root
        .database("a")
        .run_command(doc! { "createUser": "reader", "pwd": "x", "roles": [] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 51003);
    let e = root
        .database("a")
        .run_command(doc! { "createUser": "z", "pwd": "x", "roles": ["noSuchRole"] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 31);
    let e = root
        .database("a")
        .run_command(doc! { "grantRolesToRole": "findC", "roles": ["findC"] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 178);
}

#[tokio::test]
async fn users_and_roles_survive_restart_and_sigkill() {
    let (mut s, root) = auth_server(&[]).await;
    root.database("a")
        .run_command(doc! {
            "createRole": "onlyC",
            "privileges": [{ "resource": { "db": "a", "collection": "c" }, "actions": ["find", "insert"] }],
            "roles": [],
        })
        .await
        .unwrap();
    create_user(&root, "a", "kept", bson::bson!(["onlyC"])).await;
    drop(root);

    // A clean shutdown (SIGTERM) and start.
    s.signal("TERM");
    let status = s
        .wait_exit(Duration::from_secs(30))
        .expect("cairn exits on SIGTERM");
    assert!(status.success(), "{status:?}");
    s.restart_after_kill();
    let kept = as_user(&s, "a", "kept").await;
    assert!(insert_err(&kept, "a", "c").await.is_none());
    assert_eq!(insert_err(&kept, "a", "other").await.unwrap().0, 13);
    // A change made after the restart, then SIGKILL.
    let root = client(&s, "root", ROOT_PW, "").await;
    root.database("a")
        .run_command(doc! { "grantPrivilegesToRole": "onlyC", "privileges": [{ "resource": { "db": "a", "collection": "other" }, "actions": ["insert"] }] })
        .await
        .unwrap();
    drop((root, kept));

    s.restart_after_kill();
    let kept = as_user(&s, "a", "kept").await;
    assert!(insert_err(&kept, "a", "c").await.is_none());
    assert!(insert_err(&kept, "a", "other").await.is_none());
    assert_eq!(insert_err(&kept, "a", "third").await.unwrap().0, 13);
    let root = client(&s, "root", ROOT_PW, "").await;
    let users: Vec<Document> = root
        .database("admin")
        .collection::<Document>("system.users")
        .find(doc! {})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(users.len(), 2);
    // The localhost exception stays closed after a restart: users exist.
    let open = s.client().await;
    let e = open
        .database("admin")
        .run_command(doc! { "createUser": "late", "pwd": "x", "roles": ["root"] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 13);
}

#[test]
fn limits_on_unauthenticated_connections() {
    let s = Server::start(
        BIN,
        &[
            "--auth",
            "--setParameter",
            "maxUnauthenticatedConnections=3",
            "--setParameter",
            // Long enough that a loaded machine serves each request in time, short for the test.
            "unauthenticatedIdleTimeoutMS=2000",
        ],
    );
    let ping = doc! { "ping": 1, "$db": "admin" };
    let mut first = RawConn::connect(&s.addr());
    command(
        &mut first.stream,
        &doc! { "createUser": "u", "pwd": "u-pw", "roles": ["root"], "$db": "admin" },
    )
    .unwrap();
    let mut conns: Vec<RawConn> = (0..2).map(|_| RawConn::connect(&s.addr())).collect();
    for c in &mut conns {
        assert_eq!(reply_code(&command(&mut c.stream, &ping).unwrap()), 0);
    }
    let mut over = RawConn::connect(&s.addr());
    assert!(
        over.closed_by_server(),
        "a fourth unauthenticated connection was served"
    );
    // Logging in frees a place.
    let l = Login {
        user: "u",
        password: "u-pw",
        db: "admin",
        mech: Mech::Sha256,
        speculative: true,
        wrong_proof: false,
        salted: None,
    };
    login(&mut first.stream, &l).unwrap().expect("login");
    let mut fourth = RawConn::connect(&s.addr());
    let r = command(&mut fourth.stream, &ping).expect("a place after the login");
    assert_eq!(reply_code(&r), 0);
    // Idle unauthenticated connections are closed; the authenticated one stays.
    let started = Instant::now();
    assert!(fourth.closed_by_server());
    assert!(started.elapsed() < Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(reply_code(&command(&mut first.stream, &ping).unwrap()), 0);
    // A SASL payload over the bound fails like any other bad login.
    let mut big = RawConn::connect(&s.addr());
    let payload = bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes: vec![b'x'; 9000],
    };
    let r = command(
        &mut big.stream,
        &doc! { "saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": payload, "$db": "admin" },
    )
    .unwrap();
    assert_eq!(reply_code(&r), 18);
    let r = command(&mut big.stream, &doc! { "saslStart": 1, "mechanism": "PLAIN", "payload": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![] }, "$db": "admin" }).unwrap();
    assert_eq!(reply_code(&r), 334);
}

#[tokio::test]
async fn without_auth_logins_still_work() {
    let s = Server::start(BIN, &[]);
    let open = s.client().await;
    open.database("admin")
        .run_command(doc! { "createUser": "u", "pwd": "u-pw", "roles": ["read"] })
        .await
        .unwrap();
    let u = client(&s, "u", "u-pw", "").await;
    // Without --auth nothing is checked: a read-only user may write.
    u.database("x")
        .collection::<Document>("c")
        .insert_one(doc! { "a": 1 })
        .await
        .unwrap();
    let list = open
        .database("admin")
        .run_command(doc! { "listCommands": 1 })
        .await
        .unwrap();
    let cmds = list.get_document("commands").unwrap();
    assert!(
        !cmds
            .get_document("ping")
            .unwrap()
            .get_bool("requiresAuth")
            .unwrap()
    );
    assert!(
        cmds.get_document("find")
            .unwrap()
            .get_bool("requiresAuth")
            .unwrap()
    );
}

/// Passwords never reach the log: every command is a slow query here (`--slowms -1`), users
/// are created and changed with distinctive passwords, one of them logs in, and a denied
/// `createUser` echoes its command with the password replaced by "xxx".
#[tokio::test]
async fn passwords_are_redacted() {
    const SECRETS: [&str; 3] = [
        "Crocus-1st-Secret",
        "Crocus-2nd-Secret",
        "Crocus-3rd-Secret",
    ];
    let (s, root) = auth_server(&["--slowms=-1"]).await;
    let a = root.database("a");
    a.run_command(doc! { "createUser": "u", "pwd": SECRETS[0], "roles": ["read"] })
        .await
        .unwrap();
    a.run_command(doc! { "updateUser": "u", "pwd": SECRETS[1] })
        .await
        .unwrap();
    let u = mongodb::Client::with_uri_str(format!(
        "mongodb://u:{}@127.0.0.1:{}/?directConnection=true&authSource=a&serverSelectionTimeoutMS=5000",
        SECRETS[1], s.port
    ))
    .await
    .unwrap();
    let e = u
        .database("a")
        .run_command(doc! { "createUser": "v", "pwd": SECRETS[2], "roles": [] })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 13);
    let msg = error_message(&e);
    assert!(msg.contains(r#"pwd: "xxx""#), "{msg}");
    assert!(!msg.contains(SECRETS[2]), "{msg}");

    // currentOp (what it shows now, and while the users commands ran) carries no secret.
    let ops = root
        .database("admin")
        .run_command(doc! { "currentOp": 1 })
        .await
        .unwrap();
    let ops = format!("{ops:?}");
    // The slow-query lines were written, for createUser and updateUser among others.
    let log = s.log_text();
    for command in ["createUser", "updateUser"] {
        assert!(
            log.lines()
                .any(|l| l.contains("Slow query")
                    && l.contains(&format!(r#""command":"{command}""#))),
            "no slow-query line for {command}:\n{log}"
        );
    }
    for secret in SECRETS {
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
        assert!(!ops.contains(secret), "{secret} in currentOp: {ops}");
    }
    let stored = format!(
        "{:?}",
        root.database("admin")
            .collection::<Document>("system.users")
            .find_one(doc! { "_id": "a.u" })
            .await
            .unwrap()
            .unwrap()
    );
    assert!(stored.contains("SCRAM-SHA-256"), "{stored}");
    for secret in SECRETS {
        assert!(!stored.contains(secret), "{secret} stored: {stored}");
    }
}
