//! Proves the engine's options and index flavours: periodic journal mode (writes return before
//! the sync, a waited ticket forces one), partial indexes through the server's predicate,
//! sparse and multikey indexes, and key-extraction errors. How: direct calls on a temp directory.

mod common;

use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{Bson, RawDocument, doc};
use common::raw;
use storage::{Direction, Engine, EngineOptions, IndexSpec, Predicate, StorageError, WriteOp};

fn entries(c: &storage::Collection, index: &str) -> usize {
    c.index_scan(
        index,
        Bound::Unbounded,
        Bound::Unbounded,
        Direction::Forward,
        None,
        1000,
    )
    .expect("scan")
    .len()
}

#[test]
fn periodic_mode_acks_before_sync_and_j_waits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = EngineOptions {
        journal_commit_interval_ms: Some(60_000),
        ..EngineOptions::default()
    };
    let e = Engine::open(dir.path(), opts).expect("open");
    let c = e.create_collection("db", "p", doc! {}).expect("create");
    let t = c
        .write(vec![WriteOp::Insert(raw(&doc! {"_id": 1}).into())])
        .expect("write");
    assert!(!t.is_durable(), "periodic mode does not sync per write");
    let start = Instant::now();
    t.wait_durable_blocking().expect("j: true waits");
    assert!(t.is_durable());
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "a waiter forces the sync"
    );
}

#[test]
fn partial_sparse_and_multikey_indexes() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The server compiles filters; this stand-in understands {field: {$gt: n}} only.
    let compiler: storage::FilterCompiler = Arc::new(|filter: &bson::Document| -> Predicate {
        let (field, cond) = filter
            .iter()
            .next()
            .map(|(k, v)| (k.clone(), v.clone()))
            .expect("filter");
        let min = cond
            .as_document()
            .and_then(|d| d.get_i32("$gt").ok())
            .unwrap_or(0);
        Box::new(move |d: &RawDocument| d.get_i32(&field).map(|v| v > min).unwrap_or(false))
    });
    let opts = EngineOptions {
        partial_filter_compiler: Some(compiler),
        ..EngineOptions::default()
    };
    let e = Engine::open(dir.path(), opts.clone()).expect("open");
    let c = e.create_collection("db", "i", doc! {}).expect("create");
    let docs = [
        doc! {"_id": 1, "q": 5, "tags": ["a", "b"]},
        doc! {"_id": 2, "q": 50},
        doc! {"_id": 3},
    ];
    c.write(
        docs.iter()
            .map(|d| WriteOp::Insert(raw(d).into()))
            .collect(),
    )
    .expect("insert");
    let partial = IndexSpec {
        name: "q_partial".into(),
        key: doc! {"q": 1},
        unique: true,
        partial_filter: Some(doc! {"q": {"$gt": 10}}),
        ..IndexSpec::default()
    };
    e.create_index("db", "i", partial, &|_, _| {})
        .expect("partial");
    let sparse = IndexSpec {
        name: "q_sparse".into(),
        key: doc! {"q": -1},
        sparse: true,
        ..IndexSpec::default()
    };
    e.create_index("db", "i", sparse, &|_, _| {})
        .expect("sparse");
    let tags = IndexSpec {
        name: "tags_1".into(),
        key: doc! {"tags": 1},
        ..IndexSpec::default()
    };
    e.create_index("db", "i", tags, &|_, _| {})
        .expect("multikey");
    assert_eq!(entries(&c, "q_partial"), 1);
    assert_eq!(entries(&c, "q_sparse"), 2);
    assert_eq!(
        entries(&c, "tags_1"),
        4,
        "a, b, and null for the two docs without tags"
    );
    // Outside the partial filter, duplicates are fine; inside, they are not.
    c.write(vec![WriteOp::Insert(raw(&doc! {"_id": 4, "q": 5}).into())])
        .expect("outside filter");
    let err = c
        .write(vec![WriteOp::Insert(raw(&doc! {"_id": 5, "q": 50}).into())])
        .expect_err("dup");
    assert!(matches!(err, StorageError::DuplicateKey { ref index, .. } if index == "q_partial"));
    let flags: Vec<(String, bool)> = c
        .indexes()
        .into_iter()
        .map(|i| (i.spec.name, i.multikey))
        .collect();
    assert!(flags.contains(&("tags_1".to_string(), true)));
    assert!(flags.contains(&("q_sparse".to_string(), false)));
    // Compound index over two arrays: mongod's error 171.
    let both = IndexSpec {
        name: "ab".into(),
        key: doc! {"a": 1, "b": 1},
        ..IndexSpec::default()
    };
    e.create_index("db", "i", both, &|_, _| {})
        .expect("compound");
    match c.write(vec![WriteOp::Insert(
        raw(&doc! {"_id": 6, "a": [1], "b": [2]}).into(),
    )]) {
        Err(StorageError::Key(k)) => assert_eq!(k.code(), 171),
        other => panic!("expected parallel arrays, got {other:?}"),
    }
    // Index bounds use the same encoding as entries.
    let k = storage::encode_index_key(&doc! {"q": -1}, &[Bson::Int32(50)]);
    let hit = c
        .index_scan(
            "q_sparse",
            Bound::Included(&k),
            Bound::Included(&k),
            Direction::Forward,
            None,
            10,
        )
        .expect("scan");
    assert_eq!(hit.len(), 1);
    e.close().expect("close");
    drop(c);
    drop(e);
    let e = Engine::open(dir.path(), opts).expect("reopen");
    let c = e.collection("db", "i").expect("coll");
    assert_eq!(
        entries(&c, "q_partial"),
        1,
        "partial filter applies after restart too"
    );
    assert!(
        c.indexes()
            .iter()
            .any(|i| i.spec.name == "tags_1" && i.multikey)
    );
}
