//! Proves collated indexes: unique by the collated key, used only as mongod allows, answers equal to a collection scan, alive after kill -9.
//! How: a real `cairn` via the Rust driver; a seeded corpus (accents, case, digits, Turkish i, ß) in collated, simple and unindexed collections, compared query by query.

use bson::{Bson, Document, doc};
use cairn_e2e::{Server, error_code, explain, winning};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");

/// Every stage name of a plan tree, outermost first.
fn stages(plan: &Document) -> Vec<String> {
    let mut out = vec![plan.get_str("stage").ok().unwrap_or("").to_string()];
    if let Ok(inner) = plan.get_document("inputStage") {
        out.extend(stages(inner));
    }
    out
}

/// A count of explain's `executionStats` (int32 or int64).
fn num(stats: &Document, key: &str) -> i64 {
    match stats.get(key) {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        other => panic!("{key}: {other:?}"),
    }
}

/// The innermost stage of a plan tree.
fn leaf(plan: &Document) -> &Document {
    match plan.get_document("inputStage") {
        Ok(inner) => leaf(inner),
        Err(_) => plan,
    }
}

async fn indexes_of(db: &mongodb::Database, coll: &str) -> Vec<Document> {
    let reply = db.run_command(doc! { "listIndexes": coll }).await.unwrap();
    reply
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .unwrap()
        .iter()
        .filter_map(|d| d.as_document().cloned())
        .collect()
}

async fn create_index(
    db: &mongodb::Database,
    coll: &str,
    spec: Document,
) -> mongodb::error::Result<Document> {
    db.run_command(doc! { "createIndexes": coll, "indexes": [spec] })
        .await
}

async fn ids(db: &mongodb::Database, cmd: Document) -> Vec<Bson> {
    let reply = db.run_command(cmd).await.unwrap();
    let batch = reply
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .unwrap();
    batch
        .iter()
        .filter_map(|d| d.as_document().and_then(|d| d.get("_id").cloned()))
        .collect()
}

#[tokio::test]
async fn unique_at_strength_two_rejects_case_variants() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("cidx_unique");
    create_index(
        &db,
        "u",
        doc! { "key": { "k": 1 }, "name": "k_ci", "unique": true,
        "collation": { "locale": "en", "strength": 2 } },
    )
    .await
    .unwrap();
    let c = db.collection::<Document>("u");
    c.insert_one(doc! { "_id": 1, "k": "ABC" }).await.unwrap();
    let e = c
        .insert_one(doc! { "_id": 2, "k": "abc" })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 11000, "{e}");
    // mongod's shape: the errmsg names the collation and shows the sort key as 0x-hex.
    let msg = cairn_e2e::error_message(&e);
    assert!(
        msg.contains("index: k_ci collation: { locale: \"en\", caseLevel: false")
            && msg.contains("dup key: { k: \"0x"),
        "{msg}"
    );
    // The raw reply carries keyValue as hex, hexEncoded and the collation.
    let reply = db
        .run_command(doc! { "insert": "u", "documents": [{ "_id": 5, "k": "aBc" }] })
        .await
        .unwrap();
    let w = reply.get_array("writeErrors").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    let hex = w.get_document("keyValue").unwrap().get_str("k").unwrap();
    assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()), "{w}");
    assert_eq!(
        w.get_array("hexEncoded").unwrap(),
        &vec![Bson::Boolean(true)]
    );
    assert_eq!(
        w.get_document("collation").unwrap().get_str("locale").ok(),
        Some("en")
    );
    // Accents differ at strength 2: not a duplicate.
    c.insert_one(doc! { "_id": 3, "k": "abç" }).await.unwrap();
    // listIndexes shows the normalised collation.
    let listed = indexes_of(&db, "u").await;
    let k = listed
        .iter()
        .find(|i| i.get_str("name").ok() == Some("k_ci"))
        .unwrap();
    let shown = k.get_document("collation").unwrap();
    assert_eq!(
        shown,
        &doc! { "locale": "en", "caseLevel": false, "caseFirst": "off", "strength": 2,
        "numericOrdering": false, "alternate": "non-ignorable", "maxVariable": "punct",
        "normalization": false, "backwards": false, "version": "57.1" }
    );
    let id = listed
        .iter()
        .find(|i| i.get_str("name").ok() == Some("_id_"))
        .unwrap();
    assert!(!id.contains_key("collation"), "{id}");
    // The same key under another collation is another index; under the same name it is 85.
    create_index(
        &db,
        "u",
        doc! { "key": { "k": 1 }, "name": "k_fr", "collation": { "locale": "fr" } },
    )
    .await
    .unwrap();
    let e = create_index(
        &db,
        "u",
        doc! { "key": { "k": 1 }, "name": "k_ci", "unique": true, "collation": { "locale": "de" } },
    )
    .await
    .unwrap_err();
    assert_eq!(error_code(&e), 85, "{e}");
    let e = create_index(
        &db,
        "u",
        doc! { "key": { "k": 1 }, "name": "k_other", "unique": true,
        "collation": { "locale": "en", "strength": 2 } },
    )
    .await
    .unwrap_err();
    assert_eq!(
        error_code(&e),
        85,
        "same key and collation under another name: {e}"
    );
    let e = create_index(
        &db,
        "u",
        doc! { "key": { "t": "text" }, "name": "t_text", "collation": { "locale": "en" } },
    )
    .await
    .unwrap_err();
    assert_eq!(error_code(&e), 67, "{e}");
}

