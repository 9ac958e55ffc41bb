//! Proves the engine's basic contract on a real directory: CRUD, scans, unique indexes, DDL,
//! reopen after clean close, and the LOCK file. How: direct calls, results compared by hand.

use std::ops::Bound;
use std::sync::Arc;

use bson::{RawDocumentBuf, doc, rawdoc};
use storage::{
    Direction, Engine, EngineOptions, IndexSpec, StorageError, WriteOp, encode_index_key,
};

fn opts() -> EngineOptions {
    EngineOptions {
        segment_size_bytes: 64 << 10,
        background_compaction: false,
        ..EngineOptions::default()
    }
}

fn raw(d: bson::Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(&d).expect("doc")
}

#[test]
fn crud_scan_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rids;
    {
        let e = Engine::open(dir.path(), opts()).expect("open");
        let c = e
            .create_collection("db", "c", doc! {"capped": false})
            .expect("create");
        assert!(matches!(
            e.create_collection("db", "c", doc! {}),
            Err(StorageError::NamespaceExists(_))
        ));
        let t = c
            .write(
                (0..100)
                    .map(|i| WriteOp::Insert(raw(doc! {"_id": i, "v": i * 2}).into()))
                    .collect(),
            )
            .expect("insert");
        t.wait_durable_blocking().expect("durable");
        rids = t.record_ids.clone();
        assert_eq!(c.count(), 100);
        let d = c.get(rids[5]).expect("get").expect("present");
        assert_eq!(d.get_i32("v").expect("v"), 10);
        c.write(vec![
            WriteOp::Replace(rids[5], raw(doc! {"_id": 5, "v": -1})),
            WriteOp::Delete(rids[6]),
        ])
        .expect("replace+delete")
        .wait_durable_blocking()
        .expect("durable");
        let page = c.scan(Direction::Forward, Some(rids[3]), 3).expect("scan");
        assert_eq!(
            page.iter().map(|p| p.0).collect::<Vec<_>>(),
            vec![rids[4], rids[5], rids[7]]
        );
        let back = c.scan(Direction::Backward, None, 2).expect("scan");
        assert_eq!(back[0].0, rids[99]);
        let id = rawdoc! {"x": 42};
        assert_eq!(
            c.find_by_id(id.get("x").expect("x").expect("x"))
                .expect("find"),
            Some(rids[42])
        );
        e.close().expect("close");
    }
    let e = Engine::open(dir.path(), opts()).expect("reopen");
    let c = e.collection("db", "c").expect("coll");
    assert_eq!(c.count(), 99);
    assert_eq!(
        c.get(rids[5])
            .expect("get")
            .expect("doc")
            .get_i32("v")
            .expect("v"),
        -1
    );
    assert!(c.get(rids[6]).expect("get").is_none());
    assert_eq!(e.collections("db")[0].options, doc! {"capped": false});
    let t = c
        .write(vec![WriteOp::Insert(raw(doc! {"_id": 1000}).into())])
        .expect("insert");
    assert!(t.record_ids[0] > rids[99], "record ids are never reused");
}

#[test]
fn unique_index_is_atomic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(dir.path(), opts()).expect("open");
    let c = e.create_collection("db", "u", doc! {}).expect("create");
    c.write(vec![
        WriteOp::Insert(raw(doc! {"_id": 1, "a": 1}).into()),
        WriteOp::Insert(raw(doc! {"_id": 2, "a": 2}).into()),
    ])
    .expect("insert");
    let spec = IndexSpec {
        name: "a_1".into(),
        key: doc! {"a": 1},
        unique: true,
        ..IndexSpec::default()
    };
    e.create_index("db", "u", spec.clone(), &|_, _| {})
        .expect("index");
    let err = c
        .write(vec![
            WriteOp::Insert(raw(doc! {"_id": 3, "a": 3}).into()),
            WriteOp::Insert(raw(doc! {"_id": 4, "a": 1}).into()),
        ])
        .expect_err("dup");
    match err {
        StorageError::DuplicateKey {
            index, key_value, ..
        } => {
            assert_eq!(index, "a_1");
            assert_eq!(*key_value, doc! {"a": 1});
        }
        other => panic!("unexpected {other}"),
    }
    assert_eq!(c.count(), 2, "nothing of the failed batch applied");
    let k = encode_index_key(&spec.key, &[bson::Bson::Int32(3)]);
    assert!(
        c.index_scan(
            "a_1",
            Bound::Included(&k),
            Bound::Included(&k),
            Direction::Forward,
            None,
            10
        )
        .expect("scan")
        .is_empty()
    );
    let all = c
        .index_scan(
            "a_1",
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Backward,
            None,
            10,
        )
        .expect("scan");
    assert_eq!(all.len(), 2);
    e.close().expect("close");
    let e = Engine::open(dir.path(), opts()).expect("reopen");
    let c = e.collection("db", "u").expect("coll");
    assert_eq!(c.indexes().len(), 2);
    assert!(
        c.write(vec![WriteOp::Insert(raw(doc! {"_id": 9, "a": 2}).into())])
            .is_err()
    );
    e.drop_index("db", "u", "a_1").expect("drop index");
    c.write(vec![WriteOp::Insert(raw(doc! {"_id": 9, "a": 2}).into())])
        .expect("now allowed");
}

