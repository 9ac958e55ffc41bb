//! Proves the admin and diagnostic commands check their arguments as mongod's IDL parsers do:
//! a wrongly typed field answers 14, an unknown field 40415 where mongod is strict and nothing
//! where it is not, a missing required field 40414, a value under its bound 51024. How: a real
//! `cairn` process, one table row per command and case, each sent with the driver's runCommand.

use bson::{Document, doc};
use cairn_e2e::{Server, error_code};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

/// (database, command, the code mongod answers; 0 = accepted).
fn cases() -> Vec<(&'static str, Document, i32)> {
    vec![
        // Wrong types.
        ("admin", doc! { "fsync": 1, "lock": "yes" }, 14),
        (
            "admin",
            doc! { "fsync": 1, "fsyncLockAcquisitionTimeoutMillis": 1.5 },
            14,
        ),
        ("t", doc! { "compact": "c", "force": 1 }, 14),
        ("t", doc! { "compact": "c", "dryRun": "x" }, 14),
        ("t", doc! { "profile": "x" }, 14),
        ("t", doc! { "profile": -1, "slowms": "x" }, 14),
        ("t", doc! { "profile": -1, "sampleRate": 1 }, 14),
        (
            "admin",
            doc! { "lockInfo": 1, "includeStorageEngineDump": 1 },
            14,
        ),
        (
            "t",
            doc! { "connectionStatus": 1, "showPrivileges": "x" },
            14,
        ),
        ("admin", doc! { "getClusterParameter": 1 }, 14),
        ("admin", doc! { "getClusterParameter": ["a", 1] }, 14),
        ("admin", doc! { "setClusterParameter": "x" }, 14),
        ("admin", doc! { "endSessions": 1 }, 14),
        ("admin", doc! { "endSessions": [1] }, 14),
        ("admin", doc! { "refreshSessions": [{ "id": "x" }] }, 14),
        ("admin", doc! { "killSessions": [{ "id": 1 }] }, 14),
        ("admin", doc! { "killAllSessions": [{ "user": 1 }] }, 14),
        (
            "admin",
            doc! { "killAllSessionsByPattern": [{ "users": [1] }] },
            14,
        ),
        ("t", doc! { "dataSize": 1 }, 14),
        ("t", doc! { "dataSize": "t.c", "min": 1 }, 14),
        ("t", doc! { "dbStats": 1, "scale": "x" }, 14),
        ("t", doc! { "collStats": "c", "verbose": "x" }, 14),
        ("t", doc! { "validate": "c", "full": "x" }, 14),
        ("admin", doc! { "killOp": 1, "op": "x" }, 14),
        ("admin", doc! { "getLog": 1 }, 14),
        (
            "t",
            doc! { "validateDBMetadata": 1, "apiParameters": { "version": 1 } },
            14,
        ),
        // User and role management (`user_management_commands.idl`).
        ("t", doc! { "createUser": 1, "pwd": "p", "roles": [] }, 14),
        ("t", doc! { "createUser": "u", "pwd": 1, "roles": [] }, 14),
        (
            "t",
            doc! { "createUser": "u", "pwd": "p", "roles": [], "mechanisms": [1] },
            14,
        ),
        ("t", doc! { "createUser": "u", "pwd": "p" }, 40414),
        (
            "t",
            doc! { "createUser": "u", "pwd": "p", "roles": [], "x": 1 },
            40415,
        ),
        ("t", doc! { "dropUser": 1 }, 14),
        ("t", doc! { "usersInfo": 1, "showCredentials": "x" }, 14),
        (
            "t",
            doc! { "createRole": "r", "privileges": [1], "roles": [] },
            14,
        ),
        ("t", doc! { "createRole": "r", "roles": [] }, 40414),
        ("t", doc! { "grantRolesToRole": "r" }, 40414),
        ("t", doc! { "rolesInfo": 1, "x": 1 }, 40415),
        // Unknown fields: refused where mongod is strict.
        ("admin", doc! { "fsync": 1, "async": true }, 40415),
        ("t", doc! { "compact": "c", "paddingFactor": 1 }, 40415),
        ("t", doc! { "connectionStatus": 1, "x": 1 }, 40415),
        ("admin", doc! { "lockInfo": 1, "x": 1 }, 40415),
        ("admin", doc! { "endSessions": [], "x": 1 }, 40415),
        (
            "admin",
            doc! { "killSessions": [{ "id": uuid(), "x": 1 }] },
            40415,
        ),
        ("t", doc! { "dbStats": 1, "x": 1 }, 40415),
        ("t", doc! { "planCacheListFilters": "c", "x": 1 }, 40415),
        ("admin", doc! { "shutdown": 1, "x": 1 }, 40415),
        // getParameter/setParameter read their other fields as parameter names, never the
        // generic ones.
        (
            "admin",
            doc! { "getParameter": 1, "maxTimeMS": 1000, "logLevel": 1 },
            0,
        ),
        (
            "admin",
            doc! { "setParameter": 1, "maxTimeMS": 1000, "logLevel": 0 },
            0,
        ),
        // ... and ignored where it is not.
        ("t", doc! { "profile": -1, "x": 1 }, 0),
        ("admin", doc! { "getClusterParameter": "*", "x": 1 }, 0),
        ("admin", doc! { "serverStatus": 1, "repl": 0 }, 0),
        ("admin", doc! { "hostInfo": 1, "x": 1 }, 0),
        ("admin", doc! { "ping": 1, "x": 1 }, 0),
        ("admin", doc! { "killOp": 1, "op": 123_456, "x": 1 }, 0),
        ("admin", doc! { "endSessions": [{ "id": uuid() }] }, 0),
        // Missing required fields and bounds.
        ("admin", doc! { "killSessions": [{}] }, 40414),
        ("t", doc! { "validateDBMetadata": 1 }, 40414),
        (
            "t",
            doc! { "validateDBMetadata": 1, "apiParameters": { "strict": true } },
            40414,
        ),
        ("t", doc! { "compact": "c", "freeSpaceTargetMB": 0 }, 51024),
        // autoCompact (8.0): a bool, its two options typed, nothing else.
        ("admin", doc! { "autoCompact": true }, 0),
        (
            "admin",
            doc! { "autoCompact": false, "freeSpaceTargetMB": 20 },
            0,
        ),
        ("admin", doc! { "autoCompact": true, "runOnce": true }, 0),
        ("admin", doc! { "autoCompact": 1 }, 14),
        ("admin", doc! { "autoCompact": true, "runOnce": 1 }, 14),
        (
            "admin",
            doc! { "autoCompact": true, "freeSpaceTargetMB": 0 },
            51024,
        ),
        ("admin", doc! { "autoCompact": true, "x": 1 }, 40415),
        ("t", doc! { "autoCompact": true }, 13),
        // $listLocalSessions' spec (ListSessionsSpec).
        ("admin", local_sessions(doc! { "allUsers": true }), 0),
        (
            "admin",
            local_sessions(doc! { "users": [{ "user": "u", "db": "d" }] }),
            0,
        ),
        ("admin", local_sessions(doc! { "allUsers": 1 }), 14),
        ("admin", local_sessions(doc! { "users": [1] }), 14),
        (
            "admin",
            local_sessions(doc! { "users": [{ "user": "u" }] }),
            40414,
        ),
        ("admin", local_sessions(doc! { "bogus": 1 }), 40415),
        // The $currentOp stage's options: booleans only, none unknown (FailedToParse).
        (
            "admin",
            current_op_stage(
                doc! { "allUsers": true, "idleConnections": false, "idleSessions": false, "localOps": true, "truncateOps": false, "idleCursors": false, "backtrace": false },
            ),
            0,
        ),
        ("admin", current_op_stage(doc! { "allUsers": 1 }), 9),
        ("admin", current_op_stage(doc! { "idleSessions": "x" }), 9),
        ("admin", current_op_stage(doc! { "bogus": true }), 9),
        (
            "admin",
            doc! { "aggregate": 1, "pipeline": [{ "$currentOp": 1 }], "cursor": {} },
            9,
        ),
        ("t", current_op_stage(doc! {}), 73),
    ]
}