#[tokio::test]
async fn index_creation_inherits_the_collection_default() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("cidx_default");
    db.run_command(doc! { "create": "d", "collation": { "locale": "fr", "strength": 1 } })
        .await
        .unwrap();
    create_index(&db, "d", doc! { "key": { "k": 1 }, "name": "k_1" })
        .await
        .unwrap();
    create_index(
        &db,
        "d",
        doc! { "key": { "j": 1 }, "name": "j_1", "collation": { "locale": "simple" } },
    )
    .await
    .unwrap();
    // A text index needs the explicit simple collation on such a collection.
    let e = create_index(&db, "d", doc! { "key": { "t": "text" }, "name": "t_text" })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 67, "{e}");
    create_index(
        &db,
        "d",
        doc! { "key": { "t": "text" }, "name": "t_text", "collation": { "locale": "simple" } },
    )
    .await
    .unwrap();
    let listed = indexes_of(&db, "d").await;
    let collation_of = |name: &str| {
        listed
            .iter()
            .find(|i| i.get_str("name").ok() == Some(name))
            .and_then(|i| i.get_document("collation").ok().cloned())
    };
    let k = collation_of("k_1").expect("inherited");
    assert_eq!(
        (k.get_str("locale").ok(), k.get_i32("strength").ok()),
        (Some("fr"), Some(1))
    );
    assert_eq!(
        collation_of("_id_"),
        Some(k.clone()),
        "the _id index has it too"
    );
    assert_eq!(collation_of("j_1"), None);
    let c = db.collection::<Document>("d");
    c.insert_many(vec![
        doc! { "_id": "Élan", "k": "Élan" },
        doc! { "_id": "x", "k": "elan" },
    ])
    .await
    .unwrap();
    // The `_id` index compares by the collation too: "elan" is "Élan" at strength 1.
    let e = c.insert_one(doc! { "_id": "ELAN" }).await.unwrap_err();
    assert_eq!(error_code(&e), 11000, "{e}");
    // The default applies to the query, so the inherited index serves it.
    let e = explain(&db, doc! { "find": "d", "filter": { "k": "ELAN" } }).await;
    let scan = leaf(winning(&e)).clone();
    assert_eq!(scan.get_str("indexName").ok(), Some("k_1"), "{e}");
    assert_eq!(scan.get_document("collation").ok(), Some(&k));
    let found = ids(
        &db,
        doc! { "find": "d", "filter": { "k": "ELAN" }, "sort": { "_id": 1 } },
    )
    .await;
    assert_eq!(
        found,
        vec![Bson::String("Élan".into()), Bson::String("x".into())]
    );
    // IDHACK under the default collation finds the collated `_id`.
    let by_id = ids(&db, doc! { "find": "d", "filter": { "_id": "elan" } }).await;
    assert_eq!(by_id, vec![Bson::String("Élan".into())]);
    let e = explain(&db, doc! { "find": "d", "filter": { "_id": "elan" } }).await;
    assert_eq!(winning(&e).get_str("stage").ok(), Some("IDHACK"), "{e}");
    let simple =
        doc! { "find": "d", "filter": { "_id": "elan" }, "collation": { "locale": "simple" } };
    assert!(ids(&db, simple).await.is_empty());
}