#[test]
fn ddl_survives_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let e = Engine::open(dir.path(), opts()).expect("open");
        for n in ["a", "b", "c"] {
            let c = e.create_collection("db", n, doc! {}).expect("create");
            c.write(vec![WriteOp::Insert(raw(doc! {"_id": n}).into())])
                .expect("insert");
        }
        e.create_collection("other", "x", doc! {}).expect("create");
        assert!(e.drop_collection("db", "a").expect("drop"));
        assert!(!e.drop_collection("db", "a").expect("drop again"));
        e.rename_collection("db", "b", "db", "c", true)
            .expect("rename");
        e.drop_database("other").expect("drop db");
        e.close().expect("close");
    }
    let e = Engine::open(dir.path(), opts()).expect("reopen");
    assert_eq!(e.databases(), vec!["db".to_string()]);
    let names: Vec<String> = e.collections("db").into_iter().map(|c| c.name).collect();
    assert_eq!(names, vec!["c".to_string()]);
    let c = e.collection("db", "c").expect("c");
    let docs = c.scan(Direction::Forward, None, 10).expect("scan");
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0].1.get_str("_id").expect("id"), "b");
}

#[test]
fn second_open_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(dir.path(), opts()).expect("open");
    match Engine::open(dir.path(), opts()) {
        Err(StorageError::Locked { dir: d }) => {
            assert!(d.contains(dir.path().to_str().expect("utf8")))
        }
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("second open succeeded"),
    }
    e.close().expect("close");
    Engine::open(dir.path(), opts()).expect("open after close");
}

#[tokio::test]
async fn async_wait_and_group_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = Arc::new(Engine::open(dir.path(), opts()).expect("open"));
    let c = e.create_collection("db", "g", doc! {}).expect("create");
    let mut tasks = Vec::new();
    for i in 0..50 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            let t = c
                .write(vec![WriteOp::Insert(raw(doc! {"_id": i}).into())])
                .expect("write");
            t.wait_durable().await.expect("durable");
        }));
    }
    for t in tasks {
        t.await.expect("join");
    }
    assert_eq!(c.count(), 50);
}

#[test]
fn get_many_answers_like_get_in_the_order_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(dir.path(), opts()).expect("open");
    let c = e.create_collection("db", "m", doc! {}).expect("create");
    // 2 KB documents over 64 KB segments: the records span several segments.
    let pad = "x".repeat(2000);
    let t = c
        .write(
            (0..200)
                .map(|i| WriteOp::Insert(raw(doc! {"_id": i, "pad": &pad}).into()))
                .collect(),
        )
        .expect("insert");
    t.wait_durable_blocking().expect("durable");
    let rids = t.record_ids.clone();
    // A replaced record moves to the log's end; a deleted one is gone.
    c.write(vec![
        WriteOp::Replace(rids[10], raw(doc! {"_id": 10, "v": "moved"})),
        WriteOp::Delete(rids[11]),
    ])
    .expect("replace+delete")
    .wait_durable_blocking()
    .expect("durable");
    let mut asked: Vec<_> = rids.iter().rev().copied().collect();
    asked.extend([rids[10], rids[3], rids[3], 1 << 40]);
    let many = c.get_many(&asked).expect("get_many");
    assert_eq!(many.len(), asked.len());
    for (rid, got) in asked.iter().zip(&many) {
        let one = c.get(*rid).expect("get");
        assert_eq!(
            got.as_ref().map(|d| d.as_bytes()),
            one.as_ref().map(|d| d.as_bytes())
        );
    }
    assert!(many[200 - 1 - 11].is_none(), "deleted");
    assert!(many[asked.len() - 1].is_none(), "never there");
    assert!(c.get_many(&[]).expect("empty").is_empty());
}