fn local_sessions(spec: Document) -> Document {
    doc! { "aggregate": 1, "pipeline": [{ "$listLocalSessions": spec }], "cursor": {} }
}

fn current_op_stage(options: Document) -> Document {
    doc! { "aggregate": 1, "pipeline": [{ "$currentOp": options }], "cursor": {} }
}

fn uuid() -> bson::Binary {
    bson::Binary {
        subtype: bson::spec::BinarySubtype::Uuid,
        bytes: vec![7; 16],
    }
}

#[tokio::test]
async fn admin_commands_check_arguments_as_mongod() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    client
        .database("t")
        .collection::<Document>("c")
        .insert_one(doc! { "a": 1 })
        .await
        .unwrap();
    for (db, command, want) in cases() {
        let got = match client.database(db).run_command(command.clone()).await {
            Ok(_) => 0,
            Err(e) => error_code(&e),
        };
        assert_eq!(got, want, "{db}: {command}");
    }
}

/// `currentOp`'s other fields filter the operations listed (mongod's `$match` after
/// `$currentOp`); `$all`, `$ownOps` and the generic arguments are not filters.
#[tokio::test]
async fn current_op_filters_the_operations() {
    let server = Server::start(BIN, &[]);
    let admin = server.client().await.database("admin");
    let count = |r: Document| r.get_array("inprog").unwrap().len();
    let own = doc! { "currentOp": 1, "$all": true, "command.currentOp": { "$exists": true } };
    assert!(count(admin.run_command(own).await.unwrap()) >= 1);
    let none = doc! { "currentOp": 1, "$ownOps": false, "ns": "no.such", "comment": "c" };
    assert_eq!(count(admin.run_command(none).await.unwrap()), 0);
    let bad = doc! { "currentOp": 1, "active": { "$frob": 1 } };
    let e = admin.run_command(bad).await.unwrap_err();
    assert_eq!(error_code(&e), 2);
}
