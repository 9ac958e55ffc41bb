//! Proves the commands moved onto argument tables last (mapReduce, the capped conversions, the
//! view options of create/collMod, hello, the SASL commands, get/setParameter, configureFailPoint)
//! answer mongod's codes for a wrong type, an unknown field and a missing field, and expression
//! arguments their operator's own codes, through a real driver. How: a real `cairn` process with test commands on, one table row per case.

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

fn mr(extra: Document) -> Document {
    let mut d = doc! { "mapReduce": "c", "map": "function() { emit(this.a, 1); }",
    "reduce": "function(k, v) { return Array.sum(v); }", "out": { "inline": 1 } };
    d.extend(extra);
    d
}

fn project(e: Document) -> Document {
    doc! { "aggregate": "c", "pipeline": [{ "$project": { "r": e } }], "cursor": {} }
}

fn group(acc: Document) -> Document {
    doc! { "aggregate": "c", "pipeline": [{ "$group": { "_id": null, "r": acc } }], "cursor": {} }
}

fn bin() -> Bson {
    Bson::Binary(bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes: vec![],
    })
}

/// (database, command, the code mongod answers; 0 = accepted).
fn cases() -> Vec<(&'static str, Document, i32)> {
    vec![
        // mapReduce: map_reduce.idl and its custom types.
        ("t", mr(doc! {}), 0),
        ("t", mr(doc! { "map": 1 }), 2),
        ("t", mr(doc! { "finalize": [] }), 2),
        ("t", mr(doc! { "finalize": Bson::Null }), 0),
        ("t", mr(doc! { "out": 1 }), 2),
        ("t", mr(doc! { "out": { "inline": 1, "db": "x" } }), 72),
        (
            "t",
            mr(doc! { "out": { "merge": "o", "db": "admin" } }),
            115,
        ),
        ("t", mr(doc! { "out": { "merge": "o", "extra": 1 } }), 2),
        ("t", mr(doc! { "scope": "x" }), 2),
        ("t", mr(doc! { "query": 1 }), 14),
        ("t", mr(doc! { "verbose": 1 }), 14),
        ("t", mr(doc! { "limit": "x" }), 14),
        ("t", mr(doc! { "limit": 0 }), 15958),
        ("t", mr(doc! { "bogus": 1 }), 40415),
        (
            "t",
            doc! { "mapReduce": "c", "map": "function() {}", "out": "o" },
            40414,
        ),
        // convertToCapped / cloneCollectionAsCapped: hand-parsed, size by safeNumberLong.
        ("t", doc! { "convertToCapped": "c", "size": "x" }, 72),
        ("t", doc! { "convertToCapped": "c", "size": 0 }, 72),
        ("t", doc! { "convertToCapped": "c" }, 72),
        (
            "t",
            doc! { "cloneCollectionAsCapped": "c", "toCollection": 1, "size": 4096 },
            14,
        ),
        (
            "t",
            doc! { "cloneCollectionAsCapped": "c", "size": 4096 },
            14,
        ),
        (
            "t",
            doc! { "cloneCollectionAsCapped": 1, "toCollection": "d", "size": 4096 },
            14,
        ),
        (
            "t",
            doc! { "cloneCollectionAsCapped": "c", "toCollection": "d", "size": -1 },
            72,
        ),
        // Unknown fields are ignored by these hand parsers.
        (
            "t",
            doc! { "cloneCollectionAsCapped": "c", "toCollection": "d", "size": 4096, "x": 1 },
            0,
        ),
        // create/collMod view options.
        ("t", doc! { "create": "v", "pipeline": [] }, 72),
        ("t", doc! { "create": "v", "viewOn": 1 }, 14),
        (
            "t",
            doc! { "create": "v", "viewOn": "c", "pipeline": [1] },
            14,
        ),
        (
            "t",
            doc! { "create": "v", "viewOn": "c", "validator": {} },
            72,
        ),
        ("t", doc! { "collMod": "c", "viewOn": "d" }, 72),
        ("t", doc! { "collMod": "c", "pipeline": [] }, 72),
        ("admin", doc! { "hello": 1, "helloOk": true }, 0),
        // Typed as hello.idl types them; a field it does not know never fails a handshake.
        ("admin", doc! { "hello": 1, "bogus": 1 }, 0),
        ("admin", doc! { "isMaster": 1, "compression": "zstd" }, 14),
        ("admin", doc! { "hello": 1, "maxAwaitTimeMS": -1 }, 51024),
        // SASL.
        (
            "admin",
            doc! { "saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": 1 },
            2,
        ),
        ("admin", doc! { "saslStart": 1, "payload": bin() }, 40414),
        (
            "admin",
            doc! { "saslStart": 1, "mechanism": 1, "payload": bin() },
            14,
        ),
        (
            "admin",
            doc! { "saslContinue": 1, "conversationId": "1", "payload": bin() },
            14,
        ),
        (
            "admin",
            doc! { "saslContinue": 1, "conversationId": 1, "payload": bin(), "x": 1 },
            40415,
        ),
        // Parameters.
        ("admin", doc! { "setParameter": 1 }, 72),
        (
            "admin",
            doc! { "setParameter": 1, "noSuchParameter": 1 },
            72,
        ),
        (
            "admin",
            doc! { "setParameter": 1, "ttlMonitorSleepSecs": "x" },
            2,
        ),
        (
            "admin",
            doc! { "setParameter": 1, "logComponentVerbosity": 3 },
            14,
        ),
        (
            "admin",
            doc! { "setParameter": 1, "ttlMonitorSleepSecs": 5, "logLevel": 0 },
            0,
        ),
        // An unknown name among known ones sets nothing.
        (
            "admin",
            doc! { "setParameter": 1, "ttlMonitorSleepSecs": 9, "nope": 1 },
            72,
        ),
        ("admin", doc! { "getParameter": 1, "nope": 1 }, 72),
        // Expression arguments answer the operator's own code through aggregate.
        ("t", project(doc! { "$arrayElemAt": [1, 0] }), 28689),
        ("t", project(doc! { "$slice": ["$a", 0, 0] }), 28724),
        ("t", project(doc! { "$zip": { "inputs": "x" } }), 34461),
        ("t", project(doc! { "$range": [0, 5, 0] }), 34449),
        ("t", project(doc! { "$split": ["x", ""] }), 40087),
        ("t", project(doc! { "$substrCP": ["x", 0, -1] }), 34454),
        ("t", project(doc! { "$round": [1.5, 101] }), 51083),
        // Named-argument documents: an unknown field, a missing one, a non-constant field.
        (
            "t",
            project(doc! { "$dateToParts": { "date": "$a", "x": 1 } }),
            40520,
        ),
        (
            "t",
            project(doc! { "$dateFromParts": { "month": 1 } }),
            40516,
        ),
        (
            "t",
            project(doc! { "$regexMatch": { "input": "$a" } }),
            31023,
        ),
        ("t", project(doc! { "$trim": { "chars": "x" } }), 50695),
        ("t", project(doc! { "$convert": { "to": "int" } }), 9),
        (
            "t",
            project(doc! { "$sortArray": { "input": [], "sortBy": 2 } }),
            2942506,
        ),
        (
            "t",
            project(doc! { "$setField": { "field": "$a", "input": {}, "value": 1 } }),
            4161108,
        ),
        // Accumulators' argument errors.
        ("t", group(doc! { "$maxN": [1] }), 40237),
        ("t", group(doc! { "$count": { "a": 1 } }), 14),
        (
            "t",
            group(doc! { "$topN": { "n": 1, "sortBy": { "a": 1 } } }),
            5788004,
        ),
        (
            "t",
            project(doc! { "$dateFromParts": { "year": "x" } }),
            40515,
        ),
        // configureFailPoint (FailPoint::parseBSON).
        (
            "admin",
            doc! { "configureFailPoint": "nope", "mode": "off" },
            266,
        ),
        (
            "admin",
            doc! { "configureFailPoint": "blockStorageCall" },
            20,
        ),
        (
            "admin",
            doc! { "configureFailPoint": "blockStorageCall", "mode": 1 },
            14,
        ),
        (
            "admin",
            doc! { "configureFailPoint": "blockStorageCall", "mode": "off", "data": 1 },
            14,
        ),
        (
            "admin",
            doc! { "configureFailPoint": "blockStorageCall", "mode": "off", "x": 1 },
            0,
        ),
    ]
}

#[tokio::test]
async fn commands_check_arguments_as_mongod() {
    let server = Server::start(BIN, &["--setParameter", "enableTestCommands=1"]);
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
    // The refused setParameter changed nothing; the accepted one set both names.
    let got = client
        .database("admin")
        .run_command(doc! { "getParameter": 1, "ttlMonitorSleepSecs": 1 })
        .await
        .unwrap();
    let n = match got.get("ttlMonitorSleepSecs") {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        other => panic!("ttlMonitorSleepSecs: {other:?}"),
    };
    assert_eq!(n, 5);
}
