//! Proves cairn-tools' import/export and dump/restore against a real server: every BSON type
//! survives export -> import and dump -> restore byte for byte, indexes and options come back,
//! a hand-built mongodump directory restores, and bad input is reported with its position.
//! How: real `cairn` processes on ephemeral ports; the tools run in-process from their command
//! lines (the same clap parsing as the binary); results read back with the Rust driver.

use std::path::Path;

use bson::{Bson, Document, RawDocumentBuf, doc};
use cairn_e2e::Server;
use cairn_tools::{Report, run_args, testdata::every_type};
use futures_util::TryStreamExt;

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

async fn tool(args: &[&str]) -> Report {
    match run_args(args).await {
        Ok(r) => r,
        Err(e) => panic!("{args:?}: {e:#}"),
    }
}

/// The collection's documents as raw bytes, in _id order.
async fn raw_docs(client: &mongodb::Client, db: &str, coll: &str) -> Vec<Vec<u8>> {
    client
        .database(db)
        .collection::<RawDocumentBuf>(coll)
        .find(doc! {})
        .sort(doc! { "_id": 1 })
        .await
        .expect("find")
        .try_collect::<Vec<_>>()
        .await
        .expect("collect")
        .into_iter()
        .map(RawDocumentBuf::into_bytes)
        .collect()
}

/// Three documents carrying every type: top level, nested in a subdocument, inside an array.
fn corpus(relaxed: bool) -> Vec<Document> {
    let mut base = every_type();
    if relaxed {
        // Relaxed Extended JSON writes a small int64 as a plain number (an int32 on reading).
        base.remove("i64");
    }
    let mut nested = base.clone();
    nested.remove("_id");
    let values: Vec<Bson> = nested.values().cloned().collect();
    vec![
        base,
        doc! { "_id": 2, "nested": nested },
        doc! { "_id": 3, "values": values },
    ]
}