#[tokio::test]
async fn a_collated_index_serves_only_its_collation() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("cidx_plans");
    let c = db.collection::<Document>("p");
    let mut docs: Vec<Document> = (0..60)
        .map(|i| doc! { "_id": i, "k": format!("Word{i}") })
        .collect();
    docs.extend((60..80).map(|i| doc! { "_id": i, "k": i }));
    c.insert_many(docs).await.unwrap();
    create_index(
        &db,
        "p",
        doc! { "key": { "k": 1 }, "name": "k_ci", "collation": { "locale": "en", "strength": 2 } },
    )
    .await
    .unwrap();
    let ci = doc! { "locale": "en", "strength": 2 };
    let plan = |filter: Document, sort: Option<Document>, collation: Option<Document>| {
        let mut cmd = doc! { "find": "p", "filter": filter };
        if let Some(s) = sort {
            cmd.insert("sort", s);
        }
        if let Some(c) = collation {
            cmd.insert("collation", c);
        }
        let db = db.clone();
        async move { explain(&db, cmd).await }
    };
    // Same collation: bounds on strings, the collation in IXSCAN, and the sort.
    let e = plan(doc! { "k": "WORD7" }, None, Some(ci.clone())).await;
    let scan = leaf(winning(&e)).clone();
    assert_eq!(scan.get_str("stage").ok(), Some("IXSCAN"), "{e}");
    assert_eq!(
        scan.get_document("collation")
            .unwrap()
            .get_i32("strength")
            .ok(),
        Some(2)
    );
    let stats = e.get_document("executionStats").unwrap();
    assert_eq!(num(stats, "nReturned"), 1);
    assert_eq!(num(stats, "totalKeysExamined"), 1, "{e}");
    let e = plan(doc! {}, Some(doc! { "k": 1 }), Some(ci.clone())).await;
    assert!(!stages(winning(&e)).contains(&"SORT".to_string()), "{e}");
    assert_eq!(
        leaf(winning(&e)).get_str("stage").ok(),
        Some("IXSCAN"),
        "{e}"
    );
    // Another collation (here the simple one): string bounds and the sort are not available…
    let e = plan(doc! { "k": "Word7" }, None, None).await;
    assert_eq!(
        leaf(winning(&e)).get_str("stage").ok(),
        Some("COLLSCAN"),
        "{e}"
    );
    let e = plan(doc! { "k": { "$in": [61, "Word7"] } }, None, None).await;
    assert_eq!(
        leaf(winning(&e)).get_str("stage").ok(),
        Some("COLLSCAN"),
        "{e}"
    );
    let e = plan(doc! {}, Some(doc! { "k": 1 }), None).await;
    assert!(stages(winning(&e)).contains(&"SORT".to_string()), "{e}");
    // …but bounds on numbers are.
    let e = plan(doc! { "k": { "$gte": 70 } }, None, None).await;
    assert_eq!(
        leaf(winning(&e)).get_str("indexName").ok(),
        Some("k_ci"),
        "{e}"
    );
    let stats = e.get_document("executionStats").unwrap();
    assert_eq!(num(stats, "nReturned"), 10);
    // A projection of the key field is not covered: the key holds sort keys.
    let e = explain(
        &db,
        doc! { "find": "p", "filter": { "k": "word3" }, "projection": { "k": 1, "_id": 0 },
        "collation": ci.clone() },
    )
    .await;
    assert!(stages(winning(&e)).contains(&"FETCH".to_string()), "{e}");
    let got = db
        .run_command(doc! { "find": "p", "filter": { "k": "word3" }, "projection": { "k": 1, "_id": 0 }, "collation": ci })
        .await
        .unwrap();
    let first = got
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()[0]
        .clone();
    assert_eq!(first, Bson::Document(doc! { "k": "Word3" }));
    // count: one exact point is a COUNT_SCAN of the collated index under its collation;
    // anything else reads documents, and the counts stay right.
    c.insert_one(doc! { "_id": 100, "k": "WORD3" })
        .await
        .unwrap();
    let count = |filter: Document, collation: Option<Document>| {
        let mut cmd = doc! { "count": "p", "query": filter };
        if let Some(c) = collation {
            cmd.insert("collation", c);
        }
        cmd
    };
    let ci = doc! { "locale": "en", "strength": 2 };
    let n = |r: Document| match r.get("n") {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        other => panic!("n: {other:?}"),
    };
    let point = count(doc! { "k": "word3" }, Some(ci.clone()));
    assert_eq!(n(db.run_command(point.clone()).await.unwrap()), 2);
    let e = explain(&db, point).await;
    assert!(
        stages(winning(&e)).contains(&"COUNT_SCAN".to_string()),
        "{e}"
    );
    let range = count(
        doc! { "k": { "$gte": "word3", "$lt": "word4" } },
        Some(ci.clone()),
    );
    // Word3, WORD3, and Word30..Word39.
    assert_eq!(n(db.run_command(range.clone()).await.unwrap()), 12);
    let e = explain(&db, range).await;
    assert!(
        !stages(winning(&e)).contains(&"COUNT_SCAN".to_string()),
        "{e}"
    );
    let simple = count(doc! { "k": "word3" }, None);
    assert_eq!(n(db.run_command(simple).await.unwrap()), 0);
    // A hashed collated index: equality under its collation hashes the mapped value.
    create_index(
        &db,
        "p",
        doc! { "key": { "k": "hashed" }, "name": "k_hashed", "collation": { "locale": "en", "strength": 2 } },
    )
    .await
    .unwrap();
    let cmd = doc! { "find": "p", "filter": { "k": "WORD12" }, "hint": "k_hashed",
    "collation": { "locale": "en", "strength": 2 } };
    let e = explain(&db, cmd.clone()).await;
    let stats = e.get_document("executionStats").unwrap();
    assert_eq!(num(stats, "nReturned"), 1, "{e}");
    assert_eq!(
        num(stats, "totalKeysExamined"),
        1,
        "a point, not a full scan: {e}"
    );
    assert_eq!(ids(&db, cmd).await, vec![Bson::Int32(12)]);
}

