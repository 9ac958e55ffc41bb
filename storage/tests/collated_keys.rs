//! Proves that a collated index keeps its strings mapped in every path that makes keys: inserts,
//! updates, deletes, a build over existing data, the `_id` index of a collection with a default
//! collation, and a reopen (checkpointed and replayed). How: direct engine calls with a stand-in
//! collation compiler (ASCII case folding, so "ABC" and "abc" are one key).

mod common;

use std::ops::Bound;
use std::sync::Arc;

use bson::{Document, doc};
use common::raw;
use storage::keys::KeyCollation;
use storage::{Collection, Direction, Engine, EngineOptions, IndexSpec, StorageError, WriteOp};

/// Case folding stands in for the server's ICU collation at strength 2.
fn opts() -> EngineOptions {
    let compiler: storage::CollationCompiler =
        Arc::new(|spec: &Document| match spec.get_str("locale") {
            Ok("fold") => Ok(KeyCollation(Arc::new(|s: &str| s.to_ascii_lowercase()))),
            _ => Err("unknown stand-in collation".to_string()),
        });
    EngineOptions {
        collation_compiler: Some(compiler),
        background_compaction: false,
        ..EngineOptions::default()
    }
}

fn folded(name: &str, key: Document, unique: bool) -> IndexSpec {
    IndexSpec {
        name: name.into(),
        key,
        unique,
        extra: doc! { "collation": { "locale": "fold" } },
        ..IndexSpec::default()
    }
}

/// The RecordIds whose key in `index` equals the key of `value`, through the public scan.
fn lookup(c: &Collection, index: &str, value: &str) -> usize {
    let key = storage::keycode::encode_key(
        &[bson::RawBsonRef::String(&value.to_ascii_lowercase())],
        &[false],
    );
    c.index_scan(
        index,
        Bound::Included(&key),
        Bound::Included(&key),
        Direction::Forward,
        None,
        100,
    )
    .expect("scan")
    .len()
}

fn entries(c: &Collection, index: &str) -> usize {
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
fn collated_keys_in_every_write_path_and_after_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(dir.path(), opts()).expect("open");
    let c = e.create_collection("db", "c", doc! {}).expect("create");
    c.write(vec![
        WriteOp::Insert(raw(&doc! {"_id": 1, "s": "Apple"}).into()),
        WriteOp::Insert(raw(&doc! {"_id": 2, "s": "APPLE", "n": 5}).into()),
    ])
    .expect("insert");
    // A build over existing data maps the keys.
    e.create_index("db", "c", folded("s_1", doc! {"s": 1}, false), &|_, _| {})
        .expect("build");
    assert_eq!(lookup(&c, "s_1", "apple"), 2);
    // Inserts and updates map; unindexing an update finds the old mapped key.
    c.write(vec![WriteOp::Insert(
        raw(&doc! {"_id": 3, "s": "aPPle"}).into(),
    )])
    .expect("insert");
    let rid = c
        .find_by_id(bson::RawBsonRef::Int32(1))
        .expect("find")
        .expect("present");
    c.write(vec![WriteOp::Update(
        rid,
        raw(&doc! {"_id": 1, "s": "Pear"}),
    )])
    .expect("update");
    assert_eq!(lookup(&c, "s_1", "apple"), 2);
    assert_eq!(lookup(&c, "s_1", "PEAR"), 1);
    c.write(vec![WriteOp::Delete(rid)]).expect("delete");
    assert_eq!(lookup(&c, "s_1", "pear"), 0);
    assert_eq!(entries(&c, "s_1"), 2, "no stale key left by the delete");
    // A unique collated index refuses case variants.
    e.create_index(
        "db",
        "c",
        folded("n_s", doc! {"n": 1, "s": 1}, true),
        &|_, _| {},
    )
    .expect("unique");
    let dup = c
        .write(vec![WriteOp::Insert(
            raw(&doc! {"_id": 9, "s": "apple", "n": 5}).into(),
        )])
        .expect_err("case variant collides");
    match dup {
        StorageError::DuplicateKey { key_value, .. } => {
            assert_eq!(key_value.get_i32("n").ok(), Some(5));
            // Strings of a collated key are shown as the hex of the stored sort key.
            let hex: String = "apple".bytes().map(|b| format!("{:02x}", b - 1)).collect();
            assert_eq!(key_value.get_str("s").ok(), Some(hex.as_str()));
        }
        other => panic!("expected a duplicate key, got {other}"),
    }
    // Reopen after a checkpoint, then once more with the tail replayed.
    e.checkpoint().expect("checkpoint");
    c.write(vec![WriteOp::Insert(
        raw(&doc! {"_id": 4, "s": "BANANA"}).into(),
    )])
    .expect("insert");
    drop(c);
    drop(e);
    let e = Engine::open(dir.path(), opts()).expect("reopen");
    let c = e.collection("db", "c").expect("collection");
    assert_eq!(lookup(&c, "s_1", "apple"), 2);
    assert_eq!(lookup(&c, "s_1", "banana"), 1);
    c.write(vec![WriteOp::Insert(
        raw(&doc! {"_id": 10, "s": "Apple", "n": 5}).into(),
    )])
    .expect_err("still unique after the reopen");
}

#[test]
fn default_collation_reaches_the_id_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(dir.path(), opts()).expect("open");
    let c = e
        .create_collection("db", "d", doc! {"collation": {"locale": "fold"}})
        .expect("create");
    c.write(vec![WriteOp::Insert(raw(&doc! {"_id": "Key"}).into())])
        .expect("insert");
    let dup = c.write(vec![WriteOp::Insert(raw(&doc! {"_id": "KEY"}).into())]);
    assert!(matches!(dup, Err(StorageError::DuplicateKey { .. })));
    // Point look-ups by `_id` map the value the same way.
    assert!(
        c.find_by_id(bson::RawBsonRef::String("key"))
            .expect("find")
            .is_some()
    );
    drop(c);
    drop(e);
    let e = Engine::open(dir.path(), opts()).expect("reopen");
    let c = e.collection("db", "d").expect("collection");
    let id = c.indexes().into_iter().find(|i| i.spec.name == "_id_");
    assert_eq!(
        id.and_then(|i| i.spec.collation().cloned()),
        Some(doc! {"locale": "fold"})
    );
    assert!(
        c.find_by_id(bson::RawBsonRef::String("KEY"))
            .expect("find")
            .is_some()
    );
}

#[test]
fn a_collated_index_needs_a_compiler() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = Engine::open(dir.path(), EngineOptions::default()).expect("open");
    e.create_collection("db", "c", doc! {}).expect("create");
    let got = e.create_index("db", "c", folded("s_1", doc! {"s": 1}, false), &|_, _| {});
    assert!(matches!(got, Err(StorageError::InvalidIndex(_))));
}