fn bytes_of(docs: &[Document]) -> Vec<Vec<u8>> {
    let mut raw: Vec<(Bson, Vec<u8>)> = docs
        .iter()
        .map(|d| {
            (
                d.get("_id").cloned().unwrap_or(Bson::Null),
                RawDocumentBuf::try_from(d).expect("raw").into_bytes(),
            )
        })
        .collect();
    // _id order as the server sorts: numbers before ObjectIds.
    raw.sort_by_key(|(id, _)| matches!(id, Bson::ObjectId(_)));
    raw.into_iter().map(|(_, b)| b).collect()
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

#[tokio::test]
async fn every_type_round_trips_through_export_and_import() {
    let s = Server::start(BIN, &[]);
    let client = s.client().await;
    let uri = s.uri();
    let dir = tempfile::tempdir().expect("tempdir");
    for (format, relaxed) in [("canonical", false), ("relaxed", true)] {
        let docs = corpus(relaxed);
        let src = format!("src_{format}");
        client
            .database("rt")
            .collection::<Document>(&src)
            .insert_many(docs.clone())
            .await
            .expect("insert");
        assert_eq!(
            raw_docs(&client, "rt", &src).await,
            bytes_of(&docs),
            "the server stores the corpus exactly"
        );
        for (variant, extra) in [
            ("lines", &[][..]),
            ("pretty_lines", &["--pretty"][..]),
            ("array", &["--jsonArray", "--pretty"][..]),
        ] {
            let file = dir.path().join(format!("{format}_{variant}.json"));
            let mut args = vec![
                "export",
                "--uri",
                &uri,
                "--db",
                "rt",
                "--collection",
                &src,
                "--out",
                p(&file),
                "--jsonFormat",
                format,
                "--quiet",
            ];
            args.extend_from_slice(extra);
            let r = tool(&args).await;
            assert_eq!(r.ok, 3);
            assert_eq!(r.summary, "exported 3 record(s)");
            let dst = format!("dst_{format}_{variant}");
            let mut args = vec![
                "import",
                "--uri",
                &uri,
                "--db",
                "rt",
                "--collection",
                &dst,
                "--file",
                p(&file),
                "--quiet",
            ];
            if variant == "array" {
                args.push("--jsonArray");
            }
            let r = tool(&args).await;
            assert_eq!((r.ok, r.failed), (3, 0), "{:?}", r.problems);
            assert_eq!(
                r.summary,
                "3 document(s) imported successfully. 0 document(s) failed to import."
            );
            assert_eq!(
                raw_docs(&client, "rt", &dst).await,
                bytes_of(&docs),
                "{format} {variant}: byte-equal after the round trip"
            );
        }
    }
}

#[tokio::test]
async fn import_reports_bad_lines_and_goes_on_unless_stop_on_error() {
    let s = Server::start(BIN, &[]);
    let client = s.client().await;
    let uri = s.uri();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("people.jsonl");
    std::fs::write(
        &file,
        "{\"_id\":1,\"n\":\"a\"}\n{\"_id\":2}\n\n{\"_id\":3, oops}\n{\"_id\":1,\"dup\":true}\n{\"_id\":{\"$numberInt\":\"x\"}}\n{\"_id\":4}\n",
    )
    .expect("write");
    let r = tool(&[
        "import",
        "--uri",
        &uri,
        "--db",
        "bad",
        "--file",
        p(&file),
        "--quiet",
    ])
    .await;
    assert_eq!((r.ok, r.failed), (3, 3), "{:?}", r.problems);
    assert_eq!(
        r.summary,
        "3 document(s) imported successfully. 3 document(s) failed to import."
    );
    let mut problems = r.problems.clone();
    problems.sort();
    assert_eq!(
        problems[0], "line 4: key must be a string at column 11",
        "malformed JSON on line 4"
    );
    assert!(
        problems[1].starts_with("line 5: ") && problems[1].contains("E11000"),
        "duplicate _id on line 5: {problems:?}"
    );
    assert!(
        problems[2].starts_with("line 6: ") && problems[2].contains("$numberInt"),
        "{problems:?}"
    );
    let coll = client.database("bad").collection::<Document>("people");
    assert_eq!(
        coll.count_documents(doc! {}).await.expect("count"),
        3,
        "collection named after the file"
    );

    let r = tool(&[
        "import",
        "--uri",
        &uri,
        "--db",
        "bad",
        "--collection",
        "stop",
        "--file",
        p(&file),
        "--stopOnError",
        "--quiet",
    ])
    .await;
    assert_eq!((r.ok, r.failed), (2, 1), "{:?}", r.problems);
    assert!(r.problems[0].starts_with("line 4: "), "{:?}", r.problems);
    let stop = client.database("bad").collection::<Document>("stop");
    assert_eq!(
        stop.count_documents(doc! {}).await.expect("count"),
        2,
        "nothing after the bad line"
    );

    // An unbalanced line costs one document: the next line starting with '{' starts afresh.
    // The file is also given as the last argument, with a byte order mark, as mongoimport takes it.
    let uneven = dir.path().join("uneven.json");
    std::fs::write(&uneven, "\u{feff}{\"_id\":1}\n{\"_id\":2,\"a\":[1,2}\n{\"_id\":3,\n  \"b\":{\"c\":1}\n}\n{\"_id\":4}\n").expect("write");
    let r = tool(&[
        "import",
        "--uri",
        &uri,
        "--db",
        "bad",
        "--quiet",
        p(&uneven),
    ])
    .await;
    assert_eq!((r.ok, r.failed), (3, 1), "{:?}", r.problems);
    assert!(r.problems[0].starts_with("line 2: "), "{:?}", r.problems);
    let three = client
        .database("bad")
        .collection::<Document>("uneven")
        .find_one(doc! { "_id": 3 })
        .await
        .expect("find");
    assert_eq!(
        three,
        Some(doc! { "_id": 3, "b": { "c": 1 } }),
        "a document spanning lines"
    );

    // A malformed --jsonArray element is reported on the line it starts on.
    let arr = dir.path().join("arr.json");
    std::fs::write(&arr, "[\n{\"_id\":1},\n{\"_id\":2},\n{\"_id\": }\n]").expect("write");
    let r = tool(&[
        "import",
        "--uri",
        &uri,
        "--db",
        "bad",
        "--file",
        p(&arr),
        "--jsonArray",
        "--quiet",
    ])
    .await;
    assert_eq!((r.ok, r.failed), (2, 1), "{:?}", r.problems);
    assert!(r.problems[0].starts_with("line 4: "), "{:?}", r.problems);
}

#[tokio::test]
async fn csv_and_tsv_import_and_export() {
    let s = Server::start(BIN, &[]);
    let client = s.client().await;
    let uri = s.uri();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("items.csv");
    std::fs::write(
        &file,
        "_id,name,price,addr.city\n1,pen,1.5,Oslo\n2,\"ink, blue\",3,Rome\n3,cap\n4,box,7,Bern\n",
    )
    .expect("write");
    let r = tool(&[
        "import",
        "--uri",
        &uri,
        "--db",
        "csv",
        "--type",
        "csv",
        "--headerline",
        "--file",
        p(&file),
        "--quiet",
    ])
    .await;
    assert_eq!((r.ok, r.failed), (3, 1), "{:?}", r.problems);
    assert_eq!(r.problems, ["line 4: 2 values for 4 fields"]);
    let coll = client.database("csv").collection::<Document>("items");
    let two = coll
        .find_one(doc! { "_id": 2 })
        .await
        .expect("find")
        .expect("doc");
    assert_eq!(
        two,
        doc! { "_id": 2, "name": "ink, blue", "price": 3, "addr": { "city": "Rome" } }
    );

    // Typed columns.
    let typed = dir.path().join("typed.tsv");
    std::fs::write(
        &typed,
        "1\t007\t5\t2020-01-02T03:04:05.678Z\ttrue\n2\t8\tx\t2020-01-02T03:04:05Z\tfalse\n",
    )
    .expect("write");
    let r = tool(&[
        "import",
        "--uri",
        &uri,
        "--db",
        "csv",
        "--collection",
        "typed",
        "--type",
        "tsv",
        "--columnsHaveTypes",
        "--fields",
        "_id.int32(),code.string(),n.int64(),at.date(2006-01-02T15:04:05Z),ok.boolean()",
        "--file",
        p(&typed),
        "--quiet",
    ])
    .await;
    assert_eq!((r.ok, r.failed), (1, 1), "{:?}", r.problems);
    assert!(
        r.problems[0].starts_with("line 2: field \"n\""),
        "{:?}",
        r.problems
    );
    let one = client
        .database("csv")
        .collection::<Document>("typed")
        .find_one(doc! {})
        .await
        .expect("find")
        .expect("doc");
    assert_eq!(one.get_str("code").expect("code"), "007");
    assert_eq!(one.get_i64("n").expect("n"), 5);
    assert_eq!(
        one.get_datetime("at").expect("at").timestamp_millis(),
        1_577_934_245_678
    );

    let out = dir.path().join("out.csv");
    let r = tool(&[
        "export",
        "--uri",
        &uri,
        "--db",
        "csv",
        "--collection",
        "items",
        "--type",
        "csv",
        "--fields",
        "_id,name,addr.city",
        "--sort",
        "{\"_id\":-1}",
        "--out",
        p(&out),
        "--quiet",
    ])
    .await;
    assert_eq!(r.ok, 3);
    assert_eq!(
        std::fs::read_to_string(&out).expect("read"),
        "_id,name,addr.city\n4,box,Bern\n2,\"ink, blue\",Rome\n1,pen,Oslo\n"
    );
}

#[tokio::test]
async fn upsert_merge_delete_modes_and_export_options() {
    let s = Server::start(BIN, &[]);
    let client = s.client().await;
    let uri = s.uri();
    let coll = client.database("m").collection::<Document>("c");
    coll.insert_many(vec![
        doc! { "_id": 1, "k": "a", "v": 1, "keep": true },
        doc! { "_id": 2, "k": "b", "v": 2 },
    ])
    .await
    .expect("insert");
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("in.json");
    let run = |mode: &'static str, text: &'static str, fields: &'static str| {
        let (f, uri) = (f.clone(), uri.clone());
        async move {
            std::fs::write(&f, text).expect("write");
            tool(&[
                "import",
                "--uri",
                &uri,
                "--db",
                "m",
                "--collection",
                "c",
                "--file",
                p(&f),
                "--mode",
                mode,
                "--upsertFields",
                fields,
                "--quiet",
            ])
            .await
        }
    };
    let r = run(
        "upsert",
        "{\"k\":\"a\",\"v\":10}\n{\"k\":\"z\",\"v\":26}\n",
        "k",
    )
    .await;
    assert_eq!((r.ok, r.failed), (2, 0), "{:?}", r.problems);
    let a = coll
        .find_one(doc! { "k": "a" })
        .await
        .expect("find")
        .expect("a");
    assert_eq!(
        (a.get_i32("_id").ok(), a.get_i32("v").ok(), a.get("keep")),
        (Some(1), Some(10), None),
        "replaced"
    );
    let r = run("merge", "{\"_id\":2,\"w\":5}\n", "_id").await;
    assert_eq!((r.ok, r.failed), (1, 0), "{:?}", r.problems);
    assert_eq!(
        coll.find_one(doc! { "_id": 2 })
            .await
            .expect("find")
            .expect("b"),
        doc! { "_id": 2, "k": "b", "v": 2, "w": 5 }
    );
    let r = run("delete", "{\"k\":\"z\"}\n", "k").await;
    assert_eq!(
        r.summary,
        "1 document(s) deleted successfully. 0 document(s) failed to import."
    );
    assert_eq!(coll.count_documents(doc! {}).await.expect("count"), 2);

    coll.insert_many((10..20).map(|i| doc! { "_id": i, "v": i % 3, "x": "y" }))
        .await
        .expect("insert");
    let out = dir.path().join("out.json");
    let r = tool(&[
        "export",
        "--uri",
        &uri,
        "--db",
        "m",
        "--collection",
        "c",
        "--query",
        "{\"_id\":{\"$gte\":10}}",
        "--fields",
        "v",
        "--sort",
        "{\"v\":-1,\"_id\":1}",
        "--skip",
        "1",
        "--limit",
        "3",
        "--out",
        p(&out),
        "--quiet",
    ])
    .await;
    assert_eq!(r.ok, 3);
    assert_eq!(
        std::fs::read_to_string(&out).expect("read"),
        "{\"_id\":14,\"v\":2}\n{\"_id\":17,\"v\":2}\n{\"_id\":10,\"v\":1}\n"
    );
}