/// Words from pieces that collations treat specially: case, accents, digits, Turkish dotted
/// and dotless i, German ß.
fn random_word(rng: &mut StdRng) -> String {
    const PIECES: &[&str] = &[
        "a", "A", "á", "Á", "e", "é", "E", "É", "i", "I", "ı", "İ", "ss", "ß", "SS", "o", "ö", "Ö",
        "z", "2", "10", "9", "1", " ", "-",
    ];
    let n = rng.random_range(1..5);
    (0..n)
        .map(|_| PIECES[rng.random_range(0..PIECES.len())])
        .collect()
}

fn corpus(seed: u64, n: i32) -> Vec<Document> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let s = match rng.random_range(0..10) {
                0 => Bson::Int32(rng.random_range(0..20)),
                1 => Bson::Null,
                _ => Bson::String(random_word(&mut rng)),
            };
            doc! { "_id": i, "s": s }
        })
        .collect()
}

async fn run(db: &mongodb::Database, query: Document, coll: &str) -> Vec<Document> {
    let mut cmd = doc! { "find": coll };
    cmd.extend(query);
    cmd.insert("batchSize", 10_000);
    let reply = db.run_command(cmd).await.unwrap();
    reply
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .unwrap()
        .iter()
        .filter_map(|d| d.as_document().cloned())
        .collect()
}

