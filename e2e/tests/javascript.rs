//! Proves server-side JavaScript with the official Rust driver against a real `cairn` process:
//! `$where` (string and function forms) and `$function` return the same documents as the
//! equivalent `$expr`, BSON values reach the script and come back typed, script errors are 139,
//! the sandbox has no `require` or I/O, an endless loop is stopped by `maxTimeMS` (50) and an
//! allocation bomb by the heap limit (139) with the server still serving, and `--noscripting`
//! gives 16395 / 31264.

use bson::{Document, doc, oid::ObjectId};
use cairn_e2e::{Server, error_code};
use futures_util::TryStreamExt;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

async fn ids(c: &mongodb::Collection<Document>, filter: Document) -> Vec<i32> {
    let docs: Vec<Document> = c
        .find(filter)
        .sort(doc! {"_id": 1})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    docs.iter().map(|d| d.get_i32("_id").unwrap()).collect()
}

#[tokio::test]
async fn where_and_function_match_expr() {
    let server = Server::start(BIN, &[]);
    let db = server.client().await.database("t");
    let c = db.collection::<Document>("c");
    let docs: Vec<Document> = (0..50)
        .map(|i| doc! {"_id": i, "a": i % 7, "b": i % 3})
        .collect();
    c.insert_many(docs).await.unwrap();
    let by_expr = ids(&c, doc! {"$expr": {"$gt": ["$a", "$b"]}}).await;
    assert!(!by_expr.is_empty());
    assert_eq!(ids(&c, doc! {"$where": "this.a > this.b"}).await, by_expr);
    assert_eq!(
        ids(&c, doc! {"$where": "function() { return obj.a > obj.b; }"}).await,
        by_expr
    );
    let f = doc! {"$expr": {"$function": {
    "body": "function(a, b) { return a > b; }", "args": ["$a", "$b"], "lang": "js"}}};
    assert_eq!(ids(&c, f).await, by_expr);

    // Typed values in and out of a $function.
    let oid = ObjectId::new();
    db.collection::<Document>("v")
        .insert_one(doc! {"_id": 1, "o": oid, "d": bson::DateTime::from_millis(86_400_000)})
        .await
        .unwrap();
    let out: Vec<Document> = db
        .collection::<Document>("v")
        .aggregate(vec![doc! {"$project": {"_id": 0,
            "hex": {"$function": {"body": "function(o) { return o.str; }", "args": ["$o"], "lang": "js"}},
            "same": {"$function": {"body": "function(o) { return o; }", "args": ["$o"], "lang": "js"}},
            "day": {"$function": {"body": "function(d) { return d.getUTCDate(); }", "args": ["$d"], "lang": "js"}},
            "later": {"$function": {"body": "function(d) { return new Date(d.getTime() + 1); }", "args": ["$d"], "lang": "js"}},
        }}])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        out[0],
        doc! {"hex": oid.to_hex(), "same": oid, "day": 2, "later": bson::DateTime::from_millis(86_400_001)}
    );
}

#[tokio::test]
async fn errors_and_sandbox() {
    let server = Server::start(BIN, &[]);
    let db = server.client().await.database("t");
    let c = db.collection::<Document>("c");
    c.insert_one(doc! {"_id": 1}).await.unwrap();
    let run = |filter: Document, max: Option<i64>| {
        let mut cmd = doc! {"find": "c", "filter": filter};
        if let Some(m) = max {
            cmd.insert("maxTimeMS", m);
        }
        db.run_command(cmd)
    };
    let e = run(doc! {"$where": "throw new Error('nope')"}, None)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 139);
    for probe in [
        "require('fs')",
        "process.exit(1)",
        "std.open('/etc/passwd')",
        "fetch('http://x')",
    ] {
        let e = run(doc! {"$where": probe}, None).await.unwrap_err();
        assert_eq!(error_code(&e), 139, "{probe}");
    }
    let e = run(doc! {"$where": "function() { while (true) {} }"}, Some(200))
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 50);
    let bomb = "var a = []; for (;;) a.push(new Array(1e6).fill(7)); return true";
    let e = run(doc! {"$where": format!("function() {{ {bomb} }}")}, None)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 139);
    // Still serving, scripts included.
    assert_eq!(ids(&c, doc! {"$where": "this._id == 1"}).await, vec![1]);
}

#[tokio::test]
async fn noscripting_refuses_scripts() {
    let server = Server::start(BIN, &["--noscripting"]);
    let db = server.client().await.database("t");
    db.collection::<Document>("c")
        .insert_one(doc! {"_id": 1})
        .await
        .unwrap();
    let e = db
        .run_command(doc! {"find": "c", "filter": {"$where": "true"}})
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 16395);
    let f = doc! {"$expr": {"$function": {"body": "function() { return true; }", "args": [], "lang": "js"}}};
    let e = db
        .run_command(doc! {"find": "c", "filter": f})
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 31264);
}