async fn indexes(client: &mongodb::Client, db: &str, coll: &str) -> Vec<Document> {
    let mut specs: Vec<Document> = client
        .database(db)
        .run_cursor_command(doc! { "listIndexes": coll })
        .await
        .expect("listIndexes")
        .try_collect()
        .await
        .expect("collect");
    specs.sort_by(|a, b| {
        a.get_str("name")
            .unwrap_or("")
            .cmp(b.get_str("name").unwrap_or(""))
    });
    specs
}

async fn options(client: &mongodb::Client, db: &str, coll: &str) -> Document {
    let specs: Vec<Document> = client
        .database(db)
        .run_cursor_command(doc! { "listCollections": 1, "filter": { "name": coll } })
        .await
        .expect("listCollections")
        .try_collect()
        .await
        .expect("collect");
    specs[0]
        .get_document("options")
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn dump_and_restore_round_trip_with_indexes_and_options() {
    let a = Server::start(BIN, &[]);
    let b = Server::start(BIN, &[]);
    let (ca, cb) = (a.client().await, b.client().await);
    let docs = corpus(false);
    let db = ca.database("shop");
    db.run_command(doc! { "create": "items", "storageEngine": { "wiredTiger": { "configString": "block_compressor=zstd" } } })
        .await
        .expect("create");
    db.collection::<Document>("items")
        .insert_many(docs.clone())
        .await
        .expect("insert");
    db.run_command(doc! { "createIndexes": "items", "indexes": [
        { "key": { "str": 1, "i32": -1 }, "name": "str_1_i32_-1" },
        { "key": { "sku": 1 }, "name": "sku_1", "unique": true, "sparse": true },
    ] })
    .await
    .expect("indexes");
    db.collection::<Document>("other")
        .insert_one(doc! { "_id": 1 })
        .await
        .expect("insert");
    ca.database("skipme")
        .collection::<Document>("x")
        .insert_one(doc! { "_id": 1 })
        .await
        .expect("insert");
    let dir = tempfile::tempdir().expect("tempdir");
    for gzip in [false, true] {
        let out = dir.path().join(if gzip { "gz" } else { "plain" });
        let mut args = vec![
            "dump",
            "--uri",
            a.uri().leak(),
            "--out",
            p(&out),
            "--nsExclude",
            "skipme.*",
            "--quiet",
        ];
        if gzip {
            args.push("--gzip");
        }
        let r = tool(&args).await;
        assert_eq!(r.ok, 4, "3 items + 1 other");
        let ext = if gzip { ".gz" } else { "" };
        assert!(out.join(format!("shop/items.bson{ext}")).is_file());
        assert!(out.join(format!("shop/items.metadata.json{ext}")).is_file());
        assert!(!out.join("skipme").exists(), "--nsExclude");
        if !gzip {
            let meta = std::fs::read_to_string(out.join("shop/items.metadata.json")).expect("meta");
            for key in [
                "\"options\":",
                "\"indexes\":",
                "\"uuid\":\"",
                "\"collectionName\":\"items\"",
                "\"type\":\"collection\"",
            ] {
                assert!(meta.contains(key), "{key} in {meta}");
            }
        }
        let r = tool(&[
            "restore",
            "--uri",
            b.uri().leak(),
            "--drop",
            p(&out),
            "--quiet",
        ])
        .await;
        assert_eq!((r.ok, r.failed), (4, 0), "{:?}", r.problems);
        assert_eq!(
            r.summary,
            "4 document(s) restored successfully. 0 document(s) failed to restore."
        );
        assert_eq!(
            raw_docs(&cb, "shop", "items").await,
            bytes_of(&docs),
            "byte-equal after dump/restore (gzip {gzip})"
        );
        assert_eq!(
            indexes(&cb, "shop", "items").await,
            indexes(&ca, "shop", "items").await,
            "indexes rebuilt"
        );
        assert_eq!(
            options(&cb, "shop", "items").await,
            options(&ca, "shop", "items").await,
            "options restored"
        );
    }
    // --db/--collection/--query dump a subset.
    let out = dir.path().join("subset");
    let r = tool(&[
        "dump",
        "--uri",
        a.uri().leak(),
        "--db",
        "shop",
        "--collection",
        "items",
        "--query",
        "{\"_id\":{\"$lt\":3}}",
        "--out",
        p(&out),
        "--quiet",
    ])
    .await;
    assert_eq!(
        r.ok, 1,
        "only _id 2 is below 3 (the ObjectId sorts after numbers)"
    );
    assert!(!out.join("shop/other.bson").exists());
}

/// The metadata of a mongodump 100.x dump of `shop.items` with one secondary index, written out
/// from the documented layout (canonical Extended JSON, UUID as 32 hex digits).
const FIXTURE_METADATA: &str = r#"{"indexes":[{"v":{"$numberInt":"2"},"key":{"_id":{"$numberInt":"1"}},"name":"_id_"},{"v":{"$numberInt":"2"},"key":{"qty":{"$numberInt":"-1"},"name":{"$numberInt":"1"}},"name":"qty_-1_name_1"}],"uuid":"5c7b6c5d2f0a4b3e9d1c0b0a09080706","collectionName":"items","type":"collection"}"#;

/// A `.bson` file byte by byte: documents back to back, each [int32 length][elements][0x00].
fn fixture_bson() -> Vec<u8> {
    let mut out = Vec::new();
    for (id, name, qty) in [(1i32, "pen", 5i32), (2, "ink", 7)] {
        let mut body = Vec::new();
        body.push(0x10); // int32 "_id"
        body.extend_from_slice(b"_id\0");
        body.extend_from_slice(&id.to_le_bytes());
        body.push(0x02); // string "name"
        body.extend_from_slice(b"name\0");
        body.extend_from_slice(&((name.len() + 1) as i32).to_le_bytes());
        body.extend_from_slice(name.as_bytes());
        body.push(0);
        body.push(0x10); // int32 "qty"
        body.extend_from_slice(b"qty\0");
        body.extend_from_slice(&qty.to_le_bytes());
        body.push(0);
        out.extend_from_slice(&((body.len() + 4) as i32).to_le_bytes());
        out.extend_from_slice(&body);
    }
    out
}

#[tokio::test]
async fn restores_a_hand_built_mongodump_directory() {
    let s = Server::start(BIN, &[]);
    let client = s.client().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let db_dir = dir.path().join("shop");
    std::fs::create_dir_all(&db_dir).expect("mkdir");
    std::fs::write(db_dir.join("items.bson"), fixture_bson()).expect("write");
    std::fs::write(db_dir.join("items.metadata.json"), FIXTURE_METADATA).expect("write");
    let r = tool(&["restore", "--uri", &s.uri(), p(dir.path()), "--quiet"]).await;
    assert_eq!((r.ok, r.failed), (2, 0), "{:?}", r.problems);
    let coll = client.database("shop").collection::<Document>("items");
    assert_eq!(
        coll.find_one(doc! { "_id": 2 })
            .await
            .expect("find")
            .expect("doc"),
        doc! { "_id": 2, "name": "ink", "qty": 7 }
    );
    let idx = indexes(&client, "shop", "items").await;
    assert_eq!(idx.len(), 2);
    assert_eq!(
        idx[1].get_document("key").expect("key"),
        &doc! { "qty": -1, "name": 1 }
    );
    assert_eq!(idx[1].get_str("name").expect("name"), "qty_-1_name_1");
}

#[tokio::test]
async fn restore_reports_damage_with_its_position() {
    let s = Server::start(BIN, &[]);
    let client = s.client().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let db_dir = dir.path().join("dmg");
    std::fs::create_dir_all(&db_dir).expect("mkdir");
    let whole = fixture_bson();
    let first_len = i32::from_le_bytes([whole[0], whole[1], whole[2], whole[3]]) as usize;
    std::fs::write(db_dir.join("cut.bson"), &whole[..whole.len() - 5]).expect("write");
    let odd = FIXTURE_METADATA.replacen('{', "{\n\"shardKey\":{\"a\":1},\n", 1);
    std::fs::write(db_dir.join("odd.metadata.json"), &odd).expect("write");
    std::fs::write(db_dir.join("odd.bson"), &whole).expect("write");
    std::fs::write(
        db_dir.join("broken.metadata.json"),
        "{\"indexes\":[{\"key\":",
    )
    .expect("write");
    std::fs::write(db_dir.join("broken.bson"), &whole).expect("write");
    let r = tool(&["restore", "--uri", &s.uri(), p(dir.path()), "--quiet"]).await;
    let all = r.problems.join("\n");
    // broken: the metadata cannot be parsed, nothing of it is written.
    assert!(
        all.contains("broken.metadata.json: EOF while parsing") && all.contains("line 1"),
        "{all}"
    );
    assert_eq!(
        client
            .database("dmg")
            .collection::<Document>("broken")
            .count_documents(doc! {})
            .await
            .expect("count"),
        0
    );
    // cut: the document before the damage is restored, the damage named by byte offset.
    assert!(
        all.contains(&format!("cut.bson: truncated document at byte {first_len}")),
        "{all}"
    );
    assert_eq!(
        client
            .database("dmg")
            .collection::<Document>("cut")
            .count_documents(doc! {})
            .await
            .expect("count"),
        1
    );
    // odd: an unknown metadata field is a warning with its line and column; the rest restores.
    assert!(
        all.contains("unknown field `shardKey`") && all.contains("line 2 column 10"),
        "{all}"
    );
    assert_eq!(
        client
            .database("dmg")
            .collection::<Document>("odd")
            .count_documents(doc! {})
            .await
            .expect("count"),
        2
    );
    assert_eq!(r.ok, 3, "{all}");
    assert_eq!(
        r.failed, 2,
        "one per collection that could not be read: {all}"
    );
}

#[tokio::test]
async fn archive_dump_and_restore_round_trip() {
    let a = Server::start(BIN, &[]);
    let b = Server::start(BIN, &[]);
    let (ca, cb) = (a.client().await, b.client().await);
    let docs = corpus(false);
    ca.database("arc")
        .collection::<Document>("all")
        .insert_many(docs.clone())
        .await
        .expect("insert");
    ca.database("arc")
        .run_command(doc! { "createIndexes": "all", "indexes": [{ "key": { "i32": 1, "str": -1 }, "name": "i32_1_str_-1" }] })
        .await
        .expect("index");
    ca.database("arc2")
        .collection::<Document>("many")
        .insert_many((0..5000).map(|i| doc! { "_id": i, "pad": "x".repeat(1000) }))
        .await
        .expect("insert");
    let dir = tempfile::tempdir().expect("tempdir");
    for gzip in [false, true] {
        let file = dir.path().join(if gzip {
            "dump.archive.gz"
        } else {
            "dump.archive"
        });
        let archive = format!("--archive={}", p(&file));
        let mut args = vec![
            "dump",
            "--uri",
            a.uri().leak(),
            archive.as_str().to_owned().leak(),
            "--quiet",
        ];
        if gzip {
            args.push("--gzip");
        }
        let r = tool(&args).await;
        assert_eq!(r.ok, 5003);
        let bytes = std::fs::read(&file).expect("read");
        if !gzip {
            assert_eq!(bytes[..4], [0x6d, 0xe2, 0x99, 0x81], "magic number");
        }
        let r = tool(&[
            "restore",
            "--uri",
            b.uri().leak(),
            archive.as_str().to_owned().leak(),
            "--drop",
            "--quiet",
        ])
        .await;
        assert_eq!((r.ok, r.failed), (5003, 0), "{:?}", r.problems);
        assert_eq!(
            raw_docs(&cb, "arc", "all").await,
            bytes_of(&docs),
            "byte-equal through the archive (gzip {gzip})"
        );
        assert_eq!(
            indexes(&cb, "arc", "all").await,
            indexes(&ca, "arc", "all").await
        );
        assert_eq!(
            cb.database("arc2")
                .collection::<Document>("many")
                .count_documents(doc! {})
                .await
                .expect("count"),
            5000
        );
        if !gzip {
            // A cut archive: what precedes the cut is restored, the cut is named by offset.
            let cut = dir.path().join("cut.archive");
            std::fs::write(&cut, &bytes[..bytes.len() - 3000]).expect("write");
            let arg = format!("--archive={}", p(&cut));
            let r = tool(&[
                "restore",
                "--uri",
                b.uri().leak(),
                &arg,
                "--drop",
                "--nsInclude",
                "arc2.*",
                "--quiet",
            ])
            .await;
            assert_eq!(r.failed, 1, "{:?}", r.problems);
            assert!(
                r.problems
                    .iter()
                    .any(|m| m.contains("archive truncated") && m.contains("byte")),
                "{:?}",
                r.problems
            );
            assert!(r.ok > 4000 && r.ok < 5000, "{}", r.ok);
        }
    }
}