#[tokio::test]
async fn answers_equal_the_collection_scan_over_a_random_corpus() {
    let server = Server::start(BIN, &[]);
    let client = server.client().await;
    let db = client.database("cidx_corpus");
    let seed: u64 = std::env::var("CAIRN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x0C011A7E);
    eprintln!("answers_equal_the_collection_scan_over_a_random_corpus: CAIRN_SEED={seed}");
    let docs = corpus(seed, 600);
    let words: Vec<Bson> = docs.iter().filter_map(|d| d.get("s").cloned()).collect();
    let collations = [
        doc! { "locale": "en", "strength": 2 },
        doc! { "locale": "en", "strength": 1, "numericOrdering": true },
        doc! { "locale": "tr", "strength": 2 },
        doc! { "locale": "de", "strength": 1 },
        doc! { "locale": "fr", "strength": 3, "caseFirst": "upper" },
    ];
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5EED);
    for (n, collation) in collations.iter().enumerate() {
        let (plain, indexed) = (format!("plain{n}"), format!("indexed{n}"));
        // A simple index under the collated queries: bounds on non-strings only.
        let simple = format!("simple{n}");
        for name in [&plain, &indexed, &simple] {
            db.collection::<Document>(name)
                .insert_many(docs.clone())
                .await
                .unwrap();
        }
        create_index(
            &db,
            &indexed,
            doc! { "key": { "s": 1, "_id": 1 }, "name": "s_id", "collation": collation.clone() },
        )
        .await
        .unwrap();
        create_index(&db, &simple, doc! { "key": { "s": 1 }, "name": "s_1" })
            .await
            .unwrap();
        let mut pick = || words[rng.random_range(0..words.len())].clone();
        let mut queries: Vec<Document> = Vec::new();
        for _ in 0..12 {
            queries.push(doc! { "filter": { "s": pick() } });
            queries.push(doc! { "filter": { "s": { "$in": [pick(), pick(), pick()] } } });
            let (a, b) = (pick(), pick());
            queries.push(doc! { "filter": { "s": { "$gt": a.clone(), "$lte": b } } });
            queries.push(doc! { "filter": { "s": { "$lt": a } }, "sort": { "s": -1, "_id": -1 } });
            // An index union, merged in the collated order.
            let (c, d) = (pick(), pick());
            queries.push(doc! {
                "filter": { "$or": [{ "s": c }, { "s": { "$gte": d } }] },
                "sort": { "s": 1, "_id": 1 },
            });
        }
        queries.push(doc! { "filter": {}, "sort": { "s": 1, "_id": 1 } });
        for q in queries {
            let mut q = q;
            q.insert("collation", collation.clone());
            if !q.contains_key("sort") {
                q.insert("sort", doc! { "_id": 1 });
            }
            let want = run(&db, q.clone(), &plain).await;
            let got = run(&db, q.clone(), &indexed).await;
            assert_eq!(got, want, "seed {seed}, collation {collation}, query {q}");
            let apart = run(&db, q.clone(), &simple).await;
            assert_eq!(
                apart, want,
                "simple index: seed {seed}, collation {collation}, query {q}"
            );
        }
        // The index was used: an equality is one IXSCAN with the collation.
        let mut cmd =
            doc! { "find": &indexed, "filter": { "s": pick() }, "collation": collation.clone() };
        cmd.insert("sort", doc! { "s": 1 });
        let e = explain(&db, cmd).await;
        let scan = leaf(winning(&e)).clone();
        assert_eq!(scan.get_str("indexName").ok(), Some("s_id"), "{e}");
        assert!(scan.contains_key("collation"), "{e}");
    }
}

#[tokio::test]
async fn a_collated_index_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start_at(BIN, dir.path(), &[]);
    let ci = doc! { "locale": "de", "strength": 1 };
    let query = doc! { "find": "k", "filter": { "s": { "$in": ["STRASSE", "Müller"] } }, "sort": { "_id": 1 }, "collation": ci.clone() };
    let before = {
        let client = server.client().await;
        let db = client.database("cidx_kill");
        create_index(
            &db,
            "k",
            doc! { "key": { "s": 1 }, "name": "s_u", "unique": true, "collation": ci.clone() },
        )
        .await
        .unwrap();
        let c = db.collection::<Document>("k");
        c.insert_many(vec![
            doc! { "_id": 1, "s": "Straße" },
            doc! { "_id": 2, "s": "Mueller" },
            doc! { "_id": 3, "s": "muller" },
        ])
        .await
        .unwrap();
        ids(&db, query.clone()).await
    };
    assert_eq!(before, vec![Bson::Int32(1), Bson::Int32(3)]);
    server.restart_after_kill();
    let client = server.client().await;
    let db = client.database("cidx_kill");
    assert_eq!(ids(&db, query.clone()).await, before);
    let e = explain(&db, query).await;
    assert_eq!(
        leaf(winning(&e)).get_str("indexName").ok(),
        Some("s_u"),
        "{e}"
    );
    let e = db
        .collection::<Document>("k")
        .insert_one(doc! { "_id": 4, "s": "STRASSE" })
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 11000, "still unique after the restart: {e}");
}

#[tokio::test]
async fn transactions_check_and_read_collated_keys() {
    let server = Server::start_initiated(BIN, &[]).await;
    let client = server.client().await;
    let db = client.database("cidx_txn");
    create_index(
        &db,
        "t",
        doc! { "key": { "k": 1 }, "name": "k_ci", "unique": true,
        "collation": { "locale": "en", "strength": 2 } },
    )
    .await
    .unwrap();
    let c = db.collection::<Document>("t");
    c.insert_one(doc! { "_id": 1, "k": "Alpha" }).await.unwrap();
    let mut s = client.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    c.insert_one(doc! { "_id": 2, "k": "Beta" })
        .session(&mut s)
        .await
        .unwrap();
    // A case variant of a committed key and of the transaction's own key both collide.
    let e = c
        .insert_one(doc! { "_id": 3, "k": "ALPHA" })
        .session(&mut s)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 11000, "{e}");
    let mut s = client.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    c.insert_one(doc! { "_id": 2, "k": "Beta" })
        .session(&mut s)
        .await
        .unwrap();
    let e = c
        .insert_one(doc! { "_id": 4, "k": "beta" })
        .session(&mut s)
        .await;
    let committed = match e {
        Err(e) => {
            assert_eq!(error_code(&e), 11000, "{e}");
            false
        }
        Ok(_) => s.commit_transaction().await.is_ok(),
    };
    assert!(!committed, "beta and Beta cannot both be committed");
    // Reads in a transaction through the collated index see the snapshot's documents.
    let mut s = client.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    c.insert_one(doc! { "_id": 5, "k": "Gamma" })
        .session(&mut s)
        .await
        .unwrap();
    let ci = mongodb::options::Collation::builder()
        .locale("en".to_string())
        .strength(mongodb::options::CollationStrength::Secondary)
        .build();
    let mut cursor = c
        .find(doc! { "k": { "$in": ["ALPHA", "gamma"] } })
        .sort(doc! { "k": 1 })
        .collation(ci)
        .session(&mut s)
        .await
        .unwrap();
    let mut got = Vec::new();
    while let Some(d) = cursor.next(&mut s).await {
        got.push(d.unwrap().get("_id").cloned().unwrap());
    }
    assert_eq!(got, vec![Bson::Int32(1), Bson::Int32(5)]);
    s.commit_transaction().await.unwrap();
    // A collection whose default collation keys `_id`: case variants inside one transaction
    // collide at the statement.
    db.run_command(doc! { "create": "ids", "collation": { "locale": "en", "strength": 2 } })
        .await
        .unwrap();
    let ids = db.collection::<Document>("ids");
    let mut s = client.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    ids.insert_one(doc! { "_id": "Key" })
        .session(&mut s)
        .await
        .unwrap();
    let e = ids
        .insert_one(doc! { "_id": "KEY" })
        .session(&mut s)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), 11000, "{e}");
}
